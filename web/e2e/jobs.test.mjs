// The jobs page in a real browser against a real `baton run standalone`: metric cards,
// rows, the state chips and tag search in the URL, cancel and restart from a row, keys;
// and the queues and nodes pages.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { contrastProblems, launchBrowser, screenshot, startBaton, waitFor } from "./lib.mjs";
import { apiJson, openPage } from "./ui-page.mjs";

let server, browser;
const ids = {};

async function stateOf(id) { return (await apiJson(server, `/jobs/${id}`)).state; }

before(async () => {
  server = await startBaton();
  browser = await launchBrowser();
  ids.ok = (await server.submit("name: greets\ndescription: says hello\ntags: [x]\ntasks:\n  - name: hello\n    run: echo hello\n")).id;
  ids.failing = (await server.submit("name: breaks\ntags: [y]\ntasks:\n  - name: boom\n    run: exit 3\n")).id;
  ids.running = (await server.submit("name: sleeps\ntags: [x, slow]\ntasks:\n  - name: nap\n    run: sleep 120\n")).id;
  await waitFor(async () => (await stateOf(ids.ok)) === "COMPLETED", 30000, "the first job to complete");
  await waitFor(async () => (await stateOf(ids.failing)) === "FAILED", 30000, "the second job to fail");
  await waitFor(async () => (await stateOf(ids.running)) === "RUNNING", 30000, "the third job to run");
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const rows = (page) => page.locator("tbody tr[data-job-id]");
const row = (page, id) => page.locator(`tbody tr[data-job-id="${id}"]`);

describe("jobs page", () => {
  it("shows the metric cards and one row per job with its state", async () => {
    const { page, context, errors } = await openPage(browser, server, "#/jobs");
    await waitFor(async () => (await rows(page).count()) === 3, 15000, "three rows");
    assert.equal(await row(page, ids.ok).getAttribute("data-state"), "COMPLETED");
    assert.equal(await row(page, ids.failing).getAttribute("data-state"), "FAILED");
    assert.equal(await row(page, ids.running).getAttribute("data-state"), "RUNNING");
    await assert.doesNotReject(row(page, ids.ok).getByText("says hello").waitFor());
    const card = (label) => page.locator(".ui-card", { hasText: label }).locator(".ui-card-value");
    await waitFor(async () => (await card("Running jobs").textContent()) === "1", 15000, "running jobs card to say 1");
    assert.equal(await card("Nodes online").textContent(), "1");
    assert.match(await card("Queue depth").textContent(), /^\d+$/);
    assert.match(await page.locator(".ui-pager").textContent(), /Page 1 of 1 · 3 jobs/);
    // Only the running job offers cancel; only the failed one restart.
    assert.equal(await row(page, ids.running).getByRole("button", { name: /^Cancel/ }).count(), 1);
    assert.equal(await row(page, ids.failing).getByRole("button", { name: /^Restart/ }).count(), 1);
    assert.equal(await row(page, ids.ok).getByRole("button").count(), 0);
    await screenshot(page, "jobs-light");
    assert.deepEqual(errors, []);
    await context.close();
  });

  it("lists only failed jobs after the Failed chip, with state=FAILED in the URL, and all again after All", async () => {
    const { page, context } = await openPage(browser, server, "#/jobs");
    await waitFor(async () => (await rows(page).count()) === 3, 15000, "three rows");
    await page.getByRole("button", { name: "Failed", exact: true }).click();
    await page.waitForURL(/state=FAILED/);
    await waitFor(async () => (await rows(page).count()) === 1, 15000, "one row");
    assert.equal(await rows(page).first().getAttribute("data-job-id"), ids.failing);
    assert.equal(await page.getByRole("button", { name: "Failed", exact: true }).getAttribute("aria-pressed"), "true");
    await page.getByRole("button", { name: "All", exact: true }).click();
    await waitFor(async () => (await rows(page).count()) === 3, 15000, "three rows again");
    assert.ok(!page.url().includes("state="));
    await context.close();
  });

  it("searches tag:x from the search box (focused with /) into the URL, lists the tagged jobs, and Esc clears it", async () => {
    const { page, context } = await openPage(browser, server, "#/jobs");
    await waitFor(async () => (await rows(page).count()) === 3, 15000, "three rows");
    await page.keyboard.press("/");
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("type")), "search");
    await page.keyboard.type("tag:x");
    await page.waitForURL(/q=tag%3Ax/);
    await waitFor(async () => (await rows(page).count()) === 2, 15000, "two rows tagged x");
    const listed = await rows(page).evaluateAll((rs) => rs.map((r) => r.dataset.jobId).sort());
    assert.deepEqual(listed, [ids.ok, ids.running].sort());
    // Esc clears the search.
    await page.keyboard.press("Escape");
    await waitFor(async () => (await rows(page).count()) === 3, 15000, "three rows after Esc");
    await context.close();
  });

  it("cancels the running job from its row, then restarts it", async () => {
    const { page, context } = await openPage(browser, server, "#/jobs");
    await row(page, ids.running).waitFor();
    await row(page, ids.running).getByRole("button", { name: /^Cancel/ }).click();
    await waitFor(async () => (await stateOf(ids.running)) === "CANCELLED", 30000, "the job to be cancelled");
    await page.locator(`tbody tr[data-job-id="${ids.running}"][data-state="CANCELLED"]`).waitFor({ timeout: 15000 });
    await row(page, ids.running).getByRole("button", { name: /^Restart/ }).click();
    await waitFor(async () => ["PENDING", "SCHEDULED", "RUNNING"].includes(await stateOf(ids.running)), 30000, "the job to run again");
    await page.locator(`tbody tr[data-job-id="${ids.running}"][data-state="RUNNING"]`).waitFor({ timeout: 15000 });
    await context.close();
  });

  it("updates a job's row while it runs, without a reload and without moving the page", async () => {
    const { page, context } = await openPage(browser, server, "#/jobs");
    await waitFor(async () => (await rows(page).count()) >= 3, 15000, "the rows");
    // Over the event stream: the indicator says so.
    await page.locator(".ui-live-live").waitFor({ timeout: 15000 });
    assert.equal(await page.locator(".ui-live").textContent(), "Live");
    // Its first step waits for the gate, opened once the page is watching.
    const gate = server.gate("steps");
    const { id } = await server.submit("name: steps\ntasks:\n" +
      [1, 2, 3].map((i) => `  - name: step ${i}\n    run: ${i === 1 ? gate.wait : "sleep 0.5"}\n`).join(""));
    await page.locator(`tr[data-job-id="${id}"][data-state="RUNNING"]`).waitFor({ timeout: 15000 });
    // From here on its state, steps, runtime and progress change in place: nothing on the
    // page moves (layout shifts, as the browser measures them for Cumulative Layout Shift).
    await page.evaluate(() => {
      window.__shift = 0;
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) if (!e.hadRecentInput) window.__shift += e.value;
      }).observe({ type: "layout-shift" });
    });
    assert.equal(await page.locator(`tr[data-job-id="${id}"] .ui-steps`).textContent(), "1/3");
    gate.open();
    await page.locator(`tr[data-job-id="${id}"][data-state="COMPLETED"]`).waitFor({ timeout: 30000 });
    assert.equal(await page.locator(`tr[data-job-id="${id}"] .ui-steps`).textContent(), "3/3");
    const shift = await page.evaluate(() => window.__shift);
    assert.ok(shift < 0.01, `the page moved while the job ran (layout shift ${shift})`);
    await context.close();
  });

  it("moves the selection with j, opens it with Enter, goes to queues with g q and shows the keys with ?", async () => {
    const { page, context } = await openPage(browser, server, "#/jobs");
    await waitFor(async () => (await rows(page).count()) >= 3, 15000, "the rows");
    const second = await rows(page).nth(1).getAttribute("data-job-id");
    await page.keyboard.press("j");
    assert.equal(await rows(page).nth(1).getAttribute("aria-current"), "true");
    await page.keyboard.press("Enter");
    await page.waitForURL(new RegExp(`#/jobs/${second}`));
    await page.keyboard.press("g");
    await page.keyboard.press("q");
    await page.waitForURL(/#\/queues/);
    await page.keyboard.press("?");
    await page.getByRole("dialog", { name: "Keyboard shortcuts" }).waitFor();
    await page.keyboard.press("Escape");
    await page.getByRole("dialog").waitFor({ state: "detached" });
    await context.close();
  });

  it("renders in dark mode with AA contrast in both themes, and at 390 px without sideways scrolling (screenshots of both)", async () => {
    const dark = await openPage(browser, server, "#/jobs", { colorScheme: "dark" });
    await waitFor(async () => (await rows(dark.page).count()) >= 3, 15000, "the rows");
    await screenshot(dark.page, "jobs-dark");
    assert.deepEqual(await contrastProblems(dark.page), [], "text below WCAG AA contrast (dark)");
    await dark.context.close();
    const light = await openPage(browser, server, "#/jobs", { colorScheme: "light" });
    await waitFor(async () => (await rows(light.page).count()) >= 3, 15000, "the rows");
    assert.deepEqual(await contrastProblems(light.page), [], "text below WCAG AA contrast (light)");
    // The check sees pale text when there is some.
    await light.page.evaluate(() => {
      const p = document.createElement("p");
      p.textContent = "pale control";
      p.style.cssText = "color:#bbbbbb;background:#ffffff";
      document.querySelector("main").append(p);
    });
    assert.deepEqual((await contrastProblems(light.page)).map((x) => x.text), ["pale control"]);
    await light.context.close();
    const phone = await openPage(browser, server, "#/jobs", { width: 390, height: 844 });
    await waitFor(async () => (await rows(phone.page).count()) >= 3, 15000, "the rows");
    // No sideways scrolling at 390 px.
    assert.ok(await phone.page.evaluate(() => document.documentElement.scrollWidth <= 390));
    await screenshot(phone.page, "jobs-phone");
    await phone.context.close();
  });
});

