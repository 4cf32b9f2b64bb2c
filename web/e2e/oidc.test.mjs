// Sign-in through an identity provider in a real browser (Debian's
// Chromium driven by playwright-core): a real OpenID Provider on loopback
// (the zitadel op package, run by internal/testkit/oidcop/cmd/oidcop) and
// a real `penguin serve` configured for it. The sign-in page offers "Sign
// in with Example SSO"; alice goes through the provider and comes back
// signed in, with an HttpOnly session cookie no script can read; mallory,
// of a domain the server does not admit, comes back to the sign-in page
// with the reason, which leaves the address bar.
// Screenshots go to web/artifacts/oidc/.
//
// PENGUIN names the binary (default ../bin/penguin: `make build`), OIDCOP
// the provider (default ../bin/oidcop, which `make web-e2e` builds);
// CHROMIUM the browser; KEEP=1 keeps the temporary directory.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium, Runner, shot as shotIn, stepper } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const penguin = process.env.PENGUIN ?? join(repo, "bin/penguin");
const oidcop = process.env.OIDCOP ?? join(repo, "bin/oidcop");
const artifacts = join(repo, "web/artifacts/oidc");
const clientSecret = "secret-" + Math.random().toString(36).slice(2);

let work, runner, opRunner, browser, base, issuer;
const shot = (page, name) => shotIn(page, artifacts, name);

/** freePort returns a port free on loopback now, for the gateway, whose
 * callback URL the provider must know before the server starts. */
function freePort() {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolvePort(port));
    });
  });
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), "penguin-web-oidc-"));
  const home = join(work, "home");
  mkdirSync(home, { recursive: true });
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const callback = `${base}/api/auth/oidc/callback`;
  opRunner = new Runner(oidcop, work, home);
  issuer = await opRunner.start("oidcop", ["--client-id", "penguin-web", "--client-secret", clientSecret, "--redirect-url", callback],
    "oidcop listening", "issuer");
  runner = new Runner(penguin, work, home);
  await runner.start("serve", ["serve", "--listen", "127.0.0.1:0", "--http-listen", `127.0.0.1:${port}`, "--root", work,
    "--oidc-issuer", issuer, "--oidc-client-id", "penguin-web", "--oidc-redirect-url", callback,
    "--oidc-name", "Example SSO", "--oidc-allowed-domains", "example.com"],
  "HTTP gateway listening", "addr", { PENGUIN_OIDC_CLIENT_SECRET: clientSecret });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await runner?.stop();
  await opRunner?.stop();
  if (process.env.KEEP !== "1") rmSync(work, { recursive: true, force: true });
});

test("sign-in through an identity provider", async () => {
  const ctx = await browser.newContext();
  await ctx.tracing.start({ screenshots: true, snapshots: true });
  const page = await ctx.newPage();
  const consoleLog = [];
  page.on("console", (m) => consoleLog.push(`${m.type()}: ${m.text()}`));
  const step = stepper(ctx, [page], consoleLog, artifacts, work);

  await step("the sign-in page offers the provider", async () => {
    await page.goto(base);
    await page.getByRole("link", { name: "Sign in with Example SSO" }).waitFor();
    await shot(page, "01-signin");
  });

  await step("alice signs in through the provider and comes back signed in", async () => {
    await page.getByRole("link", { name: "Sign in with Example SSO" }).click();
    await page.waitForURL(`${base}/`);
    await page.getByRole("link", { name: "Team" }).waitFor();
    const auth = await page.evaluate(() => fetch("/api/auth").then((r) => r.json()));
    assert.equal(auth.user?.id, "alice", JSON.stringify(auth));
    assert.equal(await page.evaluate(() => document.cookie.includes("penguin_session")), false, "the session cookie is HttpOnly");
    const cookies = await ctx.cookies(base);
    const session = cookies.find((c) => c.name === "penguin_session");
    assert.ok(session?.value.startsWith("pgn_ses_") && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
    assert.equal(cookies.find((c) => c.name === "penguin_oidc"), undefined, "the sign-in's own cookie is gone");
    await page.getByRole("link", { name: "Team" }).click();
    await page.getByRole("region", { name: "Account" }).waitFor();
    await shot(page, "02-signed-in");
  });

  await step("mallory's domain is refused: back on the sign-in page with the reason", async () => {
    const r = await fetch(`${issuer}/oidcop/sign-in-as?sub=sub-mallory`, { method: "POST" });
    assert.equal(r.status, 204);
    const other = await browser.newContext();
    const p2 = await other.newPage();
    await p2.goto(base);
    await p2.getByRole("link", { name: "Sign in with Example SSO" }).click();
    await p2.getByRole("alert").filter({ hasText: "email domain" }).waitFor();
    assert.ok(!p2.url().includes("signin_error"), `the reason left the address: ${p2.url()}`);
    const auth = await p2.evaluate(() => fetch("/api/auth").then((res) => res.json()));
    assert.equal(auth.signed_in, false, JSON.stringify(auth));
    await shot(p2, "03-refused");
    await other.close();
  });

  await ctx.close();
});
