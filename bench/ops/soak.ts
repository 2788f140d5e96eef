/**
 * The memory soak of issue 14 goal 3: the embedded default (`netmon serve` on PGlite, embedded
 * agent) running SOAK_CHECKS checks a minute for SOAK_SECONDS, nobody reading; reports whether
 * the server process group's RSS stays flat (first minute against last minute, and six points).
 * It is bench/ops/moonshot.ts with no users, so both seed and start the server the same way.
 *
 *   node --import tsx bench/ops/soak.ts
 *   SOAK_SECONDS (default 1800)  SOAK_CHECKS (default 1000, every 60 s)  SOAK_DEVICES (default 10,000)
 *   SOAK_DATABASE_URL (PostgreSQL instead of PGlite)  SOAK_INTERVAL (checks' interval and warm-up, default 60 s;
 *   shorter only for `npm run bench -- --quick`)
 */
process.env.MOONSHOT_DEVICES = process.env.SOAK_DEVICES ?? "10000";
process.env.MOONSHOT_CHECKS = process.env.SOAK_CHECKS ?? "1000";
process.env.MOONSHOT_SECONDS = process.env.SOAK_SECONDS ?? "1800";
process.env.MOONSHOT_INTERVAL = process.env.SOAK_INTERVAL ?? "60";
process.env.MOONSHOT_USERS = "0";
if (process.env.SOAK_DATABASE_URL) process.env.MOONSHOT_DATABASE_URL = process.env.SOAK_DATABASE_URL;
else delete process.env.MOONSHOT_DATABASE_URL;
await import("./moonshot.ts");
