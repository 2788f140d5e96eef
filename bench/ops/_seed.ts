/**
 * Seeding for the start-up bench (bench/ops/startup.ts), the same rows as the moonshot's
 * (bench/ops/moonshot.ts seeds its growing ladder itself): an in-process server migrates the data
 * directory (or database), then devices go in set-based (INSERT … SELECT generate_series,
 * 100,000 a statement) and checks in batches of 1,000; the server then stops cleanly, as an
 * operator's would.
 *
 * A directory seeded once can be reused: `seedDataDir` writes `seed.json` into it and, when
 * that file already names the same counts, skips the seeding (`STARTUP_BENCH_DATA_DIR` points
 * at such a directory). Seeding 1,000,000 devices takes minutes.
 */
import fs from "node:fs";
import path from "node:path";
import { createApiToken } from "../../src/access/tokens.ts";
import { insertUser } from "../../src/access/users.ts";
import { loadConfig } from "../../src/config/config.ts";
import type { AppContext } from "../../src/kernel/context.ts";
import { initialRunAt } from "../../src/monitoring/scheduler.ts";
import { startServer } from "../../src/server.ts";
import type { Queryable } from "../../src/storage/db.ts";
import { sql } from "../../src/storage/sql.ts";

export interface SeedSpec {
  devices: number;
  checks: number;
  /** The checks' interval in seconds. */
  interval: number;
  /**
   * Loopback targets for the checks (bench/monitoring/targets-child.ts); a reused directory's
   * checks are pointed at them. Omitted: the checks target the discard port and a reused
   * directory is left as it is.
   */
  ports?: { http: number; tcp: number };
}

export interface SeedResult {
  /** A read-scoped API token of an admin user. */
  token: string;
  /** Seconds the seeding took; 0 when an existing seed was reused. */
  seconds: number;
  reused: boolean;
}

/** The environment every bench server of a seeded directory runs with. */
export function benchEnv(dataDir: string, dbUrl?: string): Record<string, string> {
  return {
    NETMON_DATA_DIR: dataDir,
    NETMON_OTLP_GRPC_PORT: "0",
    NETMON_SYSLOG_PORT: "0",
    NETMON_SNMP_TRAP_PORT: "0",
    NETMON_LOG_LEVEL: "warn",
    HOST: "127.0.0.1",
    NETMON_RATE_LIMIT_API_DEFAULT: "100000000/60s",
    ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
  };
}

export async function seedDataDir(
  dataDir: string,
  spec: SeedSpec,
  log: (m: string) => void,
  dbUrl?: string,
): Promise<SeedResult> {
  const marker = path.join(dataDir, "seed.json");
  const key = { devices: spec.devices, checks: spec.checks, interval: spec.interval };
  if (!dbUrl && fs.existsSync(marker)) {
    const prior = JSON.parse(fs.readFileSync(marker, "utf8")) as typeof key & { token: string };
    if (prior.devices === key.devices && prior.checks === key.checks && prior.interval === key.interval) {
      // The checks' targets are new ports in this run: point the seeded checks at them.
      if (spec.ports) await retarget(dataDir, spec.ports);
      return { token: prior.token, seconds: 0, reused: true };
    }
    throw new Error(`${dataDir} holds a different seed (${JSON.stringify(prior)}); use another directory`);
  }
  const seeder = await startServer(
    loadConfig({ ...benchEnv(dataDir, dbUrl), PORT: "0", NETMON_EMBEDDED_AGENT: "false" }),
  );
  const ctx = seeder.ctx;
  if (dbUrl) await ctx.db.query("TRUNCATE devices, service_checks, poll_jobs CASCADE");
  const t0 = Date.now();
  for (let from = 1; from <= spec.devices; from += 100_000) {
    const to = Math.min(spec.devices, from + 99_999);
    await insertDevices(ctx.db, from, to);
    log(`devices ${to}/${spec.devices}`);
  }
  await ctx.db.query("ANALYZE devices");
  await insertChecks(ctx.db, spec.checks, spec.interval, spec.ports ?? { http: 9, tcp: 9 });
  const token = await benchToken(ctx);
  const seconds = (Date.now() - t0) / 1000;
  await seeder.close();
  if (!dbUrl) fs.writeFileSync(marker, JSON.stringify({ ...key, token }));
  return { token, seconds, reused: false };
}

