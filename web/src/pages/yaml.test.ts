import { describe, expect, it } from "vitest";
import { definitionOf, jobToYaml, minimalChange, readBlockMap, removeBlock, scalar, setBlockValue, toYaml } from "./yaml";
import { realJob } from "../job/testdata";
import type { Job } from "../api";

describe("scalar", () => {
  it("leaves ordinary words and sentences plain", () => {
    expect(scalar("hello job")).toBe("hello job");
    expect(scalar("ubuntu:22.04")).toBe("ubuntu:22.04");
    expect(scalar("a/b.c-d_e")).toBe("a/b.c-d_e");
  });
  it("quotes what YAML would read as another type or syntax", () => {
    for (const s of ["true", "No", "null", "~", "42", "-1.5", "1e3", "0x1F", ".inf", ""]) {
      expect(scalar(s)).toBe(JSON.stringify(s));
    }
    for (const s of ["{{ tasks.hello }}", "- item", "key: value", "a #comment", "*alias",
                     "&anchor", "!tag", "|", ">", "'q'", "\"q\"", "%x", "@x", "`x", " lead", "trail ",
                     "ends:", "[1]", "tab\there"]) {
      expect(scalar(s)).toBe(JSON.stringify(s));
    }
  });
});

describe("toYaml", () => {
  it("writes maps, lists of maps and lists of scalars with two-space indents", () => {
    expect(toYaml({ name: "x", tags: ["a", "b"], tasks: [{ name: "t", env: { A: "1" } }], empty: [], none: {} }))
      .toBe("name: x\ntags:\n  - a\n  - b\ntasks:\n  - name: t\n    env:\n      A: \"1\"\nempty: []\nnone: {}\n");
  });
  it("writes a multi-line run as a literal block scalar keeping its final newline exactly", () => {
    expect(toYaml({ tasks: [{ run: "echo a\necho b\n" }] }))
      .toBe("tasks:\n  - run: |\n      echo a\n      echo b\n");
    expect(toYaml({ run: "echo a\necho b" })).toBe("run: |-\n  echo a\n  echo b\n");
    expect(toYaml({ run: "a\n\nb\n\n" })).toBe("run: |+\n  a\n\n  b\n\n");
  });
  it("adds an indentation indicator when a block starts with a space, and quotes trailing blanks", () => {
    expect(toYaml({ run: "  indented\nnext" })).toBe("run: |2-\n    indented\n  next\n");
    expect(toYaml({ run: "a \nb" })).toBe('run: "a \\nb"\n');
  });
  it("writes numbers, booleans and null as themselves", () => {
    expect(toYaml({ retry: { limit: 2 }, detached: true, x: null })).toBe("retry:\n  limit: 2\ndetached: true\nx: null\n");
  });
});

describe("jobToYaml", () => {
  const job = {
    id: "j1", name: "inputs and env", description: "greets", state: "COMPLETED",
    createdAt: "2026-12-03T11:30:20.637Z", position: 3, progress: 100, taskCount: 2, result: "hello",
    tags: ["demo"], inputs: { who: "world" }, output: "{{ tasks.greeting }}",
    secrets: { token: "[REDACTED]" }, wait: { timeout: "1m" },
    context: { inputs: {} }, execution: [],
    schedule: { id: "s1", cron: "* * * * *" },
    tasks: [{ env: { WHO: "{{ inputs.who }}" }, id: "t1", name: "greet",
              run: "echo -n \"hello\" > $TORK_OUTPUT\necho done\n",
              state: "COMPLETED", var: "greeting", parallel: undefined }],
    deleteAt: "2026-12-04T11:51:59.045Z",
  } as unknown as Job;
  it("keeps the definition in a person's order (tasks too) and drops what the server set", () => {
    expect(jobToYaml(job)).toBe(
      "# This job's secrets were not copied: the server never shows their values. Add them here.\n" +
      "# `wait` was left out: a submission from the browser does not block.\n" +
      "name: inputs and env\ndescription: greets\ntags:\n  - demo\ninputs:\n  who: world\n" +
      "output: \"{{ tasks.greeting }}\"\ntasks:\n  - name: greet\n    var: greeting\n" +
      "    env:\n      WHO: \"{{ inputs.who }}\"\n    run: |\n      echo -n \"hello\" > $TORK_OUTPUT\n      echo done\n");
  });
  it("keeps a scheduled job's schedule block when asked", () => {
    const s = { name: "s", state: "ACTIVE", cron: "0 9 * * *", tasks: [{ name: "t", run: "true" }],
                schedule: { cron: "0 9 * * *", timezone: "Europe/Paris", overlap: "skip" } };
    expect(jobToYaml(s as unknown as Job, { keepSchedule: true }))
      .toBe("name: s\nschedule:\n  cron: 0 9 * * *\n  timezone: Europe/Paris\n  overlap: skip\ntasks:\n  - name: t\n    run: \"true\"\n");
  });
});

