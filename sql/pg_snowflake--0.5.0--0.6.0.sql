\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.5.0 -> 0.6.0. pgrx-tests/tests/upgrade.rs checks that the result equals a
-- fresh CREATE EXTENSION of 0.6.0, member by member.

-- src/sql/stats.rs: snowflake_stats() also counts the IDs made in available mode past the
-- mark the registry recorded (ids_past_mark, last). A new result row type: dropped and created
-- again, as in 0.4.0 -> 0.5.0 (a user's view over it blocks the DROP: drop the view, update,
-- create it again).
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
	"renewing" bool,  /* bool */
	"clock_jumps" bigint,  /* i64 */
	"refusing" TEXT,  /* Option < String > */
	"registry_generation" bigint,  /* Option < i64 > */
	"lease_remaining_ms" bigint,  /* Option < i64 > */
	"registry_clock_offset_ms" bigint,  /* Option < i64 > */
	"ids_past_mark" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';

COMMENT ON FUNCTION snowflake_stats() IS
'Shows this server''s generator: node, layout, IDs issued since start, last issued time, lead over the clock, clock regressions, exhausted milliseconds, overload waits, durable reservation, when the time field runs out, waits for and failures of reservation writes, whether one is being written, and forward steps of the system clock held rather than followed, why no ID may be made now (NULL: they may), and with a node-id registry the claim''s generation, the lease left and the clock''s offset from the registry''s, and the IDs made in available mode past the mark the registry recorded (a later holder of the node id may repeat those).';
