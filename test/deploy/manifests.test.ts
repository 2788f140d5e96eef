import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import { COMMANDS } from "../../src/cli/commands.ts";
import { VARIABLES } from "../../src/config/config.ts";

/**
 * The reference deployments in deploy/ (issue 19) are checked here, since no kubeconform or
 * Docker engine runs in CI: every Kubernetes document parses and has the fields its kind
 * needs, workloads select their own pods, run as non-root with capabilities dropped (NET_RAW
 * the only one added), the core has its probes on the real health routes, every netmon
 * variable they set exists, and the systemd units and Dockerfile run real commands.
 */
const K8S = "deploy/kubernetes";
type Obj = Record<string, unknown>;

/** Environment variables read outside config.ts (the gateway and agent processes, src/monitoring/cli.ts). */
const PROCESS_VARS = ["NETMON_CORE_URL", "NETMON_GATEWAY_TOKEN", "NETMON_GATEWAY_URL", "NETMON_AGENT_TOKEN"];
const KNOWN_VARS = new Set([...Object.keys(VARIABLES), ...PROCESS_VARS, "NODE_ENV"]);
const COMMAND_NAMES = new Set(COMMANDS.map((c) => c.name));

function at(o: unknown, ...keys: string[]): unknown {
  let v: unknown = o;
  for (const k of keys) v = v && typeof v === "object" ? (v as Obj)[k] : undefined;
  return v;
}

function documents(): { file: string; doc: Obj }[] {
  const out: { file: string; doc: Obj }[] = [];
  for (const file of fs.readdirSync(K8S).filter((f) => f.endsWith(".yaml"))) {
    const text = fs.readFileSync(path.join(K8S, file), "utf8");
    for (const d of YAML.parseAllDocuments(text)) {
      expect(d.errors, `${file}: ${d.errors.map((e) => e.message).join("; ")}`).toEqual([]);
      const doc = d.toJS() as Obj | null;
      if (doc) out.push({ file, doc });
    }
  }
  return out;
}

const WORKLOADS = new Set(["Deployment", "DaemonSet", "StatefulSet"]);

