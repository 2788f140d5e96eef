/**
 * Write-only secrets inside JSON settings (check configs, notification channel configs).
 * Secrets inside a service check's `config` (SNMP communities and SNMPv3 keys, HTTP
 * credentials and sensitive headers) are write-only (issue 10, docs/decisions/0601):
 * responses show `{"set": true}` in their place; an update that sends that marker back, or
 * leaves the member out, keeps the stored secret. The agent that runs the check still gets the
 * real value in its job payload (only the gateway that claimed the job sees it).
 */
const SECRET_MEMBER =
  /^(community|auth_key|auth_password|auth_passphrase|priv_key|priv_password|priv_passphrase|password|passphrase|secret|token|api_key|bearer_token|client_key)$/i;
const SECRET_HEADER = /authorization|cookie|token|secret|api[-_]?key|password|passwd/i;

export const SECRET_MARKER = Object.freeze({ set: true });

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
const isMarker = (v: unknown) => isObject(v) && v.set === true && Object.keys(v).length === 1;

function isSecret(path: readonly string[]): boolean {
  const key = path[path.length - 1] ?? "";
  const parent = path[path.length - 2];
  if (parent !== undefined && /^headers$/i.test(parent)) return SECRET_HEADER.test(key);
  return SECRET_MEMBER.test(key);
}

function walk(value: unknown, path: string[], fn: (v: unknown, path: string[]) => unknown): unknown {
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) {
    const p = [...path, k];
    out[k] = isSecret(p) ? fn(v, p) : walk(v, p, fn);
  }
  return out;
}

/** The config as anyone may see it: secret values replaced by the set marker. */
export function redactCheckConfig(config: unknown): unknown {
  return walk(config, [], (v) => (v === null || v === undefined || v === "" ? null : SECRET_MARKER));
}

function at(obj: unknown, path: readonly string[]): unknown {
  let cur = obj;
  for (const k of path) cur = isObject(cur) && Object.hasOwn(cur, k) ? cur[k] : undefined;
  return cur;
}

/** Collect the paths of secret members present in `config`. */
function secretPaths(config: unknown, path: string[] = [], out: string[][] = []): string[][] {
  if (!isObject(config)) return out;
  for (const [k, v] of Object.entries(config)) {
    const p = [...path, k];
    if (isSecret(p)) out.push(p);
    else secretPaths(v, p, out);
  }
  return out;
}

/**
 * The config to store on update: secrets given as the marker, or left out where the stored
 * config has them, keep their stored value.
 */
export function mergeCheckSecrets(next: unknown, stored: unknown): unknown {
  if (!isObject(next)) return next;
  const merged = structuredClone(next);
  const put = (path: string[], value: unknown) => {
    let node: Json = merged;
    for (const k of path.slice(0, -1)) {
      if (!isObject(node[k])) node[k] = {};
      node = node[k] as Json;
    }
    node[path[path.length - 1] as string] = value;
  };
  for (const p of secretPaths(merged)) if (isMarker(at(merged, p))) put(p, at(stored, p) ?? null);
  for (const p of secretPaths(stored)) if (at(merged, p) === undefined) put(p, at(stored, p));
  return merged;
}
