import { describe, expect, it } from "vitest";
import { basicAuthorization, bearerAuthorization, isAdmin, userOf } from "./auth";

describe("credentials", () => {
  it("encodes basic credentials as UTF-8 and reads the user back", () => {
    const h = basicAuthorization("zoë", "pa:ss");
    expect(h).toBe("Basic em/DqzpwYTpzcw==");
    expect(userOf(h)).toBe("zoë");
    expect(bearerAuthorization(" baton_abc \n")).toBe("Bearer baton_abc");
    expect(userOf("Bearer baton_abc")).toBe("API key");
  });
  it("lets admins, and everyone when authentication is off, take admin actions", () => {
    expect(isAdmin({ username: "", roles: [], authEnabled: false })).toBe(true);
    expect(isAdmin({ username: "a", roles: ["admin"], authEnabled: true })).toBe(true);
    expect(isAdmin({ username: "b", roles: ["ops"], authEnabled: true })).toBe(false);
    expect(isAdmin(undefined)).toBe(false);
  });
});
