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

use crate::error::SnowflakeError;

/// Milliseconds from the Unix epoch to 2024-01-01 00:00:00 UTC, the default Snowflake epoch.
///
/// A recent epoch gives the most years before the time field runs out; every real clock running
/// this extension (first released in 2026) reads later than it. A UTC midnight keeps one day of
/// IDs a fixed-width range, which day partitions rely on.
pub const DEFAULT_EPOCH_UNIX_MS: i64 = 1_704_067_200_000;

/// No layout counts time past 9999-12-31 23:59:59.999 UTC, the last instant a date shows with
/// four-digit years; longer time fields simply never run out.
pub const LATEST_END_UNIX_MS: i64 = 253_402_300_799_999;

/// How the 63 usable bits of an ID are split, and where and how fast time counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    ) -> Result<Layout, SnowflakeError> {
        let layout = Layout::from_parts(epoch_unix_ms, unit_ms, node_bits, seq_bits)?;
        if epoch_unix_ms > now_unix_ms {
            return Err(SnowflakeError::InvalidLayout {
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
    ) -> Result<Layout, SnowflakeError> {
        let invalid = |reason: String| Err(SnowflakeError::InvalidLayout { reason });
        if unit_ms < 1 {
            return invalid(format!(
                "the time unit is {unit_ms} ms; it must be at least 1 ms"
            ));
        }
        if node_bits > 31 || !(1..=31).contains(&seq_bits) {
            return invalid(format!(
                "{node_bits} node bits and {seq_bits} sequence bits: node bits run from 0 to 31, \
                 sequence bits from 1 to 31"
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

    pub const fn max_time(&self) -> u64 {
        mask(self.time_bits)
    }

    pub const fn max_node(&self) -> u32 {
        mask(self.node_bits) as u32
    }

    pub const fn max_seq(&self) -> u32 {
        mask(self.seq_bits) as u32
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
    pub const fn tick_at(&self, unix_ms: i64) -> i64 {
        (unix_ms - self.epoch_unix_ms).div_euclid(self.unit_ms)
    }

    /// The first tick that begins at or after a Unix time (ms).
    pub const fn tick_from(&self, unix_ms: i64) -> i64 {
        let since = unix_ms - self.epoch_unix_ms;
        since.div_euclid(self.unit_ms) + (since.rem_euclid(self.unit_ms) != 0) as i64
    }

    /// The smallest ID any node can issue in the tick of `unix_ms` (node 0, sequence 0):
    /// `id >= first_id_at(t)` selects the IDs made from `t`'s tick on, `id < first_id_at(t)`
    /// those made before it. Instants outside the time field are refused.
    pub fn first_id_at(&self, unix_ms: i64) -> Result<i64, SnowflakeError> {
        let time = self.time_field_at(unix_ms)?;
        self.compose(Parts {
            time,
            node: 0,
            seq: 0,
        })
    }

    /// The largest ID any node can issue in the tick of `unix_ms` (the highest node and
    /// sequence): `id <= last_id_at(t)` selects the IDs made up to and including that tick.
    pub fn last_id_at(&self, unix_ms: i64) -> Result<i64, SnowflakeError> {
        let time = self.time_field_at(unix_ms)?;
        self.compose(Parts {
            time,
            node: self.max_node(),
            seq: self.max_seq(),
        })
    }

    /// The time-field value of a Unix time (ms), or an error naming the instant when the field
    /// cannot hold it.
    fn time_field_at(&self, unix_ms: i64) -> Result<u64, SnowflakeError> {
        if unix_ms < self.epoch_unix_ms {
            return Err(SnowflakeError::TimestampBeforeEpoch {
                unix_ms,
                layout: *self,
            });
        }
        let tick = self.tick_at(unix_ms) as u64;
        if tick > self.end_tick() {
            return Err(SnowflakeError::TimestampAfterEnd {
                unix_ms,
                layout: *self,
            });
        }
        Ok(tick)
    }

    /// Packs the fields into a positive `i64`, refusing any field that does not fit.
    pub fn compose(&self, parts: Parts) -> Result<i64, SnowflakeError> {
        if parts.time > self.end_tick() {
            return Err(SnowflakeError::TimeExhausted {
                end_unix_ms: self.end_unix_ms(),
            });
        }
        if parts.node > self.max_node() {
            return Err(SnowflakeError::NodeOutOfRange {
                node: i64::from(parts.node),
                max: self.max_node(),
            });
        }
        if parts.seq > self.max_seq() {
            return Err(SnowflakeError::SequenceOutOfRange {
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
    pub fn decompose(&self, id: i64) -> Result<Parts, SnowflakeError> {
        if id < 0 {
            return Err(SnowflakeError::NegativeId(id));
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
    pub fn id_unix_ms(&self, id: i64) -> Result<i64, SnowflakeError> {
        let time = self.decompose(id)?.time;
        if time > self.end_tick() {
            return Err(SnowflakeError::IdBeyondTimeField { id, layout: *self });
        }
        Ok(self.unix_ms(time))
    }
}

/// Parses an epoch setting: `YYYY-MM-DD`, optionally followed by ` HH:MM[:SS[.fff]]` (or with
/// `T`), optionally followed by a UTC marker (`Z`, `UTC`, `+00`, `+00:00`). Times are UTC.
pub fn parse_epoch(text: &str) -> Result<i64, String> {
    let bad = || {
        format!(
            "\"{text}\" is not a UTC timestamp like \"2024-01-01 00:00:00+00\" or \"2024-01-01\""
        )
    };
    let mut rest = text.trim();
    for marker in ["+00:00", "+00", "UTC", "Z"] {
        if let Some(stripped) = rest.strip_suffix(marker) {
            rest = stripped.trim_end();
            break;
        }
    }
    let (date, time) = match rest.split_once([' ', 'T']) {
        Some((date, time)) => (date, Some(time.trim())),
        None => (rest, None),
    };
    let number = |s: &str, len: std::ops::RangeInclusive<usize>| -> Result<i64, String> {
        if len.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let mut d = date.split('-');
    let (Some(y), Some(m), Some(dd), None) = (d.next(), d.next(), d.next(), d.next()) else {
        return Err(bad());
    };
    let (year, month, day) = (number(y, 4..=4)?, number(m, 2..=2)?, number(dd, 2..=2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad());
    }
    let mut ms_of_day = 0;
    if let Some(time) = time {
        let (hms, fraction) = match time.split_once('.') {
            Some((hms, fraction)) => (hms, Some(fraction)),
            None => (time, None),
        };
        let mut t = hms.split(':');
        let (Some(h), Some(mi), s, None) = (t.next(), t.next(), t.next(), t.next()) else {
            return Err(bad());
        };
        let (h, mi, s) = (
            number(h, 2..=2)?,
            number(mi, 2..=2)?,
            s.map_or(Ok(0), |s| number(s, 2..=2))?,
        );
        let fraction_ms = match fraction {
            Some(f) => number(f, 1..=3)? * 10i64.pow(3 - f.len() as u32),
            None => 0,
        };
        if h > 23 || mi > 59 || s > 59 {
            return Err(bad());
        }
        ms_of_day = ((h * 60 + mi) * 60 + s) * 1000 + fraction_ms;
    }
    Ok(days_from_civil(year, month, day) * 86_400_000 + ms_of_day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats Unix milliseconds as `YYYY-MM-DD HH:MM:SS.mmm UTC`, for error messages.
pub fn format_unix_ms(unix_ms: i64) -> String {
    let days = unix_ms.div_euclid(86_400_000);
    let ms_of_day = unix_ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03} UTC",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

/// Formats Unix milliseconds as RFC 3339 in UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`, for JSON.
pub fn format_rfc3339(unix_ms: i64) -> String {
    let text = format_unix_ms(unix_ms);
    format!("{}T{}Z", &text[..10], &text[11..23])
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const L: Layout = DEFAULT_LAYOUT;

    #[test]
    fn default_layout_is_twitters_and_fills_63_bits() {
        assert_eq!((L.time_bits, L.node_bits, L.seq_bits), (41, 10, 12));
        assert_eq!(L.time_bits + L.node_bits + L.seq_bits, 63);
        assert_eq!(L.max_node(), 1023);
        assert_eq!(L.max_seq(), 4095);
    }

    #[test]
    fn field_positions_match_the_documented_decoding() {
        let id = L
            .compose(Parts {
                time: 5,
                node: 7,
                seq: 9,
            })
            .unwrap();
        assert_eq!(id >> 22, 5);
        assert_eq!((id >> 12) & 1023, 7);
        assert_eq!(id & 4095, 9);
    }

    #[test]
    fn largest_id_is_i64_max_and_positive() {
        let id = L
            .compose(Parts {
                time: L.max_time(),
                node: L.max_node(),
                seq: L.max_seq(),
            })
            .unwrap();
        assert_eq!(id, i64::MAX);
    }

    #[test]
    fn time_past_the_field_is_refused_not_wrapped() {
        let err = L
            .compose(Parts {
                time: L.max_time() + 1,
                node: 0,
                seq: 0,
            })
            .unwrap_err();
        assert_eq!(
            err,
            SnowflakeError::TimeExhausted {
                end_unix_ms: L.end_unix_ms()
            }
        );
    }

    #[test]
    fn node_out_of_range_is_refused() {
        let err = L
            .compose(Parts {
                time: 0,
                node: 1024,
                seq: 0,
            })
            .unwrap_err();
        assert_eq!(
            err,
            SnowflakeError::NodeOutOfRange {
                node: 1024,
                max: 1023
            }
        );
    }

    #[test]
    fn sequence_out_of_range_is_refused() {
        let err = L
            .compose(Parts {
                time: 0,
                node: 0,
                seq: 4096,
            })
            .unwrap_err();
        assert_eq!(
            err,
            SnowflakeError::SequenceOutOfRange {
                seq: 4096,
                max: 4095
            }
        );
    }

    #[test]
    fn negative_ids_do_not_decode() {
        assert_eq!(L.decompose(-1), Err(SnowflakeError::NegativeId(-1)));
        assert_eq!(
            L.decompose(i64::MIN),
            Err(SnowflakeError::NegativeId(i64::MIN))
        );
    }

    #[test]
    fn end_of_the_time_field_is_in_september_2093() {
        assert_eq!(
            format_unix_ms(L.end_unix_ms()),
            "2093-09-06 15:47:35.551 UTC"
        );
    }

    #[test]
    fn formats_known_dates() {
        assert_eq!(format_unix_ms(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(
            format_unix_ms(DEFAULT_EPOCH_UNIX_MS),
            "2024-01-01 00:00:00.000 UTC"
        );
        assert_eq!(
            format_unix_ms(951_782_400_123),
            "2000-02-29 00:00:00.123 UTC"
        );
        assert_eq!(format_unix_ms(-1), "1969-12-31 23:59:59.999 UTC");
    }

    #[test]
    fn bounds_at_the_epoch_and_at_the_end_of_the_time_field() {
        assert_eq!(L.first_id_at(DEFAULT_EPOCH_UNIX_MS), Ok(0));
        assert_eq!(L.last_id_at(DEFAULT_EPOCH_UNIX_MS), Ok((1 << 22) - 1));
        assert_eq!(
            L.first_id_at(L.end_unix_ms()),
            Ok(i64::MAX - ((1 << 22) - 1))
        );
        assert_eq!(L.last_id_at(L.end_unix_ms()), Ok(i64::MAX));
    }

    #[test]
    fn bounds_outside_the_time_field_are_refused() {
        let before = DEFAULT_EPOCH_UNIX_MS - 1;
        let after = L.end_unix_ms() + 1;
        for bound in [Layout::first_id_at, Layout::last_id_at] {
            assert_eq!(
                bound(&L, before),
                Err(SnowflakeError::TimestampBeforeEpoch {
                    unix_ms: before,
                    layout: L
                })
            );
            assert_eq!(
                bound(&L, after),
                Err(SnowflakeError::TimestampAfterEnd {
                    unix_ms: after,
                    layout: L
                })
            );
            assert_eq!(
                bound(&L, i64::MIN),
                Err(SnowflakeError::TimestampBeforeEpoch {
                    unix_ms: i64::MIN,
                    layout: L
                })
            );
            assert_eq!(
                bound(&L, i64::MAX),
                Err(SnowflakeError::TimestampAfterEnd {
                    unix_ms: i64::MAX,
                    layout: L
                })
            );
        }
    }

    #[test]
    fn a_utc_day_of_ids_is_a_fixed_width_range() {
        // The epoch is a UTC midnight, so day boundaries are multiples of one day's width.
        let day_ms = 86_400_000;
        let width = day_ms << 22;
        for day in [0, 1, 365, 1000] {
            let start = DEFAULT_EPOCH_UNIX_MS + day * day_ms;
            assert_eq!(L.first_id_at(start), Ok(day * width));
            assert_eq!(L.last_id_at(start + day_ms - 1), Ok((day + 1) * width - 1));
        }
    }

    /// The presets the README lists.
    fn presets() -> Vec<(&'static str, Layout)> {
        let layout = |unit, node, seq| Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, unit, node, seq);
        vec![
            ("twitter", DEFAULT_LAYOUT),
            ("seconds, 22 node bits", layout(1000, 22, 9).unwrap()),
            ("bursty, 16 sequence bits", layout(1, 8, 16).unwrap()),
            ("sonyflake, 10 ms", layout(10, 16, 8).unwrap()),
        ]
    }

    #[test]
    fn presets_have_the_documented_shapes_and_ends() {
        let ends: Vec<(u32, String)> = presets()
            .iter()
            .map(|(_, l)| (l.time_bits, format_unix_ms(l.end_unix_ms())))
            .collect();
        assert_eq!(
            ends,
            vec![
                (41, "2093-09-06 15:47:35.551 UTC".to_string()),
                (32, "2160-02-07 06:28:15.000 UTC".to_string()),
                (39, "2041-06-02 21:56:53.887 UTC".to_string()),
                (39, "2198-03-18 03:28:58.870 UTC".to_string()),
            ]
        );
    }

    #[test]
    fn layouts_that_cannot_work_are_refused_with_the_reason() {
        let now = DEFAULT_EPOCH_UNIX_MS + 86_400_000;
        let reason = |r: Result<Layout, SnowflakeError>| match r {
            Err(SnowflakeError::InvalidLayout { reason }) => reason,
            other => panic!("{other:?}"),
        };
        let e = DEFAULT_EPOCH_UNIX_MS;
        assert_eq!(
            reason(Layout::new(e, 1, 40, 30, now)),
            "40 node bits and 30 sequence bits: node bits run from 0 to 31, sequence bits from 1 to 31"
        );

        assert_eq!(
            reason(Layout::new(e, 0, 10, 12, now)),
            "the time unit is 0 ms; it must be at least 1 ms"
        );
        assert_eq!(
            reason(Layout::new(now + 1, 1, 10, 12, now)),
            "the epoch 2024-01-02 00:00:00.001 UTC is in the future"
        );
        // A time field that has run out starts (nextval then says it is exhausted).
        let short = Layout::new(e, 1, 21, 22, now).unwrap();
        assert_eq!(short.time_bits, 20);
        assert_eq!(
            format_unix_ms(short.end_unix_ms()),
            "2024-01-01 00:17:28.575 UTC"
        );
        assert_eq!(
            reason(Layout::new(-1, 1, 10, 12, now)),
            "the epoch 1969-12-31 23:59:59.999 UTC is not between 1970-01-01 and 9999-12-31"
        );
        assert_eq!(Layout::new(e, 1, 10, 12, now), Ok(DEFAULT_LAYOUT));
    }

    #[test]
    fn long_time_fields_end_in_year_9999() {
        let days = Layout::from_parts(0, 86_400_000, 0, 1).unwrap();
        assert_eq!(days.time_bits, 62);
        assert_eq!(
            format_unix_ms(days.end_unix_ms()),
            "9999-12-31 00:00:00.000 UTC"
        );
        let beyond = days.pack(Parts {
            time: days.end_tick() + 1,
            node: 0,
            seq: 0,
        });
        assert_eq!(
            days.id_unix_ms(beyond),
            Err(SnowflakeError::IdBeyondTimeField {
                id: beyond,
                layout: days
            })
        );
    }

    #[test]
    fn epochs_parse_in_the_documented_forms() {
        for (text, expected) in [
            ("2024-01-01", DEFAULT_EPOCH_UNIX_MS),
            ("2024-01-01 00:00:00+00", DEFAULT_EPOCH_UNIX_MS),
            ("2024-01-01T00:00Z", DEFAULT_EPOCH_UNIX_MS),
            (" 2024-01-01 00:00:00 UTC ", DEFAULT_EPOCH_UNIX_MS),
            ("2024-01-01 00:00:00.5+00:00", DEFAULT_EPOCH_UNIX_MS + 500),
            ("2010-11-04 01:42:54.657", 1_288_834_974_657),
            ("2000-02-29", 951_782_400_000),
            ("1970-01-01", 0),
        ] {
            assert_eq!(parse_epoch(text), Ok(expected), "{text}");
        }
        for text in [
            "",
            "2024",
            "2024-13-01",
            "2023-02-29",
            "2024-01-01 24:00",
            "2024-01-01 00:00:00+01",
            "2024-01-01 00:00:00.1234",
            "yesterday",
        ] {
            assert_eq!(
                parse_epoch(text),
                Err(format!(
                    "\"{text}\" is not a UTC timestamp like \"2024-01-01 00:00:00+00\" or \"2024-01-01\""
                )),
                "{text}"
            );
        }
    }

    #[test]
    fn rfc3339_for_json() {
        assert_eq!(
            format_rfc3339(DEFAULT_EPOCH_UNIX_MS + 1),
            "2024-01-01T00:00:00.001Z"
        );
    }

    proptest! {
        #[test]
        fn decompose_inverts_compose(
            time in 0..=L.max_time(),
            node in 0..=L.max_node(),
            seq in 0..=L.max_seq(),
        ) {
            let parts = Parts { time, node, seq };
            let id = L.compose(parts).unwrap();
            prop_assert!(id >= 0);
            prop_assert_eq!(L.decompose(id).unwrap(), parts);
        }

        #[test]
        fn every_id_of_a_millisecond_lies_within_its_bounds(
            time in 0..=L.max_time(),
            node in 0..=L.max_node(),
            seq in 0..=L.max_seq(),
        ) {
            let unix_ms = L.unix_ms(time);
            let id = L.compose(Parts { time, node, seq }).unwrap();
            prop_assert!(L.first_id_at(unix_ms).unwrap() <= id);
            prop_assert!(id <= L.last_id_at(unix_ms).unwrap());
            if time < L.max_time() {
                prop_assert!(id < L.first_id_at(unix_ms + 1).unwrap());
            }
        }

        #[test]
        fn any_valid_layout_round_trips(
            node_bits in 0u32..=20, seq_bits in 1u32..=20, unit in 1i64..=1000, id in 0..=i64::MAX
        ) {
            let layout = Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, unit, node_bits, seq_bits).unwrap();
            prop_assert_eq!(layout.time_bits + node_bits + seq_bits, 63);
            let parts = layout.decompose(id).unwrap();
            prop_assert_eq!(layout.pack(parts), id);
        }

        #[test]
        fn compose_inverts_decompose(id in 0..=i64::MAX) {
            prop_assert_eq!(L.compose(L.decompose(id).unwrap()).unwrap(), id);
        }

        #[test]
        fn ids_order_by_time_first(a in 0..L.max_time(), node_a in 0..=L.max_node(),
                                   node_b in 0..=L.max_node(), seq_a in 0..=L.max_seq(),
                                   seq_b in 0..=L.max_seq()) {
            let earlier = L.compose(Parts { time: a, node: node_a, seq: seq_a }).unwrap();
            let later = L.compose(Parts { time: a + 1, node: node_b, seq: seq_b }).unwrap();
            prop_assert!(earlier < later);
        }
    }
}
