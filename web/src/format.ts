// Formatting shared by the pages: durations, times, sizes, rates. Pure functions, so that
// they are tested without a DOM (format.test.ts).

// A duration in milliseconds as people read it: "850 ms", "4.2 s", "3m 05s", "2h 07m",
// "3d 04h". Negative or non-finite values read as "—".
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.floor(s)} s`;
  const total = Math.floor(s);
  const d = Math.floor(total / 86400), h = Math.floor((total % 86400) / 3600),
        m = Math.floor((total % 3600) / 60), sec = total % 60;
  const two = (n: number) => String(n).padStart(2, "0");
  if (d > 0) return `${d}d ${two(h)}h`;
  if (h > 0) return `${h}h ${two(m)}m`;
  return `${m}m ${two(sec)}s`;
}

function ms(t?: string): number | undefined {
  if (!t) return undefined;
  const v = Date.parse(t);
  return Number.isNaN(v) ? undefined : v;
}

// How long a job or task ran: from startedAt to its end (completedAt, failedAt or the
// time it was cancelled), or to `now` while it is still running. undefined when it never
// started, or ended without a recorded end.
export function runtime(x: { state: string; startedAt?: string; completedAt?: string;
                             failedAt?: string; cancelledAt?: string }, now: number): number | undefined {
  const start = ms(x.startedAt);
  if (start === undefined) return undefined;
  const end = ms(x.completedAt) ?? ms(x.failedAt) ?? ms(x.cancelledAt);
  if (end !== undefined) return Math.max(0, end - start);
  if (x.state === "RUNNING" || x.state === "SCHEDULED" || x.state === "PENDING") return Math.max(0, now - start);
  return undefined;
}

// A past (or future) instant relative to `now`: "just now", "5 min ago", "in 3 h".
export function relativeTime(t: string | undefined, now: number): string {
  const v = ms(t);
  if (v === undefined) return "—";
  const diff = v - now;
  const a = Math.abs(diff);
  let text: string;
  if (a < 10_000) return "just now";
  if (a < 60_000) text = `${Math.floor(a / 1000)} s`;
  else if (a < 3_600_000) text = `${Math.floor(a / 60_000)} min`;
  else if (a < 86_400_000) text = `${Math.floor(a / 3_600_000)} h`;
  else text = `${Math.floor(a / 86_400_000)} d`;
  return diff < 0 ? `${text} ago` : `in ${text}`;
}

// An absolute time, in the browser's zone, to the second: "2026-12-03 11:30:20".
export function formatTime(t: string | undefined): string {
  const v = ms(t);
  if (v === undefined) return "—";
  const d = new Date(v);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

// Bytes in binary units: "512 B", "114 MiB".
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${i === 0 ? v : v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

// The share of jobs that failed among those that ended in the last hour, as a percentage
// text. "—" when the server does not report it; "0%" when no job ended.
export function failureRate(failed?: number, ended?: number): { text: string; ratio?: number } {
  if (failed === undefined || ended === undefined) return { text: "—" };
  if (ended <= 0) return { text: "0%", ratio: 0 };
  const ratio = Math.min(1, Math.max(0, failed / ended));
  const pct = ratio * 100;
  return { text: `${pct >= 10 || pct === 0 ? Math.round(pct) : pct.toFixed(1)}%`, ratio };
}

// A percentage with one decimal below 10: "7.5%", "42%".
export function formatPercent(p: number): string {
  if (!Number.isFinite(p)) return "—";
  return `${p < 10 ? p.toFixed(1) : Math.round(p)}%`;
}
