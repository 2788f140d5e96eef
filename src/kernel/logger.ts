import pino, { type DestinationStream, type Logger } from "pino";

export type { Logger };

/** Paths removed from every log line: credentials must never reach logs. */
export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-api-key"]',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  "headers.authorization",
  "headers.cookie",
  'headers["x-api-key"]',
  "password",
  "*.password",
  "token",
  "*.token",
  "secret",
  "*.secret",
  "api_key",
  "*.api_key",
];

/** Query parameters whose values are hidden when a URL is logged. */
const SECRET_PARAMS =
  /([?&](?:token|access_token|password|api_key|key|secret|code|state|SAMLResponse)=)[^&]*/gi;

export function redactUrlQuery(url: string): string {
  return url.replace(SECRET_PARAMS, "$1[Redacted]");
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "netmon" },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: "[Redacted]" },
      serializers: {
        req: (req: { method?: string; url?: string; ip?: string; id?: string }) => ({
          method: req.method,
          url: redactUrlQuery(req.url ?? ""),
          remoteAddress: req.ip,
        }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
        err: pino.stdSerializers.err,
      },
    },
    destination,
  );
}
