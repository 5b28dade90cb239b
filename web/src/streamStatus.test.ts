import { afterEach, describe, expect, it, vi } from "vitest";
import { onStreamStatus, streamStatus, subscribe } from "./events";

afterEach(() => { vi.unstubAllGlobals(); });

describe("streamStatus", () => {
  it("is connecting until the stream answers, then idle once every subscription closed", () => {
    vi.stubGlobal("fetch", () => new Promise(() => {}));
    expect(streamStatus()).toBe("idle");
    const seen: string[] = [];
    const off = onStreamStatus((s) => seen.push(s));
    const sub = subscribe({ onEvent: () => {} });
    expect(streamStatus()).toBe("connecting");
    sub.close();
    expect(streamStatus()).toBe("idle");
    expect(seen).toEqual(["connecting", "idle"]);
    off();
  });
  it("is polling when the stream fails, and stays polling while any subscription polls", async () => {
    vi.stubGlobal("fetch", () => Promise.resolve(new Response("no", { status: 404 })));
    const a = subscribe({ onEvent: () => {}, onPoll: () => {} });
    await vi.waitFor(() => expect(streamStatus()).toBe("polling"));
    vi.stubGlobal("fetch", () => new Promise(() => {}));
    const b = subscribe({ onEvent: () => {} });
    expect(streamStatus()).toBe("polling");
    a.close();
    expect(streamStatus()).toBe("connecting");
    b.close();
    expect(streamStatus()).toBe("idle");
  });
});
