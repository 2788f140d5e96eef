import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../config/config.ts";
import { chooseLogFormat, createLogger, type LogFormat } from "./logger.ts";

function capture(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(chunk.toString("utf8"));
      cb();
    },
  });
  return { stream, text: () => chunks.join("") };
}

describe("log format selection (NETMON_LOG_FORMAT)", () => {
  it("auto is pretty on a terminal and JSON otherwise; json and pretty are honoured as given", () => {
    const cases: ["auto" | LogFormat, boolean, LogFormat][] = [
      ["auto", true, "pretty"],
      ["auto", false, "json"],
      ["json", true, "json"],
      ["json", false, "json"],
      ["pretty", false, "pretty"],
      ["pretty", true, "pretty"],
    ];
    for (const [setting, tty, want] of cases)
      expect(chooseLogFormat(setting, tty), `${setting}/${tty}`).toBe(want);
  });

  it("defaults to auto and refuses an unknown format naming the variable", () => {
    expect(loadConfig({}).logFormat).toBe("auto");
    expect(loadConfig({ NETMON_LOG_FORMAT: "pretty" }).logFormat).toBe("pretty");
    expect(() => loadConfig({ NETMON_LOG_FORMAT: "colour" })).toThrow(/NETMON_LOG_FORMAT/);
  });
});

describe("createLogger", () => {
  it("json: one parseable object per line", () => {
    const out = capture();
    createLogger("info", out.stream, "json").info({ device: "sw1" }, "hello json");
    const line = JSON.parse(out.text().trim()) as Record<string, unknown>;
    expect(line).toMatchObject({ msg: "hello json", device: "sw1", level: 30, service: "netmon" });
  });

  it("pretty: readable text with the level and message, not JSON, and secrets still redacted", () => {
    const out = capture();
    createLogger("info", out.stream, "pretty").warn(
      { password: "hunter2-secret", device: "sw1" },
      "hello people",
    );
    const text = out.text();
    expect(text).toContain("WARN");
    expect(text).toContain("hello people");
    expect(text).toContain("sw1");
    expect(text).not.toContain("hunter2-secret");
    expect(() => JSON.parse(text.trim())).toThrow();
    // No colour codes when the destination is not a terminal.
    expect(text).not.toContain("\u001b[");
  });
});
