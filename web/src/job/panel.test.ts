import { describe, expect, it } from "vitest";
import type { TaskRow } from "../api";
import { durationMs, reasonText, taskDetails, waitText } from "./panel";
import { realJob } from "./testdata";

describe("taskDetails", () => {
  it("picks an attempt by number and knows every attempt of the slot", () => {
    const rows = realJob("retry").execution;
    const d = taskDetails(rows, rows[2].id, 1);
    expect(d.attempts.map((r) => r.id)).toEqual(rows.map((r) => r.id));
    expect(d.row?.id).toBe(rows[0].id);
    expect(taskDetails(rows, rows[1].id).row?.id).toBe(rows[1].id);
  });

  it("lists an each's children, failed first then by name, with counts, and a child's parent", () => {
    const rows = realJob("each").execution;
    const each = rows.find((r) => r.each && r.position === 1)!;
    rows.find((r) => r.name === "item 2")!.state = "FAILED";
    const d = taskDetails(rows, each.id);
    expect(d.kids.map((r) => r.name)).toEqual(["item 2", "item 0", "item 1", "item 3"]);
    expect(d.counts).toEqual({ FAILED: 1, COMPLETED: 3 });
    expect(taskDetails(rows, d.kids[1].id).parent?.id).toBe(each.id);
  });

  it("finds nothing for a task not in the job", () => {
    expect(taskDetails(realJob("each").execution, "nope")).toEqual({ attempts: [], kids: [], counts: {} });
  });
});

describe("reasonText", () => {
  it("says why an attempt failed, with its exit code", () => {
    const row = (r: Partial<TaskRow>) => ({ id: "t", jobId: "j", position: 1, state: "FAILED", createdAt: "",
                                            progress: 0, redelivered: 0, ...r }) as TaskRow;
    expect(reasonText(row({ reason: "exit", exitCode: 75 }))).toBe("exit code 75");
    expect(reasonText(row({ reason: "timeout" }))).toBe("its timeout");
    expect(reasonText(row({ reason: "oom" }))).toBe("its memory limit");
    expect(reasonText(row({ reason: "lost" }))).toBe("its worker was lost");
    expect(reasonText(row({}))).toBe("");
  });
});

describe("waitText", () => {
  const row = (wait: TaskRow["wait"], startedAt?: string) =>
    ({ id: "t", jobId: "j", position: 1, state: "RUNNING", createdAt: "", progress: 0, redelivered: 0, wait, startedAt }) as TaskRow;
  it("says what a wait waits for, with its due time once started", () => {
    expect(waitText(row({ for: "1m30s" }, "2026-12-08T00:00:00Z"))).toBe("for 1m30s, due 2026-12-08T00:01:30Z");
    expect(waitText(row({ for: "5s" }))).toBe("for 5s");
    expect(waitText(row({ until: "2027-01-01T00:00:00Z" }))).toBe("until 2027-01-01T00:00:00Z");
    expect(waitText(row({ signal: "approve", timeout: "1h" }, "2026-12-08T00:00:00Z")))
      .toBe('for the signal "approve" (timeout 1h, failing at 2026-12-08T01:00:00Z)');
    expect(waitText(row({ signal: "go" }))).toBe('for the signal "go"');
  });
  it("reads the engine's durations", () => {
    expect(durationMs("1h2m3s")).toBe(3723000);
    expect(durationMs("500ms")).toBe(500);
    expect(durationMs("soon")).toBeUndefined();
  });
});
