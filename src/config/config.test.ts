import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig", () => {
  it("applies defaults", () => {
    const c = loadConfig({});
    expect(c.port).toBe(4000);
    expect(c.host).toBe("0.0.0.0");
    expect(c.dataDir.endsWith("/data")).toBe(true);
    expect(c.secretKeyFile).toBe(`${c.dataDir}/secret.key`);
    expect(c.baseUrl).toBe("http://localhost:4000");
    expect(c.rateLimitApiDefault).toEqual({ requests: 600, windowSeconds: 60 });
    expect(c.admin.email).toBe("admin@localhost");
    expect(c.databaseUrl).toBeUndefined();
  });

  it.each([
    ["PORT", "abc", /PORT must be an integer/],
    ["PORT", "70000", /PORT must be between 0 and 65535/],
    ["DATABASE_URL", "mysql://x", /DATABASE_URL must use postgres or postgresql/],
    ["DATABASE_URL", "not a url", /DATABASE_URL must be a URL/],
    ["NETMON_LOG_LEVEL", "loud", /NETMON_LOG_LEVEL must be one of/],
    ["NETMON_BASE_URL", "ftp://x", /NETMON_BASE_URL must use http or https/],
    ["NETMON_RATE_LIMIT_API_DEFAULT", "lots", /NETMON_RATE_LIMIT_API_DEFAULT must look like/],
    ["SERVICE_ADMIN_PASSWORD_FORCE_SYNC", "maybe", /SERVICE_ADMIN_PASSWORD_FORCE_SYNC must be true or false/],
    ["NETMON_SHUTDOWN_TIMEOUT", "soon", /NETMON_SHUTDOWN_TIMEOUT must be a duration/],
  ])("rejects %s=%s naming the variable", (name, value, message) => {
    let caught: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).variable).toBe(name);
    expect((caught as Error).message).toMatch(message);
    expect((caught as Error).message.split("\n")).toHaveLength(1);
  });

  it("parses rates with units and trims a trailing slash from the base URL", () => {
    const c = loadConfig({
      NETMON_RATE_LIMIT_API_DEFAULT: "10/1m",
      NETMON_BASE_URL: "https://mon.example.com/",
    });
    expect(c.rateLimitApiDefault).toEqual({ requests: 10, windowSeconds: 60 });
    expect(c.baseUrl).toBe("https://mon.example.com");
  });

  it("never prints a database password in its error", () => {
    expect(() => loadConfig({ DATABASE_URL: "mysql://u:hunter2@h/db" })).toThrow(ConfigError);
    try {
      loadConfig({ DATABASE_URL: "nope://u:hunter2@h/db" });
    } catch (err) {
      expect((err as Error).message).not.toContain("hunter2");
    }
  });
});
