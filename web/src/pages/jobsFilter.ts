// The jobs page's filter as its URL holds it: `#/jobs?state=RUNNING,FAILED&q=tag:x&page=2`.
import type { JobState } from "../api";

export const STATE_CHIPS: JobState[] = ["PENDING", "SCHEDULED", "RUNNING", "PAUSED", "COMPLETED", "FAILED", "CANCELLED"];

export interface JobsFilter { states: JobState[]; q: string; page: number }

export function parseFilter(params: Record<string, string>): JobsFilter {
  const states = (params.state ?? "").split(",").map((s) => s.trim().toUpperCase())
    .filter((s): s is JobState => (STATE_CHIPS as string[]).includes(s));
  const page = Math.max(1, Math.floor(Number(params.page ?? "1")) || 1);
  return { states: STATE_CHIPS.filter((s) => states.includes(s)), q: params.q ?? "", page };
}

// The URL parameters of a filter; empty ones left out, so "All" is `#/jobs`.
export function filterParams(f: JobsFilter): Record<string, string | undefined> {
  return {
    state: f.states.length ? f.states.join(",") : undefined,
    q: f.q.trim() ? f.q : undefined,
    page: f.page > 1 ? String(f.page) : undefined,
  };
}

// Clicking a chip: `null` is "All" (clears the states); a state toggles. Either goes back
// to the first page.
export function toggleChip(f: JobsFilter, chip: JobState | null): JobsFilter {
  if (chip === null) return { ...f, states: [], page: 1 };
  const has = f.states.includes(chip);
  const states = STATE_CHIPS.filter((s) => (s === chip ? !has : f.states.includes(s)));
  return { ...f, states, page: 1 };
}

// What a row may do, by its state.
export function canCancel(state: string) { return state === "RUNNING" || state === "SCHEDULED" || state === "PENDING" || state === "PAUSED"; }
export function canPause(state: string) { return state === "RUNNING" || state === "SCHEDULED"; }
export function canRestart(state: string) { return state === "FAILED" || state === "CANCELLED"; }
