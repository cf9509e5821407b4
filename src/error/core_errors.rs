//! The wording of the pure core's errors (`snowflake_core::Error`: data, no text).

use super::report::{message, quoted, Message};
use pgrx::PgSqlErrorCode::*;
use snowflake_core::calendar::{format_instant, format_unix_ms};
use snowflake_core::error::TimeField;
use snowflake_core::Error as CoreError;

/// The core's errors, worded.
pub(super) fn message_of(error: &CoreError) -> Message {
    use CoreError::*;
    match error {
        InvalidLayout { reason } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            "invalid snowflake layout",
            Some(format!("The layout is invalid: {reason}.")),
            "Choose pg_snowflake.epoch, time_unit_ms, node_bits and sequence_bits so that the \
             time field covers the present; see \"Layouts\" in pg_snowflake's README.",
        ),
        LayoutChanged {
            recorded,
            configured,
        } => message(
            ERRCODE_CONFIG_FILE_ERROR,
            "the snowflake layout differs from the one this server's IDs were made with",
            Some(format!(
                "The state file records the layout \"{recorded}\"; the settings give \"{configured}\"."
            )),
            "Restore the previous pg_snowflake layout settings. To start a new ID space on \
             purpose, move pg_snowflake.state out of the data directory: IDs made before may \
             then collide with new ones or sort differently.",
        ),
        IdBeyondTimeField { id, field } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("snowflake id {id} lies past the end of the time field"),
            Some(format!(
                "IDs of the layout \"{}\" end at {}.",
                field.layout,
                format_unix_ms(field.end_unix_ms)
            )),
            "Pass an ID made with this layout.",
        ),
        NodeOutOfRange { node, max } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("node id {node} is out of range 0..{max}"),
            None,
            format!("Node ids run from 0 to {max}."),
        ),
        SequenceOutOfRange { seq, max } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("sequence number {seq} is out of range 0..{max}"),
            None,
            format!("Sequence numbers run from 0 to {max}."),
        ),
        InvalidBase32 { text, reason } => message(
            ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid snowflake base-32 text {}: {reason}", quoted(text)),
            None,
            "Pass the 13-character text snowflake_to_base32() makes (digits 0-9 and letters \
             except I, L, O and U).",
        ),
        BatchSizeOutOfRange { n, max } => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("batch size {n} is out of range 1..{max}"),
            None,
            format!("Ask for 1 to {max} IDs at a time; call again for more."),
        ),
        NegativeId(id) => message(
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("snowflake id {id} is negative"),
            Some("Snowflake IDs are positive: their sign bit is always 0.".into()),
            "Pass an ID made by snowflake_nextval().",
        ),
        TimeExhausted { end_unix_ms } => message(
            ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
            "snowflake time field is exhausted",
            Some(format!(
                "The time field of this layout ends at {}.",
                format_unix_ms(*end_unix_ms)
            )),
            "No more IDs can be made with this layout and epoch; check the server's clock.",
        ),
        ClockBeforeEpoch { now_unix_ms } => message(
            ERRCODE_DATETIME_FIELD_OVERFLOW,
            "the server's clock is before the snowflake epoch",
            Some(format!("The clock reads {}.", format_unix_ms(*now_unix_ms))),
            "Set the server's clock to the correct time.",
        ),
        TimestampBeforeEpoch { unix_ms, field } => message(
            ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!(
                "timestamp {} is before the snowflake epoch",
                format_instant(*unix_ms)
            ),
            Some(format!(
                "Snowflake IDs count milliseconds from {}.",
                format_unix_ms(field.epoch_unix_ms)
            )),
            time_range_hint(field),
        ),
        TimestampAfterEnd { unix_ms, field } => message(
            ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!(
                "timestamp {} is after the end of the snowflake time field",
                format_instant(*unix_ms)
            ),
            Some(format!(
                "The time field of this layout ends at {}.",
                format_unix_ms(field.end_unix_ms)
            )),
            time_range_hint(field),
        ),
    }
}

fn time_range_hint(field: &TimeField) -> String {
    format!(
        "Pass a timestamp from {} to {}.",
        format_unix_ms(field.epoch_unix_ms),
        format_unix_ms(field.end_unix_ms)
    )
}
