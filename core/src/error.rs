//! The core's one error type: what can go wrong in pure ID arithmetic, as plain data.
//!
//! No text lives here. The extension's `error/core_errors.rs` gives every variant its SQLSTATE,
//! message, detail and hint in one place, so a message is written once and the core stays free
//! of Postgres.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The layout settings (or a decoder's layout arguments) do not make a working layout.
    InvalidLayout { reason: String },
    /// A reservation was made under another layout than the one configured now (both as
    /// `Layout::describe` spells them).
    LayoutChanged {
        recorded: String,
        configured: String,
    },
    /// An ID whose time lies past year 9999 (only possible with very long time fields).
    IdBeyondTimeField { id: i64, field: TimeField },
    /// A node id that does not fit the layout's node bits.
    NodeOutOfRange { node: i64, max: u32 },
    /// A sequence number that does not fit the layout's sequence bits.
    SequenceOutOfRange { seq: u32, max: u32 },
    /// Text that is not the base-32 form of an ID. `text` is the input, whole: whoever shows
    /// it bounds it.
    InvalidBase32 { text: String, reason: String },
    /// A batch size outside 1..=max.
    BatchSizeOutOfRange { n: i32, max: i32 },
    /// A negative bigint was given where an ID was expected.
    NegativeId(i64),
    /// The time field has no room for the current time.
    TimeExhausted { end_unix_ms: i64 },
    /// The server's clock reads a time before the epoch and nothing was issued yet.
    ClockBeforeEpoch { now_unix_ms: i64 },
    /// A timestamp before the epoch where an ID bound was asked for (`i64::MIN`: -infinity).
    TimestampBeforeEpoch { unix_ms: i64, field: TimeField },
    /// A timestamp after the end of the time field where an ID bound was asked for
    /// (`i64::MAX`: infinity).
    TimestampAfterEnd { unix_ms: i64, field: TimeField },
}

/// What a message needs to say about a layout's time field: where it starts and ends, and the
/// layout as its settings would spell it. (Plain data, so that this module needs nothing of
/// `layout`, which returns these errors.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeField {
    pub epoch_unix_ms: i64,
    pub end_unix_ms: i64,
    pub layout: String,
}
