import pino, { type DestinationStream, type Logger } from "pino";
import pretty from "pino-pretty";

export type { Logger };

/** How log lines are written: one JSON object per line, or coloured text for people. */
export type LogFormat = "json" | "pretty";

/**
 * `NETMON_LOG_FORMAT`: `auto` (the default) is pretty on a terminal and JSON everywhere
 * else (systemd's journal, a container runtime, a pipe), so collectors always get JSON and
 * nobody has to remember a flag at a terminal.
 */
export function chooseLogFormat(setting: "auto" | LogFormat, stdoutIsTty: boolean): LogFormat {
  if (setting !== "auto") return setting;
  return stdoutIsTty ? "pretty" : "json";
}

/**
 * The pretty stream: pino-pretty in-process and synchronous (no transport worker), so a
 * crash still flushes its last lines. Colours follow pino-pretty's terminal detection
 * (off with NO_COLOR or when `destination` is not a terminal).
 */
function prettyStream(destination?: DestinationStream): DestinationStream {
  return pretty({
    sync: true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname,service",
    ...(destination ? { destination, colorize: false } : {}),
  });
}

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

export function createLogger(
  level: string,
  destination?: DestinationStream,
  format: LogFormat = "json",
): Logger {
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
    format === "pretty" ? prettyStream(destination) : destination,
  );
}
