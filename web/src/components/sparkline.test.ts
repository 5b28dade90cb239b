import { describe, expect, it } from "vitest";
import { SampleStore, sparklinePath } from "./sparkline";

describe("sparklinePath", () => {
  it("spreads values over the width with the largest at the top and 0 at the bottom", () => {
    expect(sparklinePath([0, 5, 10], 100, 22)).toBe("M0,21 L50,11 L100,1");
  });
  it("scales to a given maximum and clamps values above it", () => {
    expect(sparklinePath([50, 200], 10, 12, { max: 100, pad: 1 })).toBe("M0,6 L10,1");
  });
  it("keeps an all-zero series on the bottom line", () => {
    expect(sparklinePath([0, 0], 10, 12)).toBe("M0,11 L10,11");
  });
  it("draws one sample as a flat line and nothing for none", () => {
    expect(sparklinePath([3], 40, 12, { max: 6, pad: 0 })).toBe("M0,6 L40,6");
    expect(sparklinePath([], 40, 12)).toBe("");
  });
});

describe("SampleStore", () => {
  it("keeps only the last samples of each series", () => {
    const s = new SampleStore(3);
    for (let i = 0; i < 5; i++) s.add("q", { at: i, value: i * 10 });
    s.add("other", { at: 0, value: 1 });
    expect(s.values("q")).toEqual([20, 30, 40]);
    expect(s.values("other")).toEqual([1]);
    expect(s.values("none")).toEqual([]);
  });
});
