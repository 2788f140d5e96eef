/**
 * The moonshot (bench/ops/moonshot.ts) on PostgreSQL: the same ladder, checks and users with
 * `DATABASE_URL` pointing at MOONSHOT_DATABASE_URL (default
 * postgres://root@127.0.0.1:5432/moonshot_bench, created when missing, emptied first), so one
 * `npm run bench` states the largest device count under 100 ms p99 on each backend.
 *
 *   node --import tsx bench/ops/moonshot-postgres.ts   (every MOONSHOT_* knob of moonshot.ts applies)
 */
import { ensurePgDatabase } from "../_lib/pg-database.ts";

const url = process.env.MOONSHOT_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/moonshot_bench";
await ensurePgDatabase(url);
process.env.MOONSHOT_DATABASE_URL = url;
await import("./moonshot.ts");
