-- Check names are unique per device (issue 13: duplicates made alerts and pages ambiguous).
-- Scope: the device a check targets; checks not linked to a device share one scope. Case is
-- ignored ("Ping" and "ping" are the same name). Existing duplicates get " (n)" appended.
WITH d AS (
  SELECT id, row_number() OVER (PARTITION BY coalesce(device_uid, ''), lower(name) ORDER BY created_at, id) AS n
    FROM service_checks
)
UPDATE service_checks s SET name = s.name || ' (' || d.n || ')' FROM d WHERE d.id = s.id AND d.n > 1;
CREATE UNIQUE INDEX IF NOT EXISTS service_checks_scope_name_key
  ON service_checks ((coalesce(device_uid, '')), (lower(name)));
