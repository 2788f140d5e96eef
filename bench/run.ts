// `npm run bench`: runs every benchmark script (bench/<domain>/<name>.ts, not starting with "_"),
// each in its own process, and writes what they print (markdown) into BENCHMARKS.md.
// Filter with `npm run bench -- <substring>`; scale knobs are per-script env vars (see each file).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const filter = process.argv[2];
const scripts = fs
  .readdirSync(path.join(root, "bench"), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .flatMap((d) =>
    fs
      .readdirSync(path.join(root, "bench", d.name))
      .filter((f) => f.endsWith(".ts") && !f.startsWith("_") && !f.endsWith(".test.ts"))
      .map((f) => path.join("bench", d.name, f)),
  )
  .filter((p) => !filter || p.includes(filter))
  .sort();

const sections: string[] = [];
for (const script of scripts) {
  process.stderr.write(`running ${script}\n`);
  const t0 = Date.now();
  const r = spawnSync(process.execPath, ["--import", "tsx", script], {
    cwd: root,
    encoding: "utf8",
    timeout: 9 * 60_000,
    maxBuffer: 16 * 1024 * 1024,
    env: process.env,
  });
  const secs = ((Date.now() - t0) / 1000).toFixed(0);
  if (r.status === 0) {
    sections.push(`<!-- ${script} (${secs} s) -->\n${r.stdout.trim()}\n`);
  } else {
    sections.push(
      `## ${script}: FAILED (exit ${r.status ?? r.signal})\n\n\`\`\`\n${(r.stderr || r.stdout).slice(-2000)}\n\`\`\`\n`,
    );
  }
}

const header = `# Benchmarks

Written by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}.
Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB,
Node ${process.version}. Each section names the command that produced it. Figures compare
netmon against a peer measured in the same run (ratios), never against fixed times.
`;
// Domain benchmarks record their full-scale runs (some need a 30-minute one-time seed) in
// bench/<domain>/RESULTS.md; BENCHMARKS.md always carries the latest of those too.
const recorded = fs
  .readdirSync(path.join(root, "bench"), { withFileTypes: true })
  .filter((d) => d.isDirectory() && fs.existsSync(path.join(root, "bench", d.name, "RESULTS.md")))
  .map((d) => d.name)
  .sort()
  .map((name) => {
    const text = fs.readFileSync(path.join(root, "bench", name, "RESULTS.md"), "utf8").trim();
    // Demote headings one level so each domain sits under its own "##".
    return `## ${name} (recorded in bench/${name}/RESULTS.md)\n\n${text.replace(/^(#+) /gm, "#$1 ")}\n`;
  });
const RECORDED_MARK = "<!-- recorded domain results -->";
const recordedBlock = `${RECORDED_MARK}\n# Recorded domain benchmark runs\n\n${recorded.join("\n")}`;

const out = path.join(root, "BENCHMARKS.md");
if (filter && fs.existsSync(out)) {
  // Partial run: replace only the sections that were re-run.
  let text = fs.readFileSync(out, "utf8").split(RECORDED_MARK)[0] as string;
  for (const s of sections) {
    const marker = /<!-- (\S+) /.exec(s)?.[1] ?? /^## (\S+): FAILED/.exec(s)?.[1];
    const re = new RegExp(`<!-- ${marker?.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} [\\s\\S]*?(?=<!-- |$)`);
    text = re.test(text) ? text.replace(re, `${s}\n`) : `${text}\n${s}`;
  }
  fs.writeFileSync(out, `${text.trimEnd()}\n\n${recordedBlock}`);
} else {
  fs.writeFileSync(out, `${header}\n${sections.join("\n")}\n${recordedBlock}`);
}
process.stderr.write(`wrote ${out}\n`);
