// The job page in a real browser against a real `baton run standalone`: the graph follows
// a job live to COMPLETED, a task's log shows ANSI colours and can be searched, the
// timeline opens, retries show as attempts, and a running job is cancelled and restarted
// from its page. Screenshots go under build/ui-screenshots.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { contrastProblems, launchBrowser, pageUrl, screenshot, startBaton, waitFor } from "./lib.mjs";
import { openPage as open } from "./ui-page.mjs";

let server, browser;
before(async () => {
  server = await startBaton();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

async function openPage(hash, opts) {
  const { page, errors } = await open(browser, server, hash, opts);
  return { page, errors };
}

async function jobState(id) { return (await server.get(`/jobs/${id}`)).state; }

const JOB = (wait) => `
name: ui job test
tasks:
  - name: first
    run: ${wait}; echo first
  - name: second
    run: echo second
  - name: fan out
    parallel:
      tasks:
        - {name: left, run: echo left}
        - {name: right, run: echo right}
  - name: colour
    run: |
      printf '\\033[31mred\\033[0m plain\\n'
      for i in $(seq 1 30); do echo "line $i"; done
`;

test("the graph follows a job live to COMPLETED; a task's log is coloured and searchable; the timeline opens", async () => {
  const first = server.gate("first");
  const job = await server.submit(JOB(first.wait));
  const { page, errors } = await openPage(`#/jobs/${job.id}`);
  const last = page.locator('.job-node[data-node="4"]');
  await last.waitFor({ timeout: 60000 });
  // Opened while the first task waits: the last one has not run yet.
  assert.notEqual(await last.getAttribute("data-state"), "COMPLETED");
  first.open();
  await page.locator('.job-node[data-node="4"][data-state="COMPLETED"]').waitFor({ timeout: 60000 });
  for (const id of ["1", "2", "3", "3/p0", "3/p1", "4"]) {
    assert.equal(await page.locator(`.job-node[data-node="${id}"]`).getAttribute("data-state"), "COMPLETED", `node ${id}`);
  }
  await page.locator('.job-title .job-badge[data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  // The changes came over GET /events, not polling (the shell's indicator).
  await page.locator(".ui-live.ui-live-live").waitFor({ timeout: 10000 });
  await screenshot(page, "job-graph-light-1280");

  // Keyboard: arrows move between tasks, Enter opens one.
  await page.focus('.job-node[data-node="1"]');
  await page.keyboard.press("ArrowDown");
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute("data-node")), "2");
  await page.keyboard.press("Enter");
  await page.locator(".job-panel-head h2", { hasText: "second" }).waitFor();

  // Open the coloured task's log: the red text is a red span, as text (no markup).
  await last.click();
  await waitFor(() => new URL(page.url()).hash.includes("task="), 5000, "task in the URL");
  const red = page.locator(".job-log-text span.job-fg-c1", { hasText: "red" });
  await red.first().waitFor({ timeout: 15000 });
  assert.equal(await red.first().textContent(), "red");
  const colour = await red.first().evaluate((el) => getComputedStyle(el).color);
  const [r, g, b] = colour.match(/\d+/g).map(Number);
  assert.ok(r > 200 && g < 130 && b < 130, `red text is red, not ${colour}`);
  await page.locator(".job-log-line", { hasText: "line 30" }).waitFor();

  // Search: "line 2" is in lines 2 and 20–29.
  await page.fill(".job-log-search", "line 2");
  await page.locator(".job-log-count", { hasText: "1 / 11" }).waitFor();
  await page.press(".job-log-search", "Enter");
  await page.locator(".job-log-count", { hasText: "2 / 11" }).waitFor();
  assert.equal(await page.locator("mark.job-mark-current").textContent(), "line 2");
  assert.equal(await page.locator("mark.job-mark").count(), 11);
  await screenshot(page, "job-task-log");

  // Esc (outside the search box) closes the panel.
  await page.fill(".job-log-search", "");
  await page.locator(".job-tabs").click({ position: { x: 600, y: 5 } });
  await page.keyboard.press("Escape");
  await page.locator(".job-panel").waitFor({ state: "detached" });
  assert.ok(!new URL(page.url()).hash.includes("task="));

  // The timeline: a row per slot (4 top-level, 2 parallel children), in the URL.
  await page.click('.job-tabs [role="tab"]:has-text("Timeline")');
  await page.locator(".job-tl-row").nth(5).waitFor();
  assert.equal(await page.locator(".job-tl-row").count(), 6);
  assert.ok(new URL(page.url()).hash.includes("tab=timeline"));
  await screenshot(page, "job-timeline");

  await page.click('.job-tabs [role="tab"]:has-text("Definition")');
  await page.locator(".job-def-text", { hasText: "name: ui job test" }).waitFor();
  await page.click('.job-def-tools button:has-text("Copy")');
  await page.locator('.job-def-tools button:has-text("Copied")').waitFor();
  await page.context().grantPermissions(["clipboard-read"]);
  assert.match(await page.evaluate(() => navigator.clipboard.readText()), /^name: ui job test\n/);
  assert.deepEqual(errors, []);
  await page.context().close();

  // The same graph dark, and on a phone.
  for (const [name, opts] of [["job-graph-dark-1280", { colorScheme: "dark" }],
                              ["job-graph-light-390", { width: 390, height: 844 }],
                              ["job-graph-dark-390", { width: 390, height: 844, colorScheme: "dark" }]]) {
    const { page: p } = await openPage(`#/jobs/${job.id}`, opts);
    await p.locator('.job-node[data-node="4"][data-state="COMPLETED"]').waitFor({ timeout: 30000 });
    const overflow = await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${name}: the page is ${overflow}px wider than the screen`);
    assert.deepEqual(await contrastProblems(p), [], `${name}: text below WCAG AA contrast`);
    await screenshot(p, name);
    await p.context().close();
  }
});

test("a retried task shows its attempts in the panel and as separate bars in the timeline", async () => {
  const job = await server.submit(`
name: retry ui test
tasks:
  - name: flaky
    run: echo "try"; exit 1
    retry: {limit: 1}
`);
  await waitFor(async () => (await jobState(job.id)) === "FAILED", 60000, "the job to fail");
  const { page } = await openPage(`#/jobs/${job.id}`);
  const node = page.locator('.job-node[data-node="1"][data-state="FAILED"]');
  await node.waitFor({ timeout: 30000 });
  assert.match(await node.getAttribute("aria-label"), /2 attempts/);
  await node.click();
  const attempts = page.locator(".job-attempts .job-attempt");
  await attempts.nth(1).waitFor();
  assert.equal(await attempts.count(), 2);
  assert.equal(await attempts.nth(1).getAttribute("aria-pressed"), "true");
  await attempts.nth(0).click();
  await waitFor(() => new URL(page.url()).hash.includes("attempt=1"), 5000, "attempt=1 in the URL");
  await page.locator(".job-facts dd", { hasText: "attempt 1 of 2" }).waitFor();
  // Why the attempt failed (its row's reason).
  assert.equal(await page.locator('.job-facts dd[data-reason="exit"]').textContent(), "exit code 1");

  await page.click('.job-tabs [role="tab"]:has-text("Timeline")');
  const bars = page.locator(".job-tl-bar");
  await bars.nth(1).waitFor();
  assert.equal(await bars.count(), 2);
  assert.equal(await page.locator(".job-tl-bar.job-tl-retry").count(), 1);
  assert.equal(await page.locator(".job-tl-bar.job-tl-retry").getAttribute("data-attempt"), "2");
  await screenshot(page, "job-retry-timeline");
  await page.context().close();
});

test("a running job is cancelled from its page, then restarted", async () => {
  const job = await server.submit(`
name: long ui test
tasks:
  - name: wait
    run: sleep 120
`);
  const { page } = await openPage(`#/jobs/${job.id}`);
  await page.locator('.job-title .job-badge[data-state="RUNNING"]').waitFor({ timeout: 30000 });
  await page.click('.job-actions button:has-text("Cancel")');
  await page.locator('.job-title .job-badge[data-state="CANCELLED"]').waitFor({ timeout: 30000 });
  assert.equal(await jobState(job.id), "CANCELLED");
  assert.equal(await page.locator('.job-actions button:has-text("Cancel")').count(), 0);
  await screenshot(page, "job-cancelled");

  await page.click('.job-actions button:has-text("Restart")');
  await page.locator('.job-title .job-badge:is([data-state="SCHEDULED"], [data-state="RUNNING"])').waitFor({ timeout: 30000 });
  await waitFor(async () => ["SCHEDULED", "RUNNING"].includes(await jobState(job.id)), 30000, "the job to run again");
  await page.locator('.job-title .job-badge[data-state="RUNNING"]').waitFor({ timeout: 30000 });
  await page.locator('.job-actions button:has-text("Cancel")').waitFor();
  await fetch(`${server.url}/jobs/${job.id}/cancel`, { method: "PUT" });
  await page.context().close();
});

test("a running job is paused from its page, holds its next task, and is resumed", async () => {
  const end = server.gate("pausing");
  const job = await server.submit(`
name: pause ui test
tasks:
  - name: first
    run: ${end.wait}
  - name: second
    run: echo second ran
`);
  const { page } = await openPage(`#/jobs/${job.id}`);
  await page.locator('.job-title .job-badge[data-state="RUNNING"]').waitFor({ timeout: 30000 });
  await page.click('.job-actions button:has-text("Pause")');
  await page.locator('.job-title .job-badge[data-state="PAUSED"]').waitFor({ timeout: 30000 });
  assert.equal(await jobState(job.id), "PAUSED");
  assert.equal(await page.locator('.job-actions button:has-text("Pause")').count(), 0);
  await end.open();
  // first ends while paused; second is made but held, not started.
  await waitFor(async () => (await server.get(`/jobs/${job.id}`)).execution?.find((t) => t.name === "second")?.state === "PENDING",
    30000, "second to be held");
  assert.equal(await jobState(job.id), "PAUSED");
  await screenshot(page, "job-paused");
  await page.click('.job-actions button:has-text("Resume")');
  await page.locator('.job-title .job-badge[data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  const second = (await server.get(`/jobs/${job.id}`)).execution.find((t) => t.name === "second");
  assert.equal(second.state, "COMPLETED");
  await page.context().close();
});

test("a failed job is rerun from its page: only its failed task runs again, its history kept", async () => {
  const ok = server.gate("rerun-ok");
  const job = await server.submit(`
name: rerun ui test
tasks:
  - name: first
    run: echo first
  - name: flaky
    run: test -e ${ok.wait.match(/-e (\S+) \]/)[1]}
`);
  await waitFor(async () => (await jobState(job.id)) === "FAILED", 30000, "the job to fail");
  const { page } = await openPage(`#/jobs/${job.id}`);
  await page.locator('.job-title .job-badge[data-state="FAILED"]').waitFor({ timeout: 30000 });
  assert.equal(await page.locator('.job-rerun select').inputValue(), "failed_only");
  ok.open();
  await page.click('.job-rerun button:has-text("Rerun")');
  await page.locator('.job-title .job-badge[data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  const rows = (await server.get(`/jobs/${job.id}`)).execution.map((t) => `${t.name}=${t.state}`);
  assert.deepEqual(rows, ["first=COMPLETED", "flaky=FAILED", "flaky=COMPLETED"]);
  // A completed job offers every task again.
  assert.equal(await page.locator('.job-rerun select').inputValue(), "all");
  await screenshot(page, "job-rerun");
  await page.context().close();
});

test("a failed task is skipped with a result from its panel, and its job carries on", async () => {
  const job = await server.submit(`
name: skip ui test
tasks:
  - name: fetch
    var: price
    run: exit 3
  - name: use
    env:
      PRICE: "{{ tasks.price }}"
    run: echo -n "price $PRICE" > $BATON_OUTPUT
    var: used
`);
  await waitFor(async () => (await jobState(job.id)) === "FAILED", 30000, "the job to fail");
  const fetchRow = (await server.get(`/jobs/${job.id}`)).execution.find((t) => t.name === "fetch");
  const { page } = await openPage(`#/jobs/${job.id}?task=${fetchRow.id}`);
  await page.locator(".job-skip input").fill("42");
  await page.click('.job-skip button:has-text("Skip")');
  await page.locator('.job-title .job-badge[data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  const done = await server.get(`/jobs/${job.id}`);
  assert.deepEqual(done.execution.map((t) => `${t.name}=${t.state}`), ["fetch=FAILED", "fetch=SKIPPED", "use=COMPLETED"]);
  assert.equal(done.context.tasks.used, "price 42");
  await page.context().close();
});

test("a running task's log tails new lines without a reload and follows the end", async () => {
  const end = server.gate("ticker");
  const job = await server.submit(`
name: ticker ui test
tasks:
  - name: ticker
    run: for i in $(seq 1 39); do echo "tick $i"; sleep 0.25; done; ${end.wait}; echo "tick 40"
`);
  const row = await waitFor(async () => (await server.get(`/jobs/${job.id}`)).execution?.[0], 30000, "the task row");
  const { page } = await openPage(`#/jobs/${job.id}?task=${row.id}`);
  await page.locator(".job-log-line", { hasText: /^tick \d+$/ }).first().waitFor({ timeout: 30000 });
  // Opened mid-run: the last line is not there yet, then arrives in the same page.
  assert.equal(await page.locator(".job-log-line", { hasText: /^tick 40$/ }).count(), 0);
  end.open();
  await page.locator(".job-log-line", { hasText: /^tick 40$/ }).waitFor({ timeout: 60000 });
  assert.equal(await page.locator(".job-log-line").count(), 40);
  // Followed the end: the last line is in sight.
  const box = await page.locator(".job-log-text").boundingBox();
  const last = await page.locator(".job-log-line", { hasText: /^tick 40$/ }).boundingBox();
  assert.ok(last.y >= box.y && last.y + last.height <= box.y + box.height + 1, "the last line is scrolled into view");
  await page.context().close();
});

test("a long log shows its newest parts first and loads older ones on demand", async () => {
  const job = await server.submit(`
name: long log ui test
tasks:
  - name: many lines
    run: for i in $(seq 1 300); do echo "line $i"; sleep 0.01; done
`);
  await waitFor(async () => (await jobState(job.id)) === "COMPLETED", 60000, "the job to complete");
  const { execution: [row] } = await server.get(`/jobs/${job.id}`);
  const { totalItems } = await server.get(`/tasks/${row.id}/log?size=1`);
  // tab=log: the page opens scrolled to the task's log.
  const { page } = await openPage(`#/jobs/${job.id}?task=${row.id}&tab=log`, { height: 600 });
  const lines = page.locator(".job-log-line");
  await page.locator(".job-log-line", { hasText: /^line 300$/ }).waitFor({ timeout: 30000 });
  const [top, scrolled] = await page.locator(".job-log").evaluate((el) => [el.getBoundingClientRect().top, window.scrollY]);
  assert.ok(scrolled > 0 && top >= 0 && top < 500, `the page scrolled (${scrolled}) to bring the log in sight (top ${top})`);
  const older = page.locator(".job-log-older");
  // Lines written 10 ms apart are shipped as parts of their own: more than a page (100).
  assert.ok(totalItems > 100, `the log has ${totalItems} parts`);
  // The newest 100 parts first; each click reads the page of parts just before them.
  assert.ok((await lines.count()) < 300);
  let clicks = 0;
  for (; clicks < 10 && await older.count(); clicks++) {
    await older.click();
    await page.waitForFunction(() => { const b = document.querySelector(".job-log-older"); return !b || !b.disabled; });
  }
  assert.ok(clicks >= 1 && clicks <= Math.ceil(totalItems / 100), `${clicks} clicks for ${totalItems} parts`);
  await page.locator(".job-log-line", { hasText: /^line 1$/ }).waitFor();
  assert.equal(await lines.count(), 300);
  assert.equal(await lines.first().textContent(), "line 1");
  assert.equal(await lines.nth(149).textContent(), "line 150");
  await page.context().close();
});

test("a graph job's page draws its needs from its plan, with rules and conditions on the edges, and a switch's branch not taken beside it", async () => {
  const job = await server.submit(`
name: ui graph test
mode: dag
tasks:
  - {name: build, var: kind, run: echo -n csv > $BATON_OUTPUT}
  - {name: test, needs: [build], run: echo test}
  - {name: lint, needs: [{task: build, when: "{{ tasks.kind == 'csv' }}"}], run: echo lint}
  - {name: report, needs: [test, lint], triggerRule: all_done, run: echo report}
  - name: by kind
    needs: [build]
    switch:
      value: "{{ tasks.kind }}"
      cases:
        csv: [{name: parse csv, run: echo csv}]
      default: [{name: other, run: echo other}]
`);
  await waitFor(async () => (await jobState(job.id)) === "COMPLETED", 60000, "the job to complete");
  const { page, errors } = await openPage(`#/jobs/${job.id}`);
  for (const edge of ["1>2", "1>3", "2>4", "3>4", "1>5"]) {
    // Attached, not "visible": a straight edge has an empty box.
    await page.locator(`path.job-edge[data-edge="${edge}"]`).waitFor({ state: "attached", timeout: 30000 });
  }
  // Not the list's order: lint does not wait for test.
  assert.equal(await page.locator('path.job-edge[data-edge="2>3"]').count(), 0);
  assert.equal(await page.locator('text.job-edge-label[data-edge="3>4"]').textContent(), "all_done");
  assert.equal(await page.locator('text.job-edge-label[data-edge="1>3"]').textContent(), "when {{ tasks.kind == 'csv' }}");
  // The switch: its case chained after it, the default beside it, skipped.
  await page.locator('.job-node[data-node="5/s0"][data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  const other = page.locator('.job-node[data-node="5/n0"]');
  assert.equal(await other.getAttribute("data-state"), "SKIPPED");
  assert.match(await other.getAttribute("aria-label"), /^other: skipped, branch not taken$/);
  await screenshot(page, "job-graph-dag");
  assert.deepEqual(errors, []);
  await page.context().close();
});

test("a parallel's needs are edges between its tasks, its skipped task shown so", async () => {
  const job = await server.submit(`
name: ui parallel graph test
tasks:
  - name: checks
    parallel:
      tasks:
        - {name: fetch, run: echo fetch}
        - {name: lint, run: echo lint; exit 3}
        - {name: build, needs: [fetch], run: echo build}
        - {name: ship, needs: [build, lint], run: echo ship}
        - {name: report, needs: [build, lint], triggerRule: all_done, run: echo report}
`);
  await waitFor(async () => (await jobState(job.id)) === "FAILED", 60000, "the job to fail");
  const { page, errors } = await openPage(`#/jobs/${job.id}`);
  for (const edge of ["1>1/p0", "1>1/p1", "1/p0>1/p2", "1/p2>1/p3", "1/p1>1/p3", "1/p2>1/p4", "1/p3>1/join", "1/p4>1/join"]) {
    await page.locator(`path.job-edge[data-edge="${edge}"]`).waitFor({ state: "attached", timeout: 30000 });
  }
  // build needs fetch: not forked from the parallel, nor joined (ship and report need it).
  assert.equal(await page.locator('path.job-edge[data-edge="1>1/p2"]').count(), 0);
  assert.equal(await page.locator('path.job-edge[data-edge="1/p2>1/join"]').count(), 0);
  assert.equal(await page.locator('text.job-edge-label[data-edge="1/p1>1/p4"]').textContent(), "all_done");
  // lint failed: ship is skipped by its rule, report ran.
  assert.equal(await page.locator('.job-node[data-node="1/p3"]').getAttribute("data-state"), "SKIPPED");
  assert.equal(await page.locator('.job-node[data-node="1/p4"]').getAttribute("data-state"), "COMPLETED");
  assert.equal(await page.locator('.job-node[data-node="1"]').getAttribute("data-state"), "FAILED");
  await screenshot(page, "job-graph-parallel-needs");
  assert.deepEqual(errors, []);
  await page.context().close();
});

test("a wait for a signal shows what it waits for, holds no node, and completes when the signal comes", async () => {
  const job = await server.submit(`
name: ui wait test
tasks:
  - name: gate
    var: by
    wait: {signal: approved, timeout: 1h}
  - name: ship
    run: echo shipped
`);
  const rowOf = async (name) => (await server.get(`/jobs/${job.id}`)).execution.find((t) => t.name === name);
  await waitFor(async () => (await rowOf("gate"))?.state === "RUNNING", 30000, "the wait to run");
  const { page, errors } = await openPage(`#/jobs/${job.id}`);
  const node = page.locator('.job-node[data-node="1"][data-state="RUNNING"]');
  await node.waitFor({ timeout: 30000 });
  assert.match(await node.getAttribute("aria-label"), /wait · signal approved/);
  await node.click();
  const waits = page.locator(".job-facts dd.job-wait");
  await waits.waitFor();
  assert.match(await waits.textContent(), /^for the signal "approved" \(timeout 1h0m0s, failing at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$/);
  assert.equal(await page.locator(".job-facts dt", { hasText: "Node" }).count(), 0);
  const sent = await fetch(`${server.url}/jobs/${job.id}/signals/approved`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify("ann") });
  assert.equal(sent.status, 200);
  await page.locator('.job-node[data-node="1"][data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  await page.locator('.job-node[data-node="2"][data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  assert.equal((await rowOf("gate")).result, "ann");
  await screenshot(page, "job-wait-signal");
  assert.deepEqual(errors, []);
  await page.context().close();
});

test("a fallback follows its failed task, and a job's cleanup shows 'cleaning up' while it runs, then its nodes", async () => {
  const tidy = server.gate("tidy");
  const job = await server.submit(`
name: ui cleanup test
tasks:
  - name: fetch
    var: data
    run: exit 3
    onFailure:
      then: continue
      tasks: [{name: cached, run: echo -n cached > $BATON_OUTPUT}]
  - name: migrate
    run: exit 1
onFailure: [{name: page, run: echo paging}]
finally: [{name: tidy, run: "${tidy.wait}; echo tidy"}]
`);
  const { page, errors } = await openPage(`#/jobs/${job.id}`);
  // While finally waits: the job is RUNNING, cleaning up, and will end FAILED.
  await page.locator(".job-ending", { hasText: "cleaning up · ends failed" }).waitFor({ timeout: 60000 });
  assert.equal(await page.locator(".job-title .job-badge").getAttribute("data-state"), "RUNNING");
  tidy.open();
  await page.locator('.job-title .job-badge[data-state="FAILED"]').waitFor({ timeout: 60000 });
  assert.equal(await page.locator(".job-ending").count(), 0);
  // The task, FAILED; its fallback after it, on an edge "on failure", and its task.
  assert.equal(await page.locator('.job-node[data-node="1"]').getAttribute("data-state"), "FAILED");
  await page.locator('.job-node[data-node="1/f"][data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  assert.match(await page.locator('.job-node[data-node="1/f"]').getAttribute("aria-label"),
    /^fetch: completed, onFailure · continue$/);
  assert.equal(await page.locator('text.job-edge-label[data-edge="1>1/f"]').textContent(), "on failure");
  assert.equal(await page.locator('.job-node[data-node="1/f/s0"]').getAttribute("data-state"), "COMPLETED");
  // The job's onFailure, then its finally, after its tasks.
  for (const [id, label] of [["c0", "onFailure"], ["c0/s0", "page"], ["c1", "finally"], ["c1/s0", "tidy"]]) {
    const node = page.locator(`.job-node[data-node="${id}"]`);
    assert.equal(await node.getAttribute("data-state"), "COMPLETED", id);
    assert.match(await node.getAttribute("aria-label"), new RegExp(`^${label}: `));
  }
  await screenshot(page, "job-graph-cleanup");
  assert.deepEqual(errors, []);
  await page.context().close();
});

test("a sub-job's node opens the child job, whose page links back to its parent", async () => {
  const job = await server.submit(`
name: parent ui test
tasks:
  - name: run a child
    subjob:
      name: child ui test
      tasks:
        - {name: work, run: echo from the child}
`);
  await waitFor(async () => (await jobState(job.id)) === "COMPLETED", 60000, "the job to complete");
  const childId = (await server.get(`/jobs/${job.id}`)).execution[0].subjob.id;
  const { page } = await openPage(`#/jobs/${job.id}`);
  await page.locator('.job-node[data-node="1"][data-state="COMPLETED"]').waitFor({ timeout: 30000 });
  await page.click('.job-node[data-node="1"] .job-node-link');
  await page.locator(".job-title h1", { hasText: "child ui test" }).waitFor();
  assert.equal(new URL(page.url()).hash, `#/jobs/${childId}`);
  await page.click('.job-facts a:has-text("parent job")');
  await page.locator(".job-title h1", { hasText: "parent ui test" }).waitFor();
  // Back on the parent, with its sub-job task selected.
  const parentTask = (await server.get(`/jobs/${job.id}`)).execution[0].id;
  assert.equal(new URL(page.url()).hash, `#/jobs/${job.id}?task=${parentTask}`);
  await page.locator(".job-panel-head h2", { hasText: "run a child" }).waitFor();
  // The jobs list's sub-job badge leads to the same place (through #/tasks/TID).
  await page.goto(pageUrl(server, "#/jobs?q=child"));
  await page.locator('a.ui-badge-link', { hasText: "sub-job" }).first().click();
  await page.locator(".job-title h1", { hasText: "parent ui test" }).waitFor();
  assert.equal(new URL(page.url()).hash, `#/jobs/${job.id}?task=${parentTask}`);
  await page.context().close();
});
