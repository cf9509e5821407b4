//! The wording of the pure core's errors (`snowflake_core::Error`: data, no text).

use super::catalogue::catalogue;
use super::report::quoted;
use snowflake_core::calendar::{format_instant, format_unix_ms};
use snowflake_core::Error as CoreError;

catalogue! {
    fn message_of(error: &CoreError), rows rows {
        InvalidLayout { reason } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "invalid snowflake layout"
            detail "The layout is invalid: {reason}."
            hint "Choose pg_snowflake.epoch, time_unit_ms, node_bits and sequence_bits so that the \
                  time field covers the present; see \"Layouts\" in pg_snowflake's README." },
        LayoutChanged { recorded, configured } => { ERROR ERRCODE_CONFIG_FILE_ERROR
            message "the snowflake layout differs from the one this server's IDs were made with"
            detail "The state file records the layout \"{recorded}\"; the settings give \
                    \"{configured}\"."
            hint "Restore the previous pg_snowflake layout settings. To start a new ID space on \
                  purpose, move pg_snowflake.state out of the data directory: IDs made before may \
                  then collide with new ones or sort differently." },
        IdBeyondTimeField { id, field } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "snowflake id {id} lies past the end of the time field"
            detail ("IDs of the layout \"{}\" end at {}.", field.layout,
                    format_unix_ms(field.end_unix_ms))
            hint "Pass an ID made with this layout." },
        NodeOutOfRange { node, max } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "node id {node} is out of range 0..{max}"
            hint "Node ids run from 0 to {max}." },
        SequenceOutOfRange { seq, max } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "sequence number {seq} is out of range 0..{max}"
            hint "Sequence numbers run from 0 to {max}." },
        InvalidBase32 { text, reason } => { ERROR ERRCODE_INVALID_TEXT_REPRESENTATION
            message ("invalid snowflake base-32 text {}: {reason}", quoted(text))
            hint "Pass the 13-character text snowflake_to_base32() makes (digits 0-9 and letters \
                  except I, L, O and U)." },
        BatchSizeOutOfRange { n, max } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "batch size {n} is out of range 1..{max}"
            hint "Ask for 1 to {max} IDs at a time; call again for more." },
        NegativeId(id) => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "snowflake id {id} is negative"
            detail "Snowflake IDs are positive: their sign bit is always 0."
            hint "Pass an ID made by snowflake_nextval()." },
        TimeExhausted { end_unix_ms } => { ERROR ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED
            message "snowflake time field is exhausted"
            detail ("The time field of this layout ends at {}.", format_unix_ms(*end_unix_ms))
            hint "No more IDs can be made with this layout and epoch; check the server's clock." },
        ClockBeforeEpoch { now_unix_ms } => { ERROR ERRCODE_DATETIME_FIELD_OVERFLOW
            message "the server's clock is before the snowflake epoch"
            detail ("The clock reads {}.", format_unix_ms(*now_unix_ms))
            hint "Set the server's clock to the correct time." },
        TimestampBeforeEpoch { unix_ms, field } => { ERROR ERRCODE_DATETIME_FIELD_OVERFLOW
            message ("timestamp {} is before the snowflake epoch", format_instant(*unix_ms))
            detail ("Snowflake IDs count milliseconds from {}.",
                    format_unix_ms(field.epoch_unix_ms))
            hint ("Pass a timestamp from {} to {}.", format_unix_ms(field.epoch_unix_ms),
                  format_unix_ms(field.end_unix_ms)) },
        TimestampAfterEnd { unix_ms, field } => { ERROR ERRCODE_DATETIME_FIELD_OVERFLOW
            message ("timestamp {} is after the end of the snowflake time field",
                     format_instant(*unix_ms))
            detail ("The time field of this layout ends at {}.", format_unix_ms(field.end_unix_ms))
            hint ("Pass a timestamp from {} to {}.", format_unix_ms(field.epoch_unix_ms),
                  format_unix_ms(field.end_unix_ms)) },
    }
}
