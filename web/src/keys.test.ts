import { describe, expect, it } from "vitest";
import { KeySequencer } from "./keys";

describe("KeySequencer", () => {
  it("maps single keys to their actions", () => {
    const s = new KeySequencer();
    expect(["/", "j", "k", "Enter", "Escape", "?", "n", "x"].map((k) => s.feed(k, 0)))
      .toEqual(["search", "down", "up", "open", "escape", "help", "new-job", null]);
  });
  it("reads g followed by j, s, q or n as going to a page", () => {
    const s = new KeySequencer(1000);
    expect(s.feed("g", 0)).toBeNull();
    expect(s.pending).toBe(true);
    expect(s.feed("j", 200)).toBe("go-jobs");
    expect(s.feed("g", 300)).toBeNull();
    expect(s.feed("s", 400)).toBe("go-scheduled");
    s.feed("g", 500); expect(s.feed("q", 600)).toBe("go-queues");
    s.feed("g", 700); expect(s.feed("n", 800)).toBe("go-nodes");
  });
  it("forgets a g after its window, so the next key acts alone", () => {
    const s = new KeySequencer(1000);
    s.feed("g", 0);
    expect(s.feed("j", 1500)).toBe("down");
    expect(s.pending).toBe(false);
  });
  it("reads g then an unknown key as that key alone", () => {
    const s = new KeySequencer(1000);
    s.feed("g", 0);
    expect(s.feed("?", 10)).toBe("help");
  });
});
