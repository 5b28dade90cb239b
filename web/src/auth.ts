// Who is using the UI: the credentials (HTTP basic or an API key), kept in sessionStorage
// so that a reload keeps them and closing the tab forgets them, and what /whoami says
// (the user, the roles, whether authentication is on), known app-wide.
import { ApiError, api, authHeader, setAuthorization } from "./api";
import { useEffect, useState } from "preact/hooks";

const KEY = "baton.authorization";

export interface Identity {
  username: string;
  roles: string[];
  authEnabled: boolean;
}

export type AuthState =
  | { kind: "checking" }
  | { kind: "login"; error?: string }
  | { kind: "ready"; identity: Identity };

export function basicAuthorization(user: string, password: string): string {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let bin = "";
  bytes.forEach((b) => { bin += String.fromCharCode(b); });
  return `Basic ${btoa(bin)}`;
}
// The user name in basic credentials; "API key" for a bearer key.
export function userOf(authorization: string): string {
  if (!authorization.startsWith("Basic ")) return "API key";
  try {
    const bytes = Uint8Array.from(atob(authorization.slice(6)), (c) => c.charCodeAt(0));
    return new TextDecoder().decode(bytes).split(":")[0];
  } catch { return ""; }
}
export function bearerAuthorization(key: string): string { return `Bearer ${key.trim()}`; }

// Whether the user may take actions that need the admin role (deleting a queue). With
// authentication off, everyone may.
export function isAdmin(id: Identity | undefined): boolean {
  return !!id && (!id.authEnabled || id.roles.includes("admin"));
}

let state: AuthState = { kind: "checking" };
const listeners = new Set<(s: AuthState) => void>();
function set(s: AuthState) { state = s; listeners.forEach((f) => f(s)); }
export function authState(): AuthState { return state; }

// Asks the server who the stored credentials are. A server without /whoami (404) is
// taken as having authentication off unless a plain call then answers 401.
async function whoami(): Promise<Identity> {
  try {
    return await api.whoami();
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      // An older server: a plain call tells whether the credentials (if any) are taken.
      await api.metrics();
      const sent = authHeader().Authorization;
      return { username: sent ? userOf(sent) : "", roles: [], authEnabled: !!sent };
    }
    throw e;
  }
}

export async function checkAuth(): Promise<void> {
  const stored = sessionStorage.getItem(KEY);
  setAuthorization(stored);
  try {
    set({ kind: "ready", identity: await whoami() });
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) set({ kind: "login" });
    // The server is down or erring: show the app, whose pages say what failed.
    else set({ kind: "ready", identity: { username: "", roles: [], authEnabled: false } });
  }
}

// Tries credentials; keeps them when the server takes them.
export async function login(authorization: string): Promise<boolean> {
  setAuthorization(authorization);
  try {
    const identity = await whoami();
    sessionStorage.setItem(KEY, authorization);
    set({ kind: "ready", identity });
    return true;
  } catch (e) {
    setAuthorization(sessionStorage.getItem(KEY));
    const wrong = e instanceof ApiError && e.status === 401;
    set({ kind: "login", error: wrong ? "Wrong user name, password or key." : `Could not sign in: ${(e as Error).message}` });
    return false;
  }
}

export function logout() {
  sessionStorage.removeItem(KEY);
  setAuthorization(null);
  set({ kind: "login" });
}

// Any call answering 401 (credentials revoked, server restarted with auth on) asks for them.
export function requireLogin() {
  if (state.kind !== "login") {
    sessionStorage.removeItem(KEY);
    setAuthorization(null);
    set({ kind: "login", error: state.kind === "ready" ? "Please sign in again." : undefined });
  }
}

export function useAuth(): AuthState {
  const [s, setS] = useState(state);
  useEffect(() => { listeners.add(setS); setS(state); return () => { listeners.delete(setS); }; }, []);
  return s;
}

export function useIdentity(): Identity | undefined {
  const s = useAuth();
  return s.kind === "ready" ? s.identity : undefined;
}
