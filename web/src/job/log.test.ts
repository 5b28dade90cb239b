import { describe, expect, it } from "vitest";
import { findMatches, highlight, LogParts, pageBefore, toLines } from "./log";

// As GET /tasks/{id}/log answers: newest part first.
const page1 = [
  { number: 4, contents: "\x1b[31mred 4\x1b[0m plain\n\x1b[31mred 5\x1b[0m plain\n" },
  { number: 3, contents: "\x1b[31mred 3\x1b[0m plain\n" },
];
const page2 = [
  { number: 2, contents: "\x1b[31mred 2\x1b[0m plain\n" },
  { number: 1, contents: "\x1b[31mred 1\x1b[0m plain\n" },
];

describe("LogParts", () => {
  it("reassembles pages answered newest first into the log's order", () => {
    const log = new LogParts();
    log.add(page1);
    expect(log.hasOlder()).toBe(true);
    log.add(page2);
    expect(log.hasOlder()).toBe(false);
    expect(log.lines().map((l) => l.text)).toEqual(["red 1 plain", "red 2 plain", "red 3 plain", "red 4 plain", "red 5 plain"]);
  });

  it("ignores a part it already holds (a page overlapping live events)", () => {
    const log = new LogParts();
    log.add([{ number: 5, contents: "five\n" }]);
    expect(log.add([{ number: 5, contents: "five\n" }, { number: 4, contents: "four\n" }])).toBe(true);
    expect(log.add([{ number: 4, contents: "four\n" }])).toBe(false);
    expect(log.text()).toBe("four\nfive\n");
    expect([log.oldest(), log.newest(), log.size]).toEqual([4, 5, 2]);
  });

  it("joins a line split across parts", () => {
    const log = new LogParts();
    log.add([{ number: 2, contents: "world\n" }, { number: 1, contents: "hello " }]);
    expect(log.lines().map((l) => l.text)).toEqual(["hello world"]);
  });
});

describe("pageBefore", () => {
  it("finds the page that holds the part before the oldest held", () => {
    expect(pageBefore(3, 4, 2)).toBe(2);   // parts 4,3 | 2,1
    expect(pageBefore(101, 250, 100)).toBe(2); // part 100 has rank 150
    expect(pageBefore(151, 250, 100)).toBe(2); // part 150 has rank 100, page 2's first
    expect(pageBefore(152, 250, 100)).toBe(1); // part 151 has rank 99, page 1's last
  });
});

describe("toLines", () => {
  it("carries a colour over a line end", () => {
    const lines = toLines("\x1b[32mgreen\nstill\x1b[0m\nplain\n");
    expect(lines.map((l) => l.segments[0].style)).toEqual([{ fg: "c2" }, { fg: "c2" }, {}]);
  });
});

describe("search", () => {
  const lines = toLines("Error: one\nfine\nerror two ERROR\n");
  it("finds every occurrence, ignoring case", () => {
    expect(findMatches(lines, "error")).toEqual([
      { line: 0, start: 0, end: 5 }, { line: 2, start: 0, end: 5 }, { line: 2, start: 10, end: 15 }]);
    expect(findMatches(lines, "")).toEqual([]);
  });

  it("cuts coloured segments at a match so the view can mark it", () => {
    const [line] = toLines("ab\x1b[31mcdef\x1b[0mgh");
    const m = findMatches([line], "bcd");
    expect(highlight(line, 0, m, 0)).toEqual([
      { text: "a", style: {} }, { text: "b", style: {}, match: 0 },
      { text: "cd", style: { fg: "c1" }, match: 0 }, { text: "ef", style: { fg: "c1" } }, { text: "gh", style: {} }]);
  });
});
