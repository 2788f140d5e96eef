import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { insertUser } from "../../src/access/users.ts";
import { startTestServer, type TestServer } from "../helpers/server.ts";
import { waitFor } from "../helpers/wait.ts";

/**
 * Password reset by mail (issue 17) against a real SMTP server on loopback: the same answer
 * whether or not the account exists, a single-use link valid for an hour, sessions revoked.
 */
const mails: { to: string; body: string }[] = [];
let smtp: SMTPServer;
let smtpPort = 0;
let server: TestServer;
let noMail: TestServer;

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, cb) {
      let body = "";
      stream.on("data", (c) => {
        body += c;
      });
      stream.on("end", () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address).join(","), body });
        cb();
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, "127.0.0.1", r));
  smtpPort = (smtp.server.address() as { port: number }).port;
  server = await startTestServer({
    env: {
      NETMON_SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
      NETMON_MAIL_FROM: "netmon@example.test",
      NETMON_BASE_URL: "https://netmon.example.test",
    },
  });
  noMail = await startTestServer();
  await insertUser(server.ctx, {
    email: "reset-me@example.test",
    password: "old-password-123",
    role: "viewer",
  });
  await insertUser(server.ctx, {
    email: "sso-only@example.test",
    password: "old-password-123",
    role: "viewer",
  });
  await server.db.query("UPDATE users SET local_login_enabled = false WHERE email = 'sso-only@example.test'");
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await noMail?.stop();
  await new Promise<void>((r) => smtp.close(() => r()));
});

const json = (s: TestServer, path: string, body: unknown, headers: Record<string, string> = {}) =>
  s.fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

async function signIn(password: string) {
  return json(server, "/users/log-in", { email: "reset-me@example.test", password });
}

describe("password reset by mail", () => {
  it("answers the same for an account that exists, one that does not, and one without password login", async () => {
    const answers = [];
    for (const email of ["reset-me@example.test", "nobody@example.test", "sso-only@example.test"]) {
      const r = await json(server, "/auth/password-reset", { email });
      answers.push({ status: r.status, body: await r.json() });
    }
    expect(answers[0]?.status).toBe(202);
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
    await waitFor(async () => mails.length >= 1, "the reset mail");
    await new Promise((r) => setTimeout(r, 300));
    // Only the account that may sign in with a password got a mail.
    expect(mails.map((m) => m.to)).toEqual(["reset-me@example.test"]);
    expect(mails[0]?.body).toMatch(
      /https:\/\/netmon\.example\.test\/auth\/password-reset\/[A-Za-z0-9_-]{20,}/,
    );
  });

  it("sets the password once through the link, revokes the account's sessions, and refuses the link again", async () => {
    const session = await signIn("old-password-123");
    expect(session.status).toBe(200);
    const cookie = (session.headers.getSetCookie?.() ?? []).map((c) => c.split(";")[0]).join("; ");
    expect((await server.fetch("/api/v1/me", { headers: { cookie } })).status).toBe(200);

    const link = /https:\/\/netmon\.example\.test(\/auth\/password-reset\/[A-Za-z0-9_-]+)/.exec(
      (mails[0]?.body ?? "").replace(/=\r?\n/g, ""),
    )?.[1] as string;
    expect(link).toBeDefined();
    const form = await server.fetch(link, { headers: { accept: "text/html" } });
    expect(form.status).toBe(200);
    expect(await form.text()).toContain("Choose a new password");
    expect(await (await server.fetch(link)).json()).toEqual({ status: "valid" });

    const tooShort = await json(server, link, { password: "short" });
    expect(tooShort.status).toBe(400);
    const done = await json(server, link, { password: "a-new-password-456" });
    expect(done.status).toBe(200);
    expect((await signIn("old-password-123")).status).toBe(401);
    expect((await signIn("a-new-password-456")).status).toBe(200);
    // Whoever held a session is signed out.
    expect((await server.fetch("/api/v1/me", { headers: { cookie } })).status).toBe(401);

    const again = await json(server, link, { password: "another-password-789" });
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: string }).error).toBe("invalid_reset_link");
    expect((await server.fetch(link)).status).toBe(400);
    const usedPage = await server.fetch(link, { headers: { accept: "text/html" } });
    expect(usedPage.status).toBe(400);
    expect(await usedPage.text()).toContain("already used");
  });

  it("refuses an expired link", async () => {
    mails.length = 0;
    await json(server, "/auth/password-reset", { email: "reset-me@example.test" });
    await waitFor(async () => mails.length >= 1, "a second reset mail");
    const link = /(\/auth\/password-reset\/[A-Za-z0-9_-]+)/.exec(
      (mails[0]?.body ?? "").replace(/=\r?\n/g, ""),
    )?.[1] as string;
    await server.db.query(
      "UPDATE password_reset_tokens SET expires_at = now() - interval '1 second' WHERE used_at IS NULL",
    );
    const r = await json(server, link, { password: "expired-link-password" });
    expect(r.status).toBe(400);
    expect((await signIn("a-new-password-456")).status).toBe(200);
  });

  it("says clearly when the server cannot send mail, and only then", async () => {
    const r = await json(noMail, "/auth/password-reset", { email: "whoever@example.test" });
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: string }).error).toBe("mail_not_configured");
    const pageWithoutMail = await noMail.fetch("/auth/password-reset");
    expect(pageWithoutMail.status).toBe(200);
    expect(await pageWithoutMail.text()).toContain("not configured");
    expect(await (await noMail.fetch("/users/log-in")).text()).not.toContain("Forgot your password?");
    expect(await (await server.fetch("/users/log-in")).text()).toContain("Forgot your password?");
    const bad = await json(server, "/auth/password-reset", { email: "" });
    expect(bad.status).toBe(400);
  });
});
