// The editor in a real browser: a problem the server finds is marked on its line and
// listed, a fixed document is valid, the inputs form writes into the YAML, Ctrl+Enter
// submits and the job runs to COMPLETED with the edited input; duplicating a job opens
// its YAML; a scheduled job is created from the schedule fields. Needs a server with
// POST /jobs?dryRun=true.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { contrastProblems, launchBrowser, repo, screenshot, startBaton, waitFor } from "./lib.mjs";
import { apiJson, openPage } from "./ui-page.mjs";

let server, browser;

before(async () => {
  server = await startBaton();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

// Line 6 holds the error: `retry` must be a map.
const BROKEN = `name: e2e hello
inputs:
  who: world
tasks:
  - name: greet
    retry: 3
    var: greeting
    env:
      WHO: "{{ inputs.who }}"
    run: echo -n "hello $WHO" > $TORK_OUTPUT
output: "{{ tasks.greeting }}"
`;
const FIXED = BROKEN.replace("    retry: 3\n", "    retry:\n      limit: 1\n");

async function setDoc(page, text) {
  await page.locator(".cm-content").click();
  await page.keyboard.press("Control+a");
  await page.keyboard.insertText(text);
}
const editorText = (page) => page.locator(".cm-content").evaluate((el) => el.cmView?.view?.state?.doc?.toString() ??
  [...el.querySelectorAll(".cm-line")].map((l) => l.textContent).join("\n"));
const status = (page, kind) => page.locator(`.ui-status[data-status="${kind}"]`);

describe("editor", () => {
  let jobId;

  it("marks the server's problem on its line, lists it, and jumps to it", async () => {
    const { page, context, errors } = await openPage(browser, server, "#/editor");
    await page.locator(".cm-content").waitFor();
    await status(page, "valid").waitFor({ timeout: 15000 });   // the starter template
    await setDoc(page, BROKEN);
    await status(page, "invalid").waitFor({ timeout: 15000 });
    const marked = await page.locator(".cm-line").evaluateAll((ls) =>
      ls.map((l, i) => (l.querySelector(".cm-lintRange-error") ? i + 1 : 0)).filter(Boolean));
    assert.deepEqual(marked, [6]);
    assert.equal(await page.locator(".cm-gutter-lint .cm-lint-marker-error").count(), 1);
    const problem = page.locator(".ui-problems button").first();
    assert.match(await problem.textContent(), /^Line 6:\d+\s*tasks\[0\]\.retry: /);
    await page.locator(".cm-content").press("Control+Home");
    await problem.click();
    assert.match(await page.locator(".cm-activeLine").textContent(), /retry: 3/);
    await screenshot(page, "editor-error");
    assert.deepEqual(await contrastProblems(page), [], "editor-error: text below WCAG AA contrast");
    await setDoc(page, FIXED);
    await status(page, "valid").waitFor({ timeout: 15000 });
    assert.match(await status(page, "valid").textContent(), /Valid — “e2e hello”/);
    assert.equal(await page.locator(".cm-lintRange-error").count(), 0);
    assert.deepEqual(errors, []);
    await context.close();
  });

  it("writes the inputs form into the YAML, submits with Ctrl+Enter and the job completes with that input", async () => {
    const { page, context } = await openPage(browser, server, "#/editor");
    await status(page, "valid").waitFor({ timeout: 15000 });
    await setDoc(page, FIXED);
    const who = page.getByLabel("who", { exact: true });
    await who.waitFor();
    await who.fill("browser");
    await waitFor(async () => (await editorText(page)).includes("  who: browser"), 5000, "the input in the YAML");
    await status(page, "valid").waitFor({ timeout: 15000 });
    await page.locator(".cm-content").press("Control+Enter");
    await page.waitForURL(/#\/jobs\/[0-9a-f]+/);
    jobId = page.url().match(/#\/jobs\/([0-9a-f]+)/)[1];
    await waitFor(async () => (await apiJson(server, `/jobs/${jobId}`)).state === "COMPLETED", 30000, "the job to complete");
    assert.equal((await apiJson(server, `/jobs/${jobId}`)).result, "hello browser");
    // The jobs list shows it COMPLETED too.
    await page.goto(page.url().replace(/#\/jobs\/.*/, "#/jobs"));
    await page.locator(`tr[data-job-id="${jobId}"][data-state="COMPLETED"]`).waitFor({ timeout: 15000 });
    await context.close();
  });

  it("opens a duplicate of a job as its YAML and submits it as a new job", async () => {
    assert.ok(jobId, "the previous test submitted a job");
    const { page, context } = await openPage(browser, server, `#/editor?from=${jobId}`);
    await waitFor(async () => (await editorText(page)).includes("name: e2e hello"), 15000, "the job's YAML");
    const text = await editorText(page);
    assert.match(text, /who: browser/);
    assert.match(text, /retry:\n\s+limit: 1/);
    await status(page, "valid").waitFor({ timeout: 15000 });
    await page.getByRole("button", { name: "Submit job" }).click();
    await page.waitForURL(/#\/jobs\/[0-9a-f]+/);
    const copy = page.url().match(/#\/jobs\/([0-9a-f]+)/)[1];
    assert.notEqual(copy, jobId);
    await waitFor(async () => (await apiJson(server, `/jobs/${copy}`)).state === "COMPLETED", 30000, "the copy to complete");
    await context.close();
  });

  it("duplicates every example job into YAML the server accepts", async () => {
    // The examples that block POST /jobs (`wait`) or are scheduled jobs are left out.
    const files = readdirSync(join(repo, "examples")).filter((f) => /\.(ya?ml|json)$/.test(f))
      .map((f) => ({ f, body: readFileSync(join(repo, "examples", f), "utf8") }))
      .filter(({ body }) => !/^\s*"?wait"?:/m.test(body) && !/^\s*"?schedule"?:/m.test(body));
    assert.ok(files.length >= 15, `examples found: ${files.length}`);
    const { page, context } = await openPage(browser, server, "#/jobs");
    for (const { f, body } of files) {
      const job = await server.submit(body, f.endsWith(".json") ? "application/json" : "text/yaml");
      await page.evaluate((id) => { location.hash = `#/editor?from=${id}`; }, job.id);
      await page.locator(".ui-status[data-status=\"valid\"]").and(page.locator(`[data-name="${job.name.replace(/"/g, '\\"')}"]`))
        .waitFor({ timeout: 15000 }).catch(async () => {
          throw new Error(`${f}: not valid as duplicated:\n${await page.locator(".ui-status").textContent()}\n` +
                          `${await page.locator(".ui-problems").textContent().catch(() => "")}\n${await editorText(page)}`);
        });
    }
    await context.close();
  });

  it("keeps a new job's draft while the app is open, until Start over", async () => {
    const { page, context } = await openPage(browser, server, "#/editor");
    await status(page, "valid").waitFor({ timeout: 15000 });
    await setDoc(page, FIXED.replace("e2e hello", "my draft"));
    await page.getByRole("link", { name: "Jobs", exact: true }).click();
    await page.waitForURL(/#\/jobs$/);
    await page.getByRole("link", { name: "New job" }).click();
    await waitFor(async () => (await editorText(page)).includes("name: my draft"), 15000, "the draft back");
    await page.getByRole("button", { name: "Start over" }).click();
    await waitFor(async () => (await editorText(page)).startsWith("name: my job\n"), 5000, "the template back");
    await context.close();
  });

  it("creates a scheduled job from the schedule fields", async () => {
    const { page, context } = await openPage(browser, server, "#/editor?schedule=1");
    await status(page, "valid").waitFor({ timeout: 15000 });
    await page.getByLabel(/^Cron/).fill("0 9 1 1 *");
    await page.getByLabel(/^Time zone/).fill("Asia/Tokyo");
    await waitFor(async () => (await editorText(page)).includes("cron: 0 9 1 1 *"), 5000, "the cron in the YAML");
    await status(page, "valid").waitFor({ timeout: 15000 });
    await page.getByRole("button", { name: "Create scheduled job" }).click();
    await page.waitForURL(/#\/scheduled\/[0-9a-f]+$/);
    const id = page.url().match(/#\/scheduled\/([0-9a-f]+)/)[1];
    const s = await apiJson(server, `/scheduled-jobs/${id}`);
    assert.equal(s.schedule.cron, "0 9 1 1 *");
    assert.equal(s.schedule.timezone, "Asia/Tokyo");
    await context.close();
  });
});
