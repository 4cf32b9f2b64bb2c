// The web app in a real browser: Debian's Chromium driven by
// playwright-core, against a real `penguin serve` whose model is
// `penguin mockllm` playing script.yaml. It signs in, creates a session,
// runs the demo task, approves an edit from its card, steers, reloads the
// page mid-stream, cuts a reconnect wait short, aborts a long command, and opens the trace and the
// usage page, saving a screenshot of each screen in web/artifacts/.
//
// PENGUIN names the binary (default ../bin/penguin: `make build`);
// CHROMIUM the browser (default /usr/bin/chromium).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const penguin = process.env.PENGUIN ?? join(repo, "bin/penguin");
const artifacts = join(repo, "web/artifacts");
const token = "e2e-token-" + Math.random().toString(36).slice(2);

let work, procs = [], browser, base;

/** start runs penguin with a pinned environment and resolves with the
 * value of field in its first log line with message msg. */
function start(name, args, msg, field, extraEnv = {}) {
  const env = { HOME: join(work, "home"), PATH: "/usr/local/bin:/usr/bin:/bin", SHELL: "/bin/sh", PENGUIN_LOG_FORMAT: "text", ...extraEnv };
  const p = spawn(penguin, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  procs.push(p);
  let log = "";
  return new Promise((resolveValue, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not log "${msg}" in 30s:\n${log}`)), 30000);
    const onData = (b) => {
      log += b.toString();
      writeFileSync(join(work, `${name}.log`), log);
      const line = log.split("\n").find((l) => l.includes(`msg="${msg}"`));
      const m = line?.match(new RegExp(`\\b${field}=(\\S+)`));
      if (m) {
        clearTimeout(timer);
        resolveValue(m[1].replace(/^"|"$/g, ""));
      }
    };
    p.stdout.on("data", onData);
    p.stderr.on("data", onData);
    p.on("exit", (code) => reject(new Error(`${name} exited with ${code}:\n${log}`)));
  });
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), "penguin-web-e2e-"));
  mkdirSync(join(work, "home"));
  // The default agent waits a minute before a reconnect, so only "Retry
  // now" gets the second task going within the test's time.
  mkdirSync(join(work, "home/penguin/agents/default"), { recursive: true });
  writeFileSync(join(work, "home/penguin/agents/default/system_config.yaml"), "retry:\n  max_attempts: 3\n  base_delay: 60s\n  max_delay: 60s\n");
  cpSync(join(repo, "examples/demo/workspace"), join(work, "workspace"), { recursive: true });
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  const mock = await start("mockllm", ["mockllm", "--listen", "127.0.0.1:0", "--script", join(here, "script.yaml")], "mockllm listening", "url");
  writeFileSync(join(work, "providers.yaml"), `providers:\n  - name: mock\n    type: openai\n    base_url: ${mock}/v1\n    api_key_env: MOCK_KEY\n    models:\n      - id: gpt-4o\n`);
  const addr = await start("serve", [
    "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--root", work,
    "--home", join(work, "home/penguin"), "--providers", join(work, "providers.yaml"),
  ], "HTTP gateway listening", "addr", { PENGUIN_AUTH_TOKEN: token, MOCK_KEY: "mock-key" });
  base = `http://${addr}`;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  for (const p of procs) p.kill("SIGTERM");
  await Promise.all(procs.map((p) => p.exitCode !== null ? null : new Promise((r) => p.on("exit", r))));
  if (process.env.KEEP !== "1") rmSync(work, { recursive: true, force: true });
});

async function shot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: false });
}