describe("deploy/kubernetes", () => {
  const docs = documents();
  const byKind = (kind: string) => docs.filter((d) => d.doc.kind === kind);

  it("every document has apiVersion, kind and a name; the kustomization lists every manifest but the example secrets", () => {
    for (const { file, doc } of docs) {
      expect(typeof doc.apiVersion, file).toBe("string");
      expect(typeof doc.kind, file).toBe("string");
      if (doc.kind !== "Kustomization") expect(typeof at(doc, "metadata", "name"), file).toBe("string");
    }
    const kustomization = byKind("Kustomization")[0]?.doc as { resources: string[] };
    const files = fs.readdirSync(K8S).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
    expect([...kustomization.resources].sort()).toEqual(
      files.filter((f) => f !== "secrets.example.yaml").sort(),
    );
  });

  it("workloads select their own pods and run non-root, read-only, with every capability but NET_RAW dropped", () => {
    const workloads = docs.filter((d) => WORKLOADS.has(d.doc.kind as string));
    expect(workloads.map((w) => w.doc.kind).sort()).toEqual([
      "DaemonSet",
      "Deployment",
      "Deployment",
      "StatefulSet",
    ]);
    for (const { file, doc } of workloads) {
      const name = `${file} ${doc.kind}`;
      const selector = at(doc, "spec", "selector", "matchLabels") as Obj;
      const labels = at(doc, "spec", "template", "metadata", "labels") as Obj;
      expect(Object.keys(selector).length, name).toBeGreaterThan(0);
      for (const [k, v] of Object.entries(selector)) expect(labels[k], `${name} label ${k}`).toBe(v);
      expect(at(doc, "spec", "template", "spec", "securityContext", "runAsNonRoot"), name).toBe(true);
      const pod = at(doc, "spec", "template", "spec") as Obj;
      const containers = [...((pod.initContainers as Obj[]) ?? []), ...(pod.containers as Obj[])];
      for (const c of containers) {
        const where = `${name} container ${c.name}`;
        expect(typeof c.image, where).toBe("string");
        expect(at(c, "securityContext", "readOnlyRootFilesystem"), where).toBe(true);
        expect(at(c, "securityContext", "capabilities", "drop"), where).toEqual(["ALL"]);
        const added = (at(c, "securityContext", "capabilities", "add") as string[] | undefined) ?? [];
        expect(
          added.filter((cap) => cap !== "NET_RAW"),
          where,
        ).toEqual([]);
        expect(at(c, "resources", "requests", "memory"), where).toBeTruthy();
      }
    }
  });

  it("the core Deployment migrates first, probes /health (readiness) and /health/live (liveness) on its port", () => {
    const core = byKind("Deployment").find(
      (d) => d.doc.metadata && at(d.doc, "metadata", "name") === "netmon-core",
    )?.doc;
    expect(core).toBeDefined();
    const pod = at(core, "spec", "template", "spec") as Obj;
    expect((pod.initContainers as Obj[])[0]?.args).toEqual(["migrate"]);
    const main = (pod.containers as Obj[])[0] as Obj;
    expect(main.args).toEqual(["serve"]);
    const port = (main.ports as Obj[])[0] as Obj;
    expect(port.containerPort).toBe(VARIABLES.PORT.default);
    expect(at(main, "readinessProbe", "httpGet", "path")).toBe("/health");
    expect(at(main, "livenessProbe", "httpGet", "path")).toBe("/health/live");
    expect(at(main, "readinessProbe", "httpGet", "port")).toBe(port.name);
    const env = main.env as Obj[];
    const dbUrl = env.find((e) => e.name === "DATABASE_URL");
    const cluster = byKind("Cluster")[0]?.doc;
    expect(at(dbUrl, "valueFrom", "secretKeyRef", "name")).toBe(`${at(cluster, "metadata", "name")}-app`);
    expect(Number(at(core, "spec", "replicas"))).toBeGreaterThan(1);
  });

  it("every variable the manifests set is one netmon reads, and every secret they read is declared", () => {
    const secrets = new Set([
      ...docs.filter((d) => d.doc.kind === "Secret").map((d) => at(d.doc, "metadata", "name")),
      ...byKind("Cluster").map((d) => `${at(d.doc, "metadata", "name")}-app`),
    ]);
    for (const { file, doc } of docs.filter((d) => WORKLOADS.has(d.doc.kind as string))) {
      const pod = at(doc, "spec", "template", "spec") as Obj;
      for (const c of [...((pod.initContainers as Obj[]) ?? []), ...(pod.containers as Obj[])]) {
        const isNetmon = String(c.image).includes("netmon");
        if (isNetmon)
          expect(COMMAND_NAMES.has((c.args as string[])[0] as string), `${file} ${c.name}`).toBe(true);
        for (const e of (c.env as Obj[]) ?? []) {
          if (isNetmon) expect(KNOWN_VARS.has(e.name as string), `${file}: ${e.name}`).toBe(true);
          const ref = at(e, "valueFrom", "secretKeyRef", "name");
          if (ref) expect(secrets.has(ref), `${file}: secret ${ref}`).toBe(true);
        }
        for (const v of (pod.volumes as Obj[]) ?? []) {
          const s = at(v, "secret", "secretName");
          if (s) expect(secrets.has(s), `${file}: secret ${s}`).toBe(true);
        }
      }
    }
  });

  it("CloudNativePG and NATS JetStream are there", () => {
    const cluster = byKind("Cluster")[0]?.doc;
    expect(cluster?.apiVersion).toBe("postgresql.cnpg.io/v1");
    expect(at(cluster, "spec", "bootstrap", "initdb", "database")).toBe("netmon");
    const conf = at(
      byKind("ConfigMap").find((d) => at(d.doc, "metadata", "name") === "nats-config")?.doc,
      "data",
      "nats.conf",
    );
    expect(String(conf)).toContain("jetstream");
  });
});

