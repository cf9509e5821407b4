//! IDs stamped at past instants (`snowflake_nextval_at`, for re-keying old rows): the rules of
//! the backfill cursor, its durable ceiling, and the bytes of its file and WAL record.
//!
//! An ID made for a past instant must not equal any ID made before or after by anyone. Live IDs
//! of a node id cover every instant from the epoch on, so a past instant can only be stamped
//! with a node id that never makes live IDs: the *backfill node id*, set aside for this, distinct
//! per server. What remains is that this server never makes one (tick, sequence) twice under it.
//!
//! The rule, in *runs*: a run is the life of the server's shared memory (a start, or a restart
//! after a crash). Within a run the cursor is the last (tick, sequence) made: a later instant
//! starts at the run's *base* sequence, the same instant counts up from the last, an earlier
//! instant is refused. So within a run no pair repeats. Across runs, the sequence numbers keep
//! them apart: the durable *ceiling* says "every sequence number this node id has used on this
//! server, at any instant, is below it"; a run starts with its base at the recorded ceiling and
//! makes nothing at or above a ceiling until that ceiling is on disk (and in the flushed WAL,
//! for a standby that may be promoted). A run whose count at an instant reaches the ceiling
//! raises it first ([`BLOCK`] at a time, so most calls write nothing). Each run, crash or clean
//! restart alike, thus costs at least [`BLOCK`] sequence numbers of every instant; when the
//! base passes the layout's last sequence number, the node id is spent for backfill and a new
//! one must be set aside.
//!
//! Nothing here reads a clock or the disk: the extension gives the instant, this server's
//! "now", the recorded ceiling, and writes what [`Step::Reserve`] asks before calling again.

use crate::layout::Layout;

/// How many sequence numbers past the one needed a raise of the ceiling reserves: the writes of
/// a backfill are one per run plus one per [`BLOCK`] ties at one instant beyond the first.
pub const BLOCK: u64 = 16;

/// The cursor of the current run, in shared memory (plain data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Cursor {
    run: Option<Run>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Run {
    node: u32,
    /// The first sequence number of each instant in this run: the ceiling recorded when the
    /// run began.
    base: u64,
    /// The ceiling on disk: nothing at or above it may be made before it is raised.
    ceiling: u64,
    /// The last (tick, sequence) made in this run.
    last: Option<(u64, u64)>,
}

/// What the caller must do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Make the ID of this tick and sequence number: the cursor has moved to it.
    Issue { tick: u64, seq: u32 },
    /// Record durably that sequence numbers up to (not including) `ceiling` may be used under
    /// the run's node id, then call [`Cursor::reserved`] and ask again. Nothing has moved.
    Reserve { node: u32, ceiling: u64 },
}

/// Why an instant is refused. Nothing has moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The instant lies after this server's clock.
    Future { unix_ms: i64, now_unix_ms: i64 },
    /// The instant lies before the layout's epoch.
    BeforeEpoch { unix_ms: i64, epoch_unix_ms: i64 },
    /// The instant lies past the layout's time field (a field that ran out before now).
    AfterEnd { unix_ms: i64 },
    /// The instant lies before the run's cursor (instants must not decrease).
    BelowCursor { unix_ms: i64, cursor_unix_ms: i64 },
    /// The instant's sequence numbers are used up: `first` is the run's base (the numbers below
    /// it went to earlier runs, at every instant), `max` the layout's last.
    Exhausted { unix_ms: i64, first: u64, max: u32 },
}

impl Cursor {
    /// No run yet: the first call of this shared memory's life begins one.
    pub const NEW: Cursor = Cursor { run: None };

    /// Whether a run for `node` is under way; if not, the caller reads the ceiling recorded for
    /// `node` and calls [`Cursor::begin`].
    pub fn runs_for(&self, node: u32) -> bool {
        self.run.is_some_and(|run| run.node == node)
    }

    /// Begins a run for `node` above `recorded`, the ceiling on disk for it (0: none). A run for
    /// another node id, if any, ends (its ceiling is on disk already).
    pub fn begin(&mut self, node: u32, recorded: u64) {
        self.run = Some(Run {
            node,
            base: recorded,
            ceiling: recorded,
            last: None,
        });
    }

