// Sign in: a user's name and password (HTTP basic) or an API key (Bearer), checked
// against GET /whoami and kept for this tab only (sessionStorage).
import { useState } from "preact/hooks";
import { basicAuthorization, bearerAuthorization, login } from "../auth";

export function LoginPage({ error }: { error?: string }) {
  const [mode, setMode] = useState<"password" | "key">("password");
  const [user, setUser] = useState("");
  const [password, setPassword] = useState("");
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    await login(mode === "password" ? basicAuthorization(user.trim(), password) : bearerAuthorization(key));
    setBusy(false);
  };
  return (
    <section class="ui-login">
      <h1>Sign in to Baton</h1>
      <p class="ui-muted">This server requires credentials. They are kept for this tab only.</p>
      <div class="ui-segmented" role="tablist" aria-label="How to sign in">
        <button type="button" role="tab" aria-selected={mode === "password"} onClick={() => setMode("password")}>User and password</button>
        <button type="button" role="tab" aria-selected={mode === "key"} onClick={() => setMode("key")}>API key</button>
      </div>
      <form onSubmit={submit} class="ui-form">
        {mode === "password" ? (
          <>
            <label>User name<input name="username" autoComplete="username" required value={user}
                                   onInput={(e) => setUser(e.currentTarget.value)} autoFocus /></label>
            <label>Password<input name="password" type="password" autoComplete="current-password" required
                                  value={password} onInput={(e) => setPassword(e.currentTarget.value)} /></label>
          </>
        ) : (
          <label>API key<input name="apikey" type="password" autoComplete="off" required placeholder="baton_…"
                               value={key} onInput={(e) => setKey(e.currentTarget.value)} autoFocus /></label>
        )}
        {error && <div class="ui-error" role="alert">{error}</div>}
        <button type="submit" class="primary" disabled={busy}>{busy ? "Signing in…" : "Sign in"}</button>
      </form>
    </section>
  );
}
