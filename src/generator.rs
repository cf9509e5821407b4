//! The next-id state machine: a logical clock that never runs backwards.
//!
//! Pure Rust: the wall clock is passed in as a value, so tests can move time at will. The
//! shared-memory layer (`shmem.rs`) keeps one [`Generator`] per server and calls
//! [`Generator::next`] under its lock.
//!
//! Policy, in order:
//! 1. the wall clock is ahead of the last issued millisecond: issue from the wall clock, sequence 0;
//! 2. otherwise (same millisecond, or the wall clock stepped back): stay on the last issued
//!    millisecond and take the next sequence number;
//! 3. that millisecond's sequence is used up: borrow the next millisecond, sequence 0.
//!
//! So an ID is always greater than the one before it, the generator never errors or waits
//! because of the clock, and when the clock steps back the logical clock simply runs ahead of it
//! until the wall clock catches up. The only error is the time field running out.

use crate::error::SnowflakeError;
use crate::layout::{Layout, Parts};

/// What the generator has done since the server started. Counters only: nothing here decides
/// an ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Stats {
    /// IDs issued.
    pub issued: u64,
    /// Wall-clock readings that were earlier than the reading before them.
    pub clock_regressions: u64,
    /// Milliseconds whose sequence ran out, so that the next millisecond was borrowed.
    pub exhausted_ms: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Generator {
    /// The last issued ID's time and sequence, or `None` before the first ID.
    last: Option<(u64, u32)>,
    /// The wall clock (Unix ms) at the previous call, to tell a clock regression from a lead
    /// built up by borrowing milliseconds.
    last_wall_unix_ms: Option<i64>,
    stats: Stats,
}

impl Generator {
    pub const fn new() -> Self {
        Self {
            last: None,
            last_wall_unix_ms: None,
            stats: Stats {
                issued: 0,
                clock_regressions: 0,
                exhausted_ms: 0,
            },
        }
    }

    /// The next ID for `node`, given the wall clock `now_unix_ms`.
    ///
    /// On error the generator's position is unchanged, so a failed call never skips or reuses
    /// an ID.
    pub fn next(
        &mut self,
        layout: &Layout,
        node: u32,
        now_unix_ms: i64,
    ) -> Result<i64, SnowflakeError> {
        if self
            .last_wall_unix_ms
            .is_some_and(|previous| now_unix_ms < previous)
        {
            self.stats.clock_regressions += 1;
        }
        self.last_wall_unix_ms = Some(now_unix_ms);

        let wall = layout.time_since_epoch(now_unix_ms);
        let (time, seq, borrowed) = match (self.last, wall) {
            (None, None) => return Err(SnowflakeError::ClockBeforeEpoch { now_unix_ms }),
            (None, Some(wall)) => (wall, 0, false),
            (Some((last_time, _)), Some(wall)) if wall > last_time => (wall, 0, false),
            (Some((last_time, last_seq)), _) if last_seq < layout.max_seq() => {
                (last_time, last_seq + 1, false)
            }
            (Some((last_time, _)), _) => (last_time + 1, 0, true),
        };

        let id = layout.compose(Parts { time, node, seq })?;
        self.last = Some((time, seq));
        self.stats.issued += 1;
        self.stats.exhausted_ms += u64::from(borrowed);
        Ok(id)
    }

    pub const fn stats(&self) -> Stats {
        self.stats
    }