    /// The next step for an ID at `unix_ms` with this server's clock at `now_unix_ms`. Call
    /// only during a run ([`Cursor::runs_for`]).
    pub fn next(
        &mut self,
        layout: &Layout,
        unix_ms: i64,
        now_unix_ms: i64,
    ) -> Result<Step, Refusal> {
        let Some(run) = self.run.as_mut() else {
            unreachable!("Cursor::next is called during a run only");
        };
        if unix_ms > now_unix_ms {
            return Err(Refusal::Future {
                unix_ms,
                now_unix_ms,
            });
        }
        if unix_ms < layout.epoch_unix_ms {
            return Err(Refusal::BeforeEpoch {
                unix_ms,
                epoch_unix_ms: layout.epoch_unix_ms,
            });
        }
        let tick = layout.tick_at(unix_ms) as u64;
        if tick > layout.end_tick() {
            return Err(Refusal::AfterEnd { unix_ms });
        }
        let seq = match run.last {
            Some((last, _)) if tick < last => {
                return Err(Refusal::BelowCursor {
                    unix_ms,
                    cursor_unix_ms: layout.unix_ms(last),
                })
            }
            Some((last, seq)) if tick == last => seq + 1,
            _ => run.base,
        };
        let max = layout.max_seq();
        if seq > u64::from(max) {
            return Err(Refusal::Exhausted {
                unix_ms,
                first: run.base,
                max,
            });
        }
        if seq >= run.ceiling {
            return Ok(Step::Reserve {
                node: run.node,
                ceiling: (seq + BLOCK).min(u64::from(max) + 1),
            });
        }
        run.last = Some((tick, seq));
        Ok(Step::Issue {
            tick,
            seq: seq as u32,
        })
    }

    /// The ceiling asked for by [`Step::Reserve`] is on disk.
    pub fn reserved(&mut self, ceiling: u64) {
        if let Some(run) = self.run.as_mut() {
            run.ceiling = run.ceiling.max(ceiling);
        }
    }
}

/// Whether `backfill` may serve as the backfill node id of a server whose live node id is
/// `live`, under `layout`; `used_before`: this server made live IDs under it before (its state
/// file's history). `Err` says why not.
pub fn check_node(
    layout: &Layout,
    backfill: u32,
    live: Option<u32>,
    used_before: bool,
) -> Result<(), NodeRefusal> {
    if backfill > layout.max_node() {
        return Err(NodeRefusal::OutOfRange {
            node: backfill,
            max: layout.max_node(),
        });
    }
    if live == Some(backfill) {
        return Err(NodeRefusal::Live { node: backfill });
    }
    if used_before {
        return Err(NodeRefusal::UsedBefore { node: backfill });
    }
    Ok(())
}

/// Why a backfill node id is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRefusal {
    /// Past the layout's last node id.
    OutOfRange { node: u32, max: u32 },
    /// It is this server's live node id.
    Live { node: u32 },
    /// This server made live IDs under it before.
    UsedBefore { node: u32 },
}

/// The ceilings recorded on this server, one per backfill node id ever used here, and the
/// layout they were made under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ceilings {
    pub layout: Layout,
    /// (node id, ceiling), sorted by node id, each node id once.
    pub nodes: Vec<(u32, u64)>,
}

const FILE_HEADER: &str = "pg_snowflake backfill 1";

/// What stands in the file's place after pg_upgrade made the data directory (pg_upgrade copies
/// no file of ours): the backfill refuses until the old directory's file is copied over it, or,
/// where the old server never backfilled, it is deleted. It is no list of ceilings: read as one,
/// it would let the backfill start again from sequence number 0 at every instant.
pub const UPGRADE_MARKER: &str =
    "pg_snowflake backfill 1\nawaiting the old data directory's file\n";

impl Ceilings {
    pub fn new(layout: Layout) -> Ceilings {
        Ceilings {
            layout,
            nodes: Vec::new(),
        }
    }

    /// The ceiling recorded for `node` (0: none).
    pub fn of(&self, node: u32) -> u64 {
        self.nodes
            .iter()
            .find(|(n, _)| *n == node)
            .map_or(0, |(_, c)| *c)
    }

    /// Raises the ceiling of `node` to `ceiling` (never lowers it). Whether it changed.
    pub fn raise(&mut self, node: u32, ceiling: u64) -> bool {
        match self.nodes.binary_search_by_key(&node, |(n, _)| *n) {
            Ok(i) if self.nodes[i].1 >= ceiling => false,
            Ok(i) => {
                self.nodes[i].1 = ceiling;
                true
            }
            Err(i) => {
                self.nodes.insert(i, (node, ceiling));
                true
            }
        }
    }