describe("deploy/systemd", () => {
  const dir = "deploy/systemd";
  const units = fs.readdirSync(dir).filter((f) => /\.(service|timer)$/.test(f));

  function sections(text: string): Map<string, Map<string, string[]>> {
    const out = new Map<string, Map<string, string[]>>();
    let current: Map<string, string[]> | undefined;
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) continue;
      const s = /^\[(\w+)\]$/.exec(line);
      if (s) {
        current = new Map();
        out.set(s[1] as string, current);
        continue;
      }
      const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
      expect(kv, `not a unit line: ${line}`).not.toBeNull();
      expect(current, `key outside a section: ${line}`).toBeDefined();
      const [, k, v] = kv as RegExpExecArray;
      current?.set(k as string, [...(current.get(k as string) ?? []), v as string]);
    }
    return out;
  }

  it("each service runs a real netmon command as the netmon user with at most CAP_NET_RAW", () => {
    expect(units).toEqual(
      expect.arrayContaining([
        "netmon.service",
        "netmon-gateway.service",
        "netmon-agent.service",
        "netmon-backup.timer",
      ]),
    );
    for (const file of units.filter((f) => f.endsWith(".service"))) {
      const s = sections(fs.readFileSync(path.join(dir, file), "utf8"));
      const svc = s.get("Service");
      expect(svc, file).toBeDefined();
      expect(svc?.get("User"), file).toEqual(["netmon"]);
      const exec = (svc?.get("ExecStart") ?? []).join(" ");
      const cmd = /bin\/netmon\.mjs (\w+)/.exec(exec)?.[1];
      expect(COMMAND_NAMES.has(cmd as string), `${file}: ${exec}`).toBe(true);
      expect(svc?.get("NoNewPrivileges"), file).toEqual(["yes"]);
      for (const caps of [
        ...(svc?.get("AmbientCapabilities") ?? []),
        ...(svc?.get("CapabilityBoundingSet") ?? []),
      ]) {
        expect(caps === "" || caps === "CAP_NET_RAW", `${file}: ${caps}`).toBe(true);
      }
      if (file !== "netmon-backup.service") expect(s.get("Install")?.get("WantedBy"), file).toBeDefined();
    }
  });

  it("the environment file sets only variables netmon reads", () => {
    const names = fs
      .readFileSync(path.join(dir, "netmon.env"), "utf8")
      .split("\n")
      .map((l) => /^#?([A-Z][A-Z0-9_]+)=/.exec(l)?.[1])
      .filter((n): n is string => !!n);
    expect(names.length).toBeGreaterThan(5);
    for (const n of names) expect(KNOWN_VARS.has(n), n).toBe(true);
  });
});

describe("deploy/Dockerfile", () => {
  const text = fs.readFileSync("deploy/Dockerfile", "utf8");
  const lines = text.split("\n").filter((l) => !l.trimStart().startsWith("#"));

  it("is multi-stage, ends as a non-root user, and grants only CAP_NET_RAW", () => {
    const froms = lines.filter((l) => /^FROM /.test(l));
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const users = lines.filter((l) => /^USER /.test(l));
    const last = users[users.length - 1] ?? "";
    expect(last).toMatch(/^USER [1-9]\d*(:\d+)?$/);
    expect(text.indexOf(last)).toBeGreaterThan(text.lastIndexOf("\nFROM "));
    const caps = [...text.matchAll(/cap_[a-z_]+/g)].map((m) => m[0]);
    expect(new Set(caps)).toEqual(new Set(["cap_net_raw"]));
    expect(text).toMatch(/ENTRYPOINT .*bin\/netmon\.mjs/);
    expect(text).toMatch(/CMD \["serve"\]/);
  });
});
