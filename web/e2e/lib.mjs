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
import { chmodSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
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
  // Searchable by others (mkdtemp makes it 0700): with authentication on, tasks run as
  // nobody and reach their directories in the (private) data directory through it.
  chmodSync(dir, 0o711);
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
    // A shell command for a task that waits until the test opens the gate (a file):
    // `const g = server.gate("x")` … `run: ${g.wait}; …` … `g.open()`. The test looks at a
    // job mid-run however slowly its page loads.
    gate(name) {
      const path = join(dir, `gate-${name}`);
      return { wait: `while [ ! -e ${path} ]; do sleep 0.05; done`, open: () => writeFileSync(path, "") };
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

// The visible text elements of `page` whose colour contrasts with the background behind
// them less than WCAG AA asks (4.5:1; 3:1 for large text: 24 px, or 18.66 px bold).
// Backgrounds are composed up the ancestors (alpha blended); returns
// [{text, ratio, need, where, color, background}] for each element that fails.
export function contrastProblems(page) {
  return page.evaluate(() => {
    // "rgb(r, g, b)", "rgba(r, g, b, a)", or "color(srgb r g b / a)" (what color-mix()
    // computes to, channels 0..1).
    const parse = (c) => {
      const m = (c.match(/[\d.]+/g) ?? []).map(Number);
      if (c.startsWith("color(")) return [m[0] * 255, m[1] * 255, m[2] * 255, m[3] ?? 1];
      return m.length >= 3 ? m : [0, 0, 0, 0];
    };
    const lum = ([r, g, b]) => {
      const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const over = (top, bottom) => { const a = top[3] ?? 1; return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)); };
    const background = (el) => {
      const layers = [];
      for (let e = el; e; e = e.parentElement) {
        const c = parse(getComputedStyle(e).backgroundColor);
        if ((c[3] ?? 1) > 0) layers.push(c);
        if ((c[3] ?? 1) >= 1) break;
      }
      let bg = [255, 255, 255];
      for (const l of layers.reverse()) bg = over(l, bg);
      return bg;
    };
    const out = [];
    for (const el of document.querySelectorAll("body *")) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || el.closest("svg, [aria-hidden=true]")) continue;
      const style = getComputedStyle(el);
      const rect = el.getBoundingClientRect();
      if (style.visibility === "hidden" || style.display === "none" || rect.width === 0 || rect.height === 0) continue;
      if (el.matches(":disabled, [aria-disabled=true], input::placeholder")) continue;
      const bg = background(el);
      const fg = over(parse(style.color), bg);
      const [a, b] = [lum(fg), lum(bg)];
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      const need = large ? 3 : 4.5;
      if (ratio < need) {
        out.push({ text: el.textContent.trim().slice(0, 40), ratio: Math.round(ratio * 100) / 100, need,
                   where: `${el.tagName.toLowerCase()}.${[...el.classList].join(".")}`,
                   color: style.color, background: `rgb(${bg.map(Math.round).join(", ")})` });
      }
    }
    return out;
  });
}