test("the web app, from sign-in to the trace", { timeout: 240000 }, async () => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(20000);
  const problems = [];
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("console", (m) => m.type() === "error" && !/401|Failed to load resource/.test(m.text()) && problems.push(m.text()));

  // Sign in: a wrong token is refused, the right one gets the cookie.
  await page.goto(base + "/");
  await page.getByLabel("Token").fill("wrong");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "not the server's token" }).waitFor();
  await shot(page, "01-sign-in");
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "New session" }).waitFor();
  const cookies = await ctx.cookies();
  const session = cookies.find((c) => c.name === "penguin_session");
  assert.ok(session?.httpOnly && session.sameSite === "Strict", "HttpOnly SameSite=Strict cookie");

  // Create a session whose edits ask first, and start the demo task.
  await page.getByLabel("Workspace", { exact: true }).fill(join(work, "workspace"));
  await page.getByLabel("Model", { exact: true }).fill("mock/gpt-4o");
  await page.locator("select[name=approval]").selectOption("APPROVAL_MODE_READ_ONLY");
  await page.getByLabel("First message").fill("test.sh fails. Fix add.sh.");
  await shot(page, "02-new-session");
  await page.getByRole("button", { name: "Create" }).click();
  await page.waitForURL(/\/sessions\/session-/);
  const sessionURL = page.url();

  // The edit waits on its card, with its diff; steer while it waits.
  const card = page.getByTestId("approval-card");
  await card.filter({ hasText: "edit_file" }).waitFor();
  assert.match(await card.getByTestId("diff").innerText(), /- \$\(\( \$1 - \$2 \)\)\n\+ \$\(\( \$1 \+ \$2 \)\)/);
  await page.getByTestId("session-list").getByText("awaiting approval").waitFor();
  await page.getByTestId("composer").fill("Please also note the fix in the changelog.");
  await page.getByTestId("composer").press("Enter");
  await shot(page, "03-approval-card");
  await card.getByRole("button", { name: /Allow/ }).click();
  await card.filter({ hasText: "write_file" }).waitFor();
  await card.getByRole("button", { name: /Allow/ }).click();
  await card.filter({ hasText: "exec_command" }).waitFor();
  await card.getByRole("button", { name: /Allow/ }).click();

  // The steering text reached the model and shows in the conversation.
  await page.getByText("Please also note the fix in the changelog.").first().waitFor();
  assert.match(readFileSync(join(work, "workspace/add.sh"), "utf8"), /\$\(\( \$1 \+ \$2 \)\)/);

  // Reload while the last answer streams: it continues, nothing doubled.
  const answer = page.locator(".msg.assistant").filter({ hasText: "Fixed: add.sh" });
  await answer.waitFor();
  await shot(page, "04-streaming");
  await page.reload();
  await page.getByTestId("chat-state").filter({ hasText: /idle|running/ }).waitFor();
  await answer.filter({ hasText: "see it continue where it was." }).waitFor({ timeout: 60000 });
  await page.getByTestId("chat-state").filter({ hasText: "idle" }).waitFor();
  assert.equal(await answer.count(), 1, "the answer once");
  assert.equal(await page.getByTestId("tool-card").count(), 4, "four tool calls, none doubled");
  assert.equal(await page.locator(".msg.user").filter({ hasText: "test.sh fails" }).count(), 1);
  assert.match(await page.getByTestId("tool-card").filter({ hasText: "exec_command" }).getByTestId("tool-output").textContent(), /all tests passed/);
  assert.ok(await page.getByTestId("turn-usage").count() >= 5, "usage per turn");
  assert.match(await page.getByTestId("session-usage").innerText(), /tokens/);
  await page.locator("details.thinking").first().waitFor();
  await shot(page, "05-task-done");

  // An overloaded provider: the countdown, cut short with Retry now.
  await page.getByTestId("composer").fill("Run the long job.");
  await page.getByTestId("composer").press("Enter");
  const retry = page.getByTestId("retry");
  await retry.waitFor();
  assert.match(await retry.innerText(), /Reconnecting to the model in (60|59|58|57)s/);
  await page.locator(".banner").filter({ hasText: "overloaded, try later" }).waitFor();
  await shot(page, "06-retry-countdown");
  await retry.getByRole("button", { name: "Retry now" }).click();
  await retry.waitFor({ state: "detached", timeout: 10000 });

  // A long command, aborted.
  await card.filter({ hasText: "sleep 120" }).waitFor();
  await card.getByRole("button", { name: /Allow/ }).click();
  await page.getByTestId("tool-card").filter({ hasText: "sleep 120" }).getByText("running").waitFor();
  await page.getByRole("button", { name: "Abort" }).click();
  await page.getByTestId("chat-state").filter({ hasText: "aborted" }).waitFor();
  await page.getByTestId("session-list").getByText("aborted").waitFor();
  await shot(page, "07-aborted");

  // The trace: view, and the download of ExportTrace.
  await page.getByRole("link", { name: "Trace" }).click();
  await page.getByTestId("trace-lines").getByText("event_msg/approval_decision").first().waitFor();
  const href = await page.getByTestId("trace-download").getAttribute("href");
  const disposition = await page.evaluate((h) => fetch(h).then((r) => r.headers.get("content-disposition")), href);
  assert.match(disposition, /attachment; filename="session-.*\.jsonl"/);
  await shot(page, "08-trace");

  // Usage per session and model.
  await page.getByRole("link", { name: "Usage" }).click();
  await page.getByTestId("usage-total").waitFor();
  assert.match(await page.getByTestId("usage-total").innerText(), /1 sessions · [\d.]+k tokens/);
  await shot(page, "09-usage");

  // A phone-sized screen, dark.
  const phone = await browser.newContext({ viewport: { width: 390, height: 760 }, colorScheme: "dark", storageState: await ctx.storageState() });
  const small = await phone.newPage();
  await small.goto(sessionURL);
  await small.getByTestId("chat-state").filter({ hasText: "aborted" }).waitFor();
  await shot(small, "10-phone-dark");
  await small.getByRole("button", { name: "Sessions" }).click();
  await small.getByTestId("session-list").getByText("aborted").waitFor();
  await shot(small, "11-phone-menu");
  await phone.close();

  assert.deepEqual(problems, [], "no script errors in the page");
  await ctx.close();
});
