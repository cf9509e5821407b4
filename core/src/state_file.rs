//! The bytes of the state file `pg_snowflake.state`: one line holding the last durable
//! reservation, the layout and node id it was made under, the node ids used before it, and the
//! cluster that wrote it, with a check value; or the marker pg_upgrade leaves in a new data
//! directory. The extension's `reservation/store.rs` reads and writes the file; this
//! module only formats and parses it.

use crate::error::Error;
use crate::layout::Layout;
use crate::registry::{Identity, Token};
use std::io::Write;

const FORMAT_TAG: &str = "pg_snowflake reservation v3";
/// Written by 0.4.0: no registry claim. Still read.
const FORMAT_TAG_V2: &str = "pg_snowflake reservation v2";
/// Written by 0.3.0: no node id, no history, no system identifier. Still read.
const FORMAT_TAG_V1: &str = "pg_snowflake reservation v1";

/// Written in place of a reservation when pg_upgrade builds a new data directory: pg_upgrade
/// does not copy the old directory's state file, and a server starting without it would
/// forget every ID the old one issued.
pub const UPGRADE_MARKER: &[u8] =
    b"pg_snowflake upgraded v1: copy pg_snowflake.state from the old data directory over this file\n";

/// Written in place of a damaged state file that a server moved aside to be given a node id by
/// a registry: what the damaged file said (the node ids used here, and how far) is lost, and the
/// server says so to the registry until its first claim replaces this file
/// (`registry::vouched`). Without a registry, or with a node id set, it stops the server as the
/// damaged file would.
pub const HISTORY_LOST_MARKER: &[u8] =
    b"pg_snowflake history lost v1: the state file was damaged and moved to pg_snowflake.state.damaged\n";

/// The most node ids a history lists one by one; past that it stands for every node id.
pub const HISTORY_NODES: usize = 16;

/// The longest line [`format()`] writes.
pub const MAX_LEN: usize = 512;

/// The node ids a server issued IDs under before its current one, and the highest reservation
/// any of them made: a server switched back to one of them resumes above that, while a node id
/// it never used owes nothing to them (see [`resume`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct History {
    nodes: [u32; HISTORY_NODES],
    count: u8,
    /// Every node id counts as used: the file of 0.3.0 named none, or the list overflowed.
    every_node: bool,
    /// The highest reservation made under any of them (`i64::MIN`: none).
    pub until: i64,
}

impl History {
    /// No node id used before.
    pub const EMPTY: History = History {
        nodes: [0; HISTORY_NODES],
        count: 0,
        every_node: false,
        until: i64::MIN,
    };

    /// Whether IDs may have been issued under `node` up to `self.until`.
    pub fn covers(&self, node: u32) -> bool {
        self.every_node || self.nodes[..usize::from(self.count)].contains(&node)
    }

    /// Records that IDs may have been issued under `node` (`None`: an unknown node id) up to
    /// `until`.
    pub fn add(&mut self, node: Option<u32>, until: i64) {
        self.until = self.until.max(until);
        match node {
            Some(node) if self.covers(node) => {}
            Some(node) if usize::from(self.count) < HISTORY_NODES => {
                self.nodes[usize::from(self.count)] = node;
                self.count += 1;
            }
            _ => self.every_node = true,
        }
    }

    fn is_empty(&self) -> bool {
        self.count == 0 && !self.every_node
    }

    /// The node ids named (a history that counts every node id may name some too).
    pub fn named(&self) -> &[u32] {
        &self.nodes[..usize::from(self.count)]
    }
}

/// A durable reservation and what it was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reservation {
    /// IDs of `layout` may have been issued up to (not including) this (Unix ms)...
    pub until: i64,
    pub layout: Layout,
    /// ...under this node id (`None`: not recorded, a file of 0.3.0).
    pub node: Option<u32>,
    /// The node ids used here before, with their highest reservation.
    pub history: History,
    /// The system identifier of the cluster that wrote the file (`None`: not recorded).
    pub system: Option<u64>,
    /// The registry claim the node id is held under (`None`: no registry, or none yet).
    pub identity: Option<Identity>,
}

