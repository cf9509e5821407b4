//! The bit layout of a Snowflake ID and the arithmetic that packs and unpacks it.
//!
//! Pure Rust: no pgrx, no clock, no shared state. Everything here is unit- and property-tested
//! by `cargo test` in milliseconds.
//!
//! ```text
//!   bit 63   | 62 ............ 22 | 21 ...... 12 | 11 ...... 0
//!   sign = 0 | time: 41 bits (ms) | node: 10 bits | seq: 12 bits      (the default layout)
//! ```
//!
//! A layout is the epoch, the time unit and the widths of the node and sequence fields; the time
//! field takes the bits that remain below the sign bit. Times in the time field are *ticks*:
//! units of `unit_ms` milliseconds since the epoch.

use crate::calendar::format_unix_ms;
use crate::error::{Error, TimeField};

/// Milliseconds from the Unix epoch to 2024-01-01 00:00:00 UTC, the default Snowflake epoch.
///
/// A recent epoch gives the most years before the time field runs out; every real clock running
/// this extension (first released in 2026) reads later than it. A UTC midnight keeps one day of
/// IDs a fixed-width range, which day partitions rely on.
pub const DEFAULT_EPOCH_UNIX_MS: i64 = 1_704_067_200_000;

/// No layout counts time past 9999-12-31 23:59:59.999 UTC, the last instant a date shows with
/// four-digit years; longer time fields simply never run out.
pub const LATEST_END_UNIX_MS: i64 = 253_402_300_799_999;

/// The longest time unit: a day.
pub const MAX_UNIT_MS: i64 = 86_400_000;
/// The widest node field.
pub const MAX_NODE_BITS: u32 = 31;
/// The widest sequence field (at least 1 bit: a tick holds at least two IDs).
pub const MAX_SEQ_BITS: u32 = 31;
/// The narrowest time field: 19 bits of ms (under 9 minutes) is the shortest anyone has tried
/// on purpose; fewer than 16 bits cannot mean a real layout.
pub const MIN_TIME_BITS: u32 = 16;

/// How the 63 usable bits of an ID are split, and where and how fast time counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Layout {
    /// Unix time, in milliseconds, that the time field counts from.
    pub epoch_unix_ms: i64,
    /// Milliseconds per tick of the time field.
    pub unit_ms: i64,
    pub time_bits: u32,
    pub node_bits: u32,
    pub seq_bits: u32,
}

/// Twitter's layout, also used by ShardingSphere and pgEdge: 41 bits of ms, 10 of node, 12 of
/// sequence, counted from [`DEFAULT_EPOCH_UNIX_MS`].
pub const DEFAULT_LAYOUT: Layout = Layout {
    epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
    unit_ms: 1,
    time_bits: 41,
    node_bits: 10,
    seq_bits: 12,
};

/// The three fields of an ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Parts {
    /// Ticks since the layout's epoch.
    pub time: u64,
    pub node: u32,
    pub seq: u32,
}

const fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

impl Layout {
    /// A layout for a server making IDs at `now_unix_ms`: as [`Layout::from_parts`], and refused
    /// also when the epoch is in the future. (A time field that has run out is not refused here:
    /// the server starts, and `snowflake_nextval()` says the field is exhausted.)
    pub fn new(
        epoch_unix_ms: i64,
        unit_ms: i64,
        node_bits: u32,
        seq_bits: u32,
        now_unix_ms: i64,
    ) -> Result<Layout, Error> {
        let layout = Layout::from_parts(epoch_unix_ms, unit_ms, node_bits, seq_bits)?;
        if epoch_unix_ms > now_unix_ms {
            return Err(Error::InvalidLayout {
                reason: format!(
                    "the epoch {} is in the future",
                    format_unix_ms(epoch_unix_ms)
                ),
            });
        }
        Ok(layout)
    }

