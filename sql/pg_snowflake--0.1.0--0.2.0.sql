\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.1.0 -> 0.2.0. The definitions are those pgrx generates for 0.2.0
-- (cargo pgrx schema); pgrx-tests/tests/upgrade.rs checks that the result equals a fresh
-- CREATE EXTENSION of 0.2.0, member by member.

-- snowflake_nextval() may now write a WAL record (the durable reservation): a parallel
-- worker must not call it. ALTER, not CREATE OR REPLACE: column defaults depend on it.
ALTER FUNCTION snowflake_nextval() PARALLEL RESTRICTED;

-- src/api.rs: batches of IDs and the generator's counters.
CREATE  FUNCTION "snowflake_nextval_batch"(
	"n" INT /* i32 */
) RETURNS SETOF bigint /* i64 */
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_nextval_batch_wrapper';

CREATE  FUNCTION "snowflake_stats"() RETURNS TABLE (
	"node_id" INT,  /* Option < i32 > */
	"layout" TEXT,  /* String */
	"ids_issued" bigint,  /* i64 */
	"last_issued" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"lead_ms" bigint,  /* i64 */
	"borrowed_ms" bigint,  /* i64 */
	"clock_regressions" bigint,  /* i64 */
	"exhausted_ms" bigint,  /* i64 */
	"overload_waits" bigint,  /* i64 */
	"reservations" bigint,  /* i64 */
	"reserved_until" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"time_field_ends" timestamp with time zone  /* TimestampWithTimeZone */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';

COMMENT ON FUNCTION snowflake_nextval_batch(integer) IS
'Returns n (1 to 100000000) new snowflake IDs, strictly increasing, taken from this server''s generator in as few lock acquisitions as the clock allows.';
COMMENT ON FUNCTION snowflake_stats() IS
'Shows this server''s generator: node, layout, IDs issued since start, last issued time, lead over the clock, clock regressions, exhausted milliseconds, overload waits, durable reservation, and when the time field runs out.';

-- src/bounds.rs: time -> ID bounds.
CREATE  FUNCTION "snowflake_from_timestamp"(
	"ts" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_from_timestamp_wrapper';

CREATE  FUNCTION "snowflake_max_from_timestamp"(
	"ts" timestamp with time zone /* TimestampWithTimeZone */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_max_from_timestamp_wrapper';

COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz) IS
'Returns the smallest snowflake ID any node can issue at this instant: id >= snowflake_from_timestamp(t) selects the rows made from t on, as a range scan on the key.';
COMMENT ON FUNCTION snowflake_max_from_timestamp(timestamptz) IS
'Returns the largest snowflake ID any node can issue at this instant (to the millisecond): id <= snowflake_max_from_timestamp(t) selects the rows made up to t.';

-- src/adopt.rs: switch an existing key column to snowflake_nextval().
CREATE FUNCTION snowflake_adopt(tbl regclass, col text DEFAULT 'id') RETURNS void
VOLATILE STRICT PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_adopt_wrapper';

COMMENT ON FUNCTION snowflake_adopt(regclass, text) IS
'Switches a serial, identity or sequence-default key column to bigint DEFAULT snowflake_nextval() with ordinary DDL; refuses when existing values could collide with new IDs.';
