//! The decoders: an ID back into its time, node and sequence, and into JSON- and URL-safe forms.
//!
//! Two families:
//! - one argument, `snowflake_decode(id)` and friends, decode with this server's layout. They are
//!   IMMUTABLE because the layout cannot change under a data directory: it is a
//!   start-up setting, recorded in the state file with the first ID, and a server whose settings
//!   give another layout refuses to start. Use them in indexes and generated columns on this
//!   server.
//! - with the layout as arguments, `snowflake_decode(id, epoch, time_unit_ms, node_bits,
//!   sequence_bits)` and friends, decode IDs of any layout; IMMUTABLE everywhere. Use them for
//!   IDs made elsewhere, or in definitions that must mean the same on every server.

use super::timestamps::{timestamptz, unix_ms};
use crate::error::OrReport;
use crate::gucs;
use pgrx::prelude::*;
use serde::Serialize;
use snowflake_core::base32;
use snowflake_core::calendar::format_rfc3339;
use snowflake_core::clock::wall_now;
use snowflake_core::layout::{Layout, Parts};

fn parts(layout: &Layout, id: i64) -> (TimestampWithTimeZone, Parts) {
    let ts = layout.id_unix_ms(id).or_report();
    (timestamptz(ts), layout.decompose(id).or_report())
}

/// A layout given as SQL arguments, checked by the same function that checks the settings
/// (`Layout::new`, with the clock for "the epoch is not in the future"): a decoder never accepts
/// a layout no server could run.
fn layout_from_args(
    epoch: TimestampWithTimeZone,
    time_unit_ms: i32,
    node_bits: i32,
    sequence_bits: i32,
) -> Layout {
    let bits = |b: i32| u32::try_from(b).unwrap_or(u32::MAX);
    Layout::new(
        unix_ms(epoch),
        i64::from(time_unit_ms),
        bits(node_bits),
        bits(sequence_bits),
        wall_now(),
    )
    .or_report()
}

/// The time an ID was made (to its tick: a millisecond with the default layout).
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    parts(gucs::layout(), id).0
}

/// The node id of the server that made an ID.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_node_id(id: i64) -> i32 {
    parts(gucs::layout(), id).1.node as i32
}

/// The sequence number of an ID within its tick.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_seq(id: i64) -> i32 {
    parts(gucs::layout(), id).1.seq as i32
}

#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_timestamp")]
fn snowflake_timestamp_in(
    id: i64,
    epoch: TimestampWithTimeZone,
    time_unit_ms: i32,
    node_bits: i32,
    sequence_bits: i32,
) -> TimestampWithTimeZone {
    parts(
        &layout_from_args(epoch, time_unit_ms, node_bits, sequence_bits),
        id,
    )
    .0
}

#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_node_id")]
fn snowflake_node_id_in(
    id: i64,
    epoch: TimestampWithTimeZone,
    time_unit_ms: i32,
    node_bits: i32,
    sequence_bits: i32,
) -> i32 {
    parts(
        &layout_from_args(epoch, time_unit_ms, node_bits, sequence_bits),
        id,
    )
    .1
    .node as i32
}

#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_seq")]
fn snowflake_seq_in(
    id: i64,
    epoch: TimestampWithTimeZone,
    time_unit_ms: i32,
    node_bits: i32,
    sequence_bits: i32,
) -> i32 {
    parts(
        &layout_from_args(epoch, time_unit_ms, node_bits, sequence_bits),
        id,
    )
    .1
    .seq as i32
}

/// An ID decoded for JSON: the ID as a string, because JavaScript numbers lose integers above
/// 2^53 and every ID made after 2024-01-25 is above it.
#[derive(Serialize)]
struct DecodedJson {
    id: String,
    ts: String,
    node_id: u32,
    seq: u32,
}

/// `{"id": "…", "ts": "…Z", "node_id": …, "seq": …}` with this server's layout.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_decode_jsonb(id: i64) -> pgrx::JsonB {
    let layout = gucs::layout();
    let ts = format_rfc3339(layout.id_unix_ms(id).or_report());
    let Parts { node, seq, .. } = layout.decompose(id).or_report();
    let decoded = DecodedJson {
        id: id.to_string(),
        ts,
        node_id: node,
        seq,
    };
    pgrx::JsonB(
        serde_json::to_value(decoded).unwrap_or_else(|_| unreachable!("plain fields serialise")),
    )
}

/// The 13-character base-32 text of an ID: sorts like the ID, safe in JSON and URLs.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_to_base32(id: i64) -> String {
    base32::encode(id).or_report()
}

/// An ID from its base-32 text.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_from_base32(text: &str) -> i64 {
    base32::decode(text).or_report()
}

extension_sql!(
    r#"
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
"#,
    name = "decoders",
    requires = [
        snowflake_timestamp,
        snowflake_node_id,
        snowflake_seq,
        snowflake_timestamp_in,
        snowflake_node_id_in,
        snowflake_seq_in,
        snowflake_decode_jsonb,
        snowflake_to_base32,
        snowflake_from_base32
    ],
);
