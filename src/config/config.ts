import path from "node:path";
import { bool, duration, int, list, oneOf, type Parser, type Rate, rate, str, url } from "./parsers.ts";
import { parseTrapUser, type TrapUser } from "./snmp-users.ts";

/**
 * Every environment variable netmon reads, declared once. The README table is checked
 * against this list by a test, so a variable cannot be added without documenting it.
 */
interface VarSpec<T> {
  parse: Parser<T>;
  default?: T;
  description: string;
  /** Default shown in docs when it is computed rather than a literal. */
  shownDefault?: string;
  secret?: boolean;
}

function v<S extends VarSpec<unknown>>(spec: S): S {
  return spec;
}

export const VARIABLES = {
  PORT: v({ parse: int(0, 65535), default: 4000, description: "HTTP listen port" }),
  HOST: v({ parse: str, default: "0.0.0.0", description: "HTTP listen address" }),
  NETMON_DATA_DIR: v({
    parse: str,
    default: "./data",
    description: "Data directory: the embedded PGlite database, the generated secret key",
  }),
  DATABASE_URL: v({
    parse: url("postgres", "postgresql"),
    description: "PostgreSQL connection URL; when set, PostgreSQL is used instead of embedded PGlite",
    secret: true,
  }),
  NETMON_DB_POOL_SIZE: v({ parse: int(1, 200), default: 10, description: "PostgreSQL connection pool size" }),
  NETMON_PGLITE_SHARED_BUFFERS_MB: v({
    parse: int(8, 4096),
    default: 32,
    description:
      "Embedded database (PGlite) buffer cache in MiB. Its reads miss into the OS page cache, so a larger one mostly costs resident memory (128 MiB: ~120 MB more RSS, no faster reads measured)",
  }),
  NETMON_BASE_URL: v({
    parse: url("http", "https"),
    description: "Public URL of this service, used to build links and SSO callback URLs",
    shownDefault: "http://localhost:$PORT",
  }),
  NETMON_LOG_LEVEL: v({
    parse: oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"),
    default: "info",
    description: "Log level (fatal, error, warn, info, debug, trace, silent)",
  }),
  NETMON_LOG_FORMAT: v({
    parse: oneOf("auto", "json", "pretty"),
    default: "auto",
    description:
      "Log format: json (one object per line), pretty (coloured, for people) or auto (pretty when stdout is a terminal, JSON otherwise)",
  }),
  NETMON_SECRET_KEY_FILE: v({
    parse: str,
    description: "File holding the signing/encryption key; generated on first start when unset",
    shownDefault: "$NETMON_DATA_DIR/secret.key",
  }),
  NETMON_BODY_LIMIT: v({
    parse: int(1024, 64 * 1024 * 1024),
    default: 1024 * 1024,
    description: "Maximum JSON request body size in bytes",
  }),
  NETMON_SHUTDOWN_TIMEOUT: v({
    parse: duration,
    default: 30,
    description: "How long a graceful shutdown waits for in-flight requests (e.g. 30s)",
    shownDefault: "30s",
  }),
  NETMON_TRUSTED_PROXIES: v({
    parse: list,
    default: [],
    description: "Comma-separated proxy IPs/CIDRs whose X-Forwarded-For is honoured",
    shownDefault: "(none)",
  }),
  NETMON_RATE_LIMIT_API_DEFAULT: v({
    parse: rate,
    // 600/min: one console tab polls ~60 requests a minute, so a team behind one NAT fits (decision 0700).
    default: { requests: 600, windowSeconds: 60 },
    description: "Shared per-IP request budget of the /api scope, <requests>/<window>",
    shownDefault: "600/60s",
  }),
  NETMON_RATE_LIMIT_ADMIN: v({
    parse: rate,
    default: { requests: 120, windowSeconds: 60 },
    description: "Separate per-IP request budget of /api/admin",
    shownDefault: "120/60s",
  }),
  NETMON_RATE_LIMIT_CONTROL: v({
    parse: rate,
    default: { requests: 600, windowSeconds: 60 },
    description: "Request budget of each gateway/agent credential on control-plane routes",
    shownDefault: "600/60s",
  }),
  NETMON_RATE_LIMIT_MCP: v({
    parse: rate,
    default: { requests: 60, windowSeconds: 60 },
    description: "Request budget of /mcp per client IP and token (MCP tool calls)",
    shownDefault: "60/60s",
  }),
  NETMON_MCP_TOKEN: v({
    parse: (s: string) => s,
    description: "netmon mcp (stdio bridge): the bearer token, with the mcp scope, it presents to the server",
    secret: true,
  }),
  NETMON_SMTP_URL: v({
    parse: url("smtp", "smtps"),
    description:
      "Mail server for netmon's own mail (password reset links), e.g. smtp://user:pass@mail.example.net:587 (smtps:// for TLS from the start); unset: password reset is off",
    secret: true,
  }),
  NETMON_MAIL_FROM: v({
    parse: (s: string) => s,
    default: "netmon@localhost",
    description: "Sender address of netmon's own mail",
  }),
  NETMON_TOKEN: v({
    parse: (s: string) => s,
    description:
      "For CLI commands that call a running server (netmon backup --server): an admin's bearer token",
    secret: true,
  }),
  NETMON_MCP_ENABLED: v({
    parse: bool,
    default: true,
    description: "Serve the MCP endpoint /mcp (usable only with bearer tokens carrying the mcp scope)",
  }),
  NETMON_RATE_LIMIT_AUTH_FAILURES: v({
    parse: rate,
    default: { requests: 60, windowSeconds: 60 },
    description:
      "Failed authentications (bad token, API key or session) allowed per client IP; beyond it 429 without a credential lookup",
    shownDefault: "60/60s",
  }),
  REDIS_URL: v({
    parse: url("redis", "rediss"),
    description: "Redis URL; when set, rate-limit counters are kept in Redis",
    secret: true,
  }),
  NATS_URL: v({
    parse: url("nats", "tls"),
    description:
      "NATS server URL; when set, telemetry receivers buffer through a JetStream stream and writer workers store it (decision 0311)",
    secret: true,
  }),
  NETMON_JETSTREAM_STREAM: v({
    parse: (raw: string) => {
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(raw))
        throw new Error(`must be letters, digits, _ or -, got '${raw}'`);
      return raw;
    },
    default: "NETMON_TELEMETRY",
    description:
      "JetStream stream of the telemetry buffer (subjects `<stream>.<kind>`, dead letters in `<stream>_DLQ`)",
  }),
  NETMON_JETSTREAM_MAX_BYTES: v({
    parse: int(1_048_576, Number.MAX_SAFE_INTEGER),
    default: 1_073_741_824,
    description:
      "Bytes the telemetry stream may hold while the database catches up; when full, receivers answer 503",
    shownDefault: "1073741824 (1 GiB)",
  }),
  NETMON_JETSTREAM_MAX_AGE_DAYS: v({
    parse: int(1, 365),
    default: 7,
    description: "Days a unit may wait in the telemetry stream before JetStream discards it",
  }),
  NETMON_CORE_URL: v({
    parse: url("http", "https"),
    description: "`netmon gateway`: the core's URL (same as --core)",
  }),
  NETMON_GATEWAY_TOKEN: v({
    parse: str,
    description: "`netmon gateway`: the gateway's enrolment token (same as --token)",
    secret: true,
  }),
  NETMON_GATEWAY_URL: v({
    parse: url("http", "https"),
    description: "`netmon agent`: the gateway's URL (same as --gateway)",
  }),
  NETMON_AGENT_TOKEN: v({
    parse: str,
    description: "`netmon agent`: the agent's enrolment token (same as --token)",
    secret: true,
  }),
  NETMON_ICMP_BACKEND: v({
    parse: oneOf("auto", "fping"),
    default: "auto",
    description:
      "ICMP implementation of ping checks: auto (raw sockets when permitted, else fping) or fping (always the fping child process)",
  }),
  NETMON_EMBEDDED_AGENT: v({
    parse: bool,
    default: true,
    description: "Run one in-process gateway and agent monitoring the local host",
  }),
  NETMON_HEARTBEAT_TIMEOUT: v({
    parse: duration,
    default: 60,
    description: "Gateways/agents silent this long are marked offline/disconnected (e.g. 60s)",
    shownDefault: "60s",
  }),
  NETMON_NOTIFY_CLAIM_TIMEOUT: v({
    parse: duration,
    default: 300,
    description:
      "A notification claimed by a replica that died mid-send is retried by another replica after this long (at-least-once delivery)",
    shownDefault: "5m",
  }),
  NETMON_HOST_METRICS_INTERVAL: v({
    parse: duration,
    default: 15,
    description:
      "How often the embedded agent samples the local host's CPU, memory, disks and processes (e.g. 15s)",
    shownDefault: "15s",
  }),
  NETMON_UNASSIGNED_CHECKS: v({
    parse: (raw: string) => {
      if (raw !== "embedded" && raw !== "any") throw new Error(`must be embedded or any, got '${raw}'`);
      return raw;
    },
    default: "embedded",
    description:
      "Where checks with no agent_uid run: embedded (this core's embedded agent, when it runs) or any (whichever agent claims them first)",
  }),
  NETMON_CHECK_ALLOW_LINK_LOCAL: v({
    parse: bool,
    default: false,
    description: "Allow checks against link-local/metadata addresses (169.254.0.0/16, fe80::/10)",
  }),
  NETMON_CHECK_ALLOW_CORE: v({
    parse: bool,
    default: false,
    description: "Allow checks against this core's own HTTP endpoint",
  }),
  NETMON_CUSTOM_CHECK_ALLOWLIST: v({
    parse: list,
    default: [],
    description: "Comma-separated absolute paths of executables custom checks may run",
    shownDefault: "(none)",
  }),
  NETMON_POLL_JOB_RETENTION_DAYS: v({
    parse: int(1, 3650),
    default: 7,
    description: "Days finished poll jobs are kept (results stay in service_status)",
  }),
  NETMON_METRICS_RETENTION_DAYS: v({
    parse: int(1, 3650),
    default: 7,
    description:
      "Days raw metrics are kept: timeseries, host (sysmon) and OTel metrics, service_status history",
  }),
  NETMON_ROLLUP_RETENTION_DAYS: v({
    parse: int(1, 3650),
    default: 90,
    description: "Days the hourly metric rollups are kept",
  }),
  NETMON_LOG_RETENTION_DAYS: v({
    parse: int(1, 3650),
    default: 30,
    description: "Days logs, events and trace spans are kept",
  }),
  NETMON_SESSION_IDLE_TIMEOUT_SECONDS: v({
    parse: int(60, 365 * 86400),
    default: 3600,
    description: "Browser session idle timeout",
  }),
  NETMON_CREDENTIAL_CACHE_SECONDS: v({
    parse: int(0, 3600),
    default: 30,
    description:
      "How long a verified credential (bearer token, API key, session) is kept in memory so a request needs no credential lookup; every change to a credential, user or role profile evicts it at once on every replica (LISTEN/NOTIFY). 0 turns the cache off",
  }),
  NETMON_CREDENTIAL_CACHE_ENTRIES: v({
    parse: int(1, 1_000_000),
    default: 10_000,
    description: "Credential cache size (entries, least recently used evicted first)",
  }),
  NETMON_SESSION_ABSOLUTE_TIMEOUT_SECONDS: v({
    parse: int(60, 365 * 86400),
    default: 30 * 86400,
    description: "Browser session absolute lifetime",
  }),
  NETMON_INITIAL_ADMIN: v({
    parse: bool,
    default: true,
    description:
      "On a first start with no admin and no SERVICE_ADMIN_PASSWORD, create the bootstrap admin with a generated password written to $NETMON_DATA_DIR/initial-admin-password (0600)",
  }),
  SERVICE_ADMIN_EMAIL: v({
    parse: str,
    default: "admin@localhost",
    description: "Email of the bootstrap admin created at start-up when no admin exists",
  }),
  SERVICE_ADMIN_PASSWORD: v({
    parse: str,
    description: "Password of the bootstrap admin",
    secret: true,
  }),
  SERVICE_ADMIN_PASSWORD_FILE: v({
    parse: str,
    description: "File holding the bootstrap admin password (alternative to SERVICE_ADMIN_PASSWORD)",
  }),
  SERVICE_ADMIN_PASSWORD_FORCE_SYNC: v({
    parse: bool,
    default: false,
    description: "Re-apply the bootstrap admin password on every start",
  }),
  NETMON_RATE_LIMIT_INGEST: v({
    parse: rate,
    default: { requests: 6000, windowSeconds: 60 },
    description:
      "Request budget of each credential on the OTLP/HTTP receivers (/v1/logs, /v1/metrics, /v1/traces)",
    shownDefault: "6000/60s",
  }),
  NETMON_OTLP_BODY_LIMIT: v({
    parse: int(1024, 256 * 1024 * 1024),
    default: 16 * 1024 * 1024,
    description:
      "Maximum OTLP request size in bytes, compressed and after gzip decompression (HTTP and gRPC); larger answers 413 / RESOURCE_EXHAUSTED",
  }),
  NETMON_INGEST_MAX_PENDING: v({
    parse: int(100, 10_000_000),
    default: 100_000,
    description:
      "Telemetry records (logs, points, spans, syslog messages) being written at once; beyond it receivers answer 503 + Retry-After (gRPC UNAVAILABLE) instead of queueing",
  }),
  NETMON_INGEST_HOST: v({
    parse: str,
    default: "0.0.0.0",
    description: "Listen address of the non-HTTP receivers: OTLP/gRPC, syslog (UDP and TCP) and SNMP traps",
  }),
  NETMON_OTLP_GRPC_PORT: v({
    parse: int(0, 65535),
    default: 4317,
    description: "OTLP/gRPC listen port (logs, metrics, traces); 0 turns the gRPC receiver off",
  }),
  NETMON_SYSLOG_PORT: v({
    parse: int(0, 65535),
    default: 5514,
    description: "Syslog listen port, UDP and TCP (RFC 5424 and RFC 3164); 0 turns the syslog receiver off",
  }),
  NETMON_SYSLOG_TLS_PORT: v({
    parse: int(0, 65535),
    default: 0,
    description:
      "Syslog over TLS (RFC 5425, octet-counted frames, TLS 1.2+) listen port, e.g. 6514; 0 (the default) leaves it off. Needs NETMON_SYSLOG_TLS_CERT_FILE and NETMON_SYSLOG_TLS_KEY_FILE",
  }),
  NETMON_SYSLOG_TLS_CERT_FILE: v({
    parse: str,
    description: "PEM certificate (chain) of the syslog TLS listener",
  }),
  NETMON_SYSLOG_TLS_KEY_FILE: v({ parse: str, description: "PEM private key of the syslog TLS listener" }),
  NETMON_SNMP_TRAP_PORT: v({
    parse: int(0, 65535),
    default: 1162,
    description: "SNMP trap listen port (UDP, v2c and v3); 0 turns the trap receiver off",
  }),
  NETMON_SNMP_TRAP_COMMUNITIES: v({
    parse: list,
    default: ["public"],
    description:
      "Comma-separated SNMP v1/v2c communities whose traps are accepted (others are refused and counted)",
    shownDefault: "public",
    secret: true,
  }),
  NETMON_SNMP_TRAP_USERS: v({
    parse: (raw: string) => list(raw).map(parseTrapUser),
    default: [],
    description:
      "Comma-separated SNMPv3 users whose traps are accepted: name[:md5|sha|sha256…:authKey[:des|aes:privKey]]",
    shownDefault: "(none)",
    secret: true,
  }),
  SERVICE_AUTH_FORCE_LOCAL_LOGIN: v({
    parse: bool,
    default: false,
    description: "Allow any account with a local password to sign in locally in SSO modes",
  }),
} as const;

