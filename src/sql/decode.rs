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

extension_sql_file!(
    "../../sql/install/decoders.sql",
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
