// Refetching a job as events arrive, without storms: at most one request in flight, at
// most one every `interval(last)` ms (`last`: how long the previous one took), and
// requests asked for meanwhile folded into one that runs when allowed.
export class Refetcher {
  private inFlight = false;
  private pending = false;
  private last = -Infinity;
  private took = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  private urgent = false;

  constructor(private run: () => Promise<void>, private interval: (lastMs: number) => number,
              private clock: () => number = () => Date.now()) {}

  // `urgent`: read as soon as no read is in flight, whatever the interval (the job ended:
  // its final state is worth reading at once).
  request(urgent = false) {
    if (this.closed) return;
    this.pending = true;
    if (urgent) {
      this.urgent = true;
      if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    }
    this.pump();
  }

  close() { this.closed = true; if (this.timer) clearTimeout(this.timer); this.timer = null; }

  private pump() {
    if (!this.pending || this.inFlight || this.timer || this.closed) return;
    const wait = this.urgent ? 0 : this.last + this.interval(this.took) - this.clock();
    if (wait > 0) {
      this.timer = setTimeout(() => { this.timer = null; this.pump(); }, wait);
      return;
    }
    this.pending = false;
    this.urgent = false;
    this.inFlight = true;
    this.last = this.clock();
    this.run().catch(() => undefined).finally(() => {
      this.inFlight = false;
      this.took = this.clock() - this.last;
      this.pump();
    });
  }
}

// How often a job may be read again: every 500 ms, a big job every 2 s, and never so often
// that the page keeps the server busy more than half the time (a 10,000-task job can take
// seconds to answer on a loaded server; the events keep the page current meanwhile).
export function refetchInterval(rows: number, lastMs = 0): number {
  return Math.max(rows > 2000 ? 2000 : 500, 2 * lastMs);
}
