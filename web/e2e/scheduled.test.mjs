// Scheduled jobs in a real browser: the list, a scheduled job's page, pause, resume, edit
// and delete (with its confirmation), each checked against the API.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { contrastProblems, launchBrowser, screenshot, startBaton, waitFor } from "./lib.mjs";
import { apiJson, openPage } from "./ui-page.mjs";

let server, browser, sched;

before(async () => {
  server = await startBaton();
  browser = await launchBrowser();
  // A schedule that fires once a year, so that no job runs during the test.
  sched = await apiJson(server, "/scheduled-jobs", {
    method: "POST", type: "text/yaml",
    body: "name: yearly report\ndescription: once a year\nschedule:\n  cron: \"0 9 1 1 *\"\n  timezone: Europe/Paris\n" +
          "tasks:\n  - name: report\n    run: echo report\n",
  });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const stateOf = async () => (await apiJson(server, `/scheduled-jobs/${sched.id}`)).state;

describe("scheduled jobs", () => {
  it("lists the scheduled job with its cron, time zone and state", async () => {
    const { page, context, errors } = await openPage(browser, server, "#/scheduled");
    const row = page.locator(`tr[data-id="${sched.id}"]`);
    await row.waitFor();
    const text = await row.textContent();
    assert.match(text, /yearly report/);
    assert.match(text, /0 9 1 1 \*/);
    assert.match(text, /Europe\/Paris/);
    assert.match(text, /ACTIVE/);
    await screenshot(page, "scheduled");
    assert.deepEqual(await contrastProblems(page), [], "scheduled: text below WCAG AA contrast");
    assert.deepEqual(errors, []);
    await context.close();
  });

  it("opens the scheduled job, pauses it and resumes it", async () => {
    const { page, context } = await openPage(browser, server, "#/scheduled");
    await page.getByRole("link", { name: "yearly report" }).click();
    await page.waitForURL(new RegExp(`#/scheduled/${sched.id}$`));
    await page.getByRole("heading", { name: "yearly report" }).waitFor();
    assert.match(await page.locator(".ui-code").textContent(), /cron: 0 9 1 1 \*/);
    await screenshot(page, "scheduled-detail");
    assert.deepEqual(await contrastProblems(page), [], "scheduled-detail: text below WCAG AA contrast");
    await page.getByRole("button", { name: "Pause" }).click();
    await waitFor(async () => (await stateOf()) === "PAUSED", 15000, "PAUSED in the API");
    await page.locator(".ui-head .ui-badge", { hasText: "PAUSED" }).waitFor();
    await page.getByRole("button", { name: "Resume" }).click();
    await waitFor(async () => (await stateOf()) === "ACTIVE", 15000, "ACTIVE in the API");
    await page.locator(".ui-head .ui-badge", { hasText: "ACTIVE" }).waitFor();
    await context.close();
  });

  it("edits the schedule in the editor and saves it", async () => {
    const { page, context } = await openPage(browser, server, `#/scheduled/${sched.id}`);
    await page.getByRole("link", { name: "Edit" }).click();
    await page.waitForURL(new RegExp(`#/scheduled/${sched.id}/edit$`));
    const cron = page.getByLabel(/^Cron/);
    await waitFor(async () => (await cron.inputValue()) === "0 9 1 1 *", 15000, "the cron in the form");
    await cron.fill("30 8 * * MON");
    await page.locator('.ui-status[data-status="valid"]').waitFor({ timeout: 15000 });
    await page.getByRole("button", { name: "Save schedule" }).click();
    await page.waitForURL(new RegExp(`#/scheduled/${sched.id}$`));
    const s = await apiJson(server, `/scheduled-jobs/${sched.id}`);
    assert.equal(s.schedule.cron, "30 8 * * MON");
    assert.equal(s.schedule.timezone, "Europe/Paris");
    await page.locator(".ui-dl code", { hasText: "30 8 * * MON" }).waitFor();
    await context.close();
  });

  it("deletes the scheduled job only after the confirmation, which keeps focus inside and closes on Esc or Cancel", async () => {
    const { page, context } = await openPage(browser, server, `#/scheduled/${sched.id}`);
    await page.getByRole("button", { name: "Delete" }).click();
    const dialog = page.getByRole("dialog", { name: "Delete this scheduled job?" });
    await dialog.waitFor();
    // Focus starts on the confirmation, Tab stays inside the dialog, Esc closes it. The
    // focused button must be the dialog's own (the page's Delete button has the same text).
    const focused = () => page.evaluate(() =>
      document.activeElement?.closest('[role="dialog"]') ? document.activeElement.textContent : "outside the dialog");
    assert.equal(await focused(), "Delete");
    await page.keyboard.press("Tab");
    assert.equal(await focused(), "Cancel");
    await page.keyboard.press("Tab");
    assert.equal(await focused(), "Delete");
    await page.keyboard.press("Shift+Tab");
    assert.equal(await focused(), "Cancel");
    await page.keyboard.press("Shift+Tab");
    assert.equal(await focused(), "Delete");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Delete" }).click();
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "detached" });
    assert.equal(await stateOf(), "ACTIVE");
    await page.getByRole("button", { name: "Delete" }).click();
    await dialog.getByRole("button", { name: "Delete" }).click();
    await page.waitForURL(/#\/scheduled$/);
    await waitFor(async () => { try { await stateOf(); return false; } catch (e) { return /404/.test(e.message); } },
                  15000, "the scheduled job to be gone");
    await context.close();
  });
});