describe("readBlockMap and setBlockValue", () => {
  const doc = "name: x\ninputs:\n  who: world\n  \"n\": \"42\"  \n  # a comment\n  greeting: hi # trailing\ntasks:\n  - name: a\n    run: echo\n";
  it("reads a top-level map's entries with their lines", () => {
    const m = readBlockMap(doc, "inputs");
    expect(m.line).toBe(1);
    expect(m.editable).toBe(true);
    expect(m.entries).toEqual([
      { key: "who", value: "world", line: 2 },
      { key: "n", value: "42", line: 3 },
      { key: "greeting", value: "hi", line: 5 },
    ]);
  });
  it("replaces an entry's value on its own line, quoting when needed", () => {
    const out = setBlockValue(doc, "inputs", "who", "a: b");
    expect(out.split("\n")[2]).toBe('  who: "a: b"');
    expect(readBlockMap(out, "inputs").entries[0].value).toBe("a: b");
  });
  it("adds a missing entry, and a missing block before tasks", () => {
    expect(setBlockValue(doc, "inputs", "new", "v").split("\n")[6]).toBe("  new: v");
    expect(setBlockValue("name: x\ntasks:\n  - name: a\n", "schedule", "cron", "* * * * *"))
      .toBe("name: x\nschedule:\n  cron: \"* * * * *\"\ntasks:\n  - name: a\n");
  });
  it("skips a nested entry's lines and adds new entries after them", () => {
    const sched = "name: s\nschedule:\n  cron: 0 9 * * *\n  catchUp:\n    window: 5m\ntasks:\n  - name: a\n";
    const m = readBlockMap(sched, "schedule");
    expect(m.editable).toBe(true);
    expect(m.end).toBe(4);
    expect(m.entries).toEqual([{ key: "cron", value: "0 9 * * *", line: 2 },
                               { key: "catchUp", value: "", line: 3, nested: true }]);
    expect(setBlockValue(sched, "schedule", "timezone", "UTC"))
      .toBe("name: s\nschedule:\n  cron: 0 9 * * *\n  catchUp:\n    window: 5m\n  timezone: UTC\ntasks:\n  - name: a\n");
  });
  it("says a flow-style map is not editable line by line", () => {
    expect(readBlockMap("inputs: {a: b}\n", "inputs").editable).toBe(false);
  });
});

describe("removeBlock and minimalChange", () => {
  it("removes a top-level block and keeps the rest", () => {
    const doc = "name: x\nschedule:\n  cron: \"* * * * *\"\n  # note\n  timezone: UTC\n\ntasks:\n  - name: a\n";
    expect(removeBlock(doc, "schedule")).toBe("name: x\n\ntasks:\n  - name: a\n");
    expect(removeBlock(doc, "inputs")).toBe(doc);
  });
  it("finds the one replacement between two texts", () => {
    expect(minimalChange("who: world\n", "who: moon\n")).toEqual({ from: 5, to: 10, insert: "moon" });
    expect(minimalChange("ab", "ab")).toBeNull();
    expect(minimalChange("a", "abc")).toEqual({ from: 1, to: 1, insert: "bc" });
  });
});

describe("definitionOf", () => {
  it("keeps what the user wrote of a real job and drops the runtime fields", () => {
    const d = definitionOf(realJob("retry"));
    expect(Object.keys(d)).toEqual(["name", "tasks"]);
    const task = (d.tasks as Record<string, unknown>[])[0];
    for (const runtime of ["id", "jobId", "state", "createdAt", "nodeId", "progress", "redelivered"]) {
      expect(task).not.toHaveProperty(runtime);
    }
    expect(task).toHaveProperty("retry");
  });
});