    /// The file's text.
    pub fn format(&self) -> String {
        let l = &self.layout;
        let mut text = format!(
            "{FILE_HEADER}\nlayout {} {} {} {}\n",
            l.epoch_unix_ms, l.unit_ms, l.node_bits, l.seq_bits
        );
        for (node, ceiling) in &self.nodes {
            text.push_str(&format!("node {node} {ceiling}\n"));
        }
        text
    }

    /// The file's text read back; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<Ceilings, String> {
        let mut lines = text.lines();
        if lines.next() != Some(FILE_HEADER) {
            return Err(format!("its first line is not \"{FILE_HEADER}\""));
        }
        let numbers = |line: Option<&str>, word: &str, count: usize| -> Result<Vec<i64>, String> {
            let line = line.ok_or_else(|| format!("a \"{word}\" line is missing"))?;
            let mut fields = line.split(' ');
            if fields.next() != Some(word) {
                return Err(format!("a line does not start with \"{word}\""));
            }
            let values = fields
                .map(|f| {
                    f.parse::<i64>()
                        .map_err(|_| format!("\"{word}\" has a bad number"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if values.len() != count {
                return Err(format!(
                    "\"{word}\" has {} numbers, not {count}",
                    values.len()
                ));
            }
            Ok(values)
        };
        let l = numbers(lines.next(), "layout", 4)?;
        let (Ok(node_bits), Ok(seq_bits)) = (u32::try_from(l[2]), u32::try_from(l[3])) else {
            return Err("its layout's bits are out of range".into());
        };
        let layout = Layout::from_parts(l[0], l[1], node_bits, seq_bits)
            .map_err(|_| "its layout is not a valid layout".to_string())?;
        let mut ceilings = Ceilings::new(layout);
        let mut rest = lines.peekable();
        while rest.peek().is_some() {
            let n = numbers(rest.next(), "node", 2)?;
            let (Ok(node), Ok(ceiling)) = (u32::try_from(n[0]), u64::try_from(n[1])) else {
                return Err("a node line is out of range".into());
            };
            if ceilings.nodes.iter().any(|(n, _)| *n == node) {
                return Err(format!("node {node} is listed twice"));
            }
            ceilings.raise(node, ceiling);
        }
        Ok(ceilings)
    }
}

/// The payload of the WAL record "backfill": a raised ceiling of one backfill node id under a
/// layout: epoch, unit (8 bytes each), node and sequence bits, node id (4 each), ceiling (8), as
/// little-endian integers.
pub const RECORD_LEN: usize = 36;

/// What a backfill record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub layout: Layout,
    pub node: u32,
    pub ceiling: u64,
}

pub fn encode(record: &Record) -> [u8; RECORD_LEN] {
    let mut payload = [0u8; RECORD_LEN];
    payload[..8].copy_from_slice(&record.layout.epoch_unix_ms.to_le_bytes());
    payload[8..16].copy_from_slice(&record.layout.unit_ms.to_le_bytes());
    payload[16..20].copy_from_slice(&record.layout.node_bits.to_le_bytes());
    payload[20..24].copy_from_slice(&record.layout.seq_bits.to_le_bytes());
    payload[24..28].copy_from_slice(&record.node.to_le_bytes());
    payload[28..36].copy_from_slice(&record.ceiling.to_le_bytes());
    payload
}

/// The record a payload carries, or `None` if it is none.
pub fn decode(bytes: &[u8]) -> Option<Record> {
    if bytes.len() != RECORD_LEN {
        return None;
    }
    let at = |from: usize, to: usize| -> u64 {
        let mut field = [0u8; 8];
        field[..to - from].copy_from_slice(&bytes[from..to]);
        u64::from_le_bytes(field)
    };
    let layout = Layout::from_parts(
        at(0, 8) as i64,
        at(8, 16) as i64,
        at(16, 20) as u32,
        at(20, 24) as u32,
    )
    .ok()?;
    Some(Record {
        layout,
        node: at(24, 28) as u32,
        ceiling: at(28, 36),
    })
}

#[cfg(test)]
mod tests;
