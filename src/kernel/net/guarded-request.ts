import http from "node:http";
import https from "node:https";
import { parseAddress } from "./address.ts";
import type { OutboundPolicy } from "./outbound-policy.ts";

export interface GuardedResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * One HTTP request to a user-supplied URL through the outbound guard: a literal address is
 * vetted before connecting, a name is vetted inside the socket's own lookup (the address
 * connected to is the address vetted). Redirects are not followed: the caller sees the 3xx.
 */
export function guardedRequest(
  policy: OutboundPolicy,
  target: string,
  init: {
    method: string;
    headers: Record<string, string>;
    body?: string;
    timeoutMs: number;
    maxBody?: number;
  },
): Promise<GuardedResponse> {
  return new Promise((resolve, reject) => {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      reject(new Error(`'${target}' is not a valid URL`));
      return;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      reject(new Error(`unsupported URL scheme ${url.protocol}`));
      return;
    }
    const port = Number(url.port) || (url.protocol === "https:" ? 443 : 80);
    const literal = parseAddress(url.hostname);
    try {
      if (literal) policy.vet(url.hostname.replace(/^\[|\]$/g, ""), port);
    } catch (err) {
      reject(err);
      return;
    }
    const mod = url.protocol === "https:" ? https : http;
    const req = mod.request(
      url,
      {
        method: init.method,
        headers: init.headers,
        lookup: policy.lookupFor(port) as never,
        timeout: init.timeoutMs,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const limit = init.maxBody ?? 64 * 1024;
        res.on("data", (c: Buffer) => {
          size += c.length;
          if (size <= limit) chunks.push(c);
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    const timer = setTimeout(
      () => req.destroy(Object.assign(new Error("timed out"), { name: "TimeoutError" })),
      init.timeoutMs,
    );
    req.on("close", () => clearTimeout(timer));
    req.on("timeout", () => req.destroy(Object.assign(new Error("timed out"), { name: "TimeoutError" })));
    req.on("error", reject);
    req.end(init.body);
  });
}
