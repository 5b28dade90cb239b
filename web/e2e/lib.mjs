// What every browser test shares: a real `baton run standalone` on a free port with its
// own data directory, and Debian's Chromium driven by playwright-core (never a downloaded
// browser). Each test file starts its own server, so files may run in parallel.
//
// Environment:
//   BATON_BIN          the baton binary (default: ../build/baton from web/)
//   BATON_CHROMIUM     the browser (default /usr/bin/chromium)
//   BATON_SCREENSHOTS  where screenshots go (default ../build/ui-screenshots)
//   BATON_UI_URL       serve pages from here instead of the server (a `vite` dev server
//                      proxying to the server: BATON_API=http://127.0.0.1:PORT npm run dev)
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, "../..");
export const screenshots = process.env.BATON_SCREENSHOTS ?? join(repo, "build/ui-screenshots");

export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => res(port)); });
  });
}

async function waitHealthy(url, child, deadlineMs) {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    if (child.exitCode !== null) throw new Error(`baton exited with ${child.exitCode}`);
    try { const r = await fetch(`${url}/health`); if (r.ok) return; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`baton did not answer ${url}/health within ${deadlineMs} ms`);
}

// Starts `baton run standalone`; `config` (TOML text) is passed with --config.
export async function startBaton({ config, args = [] } = {}) {
  const bin = process.env.BATON_BIN ?? join(repo, "build/baton");
  const dir = mkdtempSync(join(tmpdir(), "baton-ui-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const argv = ["run", "standalone", "--data-dir", join(dir, "data"), "--address", `127.0.0.1:${port}`, ...args];
  if (config) { writeFileSync(join(dir, "baton.toml"), config); argv.push("--config", join(dir, "baton.toml")); }
  const child = spawn(bin, argv, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (d) => { log += d; });
  child.stderr.on("data", (d) => { log += d; });
  try { await waitHealthy(url, child, 30000); } catch (e) { child.kill("SIGKILL"); throw new Error(`${e.message}\n${log}`); }
  return {
    url, dir,
    log: () => log,
    // POST a job document; returns the answer's JSON.
    async submit(doc, type = "text/yaml") {
      const r = await fetch(`${url}/jobs`, { method: "POST", headers: { "Content-Type": type }, body: doc });
      if (!r.ok) throw new Error(`submit: ${r.status} ${await r.text()}`);
      return r.json();
    },
    async get(path) { const r = await fetch(`${url}${path}`); if (!r.ok) throw new Error(`${path}: ${r.status}`); return r.json(); },
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await new Promise((r) => { const t = setTimeout(() => { child.kill("SIGKILL"); r(); }, 10000); child.once("exit", () => { clearTimeout(t); r(); }); });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// The flags this machine's closed network needs (no background connections, no updates).
export const chromiumFlags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
  "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export async function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.BATON_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: chromiumFlags,
  });
}

// The page URL for a view (`#/jobs`), on the server or on BATON_UI_URL.
export function pageUrl(server, hash = "#/jobs") {
  return `${process.env.BATON_UI_URL ?? server.url}/${hash}`;
}

export async function screenshot(page, name) {
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
}

// Polls `f` until it returns a truthy value; fails after `ms`.
export async function waitFor(f, ms = 30000, what = "condition") {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
