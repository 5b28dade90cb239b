import { describe, expect, it } from "vitest";
import type { JobEvent, TaskEvent } from "../events";
import { applyEvents } from "./live";
import { realJob } from "./testdata";

describe("applyEvents", () => {
  const now = "2026-12-03T12:00:00.000Z";

  it("moves a row's state and progress, stamping the time it started or ended", () => {
    const job = realJob("parallel");
    const row = job.execution[0];
    job.execution[0] = { ...row, state: "SCHEDULED", startedAt: undefined, completedAt: undefined };
    const e1: TaskEvent = { type: "task", jobId: job.id, taskId: row.id, state: "RUNNING", progress: 10 };
    const a = applyEvents(job, [e1], now);
    expect(a.unknown).toBe(false);
    expect(a.job.execution[0]).toMatchObject({ state: "RUNNING", progress: 10, startedAt: now });
    expect(a.job.execution[1]).toBe(job.execution[1]);
    expect(job.execution[0].state).toBe("SCHEDULED"); // the job held is not changed
    const b = applyEvents(a.job, [{ ...e1, state: "COMPLETED", progress: 100 }], "2026-12-03T12:00:01.000Z");
    expect(b.job.execution[0]).toMatchObject({ state: "COMPLETED", startedAt: now, completedAt: "2026-12-03T12:00:01.000Z" });
  });

  it("starts a row seen to end without being seen to start when it ends", () => {
    const job = realJob("parallel");
    const row = job.execution[0];
    job.execution[0] = { ...row, state: "SCHEDULED", startedAt: undefined, completedAt: undefined };
    const a = applyEvents(job, [{ type: "task", jobId: job.id, taskId: row.id, state: "COMPLETED" }], now);
    expect(a.job.execution[0]).toMatchObject({ startedAt: now, completedAt: now });
  });

  it("stamps the end of a job an event says ended", () => {
    const job = { ...realJob("parallel"), state: "RUNNING" as const, completedAt: undefined };
    const a = applyEvents(job, [{ type: "job", jobId: job.id, state: "COMPLETED" }], now);
    expect(a.job.completedAt).toBe(now);
  });

  it("keeps the last of several events for one row", () => {
    const job = realJob("parallel");
    const id = job.execution[0].id;
    const events: TaskEvent[] = ["RUNNING", "FAILED"].map((state) => ({ type: "task", jobId: job.id, taskId: id, state }));
    expect(applyEvents(job, events, now).job.execution[0].state).toBe("FAILED");
  });

  it("reports a row it does not hold, so that the page reads the job again", () => {
    const job = realJob("parallel");
    const a = applyEvents(job, [{ type: "task", jobId: job.id, taskId: "new-row", state: "PENDING" }], now);
    expect(a.unknown).toBe(true);
    expect(a.job.execution.length).toBe(job.execution.length);
  });

  it("takes the job's state, position and progress from a job event, and ignores other jobs", () => {
    const job = realJob("parallel");
    const e: JobEvent = { type: "job", jobId: job.id, state: "FAILED", position: 2, progress: 50, taskCount: 3 };
    const other: JobEvent = { ...e, jobId: "another", state: "RUNNING" };
    const a = applyEvents(job, [e, other], now);
    expect(a.job).toMatchObject({ state: "FAILED", position: 2, progress: 50 });
    expect(applyEvents(job, [other], now).job).toBe(job);
  });
});
