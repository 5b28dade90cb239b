import { describe, expect, it } from "vitest";
import { color256, parseAnsi } from "./ansi";

describe("parseAnsi", () => {
  it("colours text between a foreground code and a reset", () => {
    const { segments } = parseAnsi("\x1b[31mred\x1b[0m plain");
    expect(segments).toEqual([{ text: "red", style: { fg: "c1" } }, { text: " plain", style: {} }]);
  });

  it("reads bright, background and bold codes", () => {
    const { segments } = parseAnsi("\x1b[1;92;44mx\x1b[22my");
    expect(segments[0]).toEqual({ text: "x", style: { bold: true, fg: "c10", bg: "c4" } });
    expect(segments[1]).toEqual({ text: "y", style: { fg: "c10", bg: "c4" } });
  });

  it("reads 256-colour and true-colour codes", () => {
    expect(parseAnsi("\x1b[38;5;208mo").segments[0].style).toEqual({ fg: "#ff8700" });
    expect(parseAnsi("\x1b[38;5;3mo").segments[0].style).toEqual({ fg: "c3" });
    expect(parseAnsi("\x1b[48;5;244mo").segments[0].style).toEqual({ bg: "#808080" });
    expect(parseAnsi("\x1b[38;2;1;2;255mo").segments[0].style).toEqual({ fg: "#0102ff" });
  });

  it("treats an empty SGR as a reset and 39/49 as default colours", () => {
    expect(parseAnsi("\x1b[31;41ma\x1b[mb").segments[1].style).toEqual({});
    expect(parseAnsi("\x1b[31;41ma\x1b[39mb").segments[1].style).toEqual({ bg: "c1" });
  });

  it("strips other escape sequences and control characters", () => {
    const { segments } = parseAnsi("a\x1b[2Kb\x1b[1;1Hc\x1b]0;title\x07d\x1b(Be\x08f\tg");
    expect(segments.map((s) => s.text).join("")).toBe("abcdef\tg");
  });

  it("carries the style from one chunk to the next", () => {
    const first = parseAnsi("\x1b[31mred");
    const second = parseAnsi(" still red\x1b[0m", first.state);
    expect(second.segments[0]).toEqual({ text: " still red", style: { fg: "c1" } });
  });

  it("keeps markup as plain text", () => {
    expect(parseAnsi("<b>not bold</b>").segments).toEqual([{ text: "<b>not bold</b>", style: {} }]);
  });
});

describe("color256", () => {
  it("maps the cube and the greys", () => {
    expect(color256(16)).toBe("#000000");
    expect(color256(231)).toBe("#ffffff");
    expect(color256(196)).toBe("#ff0000");
    expect(color256(232)).toBe("#080808");
  });
});
