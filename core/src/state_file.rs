//! The bytes of the state file `pg_snowflake.state`: one line holding the last durable
//! reservation and the layout it was made under, with a check value, or the marker pg_upgrade
//! leaves in a new data directory. The extension's `durable.rs` reads and writes the file; this
//! module only formats and parses it.

use crate::error::Error;
use crate::layout::Layout;
use std::io::Write;

const FORMAT_TAG: &str = "pg_snowflake reservation v1";

/// Written in place of a reservation when pg_upgrade builds a new data directory: pg_upgrade
/// does not carry the old directory's state file, and a server starting without it would
/// forget every ID the old one issued.
pub const UPGRADE_MARKER: &[u8] =
    b"pg_snowflake upgraded v1: copy pg_snowflake.state from the old data directory over this file\n";

/// The longest line [`format`] writes.
pub const MAX_LEN: usize = 192;

/// What a state file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// IDs of `layout` may have been issued up to (not including) `until` (Unix ms).
    Reservation { until: i64, layout: Layout },
    /// pg_upgrade made this data directory; the old directory's file has not been copied in.
    AwaitingCarry,
}

/// The state line, `<tag> until=<unix ms> layout=<epoch>/<unit>/<node>/<seq> check=<hex>`,
/// written into `buffer` without allocating.
pub fn format<'a>(layout: &Layout, until: i64, buffer: &'a mut [u8; MAX_LEN]) -> &'a [u8] {
    let capacity = buffer.len();
    let mut cursor = &mut buffer[..];
    let fits = write!(
        cursor,
        "{FORMAT_TAG} until={until} layout={}/{}/{}/{}",
        layout.epoch_unix_ms, layout.unit_ms, layout.node_bits, layout.seq_bits
    );
    // Every field is an integer of at most 20 characters: the line is under 140 bytes.
    debug_assert!(fits.is_ok());
    let body_len = capacity - cursor.len();
    let check = checksum(&buffer[..body_len]);
    let mut cursor = &mut buffer[body_len..];
    let fits = writeln!(cursor, " check={check:016x}");
    debug_assert!(fits.is_ok());
    let written = capacity - cursor.len();
    &buffer[..written]
}

/// Reads a state file's contents back; any deviation from the format is an error, with the
/// reason.
pub fn parse(bytes: &[u8]) -> Result<State, String> {
    if bytes == UPGRADE_MARKER {
        return Ok(State::AwaitingCarry);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not text".to_string())?;
    let line = text
        .strip_suffix('\n')
        .ok_or_else(|| "it does not end with a newline (truncated?)".to_string())?;
    let (body, check) = line
        .rsplit_once(" check=")
        .ok_or_else(|| "it has no check field".to_string())?;
    if check != format!("{:016x}", checksum(body.as_bytes())) {
        return Err("its check value does not match its contents".into());
    }
    let rest = body
        .strip_prefix(FORMAT_TAG)
        .and_then(|r| r.strip_prefix(" until="))
        .ok_or_else(|| format!("it does not start with \"{FORMAT_TAG} until=\""))?;
    let (until, layout) = rest
        .split_once(" layout=")
        .ok_or_else(|| "it has no layout field".to_string())?;
    let until: i64 = until
        .parse()
        .map_err(|_| format!("\"{until}\" is not a time"))?;
    let fields: Vec<i64> = layout
        .split('/')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| format!("\"{layout}\" is not a layout"))?;
    let [epoch, unit, node_bits, seq_bits] = fields[..] else {
        return Err(format!("\"{layout}\" is not a layout"));
    };
    let layout = Layout::from_parts(epoch, unit, node_bits as u32, seq_bits as u32).map_err(
        |e| match e {
            Error::InvalidLayout { reason } => format!("its layout is invalid: {reason}"),
            other => format!("its layout is invalid: {other:?}"),
        },
    )?;
    Ok(State::Reservation { until, layout })
}

/// Refuses a reservation made under another layout than this server's.
pub fn check_layout(recorded: &Layout, configured: &Layout) -> Result<(), Error> {
    if recorded == configured {
        Ok(())
    } else {
        Err(Error::LayoutChanged {
            recorded: recorded.describe(),
            configured: configured.describe(),
        })
    }
}

/// FNV-1a over the line's bytes: enough to tell a damaged file from a good one.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests;
