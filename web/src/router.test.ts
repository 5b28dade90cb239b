import { describe, expect, it } from "vitest";
import { href, parseHash } from "./router";

describe("parseHash", () => {
  it("reads the path and the query of a view's URL", () => {
    expect(parseHash("#/jobs/abc?task=t1&attempt=2")).toEqual({
      path: ["jobs", "abc"], params: { task: "t1", attempt: "2" } });
  });
  it("takes an empty hash for the jobs list", () => {
    expect(parseHash("")).toEqual({ path: ["jobs"], params: {} });
  });
  it("round-trips what href writes, encoded values included", () => {
    const h = href(["jobs"], { q: "tag:nightly a&b", state: "FAILED", page: 2, empty: "" });
    expect(parseHash(h)).toEqual({ path: ["jobs"], params: { q: "tag:nightly a&b", state: "FAILED", page: "2" } });
  });
});
