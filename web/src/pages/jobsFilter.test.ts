import { describe, expect, it } from "vitest";
import { canCancel, canPause, canRestart, filterParams, parseFilter, toggleChip } from "./jobsFilter";

describe("jobs filter and the URL", () => {
  it("reads states, search and page from the URL, ignoring unknown states", () => {
    expect(parseFilter({ state: "failed,RUNNING,bogus", q: "tag:x", page: "3" }))
      .toEqual({ states: ["RUNNING", "FAILED"], q: "tag:x", page: 3 });
    expect(parseFilter({})).toEqual({ states: [], q: "", page: 1 });
    expect(parseFilter({ page: "-2" }).page).toBe(1);
  });
  it("writes only what is set, so All is the bare list", () => {
    expect(filterParams({ states: [], q: "", page: 1 })).toEqual({ state: undefined, q: undefined, page: undefined });
    expect(filterParams({ states: ["RUNNING", "FAILED"], q: "tag:x", page: 2 }))
      .toEqual({ state: "RUNNING,FAILED", q: "tag:x", page: "2" });
  });
  it("toggles chips in a fixed order, All clears them, and either returns to page 1", () => {
    let f = parseFilter({ page: "4" });
    f = toggleChip(f, "FAILED");
    expect(f).toEqual({ states: ["FAILED"], q: "", page: 1 });
    f = toggleChip(f, "RUNNING");
    expect(filterParams(f).state).toBe("RUNNING,FAILED");
    f = toggleChip(f, "FAILED");
    expect(f.states).toEqual(["RUNNING"]);
    expect(toggleChip(f, null).states).toEqual([]);
  });
  it("offers cancel to active jobs and restart to failed or cancelled ones", () => {
    expect(["PENDING", "SCHEDULED", "RUNNING", "PAUSED"].every(canCancel)).toBe(true);
    expect(["SCHEDULED", "RUNNING"].every(canPause)).toBe(true);
    expect(["PENDING", "PAUSED", "COMPLETED"].some(canPause)).toBe(false);
    expect(canCancel("COMPLETED")).toBe(false);
    expect(canRestart("FAILED") && canRestart("CANCELLED")).toBe(true);
    expect(canRestart("RUNNING")).toBe(false);
  });
});