    /// How far (ms) the last issued millisecond is ahead of the wall clock `now_unix_ms`;
    /// 0 when it is not ahead or nothing was issued yet.
    pub fn lead_ms(&self, layout: &Layout, now_unix_ms: i64) -> u64 {
        match self.last {
            Some((time, _)) => layout.unix_ms(time).saturating_sub(now_unix_ms).max(0) as u64,
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{DEFAULT_EPOCH_UNIX_MS, DEFAULT_LAYOUT};
    use proptest::prelude::*;

    const L: Layout = DEFAULT_LAYOUT;
    const NODE: u32 = 7;
    /// Some ordinary moment well after the epoch.
    const T0: i64 = DEFAULT_EPOCH_UNIX_MS + 1_000_000_000;

    fn parts(id: i64) -> Parts {
        L.decompose(id).unwrap()
    }

    #[test]
    fn first_id_carries_the_clock_node_and_sequence_zero() {
        let mut g = Generator::new();
        let id = g.next(&L, NODE, T0).unwrap();
        assert_eq!(
            parts(id),
            Parts {
                time: (T0 - DEFAULT_EPOCH_UNIX_MS) as u64,
                node: NODE,
                seq: 0
            }
        );
    }

    #[test]
    fn ids_increase_within_a_millisecond_and_across_milliseconds() {
        let mut g = Generator::new();
        let a = g.next(&L, NODE, T0).unwrap();
        let b = g.next(&L, NODE, T0).unwrap();
        let c = g.next(&L, NODE, T0 + 1).unwrap();
        assert!(a < b && b < c);
        assert_eq!(parts(b).seq, 1);
        assert_eq!(parts(c).seq, 0);
        assert_eq!(parts(c).time, parts(a).time + 1);
    }

    #[test]
    fn the_4097th_id_in_one_millisecond_borrows_the_next_millisecond() {
        let mut g = Generator::new();
        let ids: Vec<i64> = (0..4097).map(|_| g.next(&L, NODE, T0).unwrap()).collect();
        let last = parts(ids[4095]);
        assert_eq!(last.seq, 4095);
        let borrowed = parts(ids[4096]);
        assert_eq!(borrowed.time, last.time + 1);
        assert_eq!(borrowed.seq, 0);
        assert_eq!(g.stats().exhausted_ms, 1);
        assert_eq!(g.lead_ms(&L, T0), 1);
        // When the wall clock reaches the borrowed millisecond, the sequence continues there.
        let next = parts(g.next(&L, NODE, T0 + 1).unwrap());
        assert_eq!((next.time, next.seq), (borrowed.time, 1));
    }

    #[test]
    fn clock_going_back_gives_no_duplicate_no_error_and_no_wait() {
        let mut g = Generator::new();
        let before = g.next(&L, NODE, T0).unwrap();
        let hour = 3_600_000;
        let after: Vec<i64> = (0..10_000)
            .map(|_| g.next(&L, NODE, T0 - hour).unwrap())
            .collect();
        assert!(before < after[0]);
        assert!(after.windows(2).all(|w| w[0] < w[1]));
        // The logical clock stays on the last millisecond (borrowing as sequences run out),
        // not on the wall clock an hour behind.
        assert_eq!(parts(after[0]).time, parts(before).time);
        assert_eq!(g.stats().clock_regressions, 1);
        assert!(g.lead_ms(&L, T0 - hour) >= hour as u64);
        // Once the wall clock passes the logical clock again, IDs follow the wall clock.
        let caught_up = g.next(&L, NODE, T0 + 10).unwrap();
        assert_eq!(parts(caught_up).time, parts(before).time + 10);
        assert_eq!(g.lead_ms(&L, T0 + 10), 0);
    }

    #[test]
    fn borrowing_is_not_counted_as_a_clock_regression() {
        let mut g = Generator::new();
        for _ in 0..3 * 4096 {
            g.next(&L, NODE, T0).unwrap();
        }
        assert_eq!(g.stats().clock_regressions, 0);
        assert_eq!(g.stats().exhausted_ms, 2);
        assert_eq!(g.stats().issued, 3 * 4096);
    }

    #[test]
    fn clock_before_the_epoch_is_an_error_on_a_fresh_generator() {
        let mut g = Generator::new();
        let now = DEFAULT_EPOCH_UNIX_MS - 1;
        assert_eq!(
            g.next(&L, NODE, now),
            Err(SnowflakeError::ClockBeforeEpoch { now_unix_ms: now })
        );
        assert_eq!(g.stats().issued, 0);
    }

    #[test]
    fn clock_before_the_epoch_after_issuing_is_just_a_regression() {
        let mut g = Generator::new();
        let a = g.next(&L, NODE, T0).unwrap();
        let b = g.next(&L, NODE, 0).unwrap();
        assert!(a < b);
    }

    #[test]
    fn time_field_running_out_is_an_error_never_a_wrap_or_negative() {
        let mut g = Generator::new();
        let end = L.end_unix_ms();
        let mut last = 0;
        for _ in 0..=L.max_seq() {
            last = g.next(&L, NODE, end).unwrap();
            assert!(last > 0);
        }
        let before = g;
        assert_eq!(
            g.next(&L, NODE, end),
            Err(SnowflakeError::TimeExhausted { end_unix_ms: end })
        );
        assert_eq!(
            g.next(&L, NODE, end + 1),
            Err(SnowflakeError::TimeExhausted { end_unix_ms: end })
        );
        // A refused call does not move the generator.
        assert_eq!(g.last, before.last);
        assert_eq!(g.stats().issued, before.stats().issued);
        assert_eq!(parts(last).time, L.max_time());
    }

    #[test]
    fn node_out_of_range_is_refused() {
        let mut g = Generator::new();
        assert_eq!(
            g.next(&L, 1024, T0),
            Err(SnowflakeError::NodeOutOfRange {
                node: 1024,
                max: 1023
            })
        );
        assert_eq!(g.stats().issued, 0);
    }

    proptest! {
        #[test]
        fn any_clock_readings_give_strictly_increasing_ids(
            steps in proptest::collection::vec((-5_000i64..5_000, 1usize..6_000), 1..40)
        ) {
            let mut g = Generator::new();
            let mut now = T0;
            let mut previous = -1i64;
            for (jump, calls) in steps {
                now += jump;
                for _ in 0..calls {
                    let id = g.next(&L, NODE, now).unwrap();
                    prop_assert!(id > previous);
                    prop_assert_eq!(parts(id).node, NODE);
                    previous = id;
                }
            }
        }

        #[test]
        fn logical_clock_is_never_behind_the_wall_clock(
            readings in proptest::collection::vec(-100_000i64..100_000, 1..500)
        ) {
            let mut g = Generator::new();
            let mut latest_wall = i64::MIN;
            for offset in readings {
                let now = T0 + offset;
                latest_wall = latest_wall.max(now);
                let id = g.next(&L, NODE, now).unwrap();
                prop_assert!(L.unix_ms(parts(id).time) >= now);
                prop_assert!(L.unix_ms(parts(id).time) >= latest_wall);
            }
        }
    }
}
