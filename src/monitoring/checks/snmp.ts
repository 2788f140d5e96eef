import { TargetRefusedError } from "../target-policy.ts";
import { discoverInterfaces } from "./snmp-interfaces.ts";
import {
  isVarbindError,
  openSnmpSession,
  type SnmpConfig,
  snmpGet,
  varbindErrorText,
  varbindValue,
} from "./snmp-session.ts";
import { applyThresholds, type CheckRunner, cfg, errorMessage, round, timeoutMs } from "./types.ts";

const SYS_DESCR = "1.3.6.1.2.1.1.1.0";
const SYS_UPTIME = "1.3.6.1.2.1.1.3.0";

/**
 * SNMP get of configured OIDs. config: version ("2c" | "1" | "3"), community ("public"),
 * user (v3: name, level, auth_protocol, auth_key, priv_protocol, priv_key), oids (list of
 * OID strings or {oid, name}; default sysDescr + sysUpTime), expected ({oid: value}).
 * The check's port defaults to 161. A timeout or an error varbind is critical.
 * discover_interfaces: true also walks ifTable/ifXTable (details.interfaces); the core stores
 * them in `interfaces` and turns their counters into rates in timeseries_metrics.
 */
export const runSnmp: CheckRunner = async (spec, opts) => {
  const c = cfg(spec) as SnmpConfig & Record<string, unknown>;
  const port = spec.port ?? 161;
  const rawOids = Array.isArray(c.oids) && c.oids.length > 0 ? c.oids : [SYS_DESCR, SYS_UPTIME];
  const oids = rawOids.map((o) =>
    typeof o === "string"
      ? { oid: o, name: o }
      : {
          oid: String((o as { oid: string }).oid),
          name: String((o as { name?: string }).name ?? (o as { oid: string }).oid),
        },
  );
  let ip: string;
  try {
    ip = await opts.policy.resolve(spec.target, port);
  } catch (err) {
    return {
      status: err instanceof TargetRefusedError ? "error" : "critical",
      response_time_ms: null,
      error: errorMessage(err),
    };
  }
  let session: ReturnType<typeof openSnmpSession>;
  try {
    session = openSnmpSession(ip, port, c, timeoutMs(spec, 5));
  } catch (err) {
    return { status: "error", response_time_ms: null, error: errorMessage(err) };
  }
  const started = performance.now();
  try {
    const vbs = await snmpGet(
      session,
      oids.map((o) => o.oid),
    );
    const ms = round(performance.now() - started);
    const values: Record<string, string | number> = {};
    const metrics: Record<string, number> = { get_ms: ms };
    const errors: string[] = [];
    vbs.forEach((vb, i) => {
      const name = oids[i]?.name ?? vb.oid;
      if (isVarbindError(vb)) {
        errors.push(`${name}: ${varbindErrorText(vb)}`);
        return;
      }
      const v = varbindValue(vb);
      values[name] = v;
      if (typeof v === "number") metrics[name] = v;
    });
    const details = { address: ip, port, values };
    if (errors.length > 0)
      return { status: "critical", response_time_ms: ms, error: errors.join("; "), metrics, details };
    const expected = (c.expected ?? {}) as Record<string, unknown>;
    for (const [k, want] of Object.entries(expected)) {
      const got = values[k] ?? values[oids.find((o) => o.oid === k)?.name ?? ""];
      if (String(got) !== String(want))
        return {
          status: "critical",
          response_time_ms: ms,
          error: `${k} is '${got}', expected '${want}'`,
          metrics,
          details,
        };
    }
    if (c.discover_interfaces === true) {
      try {
        Object.assign(details, await discoverInterfaces(session));
      } catch (err) {
        return {
          status: "warning",
          response_time_ms: ms,
          error: `interface discovery failed: ${errorMessage(err)}`,
          metrics,
          details,
        };
      }
    }
    return applyThresholds({ status: "success", response_time_ms: ms, metrics, details }, spec);
  } catch (err) {
    const msg = errorMessage(err);
    return {
      status: "critical",
      response_time_ms: null,
      error: /timed ?out/i.test(msg) ? `no SNMP response (${msg})` : msg,
      details: { address: ip, port },
    };
  } finally {
    session.close();
  }
};
