/**
 * Goal 5 of issue 14 as its own figure in `npm run bench`: the second start of the embedded
 * default (PGlite) on a data directory holding RESTART_BENCH_DEVICES devices (default
 * 1,000,000), spawn to a healthy `/health`, with the idle RSS after it. It is bench/ops/startup.ts
 * in its STARTUP_BENCH_DEVICES mode (same seeding, bench/ops/_seed.ts); RESTART_BENCH_DATA_DIR
 * keeps the seeded directory between runs (seeding 1M devices takes ~2 minutes).
 *
 *   node --import tsx bench/ops/restart.ts
 */
process.env.STARTUP_BENCH_DEVICES = process.env.RESTART_BENCH_DEVICES ?? "1000000";
if (process.env.RESTART_BENCH_DATA_DIR)
  process.env.STARTUP_BENCH_DATA_DIR = process.env.RESTART_BENCH_DATA_DIR;
await import("./startup.ts");