    /// A layout from its parts, refused with the reason when the fields do not fit 63 bits, the
    /// unit is below 1 ms or the epoch is before 1970.
    pub fn from_parts(
        epoch_unix_ms: i64,
        unit_ms: i64,
        node_bits: u32,
        seq_bits: u32,
    ) -> Result<Layout, Error> {
        let invalid = |reason: String| Err(Error::InvalidLayout { reason });
        if unit_ms < 1 {
            return invalid(format!(
                "the time unit is {unit_ms} ms; it must be at least 1 ms"
            ));
        }
        if unit_ms > MAX_UNIT_MS {
            return invalid(format!(
                "the time unit is {unit_ms} ms; it must be at most {MAX_UNIT_MS} ms (a day)"
            ));
        }
        if node_bits > MAX_NODE_BITS || !(1..=MAX_SEQ_BITS).contains(&seq_bits) {
            return invalid(format!(
                "{node_bits} node bits and {seq_bits} sequence bits: node bits run from 0 to \
                 {MAX_NODE_BITS}, sequence bits from 1 to {MAX_SEQ_BITS}"
            ));
        }
        if 63 - node_bits - seq_bits < MIN_TIME_BITS {
            return invalid(format!(
                "{node_bits} node bits and {seq_bits} sequence bits leave {} bits of time; the \
                 time field needs at least {MIN_TIME_BITS}",
                63 - node_bits - seq_bits
            ));
        }
        if !(0..=LATEST_END_UNIX_MS).contains(&epoch_unix_ms) {
            return invalid(format!(
                "the epoch {} is not between 1970-01-01 and 9999-12-31",
                format_unix_ms(epoch_unix_ms)
            ));
        }
        Ok(Layout {
            epoch_unix_ms,
            unit_ms,
            time_bits: 63 - node_bits - seq_bits,
            node_bits,
            seq_bits,
        })
    }

    /// The layout as its settings would spell it, e.g.
    /// `41 bits of 1 ms since 2024-01-01 00:00:00.000 UTC | 10 bits node | 12 bits sequence`.
    pub fn describe(&self) -> String {
        format!(
            "{} bits of {} ms since {} | {} bits node | {} bits sequence",
            self.time_bits,
            self.unit_ms,
            format_unix_ms(self.epoch_unix_ms),
            self.node_bits,
            self.seq_bits
        )
    }

    /// `self` is the layout a reservation was recorded under (a state file's, a WAL record's):
    /// refuses it unless the server is `configured` with the same.
    pub fn check_same(&self, configured: &Layout) -> Result<(), Error> {
        if self == configured {
            Ok(())
        } else {
            Err(Error::LayoutChanged {
                recorded: self.describe(),
                configured: configured.describe(),
            })
        }
    }

    /// The time field's start, end and description, for messages.
    pub fn time_field(&self) -> TimeField {
        TimeField {
            epoch_unix_ms: self.epoch_unix_ms,
            end_unix_ms: self.end_unix_ms(),
            layout: self.describe(),
        }
    }

    pub const fn max_time(&self) -> u64 {
        mask(self.time_bits)
    }

    pub const fn max_node(&self) -> u32 {
        mask(self.node_bits) as u32
    }

    pub const fn max_seq(&self) -> u32 {
        mask(self.seq_bits) as u32
    }

    /// The first sequence number of the *wake range*, the top eighth of the sequence field (at
    /// least its last number): only a call issued at once after a quiet spell, while the
    /// reservation covering it is being written, uses it, and a generator that resumes after a
    /// restart or a promotion leaves it alone for `WAKE_MS` past its floor
    /// (`generator.rs`, *The wake*). `None` for a sequence field of one number.
    pub const fn wake_seq(&self) -> Option<u32> {
        let numbers = mask(self.seq_bits) + 1;
        if numbers < 2 {
            return None;
        }
        let eighth = numbers >> 3;
        Some((numbers - if eighth == 0 { 1 } else { eighth }) as u32)
    }

    /// The last sequence number below the wake range (the last of the field when it has none).
    pub const fn low_max_seq(&self) -> u32 {
        match self.wake_seq() {
            Some(first) => first - 1,
            None => self.max_seq(),
        }
    }

    /// The last tick IDs can be made in: the end of the time field, or of year 9999.
    pub const fn end_tick(&self) -> u64 {
        let latest = ((LATEST_END_UNIX_MS - self.epoch_unix_ms) / self.unit_ms) as u64;
        if self.max_time() < latest {
            self.max_time()
        } else {
            latest
        }
    }

    /// Unix time (ms) at which the last tick IDs can be made in begins.
    pub const fn end_unix_ms(&self) -> i64 {
        self.unix_ms(self.end_tick())
    }

    /// Unix time (ms) at which a tick begins; `time` must not be past [`Layout::end_tick`].
    pub const fn unix_ms(&self, time: u64) -> i64 {
        self.epoch_unix_ms + time as i64 * self.unit_ms
    }

