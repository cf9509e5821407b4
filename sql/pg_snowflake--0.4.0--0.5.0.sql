\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.4.0 -> 0.5.0. integration/tests/upgrade.rs checks that the result equals a
-- fresh CREATE EXTENSION of 0.5.0, member by member.

-- src/sql/registry.rs: the node-id registry's functions (new).
-- pg_snowflake::sql::registry::snowflake_registry
CREATE  FUNCTION "snowflake_registry"() RETURNS TABLE (
	"node_id" INT,  /* i32 */
	"state" TEXT,  /* String */
	"holder_label" TEXT,  /* String */
	"system_identifier" TEXT,  /* Option < String > */
	"generation" bigint,  /* i64 */
	"claimed_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_seen" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"lease_until" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"high_water" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"clock_offset_ms" bigint,  /* Option < i64 > */
	"retired_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"this_server" bool  /* bool */
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_registry_wrapper';

-- pg_snowflake::sql::registry::snowflake_registry_create
CREATE  FUNCTION "snowflake_registry_create"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_registry_create_wrapper';

-- pg_snowflake::sql::registry::snowflake_registry_retire
CREATE  FUNCTION "snowflake_registry_retire"(
	"node_id" INT /* i32 */
) RETURNS timestamp with time zone /* Option < TimestampWithTimeZone > */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_registry_retire_wrapper';

REVOKE EXECUTE ON FUNCTION snowflake_registry_create() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION snowflake_registry() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION snowflake_registry_retire(integer) FROM PUBLIC;
COMMENT ON FUNCTION snowflake_registry_create() IS
'Makes the node-id registry''s table snowflake_nodes in the database pg_snowflake.registry names, if it is not there.';
COMMENT ON FUNCTION snowflake_registry() IS
'Lists every node id the registry knows: state (live, lost, retired, free), holder, generation, lease, high-water mark, clock offset, and whether it is this server''s.';
COMMENT ON FUNCTION snowflake_registry_retire(integer) IS
'Retires a node id whose holder is gone; it is handed out again once the registry''s clock is past its high-water mark (returned) by pg_snowflake.max_clock_skew_ms.';

-- src/sql/stats.rs: snowflake_stats() also says why no ID may be made now and, with a
-- registry, shows this server's claim. A new result row type: dropped and created again, as in
-- 0.3.0 -> 0.4.0 (a user's view over it blocks the DROP: drop the view, update, create it
-- again).
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
	"registry_clock_offset_ms" bigint  /* Option < i64 > */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';

COMMENT ON FUNCTION snowflake_stats() IS
'Shows this server''s generator: node, layout, IDs issued since start, last issued time, lead over the clock, clock regressions, exhausted milliseconds, overload waits, durable reservation, when the time field runs out, waits for and failures of reservation writes, whether one is being written, and forward steps of the system clock held rather than followed, why no ID may be made now (NULL: they may), and with a node-id registry the claim''s generation, the lease left and the clock''s offset from the registry''s.';
