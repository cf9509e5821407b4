\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.2.0 -> 0.3.0. pgrx-tests/tests/upgrade.rs checks that the result equals a
-- fresh CREATE EXTENSION of 0.3.0, member by member.

-- src/adopt.rs: a NULL argument is refused with an error (22004) instead of being skipped in
-- silence, so the function is no longer STRICT.
ALTER FUNCTION snowflake_adopt(regclass, text) CALLED ON NULL INPUT;

-- src/api.rs: snowflake_stats() also shows the waits for reservation writes, the failed
-- writes, and whether one is being written. A new result row type: dropped and created again,
-- as pg_stat_statements does. A user's view over snowflake_stats() blocks the DROP (Postgres'
-- own dependency error; the update changes nothing): drop the view, update, create it again.
DROP FUNCTION snowflake_stats();
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
	"time_field_ends" timestamp with time zone,  /* TimestampWithTimeZone */
	"reservation_waits" bigint,  /* i64 */
	"renewal_failures" bigint,  /* i64 */
	"renewing" bool  /* bool */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';
COMMENT ON FUNCTION snowflake_stats() IS
'Shows this server''s generator: node, layout, IDs issued since start, last issued time, lead over the clock, clock regressions, exhausted milliseconds, overload waits, durable reservation, when the time field runs out, waits for and failures of reservation writes, and whether one is being written.';
