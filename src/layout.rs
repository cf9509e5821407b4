//! The bit layout of a Snowflake ID and the arithmetic that packs and unpacks it.
//!
//! Pure Rust: no pgrx, no clock, no shared state. Everything here is unit- and property-tested
//! by `cargo test` in milliseconds.
//!
//! ```text
//!   bit 63   | 62 ............ 22 | 21 ...... 12 | 11 ...... 0
//!   sign = 0 | time: 41 bits (ms) | node: 10 bits | seq: 12 bits
//! ```

use crate::error::SnowflakeError;

/// Milliseconds from the Unix epoch to 2024-01-01 00:00:00 UTC, the default Snowflake epoch.
///
/// A recent epoch gives the most years before the time field runs out; every real clock running
/// this extension (first released in 2026) reads later than it.
pub const DEFAULT_EPOCH_UNIX_MS: i64 = 1_704_067_200_000;

/// How the 63 usable bits of an ID are split, and where time starts counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Unix time, in milliseconds, that the time field counts from.
    pub epoch_unix_ms: i64,
    pub time_bits: u32,
    pub node_bits: u32,
    pub seq_bits: u32,
}

/// Twitter's layout, also used by ShardingSphere and pgEdge: 41 bits of ms, 10 of node, 12 of
/// sequence, counted from [`DEFAULT_EPOCH_UNIX_MS`].
pub const DEFAULT_LAYOUT: Layout = Layout {
    epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
    time_bits: 41,
    node_bits: 10,
    seq_bits: 12,
};

/// The three fields of an ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    /// Milliseconds since the layout's epoch.
    pub time: u64,
    pub node: u32,
    pub seq: u32,
}

const fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

impl Layout {
    pub const fn max_time(&self) -> u64 {
        mask(self.time_bits)
    }

    pub const fn max_node(&self) -> u32 {
        mask(self.node_bits) as u32
    }

    pub const fn max_seq(&self) -> u32 {
        mask(self.seq_bits) as u32
    }

    /// Unix time (ms) of the last millisecond the time field can hold.
    pub const fn end_unix_ms(&self) -> i64 {
        self.epoch_unix_ms + self.max_time() as i64
    }

    /// Unix time (ms) of a time-field value.
    pub const fn unix_ms(&self, time: u64) -> i64 {
        self.epoch_unix_ms + time as i64
    }

    /// The time-field value of a Unix time (ms), or `None` before the epoch. Values past the end
    /// of the field are returned as they are: [`Layout::compose`] refuses them.
    pub const fn time_since_epoch(&self, unix_ms: i64) -> Option<u64> {
        if unix_ms < self.epoch_unix_ms {
            None
        } else {
            Some((unix_ms - self.epoch_unix_ms) as u64)
        }
    }

    /// The smallest ID any node can issue in the millisecond of `unix_ms` (node 0, sequence 0):
    /// `id >= first_id_at(t)` selects the IDs made from `t`'s millisecond on, `id < first_id_at(t)`
    /// those made before it. Instants outside the time field are refused.
    pub fn first_id_at(&self, unix_ms: i64) -> Result<i64, SnowflakeError> {
        let time = self.time_field_at(unix_ms)?;
        self.compose(Parts {
            time,
            node: 0,
            seq: 0,
        })
    }

    /// The largest ID any node can issue in the millisecond of `unix_ms` (the highest node and
    /// sequence): `id <= last_id_at(t)` selects the IDs made up to and including that millisecond.
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
        match self.time_since_epoch(unix_ms) {
            None => Err(SnowflakeError::TimestampBeforeEpoch { unix_ms }),
            Some(time) if time > self.max_time() => {
                Err(SnowflakeError::TimestampAfterEnd { unix_ms })
            }
            Some(time) => Ok(time),
        }
    }

    /// Packs the fields into a positive `i64`, refusing any field that does not fit its bits.
    pub fn compose(&self, parts: Parts) -> Result<i64, SnowflakeError> {
        if parts.time > self.max_time() {
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

    /// The fields of the ID at Unix time `unix_ms` (not before the epoch), `node` and `seq`.
    pub const fn parts_at(&self, unix_ms: i64, node: u32, seq: u32) -> Parts {
        Parts {
            time: (unix_ms - self.epoch_unix_ms) as u64,
            node,
            seq,
        }
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
                Err(SnowflakeError::TimestampBeforeEpoch { unix_ms: before })
            );
            assert_eq!(
                bound(&L, after),
                Err(SnowflakeError::TimestampAfterEnd { unix_ms: after })
            );
            assert_eq!(
                bound(&L, i64::MIN),
                Err(SnowflakeError::TimestampBeforeEpoch { unix_ms: i64::MIN })
            );
            assert_eq!(
                bound(&L, i64::MAX),
                Err(SnowflakeError::TimestampAfterEnd { unix_ms: i64::MAX })
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
