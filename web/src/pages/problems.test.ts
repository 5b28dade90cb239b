import { describe, expect, it } from "vitest";
import { Text } from "@codemirror/state";
import { problemRange } from "./problems";

const doc = Text.of(["name: x", "tasks:", "  - name: a", "    retry: 3", ""]);
const p = (line: number, column: number) => ({ line, column, path: "", message: "" });

describe("problemRange", () => {
  it("marks from the problem's column to the end of its 1-based line", () => {
    const r = problemRange(doc, p(4, 12));
    expect(doc.sliceString(r.from, r.to)).toBe("3");
    expect(doc.lineAt(r.from).number).toBe(4);
  });
  it("marks the whole line when the column is past its end or missing", () => {
    const r = problemRange(doc, p(2, 40));
    expect(doc.sliceString(r.from, r.to)).toBe("tasks:");
    expect(doc.sliceString(...Object.values(problemRange(doc, p(3, 0))) as [number, number])).toBe("  - name: a");
  });
  it("puts a problem without a line on the first line, and one past the end on the last", () => {
    expect(doc.lineAt(problemRange(doc, p(0, 0)).from).number).toBe(1);
    const last = problemRange(doc, p(99, 1));
    expect(doc.lineAt(last.from).number).toBe(5);
    expect(last.from).toBe(last.to);
  });
});
