// Applies the live events of a job to the job the page holds, so that states, progress and
// counts move at once without reading the whole job again (a 10,000-task job is megabytes
// and can take the server seconds). Task events carry no timestamps: a row that starts or
// ends gets the event's arrival time, until the next read of the job brings the stored one.
// Events for rows the page has not seen (new children, retries) are reported, so the page
// reads the job again.
import type { Job, JobState, TaskRow, TaskState } from "../api";
import type { JobEvent, TaskEvent } from "../events";

export function applyEvents(job: Job, events: (JobEvent | TaskEvent)[], now: string): { job: Job; unknown: boolean } {
  let unknown = false;
  const tasks = new Map<string, TaskEvent>();
  let last: JobEvent | undefined;
  for (const e of events) {
    if (e.jobId !== job.id) continue;
    if (e.type === "job") last = e; else tasks.set(e.taskId, e);
  }
  let execution = job.execution;
  if (tasks.size) {
    const index = new Map<string, number>();
    execution.forEach((r, i) => { if (tasks.has(r.id)) index.set(r.id, i); });
    execution = execution.slice();
    for (const [id, e] of tasks) {
      const i = index.get(id);
      if (i === undefined) { unknown = true; continue; }
      execution[i] = patchRow(execution[i], e, now);
    }
  }
  let out: Job = execution === job.execution ? job : { ...job, execution };
  if (last) {
    out = { ...out, state: last.state as JobState,
            position: last.position ?? out.position, progress: last.progress ?? out.progress,
            taskCount: last.taskCount ?? out.taskCount };
    if (last.state === "RUNNING" && !out.startedAt) out.startedAt = now;
    if ((last.state === "COMPLETED" || last.state === "CANCELLED") && !out.completedAt) out.completedAt = now;
    if (last.state === "FAILED" && !out.failedAt) out.failedAt = now;
  }
  return { job: out, unknown };
}

function patchRow(r: TaskRow, e: TaskEvent, now: string): TaskRow {
  const state = e.state as TaskState;
  const row: TaskRow = { ...r, state, progress: e.progress ?? r.progress, nodeId: e.nodeId ?? r.nodeId };
  if (state === "SCHEDULED" && !row.scheduledAt) row.scheduledAt = now;
  const ended = state === "COMPLETED" || state === "FAILED" || state === "CANCELLED";
  // A row seen to end without being seen to start is drawn as ending then, not as running
  // since it was scheduled.
  if ((state === "RUNNING" || ended) && !row.startedAt) row.startedAt = now;
  if ((state === "COMPLETED" || state === "CANCELLED") && !row.completedAt) row.completedAt = now;
  if (state === "FAILED" && !row.failedAt) row.failedAt = now;
  return row;
}