type Vars = typeof VARIABLES;
type ValueOf<K extends keyof Vars> = ReturnType<Vars[K]["parse"]>;
type HasDefault<K extends keyof Vars> = Vars[K] extends { default: unknown } ? K : never;

export type RawConfig = {
  [K in keyof Vars as HasDefault<K>]: ValueOf<K>;
} & {
  [K in keyof Vars as Exclude<K, HasDefault<K>>]?: ValueOf<K>;
};

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  dbPoolSize: number;
  pgliteSharedBuffersMb: number;
  baseUrl: string;
  logLevel: ValueOf<"NETMON_LOG_LEVEL">;
  logFormat: ValueOf<"NETMON_LOG_FORMAT">;
  secretKeyFile: string;
  bodyLimit: number;
  shutdownTimeoutSeconds: number;
  trustedProxies: string[];
  rateLimitApiDefault: Rate;
  rateLimitAdmin: Rate;
  rateLimitControl: Rate;
  rateLimitAuthFailures: Rate;
  rateLimitMcp: Rate;
  mcpEnabled: boolean;
  mcpToken: string | undefined;
  /** netmon's own outgoing mail (password reset); unset = off. */
  mail: { smtpUrl: string | undefined; from: string };
  /** NETMON_TOKEN: bearer token for CLI commands that call a running server. */
  token: string | undefined;
  redisUrl: string | undefined;
  embeddedAgent: boolean;
  monitoring: {
    heartbeatTimeoutSeconds: number;
    /** A `dispatching` delivery older than this belongs to a dead replica and is sent again. */
    notifyClaimTimeoutSeconds: number;
    hostMetricsIntervalSeconds: number;
    unassignedChecks: "embedded" | "any";
    allowLinkLocal: boolean;
    allowCore: boolean;
    customAllowList: string[];
    jobRetentionDays: number;
  };
  /** Telemetry retention in days (purged hourly by the leader; src/telemetry/retention.ts). */
  retention: { metricsDays: number; rollupDays: number; logDays: number };
  sessionIdleTimeoutSeconds: number;
  sessionAbsoluteTimeoutSeconds: number;
  credentialCache: { seconds: number; entries: number };
  admin: {
    email: string;
    password: string | undefined;
    passwordFile: string | undefined;
    forceSync: boolean;
    /** Generate the first admin's password when none is configured (NETMON_INITIAL_ADMIN). */
    generate: boolean;
  };
  forceLocalLogin: boolean;
  /** Telemetry receivers (src/telemetry/ingest): OTLP/HTTP, OTLP/gRPC, syslog, SNMP traps. */
  ingest: {
    rateLimit: Rate;
    otlpBodyLimit: number;
    maxPending: number;
    host: string;
    otlpGrpcPort: number;
    syslogPort: number;
    syslogTls: { port: number; certFile: string | undefined; keyFile: string | undefined };
    snmpTrapPort: number;
    snmpTrapCommunities: string[];
    snmpTrapUsers: TrapUser[];
    /** The JetStream buffer, or null when NATS_URL is unset (receivers write directly). */
    jetstream: { url: string; stream: string; maxBytes: number; maxAgeDays: number } | null;
  };
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`invalid configuration: ${variable} ${detail}`);
    this.name = "ConfigError";
  }
}