describe("queues and nodes pages", () => {
  it("list the default queue with its chart (delete asks first and shows the refusal) and the standalone node", async () => {
    const { page, context } = await openPage(browser, server, "#/queues");
    await page.locator('tr[data-queue="default"]').waitFor();
    assert.equal(await page.locator('tr[data-queue="default"] svg.ui-spark').count(), 1);
    await page.getByText("since this page was opened").waitFor();
    // Authentication is off: everyone may delete a task queue (not the engine's own).
    assert.equal(await page.locator('tr[data-queue="default"]').getByRole("button", { name: /Delete queue/ }).count(), 1);
    assert.equal(await page.locator('tr[data-queue="x-heartbeat"]').getByRole("button").count(), 0);
    await screenshot(page, "queues");
    assert.deepEqual(await contrastProblems(page), [], "queues: text below WCAG AA contrast");
    // Deleting asks first; the server refuses a queue a worker reads, and the page says why.
    await page.locator('tr[data-queue="default"]').getByRole("button", { name: /Delete queue/ }).click();
    const dialog = page.getByRole("dialog", { name: "Delete queue default?" });
    await dialog.getByRole("button", { name: "Delete queue" }).click();
    await dialog.waitFor({ state: "detached" });
    await page.locator(".ui-flash-bad", { hasText: "Could not delete default" }).waitFor();
    await page.locator('tr[data-queue="default"]').waitFor();
    await page.goto(page.url().replace("#/queues", "#/nodes"));
    await page.locator("tr[data-node]").first().waitFor();
    assert.match(await page.locator("tr[data-node]").first().textContent(), /UP/);
    await screenshot(page, "nodes");
    assert.deepEqual(await contrastProblems(page), [], "nodes: text below WCAG AA contrast");
    await context.close();
  });
});
