import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Refetcher, refetchInterval } from "./refetch";

describe("Refetcher", () => {
  beforeEach(() => { vi.useFakeTimers(); vi.setSystemTime(0); });
  afterEach(() => { vi.useRealTimers(); });

  it("folds a burst of requests into one now and one after the interval", async () => {
    let calls = 0;
    const r = new Refetcher(async () => { calls++; }, () => 500);
    for (let i = 0; i < 50; i++) r.request();
    expect(calls).toBe(1);
    await vi.advanceTimersByTimeAsync(499);
    expect(calls).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toBe(2);
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toBe(2);
  });

  it("never has two requests in flight, however slow the server", async () => {
    let inFlight = 0, most = 0, calls = 0;
    const r = new Refetcher(() => { calls++; inFlight++; most = Math.max(most, inFlight);
      return new Promise<void>((res) => setTimeout(() => { inFlight--; res(); }, 3000)); }, () => 500);
    r.request();
    await vi.advanceTimersByTimeAsync(100);
    r.request(); r.request();
    await vi.advanceTimersByTimeAsync(10000);
    expect(most).toBe(1);
    expect(calls).toBe(2);
  });

  it("reads at once when asked urgently, but never while a read is in flight", async () => {
    let calls = 0;
    const r = new Refetcher(() => { calls++; return new Promise<void>((res) => setTimeout(res, 100)); }, () => 10000);
    r.request();
    r.request(true);
    expect(calls).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(calls).toBe(2);
    await vi.advanceTimersByTimeAsync(200);
    r.request();
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toBe(2);
    r.request(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toBe(3);
    r.close();
  });

  it("stops after close", async () => {
    let calls = 0;
    const r = new Refetcher(async () => { calls++; }, () => 500);
    r.request(); r.request();
    r.close();
    await vi.advanceTimersByTimeAsync(2000);
    expect(calls).toBe(1);
  });

  it("waits longer between refetches of a big job, and after a slow answer", () => {
    expect(refetchInterval(10)).toBe(500);
    expect(refetchInterval(10001)).toBe(2000);
    expect(refetchInterval(10001, 5000)).toBe(10000);
    expect(refetchInterval(10, 100)).toBe(500);
  });

  it("passes how long the previous refetch took to the interval", async () => {
    const seen: number[] = [];
    const r = new Refetcher(() => new Promise<void>((res) => setTimeout(res, 700)), (last) => { seen.push(last); return 500; });
    r.request();
    await vi.advanceTimersByTimeAsync(800);
    r.request();
    expect(seen).toContain(700);
    r.close();
  });
});
