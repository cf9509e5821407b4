-- Time → ID bounds on a server with the library preloaded and pg_snowflake.node_id = 1.
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE EXTENSION pg_snowflake;

-- The smallest ID of an instant is node 0, sequence 0; the largest is node 1023, sequence 4095.
SELECT t, snowflake_from_timestamp(t) AS first_id, snowflake_max_from_timestamp(t) AS last_id
FROM (VALUES (timestamptz '2024-01-01 00:00:00+00'),
             ('2024-01-01 00:00:00.001+00'),
             ('2028-01-07 20:38:07.583+00'),
             ('2093-09-06 15:47:35.551+00')) v(t);
SELECT d.* FROM snowflake_decode(snowflake_from_timestamp('2028-01-07 20:38:07.583+00')) d
UNION ALL
SELECT d.* FROM snowflake_decode(snowflake_max_from_timestamp('2028-01-07 20:38:07.583+00')) d;

-- Timestamps have microseconds, IDs milliseconds: an instant belongs to the millisecond it is in.
SELECT snowflake_from_timestamp('2024-01-01 00:00:00.000999+00') AS first_id,
       snowflake_max_from_timestamp('2024-01-01 00:00:00.000999+00') AS last_id;
-- Time zones do not matter: a timestamptz is an instant.
SELECT snowflake_from_timestamp('2026-06-01 12:00:00+02') = snowflake_from_timestamp('2026-06-01 10:00:00+00')
       AS same_instant;

-- One UTC day of IDs is a fixed width, 86400000 << 22, because the epoch is a UTC midnight.
SELECT snowflake_from_timestamp(d + interval '1 day') - snowflake_from_timestamp(d) AS day_width,
       86400000::bigint << 22 AS expected
FROM (VALUES (timestamptz '2026-03-28 00:00:00+00')) v(d);

-- A new ID lies between the bounds of the instants around it (the generator may run ahead of
-- the clock after a burst: by lead_ms, which snowflake_stats() shows).
SELECT snowflake_from_timestamp(before) <= id
       AND id <= snowflake_max_from_timestamp(clock_timestamp() + lead_ms * interval '1 ms')
       AS within
FROM (SELECT clock_timestamp() AS before, snowflake_nextval() AS id) m, snowflake_stats();

-- NULL in, NULL out.
SELECT snowflake_from_timestamp(NULL) IS NULL AS from_null,
       snowflake_max_from_timestamp(NULL) IS NULL AS max_null;

-- Instants outside the time field are refused, never wrapped.
SELECT snowflake_from_timestamp('2023-12-31 23:59:59.999999+00');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_max_from_timestamp('1970-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_timestamp('2093-09-06 15:47:35.552+00');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_max_from_timestamp('2200-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_timestamp('infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_max_from_timestamp('-infinity');
\echo :LAST_ERROR_SQLSTATE

-- The plain-SQL partitioning recipe of docs/GUIDE.md: one partition per UTC day, bounds computed
-- from timestamps; constant bounds are pruned at plan time.
CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)
    PARTITION BY RANGE (id);
DO $$
DECLARE
    day timestamptz;
BEGIN
    FOR day IN SELECT generate_series(timestamptz '2026-03-01 00:00:00+00',
                                      timestamptz '2026-03-05 00:00:00+00', interval '1 day')
    LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF events FOR VALUES FROM (%s) TO (%s)',
                       'events_' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'),
                       snowflake_from_timestamp(day),
                       snowflake_from_timestamp(day + interval '1 day'));
    END LOOP;
END
$$;
CREATE TABLE events_default PARTITION OF events DEFAULT;
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'events'::regclass ORDER BY 1;
-- A row made at any instant of a day lands in that day's partition.
INSERT INTO events (id, body)
SELECT snowflake_from_timestamp(t) + (7 << 12), to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS')
FROM (VALUES (timestamptz '2026-03-01 00:00:00+00'), ('2026-03-02 23:59:59.999+00'),
             ('2026-03-03 12:00:00+00'), ('2026-03-06 00:00:00+00')) v(t);
SELECT tableoid::regclass AS partition, body FROM events ORDER BY id;
EXPLAIN (COSTS OFF)
SELECT * FROM events
WHERE id >= snowflake_from_timestamp('2026-03-03 00:00:00+00')
  AND id < snowflake_from_timestamp('2026-03-04 00:00:00+00');
DROP TABLE events;

DROP EXTENSION pg_snowflake;
