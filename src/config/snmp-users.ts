/**
 * SNMPv3 users of the trap receiver, as NETMON_SNMP_TRAP_USERS declares them (parsed at start,
 * so a bad entry stops the process naming the variable).
 */
export interface TrapUser {
  name: string;
  authProtocol?: "md5" | "sha" | "sha224" | "sha256" | "sha384" | "sha512";
  authKey?: string;
  privProtocol?: "des" | "aes" | "aes256b" | "aes256r";
  privKey?: string;
}

/** `name[:authProto:authKey[:privProto:privKey]]` → a USM user (NETMON_SNMP_TRAP_USERS). */
export function parseTrapUser(spec: string): TrapUser {
  const [name, authProtocol, authKey, privProtocol, privKey] = spec.split(":");
  const auth = ["md5", "sha", "sha224", "sha256", "sha384", "sha512"];
  const priv = ["des", "aes", "aes256b", "aes256r"];
  if (!name) throw new Error("an SNMP trap user needs a name");
  if (authProtocol !== undefined && (!auth.includes(authProtocol) || !authKey || authKey.length < 8))
    throw new Error(`user ${name}: auth must be one of ${auth.join("/")} with a key of 8+ characters`);
  if (privProtocol !== undefined && (!priv.includes(privProtocol) || !privKey || privKey.length < 8))
    throw new Error(`user ${name}: privacy must be one of ${priv.join("/")} with a key of 8+ characters`);
  return {
    name,
    authProtocol: authProtocol as TrapUser["authProtocol"],
    authKey,
    privProtocol: privProtocol as TrapUser["privProtocol"],
    privKey,
  };
}
