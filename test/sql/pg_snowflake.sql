-- `make installcheck` (pgxn check): the installed extension in a running server that preloads
-- it (shared_preload_libraries = 'pg_snowflake') and has a node id (pg_snowflake.node_id).
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
CREATE EXTENSION pg_snowflake;
-- The version installed is the one the control file names.
SELECT e.extversion = a.default_version AS installed_version_is_default
  FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname
 WHERE e.extname = 'pg_snowflake';
-- The decoders, which need no preloading: an ID of node 5, sequence 7, made at
-- 2026-05-17 09:30:15.25 UTC in the default layout, taken apart and written in base 32.
SELECT * FROM snowflake_decode(314333788635156487);
SELECT snowflake_to_base32(314333788635156487),
       snowflake_from_base32(snowflake_to_base32(314333788635156487)) = 314333788635156487
           AS round_trip;
SELECT snowflake_from_timestamp('2026-05-17 09:30:15.25+00') <= 314333788635156487
       AND 314333788635156487 <= snowflake_max_from_timestamp('2026-05-17 09:30:15.25+00')
           AS within_its_millisecond;
-- IDs made by this server: its node id, the time now, strictly increasing, a batch without
-- duplicates. Without the library preloaded this is where it fails, with the hint to preload it.
WITH made AS (SELECT snowflake_nextval() AS first, snowflake_nextval() AS second)
SELECT second > first AS increasing,
       snowflake_node_id(first) = current_setting('pg_snowflake.node_id')::integer
           AS this_servers_node,
       abs(extract(epoch FROM snowflake_timestamp(first) - clock_timestamp())) < 60 AS made_now
  FROM made;
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids
  FROM snowflake_nextval_batch(10000) AS id;
DROP EXTENSION pg_snowflake;
