// Signing in against a server with authentication on: the login form, a wrong password
// refused, the right one (and an API key) admitted, and signing out.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { contrastProblems, launchBrowser, screenshot, startBaton } from "./lib.mjs";
import { apiJson, openPage } from "./ui-page.mjs";

const PASSWORD = "correct horse 42";
let server, browser;

before(async () => {
  server = await startBaton({ config: `[api.auth]\nenabled = true\nadmin_user = "admin"\nadmin_password = "${PASSWORD}"\n` });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const basic = (u, p) => `Basic ${Buffer.from(`${u}:${p}`).toString("base64")}`;

describe("sign-in", () => {
  it("asks for credentials, refuses a wrong password and admits the right one", async () => {
    const { page, context } = await openPage(browser, server, "#/jobs");
    await page.getByRole("heading", { name: "Sign in to Baton" }).waitFor();
    await screenshot(page, "login");
    assert.deepEqual(await contrastProblems(page), [], "login: text below WCAG AA contrast");
    await page.getByLabel("User name").fill("admin");
    await page.getByLabel("Password").fill("wrong");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("Wrong user name, password or key.").waitFor();
    assert.equal(await page.locator(".ui-cards").count(), 0);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator(".ui-cards").waitFor();
    await page.getByRole("heading", { name: "Sign in to Baton" }).waitFor({ state: "detached" });
    // A reload keeps the session (sessionStorage); signing out forgets it.
    await page.reload();
    await page.locator(".ui-cards").waitFor();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to Baton" }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await context.close();
  });

  it("hides deleting a queue from a user without the admin role", async () => {
    await apiJson(server, "/users", { method: "POST", auth: basic("admin", PASSWORD),
      body: JSON.stringify({ username: "ann", password: "ann-pw-1", roles: ["ops"] }) });
    const { page, context } = await openPage(browser, server, "#/queues");
    await page.getByLabel("User name").fill("ann");
    await page.getByLabel("Password").fill("ann-pw-1");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('tr[data-queue="default"]').waitFor();
    assert.equal(await page.getByRole("button", { name: /Delete queue/ }).count(), 0);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("User name").fill("admin");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('tr[data-queue="default"]').getByRole("button", { name: /Delete queue/ }).waitFor();
    await context.close();
  });

  it("admits an API key", async () => {
    const key = await apiJson(server, "/keys", { method: "POST", body: JSON.stringify({ name: "ui test" }),
                                                auth: basic("admin", PASSWORD) });
    const { page, context } = await openPage(browser, server, "#/queues");
    await page.getByRole("tab", { name: "API key" }).click();
    await page.getByLabel("API key").fill(key.key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('tr[data-queue="default"]').waitFor();
    await context.close();
  });
});
