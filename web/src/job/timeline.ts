// The timeline (Gantt) of a job: one row per task slot, one bar per attempt (retries are
// further bars in the same row), a time axis with ticks. Pure: the view draws what this
// computes and renders only the rows in sight.
import type { TaskRow } from "../api";
import { attemptNumber, groupAttempts } from "./graph";
import { ACTIVE_TASK_STATES } from "../states";

export interface Bar {
  row: TaskRow;
  attempt: number;       // 1-based
  retry: boolean;        // a retry (attempt > 1)
  start: number;         // ms since epoch: startedAt, else scheduledAt, else createdAt
  queued?: number;       // scheduledAt when it is before start: the wait drawn lighter
  end: number;           // completed/failed, or now while active
  active: boolean;
}

export interface TimelineRow {
  key: string;           // the first attempt's id
  label: string;
  depth: number;         // 0 for a top-level task, 1 for a child of a parallel/each, ...
  bars: Bar[];
}

export interface Timeline {
  rows: TimelineRow[];
  t0: number;
  t1: number;
}

function ms(s?: string): number | undefined { if (!s) return undefined; const t = Date.parse(s); return Number.isNaN(t) ? undefined : t; }

export function barOf(row: TaskRow, now: number): Bar {
  const scheduled = ms(row.scheduledAt);
  const started = ms(row.startedAt);
  const start = started ?? scheduled ?? ms(row.createdAt) ?? now;
  const active = ACTIVE_TASK_STATES.has(row.state);
  const ended = ms(row.completedAt) ?? ms(row.failedAt);
  const end = ended ?? (active ? now : start);
  const attempt = attemptNumber(row);
  return { row, attempt, retry: attempt > 1, start, end: Math.max(end, start),
           queued: scheduled !== undefined && started !== undefined && scheduled < started ? scheduled : undefined,
           active };
}

// Rows in tree order: top-level slots by position, each followed by the slots of its
// children (a parallel's and an each's), children by start time then name.
export function buildTimeline(rows: TaskRow[], now: number): Timeline {
  const children = new Map<string, TaskRow[]>();
  const top: TaskRow[] = [];
  const ids = new Set(rows.map((r) => r.id));
  for (const r of rows) {
    // A row whose parent is not (yet) in the list is shown at the top level.
    if (r.parentId && ids.has(r.parentId)) { const l = children.get(r.parentId); if (l) l.push(r); else children.set(r.parentId, [r]); }
    else top.push(r);
  }
  const out: TimelineRow[] = [];
  let t0 = Infinity, t1 = -Infinity;
  const emit = (groups: TaskRow[][], depth: number) => {
    for (const g of groups) {
      const bars = g.map((r) => barOf(r, now));
      for (const b of bars) { t0 = Math.min(t0, b.queued ?? b.start); t1 = Math.max(t1, b.end); }
      out.push({ key: g[0].id, label: g[g.length - 1].name ?? "(unnamed)", depth, bars });
      // A slot of one attempt (every child of a 10,000-item each) copies no list.
      const kids = g.length === 1 ? children.get(g[0].id) : g.flatMap((r) => children.get(r.id) ?? []);
      if (kids?.length) emit(sortGroups(groupAttempts(kids)), depth + 1);
    }
  };
  const byPosition = new Map<number, TaskRow[]>();
  for (const r of top) { const l = byPosition.get(r.position); if (l) l.push(r); else byPosition.set(r.position, [r]); }
  for (const p of [...byPosition.keys()].sort((a, b) => a - b)) emit(groupAttempts(byPosition.get(p)!), 0);
  if (!out.length) { t0 = now; t1 = now; }
  return { rows: out, t0, t1: Math.max(t1, t0 + 1) };
}

// Slots by start time, then by name in natural order ("item 2" before "item 10", case
// ignored). The keys are made once per slot, not once per comparison: a 10,000-item each
// whose children have not started yet ties on start and is sorted by name alone.
function sortGroups(groups: TaskRow[][]): TaskRow[][] {
  const keyed = groups.map((g) => ({
    g, start: g[0].startedAt ?? g[0].scheduledAt ?? g[0].createdAt ?? "", name: naturalKey(g[0].name ?? ""),
  }));
  keyed.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return keyed.map((k) => k.g);
}

// A name as a key whose plain comparison is natural order: lower case, every run of
// digits zero-padded to 16 places.
export function naturalKey(name: string): string {
  return name.toLowerCase().replace(/\d+/g, (d) => d.padStart(16, "0"));
}

export interface Scale { t0: number; t1: number; width: number }

// A bar's left edge and width in pixels; at least 2 px wide so a quick task shows.
export function barX(scale: Scale, start: number, end: number): { x: number; w: number } {
  const k = scale.width / Math.max(1, scale.t1 - scale.t0);
  const x = (start - scale.t0) * k;
  return { x, w: Math.max(2, (end - start) * k) };
}

const STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500,
  1e3, 2e3, 5e3, 10e3, 15e3, 30e3,
  60e3, 120e3, 300e3, 600e3, 900e3, 1800e3,
  3600e3, 7200e3, 10800e3, 21600e3, 43200e3, 86400e3];

// Ticks at a round step such that labels are at least `minGap` px apart: offsets in ms
// from t0, with their x.
export function ticks(scale: Scale, minGap = 80): { step: number; ticks: { t: number; x: number; label: string }[] } {
  const span = Math.max(1, scale.t1 - scale.t0);
  const maxTicks = Math.max(1, Math.floor(scale.width / minGap));
  const step = STEPS.find((s) => span / s <= maxTicks) ?? Math.ceil(span / maxTicks / 86400e3) * 86400e3;
  const out: { t: number; x: number; label: string }[] = [];
  for (let t = 0; t <= span; t += step) out.push({ t, x: (t / span) * scale.width, label: duration(t) });
  return { step, ticks: out };
}

// A duration, short: "0s", "250ms", "1.5s", "12s", "2m 30s", "1h 05m", "2d 3h".
export function duration(msv: number): string {
  if (msv === 0) return "0s";
  if (msv < 1000) return `${Math.round(msv)}ms`;
  if (msv < 10e3) return `${+(msv / 1000).toFixed(1)}s`;
  if (msv < 60e3) return `${Math.round(msv / 1000)}s`;
  const s = Math.round(msv / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${s % 60}s` : ""}`;
  if (s < 86400) { const m = Math.floor((s % 3600) / 60); return `${Math.floor(s / 3600)}h${m ? ` ${String(m).padStart(2, "0")}m` : ""}`; }
  const h = Math.floor((s % 86400) / 3600);
  return `${Math.floor(s / 86400)}d${h ? ` ${h}h` : ""}`;
}

// The rows to render for a scroll position: [first, last) with `overscan` rows either side.
export function visibleRange(scrollTop: number, viewport: number, rowHeight: number, count: number, overscan = 8) {
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const last = Math.min(count, Math.ceil((scrollTop + viewport) / rowHeight) + overscan);
  return { first, last };
}