/** Point the seeded checks at this run's loopback targets (a reused directory's ports are gone). */
async function retarget(dataDir: string, ports: { http: number; tcp: number }): Promise<void> {
  const server = await startServer(
    loadConfig({ ...benchEnv(dataDir), PORT: "0", NETMON_EMBEDDED_AGENT: "false" }),
  );
  try {
    await server.ctx.db.query(sql`
      UPDATE service_checks SET
        target = CASE WHEN check_type = 'http' THEN ${`http://127.0.0.1:${ports.http}/ok`} ELSE target END,
        port = CASE WHEN check_type = 'tcp' THEN ${ports.tcp} ELSE port END
      WHERE name LIKE 'moon-%'`);
  } finally {
    await server.close();
  }
}

/** Devices `from`..`to` (one statement, set-based): the rows every seeded bench shares. */
export async function insertDevices(db: Queryable, from: number, to: number): Promise<void> {
  await db.query(
    `INSERT INTO devices (uid, partition, ip, hostname, type, type_id, vendor_name, is_available,
       discovery_sources, first_seen_time, last_seen_time)
     SELECT 'sr:' || md5(i::text)::uuid::text, 'default',
       '10.' || ((i >> 16) & 255) || '.' || ((i >> 8) & 255) || '.' || (i & 255),
       'host-' || lpad(i::text, 7, '0'),
       (ARRAY['Server','Switch','Router','Camera','Firewall','Desktop'])[1 + i % 6], 1 + i % 6,
       (ARRAY['Cisco','Juniper','Dell','HP','Axis','Ubiquiti'])[1 + i % 6], i % 10 <> 0,
       ARRAY['sweep'], now() - (i % 100000) * interval '1 second', now() - (i % 1000) * interval '1 second'
     FROM generate_series($1::int, $2::int) AS i`,
    [from, to],
  );
}

/** `count` checks, half TCP and half HTTP against `ports`, in batches of 1,000, due within one interval. */
export async function insertChecks(
  db: Queryable,
  count: number,
  interval: number,
  ports: { http: number; tcp: number },
): Promise<void> {
  const now = new Date();
  for (let i = 0; i < count; i += 1000) {
    const names: string[] = [];
    const types: string[] = [];
    const tgts: string[] = [];
    const prts: (number | null)[] = [];
    const next: string[] = [];
    for (let j = i; j < Math.min(count, i + 1000); j++) {
      const tcp = j % 2 === 0;
      names.push(`moon-${j}`);
      types.push(tcp ? "tcp" : "http");
      tgts.push(tcp ? "127.0.0.1" : `http://127.0.0.1:${ports.http}/ok`);
      prts.push(tcp ? ports.tcp : null);
      next.push(initialRunAt(now, interval).toISOString());
    }
    await db.query(sql`
      INSERT INTO service_checks (name, check_type, target, port, interval_seconds, timeout_seconds, next_run_at)
      SELECT v.n, v.t, v.g, v.p, ${interval}, 5, v.x
      FROM unnest(${names}::text[], ${types}::text[], ${tgts}::text[], ${prts}::int[], ${next}::timestamptz[])
        AS v(n, t, g, p, x)`);
  }
}

/** A read-scoped API token of a new admin user. */
export async function benchToken(ctx: AppContext): Promise<string> {
  const user = await insertUser(ctx, {
    email: `moon-${Date.now()}@example.test`,
    role: "admin",
    password: "moonshot-pw-1",
  });
  return (await createApiToken(ctx, user.id, { name: "moonshot", scopes: ["read"] } as never)).token;
}
