// Opening a page of the UI for the browser tests of jobs, editor, scheduled and auth.
// Normally the server under test serves the UI itself. With BATON_UI_URL (a `vite` dev
// server, whose own proxy points at one fixed server), pages are opened through a small
// proxy in this process instead: the UI's files come from BATON_UI_URL and the API's paths
// (the event stream included, streamed) from this test's own server.
import { createServer, request } from "node:http";
import { pageUrl } from "./lib.mjs";

const API = /^\/(jobs|tasks|queues|nodes|metrics|health|events|scheduled-jobs|users|keys|whoami)(\/|\?|$)/;
const proxies = new Map();

function forward(req, res, target) {
  const url = new URL(req.url, target);
  const up = request(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    r.pipe(res);
  });
  up.on("error", (e) => { res.writeHead(502); res.end(String(e)); });
  req.pipe(up);
  res.on("close", () => up.destroy());
}

async function proxyFor(server) {
  if (proxies.has(server)) return proxies.get(server);
  const ui = process.env.BATON_UI_URL;
  const p = createServer((req, res) => forward(req, res, API.test(req.url) ? server.url : ui));
  await new Promise((r) => p.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${p.address().port}`;
  proxies.set(server, url);
  // The proxy goes when the server does.
  const stop = server.stop.bind(server);
  server.stop = async () => { p.closeAllConnections(); p.close(); proxies.delete(server); await stop(); };
  return url;
}

export async function openPage(browser, server, hash, { width = 1280, height = 900, colorScheme = "light" } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, colorScheme });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const base = process.env.BATON_UI_URL ? await proxyFor(server) : null;
  await page.goto(base ? `${base}/${hash}` : pageUrl(server, hash));
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
