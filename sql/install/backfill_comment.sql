
COMMENT ON FUNCTION snowflake_nextval_at(timestamptz) IS
'Returns a snowflake ID stamped at a past instant (re-keying old rows) under pg_snowflake.backfill_node_id; instants must not decrease while the server runs.';
