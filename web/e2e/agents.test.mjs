// The agent pages in a real browser (Debian's Chromium driven by
// playwright-core) against a real `penguin serve` and `penguin mockllm`
// playing agents.yaml as OpenAI's Responses API: everything an agent is
// made of, seen and changed without a shell on the server. The steps:
// create an agent; edit its configuration, a stale save refused with the
// current version and a broken one naming its line; switch a builtin tool
// off and on; install, disable and uninstall a skill (an archive with a
// link refused), and one from the server's library; write, edit, delete,
// export and import memory; set a vault value, shown masked and used by a
// command of a session; pin a skill in the composer (one disabled
// meanwhile refused); add the stdio MCP
// server the Go tests use and test it (a command that does not exist
// refused); refuse a model of no route, test one and make it the default,
// which New session then offers; set, refuse and remove a local model's
// settings on the Models page; export the agent and import the archive
// as another; copy it without its memory, rename the copy and delete it. Screenshots of each tab go to web/artifacts/agents/, each
// checked by axe-core.
//
// PENGUIN names the binary (default ../bin/penguin: `make build`); GO the
// go command that builds the MCP test server (default go); CHROMIUM the
// browser; KEEP=1 keeps the temporary directory.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { apiCall, axe, finish, launchChromium, Runner, shot as shotIn, stepper } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const penguin = process.env.PENGUIN ?? join(repo, "bin/penguin");
const artifacts = join(repo, "web/artifacts/agents");
const token = "e2e-token-" + Math.random().toString(36).slice(2);
const modelKey = "sk-e2e-" + Math.random().toString(36).slice(2);
const secret = "vault-" + Math.random().toString(36).slice(2);

let work, runner, browser, base, mcpServer;
const a11y = [];
const shot = async (page, name) => {
  await shotIn(page, artifacts, name);
  a11y.push(...(await axe(page)).map((v) => `${name}: ${v}`));
};

/** run runs a command to its end and fails with its output if it fails. */
function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${r.error ?? ""}${r.stdout}${r.stderr}`);
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), "penguin-web-agents-"));
  const home = join(work, "home");
  mkdirSync(home, { recursive: true });
  mkdirSync(join(work, "workspace"), { recursive: true });
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  // The stdio MCP server of the Go tests, inside the root the sessions'
  // commands see.
  mcpServer = join(work, "workspace", "mcpserver");
  run(process.env.GO ?? "go", ["build", "-o", mcpServer, "./services/environment/mcp/testdata/mcpserver"], { cwd: repo });
  // A skill directory, packed as a user would, and one with a link.
  for (const [dir, link] of [["skill", false], ["bad-skill", true]]) {
    mkdirSync(join(work, dir, "pdf"), { recursive: true });
    writeFileSync(join(work, dir, "pdf/SKILL.md"), "---\nname: pdf\ndescription: Read PDF files page by page.\n---\n# PDF\nUse pdftotext.\n");
    if (link) symlinkSync("/etc/passwd", join(work, dir, "pdf/passwd"));
    run("tar", ["-czf", join(work, `${dir}.tar.gz`), "-C", join(work, dir), "pdf"]);
  }
  // A skill of the server's library: skills/ in its data directory.
  const library = join(home, ".local/share/penguin/skills/lint");
  mkdirSync(library, { recursive: true });
  writeFileSync(join(library, "SKILL.md"), "---\nname: lint\ndescription: Lint the code before a review.\n---\n");
  runner = new Runner(penguin, work, home);
  const mock = await runner.start("mockllm", ["mockllm", "--listen", "127.0.0.1:0", "--script", join(here, "agents.yaml"), "--api-key-env", "MOCK_KEY"],
    "mockllm listening", "url", { MOCK_KEY: modelKey });
  // The model's route is the OpenAI preset, pointed at the mock.
  const addr = await runner.start("serve", ["serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--root", work],
    "HTTP gateway listening", "addr", { PENGUIN_AUTH_TOKEN: token, OPENAI_API_KEY: modelKey, OPENAI_BASE_URL: `${mock}/openai/v1` });
  base = `http://${addr}`;
  browser = await launchChromium();
});

