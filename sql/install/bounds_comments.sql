
COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz) IS
'Returns the smallest snowflake ID any node can issue at this instant: id >= snowflake_from_timestamp(t) selects the rows made from t on, as a range scan on the key.';
COMMENT ON FUNCTION snowflake_max_from_timestamp(timestamptz) IS
'Returns the largest snowflake ID any node can issue at this instant (to the millisecond): id <= snowflake_max_from_timestamp(t) selects the rows made up to t.';
