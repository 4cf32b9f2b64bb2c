// The web app in a real browser: Debian's Chromium driven by
// playwright-core, against a real `penguin serve` started as a newcomer
// starts it (a fresh home, no provider key, the default data directory),
// and `penguin mockllm` playing script.yaml as OpenAI's Responses API.
//
// The steps: sign in; see that no model is configured; add one with the
// setup form (the llm service stores the route, its key encrypted, and
// uses it without a restart); create a session on a priced catalog model; run the demo task,
// approving its edits from their cards and steering while one waits;
// reload mid-stream; check tokens and cost per turn, per session; cut a
// reconnect wait short; abort a long command; compact and ask again; open
// the trace (one context each) and the usage page; light, dark and phone
// screens. Each step's name is printed as it starts; a failed step names
// itself, and leaves a screenshot, the page's HTML, the server logs and a
// Playwright trace in web/artifacts/ beside the screenshots of each
// screen.
//
// PENGUIN names the binary (default ../bin/penguin: `make build`);
// CHROMIUM the browser (default /usr/bin/chromium); KEEP=1 keeps the
// temporary directory.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { axe, launchChromium, Runner, shot as shotIn, stepper } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const penguin = process.env.PENGUIN ?? join(repo, "bin/penguin");
const artifacts = join(repo, "web/artifacts");
const token = "e2e-token-" + Math.random().toString(36).slice(2);
const modelKey = "sk-e2e-" + Math.random().toString(36).slice(2);
const model = { provider: "openai", id: "gpt-5-mini" };

let work, home, dataDir, runner, browser, base, mock;
const start = (...args) => runner.start(...args);
// Every screen photographed is also checked by axe-core; its serious and
// critical violations are gathered, named by the screen, and asserted
// away at the end.
const a11y = [];
const shot = async (page, name) => {
  await shotIn(page, artifacts, name);
  a11y.push(...(await axe(page)).map((v) => `${name}: ${v}`));
};

before(async () => {
  work = mkdtempSync(join(tmpdir(), "penguin-web-e2e-"));
  home = join(work, "home");
  // The default data directory of a user with this HOME, as `make run`
  // uses it: nothing passes --home or --providers.
  dataDir = join(home, ".local/share/penguin");
  // The default agent waits a minute before a reconnect, so only "Retry
  // now" gets the second task going within the test's time.
  mkdirSync(join(dataDir, "agents/default"), { recursive: true });
  writeFileSync(join(dataDir, "agents/default/system_config.yaml"), "retry:\n  max_attempts: 3\n  base_delay: 60s\n  max_delay: 60s\n");
  cpSync(join(repo, "examples/demo/workspace"), join(work, "workspace"), { recursive: true });
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  runner = new Runner(penguin, work, home);
  mock = await start("mockllm", ["mockllm", "--listen", "127.0.0.1:0", "--script", join(here, "script.yaml"), "--api-key-env", "MOCK_KEY"],
    "mockllm listening", "url", { MOCK_KEY: modelKey });
  const addr = await start("serve", ["serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--root", work],
    "HTTP gateway listening", "addr", { PENGUIN_AUTH_TOKEN: token });
  base = `http://${addr}`;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await runner?.stop();
  if (process.env.KEEP !== "1") rmSync(work, { recursive: true, force: true });
});

/** The numbers behind a usage line (its data- attributes). */
async function usageOf(locator) {
  const [total, cost] = await Promise.all([locator.getAttribute("data-total"), locator.getAttribute("data-cost")]);
  return { total: Number(total), cost: cost === "" ? undefined : Number(cost) };
}

/** close says whether two amounts in USD agree to a millionth of a cent
 * (the llm service rounds each request's cost there). */
const close = (a, b) => Math.abs(a - b) < 1e-8 * 1.5;

