// Team mode in a real browser (Debian's Chromium driven by playwright-core)
// against a real `penguin serve --team`: the admin signs in with the
// seeded password, creates a user and a project and adds the user to it;
// the user signs in in a second browser context and sees only that
// project's sessions; on the Models page the project's owner adds a
// provider route for the project alone, which the member sees but cannot
// remove, and the owner removes it; tokens are shown once and revoked; an
// admin's reset of the member's password ends his sign-in, and his own change
// of it ends his other sign-ins; a state change without the CSRF header is
// refused; sign-out ends the sign-in.
// Screenshots go to web/artifacts/teams/.
//
// PENGUIN names the binary (default ../bin/penguin: `make build`);
// CHROMIUM the browser; KEEP=1 keeps the temporary directory.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium, Runner, shot as shotIn, stepper } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const penguin = process.env.PENGUIN ?? join(repo, "bin/penguin");
const artifacts = join(repo, "web/artifacts/teams");
const adminPassword = "admin-" + Math.random().toString(36).slice(2);

let work, runner, browser, base;
const shot = (page, name) => shotIn(page, artifacts, name);

before(async () => {
  work = mkdtempSync(join(tmpdir(), "penguin-web-teams-"));
  const home = join(work, "home");
  mkdirSync(home, { recursive: true });
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  runner = new Runner(penguin, work, home);
  const addr = await runner.start("serve", ["serve", "--team", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--root", work],
    "HTTP gateway listening", "addr", { PENGUIN_SEED_ADMIN_PASSWORD: adminPassword });
  base = `http://${addr}`;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await runner?.stop();
  if (process.env.KEEP !== "1") rmSync(work, { recursive: true, force: true });
});

/** call makes an API request from the page, with its CSRF token unless
 * csrf is false; it returns the status and the parsed body. */
function call(page, method, path, body, csrf = true) {
  return page.evaluate(async ([method, path, body, csrf]) => {
    const auth = await fetch("/api/auth").then((r) => r.json());
    const headers = { "Content-Type": "application/json" };
    if (csrf) headers["X-CSRF-Token"] = auth.csrf_token ?? "";
    const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  }, [method, path, body, csrf]);
}

/** newPage opens a browser context of its own (its own cookies). */
async function newPage() {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(20000);
  return { ctx, page };
}

async function signIn(page, user, password) {
  await page.goto(base + "/");
  await page.getByLabel("User").fill(user);
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
}

test("team mode: users, projects, members, tokens and who sees what", { timeout: 240000 }, async () => {
  const admin = await newPage();
  await admin.ctx.tracing.start({ snapshots: true });
  const problems = [], consoleLog = [];
  admin.page.on("pageerror", (e) => problems.push(e.message));
  admin.page.on("console", (m) => consoleLog.push(`${m.type()}: ${m.text()}`));
  const pages = [admin.page];
  const step = stepper(admin.ctx, pages, consoleLog, artifacts, work);
  const page = admin.page;
  let bob;

  await step("the admin signs in with the seeded password; a wrong one is refused", async () => {
    await signIn(page, "admin", "not-the-password");
    await page.getByRole("alert").filter({ hasText: "wrong user id or password" }).waitFor();
    await shot(page, "01-sign-in-refused");
    await page.getByLabel("Password", { exact: true }).fill(adminPassword);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("link", { name: "Team" }).click();
    await page.getByTestId("me").filter({ hasText: "admin" }).waitFor();
    await page.getByText("Your password was set for you").waitFor();
  });

  await step("a state change without the CSRF header is refused", async () => {
    const r = await call(page, "POST", "/api/projects", { project_id: "csrf" }, false);
    assert.equal(r.status, 403);
    assert.match(r.body.message, /X-CSRF-Token/);
  });

  await step("the admin creates a user and a project, and adds the user as a member", async () => {
    const users = page.getByRole("region", { name: "Users" });
    await users.getByLabel("User id").fill("bob");
    await users.getByLabel("Display name").fill("Bob");
    await users.getByLabel("First password").fill("bob-first-password");
    await users.getByRole("button", { name: "Create user" }).click();
    await users.getByRole("cell", { name: "bob", exact: true }).waitFor();
    const projects = page.getByRole("region", { name: "Projects" });
    await projects.getByLabel("Project id").fill("apollo");
    await projects.getByLabel("Name").fill("Apollo");
    await projects.getByRole("button", { name: "Create project" }).click();
    const apollo = page.getByTestId("project-apollo");
    await apollo.locator("summary").click();
    const add = apollo.getByRole("form", { name: "Add a member to apollo" });
    await add.getByLabel("User").fill("bob");
    await add.getByRole("button", { name: "Add member" }).click();
    await apollo.getByRole("listitem").filter({ hasText: "bob member" }).waitFor();
    await shot(page, "02-team");
  });

  await step("the owner reads the project's audit log, the admin the global one", async () => {
    const apollo = page.getByTestId("project-apollo");
    await apollo.getByRole("button", { name: "Show the audit log of apollo" }).click();
    const log = apollo.getByRole("group", { name: "Audit log of apollo" });
    await log.getByRole("row").filter({ hasText: "member.set" }).filter({ hasText: "bob" }).waitFor();
    await log.getByRole("row").filter({ hasText: "project.create" }).waitFor();
    const global = page.getByRole("region", { name: "Global audit log" });
    await global.getByRole("button", { name: "Show the global audit log" }).click();
    await global.getByRole("row").filter({ hasText: "sign_in.failed" }).waitFor();
    await global.getByRole("row").filter({ hasText: "user.create" }).filter({ hasText: "bob" }).waitFor();
    assert.ok(!(await global.textContent()).includes(adminPassword), "no password in the audit log");
    await shot(page, "02b-audit");
  });

  await step("a session in each project; the switcher scopes the list", async () => {
    for (const [project, title] of [["default", "admin-only session"], ["apollo", "apollo session"]]) {
      const r = await call(page, "POST", "/api/sessions", { project_id: project, workspace: work, model: { provider: "none", model_id: "none" } });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.equal(r.body.project_id, project);
      const u = await call(page, "PATCH", `/api/sessions/${r.body.session_id}`, { title });
      assert.equal(u.status, 200, JSON.stringify(u.body));
    }
    await page.goto(base + "/");
    const list = page.getByRole("complementary", { name: "Sessions" });
    await list.getByText("admin-only session").waitFor();
    await list.getByText("apollo session").waitFor();
    await page.getByLabel("Project", { exact: true }).selectOption("apollo");
    await list.getByText("admin-only session").waitFor({ state: "detached" });
    await list.getByText("apollo session").waitFor();
    await shot(page, "03-switcher");
    // The list's grouping is remembered per project: by agent in apollo,
    // not in default, each kept across a reload.
    const byAgent = page.getByRole("button", { name: "By agent" });
    const pressed = async (want, why) => {
      for (let i = 0; (await byAgent.getAttribute("aria-pressed")) !== want; i++) {
        assert.ok(i < 50, why);
        await page.waitForTimeout(100);
      }
    };
    await pressed("false", "apollo starts ungrouped");
    await byAgent.click();
    await list.getByRole("heading").first().waitFor();
    await page.getByLabel("Project", { exact: true }).selectOption("default");
    await pressed("false", "the default project keeps its own grouping");
    await page.getByLabel("Project", { exact: true }).selectOption("apollo");
    await pressed("true", "apollo's grouping is remembered");
    await page.reload();
    await list.getByText("apollo session").waitFor();
    await pressed("true", "apollo's grouping is remembered across a reload");
    await list.getByRole("heading").first().waitFor();
    await shot(page, "03a-grouping-per-project");
  });

  await step("the Models page: the project's owner adds a route for the project alone", async () => {
    await page.getByRole("link", { name: "Models" }).click();
    // A label's name takes in its select's chosen option, so the fields
    // are found by their names.
    const form = page.locator("form.form");
    await form.locator('select[name="project"]').selectOption("apollo");
    await form.locator('select[name="provider"]').selectOption("");
    await form.locator('input[name="name"]').fill("apollo-local");
    await form.locator('input[name="base_url"]').fill("http://127.0.0.1:9/v1");
    await form.locator('input[name="model_id"]').fill("apollo-model");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByTestId("setup-done").filter({ hasText: "apollo-local" }).waitFor();
    await page.getByTestId("route-apollo-local").getByText("project apollo").waitFor();
    const global = await call(page, "GET", "/api/providers");
    assert.ok(!JSON.stringify(global.body).includes("apollo-local"), "the project's route is not a global one");
    const own = await call(page, "GET", "/api/projects/apollo/providers");
    assert.equal(own.body.providers.find((r) => r.name === "apollo-local")?.project, "apollo");
    await shot(page, "04-models-project");
  });

  await step("the member signs in in another browser and sees only his project's session", async () => {
    bob = await newPage();
    pages.push(bob.page);
    bob.page.on("pageerror", (e) => problems.push(e.message));
    await signIn(bob.page, "bob", "bob-first-password");
    const list = bob.page.getByRole("complementary", { name: "Sessions" });
    await list.getByText("apollo session").waitFor();
    assert.equal(await list.getByText("admin-only session").count(), 0);
    const all = await call(bob.page, "GET", "/api/sessions");
    assert.deepEqual(all.body.sessions.map((s) => s.title), ["apollo session"]);
    assert.equal((await call(bob.page, "GET", "/api/sessions?project_id=default")).status, 404);
    assert.equal((await call(bob.page, "GET", "/api/users")).status, 403);
    await bob.page.getByRole("link", { name: "Team" }).click();
    assert.equal(await bob.page.getByRole("region", { name: "Users" }).count(), 0, "no users page for a member");
    await shot(bob.page, "05-member");
  });

  await step("the member sees the project's route on the Models page but cannot change it; the owner removes it", async () => {
    await bob.page.getByLabel("Project", { exact: true }).selectOption("apollo");
    await bob.page.getByRole("link", { name: "Models" }).click();
    await bob.page.getByTestId("route-apollo-local").waitFor();
    assert.equal(await bob.page.getByRole("button", { name: "Remove apollo-local" }).count(), 0, "no Remove button for a member");
    await bob.page.getByTestId("no-scope").waitFor();
    const refused = await call(bob.page, "DELETE", "/api/projects/apollo/providers/apollo-local");
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    await shot(bob.page, "06-models-member");
    await page.getByRole("button", { name: "Remove apollo-local" }).click();
    await page.getByTestId("route-apollo-local").waitFor({ state: "detached" });
    const own = await call(page, "GET", "/api/projects/apollo/providers");
    assert.ok(!JSON.stringify(own.body).includes("apollo-local"));
    await bob.page.getByRole("link", { name: "Team" }).click();
  });

  await step("a token is shown once and revoked", async () => {
    const acct = bob.page.getByRole("region", { name: "Account" });
    await acct.getByLabel("Name").fill("ci");
    await acct.getByRole("button", { name: "Create token" }).click();
    const secret = (await bob.page.getByTestId("token-secret").locator("code").innerText()).trim();
    assert.match(secret, /^pgn_pat_/);
    const who = await fetch(base + "/api/auth", { headers: { Authorization: "Bearer " + secret } });
    assert.equal(who.status, 200);
    const listed = await call(bob.page, "GET", "/api/tokens");
    assert.ok(!JSON.stringify(listed.body).includes(secret), "the listing never holds the secret");
    await acct.getByRole("button", { name: "Revoke ci" }).click();
    await acct.getByRole("button", { name: "Revoke ci" }).waitFor({ state: "detached" });
    const after = await fetch(base + "/api/sessions", { headers: { Authorization: "Bearer " + secret } });
    assert.equal(after.status, 401);
  });

  await step("the admin resets the member's password and his sign-in ends; he changes it and his other sign-in ends", async () => {
    await page.getByRole("link", { name: "Team" }).click();
    page.once("dialog", (d) => d.accept("bob-reset-password"));
    await page.getByRole("button", { name: "Reset password of bob" }).click();
    await bob.page.waitForFunction(async () => (await fetch("/api/sessions")).status === 401);
    await bob.page.reload();
    await bob.page.getByLabel("Password", { exact: true }).waitFor();
    await signIn(bob.page, "bob", "bob-first-password");
    await bob.page.getByRole("alert").filter({ hasText: "wrong user id or password" }).waitFor();
    await signIn(bob.page, "bob", "bob-reset-password");
    await bob.page.getByRole("link", { name: "Team" }).click();
    await bob.page.getByText("Your password was set for you").waitFor();
    // A second sign-in of his, in another browser, which his own change
    // of password ends.
    const other = await newPage();
    await signIn(other.page, "bob", "bob-reset-password");
    await other.page.getByRole("complementary", { name: "Sessions" }).getByText("apollo session").waitFor();
    const form = bob.page.getByRole("form", { name: "Change password" });
    await form.getByLabel("Current password").fill("bob-reset-password");
    await form.getByLabel("New password").fill("bob-own-password");
    await form.getByRole("button", { name: "Change password" }).click();
    await form.getByText("Password changed; your other sign-ins have ended.").waitFor();
    await bob.page.getByText("Your password was set for you").waitFor({ state: "detached" });
    assert.equal((await call(other.page, "GET", "/api/sessions")).status, 401, "his other sign-in ended");
    assert.equal((await call(bob.page, "GET", "/api/sessions")).status, 200, "the sign-in that changed it goes on");
    await other.page.reload();
    await other.page.getByLabel("Password", { exact: true }).waitFor();
    await signIn(other.page, "bob", "bob-reset-password");
    await other.page.getByRole("alert").filter({ hasText: "wrong user id or password" }).waitFor();
    await shot(bob.page, "07-password-changed");
    await other.ctx.close();
  });

  await step("sign-out ends the sign-in on the server", async () => {
    await bob.page.getByRole("button", { name: "Sign out" }).click();
    await bob.page.getByLabel("Password", { exact: true }).waitFor();
    assert.equal((await call(bob.page, "GET", "/api/sessions")).status, 401);
  });

  assert.deepEqual(problems, [], "no script errors in the pages");
  await admin.ctx.tracing.stop();
  await admin.ctx.close();
  await bob.ctx.close();
});
