// Opens Baton's UI over HTTPS in Debian's Chromium with HOME set to HOME, whose NSS
// database (HOME/.pki/nssdb) holds the CAs the browser trusts, and waits for TEXT on the
// jobs page. Prints "shown: …" and exits 0, or "refused: <the browser's error>" and
// exits 1. For tests/e2e/tls_distributed_test.sh (not a node --test file).
// Usage (from web/): node e2e/tls-page.mjs URL HOME TEXT
import { chromium } from "playwright-core";
import { chromiumFlags } from "./lib.mjs";

const [url, home, text] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.BATON_CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: chromiumFlags,
  env: { ...process.env, HOME: home },
});
try {
  const page = await browser.newPage();
  const calls = [];
  page.on("request", (r) => calls.push(r.url()));
  const response = await page.goto(`${url}/#/jobs`, { waitUntil: "load", timeout: 20000 });
  await page.getByText(text).first().waitFor({ timeout: 20000 });
  const plain = calls.filter((c) => !c.startsWith("https://") && !c.startsWith("data:"));
  if (plain.length) throw new Error(`requests not over https: ${plain.join(", ")}`);
  console.log(`shown: ${text} (HTTP ${response.status()}, ${calls.length} requests, all https)`);
} catch (e) {
  console.log(`refused: ${String(e.message).split("\n")[0]}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
