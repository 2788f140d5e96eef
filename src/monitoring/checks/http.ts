import http from "node:http";
import https from "node:https";
import type { TLSSocket } from "node:tls";
import { matchesUserPattern } from "../../kernel/user-pattern.ts";
import { TargetRefusedError } from "../target-policy.ts";
import {
  applyThresholds,
  type CheckResult,
  type CheckRunner,
  cfg,
  errorMessage,
  round,
  timeoutMs,
} from "./types.ts";

interface Hop {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  certValidTo?: Date;
  timings: { connect_ms?: number; tls_ms?: number; ttfb_ms: number };
}

function targetUrl(target: string, port: number | null | undefined): URL {
  const u = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(target) ? target : `http://${target}`);
  if (port && !u.port) u.port = String(port);
  return u;
}

function expectedStatusOk(status: number, expected: unknown): boolean {
  if (typeof expected === "number") return status === expected;
  if (Array.isArray(expected)) return expected.some((e) => Number(e) === status);
  if (typeof expected === "string" && expected.trim() !== "") {
    // "2xx", "200" or "200,204" (what a form field holds); the config schema admits only these.
    return expected.split(",").some((part) => {
      const t = part.trim().toLowerCase();
      return /^\dxx$/.test(t) ? Math.floor(status / 100) === Number(t[0]) : Number(t) === status;
    });
  }
  return status >= 200 && status < 400;
}

/**
 * HTTP(S) check. config: method (GET), headers, body, expected_status (number, list or "2xx";
 * default 200–399), body_match (regex) / body_contains, follow_redirects (true), max_redirects (5),
 * tls_warning_days (30) / tls_critical_days (7), insecure (false: verify certificates).
 * Redirects are followed by hand so every hop passes the SSRF guard.
 */
export const runHttp: CheckRunner = async (spec, opts) => {
  const c = cfg(spec);
  const limit = timeoutMs(spec);
  const deadline = performance.now() + limit;
  const method = typeof c.method === "string" ? c.method.toUpperCase() : "GET";
  const headers: Record<string, string> = {
    "user-agent": "netmon-check/1",
    ...(c.headers as Record<string, string> | undefined),
  };
  const follow = c.follow_redirects !== false;
  const maxRedirects = typeof c.max_redirects === "number" ? c.max_redirects : 5;
  let url: URL;
  try {
    url = targetUrl(spec.target, spec.port);
  } catch {
    return { status: "error", response_time_ms: null, error: `invalid URL '${spec.target}'` };
  }
  const started = performance.now();
  const redirects: string[] = [];
  let hop: Hop;
  try {
    for (;;) {
      const port = Number(url.port) || (url.protocol === "https:" ? 443 : 80);
      const ip = await opts.policy.resolve(url.hostname, port);
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new Error(`timed out after ${limit} ms`);
      hop = await request(
        url,
        ip,
        method,
        headers,
        typeof c.body === "string" ? c.body : undefined,
        remaining,
        c.insecure === true,
        opts.signal,
      );
      const loc = hop.headers.location;
      if (follow && hop.status >= 300 && hop.status < 400 && loc) {
        if (redirects.length >= maxRedirects) throw new Error(`more than ${maxRedirects} redirects`);
        url = new URL(loc, url);
        if (url.protocol !== "http:" && url.protocol !== "https:")
          throw new Error(`redirect to unsupported scheme ${url.protocol}`);
        redirects.push(url.toString());
        continue;
      }
      break;
    }
  } catch (err) {
    const status = err instanceof TargetRefusedError ? "error" : "critical";
    return { status, response_time_ms: null, error: errorMessage(err), details: { redirects } };
  }
  const total = round(performance.now() - started);
  const details: Record<string, unknown> = { status_code: hop.status, url: url.toString(), redirects };
  const metrics: Record<string, number> = {
    total_ms: total,
    ttfb_ms: hop.timings.ttfb_ms,
    status_code: hop.status,
  };
  if (hop.timings.connect_ms != null) metrics.connect_ms = hop.timings.connect_ms;
  if (hop.timings.tls_ms != null) metrics.tls_ms = hop.timings.tls_ms;
  let result: CheckResult = { status: "success", response_time_ms: total, metrics, details };
  if (!expectedStatusOk(hop.status, c.expected_status)) {
    result = { ...result, status: "critical", error: `unexpected status ${hop.status}` };
  } else if (typeof c.body_match === "string" && !matchesUserPattern(c.body_match, hop.body)) {
    result = { ...result, status: "critical", error: `body does not match /${c.body_match}/` };
  } else if (typeof c.body_contains === "string" && !hop.body.includes(c.body_contains)) {
    result = { ...result, status: "critical", error: `body does not contain '${c.body_contains}'` };
  }
  if (hop.certValidTo) {
    const days = Math.floor((hop.certValidTo.getTime() - Date.now()) / 86_400_000);
    metrics.tls_cert_expiry_days = days;
    details.tls_cert_valid_to = hop.certValidTo.toISOString();
    const crit = typeof c.tls_critical_days === "number" ? c.tls_critical_days : 7;
    const warn = typeof c.tls_warning_days === "number" ? c.tls_warning_days : 30;
    if (result.status === "success" && days < crit)
      result = { ...result, status: "critical", error: `TLS certificate expires in ${days} days` };
    else if (result.status === "success" && days < warn)
      result = { ...result, status: "warning", error: `TLS certificate expires in ${days} days` };
  }
  return applyThresholds(result, spec);
};

function request(
  url: URL,
  ip: string,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  timeout: number,
  insecure: boolean,
  signal?: AbortSignal,
): Promise<Hop> {
  const isHttps = url.protocol === "https:";
  const lib = isHttps ? https : http;
  const t0 = performance.now();
  return new Promise<Hop>((resolve, reject) => {
    let connectMs: number | undefined;
    let tlsMs: number | undefined;
    const req = lib.request(
      {
        method,
        host: ip,
        port: Number(url.port) || (isHttps ? 443 : 80),
        path: `${url.pathname}${url.search}`,
        headers: { host: url.host, ...headers },
        servername: isHttps && !/^[\d.:]+$/.test(url.hostname) ? url.hostname : undefined,
        rejectUnauthorized: !insecure,
        agent: false,
        signal,
      },
      (res) => {
        const ttfb = round(performance.now() - t0);
        let certValidTo: Date | undefined;
        if (isHttps) {
          const cert = (res.socket as TLSSocket).getPeerCertificate?.();
          if (cert?.valid_to) certValidTo = new Date(cert.valid_to);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (d: Buffer) => {
          size += d.length;
          if (size <= 1024 * 1024) chunks.push(d);
        });
        res.on("end", () => {
          clearTimeout(timer);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
            certValidTo,
            timings: { connect_ms: connectMs, tls_ms: tlsMs, ttfb_ms: ttfb },
          });
        });
        res.on("error", reject);
      },
    );
    const timer = setTimeout(
      () => req.destroy(new Error(`timed out after ${Math.round(timeout)} ms`)),
      timeout,
    );
    req.on("socket", (s) => {
      s.once("connect", () => {
        connectMs = round(performance.now() - t0);
      });
      s.once("secureConnect", () => {
        tlsMs = round(performance.now() - t0 - (connectMs ?? 0));
      });
    });
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    if (body) req.write(body);
    req.end();
  });
}
