
CREATE FUNCTION snowflake_decode(id bigint, OUT ts timestamptz, OUT node_id integer, OUT seq integer)
RETURNS record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (snowflake_timestamp(id), snowflake_node_id(id), snowflake_seq(id));

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
