// What the task panel shows of a task, derived from the job's rows once per job update
// (not on every tick of the clock): the slot's attempts, the attempt picked, its parent,
// and, for a parallel or an each, its children (the last attempt of each), failed and
// running first, with counts per state.
import type { TaskRow } from "../api";
import { attemptsOf, groupAttempts } from "./graph";

const collator = new Intl.Collator(undefined, { numeric: true });
const ORDER: Record<string, number> = { FAILED: 0, RUNNING: 1, COMPLETED: 3 };

export interface TaskDetails {
  attempts: TaskRow[];
  row?: TaskRow;
  parent?: TaskRow;
  kids: TaskRow[];
  counts: Record<string, number>;
}

// Why an attempt failed, in words (the row's `reason`, docs/job-format.md "Retry").
export function reasonText(row: TaskRow): string {
  switch (row.reason) {
    case "exit": return row.exitCode !== undefined ? `exit code ${row.exitCode}` : "a non-zero exit";
    case "timeout": return "its timeout";
    case "oom": return "its memory limit";
    case "lost": return "its worker was lost";
    case "error": return "an error: it could not run";
    default: return "";
  }
}

// What a wait waits for, in words; with its due time once it started (started + for,
// until, started + timeout), as the engine keeps it.
export function waitText(row: TaskRow): string {
  const w = row.wait;
  if (!w) return "";
  const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
  const started = row.startedAt ? Date.parse(row.startedAt) : undefined;
  if (w.for) {
    const ms = durationMs(w.for);
    return started !== undefined && ms !== undefined ? `for ${w.for}, due ${at(started + ms)}` : `for ${w.for}`;
  }
  if (w.until) return `until ${w.until}`;
  const timeout = w.timeout ? durationMs(w.timeout) : undefined;
  const due = started !== undefined && timeout !== undefined ? `, failing at ${at(started + timeout)}` : "";
  return `for the signal "${w.signal}"${w.timeout ? ` (timeout ${w.timeout}${due})` : ""}`;
}

// A duration as the engine writes it ("1h2m3s", "500ms") in milliseconds.
export function durationMs(text: string): number | undefined {
  const unit: Record<string, number> = { h: 3600000, m: 60000, s: 1000, ms: 1, us: 0.001, ns: 0.000001 };
  let total = 0;
  let rest = text;
  while (rest.length) {
    const m = /^(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)/.exec(rest);
    if (!m) return undefined;
    total += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  return text.length ? total : undefined;
}

export function taskDetails(rows: TaskRow[], taskId: string, attempt?: number): TaskDetails {
  const attempts = attemptsOf(rows, taskId);
  const row = (attempt && attempts[attempt - 1]) || attempts.find((r) => r.id === taskId) || attempts[attempts.length - 1];
  if (!row) return { attempts, kids: [], counts: {} };
  const parent = row.parentId ? rows.find((r) => r.id === row.parentId) : undefined;
  const composite = !!(row.parallel || row.each || row.subjob);
  const children = composite ? rows.filter((r) => r.parentId === row.id) : [];
  const kids = groupAttempts(children).map((g) => g[g.length - 1])
    .sort((a, b) => (ORDER[a.state] ?? 2) - (ORDER[b.state] ?? 2) || collator.compare(a.name ?? "", b.name ?? ""));
  const counts: Record<string, number> = {};
  for (const k of kids) counts[k.state] = (counts[k.state] ?? 0) + 1;
  return { attempts, row, parent, kids, counts };
}
