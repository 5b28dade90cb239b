// Live updates: GET /events (docs/api.md), read with fetch so that the credentials go in
// the Authorization header (EventSource cannot send one). When the stream drops, the
// subscriber is told to poll (`onPoll`, every `pollMs`) until it is back.
import { authHeader } from "./api";

export interface JobEvent { type: "job"; jobId: string; state: string; position?: number;
                            progress?: number; taskCount?: number }
export interface TaskEvent { type: "task"; jobId: string; taskId: string; state: string;
                             parentId?: string; progress?: number; nodeId?: string }
export interface LogEvent { type: "log"; jobId: string; taskId: string; number: number;
                            contents: string }
export type BatonEvent = JobEvent | TaskEvent | LogEvent;

export interface Subscription { close(): void }

// Whether the open subscriptions are on the stream ("live"), polling because it dropped,
// or still connecting, for the shell's indicator; "idle" when no page subscribes.
export type StreamStatus = "idle" | "connecting" | "live" | "polling";
type OneStatus = "connecting" | "live" | "polling";
const statusOf = new Map<object, OneStatus>();
const statusListeners = new Set<(s: StreamStatus) => void>();
export function streamStatus(): StreamStatus {
  const all = [...statusOf.values()];
  if (all.length === 0) return "idle";
  if (all.includes("polling")) return "polling";
  if (all.includes("connecting")) return "connecting";
  return "live";
}
export function onStreamStatus(f: (s: StreamStatus) => void): () => void {
  statusListeners.add(f);
  return () => { statusListeners.delete(f); };
}
function reportStatus(key: object, status: OneStatus | null) {
  if (status === null) statusOf.delete(key); else statusOf.set(key, status);
  const s = streamStatus();
  statusListeners.forEach((f) => f(s));
}

// Parses the text of an event stream; returns the events complete in `buffer` and the
// rest (an incomplete event) to keep.
export function parseSse(buffer: string): { events: { event: string; data: string }[]; rest: string } {
  const events: { event: string; data: string }[] = [];
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop() ?? "";
  for (const block of blocks) {
    let event = "message";
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) events.push({ event, data: data.join("\n") });
  }
  return { events, rest };
}

// Subscribes to the events of one job (`jobId`) or of every job (no jobId: job and task
// state changes only, no log parts).
export function subscribe(opts: { jobId?: string; logs?: boolean; onEvent: (e: BatonEvent) => void;
                                  onPoll?: () => void; onLive?: (live: boolean) => void;
                                  pollMs?: number; refreshMs?: number }): Subscription {
  let closed = false;
  const key = {};
  reportStatus(key, "connecting");
  let controller: AbortController | null = null;
  let pollTimer: ReturnType<typeof setInterval> | null = null;
  const startPolling = () => {
    if (pollTimer || !opts.onPoll) return;
    pollTimer = setInterval(() => opts.onPoll?.(), opts.pollMs ?? 3000);
  };
  const stopPolling = () => { if (pollTimer) clearInterval(pollTimer); pollTimer = null; };
  // While live, the state is still read now and then: a stream carries what its own
  // coordinator decided, and with several coordinators the others' changes come this way
  // (docs/api.md, "Live events").
  let refreshTimer: ReturnType<typeof setInterval> | null = null;
  const stopRefresh = () => { if (refreshTimer) clearInterval(refreshTimer); refreshTimer = null; };
  const connect = async () => {
    while (!closed) {
      controller = new AbortController();
      try {
        const q = new URLSearchParams();
        if (opts.jobId) q.set("job", opts.jobId);
        if (opts.logs === false) q.set("logs", "false");
        const res = await fetch(`/events?${q}`, {
          headers: { Accept: "text/event-stream", ...authHeader() }, signal: controller.signal,
          credentials: "omit" });
        if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
        stopPolling();
        opts.onLive?.(true);
        reportStatus(key, "live");
        // Whatever changed while we were away is read once.
        opts.onPoll?.();
        if (opts.onPoll && !refreshTimer) {
          refreshTimer = setInterval(() => opts.onPoll?.(), opts.refreshMs ?? 15000);
        }
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          const parsed = parseSse(buffer);
          buffer = parsed.rest;
          for (const e of parsed.events) {
            // The stream fell behind and dropped what it held: read the state afresh.
            if (e.event === "resync") { opts.onPoll?.(); continue; }
            try { opts.onEvent({ type: e.event, ...JSON.parse(e.data) } as BatonEvent); } catch { /* a bad event is skipped */ }
          }
        }
      } catch { /* dropped: poll until back */ }
      stopRefresh();
      if (closed) break;
      opts.onLive?.(false);
      reportStatus(key, "polling");
      startPolling();
      await new Promise((r) => setTimeout(r, 2000));
    }
  };
  void connect();
  return { close() { closed = true; controller?.abort(); stopPolling(); stopRefresh(); reportStatus(key, null); } };
}