    /// The tick a Unix time (ms) falls in, counted from the epoch (negative before it).
    #[inline]
    pub const fn tick_at(&self, unix_ms: i64) -> i64 {
        let since = unix_ms - self.epoch_unix_ms;
        // Ticks of 1 ms (the default layout's) need no division.
        if self.unit_ms == 1 {
            since
        } else {
            since.div_euclid(self.unit_ms)
        }
    }

    /// The first tick that begins at or after a Unix time (ms).
    pub const fn tick_from(&self, unix_ms: i64) -> i64 {
        let since = unix_ms - self.epoch_unix_ms;
        since.div_euclid(self.unit_ms) + (since.rem_euclid(self.unit_ms) != 0) as i64
    }

    /// The smallest ID any node can issue in the tick of `unix_ms` (node 0, sequence 0):
    /// `id >= first_id_at(t)` selects the IDs made from `t`'s tick on, `id < first_id_at(t)`
    /// those made before it. Instants outside the time field are refused.
    pub fn first_id_at(&self, unix_ms: i64) -> Result<i64, Error> {
        let time = self.time_field_at(unix_ms)?;
        self.compose(Parts {
            time,
            node: 0,
            seq: 0,
        })
    }

    /// The largest ID any node can issue in the tick of `unix_ms` (the highest node and
    /// sequence): `id <= last_id_at(t)` selects the IDs made up to and including that tick.
    pub fn last_id_at(&self, unix_ms: i64) -> Result<i64, Error> {
        let time = self.time_field_at(unix_ms)?;
        self.compose(Parts {
            time,
            node: self.max_node(),
            seq: self.max_seq(),
        })
    }

    /// The time-field value of a Unix time (ms), or an error naming the instant when the field
    /// cannot hold it.
    fn time_field_at(&self, unix_ms: i64) -> Result<u64, Error> {
        if unix_ms < self.epoch_unix_ms {
            return Err(Error::TimestampBeforeEpoch {
                unix_ms,
                field: self.time_field(),
            });
        }
        let tick = self.tick_at(unix_ms) as u64;
        if tick > self.end_tick() {
            return Err(Error::TimestampAfterEnd {
                unix_ms,
                field: self.time_field(),
            });
        }
        Ok(tick)
    }

    /// Packs the fields into a positive `i64`, refusing any field that does not fit.
    pub fn compose(&self, parts: Parts) -> Result<i64, Error> {
        if parts.time > self.end_tick() {
            return Err(Error::TimeExhausted {
                end_unix_ms: self.end_unix_ms(),
            });
        }
        if parts.node > self.max_node() {
            return Err(Error::NodeOutOfRange {
                node: i64::from(parts.node),
                max: self.max_node(),
            });
        }
        if parts.seq > self.max_seq() {
            return Err(Error::SequenceOutOfRange {
                seq: parts.seq,
                max: self.max_seq(),
            });
        }
        Ok(self.pack(parts))
    }

    /// Packs fields already known to fit (see [`Layout::compose`]).
    pub const fn pack(&self, parts: Parts) -> i64 {
        let id = (parts.time << (self.node_bits + self.seq_bits))
            | ((parts.node as u64) << self.seq_bits)
            | parts.seq as u64;
        // The three fields add up to at most 63 bits, so the sign bit is always clear.
        id as i64
    }

    /// Unpacks an ID. Every non-negative `i64` is a well-formed ID of this layout.
    pub fn decompose(&self, id: i64) -> Result<Parts, Error> {
        if id < 0 {
            return Err(Error::NegativeId(id));
        }
        let id = id as u64;
        Ok(Parts {
            time: id >> (self.node_bits + self.seq_bits),
            node: ((id >> self.seq_bits) & mask(self.node_bits)) as u32,
            seq: (id & mask(self.seq_bits)) as u32,
        })
    }

    /// The Unix time (ms) an ID was made at, or an error for negative IDs and IDs whose time lies
    /// past year 9999 (possible only with long time fields, and never made by a generator).
    pub fn id_unix_ms(&self, id: i64) -> Result<i64, Error> {
        let time = self.decompose(id)?.time;
        if time > self.end_tick() {
            return Err(Error::IdBeyondTimeField {
                id,
                field: self.time_field(),
            });
        }
        Ok(self.unix_ms(time))
    }
}

#[cfg(test)]
mod tests;
