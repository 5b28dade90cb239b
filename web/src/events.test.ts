import { describe, expect, it } from "vitest";
import { parseSse } from "./events";

describe("parseSse", () => {
  it("splits complete events and keeps the incomplete rest", () => {
    const { events, rest } = parseSse('event: job\ndata: {"jobId":"a"}\n\n: ping\n\nevent: task\ndata: {"ta');
    expect(events).toEqual([{ event: "job", data: '{"jobId":"a"}' }]);
    expect(rest).toBe('event: task\ndata: {"ta');
  });
  it("joins multi-line data and takes message as the default event", () => {
    const { events } = parseSse("data: one\ndata: two\n\n");
    expect(events).toEqual([{ event: "message", data: "one\ntwo" }]);
  });
});
