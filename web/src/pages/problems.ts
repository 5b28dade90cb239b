// Where the server's problems go in the editor's document. Pure (a CodeMirror Text), so
// that the line mapping is tested without a DOM (problems.test.ts).
import type { Text } from "@codemirror/state";
import type { Problem } from "../api";

// From the problem's column to the end of its line (1-based line and column, as the
// server answers); the whole line when the column is past its end; the first line for a
// problem without one, the last for a line past the end.
export function problemRange(doc: Text, p: Problem): { from: number; to: number } {
  const n = Math.min(Math.max(1, p.line || 1), doc.lines);
  const line = doc.line(n);
  let from = line.from + Math.max(0, (p.column || 1) - 1);
  if (from >= line.to) from = line.from;
  return { from, to: Math.max(from, line.to) };
}
