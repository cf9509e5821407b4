
COMMENT ON FUNCTION snowflake_nextval() IS
'Returns a new snowflake ID from this server''s generator: time-ordered, unique across every server with its own pg_snowflake.node_id.';
COMMENT ON FUNCTION snowflake_nextval_batch(integer) IS
'Returns n (1 to 100000000) new snowflake IDs, strictly increasing, taken from this server''s generator in as few lock acquisitions as the clock allows.';