/** Parse and validate the environment. Throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(VARIABLES) as [string, VarSpec<unknown>][]) {
    const value = env[name];
    if (value === undefined || value === "") {
      raw[name] = spec.default;
      continue;
    }
    try {
      raw[name] = spec.parse(value);
    } catch (err) {
      throw new ConfigError(name, (err as Error).message);
    }
  }
  const r = raw as RawConfig;
  const dataDir = path.resolve(r.NETMON_DATA_DIR);
  return {
    port: r.PORT,
    host: r.HOST,
    dataDir,
    databaseUrl: r.DATABASE_URL,
    dbPoolSize: r.NETMON_DB_POOL_SIZE,
    pgliteSharedBuffersMb: r.NETMON_PGLITE_SHARED_BUFFERS_MB,
    baseUrl: (r.NETMON_BASE_URL ?? `http://localhost:${r.PORT}`).replace(/\/+$/, ""),
    logLevel: r.NETMON_LOG_LEVEL,
    logFormat: r.NETMON_LOG_FORMAT,
    secretKeyFile: path.resolve(r.NETMON_SECRET_KEY_FILE ?? path.join(dataDir, "secret.key")),
    bodyLimit: r.NETMON_BODY_LIMIT,
    shutdownTimeoutSeconds: r.NETMON_SHUTDOWN_TIMEOUT,
    trustedProxies: r.NETMON_TRUSTED_PROXIES,
    rateLimitApiDefault: r.NETMON_RATE_LIMIT_API_DEFAULT,
    rateLimitAdmin: r.NETMON_RATE_LIMIT_ADMIN,
    rateLimitControl: r.NETMON_RATE_LIMIT_CONTROL,
    rateLimitMcp: r.NETMON_RATE_LIMIT_MCP,
    mcpEnabled: r.NETMON_MCP_ENABLED,
    mcpToken: r.NETMON_MCP_TOKEN,
    mail: { smtpUrl: r.NETMON_SMTP_URL, from: r.NETMON_MAIL_FROM },
    token: r.NETMON_TOKEN,
    rateLimitAuthFailures: r.NETMON_RATE_LIMIT_AUTH_FAILURES,
    redisUrl: r.REDIS_URL,
    embeddedAgent: r.NETMON_EMBEDDED_AGENT,
    monitoring: {
      heartbeatTimeoutSeconds: r.NETMON_HEARTBEAT_TIMEOUT,
      notifyClaimTimeoutSeconds: r.NETMON_NOTIFY_CLAIM_TIMEOUT,
      hostMetricsIntervalSeconds: r.NETMON_HOST_METRICS_INTERVAL,
      unassignedChecks: r.NETMON_UNASSIGNED_CHECKS as "embedded" | "any",
      allowLinkLocal: r.NETMON_CHECK_ALLOW_LINK_LOCAL,
      allowCore: r.NETMON_CHECK_ALLOW_CORE,
      customAllowList: r.NETMON_CUSTOM_CHECK_ALLOWLIST,
      jobRetentionDays: r.NETMON_POLL_JOB_RETENTION_DAYS,
    },
    retention: {
      metricsDays: r.NETMON_METRICS_RETENTION_DAYS,
      rollupDays: r.NETMON_ROLLUP_RETENTION_DAYS,
      logDays: r.NETMON_LOG_RETENTION_DAYS,
    },
    sessionIdleTimeoutSeconds: r.NETMON_SESSION_IDLE_TIMEOUT_SECONDS,
    sessionAbsoluteTimeoutSeconds: r.NETMON_SESSION_ABSOLUTE_TIMEOUT_SECONDS,
    credentialCache: {
      seconds: r.NETMON_CREDENTIAL_CACHE_SECONDS,
      entries: r.NETMON_CREDENTIAL_CACHE_ENTRIES,
    },
    admin: {
      email: r.SERVICE_ADMIN_EMAIL,
      password: r.SERVICE_ADMIN_PASSWORD,
      passwordFile: r.SERVICE_ADMIN_PASSWORD_FILE,
      forceSync: r.SERVICE_ADMIN_PASSWORD_FORCE_SYNC,
      generate: r.NETMON_INITIAL_ADMIN,
    },
    forceLocalLogin: r.SERVICE_AUTH_FORCE_LOCAL_LOGIN,
    ingest: {
      rateLimit: r.NETMON_RATE_LIMIT_INGEST,
      otlpBodyLimit: r.NETMON_OTLP_BODY_LIMIT,
      maxPending: r.NETMON_INGEST_MAX_PENDING,
      host: r.NETMON_INGEST_HOST,
      otlpGrpcPort: r.NETMON_OTLP_GRPC_PORT,
      syslogPort: r.NETMON_SYSLOG_PORT,
      syslogTls: {
        port: r.NETMON_SYSLOG_TLS_PORT,
        certFile: r.NETMON_SYSLOG_TLS_CERT_FILE,
        keyFile: r.NETMON_SYSLOG_TLS_KEY_FILE,
      },
      snmpTrapPort: r.NETMON_SNMP_TRAP_PORT,
      snmpTrapCommunities: r.NETMON_SNMP_TRAP_COMMUNITIES,
      snmpTrapUsers: r.NETMON_SNMP_TRAP_USERS,
      jetstream: r.NATS_URL
        ? {
            url: r.NATS_URL,
            stream: r.NETMON_JETSTREAM_STREAM,
            maxBytes: r.NETMON_JETSTREAM_MAX_BYTES,
            maxAgeDays: r.NETMON_JETSTREAM_MAX_AGE_DAYS,
          }
        : null,
    },
  };
}

/**
 * One variable, parsed by its declaration: for code that runs outside `loadConfig` (the
 * separate gateway and agent commands, check runners in worker threads).
 */
export function readVariable<K extends keyof Vars>(
  name: K,
  env: NodeJS.ProcessEnv = process.env,
): ValueOf<K> | undefined {
  const spec = VARIABLES[name] as VarSpec<ValueOf<K>>;
  const value = env[name];
  if (value === undefined || value === "") return spec.default;
  try {
    return spec.parse(value);
  } catch (err) {
    throw new ConfigError(name, (err as Error).message);
  }
}

/** Rows for the README configuration table. */
export function describeVariables(): { name: string; default: string; description: string }[] {
  return (Object.entries(VARIABLES) as [string, VarSpec<unknown>][]).map(([name, spec]) => ({
    name,
    default: spec.shownDefault ?? (spec.default === undefined ? "(unset)" : String(spec.default)),
    description: spec.description,
  }));
}
