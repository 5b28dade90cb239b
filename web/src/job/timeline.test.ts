import { describe, expect, it } from "vitest";
import type { TaskRow } from "../api";
import { barOf, barX, buildTimeline, duration, naturalKey, ticks, visibleRange } from "./timeline";
import { realJob } from "./testdata";

const T = (iso: string) => Date.parse(iso);

describe("buildTimeline", () => {
  it("puts retries as separate, marked bars in one row", () => {
    const job = realJob("retry");
    const tl = buildTimeline(job.execution, Date.now());
    expect(tl.rows.length).toBe(1);
    expect(tl.rows[0].bars.map((b) => [b.attempt, b.retry])).toEqual([[1, false], [2, true], [3, true]]);
    const [a, b] = tl.rows[0].bars;
    expect(a.end).toBe(T(job.execution[0].failedAt!));
    expect(b.start).toBeGreaterThan(a.end);
  });

  it("orders rows as the tree: a composite followed by its children by start time, then the next task", () => {
    const rows = realJob("parallel").execution;
    const tl = buildTimeline(rows, Date.now());
    const kids = rows.filter((r) => r.parentId).sort((a, b) => T(a.startedAt!) - T(b.startedAt!)).map((r) => r.name);
    expect(tl.rows.map((r) => [r.label, r.depth])).toEqual([
      ["before", 0], ["fan out", 0], ...kids.map((k) => [k, 1]), ["after", 0]]);
  });

  it("spans from the earliest start to the latest end", () => {
    const rows = realJob("parallel").execution;
    const tl = buildTimeline(rows, Date.now());
    expect(tl.t0).toBe(Math.min(...rows.map((r) => T(r.scheduledAt ?? r.startedAt!))));
    expect(tl.t1).toBe(Math.max(...rows.map((r) => T(r.completedAt!))));
  });

  it("ends a running attempt's bar at now", () => {
    const row = { ...realJob("parallel").execution[0], state: "RUNNING", completedAt: undefined } as TaskRow;
    const now = T(row.startedAt!) + 5000;
    const bar = barOf(row, now);
    expect(bar.end).toBe(now);
    expect(bar.active).toBe(true);
    expect(bar.queued).toBe(T(row.scheduledAt!));
  });

  it("draws a row not yet started from its creation, zero long", () => {
    const row = { id: "x", jobId: "j", position: 1, state: "PENDING", createdAt: "2026-01-01T00:00:00Z",
                  progress: 0, redelivered: 0 } as TaskRow;
    const bar = barOf(row, T("2026-01-01T00:00:10Z"));
    expect(bar.start).toBe(T("2026-01-01T00:00:10Z") - 10000);
    expect(bar.end).toBe(T("2026-01-01T00:00:10Z"));
  });

  it("orders children that start together by name in natural order, case ignored", () => {
    const base = realJob("each").execution[0];
    const names = ["item 10", "Item 9", "item 2", "b", "A", "item 1"];
    const parent = { ...base, id: "p", name: "fan out", parentId: undefined } as TaskRow;
    const rows = names.map((name, i) => ({ ...base, id: `c${i}`, parentId: "p", name, startedAt: undefined,
                                           scheduledAt: undefined, createdAt: "2026-01-01T00:00:00Z" }) as TaskRow);
    expect(buildTimeline([parent, ...rows], Date.now()).rows.map((r) => r.label))
      .toEqual(["fan out", "A", "b", "item 1", "item 2", "Item 9", "item 10"]);
    expect(naturalKey("item 2") < naturalKey("item 10")).toBe(true);
  });

  it("builds 10,000 rows quickly", () => {
    const base = realJob("each").execution[0];
    const rows: TaskRow[] = [];
    for (let i = 0; i < 10000; i++) rows.push({ ...base, id: `c${i}`, name: `item ${i}` });
    const t = performance.now();
    const tl = buildTimeline(rows, Date.now());
    expect(performance.now() - t).toBeLessThan(1000);
    expect(tl.rows.length).toBe(10000);
  });
});

describe("scale", () => {
  const scale = { t0: 1000, t1: 11000, width: 500 };
  it("maps times to x and width", () => {
    expect(barX(scale, 1000, 3000)).toEqual({ x: 0, w: 100 });
    expect(barX(scale, 6000, 11000)).toEqual({ x: 250, w: 250 });
  });
  it("keeps a very short bar visible", () => {
    expect(barX(scale, 5000, 5001).w).toBe(2);
  });
});

describe("ticks", () => {
  it("chooses a round step that keeps labels apart", () => {
    const t = ticks({ t0: 0, t1: 10_000, width: 500 }, 80);
    expect(t.step).toBe(2000);
    expect(t.ticks.map((x) => x.label)).toEqual(["0s", "2s", "4s", "6s", "8s", "10s"]);
    expect(t.ticks[1].x).toBe(100);
  });
  it("uses minutes for long spans and milliseconds for short ones", () => {
    expect(ticks({ t0: 0, t1: 3_600_000, width: 800 }).step).toBe(600_000);
    expect(ticks({ t0: 0, t1: 300, width: 800 }).step).toBe(50);
  });
});

describe("duration", () => {
  it("formats short and long durations", () => {
    expect(duration(0)).toBe("0s");
    expect(duration(250)).toBe("250ms");
    expect(duration(1500)).toBe("1.5s");
    expect(duration(42_000)).toBe("42s");
    expect(duration(150_000)).toBe("2m 30s");
    expect(duration(3_900_000)).toBe("1h 05m");
    expect(duration(2 * 86400e3 + 3 * 3600e3)).toBe("2d 3h");
  });
});

describe("visibleRange", () => {
  it("renders only the rows in sight plus overscan", () => {
    expect(visibleRange(0, 440, 22, 10000, 5)).toEqual({ first: 0, last: 25 });
    expect(visibleRange(22 * 5000, 440, 22, 10000, 5)).toEqual({ first: 4995, last: 5025 });
    expect(visibleRange(22 * 9990, 440, 22, 10000, 5)).toEqual({ first: 9985, last: 10000 });
  });
});
