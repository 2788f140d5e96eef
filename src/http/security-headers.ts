import type { FastifyInstance } from "fastify";

/**
 * Headers every response carries, and the stricter set for HTML (sign-in page, Swagger UI, the
 * console): no inline script may run, no other site may frame us, no MIME sniffing, no full
 * URLs leaked in Referer. Pages keep their scripts and styles in served files.
 */
export const HTML_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
};

export function securityHeaders(app: FastifyInstance): void {
  app.addHook("onSend", async (_request, reply, payload) => {
    reply.header("x-content-type-options", "nosniff");
    const type = String(reply.getHeader("content-type") ?? "");
    if (type.startsWith("text/html")) {
      for (const [k, v] of Object.entries(HTML_SECURITY_HEADERS)) if (!reply.hasHeader(k)) reply.header(k, v);
    }
    return payload;
  });
}