test("the web app, from the first run to the trace", { timeout: 240000 }, async () => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 }, colorScheme: "light" });
  await ctx.tracing.start({ snapshots: true });
  const page = await ctx.newPage();
  page.setDefaultTimeout(20000);
  const problems = [], consoleLog = [];
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("console", (m) => {
    consoleLog.push(`${m.type()}: ${m.text()}`);
    if (m.type() === "error" && !/401|Failed to load resource/.test(m.text())) problems.push(m.text());
  });
  const pages = [page];
  const step = stepper(ctx, pages, consoleLog, artifacts, work);
  const script = readFileSync(join(here, "script.yaml"), "utf8");
  let sessionURL, price;

  await step("sign in: a wrong token is refused, the right one gets an HttpOnly SameSite=Strict cookie", async () => {
    await page.goto(base + "/");
    await page.getByLabel("Token").fill("wrong");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "not the server's token" }).waitFor();
    await shot(page, "01-sign-in");
    await page.getByLabel("Token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Welcome to Penguin" }).waitFor();
    const cookie = (await ctx.cookies()).find((c) => c.name === "penguin_session");
    assert.ok(cookie?.httpOnly && cookie.sameSite === "Strict", "HttpOnly SameSite=Strict cookie");
  });

  await step("first run: the app says no model is configured and how to add one", async () => {
    await page.waitForURL(base + "/setup");
    assert.match(await page.getByTestId("first-run").innerText(), /No model is configured yet/);
    // The llm service's own notice: the variables and the providers file.
    assert.match(await page.getByTestId("setup-notice").innerText(), /no model provider is configured.*OPENAI_API_KEY.*providers file/s);
    await shot(page, "02-first-run");
    // Elsewhere a banner says it and links here.
    await page.goto(base + "/usage");
    await page.getByTestId("no-model").filter({ hasText: "No model is configured yet" }).getByRole("link", { name: "Add a model" }).click();
    await page.waitForURL(base + "/setup");
  });

  await step("the setup form stores the route through the llm service, its key encrypted; it is used without a restart", async () => {
    // The catalog's providers load with the page.
    await page.locator("select[name=provider] option[value=openai]").waitFor({ state: "attached" });
    await page.getByLabel("Provider").selectOption("openai");
    await page.getByLabel(/Base URL/).fill(`${mock}/openai/v1`);
    await page.getByLabel("API key").fill(modelKey);
    await shot(page, "03-setup-form");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByTestId("setup-done").filter({ hasText: "is ready" }).waitFor();
    await page.getByTestId("configured").filter({ hasText: "openai" }).waitFor();
    assert.equal(await page.getByTestId("no-model").count(), 0, "no more 'no model' notice");
    const hint = await page.getByTestId("key-hint").innerText();
    assert.ok(hint.endsWith(modelKey.slice(-4)) && !modelKey.startsWith(hint), `the key shown masked: ${hint}`);
    const routes = await page.evaluate(() => fetch("/api/providers").then((r) => r.json()));
    const openai = routes.providers.find((p) => p.name === "openai");
    assert.equal(openai.origin, "store");
    assert.ok(!JSON.stringify(routes).includes(modelKey), "no listing holds the key");
    assert.ok(!existsSync(join(dataDir, "providers.yaml")), "no providers file is written");
    assert.equal(statSync(join(dataDir, "routes.key")).mode & 0o777, 0o600);
    for (const db of ["penguin.db", "penguin.db-wal"].map((f) => join(dataDir, f)).filter(existsSync)) {
      assert.ok(!readFileSync(db).includes(modelKey), `the key is not in ${db} in the clear`);
    }
    await shot(page, "04-setup-done");
  });

  await step("a new session on a priced catalog model, its price shown", async () => {
    await page.getByRole("link", { name: "Start a session" }).click();
    await page.getByLabel("Workspace", { exact: true }).fill(join(work, "workspace"));
    await page.getByLabel("Model", { exact: true }).fill(`${model.provider}/${model.id}`);
    const models = await page.evaluate(() => fetch("/api/models?provider=openai").then((r) => r.json()));
    price = models.models.find((m) => m.model.model_id === model.id)?.price;
    assert.ok(price?.input > 0 && price?.output > 0, `the catalog prices ${model.id}`);
    await page.getByTestId("model-facts").filter({ hasText: `$${price.input.toFixed(2)} in, $${price.output.toFixed(2)} out per M tokens` }).waitFor();
    await page.locator("select[name=approval]").selectOption("APPROVAL_MODE_READ_ONLY");
    await page.getByLabel("First message").fill("test.sh fails. Fix add.sh.");
    await shot(page, "05-new-session");
    await page.getByRole("button", { name: "Create" }).click();
    await page.waitForURL(/\/sessions\/session-/);
    sessionURL = page.url();
  });

  const card = page.getByTestId("approval-card");
  await step("the edit waits on its card with its diff; steer while it waits; allow each edit", async () => {
    await card.filter({ hasText: "edit_file" }).waitFor();
    assert.match(await card.getByTestId("diff").innerText(), /- \$\(\( \$1 - \$2 \)\)\n\+ \$\(\( \$1 \+ \$2 \)\)/);
    await page.getByTestId("session-list").getByText("awaiting approval").waitFor();
    await page.getByTestId("composer").fill("Please also note the fix in the changelog.");
    await page.getByTestId("composer").press("Enter");
    // No model request can happen while the edit waits: the steer is queued.
    await page.getByTestId("queued-steer").filter({ hasText: "Please also note the fix in the changelog." }).waitFor();
    await shot(page, "06-approval-card");
    for (const tool of ["edit_file", "write_file", "exec_command"]) {
      await card.filter({ hasText: tool }).waitFor();
      await card.filter({ hasText: tool }).getByRole("button", { name: /Allow/ }).click();
    }
    // The next request took it: it shows once, in the conversation.
    await page.locator(".msg.user.from-steering:not(.queued)").filter({ hasText: "Please also note the fix in the changelog." }).waitFor();
    await page.getByTestId("queued-steer").waitFor({ state: "detached" });
    assert.match(readFileSync(join(work, "workspace/add.sh"), "utf8"), /\$\(\( \$1 \+ \$2 \)\)/);
  });

  const answer = page.locator(".msg.assistant").filter({ hasText: "Fixed: add.sh" });
  await step("reload while the last answer streams: it continues, nothing doubled", async () => {
    await answer.waitFor();
    await shot(page, "07-streaming");
    await page.reload();
    await answer.filter({ hasText: "see it continue where it was." }).waitFor({ timeout: 60000 });
    await page.getByTestId("chat-state").filter({ hasText: "idle" }).waitFor();
    assert.equal(await answer.count(), 1, "the answer once");
    assert.equal(await page.getByTestId("tool-card").count(), 4, "four tool calls, none doubled");
    assert.equal(await page.locator(".msg.user").filter({ hasText: "test.sh fails" }).count(), 1);
    assert.match(await page.getByTestId("tool-card").filter({ hasText: "exec_command" }).getByTestId("tool-output").textContent(), /all tests passed/);
    await page.locator("details.thinking").first().waitFor();
    await shot(page, "08-task-done");
  });

  await step("tokens and cost per turn and for the session, from the script's usage at the catalog's price", async () => {
    // The five turns of task 1, as script.yaml reports them.
    const turns = [...script.matchAll(/usage: \{([^}]*)\}/g)].slice(0, 5).map((m) => {
      const u = Object.fromEntries(m[1].split(",").map((kv) => kv.split(":").map((s) => s.trim())).map(([k, v]) => [k, Number(v)]));
      return { input: u.input ?? 0, output: u.output ?? 0, cache_read: u.cache_read ?? 0 };
    });
    const rows = page.getByTestId("turn-usage");
    assert.equal(await rows.count(), turns.length, "one usage line per model request");
    let sumCost = 0, sumTotal = 0;
    for (const [i, u] of turns.entries()) {
      const want = (u.input * price.input + u.cache_read * (price.cache_read ?? price.input) + u.output * price.output) / 1e6;
      const got = await usageOf(rows.nth(i));
      assert.equal(got.total, u.input + u.cache_read + u.output, `turn ${i + 1} tokens`);
      assert.ok(got.cost !== undefined && close(got.cost, want), `turn ${i + 1} cost ${got.cost}, want ${want}`);
      assert.match(await rows.nth(i).innerText(), new RegExp(`\\$0\\.000\\d+ · ${model.provider}/${model.id}`));
      sumCost += want;
      sumTotal += got.total;
    }
    const session = await usageOf(page.getByTestId("session-usage"));
    assert.equal(session.total, sumTotal, "session tokens are the turns' sum");
    assert.ok(close(session.cost, sumCost), `session cost ${session.cost}, want ${sumCost}`);
    assert.match(await page.getByTestId("session-usage").innerText(), /[\d.]+k tokens · \d+ out · \d+ reasoning · [\d.]+k cached · \$0\.00\d+/);
  });

  const retry = page.getByTestId("retry");
  await step("an overloaded provider: the reconnect countdown, cut short with Retry now", async () => {
    await page.getByTestId("composer").fill("Run the long job.");
    await page.getByTestId("composer").press("Enter");
    await retry.waitFor();
    // The wait the provider asked for (Retry-After: 60), as the failed
    // request reports it; the countdown runs from there.
    await page.locator(".banner").filter({ hasText: "overloaded, try later" }).filter({ hasText: "retrying in 60s" }).waitFor();
    const left = Number((await retry.innerText()).match(/Reconnecting to the model in (\d+)s/)?.[1]);
    assert.ok(left > 0 && left <= 60, `countdown at ${left}s`);
    // "Retry now" is offered once the engine is in the wait it cuts short
    // (the click waits for the button to be enabled).
    await shot(page, "09-retry-countdown");
    await retry.getByRole("button", { name: "Retry now" }).click();
    await retry.waitFor({ state: "detached" });
    assert.equal(await page.getByRole("alert").count(), 0, "no error from Retry now");
  });

  await step("a long command, aborted", async () => {
    await card.filter({ hasText: "sleep 120" }).waitFor();
    await card.getByRole("button", { name: /Allow/ }).click();
    await page.getByTestId("tool-card").filter({ hasText: "sleep 120" }).getByText("running").waitFor();
    await page.getByRole("button", { name: "Abort" }).click();
    await page.getByTestId("chat-state").filter({ hasText: "aborted" }).waitFor();
    await page.getByTestId("session-list").getByText("aborted").waitFor();
    await shot(page, "10-aborted");
  });

  await step("compact: the banner where it happened, then a task in the new context", async () => {
    await page.getByRole("button", { name: "Compact" }).click();
    await page.locator(".banner").filter({ hasText: /Context compaction \(manual, summarize\).*completed/ }).waitFor();
    await page.getByTestId("composer").fill("What changed before?");
    await page.getByTestId("composer").press("Enter");
    await page.locator(".msg.assistant").filter({ hasText: "In the previous context" }).waitFor();
    await page.getByTestId("chat-state").filter({ hasText: "idle" }).waitFor();
    await shot(page, "11-compacted");
  });

  await step("the trace: each context shown and downloaded on its own", async () => {
    await page.getByRole("link", { name: "Trace" }).click();
    const contexts = page.getByTestId("trace-context");
    await contexts.nth(1).waitFor();
    assert.equal(await contexts.count(), 2, "two contexts");
    await contexts.nth(0).getByText("event_msg/approval_decision").first().waitFor();
    await contexts.nth(0).getByText("event_msg/compaction_end").first().waitFor();
    await shot(page, "12-trace");
    await contexts.nth(1).getByRole("heading", { name: "Context 2" }).scrollIntoViewIfNeeded();
    await shot(page, "12b-trace-context-2");
    const id = sessionURL.split("/").pop();
    for (const [i, mustHave, mustNot] of [[1, "Fix add.sh", "What changed before?"], [2, "What changed before?", "Fix add.sh."]]) {
      const href = await contexts.nth(i - 1).getByTestId("trace-download").getAttribute("href");
      const got = await page.evaluate((h) => fetch(h).then(async (r) => ({ disposition: r.headers.get("content-disposition"), body: await r.text() })), href);
      assert.equal(got.disposition, `attachment; filename="${id}_00${i}.jsonl"`);
      const lines = got.body.trim().split("\n").map((l) => JSON.parse(l));
      assert.equal(lines[0].type, "session_meta", `context ${i} opens with its session_meta`);
      assert.equal(lines.filter((l) => l.type === "session_meta").length, 1, `context ${i} alone`);
      assert.ok(got.body.includes(mustHave) && !got.body.includes(mustNot), `context ${i} holds its own messages`);
    }
  });

  await step("usage: tokens and cost per model and per session", async () => {
    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByTestId("usage-total").waitFor();
    const api = await page.evaluate((u) => fetch(u).then((r) => r.json()), `/api/sessions/${sessionURL.split("/").pop()}`);
    const want = { total: Number(api.usage.total), cost: api.usage.cost_usd };
    assert.ok(want.cost > 0, "the session has a cost");
    for (const row of [page.getByTestId("usage-total"), page.getByTestId("usage-model").filter({ hasText: `${model.provider}/${model.id}` }), page.getByTestId("usage-session")]) {
      const got = await usageOf(row);
      assert.equal(got.total, want.total);
      assert.ok(close(got.cost, want.cost), `cost ${got.cost}, want ${want.cost}`);
    }
    assert.match(await page.getByTestId("usage-total").innerText(), /^1 session · [\d.]+k tokens · \$0\.0\d+$/);
    await shot(page, "13-usage");
  });

  await step("dark theme, and a phone-sized screen", async () => {
    const dark = await browser.newContext({ viewport: { width: 1280, height: 820 }, colorScheme: "dark", storageState: await ctx.storageState() });
    const d = await dark.newPage();
    pages.push(d);
    await d.goto(sessionURL);
    await d.getByTestId("chat-state").filter({ hasText: "idle" }).waitFor();
    await d.locator(".msg.assistant").filter({ hasText: "In the previous context" }).waitFor();
    // A fresh page replays the log: the retry made long ago shows no countdown.
    assert.equal(await d.getByTestId("retry").count(), 0, "no countdown on an idle session");
    await shot(d, "14-dark-chat");
    await d.goto(base + "/setup");
    await d.getByTestId("configured").waitFor();
    await shot(d, "15-dark-models");
    await dark.close();

    const phone = await browser.newContext({ viewport: { width: 390, height: 760 }, colorScheme: "dark", storageState: await ctx.storageState() });
    const small = await phone.newPage();
    pages.push(small);
    await small.goto(sessionURL);
    await small.locator(".msg.assistant").filter({ hasText: "In the previous context" }).waitFor();
    await shot(small, "16-phone-dark");
    await small.getByRole("button", { name: "Sessions" }).click();
    await small.getByTestId("session-list").getByRole("link").first().waitFor();
    await shot(small, "17-phone-menu");
    await phone.close();

    const phoneLight = await browser.newContext({ viewport: { width: 390, height: 760 }, colorScheme: "light", storageState: await ctx.storageState() });
    const p2 = await phoneLight.newPage();
    pages.push(p2);
    await p2.goto(base + "/new");
    await p2.getByRole("heading", { name: "New session" }).waitFor();
    await shot(p2, "18-phone-new-session");
    await phoneLight.close();
  });

  await step("schedules: a bad definition names its line; create one in the agent's tab, see its next run, run it now, see it in the history, open its session (its cost on the usage page), find it in the Scheduled folder and under its agent there, the choices remembered", async () => {
    await page.goto(base + "/agents/default");
    await page.getByRole("tab", { name: "Schedules" }).click();
    await page.getByRole("button", { name: "New schedule" }).click();
    await page.getByLabel("Schedule name").fill("digest");
    await page.getByLabel("Schedule YAML").fill("prompt: Summarize the workspace.\nperiod: often\n");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByRole("alert").filter({ hasText: "schedule/digest.yaml:2: period:" }).waitFor();
    await page.getByLabel("Schedule YAML").fill(`prompt: Summarize the workspace.\nenabled: true\nstart_at: 2030-01-01T09:00:00Z\nperiod: 1h\nworkspace: ${join(work, "workspace")}\nprovider: ${model.provider}\nmodel_id: ${model.id}\n`);
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    assert.match(await page.getByTestId("next-digest").innerText(), /2030/, "the next run is the start time");
    await page.getByRole("button", { name: "Run now" }).click();
    const last = page.getByTestId("last-digest");
    for (let i = 0; !/started/.test(await last.innerText()); i++) {
      assert.ok(i < 50, `the run did not start: ${await last.innerText()}`);
      await page.waitForTimeout(200);
      await page.getByRole("button", { name: "Refresh" }).click();
    }
    // The history lists the run, started, linking the same session.
    await page.getByRole("button", { name: "History" }).click();
    const pastRun = page.getByLabel("History of digest").getByRole("row").filter({ hasText: "started" });
    await pastRun.waitFor();
    assert.equal(await pastRun.getByRole("link").getAttribute("href"), await last.getByRole("link", { name: "session" }).getAttribute("href"),
      "the history's run links the last run's session");
    await shot(page, "19-schedules");
    await last.getByRole("link", { name: "session" }).click();
    await page.locator(".msg.user").filter({ hasText: "Summarize the workspace." }).waitFor();
    await page.locator(".msg.assistant").filter({ hasText: "The digest is ready" }).waitFor();
    await shot(page, "20-scheduled-session");
    const scheduledURL = page.url();
    // Its tokens and cost are in the usage page, under the schedule's name.
    await page.goto(base + "/usage");
    const used = page.getByTestId("usage-session").filter({ hasText: "digest" });
    await used.waitFor();
    const figures = await usageOf(used);
    assert.ok(figures.total === 550 && figures.cost > 0, `the scheduled session's usage: ${JSON.stringify(figures)}`);
    await page.goto(scheduledURL);
    // The scheduled session is not in the main list but in the Scheduled
    // folder at its end, closed at first; opened, it holds the session.
    const list = page.getByTestId("session-list");
    const folder = list.getByTestId("scheduled-folder");
    await folder.waitFor();
    assert.equal(await folder.getAttribute("aria-expanded"), "false", "the folder starts closed");
    assert.equal(await list.getByRole("listitem").filter({ hasText: "digest" }).count(), 0, "a closed folder shows no scheduled session");
    await folder.click();
    const row = list.getByRole("listitem").filter({ hasText: "digest" });
    await row.getByLabel("scheduled").waitFor();
    // A scheduled row offers no pinning: the folder is not the person's own list.
    await row.getByTestId("row-menu").click();
    await page.getByRole("menuitem", { name: "Rename" }).waitFor();
    assert.equal(await page.getByRole("menuitem", { name: "Pin" }).count(), 0, "no Pin in the Scheduled folder");
    await page.keyboard.press("Escape");
    // Grouped by agent, the folder's session is under its agent there too.
    await page.getByRole("button", { name: "By agent" }).click();
    await list.locator(".session-group.in-folder").getByRole("heading", { name: "default", exact: true }).waitFor();
    await shot(page, "20a-sessions-by-agent-scheduled-folder");
    // The grouping and the folder are remembered (per project) across a reload.
    await page.reload();
    await list.getByTestId("scheduled-folder").and(page.locator("[aria-expanded=true]")).waitFor();
    assert.equal(await page.getByRole("button", { name: "By agent" }).getAttribute("aria-pressed"), "true", "the grouping is remembered");
    await list.getByRole("listitem").filter({ hasText: "digest" }).getByLabel("scheduled").waitFor();
    await page.getByRole("button", { name: "By agent" }).click();
    await list.getByRole("heading").first().waitFor({ state: "detached" });
    await list.getByTestId("scheduled-folder").click();
    await list.getByRole("listitem").filter({ hasText: "digest" }).waitFor({ state: "detached" });
  });

  await step("the Models page: the stored route, its key masked; its test answers; removed, no model is left", async () => {
    await page.goto(base + "/setup");
    const row = page.getByTestId("route-openai");
    await row.waitFor();
    assert.match(await row.innerText(), new RegExp(`${modelKey.slice(-4)}[\\s\\S]*added here`));
    assert.ok(!(await row.innerText()).includes(modelKey), "the key is shown masked");
    await row.getByRole("button", { name: "Test" }).click();
    // The mock's script is used up by now: the test reports the provider's answer either way.
    await page.getByTestId("tested-openai").filter({ hasText: /answered in \d+ ms|failed:/ }).waitFor();
    await shot(page, "21-models-routes");
    await row.getByRole("button", { name: "Remove" }).click();
    await page.getByTestId("route-openai").waitFor({ state: "detached" });
    const models = await page.evaluate(() => fetch("/api/models").then((r) => r.json()));
    assert.match(models.notice ?? "", /no model provider is configured/);
  });

  assert.deepEqual(problems, [], "no script errors in the page");
  assert.deepEqual(a11y, [], "axe-core: no serious or critical violation on any screen");
  await ctx.tracing.stop();
  await ctx.close();
});
