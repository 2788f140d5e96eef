/** net-snmp sessions from a check's config (v1, v2c, v3) and small promise helpers. */
import snmp from "net-snmp";

export type SnmpSession = snmp.Session;

export interface SnmpConfig {
  version?: string;
  community?: string;
  user?: {
    name: string;
    level?: "noAuthNoPriv" | "authNoPriv" | "authPriv";
    auth_protocol?: string;
    auth_key?: string;
    priv_protocol?: string;
    priv_key?: string;
  };
}

export function openSnmpSession(
  ip: string,
  port: number,
  c: SnmpConfig,
  timeoutMs: number,
  retries = 0,
): SnmpSession {
  const version = String(c.version ?? "2c");
  const common = { port, timeout: timeoutMs, retries, idBitsSize: 32 as const };
  if (version === "3") {
    const u = c.user;
    if (!u?.name) throw new Error("snmp v3 needs config.user.name");
    const level =
      snmp.SecurityLevel[u.level ?? (u.priv_key ? "authPriv" : u.auth_key ? "authNoPriv" : "noAuthNoPriv")];
    const user: snmp.User = { name: u.name, level };
    if (u.auth_key) {
      user.authProtocol = snmp.AuthProtocols[(u.auth_protocol ?? "sha").toLowerCase() as "sha"];
      user.authKey = u.auth_key;
    }
    if (u.priv_key) {
      user.privProtocol = snmp.PrivProtocols[(u.priv_protocol ?? "aes").toLowerCase() as "aes"];
      user.privKey = u.priv_key;
    }
    return snmp.createV3Session(ip, user, { ...common, version: snmp.Version3 });
  }
  return snmp.createSession(ip, c.community ?? "public", {
    ...common,
    version: version === "1" ? snmp.Version1 : snmp.Version2c,
  });
}

export function snmpGet(session: SnmpSession, oids: string[]): Promise<snmp.Varbind[]> {
  return new Promise((resolve, reject) => {
    session.get(oids, (err, varbinds) => (err ? reject(err) : resolve(varbinds ?? [])));
  });
}

export function snmpSubtree(session: SnmpSession, oid: string): Promise<snmp.Varbind[]> {
  const out: snmp.Varbind[] = [];
  return new Promise((resolve, reject) => {
    session.subtree(
      oid,
      20,
      (vbs: snmp.Varbind[]) => {
        for (const vb of vbs) if (!snmp.isVarbindError(vb)) out.push(vb);
      },
      (err: Error | null | undefined) => (err ? reject(err) : resolve(out)),
    );
  });
}

export function varbindValue(vb: snmp.Varbind): string | number {
  const v = vb.value as unknown;
  if (Buffer.isBuffer(v) && vb.type === snmp.ObjectType.Counter64) {
    let n = 0n;
    for (const b of v) n = (n << 8n) | BigInt(b);
    return Number(n);
  }
  if (Buffer.isBuffer(v)) {
    const printable = [...v].every((b) => b === 9 || b === 10 || b === 13 || (b >= 32 && b < 127));
    return printable ? v.toString("utf8") : v.toString("hex");
  }
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "number") return v;
  return String(v);
}

export function isVarbindError(vb: snmp.Varbind): boolean {
  return snmp.isVarbindError(vb);
}

export function varbindErrorText(vb: snmp.Varbind): string {
  return snmp.varbindError(vb);
}