after(() => finish(browser, runner, work));

const call = apiCall;
const api = "/api/projects/default/agents";

test("an agent's configuration, tools, skills, memory, vault, MCP servers and model, in the browser", { timeout: 240000 }, async () => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: "light", acceptDownloads: true });
  await ctx.tracing.start({ snapshots: true });
  const page = await ctx.newPage();
  page.setDefaultTimeout(20000);
  const problems = [], consoleLog = [];
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("console", (m) => {
    consoleLog.push(`${m.type()}: ${m.text()}`);
    // The refusals the test provokes are logged by the browser as failed loads.
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) problems.push(m.text());
  });
  const dialogs = [];
  page.on("dialog", (d) => { dialogs.push(d.message()); void d.accept(); });
  const step = stepper(ctx, [page], consoleLog, artifacts, work);
  const tab = (name) => page.getByRole("tab", { name, exact: true }).click();
  const alert = (text) => page.getByRole("alert").filter({ hasText: text }).waitFor();
  const saved = () => page.getByRole("status").filter({ hasText: "Saved." }).waitFor();

  await step("sign in; create an agent from the default template", async () => {
    await page.goto(base + "/");
    await page.getByLabel("Token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("link", { name: "Agents" }).click();
    await page.getByLabel("New agent name").fill("reviewer");
    await page.getByRole("button", { name: "Create" }).click();
    await page.getByRole("link", { name: "reviewer", exact: true }).waitFor();
    await page.getByLabel("New agent name").fill("../x");
    await page.getByRole("button", { name: "Create" }).click();
    await alert("name");
    await shot(page, "01-agents");
    await page.getByRole("link", { name: "reviewer", exact: true }).click();
    await page.getByRole("heading", { name: /reviewer/ }).waitFor();
  });

  await step("General: a stale save is refused with the current version; a broken file names its line; a fresh one saves", async () => {
    const box = page.getByLabel("system_config.yaml", { exact: true });
    await box.waitFor();
    await page.waitForFunction(() => document.querySelector("textarea")?.value.includes("max_turns"));
    // Someone else saves first, from the version the page read.
    const cur = await call(page, "GET", `${api}/reviewer/config/system_config.yaml`);
    const other = cur.body.content.replace(/^max_turns: .*$/m, "max_turns: 77");
    assert.equal((await call(page, "PUT", `${api}/reviewer/config/system_config.yaml`, { content: other, version: cur.body.version })).status, 200);
    await box.fill((await box.inputValue()).replace(/^max_turns: .*$/m, "max_turns: 12 # mine"));
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await alert(/current version|aborted/i);
    await shot(page, "02-general-conflict");
    await page.getByRole("button", { name: "Reload" }).click();
    await page.waitForFunction(() => document.querySelector("textarea")?.value.includes("max_turns: 77"));
    await box.fill((await box.inputValue()).replace(/^max_turns: .*$/m, "max_turns: [12"));
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await alert(/system_config\.yaml:\d+/);
    await box.fill((await box.inputValue()).replace(/^max_turns: .*$/m, "max_turns: 12 # mine"));
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await saved();
    const now = await call(page, "GET", `${api}/reviewer/config/system_config.yaml`);
    assert.match(now.body.content, /^max_turns: 12 # mine$/m, "saved with its comment");
    await tab("Instructions");
    await page.getByLabel("AGENTS.md", { exact: true }).fill("Review only. RULE-5150.\n");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await saved();
  });

  await step("Tools: the builtin and engine tools listed; one switched off and on", async () => {
    await tab("Tools");
    const glob = page.getByLabel("enable tool glob");
    await glob.waitFor();
    assert.ok(await glob.isChecked(), "glob is offered");
    await page.getByTestId("tool-run_subagent").filter({ hasText: "engine" }).waitFor();
    await glob.click();
    await page.waitForFunction(() => !document.querySelector('[aria-label="enable tool glob"]')?.checked);
    const cfg = (await call(page, "GET", `${api}/reviewer/config/system_config.yaml`)).body.content;
    assert.match(cfg, /\n {4}- name: read_file\n/);
    assert.doesNotMatch(cfg, /\n {4}- name: glob\n/);
    await shot(page, "03-tools");
    await glob.click();
    await page.waitForFunction(() => document.querySelector('[aria-label="enable tool glob"]')?.checked);
    assert.doesNotMatch((await call(page, "GET", `${api}/reviewer/config/system_config.yaml`)).body.content, /\n {2}builtin:/);
  });

  await step("Skills: an archive with a link is refused; install, disable, uninstall", async () => {
    await tab("Skills");
    await page.getByLabel("Skill archive").setInputFiles(join(work, "bad-skill.tar.gz"));
    await alert("link");
    await page.getByLabel("Skill archive").setInputFiles(join(work, "skill.tar.gz"));
    await page.getByRole("cell", { name: "Read PDF files page by page." }).waitFor();
    await page.getByLabel("enable pdf").click();
    await page.waitForFunction(() => !document.querySelector('[aria-label="enable pdf"]')?.checked);
    const skills = (await call(page, "GET", `${api}/reviewer/skills`)).body.skills;
    assert.deepEqual(skills.map((s) => [s.name, !!s.enabled]), [["pdf", false]]);
    await shot(page, "04-skills");
    await page.getByRole("row", { name: /pdf/ }).getByRole("button", { name: "Remove" }).click();
    await page.getByRole("cell", { name: "Read PDF files page by page." }).waitFor({ state: "detached" });
    assert.deepEqual((await call(page, "GET", `${api}/reviewer/skills`)).body.skills ?? [], []);
    // From the server's library; a path out of it is refused.
    await page.getByLabel("Library skill").fill("/etc");
    await page.getByRole("button", { name: "Install from the library" }).click();
    await alert("server_dir");
    await page.getByLabel("Library skill").fill("lint");
    await page.getByRole("button", { name: "Install from the library" }).click();
    await page.getByRole("cell", { name: "Lint the code before a review." }).waitFor();
    await page.getByRole("row", { name: /lint/ }).getByRole("button", { name: "Remove" }).click();
    await page.getByRole("cell", { name: "Lint the code before a review." }).waitFor({ state: "detached" });
  });

  await step("Memory: write a file, edit it, delete it; export the scope and import it back with replace", async () => {
    await tab("Memory");
    await page.getByLabel("New memory file name").fill("style.md");
    await page.getByRole("button", { name: "New file" }).click();
    await page.getByLabel("memory style.md").fill("---\ndescription: how the user wants reviews\n---\nShort comments.\n");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByRole("cell", { name: "how the user wants reviews" }).waitFor();
    await page.getByRole("button", { name: "style.md" }).click();
    const editor = page.getByLabel("memory style.md");
    await page.waitForFunction(() => document.querySelector('[aria-label="memory style.md"]')?.value.includes("Short comments."));
    await editor.fill((await editor.inputValue()).replace("Short comments.", "Short comments, no nits."));
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await editor.waitFor({ state: "detached" });
    assert.match((await call(page, "GET", `${api}/reviewer/memory/user/files/style.md`)).body.content, /no nits/);
    await page.getByRole("button", { name: "Export" }).click();
    await page.waitForFunction(() => document.querySelector('[aria-label="Memory document"]')?.value.includes("no nits"));
    const doc = await page.getByLabel("Memory document").inputValue();
    await shot(page, "05-memory");
    await page.getByRole("row", { name: /style\.md/ }).getByRole("button", { name: "Delete" }).click();
    await page.getByRole("cell", { name: "how the user wants reviews" }).waitFor({ state: "detached" });
    assert.equal((await call(page, "GET", `${api}/reviewer/memory/user/files/style.md`)).status, 404);
    await page.getByLabel("Memory document").fill("{not json");
    await page.getByRole("button", { name: "Import" }).click();
    await alert("document");
    await page.getByLabel("Memory document").fill(doc);
    await page.getByLabel("Mode").selectOption("replace");
    await page.getByRole("button", { name: "Import" }).click();
    await page.getByRole("cell", { name: "how the user wants reviews" }).waitFor();
    assert.ok(dialogs.some((d) => /replace/.test(d)), "the destructive import asked first");
  });

  await step("Vault: a bad name is refused; the value is set and shown masked, never sent back", async () => {
    await tab("Vault");
    await page.getByLabel("Vault name").fill("not a name");
    await page.getByLabel("Vault value", { exact: true }).fill(secret);
    await page.getByRole("button", { name: "Set", exact: true }).click();
    await alert("name");
    await page.getByLabel("Vault name").fill("DEPLOY_TOKEN");
    await page.getByLabel("Vault value", { exact: true }).fill(secret);
    await page.getByRole("button", { name: "Set", exact: true }).click();
    await page.getByLabel("value of DEPLOY_TOKEN").filter({ hasText: "••••••••" }).waitFor();
    await page.getByLabel("Vault name").fill("OLD_TOKEN");
    await page.getByLabel("Vault value", { exact: true }).fill("old");
    await page.getByRole("button", { name: "Set", exact: true }).click();
    await page.getByRole("row", { name: /OLD_TOKEN/ }).getByRole("button", { name: "Delete" }).click();
    await page.getByLabel("value of OLD_TOKEN").waitFor({ state: "detached" });
    assert.deepEqual((await call(page, "GET", `${api}/reviewer/vault`)).body.names, ["DEPLOY_TOKEN"]);
    assert.ok(!(await page.content()).includes(secret), "the page holds no value");
    assert.ok(!JSON.stringify((await call(page, "GET", `${api}/reviewer/vault`)).body).includes(secret));
    await shot(page, "06-vault");
  });

  await step("MCP: a command that does not exist is refused; the stdio test server is added and tested", async () => {
    await tab("MCP");
    const form = page.getByRole("form", { name: "Add MCP server" });
    await form.getByLabel("Name").fill("ghost");
    await form.getByLabel("Command").fill("/nonexistent/mcp-server");
    await form.getByRole("button", { name: "Add" }).click();
    await alert("server.command");
    await form.getByLabel("Name").fill("tools");
    await form.getByLabel("Command").fill(mcpServer);
    await form.getByLabel("Permission").selectOption("r");
    await form.getByRole("button", { name: "Add" }).click();
    const row = page.getByRole("row", { name: /tools/ });
    await row.getByRole("cell", { name: "r", exact: true }).waitFor();
    await row.getByRole("button", { name: "Test" }).click();
    await page.getByTestId("mcp-test-tools").filter({ hasText: /ok, \d+ ms: \S/ }).waitFor({ timeout: 60000 });
    await shot(page, "07-mcp");
    await form.getByLabel("Name").fill("spare");
    await form.getByLabel("Command").fill(mcpServer);
    await form.getByRole("button", { name: "Add" }).click();
    await page.getByRole("row", { name: /spare/ }).getByRole("button", { name: "Remove" }).click();
    await page.getByRole("row", { name: /spare/ }).waitFor({ state: "detached" });
    assert.deepEqual((await call(page, "GET", `${api}/reviewer/mcp`)).body.servers.map((x) => x.name), ["tools"]);
  });

  await step("Models: a model of no route is refused; the mock's model answers the test and becomes the default", async () => {
    await tab("Models");
    const field = page.getByLabel("Default model");
    await field.fill("nowhere/x");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await alert("not a provider route");
    await field.fill("openai/gpt-5-mini");
    await page.getByRole("button", { name: "Test" }).click();
    await page.getByRole("status").filter({ hasText: /ok in \d+ ms/ }).waitFor({ timeout: 60000 });
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await saved();
    await shot(page, "08-models");
    const m = (await call(page, "GET", `${api}/reviewer/model`)).body.model;
    assert.deepEqual([m.provider, m.model_id], ["openai", "gpt-5-mini"]);
  });

  await step("Models page: a local model's settings; a window too small and a route the project lacks refused; set, listed, removed", async () => {
    await page.getByRole("link", { name: "Models", exact: true }).click();
    const form = page.getByRole("form", { name: "Model settings" });
    await form.getByLabel("Model", { exact: true }).fill("openai/local-7b");
    await form.getByLabel("Context window (tokens)").fill("100");
    await form.getByRole("button", { name: "Save settings" }).click();
    await form.getByRole("alert").filter({ hasText: "settings.context_window" }).waitFor();
    await form.getByLabel("Model", { exact: true }).fill("nowhere/local-7b");
    await form.getByLabel("Context window (tokens)").fill("32768");
    await form.getByRole("button", { name: "Save settings" }).click();
    await form.getByRole("alert").filter({ hasText: "settings.model.provider" }).waitFor();
    await form.getByLabel("Model", { exact: true }).fill("openai/local-7b");
    await form.getByLabel("Input price (USD per million tokens)").fill("0.1");
    await form.getByLabel("Output price (USD per million tokens)").fill("0.2");
    await form.getByRole("button", { name: "Save settings" }).click();
    const row = page.getByTestId("model-setting-openai/local-7b");
    await row.filter({ hasText: "32,768" }).filter({ hasText: "$0.2" }).waitFor();
    await shot(page, "08b-model-settings");
    const listed = (await call(page, "GET", "/api/projects/default/models/settings")).body.settings;
    assert.deepEqual(listed.map((s) => [s.model.model_id, s.context_window, s.price.input, s.price.output]), [["local-7b", "32768", 0.1, 0.2]]);
    await page.getByLabel("Remove the settings of openai/local-7b").click();
    await row.waitFor({ state: "detached" });
    assert.deepEqual((await call(page, "GET", "/api/projects/default/models/settings")).body.settings ?? [], []);
  });

  await step("a session on the agent: its default model is offered; a command reads the vault value, which the page never shows", async () => {
    await page.goto(base + "/new");
    await page.locator("select[name=agent]").selectOption("reviewer");
    await page.waitForFunction(() => document.querySelector("input[name=model]")?.value === "openai/gpt-5-mini");
    await page.getByLabel("Workspace", { exact: true }).fill(join(work, "workspace"));
    // The workspace's remembered choices load as the field is left.
    await page.getByLabel("First message").fill("Count the token.");
    await page.locator("select[name=approval]").selectOption("APPROVAL_MODE_ALLOW_ALL");
    await page.getByRole("button", { name: "Create" }).click();
    await page.waitForURL(/\/sessions\/session-/);
    const card = page.getByTestId("tool-card").filter({ hasText: "exec_command" });
    await card.getByTestId("tool-output").filter({ hasText: new RegExp(`^${secret.length + 1}\\s`) }).waitFor({ state: "attached", timeout: 60000 });
    await page.locator(".msg.assistant").filter({ hasText: "many characters" }).waitFor();
    assert.ok(!(await page.content()).includes(secret), "the value is not on the page");
    await shot(page, "09-session-vault");
  });

  await step("Skills in the composer: a pinned skill reaches the model behind [use_skills]; a skill disabled meanwhile is refused, named", async () => {
    await call(page, "POST", `${api}/reviewer/skills`, { server_dir: "lint", replace: true });
    await page.reload();
    await page.getByTestId("skills-picker").locator("summary").click();
    await page.getByTestId("skill-lint").check();
    await page.getByTestId("pinned-skills").filter({ hasText: "lint" }).waitFor();
    // Disabled between the pick and the send: the engine refuses it.
    await call(page, "PUT", `${api}/reviewer/skills/lint/enabled`, { enabled: false });
    await page.getByTestId("composer").fill("Review the diff.");
    await page.getByTestId("composer").press("Enter");
    await alert('skill "lint" is disabled');
    await call(page, "PUT", `${api}/reviewer/skills/lint/enabled`, { enabled: true });
    await page.getByTestId("skills-picker").locator("summary").click();
    await page.getByTestId("skill-lint").check();
    await page.getByTestId("composer").fill("Review the diff.");
    await shot(page, "09b-skill-pinned");
    await page.getByTestId("composer").press("Enter");
    await page.locator(".msg.assistant").filter({ hasText: "Reviewed with the lint skill." }).waitFor({ timeout: 60000 });
    const used = page.locator(".msg.user").filter({ has: page.getByTestId("used-skills") });
    assert.match(await used.innerText(), /Skills:\s*lint\s*Review the diff\./);
    assert.equal(await page.getByTestId("pinned-skills").count(), 0, "the pin went with the message");
    await shot(page, "09c-skill-used");
  });

  await step("export the agent and import the archive as another; its files came along", async () => {
    await page.goto(base + "/agents");
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByLabel("Export reviewer").click()]);
    const archive = join(work, "reviewer.tar.gz");
    await download.saveAs(archive);
    assert.equal(download.suggestedFilename(), "reviewer.tar.gz");
    assert.deepEqual([...readFileSync(archive).subarray(0, 2)], [0x1f, 0x8b], "a gzip archive");
    await page.getByLabel("Imported agent name").fill("reviewer-copy");
    await page.getByLabel("Agent archive").setInputFiles(archive);
    await page.getByRole("button", { name: "Import" }).click();
    await page.getByRole("status").filter({ hasText: /Imported \d+ files into reviewer-copy/ }).waitFor();
    await page.getByRole("link", { name: "reviewer-copy", exact: true }).waitFor();
    await shot(page, "10-imported");
    const copy = await call(page, "GET", `${api}/reviewer-copy/config/AGENTS.md`);
    assert.equal(copy.body.content, "Review only. RULE-5150.\n");
    assert.deepEqual((await call(page, "GET", `${api}/reviewer-copy/vault`)).body.names, ["DEPLOY_TOKEN"]);
    // The same name again needs replace.
    await page.getByRole("button", { name: "Import" }).click();
    await alert("replace");
  });

  await step("a copy of an agent without its memory; renamed, then deleted", async () => {
    await page.getByLabel("New agent name").fill("second");
    await page.getByLabel("Create from").selectOption("reviewer");
    await page.getByRole("button", { name: "Create" }).click();
    await page.getByRole("link", { name: "second", exact: true }).waitFor();
    assert.equal((await call(page, "GET", `${api}/second/config/AGENTS.md`)).body.content, "Review only. RULE-5150.\n");
    assert.deepEqual((await call(page, "GET", `${api}/second/memory/user/files`)).body.files ?? [], [], "no memory copied");
    await page.getByRole("link", { name: "second", exact: true }).click();
    await page.getByLabel("Agent name", { exact: true }).fill("third");
    await page.getByRole("button", { name: "Rename" }).click();
    await page.waitForURL(base + "/agents/third");
    await page.getByRole("button", { name: "Delete agent" }).click();
    await page.waitForURL(base + "/agents");
    await page.getByRole("link", { name: "reviewer", exact: true }).waitFor();
    assert.equal(await page.getByRole("link", { name: "third", exact: true }).count(), 0);
    assert.ok(dialogs.some((d) => /Delete agent third/.test(d)), "the delete asked first");
  });

  assert.deepEqual(problems, [], "no script errors in the page");
  assert.deepEqual(a11y, [], "axe-core: no serious or critical violation on any screen");
  await ctx.tracing.stop();
  await ctx.close();
});
