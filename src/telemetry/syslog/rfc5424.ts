/**
 * An RFC 5424 parser (§6 grammar), linear in the input. Written here because nsyslog-parser
 * — used for RFC 3164, whose heuristics it handles well — drops structured data whose SD-ID
 * has no "@" (the IANA-registered `timeQuality`, `origin`, `meta` that util-linux logger and
 * rsyslog send), leaving it in the message (decision 0310).
 */
export interface Rfc5424 {
  pri: number;
  timestamp: string | null;
  hostname: string | null;
  appName: string | null;
  procId: string | null;
  msgId: string | null;
  /** SD-ID → (PARAM-NAME → value); null-prototype objects (sender data). */
  structuredData: Record<string, Record<string, string>>;
  message: string;
}

const HEADER = /^<(\d{1,3})>([1-9]\d{0,2}) (\S+) (\S+) (\S+) (\S+) (\S+) ?/;
const nil = (v: string | undefined) => (v === undefined || v === "-" ? null : v);

/** Parse one RFC 5424 message, or null when it is not one (the caller tries RFC 3164). */
export function parseRfc5424(line: string): Rfc5424 | null {
  const h = HEADER.exec(line);
  if (!h) return null;
  const pri = Number(h[1]);
  if (pri > 191) return null;
  let i = h[0].length;
  const sd = Object.create(null) as Record<string, Record<string, string>>;
  if (line[i] === "-") {
    i++;
  } else if (line[i] === "[") {
    while (line[i] === "[") {
      const end = parseElement(line, i + 1, sd);
      if (end < 0) return null;
      i = end;
    }
  } else if (i < line.length) {
    return null;
  }
  if (line[i] === " ") i++;
  let message = line.slice(i);
  if (message.startsWith("\ufeff")) message = message.slice(1);
  return {
    pri,
    timestamp: nil(h[3]),
    hostname: nil(h[4]),
    appName: nil(h[5]),
    procId: nil(h[6]),
    msgId: nil(h[7]),
    structuredData: sd,
    message,
  };
}

/** Parse `SD-ID *(SP PARAM="VALUE")]` from `i`; returns the index after "]" or -1. */
function parseElement(line: string, start: number, out: Record<string, Record<string, string>>): number {
  let i = start;
  const idEnd = scanName(line, i);
  if (idEnd === i) return -1;
  const id = line.slice(i, idEnd);
  const params = out[id] ?? (Object.create(null) as Record<string, string>);
  out[id] = params;
  i = idEnd;
  while (line[i] === " ") {
    i++;
    const nameEnd = scanName(line, i);
    if (nameEnd === i || line[nameEnd] !== "=" || line[nameEnd + 1] !== '"') return -1;
    const name = line.slice(i, nameEnd);
    i = nameEnd + 2;
    let value = "";
    for (;;) {
      const c = line[i];
      if (c === undefined) return -1;
      if (c === "\\" && (line[i + 1] === '"' || line[i + 1] === "\\" || line[i + 1] === "]")) {
        value += line[i + 1];
        i += 2;
      } else if (c === '"') {
        i++;
        break;
      } else {
        value += c;
        i++;
      }
    }
    params[name] = value;
  }
  return line[i] === "]" ? i + 1 : -1;
}

/** SD-NAME: printable US-ASCII except '=', SP, ']' and '"' (1–32 characters). */
function scanName(line: string, start: number): number {
  let i = start;
  while (i < line.length && i - start < 32) {
    const c = line.charCodeAt(i);
    if (c <= 32 || c >= 127 || c === 61 || c === 93 || c === 34) break;
    i++;
  }
  return i;
}
