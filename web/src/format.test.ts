import { describe, expect, it } from "vitest";
import { failureRate, formatBytes, formatDuration, relativeTime, runtime } from "./format";

describe("formatDuration", () => {
  it("shows milliseconds, tenths of seconds, then minutes, hours and days", () => {
    expect(formatDuration(850)).toBe("850 ms");
    expect(formatDuration(4200)).toBe("4.2 s");
    expect(formatDuration(42_000)).toBe("42 s");
    expect(formatDuration(185_000)).toBe("3m 05s");
    expect(formatDuration(2 * 3600_000 + 7 * 60_000)).toBe("2h 07m");
    expect(formatDuration(3 * 86400_000 + 4 * 3600_000)).toBe("3d 04h");
  });
  it("reads negative or unknown durations as a dash", () => {
    expect(formatDuration(-1)).toBe("—");
    expect(formatDuration(NaN)).toBe("—");
  });
});

describe("runtime", () => {
  const start = "2026-12-03T10:00:00.000Z";
  const t0 = Date.parse(start);
  it("measures a finished job from its start to its end", () => {
    expect(runtime({ state: "COMPLETED", startedAt: start, completedAt: "2026-12-03T10:00:05.500Z" }, t0 + 99_000)).toBe(5500);
    expect(runtime({ state: "FAILED", startedAt: start, failedAt: "2026-12-03T10:01:00.000Z" }, t0)).toBe(60_000);
  });
  it("runs on to now while the job is running", () => {
    expect(runtime({ state: "RUNNING", startedAt: start }, t0 + 12_000)).toBe(12_000);
  });
  it("has none before the start or for an ended job without an end time", () => {
    expect(runtime({ state: "PENDING" }, t0)).toBeUndefined();
    expect(runtime({ state: "CANCELLED", startedAt: start }, t0 + 5000)).toBeUndefined();
  });
});

describe("relativeTime", () => {
  const now = Date.parse("2026-12-03T12:00:00Z");
  it("says how long ago or how soon", () => {
    expect(relativeTime("2026-12-03T11:59:55Z", now)).toBe("just now");
    expect(relativeTime("2026-12-03T11:55:00Z", now)).toBe("5 min ago");
    expect(relativeTime("2026-12-03T15:00:00Z", now)).toBe("in 3 h");
    expect(relativeTime(undefined, now)).toBe("—");
  });
});

describe("failureRate", () => {
  it("divides the failed jobs of the last hour by the ended ones", () => {
    expect(failureRate(1, 4)).toEqual({ text: "25%", ratio: 0.25 });
    expect(failureRate(1, 200)).toEqual({ text: "0.5%", ratio: 0.005 });
  });
  it("is 0% when no job ended and unknown when the server does not say", () => {
    expect(failureRate(0, 0)).toEqual({ text: "0%", ratio: 0 });
    expect(failureRate(undefined, 3)).toEqual({ text: "—" });
  });
});

describe("formatBytes", () => {
  it("uses binary units", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(119455744)).toBe("114 MiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
  });
});
