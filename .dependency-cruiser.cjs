// The one-way layering of src/ (issue 11, docs/ARCHITECTURE.md "Layers"), checked by
// `npm run lint`:
//   kernel, config  ←  storage  ←  domains  ←  adapters (http/, each domain's feature.ts,
//   routes/, cli.ts, http.ts)  ←  server.ts, features.ts, cli/ (the command list and main)
// A file may import its own layer or a lower one. Violations that predate the rule are listed
// in .dependency-cruiser-known-violations.json and may only shrink: `npm run lint` fails on any
// new one. Regenerate that list (after removing a violation, never to add one) with
//   npx depcruise src --config .dependency-cruiser.cjs --output-type baseline > .dependency-cruiser-known-violations.json
const DOMAINS = "(access|alerting|inventory|monitoring|srql|telemetry|mcp|ops|jsonapi|dashboards)";
// Files inside a domain folder that adapt it to HTTP or the command line.
const ADAPTER = `^src/${DOMAINS}.*(/feature\\.ts|/cli\\.ts|-cli\\.ts|/http\\.ts|/routes\\.ts|/routes/)`;
// The CLI framework every command uses (argument parsing, command type, terminal I/O).
// Tests and their fixtures exercise several layers at once; the layering binds production code.
const TESTS = "(\\.test\\.ts$|/testing/|test-context\\.ts$)";
const CLI_FRAMEWORK = "^src/cli/(args|command|io)\\.ts$";

module.exports = {
  forbidden: [
    {
      name: "kernel-is-the-bottom",
      comment: "kernel/ and config/ import nothing of netmon above them.",
      severity: "error",
      from: { path: "^src/(kernel|config)/", pathNot: TESTS },
      to: { path: "^src/", pathNot: "^src/(kernel|config)/" },
    },
    {
      name: "storage-below-domains",
      comment: "storage/ knows tables and SQL, not the domains that use them.",
      severity: "error",
      from: { path: "^src/storage/", pathNot: TESTS },
      to: { path: "^src/", pathNot: "^src/(kernel|config|storage)/" },
    },
    {
      name: "domains-below-adapters",
      comment: "Domain code never imports the HTTP layer, the command list or the server.",
      severity: "error",
      from: { path: `^src/${DOMAINS}/`, pathNot: [ADAPTER, TESTS] },
      to: { path: "^src/(http/|cli/|server\\.ts|features\\.ts)", pathNot: CLI_FRAMEWORK },
    },
    {
      name: "adapters-below-server",
      comment: "HTTP and CLI adapters never import the server assembly or the command list.",
      severity: "error",
      from: { path: `^src/http/|${ADAPTER}`, pathNot: TESTS },
      to: { path: "^src/(server\\.ts|features\\.ts|cli/(main|commands|run|serve)\\.ts)" },
    },
    {
      name: "engine-owns-no-domain",
      comment:
        "The JSON:API resource engine (engine/, define, registry, state-machine) is a framework: domains register with it, not the reverse.",
      severity: "error",
      from: { path: "^src/jsonapi/(engine/|define\\.ts|registry\\.ts|state-machine\\.ts)" },
      to: { path: "^src/(alerting|inventory|monitoring|srql|telemetry|mcp|ops|jsonapi/resources\\.ts)" },
    },
    {
      name: "tests-stay-out-of-production",
      comment: "Production code never imports tests or test fixtures.",
      severity: "error",
      from: { path: "^src/", pathNot: TESTS },
      to: { path: `${TESTS}|^test/` },
    },
    {
      name: "no-cycles",
      comment: "Modules form no import cycle (type-only imports included: they bind designs together too).",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(node_modules|dist)/" },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: [".ts", ".mjs", ".js"] },
  },
};
