import type { Queryable } from "../storage/db.ts";
import { sql } from "../storage/sql.ts";

/**
 * Hourly rollups of the raw metric tables into the `*_hourly` tables (migration 0300): plain
 * PostgreSQL upserts standing in for TimescaleDB continuous aggregates. Re-running a window is
 * idempotent: each hour bucket is recomputed from the raw rows it covers.
 */
export async function rollupHourly(db: Queryable, from: Date, to: Date): Promise<void> {
  const lo = new Date(Math.floor(from.getTime() / 3_600_000) * 3_600_000).toISOString();
  const hi = to.toISOString();
  await db.query(sql`
    INSERT INTO timeseries_metrics_hourly AS h (bucket, device_id, metric_name, metric_type, gateway_id, agent_id,
      "partition", avg_value, min_value, max_value, sum_value, sample_count)
    SELECT date_trunc('hour', "timestamp"), COALESCE(device_id, ''), metric_name, metric_type,
      max(gateway_id), max(agent_id), max("partition"), avg(value), min(value), max(value), sum(value), count(*)
    FROM timeseries_metrics WHERE "timestamp" >= ${lo}::timestamptz AND "timestamp" < ${hi}::timestamptz
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (bucket, device_id, metric_name, metric_type) DO UPDATE SET
      gateway_id = EXCLUDED.gateway_id, agent_id = EXCLUDED.agent_id, "partition" = EXCLUDED."partition",
      avg_value = EXCLUDED.avg_value, min_value = EXCLUDED.min_value, max_value = EXCLUDED.max_value,
      sum_value = EXCLUDED.sum_value, sample_count = EXCLUDED.sample_count`);
  await db.query(sql`
    INSERT INTO timeseries_metrics_interface_hourly AS h (bucket, device_id, if_index, metric_name, metric_type,
      gateway_id, agent_id, "partition", avg_value, min_value, max_value, sum_value, sample_count)
    SELECT date_trunc('hour', "timestamp"), COALESCE(device_id, ''), if_index, metric_name, metric_type,
      max(gateway_id), max(agent_id), max("partition"), avg(value), min(value), max(value), sum(value), count(*)
    FROM timeseries_metrics
    WHERE if_index IS NOT NULL AND "timestamp" >= ${lo}::timestamptz AND "timestamp" < ${hi}::timestamptz
    GROUP BY 1, 2, 3, 4, 5
    ON CONFLICT (bucket, device_id, if_index, metric_name, metric_type) DO UPDATE SET
      gateway_id = EXCLUDED.gateway_id, agent_id = EXCLUDED.agent_id, "partition" = EXCLUDED."partition",
      avg_value = EXCLUDED.avg_value, min_value = EXCLUDED.min_value, max_value = EXCLUDED.max_value,
      sum_value = EXCLUDED.sum_value, sample_count = EXCLUDED.sample_count`);
  await db.query(sql`
    INSERT INTO cpu_metrics_hourly (bucket, device_id, host_id, core_id, gateway_id, agent_id, "partition",
      avg_usage, max_usage, min_usage, avg_frequency_hz, sample_count)
    SELECT date_trunc('hour', "timestamp"), COALESCE(device_id, ''), COALESCE(host_id, ''), COALESCE(core_id, -1),
      max(gateway_id), max(agent_id), max("partition"), avg(usage_percent), max(usage_percent), min(usage_percent),
      avg(frequency_hz), count(*)
    FROM cpu_metrics WHERE "timestamp" >= ${lo}::timestamptz AND "timestamp" < ${hi}::timestamptz
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (bucket, device_id, host_id, core_id) DO UPDATE SET
      gateway_id = EXCLUDED.gateway_id, agent_id = EXCLUDED.agent_id, "partition" = EXCLUDED."partition",
      avg_usage = EXCLUDED.avg_usage, max_usage = EXCLUDED.max_usage, min_usage = EXCLUDED.min_usage,
      avg_frequency_hz = EXCLUDED.avg_frequency_hz, sample_count = EXCLUDED.sample_count`);
  await db.query(sql`
    INSERT INTO memory_metrics_hourly (bucket, device_id, host_id, gateway_id, agent_id, "partition",
      avg_usage, max_usage, avg_used_bytes, max_used_bytes, total_bytes, sample_count)
    SELECT date_trunc('hour', "timestamp"), COALESCE(device_id, ''), COALESCE(host_id, ''),
      max(gateway_id), max(agent_id), max("partition"), avg(usage_percent), max(usage_percent),
      avg(used_bytes), max(used_bytes), max(total_bytes), count(*)
    FROM memory_metrics WHERE "timestamp" >= ${lo}::timestamptz AND "timestamp" < ${hi}::timestamptz
    GROUP BY 1, 2, 3
    ON CONFLICT (bucket, device_id, host_id) DO UPDATE SET
      gateway_id = EXCLUDED.gateway_id, agent_id = EXCLUDED.agent_id, "partition" = EXCLUDED."partition",
      avg_usage = EXCLUDED.avg_usage, max_usage = EXCLUDED.max_usage, avg_used_bytes = EXCLUDED.avg_used_bytes,
      max_used_bytes = EXCLUDED.max_used_bytes, total_bytes = EXCLUDED.total_bytes,
      sample_count = EXCLUDED.sample_count`);
  await db.query(sql`
    INSERT INTO disk_metrics_hourly (bucket, device_id, host_id, mount_point, gateway_id, agent_id, "partition",
      avg_usage, max_usage, avg_used_bytes, max_used_bytes, total_bytes, sample_count)
    SELECT date_trunc('hour', "timestamp"), COALESCE(device_id, ''), COALESCE(host_id, ''), COALESCE(mount_point, ''),
      max(gateway_id), max(agent_id), max("partition"), avg(usage_percent), max(usage_percent),
      avg(used_bytes), max(used_bytes), max(total_bytes), count(*)
    FROM disk_metrics WHERE "timestamp" >= ${lo}::timestamptz AND "timestamp" < ${hi}::timestamptz
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (bucket, device_id, host_id, mount_point) DO UPDATE SET
      gateway_id = EXCLUDED.gateway_id, agent_id = EXCLUDED.agent_id, "partition" = EXCLUDED."partition",
      avg_usage = EXCLUDED.avg_usage, max_usage = EXCLUDED.max_usage, avg_used_bytes = EXCLUDED.avg_used_bytes,
      max_used_bytes = EXCLUDED.max_used_bytes, total_bytes = EXCLUDED.total_bytes,
      sample_count = EXCLUDED.sample_count`);
  await db.query(sql`
    INSERT INTO process_metrics_hourly (bucket, device_id, host_id, name, gateway_id, agent_id, "partition",
      avg_cpu_usage, max_cpu_usage, avg_memory_usage, max_memory_usage, sample_count)
    SELECT date_trunc('hour', "timestamp"), COALESCE(device_id, ''), COALESCE(host_id, ''), COALESCE(name, ''),
      max(gateway_id), max(agent_id), max("partition"), avg(cpu_usage), max(cpu_usage),
      avg(memory_usage), max(memory_usage), count(*)
    FROM process_metrics WHERE "timestamp" >= ${lo}::timestamptz AND "timestamp" < ${hi}::timestamptz
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (bucket, device_id, host_id, name) DO UPDATE SET
      gateway_id = EXCLUDED.gateway_id, agent_id = EXCLUDED.agent_id, "partition" = EXCLUDED."partition",
      avg_cpu_usage = EXCLUDED.avg_cpu_usage, max_cpu_usage = EXCLUDED.max_cpu_usage,
      avg_memory_usage = EXCLUDED.avg_memory_usage, max_memory_usage = EXCLUDED.max_memory_usage,
      sample_count = EXCLUDED.sample_count`);
  await db.query(sql`
    INSERT INTO otel_metric_points_hourly (bucket, metric_name, metric_type, service_name, attributes_hash,
      attributes, temporality, unit, "partition", avg_value, min_value, max_value, sum_value, last_value,
      count_total, sum_total, sample_count)
    SELECT date_trunc('hour', "timestamp"), metric_name, COALESCE(metric_type, ''), COALESCE(service_name, ''),
      md5(attributes::text), attributes, max(temporality), max(unit), max("partition"),
      avg(value), min(value), max(value), sum(value), (array_agg(value ORDER BY "timestamp" DESC))[1],
      CASE WHEN max(temporality) = 'delta' THEN sum(count) ELSE max(count) END,
      CASE WHEN max(temporality) = 'delta' THEN sum(sum) ELSE max(sum) END,
      count(*)
    FROM otel_metric_points WHERE "timestamp" >= ${lo}::timestamptz AND "timestamp" < ${hi}::timestamptz
    GROUP BY 1, 2, 3, 4, attributes
    ON CONFLICT (bucket, metric_name, metric_type, service_name, attributes_hash) DO UPDATE SET
      temporality = EXCLUDED.temporality, unit = EXCLUDED.unit, "partition" = EXCLUDED."partition",
      avg_value = EXCLUDED.avg_value, min_value = EXCLUDED.min_value, max_value = EXCLUDED.max_value,
      sum_value = EXCLUDED.sum_value, last_value = EXCLUDED.last_value, count_total = EXCLUDED.count_total,
      sum_total = EXCLUDED.sum_total, sample_count = EXCLUDED.sample_count`);
}
