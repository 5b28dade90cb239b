// A job whose `each` has 10,000 items: its page renders the graph (one collapsed node with
// counts) and the timeline (10,000 rows, virtualised) without freezing the browser —
// measured in the page: no main-thread task of 1 s or more (PerformanceObserver
// 'longtask'), and a click answered within a second.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { launchBrowser, screenshot, startBaton, waitFor } from "./lib.mjs";
import { openPage } from "./ui-page.mjs";

let server, browser;
before(async () => {
  server = await startBaton();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

const JOB = `
name: big each
tasks:
  - name: ten thousand
    each:
      list: "{{ sequence(1, 10001) }}"
      task:
        name: "item {{ item.index }}"
        env: { V: "{{ item.value }}" }
        run: echo $V
`;

// The time from a click to the next frame painted after it, in the page.
function clickToPaint(page, selector) {
  return page.evaluate((sel) => new Promise((resolve) => {
    const t0 = performance.now();
    document.querySelector(sel).dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true }));
    requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - t0), 0));
  }), selector);
}

test("a 10,000-item each renders its graph and timeline without a long main-thread task", { timeout: 600000 }, async () => {
  const job = await server.submit(JOB);
  // The observer is installed before the page's own scripts run: open the UI, add it, and
  // load the job's page afresh.
  const { page, context, errors } = await openPage(browser, server, "#/jobs");
  await page.addInitScript(() => {
    window.__longest = 0;
    window.__longtasks = 0;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) { window.__longtasks++; window.__longest = Math.max(window.__longest, e.duration); }
    }).observe({ type: "longtask", buffered: true });
  });
  const t0 = Date.now();
  const mark = (what) => console.log(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${what}`);
  await page.evaluate((h) => { location.hash = h; }, `#/jobs/${job.id}`);
  await page.reload();
  assert.equal(await page.evaluate(() => typeof window.__longest), "number", "the long-task observer is installed");

  // The each is one node whose counts reach 10,000 items.
  const node = page.locator('.job-node[data-node="1"]');
  await page.locator('.job-node[data-node="1"] .job-node-detail', { hasText: "each · 10,000" }).waitFor({ timeout: 180000 });
  assert.equal(await page.locator(".job-node").count(), 1, "the each stays one collapsed node");
  mark("graph with 10,000 items");
  await screenshot(page, "big-each-graph-running");

  // Answers a click within a second while the job runs and the page refetches it.
  const toTimeline = await clickToPaint(page, '.job-tabs [role="tab"]:nth-child(2)');
  assert.ok(toTimeline < 1000, `switching to the timeline took ${toTimeline} ms`);
  await page.locator(".job-tl-axis-label", { hasText: "10,001 rows" }).waitFor({ timeout: 180000 });
  mark("timeline with 10,001 rows");
  const rendered = await page.locator(".job-tl-row").count();
  assert.ok(rendered > 10 && rendered < 200, `only the rows in sight are rendered (${rendered})`);

  // Scroll to the middle: rows there are rendered.
  await page.evaluate(() => { const el = document.querySelector(".job-tl"); el.scrollTop = el.scrollHeight / 2; });
  await waitFor(async () => (await page.locator(".job-tl-row").first().evaluate((el) => parseInt(el.style.top, 10))) > 100000,
                10000, "rows in the middle of the timeline");

  // Back to the graph, which follows the job live while it runs (10,000 shell tasks take
  // minutes on a debug build): wait until a few hundred items have completed there,
  // without a reload.
  const toGraph = await clickToPaint(page, '.job-tabs [role="tab"]:nth-child(1)');
  assert.ok(toGraph < 1000, `switching to the graph took ${toGraph} ms`);
  const completed = async () => {
    const label = (await node.getAttribute("aria-label")) ?? "";
    const m = label.match(/([\d,]+) ✓/);
    return m ? Number(m[1].replace(/,/g, "")) : 0;
  };
  await waitFor(async () => (await completed()) >= 300, 300000, "300 items completed on the page");
  mark(`${await completed()} items completed on the page`);
  await screenshot(page, "big-each-graph");
  await page.click('.job-tabs [role="tab"]:nth-child(2)');
  await page.evaluate(() => { document.querySelector(".job-tl").scrollTop = 0; });
  await screenshot(page, "big-each-timeline");
  await page.click('.job-tabs [role="tab"]:nth-child(1)');
  const pick = await clickToPaint(page, '.job-node[data-node="1"]');
  assert.ok(pick < 1000, `selecting the each took ${pick} ms`);
  await page.locator(".job-panel").waitFor();

  // Cancelled from the page, while most items are still to run; the page says so.
  await page.click('button.job-danger:has-text("Cancel")');
  await waitFor(async () => (await server.get(`/jobs/${job.id}`)).state === "CANCELLED", 120000, "the job to be cancelled");
  await page.locator('.job-title .job-badge[data-state="CANCELLED"]').waitFor({ timeout: 120000 });
  mark("page shows CANCELLED");
  assert.equal(await node.getAttribute("data-state"), "CANCELLED");

  const { longest, count } = await page.evaluate(() => ({ longest: window.__longest, count: window.__longtasks }));
  console.log(`longest main-thread task ${Math.round(longest)} ms (${count} over 50 ms); clicks: ${Math.round(toTimeline)}, ${Math.round(toGraph)}, ${Math.round(pick)} ms`);
  assert.ok(longest < 1000, `the longest main-thread task took ${longest} ms`);
  assert.deepEqual(errors, []);
  await context.close();
});
