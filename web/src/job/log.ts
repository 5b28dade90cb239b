// A task's log as the page holds it: parts from `GET /tasks/{id}/log` (newest first,
// paged) and from `log` events, merged by part number into their order, then split into
// lines with their ANSI styles; and search over the lines' text.
import type { LogPart } from "../api";
import { parseAnsi, type Segment } from "./ansi";

export interface LogLine { segments: Segment[]; text: string }

export class LogParts {
  private parts = new Map<number, string>();
  private sorted: number[] | null = [];

  // Adds parts (any order, duplicates ignored); returns whether anything was new.
  add(parts: { number: number; contents: string }[]): boolean {
    let added = false;
    for (const p of parts) {
      if (!this.parts.has(p.number)) { this.parts.set(p.number, p.contents); added = true; }
    }
    if (added) this.sorted = null;
    return added;
  }

  get size() { return this.parts.size; }
  numbers(): number[] {
    if (!this.sorted) this.sorted = [...this.parts.keys()].sort((a, b) => a - b);
    return this.sorted;
  }
  oldest(): number | undefined { return this.numbers()[0]; }
  newest(): number | undefined { const n = this.numbers(); return n[n.length - 1]; }
  // Parts older than the oldest held exist (numbers start at 1).
  hasOlder(): boolean { const o = this.oldest(); return o !== undefined && o > 1; }
  // The parts held, in order.
  text(): string { return this.numbers().map((n) => this.parts.get(n)!).join(""); }

  lines(): LogLine[] { return toLines(this.text()); }
}

// The page of `GET /tasks/{id}/log?size=` holding the part just older than `oldest`,
// given `total` parts (numbered 1..total, newest first in pages).
export function pageBefore(oldest: number, total: number, size: number): number {
  const rank = total - (oldest - 1); // 0-based rank from the newest of part oldest-1
  return Math.floor(rank / size) + 1;
}

// Splits a log's text into lines, each with its styled segments; the style carries over
// line ends, as in a terminal. A trailing newline makes no empty last line.
export function toLines(text: string): LogLine[] {
  const raw = text.split("\n");
  if (raw.length > 1 && raw[raw.length - 1] === "") raw.pop();
  let state = {};
  return raw.map((l) => {
    const parsed = parseAnsi(l, state);
    state = parsed.state;
    return { segments: parsed.segments, text: parsed.segments.map((s) => s.text).join("") };
  });
}

export interface Match { line: number; start: number; end: number }

// Every case-insensitive occurrence of `query` in the lines' text.
export function findMatches(lines: { text: string }[], query: string, limit = 10000): Match[] {
  const out: Match[] = [];
  if (!query) return out;
  const q = query.toLowerCase();
  for (let i = 0; i < lines.length && out.length < limit; i++) {
    const t = lines[i].text.toLowerCase();
    for (let j = t.indexOf(q); j >= 0 && out.length < limit; j = t.indexOf(q, j + q.length)) {
      out.push({ line: i, start: j, end: j + q.length });
    }
  }
  return out;
}

// Cuts a line's segments at the matches in it, so the view can mark them: returns pieces
// with their style and, for a match, its index in `matches`.
export function highlight(line: LogLine, lineNo: number, matches: Match[], first: number):
    { text: string; style: Segment["style"]; match?: number }[] {
  const inLine: { start: number; end: number; index: number }[] = [];
  for (let k = first; k < matches.length && matches[k].line <= lineNo; k++) {
    if (matches[k].line === lineNo) inLine.push({ start: matches[k].start, end: matches[k].end, index: k });
  }
  if (!inLine.length) return line.segments.map((s) => ({ text: s.text, style: s.style }));
  const out: { text: string; style: Segment["style"]; match?: number }[] = [];
  let pos = 0;
  for (const seg of line.segments) {
    const segStart = pos, segEnd = pos + seg.text.length;
    let cut = segStart;
    for (const m of inLine) {
      const a = Math.max(m.start, segStart), b = Math.min(m.end, segEnd);
      if (a >= b) continue;
      if (a > cut) out.push({ text: seg.text.slice(cut - segStart, a - segStart), style: seg.style });
      out.push({ text: seg.text.slice(a - segStart, b - segStart), style: seg.style, match: m.index });
      cut = b;
    }
    if (cut < segEnd) out.push({ text: seg.text.slice(cut - segStart), style: seg.style });
    pos = segEnd;
  }
  return out;
}

export function partsFromPage(items: LogPart[]): { number: number; contents: string }[] {
  return items.map((p) => ({ number: p.number, contents: p.contents }));
}
