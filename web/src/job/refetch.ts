// Refetching a job as events arrive, without storms: at most one request in flight, at
// most one every `interval()` ms (500 ms, 2 s for a big job), and requests asked for
// meanwhile folded into one that runs when allowed.
export class Refetcher {
  private inFlight = false;
  private pending = false;
  private last = -Infinity;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;

  constructor(private run: () => Promise<void>, private interval: () => number,
              private clock: () => number = () => Date.now()) {}

  request() {
    if (this.closed) return;
    this.pending = true;
    this.pump();
  }

  close() { this.closed = true; if (this.timer) clearTimeout(this.timer); this.timer = null; }

  private pump() {
    if (!this.pending || this.inFlight || this.timer || this.closed) return;
    const wait = this.last + this.interval() - this.clock();
    if (wait > 0) {
      this.timer = setTimeout(() => { this.timer = null; this.pump(); }, wait);
      return;
    }
    this.pending = false;
    this.inFlight = true;
    this.last = this.clock();
    this.run().catch(() => undefined).finally(() => { this.inFlight = false; this.pump(); });
  }
}

// How often a job may be refetched: big jobs cost the server and the page more.
export function refetchInterval(rows: number): number { return rows > 2000 ? 2000 : 500; }
