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

-- src/decode.rs: decoders with the layout as arguments, the JSON and base-32 forms; the
-- one-argument decoders now follow the server's layout (their comments say so).
CREATE  FUNCTION "snowflake_timestamp"(
	"id" bigint, /* i64 */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"time_unit_ms" INT, /* i32 */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_timestamp_in_wrapper';

CREATE  FUNCTION "snowflake_node_id"(
	"id" bigint, /* i64 */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"time_unit_ms" INT, /* i32 */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_node_id_in_wrapper';

CREATE  FUNCTION "snowflake_seq"(
	"id" bigint, /* i64 */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"time_unit_ms" INT, /* i32 */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_seq_in_wrapper';

CREATE  FUNCTION "snowflake_decode_jsonb"(
	"id" bigint /* i64 */
) RETURNS jsonb /* pgrx :: JsonB */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_decode_jsonb_wrapper';

CREATE  FUNCTION "snowflake_to_base32"(
	"id" bigint /* i64 */
) RETURNS TEXT /* String */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_to_base32_wrapper';

CREATE  FUNCTION "snowflake_from_base32"(
	"text" TEXT /* & str */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_from_base32_wrapper';

CREATE FUNCTION snowflake_decode(id bigint, epoch timestamptz, time_unit_ms integer,
                                 node_bits integer, sequence_bits integer,
                                 OUT ts timestamptz, OUT node_id integer, OUT seq integer)
RETURNS record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (snowflake_timestamp(id, epoch, time_unit_ms, node_bits, sequence_bits),
        snowflake_node_id(id, epoch, time_unit_ms, node_bits, sequence_bits),
        snowflake_seq(id, epoch, time_unit_ms, node_bits, sequence_bits));

COMMENT ON FUNCTION snowflake_decode(bigint) IS
'Splits a snowflake ID into the time it was made, the node that made it and its sequence number within that tick, with this server''s layout.';
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
'Returns the time a snowflake ID was made, with this server''s layout. Immutable (the layout is fixed for a data directory): usable in indexes and generated columns.';
COMMENT ON FUNCTION snowflake_node_id(bigint) IS
'Returns the node id of the server that made a snowflake ID, with this server''s layout. Immutable: usable in indexes and generated columns.';
COMMENT ON FUNCTION snowflake_seq(bigint) IS
'Returns the sequence number of a snowflake ID within its tick, with this server''s layout. Immutable: usable in indexes and generated columns.';
COMMENT ON FUNCTION snowflake_decode(bigint, timestamptz, integer, integer, integer) IS
'Splits a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits) into time, node and sequence.';
COMMENT ON FUNCTION snowflake_timestamp(bigint, timestamptz, integer, integer, integer) IS
'Returns the time a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits) was made.';
COMMENT ON FUNCTION snowflake_node_id(bigint, timestamptz, integer, integer, integer) IS
'Returns the node id of a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits).';
COMMENT ON FUNCTION snowflake_seq(bigint, timestamptz, integer, integer, integer) IS
'Returns the sequence number of a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits).';
COMMENT ON FUNCTION snowflake_decode_jsonb(bigint) IS
'Returns a snowflake ID decoded as jsonb with the ID as a string (JavaScript numbers lose integers above 2^53): {"id", "ts", "node_id", "seq"}.';
COMMENT ON FUNCTION snowflake_to_base32(bigint) IS
'Returns the 13-character Crockford base-32 text of a snowflake ID: sorts like the ID, safe in JSON and URLs.';
COMMENT ON FUNCTION snowflake_from_base32(text) IS
'Returns the snowflake ID of a Crockford base-32 text (case-insensitive; I and L read as 1, O as 0, hyphens ignored).';
