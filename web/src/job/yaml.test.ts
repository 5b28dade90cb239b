import { describe, expect, it } from "vitest";
import { definitionOf, toYaml } from "./yaml";
import { realJob } from "./testdata";

describe("definitionOf", () => {
  it("keeps what the user wrote and drops the runtime fields", () => {
    const d = definitionOf(realJob("retry"));
    expect(Object.keys(d).sort()).toEqual(["name", "tasks"]);
  });
});

describe("toYaml", () => {
  it("writes maps, lists of maps, block strings and quoted scalars", () => {
    expect(toYaml({
      inputs: { count: "5", flag: "true", msg: "a: b" },
      name: "retry job",
      tags: [],
      tasks: [{ name: "flaky", retry: { limit: 2 }, run: "echo hi\nexit 1\n" }],
    })).toBe(
`name: retry job
tags: []
inputs:
  count: "5"
  flag: "true"
  msg: "a: b"
tasks:
  - name: flaky
    run: |
      echo hi
      exit 1
    retry:
      limit: 2
`);
  });

  it("writes templates quoted and nested lists indented", () => {
    expect(toYaml({ each: { list: "{{ sequence(1, 5) }}" }, cmd: ["sh", "-c"], m: [[1, 2]] })).toBe(
`cmd:
  - sh
  - "-c"
m:
  - - 1
    - 2
each:
  list: "{{ sequence(1, 5) }}"
`);
  });

  it("marks a block without a final newline with |-", () => {
    expect(toYaml({ run: "a\nb" })).toBe("run: |-\n  a\n  b\n");
  });
});