/// What a state file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Reservation(Reservation),
    /// pg_upgrade made this data directory; the old directory's state file has not been copied
    /// in yet.
    AwaitingOldStateFile,
    /// A damaged state file was moved aside and nothing written since ([`HISTORY_LOST_MARKER`]).
    HistoryLost,
}

/// Where a server configured with node id `node` starts from a state file's reservation: its
/// floor (no ID below it; `i64::MIN`: none) and the history to write with its reservations.
/// The same node id resumes above its reservation; a node id used here before, above that
/// one's; a node id never used here owes nothing to the others' IDs (they cannot collide with
/// its own), so a lead the old one had — a clock that ran ahead — is dropped, and the old one
/// joins the history.
pub fn resume(recorded: &Reservation, node: u32) -> (i64, History) {
    let mut history = recorded.history;
    if recorded.node == Some(node) {
        let floor = if history.covers(node) {
            recorded.until.max(history.until)
        } else {
            recorded.until
        };
        return (floor, history);
    }
    history.add(recorded.node, recorded.until);
    let floor = if history.covers(node) {
        history.until
    } else {
        i64::MIN
    };
    (floor, history)
}

/// The state line, `<tag> until=<unix ms> node=<id> used=<ids>/<until> system=<id>
/// claim=<token hex>/<generation> layout=<epoch>/<unit>/<node>/<seq> check=<hex>`, written into `buffer` without allocating.
/// `used=-` is an empty history, `*` in it stands for every node id.
pub fn format<'a>(reservation: &Reservation, buffer: &'a mut [u8; MAX_LEN]) -> &'a [u8] {
    let capacity = buffer.len();
    let mut cursor = &mut buffer[..];
    let Reservation {
        until,
        layout,
        node,
        history,
        system,
        identity,
    } = reservation;
    // Every field is an integer of at most 20 characters, the history at most 16 of 11: the
    // line is well under MAX_LEN.
    let mut fits = write!(cursor, "{FORMAT_TAG} until={until} node=");
    fits = fits.and_then(|()| match node {
        Some(node) => write!(cursor, "{node}"),
        None => write!(cursor, "-"),
    });
    fits = fits.and_then(|()| write!(cursor, " used="));
    if history.is_empty() {
        fits = fits.and_then(|()| write!(cursor, "-"));
    } else {
        for (i, node) in history.nodes[..usize::from(history.count)]
            .iter()
            .enumerate()
        {
            let comma = if i > 0 { "," } else { "" };
            fits = fits.and_then(|()| write!(cursor, "{comma}{node}"));
        }
        if history.every_node {
            let comma = if history.count > 0 { "," } else { "" };
            fits = fits.and_then(|()| write!(cursor, "{comma}*"));
        }
        fits = fits.and_then(|()| write!(cursor, "/{}", history.until));
    }
    fits = fits.and_then(|()| match system {
        Some(system) => write!(cursor, " system={system}"),
        None => write!(cursor, " system=-"),
    });
    fits = fits.and_then(|()| match identity {
        Some(identity) => write!(
            cursor,
            " claim={}/{}",
            Token(identity.token),
            identity.generation
        ),
        None => write!(cursor, " claim=-"),
    });
    fits = fits.and_then(|()| {
        write!(
            cursor,
            " layout={}/{}/{}/{}",
            layout.epoch_unix_ms, layout.unit_ms, layout.node_bits, layout.seq_bits
        )
    });
    debug_assert!(fits.is_ok());
    let body_len = capacity - cursor.len();
    let check = checksum(&buffer[..body_len]);
    let mut cursor = &mut buffer[body_len..];
    let fits = writeln!(cursor, " check={check:016x}");
    debug_assert!(fits.is_ok());
    let written = capacity - cursor.len();
    &buffer[..written]
}

