// Opening a page of the UI for the browser tests of jobs, editor, scheduled and auth.
// Normally the server under test serves the UI itself. With BATON_UI_URL (a `vite` dev
// server, whose proxy points at one fixed server), the page's API calls are sent to this
// test's own server instead, and /events is refused, so the UI falls back to polling.
import { pageUrl } from "./lib.mjs";

const API = /^\/(jobs|tasks|queues|nodes|metrics|health|events|scheduled-jobs|users|keys|whoami)(\/|\?|$)/;

export async function openPage(browser, server, hash, { width = 1280, height = 900, colorScheme = "light" } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, colorScheme });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  if (process.env.BATON_UI_URL) {
    const ui = new URL(process.env.BATON_UI_URL);
    await page.route((url) => url.host === ui.host && API.test(url.pathname + url.search), async (route) => {
      const req = route.request();
      const url = new URL(req.url());
      if (url.pathname === "/events") return route.fulfill({ status: 503, body: "" });
      const headers = { ...req.headers() };
      delete headers.host;
      const r = await fetch(server.url + url.pathname + url.search, {
        method: req.method(), headers, body: req.postDataBuffer() ?? undefined });
      await route.fulfill({ status: r.status, headers: Object.fromEntries(r.headers), body: Buffer.from(await r.arrayBuffer()) });
    });
  }
  await page.goto(pageUrl(server, hash));
  return { page, context, errors };
}

// Fetches the server's JSON with optional credentials; throws on an error answer.
export async function apiJson(server, path, { method = "GET", body, type = "application/json", auth } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = type;
  if (auth) headers.Authorization = auth;
  const r = await fetch(server.url + path, { method, headers, body });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}
