-- snowflake_nextval_at on a server with pg_snowflake.node_id = 1 and no backfill node id: NULL
-- gives NULL (STRICT), and every instant is refused until pg_snowflake.backfill_node_id is set.
-- The other refusals, which need a backfill node id, are asserted in tests/nextval_at.rs.
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE EXTENSION pg_snowflake;

SELECT snowflake_nextval_at(NULL) IS NULL AS null_gives_null;
SHOW pg_snowflake.backfill_node_id;
SELECT snowflake_nextval_at('2025-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE

DROP EXTENSION pg_snowflake;
