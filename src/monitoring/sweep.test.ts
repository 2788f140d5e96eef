import { describe, expect, it } from "vitest";
import { HostMetricsCollector } from "./host-metrics.ts";
import { expandCidrs } from "./sweep.ts";

describe("expandCidrs", () => {
  it("lists host addresses without network and broadcast, deduplicated", () => {
    expect(expandCidrs(["192.0.2.0/30"])).toEqual(["192.0.2.1", "192.0.2.2"]);
    expect(expandCidrs(["192.0.2.8/31", "192.0.2.9/32"])).toEqual(["192.0.2.8", "192.0.2.9"]);
    expect(expandCidrs(["10.0.0.0/24"])).toHaveLength(254);
    expect(expandCidrs(["10.0.0.77/24"])[0]).toBe("10.0.0.1");
  });
  it("refuses bad input and oversized sweeps", () => {
    expect(() => expandCidrs(["10.0.0.0/33"])).toThrow(/not an IPv4 CIDR/);
    expect(() => expandCidrs(["fe80::/64"])).toThrow(/not an IPv4 CIDR/);
    expect(() => expandCidrs(["10.0.0.0/8"])).toThrow(/more than 65536/);
  });
});

describe("HostMetricsCollector", () => {
  it("samples CPU per core, memory, disks and processes from /proc and os", async () => {
    const c = new HostMetricsCollector(5);
    await new Promise((r) => setTimeout(r, 200));
    const s = c.sample();
    expect(s.cpus.length).toBeGreaterThan(0);
    for (const cpu of s.cpus) {
      expect(cpu.usage_percent).toBeGreaterThanOrEqual(0);
      expect(cpu.usage_percent).toBeLessThanOrEqual(100);
    }
    expect(s.memory.total_bytes).toBeGreaterThan(s.memory.available_bytes);
    expect(s.disks.some((d) => d.mount_point === "/")).toBe(true);
    expect(s.processes.length).toBeGreaterThan(0);
    expect(s.processes.length).toBeLessThanOrEqual(5);
    expect(s.processes.some((p) => p.pid > 0 && p.name.length > 0)).toBe(true);
  });
});
