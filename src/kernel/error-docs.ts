import { ERROR_CODES } from "./error-codes.ts";

/** docs/errors.md, generated from the catalogue so the two cannot drift. */
export function renderErrorDocs(): string {
  const rows = Object.entries(ERROR_CODES)
    .sort(([a, x], [b, y]) => x.status - y.status || a.localeCompare(b))
    .map(([code, spec]) => `| \`${code}\` | ${spec.status} | ${spec.meaning.replace(/\|/g, "\\|")} |`);
  return `# Error codes

Generated from \`src/kernel/error-codes.ts\` by \`node --import tsx scripts/error-docs.ts\`; a test
fails when this file and the catalogue differ. Every error netmon answers carries one of these
codes:

- plain \`/api\` and \`/api/admin\` routes: \`{"error": "<code>", "message": "...", ...}\` (some add
  members, e.g. \`retry_after\` on \`rate_limited\`, \`uids\` on \`ambiguous\`);
- \`/api/v2\` (JSON:API): \`{"errors": [{"status": "<status>", "code": "<code>", "title": ..., "detail": ..., "source": ...}]}\`;
- OTLP receivers answer the status with an OTLP \`Status\` message; gRPC maps to its status codes.

Clients should branch on the code, never on the message, which may change.

| code | HTTP status | meaning |
|---|---|---|
${rows.join("\n")}
`;
}