/// Reads a state file's contents back (this version's, or 0.3.0's); any deviation from the
/// format is an error, with the reason.
pub fn parse(bytes: &[u8]) -> Result<State, String> {
    if bytes == UPGRADE_MARKER {
        return Ok(State::AwaitingOldStateFile);
    }
    if bytes == HISTORY_LOST_MARKER {
        return Ok(State::HistoryLost);
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
    let (version, rest) = if let Some(rest) = body.strip_prefix(FORMAT_TAG) {
        (3, rest)
    } else if let Some(rest) = body.strip_prefix(FORMAT_TAG_V2) {
        (2, rest)
    } else if let Some(rest) = body.strip_prefix(FORMAT_TAG_V1) {
        (1, rest)
    } else {
        return Err(format!("it does not start with \"{FORMAT_TAG} until=\""));
    };
    let rest = rest
        .strip_prefix(" until=")
        .ok_or_else(|| format!("it does not start with \"{FORMAT_TAG} until=\""))?;
    let (fields, layout) = rest
        .split_once(" layout=")
        .ok_or_else(|| "it has no layout field".to_string())?;
    let mut fields = fields.split(' ');
    let until = fields.next().unwrap_or_default();
    let until: i64 = until
        .parse()
        .map_err(|_| format!("\"{until}\" is not a time"))?;
    let (mut node, mut history, mut system, mut identity) = (None, History::EMPTY, None, None);
    if version >= 2 {
        let mut field = |name: &str| {
            fields
                .next()
                .and_then(|f| f.strip_prefix(name))
                .ok_or_else(|| format!("it has no {name} field"))
        };
        node = parse_optional(field("node=")?, "a node id")?;
        history = parse_history(field("used=")?)?;
        system = parse_optional(field("system=")?, "a system identifier")?;
        if version >= 3 {
            identity = parse_claim(field("claim=")?)?;
        }
    }
    if fields.next().is_some() {
        return Err("it has fields this version does not know".into());
    }
    let layout = parse_layout(layout)?;
    Ok(State::Reservation(Reservation {
        until,
        layout,
        node,
        history,
        system,
        identity,
    }))
}

fn parse_claim(text: &str) -> Result<Option<Identity>, String> {
    if text == "-" {
        return Ok(None);
    }
    let bad = || format!("\"{text}\" is not a registry claim");
    let (token, generation) = text.split_once('/').ok_or_else(bad)?;
    Ok(Some(Identity {
        token: token.parse::<Token>().map_err(|_| bad())?.0,
        generation: generation.parse().map_err(|_| bad())?,
    }))
}

fn parse_optional<T: std::str::FromStr>(text: &str, what: &str) -> Result<Option<T>, String> {
    if text == "-" {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| format!("\"{text}\" is not {what}"))
}

fn parse_history(text: &str) -> Result<History, String> {
    let mut history = History::EMPTY;
    if text == "-" {
        return Ok(history);
    }
    let bad = || format!("\"{text}\" is not a history of node ids");
    let (nodes, until) = text.split_once('/').ok_or_else(bad)?;
    for node in nodes.split(',') {
        if node == "*" {
            history.every_node = true;
        } else if usize::from(history.count) < HISTORY_NODES && !history.every_node {
            history.add(Some(node.parse().map_err(|_| bad())?), i64::MIN);
        } else {
            return Err(bad());
        }
    }
    history.until = until.parse().map_err(|_| bad())?;
    Ok(history)
}

fn parse_layout(layout: &str) -> Result<Layout, String> {
    let fields: Vec<i64> = layout
        .split('/')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| format!("\"{layout}\" is not a layout"))?;
    let [epoch, unit, node_bits, seq_bits] = fields[..] else {
        return Err(format!("\"{layout}\" is not a layout"));
    };
    // Bit counts outside u32 are refused, never wrapped into a valid count.
    let bits = |n: i64| u32::try_from(n).map_err(|_| format!("\"{layout}\" is not a layout"));
    Layout::from_parts(epoch, unit, bits(node_bits)?, bits(seq_bits)?).map_err(|e| match e {
        Error::InvalidLayout { reason } => format!("its layout is invalid: {reason}"),
        other => format!("its layout is invalid: {other:?}"),
    })
}

/// FNV-1a over the line's bytes: enough to tell a damaged file from a good one.
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests;
