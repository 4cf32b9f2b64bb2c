// What the browser tests share: starting penguin's processes with a
// pinned environment, Chromium, screenshots, and named steps that leave
// what is needed to see why one failed.
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { chromium } from "playwright-core";

/** Runner starts penguin's processes for one test file: each writes its
 * log to work/<name>.log, and stop ends them all. */
export class Runner {
  constructor(penguin, work, home) {
    this.penguin = penguin;
    this.work = work;
    this.home = home;
    this.procs = [];
  }

  /** start runs penguin with a pinned environment and resolves with the
   * value of field in its first log line with message msg. */
  start(name, args, msg, field, extraEnv = {}) {
    const env = { HOME: this.home, PATH: "/usr/local/bin:/usr/bin:/bin", SHELL: "/bin/sh", PENGUIN_LOG_FORMAT: "text", ...extraEnv };
    const p = spawn(this.penguin, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    this.procs.push(p);
    let log = "";
    return new Promise((resolveValue, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not log "${msg}" in 30s:\n${log}`)), 30000);
      const onData = (b) => {
        log += b.toString();
        writeFileSync(join(this.work, `${name}.log`), log);
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

  async stop() {
    for (const p of this.procs) p.kill("SIGTERM");
    await Promise.all(this.procs.map((p) => p.exitCode !== null ? null : new Promise((r) => p.on("exit", r))));
  }
}

/** launchChromium starts the browser the tests drive (CHROMIUM, default
 * Debian's /usr/bin/chromium), or fails saying how to get one when there
 * is none. */
export function launchChromium() {
  const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
  if (!existsSync(executablePath)) {
    throw new Error(`no browser at ${executablePath}: install Debian's chromium package (.ci/run does) or point CHROMIUM at a Chromium binary`);
  }
  return chromium.launch({
    executablePath,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
}

/** shot saves a screenshot of the page as dir/name.png. */
export async function shot(page, dir, name) {
  // Transitions finish first (the phone's sidebar slides in).
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: false, animations: "disabled" });
}

/** stepper returns step(name, fn), which runs named steps in order. Each
 * prints its name and time; the first to fail leaves what is needed to see
 * why in artifacts (FAILED-<step>.png of each open page, its HTML, the
 * page's console, the server logs from work, a Playwright trace), and the
 * test fails naming it. */
export function stepper(ctx, pages, consoleLog, artifacts, work) {
  const t0 = Date.now();
  let n = 0;
  return async function step(name, fn) {
    n++;
    const t = Date.now();
    const label = `${String(n).padStart(2, "0")} ${name}`;
    try {
      await fn();
      console.log(`step ${label}: ok in ${((Date.now() - t) / 1000).toFixed(1)}s (at ${((Date.now() - t0) / 1000).toFixed(1)}s)`);
    } catch (e) {
      console.log(`step ${label}: FAILED after ${((Date.now() - t) / 1000).toFixed(1)}s`);
      const slug = label.replace(/[^a-z0-9]+/gi, "-");
      for (const [i, p] of pages.entries()) {
        if (p.isClosed()) continue;
        await p.screenshot({ path: join(artifacts, `FAILED-${slug}-page${i + 1}.png`) }).catch(() => undefined);
        writeFileSync(join(artifacts, `FAILED-${slug}-page${i + 1}.html`), await p.content().catch((err) => String(err)));
      }
      writeFileSync(join(artifacts, "FAILED-console.log"), consoleLog.join("\n"));
      await ctx.tracing.stop({ path: join(artifacts, "FAILED-playwright-trace.zip") }).catch(() => undefined);
      for (const log of ["serve.log", "mockllm.log"]) {
        if (existsSync(join(work, log))) copyFileSync(join(work, log), join(artifacts, `FAILED-${log}`));
      }
      throw new Error(`step "${label}" failed: ${e.message}`, { cause: e });
    }
  };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** axe runs axe-core on the page as it is (evaluated through the
 * DevTools protocol, which the app's Content-Security-Policy does not
 * govern) and returns its serious and critical violations, each as one
 * line naming the rule and the elements, so a failing assertion says
 * what to fix. */
export async function axe(page) {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ["violations"] })).violations);
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.impact} ${v.id}: ${v.help} — ${v.nodes.map((n) => n.target.join(" ")).slice(0, 5).join(", ")}`);
}

/** apiCall makes an API request from the page, with its CSRF token, and
 * returns the status and the parsed body (a refusal included, for the
 * test to check). */
export function apiCall(page, method, path, body) {
  return page.evaluate(async ([method, path, body]) => {
    const auth = await fetch("/api/auth").then((r) => r.json());
    const r = await fetch(path, {
      method, headers: { "Content-Type": "application/json", "X-CSRF-Token": auth.csrf_token ?? "" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  }, [method, path, body]);
}

/** finish closes the browser, stops the runner's processes and removes
 * the test's temporary directory (kept with KEEP=1). */
export async function finish(browser, runner, work) {
  await browser?.close();
  await runner?.stop();
  if (work && process.env.KEEP !== "1") rmSync(work, { recursive: true, force: true });
}
