import { describe, expect, it } from "vitest";
import { syslogToLog } from "./parse.ts";
import { parseRfc5424 } from "./rfc5424.ts";

const now = new Date("2026-11-24T12:00:00Z");

describe("RFC 5424 parser", () => {
  it("parses the RFC's examples, registered SD-IDs, escapes and the BOM", () => {
    const m = parseRfc5424(
      '<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [timeQuality tzKnown="1" isSynced="0"][exampleSDID@32473 iut="3" eventSource="App \\"x\\" \\] \\\\"] \ufeffAn application event',
    );
    expect(m).toMatchObject({
      pri: 165,
      timestamp: "2003-10-11T22:14:15.003Z",
      hostname: "mymachine.example.com",
      appName: "evntslog",
      procId: null,
      msgId: "ID47",
      message: "An application event",
    });
    expect({ ...m?.structuredData }).toEqual({
      timeQuality: { tzKnown: "1", isSynced: "0" },
      "exampleSDID@32473": { iut: "3", eventSource: 'App "x" ] \\' },
    });
    expect(Object.getPrototypeOf(m?.structuredData)).toBeNull();
  });

  it("accepts NILVALUE structured data and an empty message; refuses what is not RFC 5424", () => {
    expect(parseRfc5424("<14>1 - - - - - -")).toMatchObject({ pri: 14, hostname: null, message: "" });
    expect(parseRfc5424("<34>Oct 11 22:14:15 mymachine su: x")).toBeNull();
    expect(parseRfc5424("<200>1 - - - - - - x")).toBeNull();
    expect(parseRfc5424('<14>1 - - - - - [unterminated a="b')).toBeNull();
    const sd = parseRfc5424('<14>1 - - - - - [__proto__ polluted="yes"] m')?.structuredData ?? {};
    expect(Object.entries(sd)).toEqual([["__proto__", { polluted: "yes" }]]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("stays linear on hostile input", () => {
    const t = Date.now();
    parseRfc5424(`<14>1 - - - - - [a${' b="c'.repeat(20_000)}`);
    parseRfc5424(`<14>1 - - - - - ${"[a]".repeat(20_000)}`);
    expect(Date.now() - t).toBeLessThan(500);
  });
});

describe("syslog message → log row", () => {
  it("maps RFC 3164 facility and severity, keeps junk whole, truncates long messages", () => {
    expect(syslogToLog("<13>Nov 24 11:59:00 host1 CRON[12]: run", "10.0.0.1", "udp", now)).toMatchObject({
      facility: "user",
      severity_text: "INFO",
      severity_number: 10,
      service_name: "CRON",
      host: "host1",
      body: "run",
      source_ip: "10.0.0.1",
    });
    expect(syslogToLog("just text", "10.0.0.1", "udp", now)).toMatchObject({
      body: "just text",
      timestamp: now,
    });
    const long = syslogToLog(`<14>1 - - app - - - ${"y".repeat(20_000)}`, "10.0.0.1", "tcp", now);
    expect(String(long.body).length).toBeLessThanOrEqual(8192);
    expect(long.attributes).toMatchObject({ "syslog.truncated": true });
    // A sender clock decades off: stored at receipt time.
    expect(syslogToLog("<14>1 1990-01-01T00:00:00Z h a - - - old", "10.0.0.1", "udp", now).timestamp).toEqual(
      now,
    );
  });
});
