//! The next-id state machine: a logical clock that never runs backwards, and a durable
//! reservation that keeps it from running backwards across restarts.
//!
//! Pure Rust: the wall clock is passed in as a value and the durable write as a closure, so tests
//! can move time at will and fail writes on purpose. The shared-memory layer (`shmem.rs`) keeps
//! one [`Generator`] per server and calls [`Generator::allocate`] under its lock.
//!
//! Times are Unix milliseconds. Three clocks are involved:
//! - the *wall clock*: what the server's clock reads; it may step backwards (NTP, VM restore);
//! - the *steady clock*: the wall clock, or, when the wall clock is behind it, the steady clock's
//!   previous reading plus the real time elapsed since (from the monotonic clock), slowed to
//!   9/10 of real time. So it never runs backwards, keeps counting through a backward step of the
//!   wall clock, and the lead it then has over the wall clock shrinks by a tenth of the time that
//!   passes (an hour's lead is gone in ten hours) until it rejoins the wall clock. It never reads
//!   less than the durable floor;
//! - the *logical clock*: the time of the last issued ID; never less than the steady clock.
//!
//! Policy for the next ID:
//! 1. the steady clock is past the last issued millisecond: issue from it, sequence 0;
//! 2. otherwise take the next sequence number in the last issued millisecond;
//! 3. if that millisecond's sequence is used up, borrow the next millisecond — unless the logical
//!    clock would then lead the steady clock by more than `max_borrow_ms`: then the caller is
//!    told to wait (outside the lock) for the steady clock to catch up.
//!
//! So IDs always increase, and a clock stepping back causes neither an error nor a wait: the
//! steady clock simply keeps counting. Only sustained overload (more than 4096 IDs per ms with
//! the default layout) makes callers wait, and only once it has built up `max_borrow_ms`.
//!
//! Durability: before issuing an ID at a time not covered by the last reservation, the generator
//! asks for a new reservation `reserve_ahead_ms` ahead and only issues if it was written. After a
//! restart (or on a promoted standby) the generator resumes with the last reservation as its
//! floor, so every new ID is greater than every ID issued before, whatever the clock says.

use crate::error::SnowflakeError;
use crate::layout::{Layout, Parts};

/// One reading of the server's clocks, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Clocks {
    /// Unix time from the wall clock (CLOCK_REALTIME).
    pub wall: i64,
    /// The monotonic clock (CLOCK_MONOTONIC): any origin, never steps.
    pub monotonic: i64,
}

impl Clocks {
    /// Both clocks reading the same value: for callers that only move time forwards.
    pub const fn at(ms: i64) -> Self {
        Clocks {
            wall: ms,
            monotonic: ms,
        }
    }
}

/// Tunables of the policy, read from the GUCs by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How far the logical clock may lead the steady clock by borrowing before callers wait.
    pub max_borrow_ms: i64,
    /// The first ID of each fresh tick starts at a sequence number cycling through
    /// `0..sequence_spread` (0 and 1: always 0), so that IDs made at low rates spread over their
    /// low bits.
    pub sequence_spread: u32,
    /// How far ahead of the issued time each durable reservation reaches.
    pub reserve_ahead_ms: i64,
}

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
    /// Calls told to wait because borrowing had reached `max_borrow_ms`.
    pub overload_waits: u64,
    /// Durable reservations written.
    pub reservations: u64,
}

/// The outcome of one call of [`Generator::allocate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// IDs. `clock_stepped_back_ms` is set when this call saw the wall clock step back and a
    /// warning about it is due (at most one a minute).
    Run {
        run: Run,
        clock_stepped_back_ms: Option<i64>,
    },
    /// Overloaded: release the lock, wait this long, and call again.
    Wait { ms: i64 },
}

/// `count` consecutive positions of one node's ID space, from tick `time` (since the layout's
/// epoch) and sequence `seq` on: the sequence counts up, and after the layout's last sequence
/// number continues at 0 in the next tick. Every ID of a run is greater than the one before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub time: i64,
    pub seq: u32,
    pub count: u64,
}

impl Run {
    /// A run of no IDs.
    pub const EMPTY: Run = Run {
        time: 0,
        seq: 0,
        count: 0,
    };

    /// The run's IDs, in order.
    pub fn ids(self, layout: Layout, node: u32) -> impl Iterator<Item = i64> {
        let per_tick = u64::from(layout.max_seq()) + 1;
        (0..self.count).map(move |i| {
            let offset = u64::from(self.seq) + i;
            layout.pack(Parts {
                time: self.time as u64 + offset / per_tick,
                node,
                seq: (offset % per_tick) as u32,
            })
        })
    }
}

/// The most IDs one `snowflake_nextval_batch()` call hands out: 100 million, about 25 seconds
/// of one server's full capacity with the default layout.
pub const MAX_BATCH: i32 = 100_000_000;

/// A requested batch size, checked.
pub fn batch_size(n: i32) -> Result<u64, SnowflakeError> {
    if (1..=MAX_BATCH).contains(&n) {
        Ok(n as u64)
    } else {
        Err(SnowflakeError::BatchSizeOutOfRange { n, max: MAX_BATCH })
    }
}

/// While ahead of the wall clock, the steady clock holds back 1 ms of every this many.
const SLEW_DIVISOR: i64 = 10;

/// Minimum time between two clock-regression warnings, on the steady clock.
const WARNING_INTERVAL_MS: i64 = 60_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Generator {
    /// The last issued ID's time and sequence, or `None` before the first ID.
    last: Option<(i64, u32)>,
    /// The previous clock reading and the steady clock at that moment.
    clock: Option<(Clocks, i64)>,
    /// No ID may be issued at a time before this: the reservation of the previous run.
    floor: i64,
    /// IDs at times before this are covered by a durable reservation.
    reserved_until: i64,
    /// Steady-clock time of the last clock-regression warning.
    warned_at: Option<i64>,
    /// Counts fresh ticks, to rotate their first sequence number (`sequence_spread`).
    rotation: u32,
    /// Milliseconds of real time, fewer than `SLEW_DIVISOR`, not yet slowed by the slew.
    slew_remainder: i64,
    stats: Stats,
}

impl Generator {
    /// A generator with no history: a server whose state was never recorded.
    pub const fn new() -> Self {
        Self::resume(i64::MIN)
    }

    /// A generator continuing after the durable reservation `floor` (Unix ms): every ID it issues
    /// is at `floor` or later.
    pub const fn resume(floor: i64) -> Self {
        Self {
            last: None,
            clock: None,
            floor,
            reserved_until: floor,
            warned_at: None,
            rotation: 0,
            slew_remainder: 0,
            stats: Stats {
                issued: 0,
                clock_regressions: 0,
                exhausted_ms: 0,
                overload_waits: 0,
                reservations: 0,
            },
        }
    }

    /// Takes in a reservation made elsewhere (replayed from the WAL, e.g. on a standby); returns
    /// whether it raised the floor.
    pub fn observe_reservation(&mut self, until: i64) -> bool {
        if until <= self.floor {
            return false;
        }
        self.floor = until;
        self.reserved_until = self.reserved_until.max(until);
        true
    }

    /// The next `want` (at least 1) IDs for `node`, given the clocks `now`: as many of them as
    /// fit before the generator would lead the steady clock by more than `max_borrow_ms`, or
    /// before the time field ends. `reserve(until)` must durably record that IDs may be issued up
    /// to (not including) `until`, or fail.
    ///
    /// On error or `Wait` no ID is issued and the position is unchanged, so a failed call never
    /// skips or reuses an ID.
    pub fn allocate(
        &mut self,
        layout: &Layout,
        node: u32,
        now: Clocks,
        limits: &Limits,
        want: u64,
        reserve: impl FnOnce(i64) -> Result<(), SnowflakeError>,
    ) -> Result<Allocation, SnowflakeError> {
        let (steady_ms, stepped_back) = self.read_clock(now);
        // The steady clock's tick; after a restart, no earlier than the first tick wholly past
        // the previous run's reservation.
        let mut steady = layout.tick_at(steady_ms);
        if self.floor > i64::MIN {
            steady = steady.max(layout.tick_from(self.floor));
        }
        let per_tick = u64::from(layout.max_seq()) + 1;
        let spread = u64::from(limits.sequence_spread).clamp(1, per_tick);
        let fresh_seq = (u64::from(self.rotation) % spread) as u32;
        let (time, seq, borrowed) = match self.last {
            Some((last_time, _)) if steady > last_time => (steady, fresh_seq, false),
            None => (steady, fresh_seq, false),
            Some((last_time, last_seq)) if last_seq < layout.max_seq() => {
                (last_time, last_seq + 1, false)
            }
            Some((last_time, _)) => (last_time + 1, 0, true),
        };
        let fresh = !borrowed && self.last.is_none_or(|(last_time, _)| time > last_time);
        // The last tick this call may use: borrowing stops at max_borrow_ms ahead of the steady
        // clock, but a tick already in use is never refused.
        let mut limit = steady.saturating_add(limits.max_borrow_ms / layout.unit_ms);
        if !borrowed {
            limit = limit.max(time);
        }
        if time > limit {
            self.stats.overload_waits += 1;
            return Ok(Allocation::Wait {
                ms: (time - limit) * layout.unit_ms,
            });
        }
        if time < 0 {
            return Err(SnowflakeError::ClockBeforeEpoch {
                now_unix_ms: now.wall,
            });
        }
        // Checks the node, and that the first tick fits the time field.
        layout.compose(Parts {
            time: time as u64,
            node,
            seq,
        })?;

        let limit = limit.min(layout.end_tick() as i64);
        let room = (limit - time) as u64 * per_tick + (per_tick - u64::from(seq));
        let count = want.clamp(1, room);
        let end = u64::from(seq) + count - 1;
        let (end_time, end_seq) = (time + (end / per_tick) as i64, (end % per_tick) as u32);

        if layout.unix_ms(end_time as u64) >= self.reserved_until {
            let ahead = (limits.reserve_ahead_ms.max(1) + layout.unit_ms - 1) / layout.unit_ms;
            let until_tick = (end_time + ahead).min(layout.end_tick() as i64 + 1);
            let until = layout.epoch_unix_ms + until_tick * layout.unit_ms;
            reserve(until)?;
            self.reserved_until = until;
            self.stats.reservations += 1;
        }

        if fresh {
            self.rotation = self.rotation.wrapping_add(1);
        }
        self.last = Some((end_time, end_seq));
        self.stats.issued += count;
        self.stats.exhausted_ms += (end_time - time) as u64 + u64::from(borrowed);
        let warn = stepped_back.filter(|_| {
            let due = self
                .warned_at
                .is_none_or(|at| steady_ms - at >= WARNING_INTERVAL_MS);
            if due {
                self.warned_at = Some(steady_ms);
            }
            due
        });
        Ok(Allocation::Run {
            run: Run { time, seq, count },
            clock_stepped_back_ms: warn,
        })
    }

    /// Advances the steady clock to the reading `now`; returns the steady clock and, if the wall
    /// clock stepped back since the previous reading, by how much.
    fn read_clock(&mut self, now: Clocks) -> (i64, Option<i64>) {
        let (steady, stepped_back) = match self.clock {
            None => (now.wall, None),
            Some((before, steady)) => {
                // A monotonic clock that went backwards (a faked one) counts as standing still.
                let elapsed = (now.monotonic - before.monotonic).max(0);
                let stepped_back = (now.wall < before.wall).then(|| before.wall - now.wall);
                if stepped_back.is_some() {
                    self.stats.clock_regressions += 1;
                }
                let advance = if steady + elapsed > now.wall {
                    let slewed = self.slew_remainder + elapsed;
                    self.slew_remainder = slewed % SLEW_DIVISOR;
                    elapsed - slewed / SLEW_DIVISOR
                } else {
                    self.slew_remainder = 0;
                    elapsed
                };
                (now.wall.max(steady + advance), stepped_back)
            }
        };
        let steady = steady.max(self.floor);
        self.clock = Some((now, steady));
        (steady, stepped_back)
    }

    pub const fn stats(&self) -> Stats {
        self.stats
    }

    /// Time (Unix ms) at which the last issued ID's tick begins.
    pub fn last_issued(&self, layout: &Layout) -> Option<i64> {
        self.last.map(|(time, _)| layout.unix_ms(time as u64))
    }

    /// IDs may be issued up to (not including) this time (Unix ms) under the durable reservation.
    pub const fn reserved_until(&self) -> i64 {
        self.reserved_until
    }

    /// How far (ms) the logical clock leads the wall clock `now`; 0 when it does not.
    pub fn lead_ms(&self, layout: &Layout, now: i64) -> i64 {
        self.last_issued(layout)
            .map_or(0, |time| (time - now).max(0))
    }

    /// How far (ms) the logical clock leads the steady clock through borrowing under overload.
    pub fn borrowed_ms(&self, layout: &Layout) -> i64 {
        match (self.last_issued(layout), self.clock) {
            (Some(time), Some((_, steady))) => (time - steady).max(0),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{DEFAULT_EPOCH_UNIX_MS, DEFAULT_LAYOUT};
    use proptest::prelude::*;

    /// One ID at a time, as `snowflake_nextval()` asks for them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Next {
        Id {
            id: i64,
            clock_stepped_back_ms: Option<i64>,
        },
        Wait {
            ms: i64,
        },
    }

    fn next(
        g: &mut Generator,
        layout: &Layout,
        node: u32,
        now: Clocks,
        limits: &Limits,
        reserve: impl FnOnce(i64) -> Result<(), SnowflakeError>,
    ) -> Result<Next, SnowflakeError> {
        Ok(match g.allocate(layout, node, now, limits, 1, reserve)? {
            Allocation::Run {
                run,
                clock_stepped_back_ms,
            } => Next::Id {
                id: run.ids(*layout, node).next().unwrap(),
                clock_stepped_back_ms,
            },
            Allocation::Wait { ms } => Next::Wait { ms },
        })
    }

    const L: Layout = DEFAULT_LAYOUT;
    const NODE: u32 = 7;
    /// Some ordinary moment well after the epoch.
    const T0: i64 = DEFAULT_EPOCH_UNIX_MS + 1_000_000_000;
    const LIMITS: Limits = Limits {
        max_borrow_ms: 1_000,
        reserve_ahead_ms: 1_000,
        sequence_spread: 0,
    };
    const HOUR: i64 = 3_600_000;

    fn parts(id: i64) -> Parts {
        L.decompose(id).unwrap()
    }

    fn strictly_increasing(ids: &[i64]) -> bool {
        ids.windows(2).all(|w| w[0] < w[1])
    }

    fn unix_ms(id: i64) -> i64 {
        L.unix_ms(parts(id).time)
    }

    /// Reservations accepted without being recorded anywhere.
    fn accept(_: i64) -> Result<(), SnowflakeError> {
        Ok(())
    }

    /// Wall and monotonic clock reading the same: time only moves forwards.
    impl From<i64> for Clocks {
        fn from(ms: i64) -> Self {
            Clocks::at(ms)
        }
    }

    /// Calls `next` once; panics unless it gives an ID.
    fn id(g: &mut Generator, now: impl Into<Clocks>) -> i64 {
        match next(g, &L, NODE, now.into(), &LIMITS, accept).unwrap() {
            Next::Id { id, .. } => id,
            wait => panic!("unexpected {wait:?}"),
        }
    }

    #[test]
    fn first_id_carries_the_clock_node_and_sequence_zero() {
        let mut g = Generator::new();
        let id = id(&mut g, T0);
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
        let a = id(&mut g, T0);
        let b = id(&mut g, T0);
        let c = id(&mut g, T0 + 1);
        assert!(a < b && b < c);
        assert_eq!(parts(b).seq, 1);
        assert_eq!(parts(c).seq, 0);
        assert_eq!(parts(c).time, parts(a).time + 1);
    }

    #[test]
    fn the_4097th_id_in_one_millisecond_borrows_the_next_millisecond() {
        let mut g = Generator::new();
        let ids: Vec<i64> = (0..4097).map(|_| id(&mut g, T0)).collect();
        let last = parts(ids[4095]);
        assert_eq!(last.seq, 4095);
        let borrowed = parts(ids[4096]);
        assert_eq!(borrowed.time, last.time + 1);
        assert_eq!(borrowed.seq, 0);
        assert_eq!(g.stats().exhausted_ms, 1);
        assert_eq!(g.lead_ms(&L, T0), 1);
        assert_eq!(g.borrowed_ms(&L), 1);
        // When the wall clock reaches the borrowed millisecond, the sequence continues there.
        let next = parts(id(&mut g, T0 + 1));
        assert_eq!((next.time, next.seq), (borrowed.time, 1));
    }

    #[test]
    fn clock_going_back_gives_no_duplicate_no_error_and_no_wait() {
        let mut g = Generator::new();
        let before = id(&mut g, T0);
        // An hour back, then the clock runs on for 10 s at 20,000 IDs per second.
        let mut after = vec![];
        for ms in 0..10_000 {
            for _ in 0..20 {
                let now = Clocks {
                    wall: T0 - HOUR + ms,
                    monotonic: T0 + ms,
                };
                after.push(id(&mut g, now));
            }
        }
        assert!(before < after[0]);
        assert!(after.windows(2).all(|w| w[0] < w[1]));
        // The IDs keep counting from before the step, at 9/10 of real time, not the wall clock.
        assert_eq!(unix_ms(after[0]), T0);
        assert_eq!(unix_ms(*after.last().unwrap()), T0 + 9_000);
        assert_eq!(g.stats().clock_regressions, 1);
        assert_eq!(g.stats().overload_waits, 0);
        assert_eq!(g.lead_ms(&L, T0 - HOUR + 9_999), HOUR - 999);
        // When the wall clock is put right (a step forward), IDs follow it again, with no lead.
        let put_right = Clocks {
            wall: T0 + 10_000,
            monotonic: T0 + 10_000,
        };
        assert_eq!(unix_ms(id(&mut g, put_right)), T0 + 10_000);
        assert_eq!(g.lead_ms(&L, T0 + 10_000), 0);
    }

    #[test]
    fn a_lead_from_a_backward_step_shrinks_to_nothing_in_ten_times_its_length() {
        let mut g = Generator::new();
        id(&mut g, T0);
        // The wall clock steps back 1 s and then runs normally, one ID a millisecond.
        let mut leads = vec![];
        for ms in 1..=10_020 {
            let now = Clocks {
                wall: T0 - 1_000 + ms,
                monotonic: T0 + ms,
            };
            id(&mut g, now);
            if ms % 2_500 == 0 || ms == 10_020 {
                leads.push(g.lead_ms(&L, now.wall));
            }
        }
        // A tenth of the time passing comes off the lead: 1 s is gone after 10 s.
        assert_eq!(leads, vec![750, 500, 250, 0, 0]);
        // Rejoined: IDs follow the wall clock again.
        let now = Clocks {
            wall: T0 + 9_100,
            monotonic: T0 + 10_100,
        };
        assert_eq!(unix_ms(id(&mut g, now)), T0 + 9_100);
    }

    #[test]
    fn after_a_restart_the_reservations_lead_shrinks_too() {
        let mut g = Generator::resume(T0 + 1_000);
        for ms in 0..=10_020 {
            id(&mut g, T0 + ms);
        }
        assert_eq!(g.lead_ms(&L, T0 + 10_020), 0);
    }

    #[test]
    fn a_clock_regression_asks_for_a_warning_at_most_once_a_minute() {
        let mut g = Generator::new();
        let mut warnings = vec![];
        let mut now = Clocks::at(T0);
        for step in 0..300 {
            // Every second the clock runs 1 s forward, then the wall clock steps back 10 ms.
            if step % 2 == 0 {
                now.wall += 1_000;
                now.monotonic += 1_000;
            } else {
                now.wall -= 10;
            }
            if let Next::Id {
                clock_stepped_back_ms: Some(ms),
                ..
            } = next(&mut g, &L, NODE, now, &LIMITS, accept).unwrap()
            {
                warnings.push(ms);
            }
        }
        assert_eq!(g.stats().clock_regressions, 150);
        // 150 s of steady time: one warning at the first step back, then one per minute.
        assert_eq!(warnings, vec![10, 10, 10]);
    }

    #[test]
    fn overload_borrows_up_to_the_limit_then_asks_to_wait() {
        let limits = Limits {
            max_borrow_ms: 2,
            reserve_ahead_ms: 1_000,
            sequence_spread: 0,
        };
        let mut g = Generator::new();
        let mut ids = 0;
        let wait = loop {
            match next(&mut g, &L, NODE, Clocks::from(T0), &limits, accept).unwrap() {
                Next::Id { .. } => ids += 1,
                Next::Wait { ms } => break ms,
            }
        };
        // Millisecond T0 plus two borrowed ones, then wait 1 ms for the clock.
        assert_eq!(ids, 3 * 4096);
        assert_eq!(wait, 1);
        assert_eq!(g.borrowed_ms(&L), 2);
        assert_eq!(g.stats().overload_waits, 1);
        // A millisecond later there is room again.
        assert!(matches!(
            next(&mut g, &L, NODE, Clocks::from(T0 + 1), &limits, accept).unwrap(),
            Next::Id { .. }
        ));
    }

    #[test]
    fn without_borrowing_a_full_millisecond_waits_for_the_next() {
        let limits = Limits {
            max_borrow_ms: 0,
            reserve_ahead_ms: 1_000,
            sequence_spread: 0,
        };
        let mut g = Generator::new();
        for _ in 0..4096 {
            next(&mut g, &L, NODE, Clocks::from(T0), &limits, accept).unwrap();
        }
        assert_eq!(
            next(&mut g, &L, NODE, Clocks::from(T0), &limits, accept).unwrap(),
            Next::Wait { ms: 1 }
        );
        let Next::Id { id, .. } =
            next(&mut g, &L, NODE, Clocks::from(T0 + 1), &limits, accept).unwrap()
        else {
            panic!("expected an ID");
        };
        assert_eq!(unix_ms(id), T0 + 1);
    }

    #[test]
    fn reservations_are_written_ahead_of_use_and_amortised() {
        let mut g = Generator::new();
        let mut written = vec![];
        for ms in 0..5_000 {
            for _ in 0..3 {
                let result = next(&mut g, &L, NODE, Clocks::from(T0 + ms), &LIMITS, |until| {
                    written.push(until);
                    Ok(())
                });
                let Ok(Next::Id { id, .. }) = result else {
                    panic!("{result:?}")
                };
                // Every issued ID lies under the latest durable reservation.
                assert!(unix_ms(id) < *written.last().unwrap());
            }
        }
        // 15,000 IDs over 5 s with 1 s reservations: 5 writes.
        assert_eq!(
            written,
            vec![T0 + 1_000, T0 + 2_000, T0 + 3_000, T0 + 4_000, T0 + 5_000]
        );
        assert_eq!(g.stats().reservations, 5);
        assert_eq!(g.reserved_until(), T0 + 5_000);
    }

    #[test]
    fn a_failed_reservation_issues_nothing_and_moves_nothing() {
        let mut g = Generator::new();
        let first = id(&mut g, T0);
        let failure = SnowflakeError::NotPreloaded;
        let result = next(&mut g, &L, NODE, Clocks::from(T0 + 1_000), &LIMITS, |_| {
            Err(failure.clone())
        });
        assert_eq!(result, Err(failure));
        assert_eq!(g.stats().issued, 1);
        assert_eq!(g.last_issued(&L), Some(unix_ms(first)));
        assert_eq!(g.reserved_until(), T0 + 1_000);
        // The next successful call writes the reservation and issues.
        let second = id(&mut g, T0 + 1_000);
        assert!(second > first);
        assert_eq!(g.reserved_until(), T0 + 2_000);
    }

    #[test]
    fn after_a_restart_with_the_clock_set_back_ids_continue_above_the_reservation() {
        let mut before = Generator::new();
        let mut reserved = 0;
        let mut last_before = 0;
        for ms in 0..2_500 {
            let result = next(
                &mut before,
                &L,
                NODE,
                Clocks::from(T0 + ms),
                &LIMITS,
                |until| {
                    reserved = until;
                    Ok(())
                },
            );
            if let Ok(Next::Id { id, .. }) = result {
                last_before = id;
            }
        }
        // The server restarts with its clock 10 minutes behind.
        let mut after = Generator::resume(reserved);
        let mut previous = last_before;
        for ms in 0..20_000 {
            for _ in 0..2 {
                let id = id(&mut after, T0 - 600_000 + ms);
                assert!(id > previous);
                previous = id;
            }
        }
        assert!(unix_ms(previous) >= reserved);
        // No wait and no regression: the steady clock starts at the floor.
        assert_eq!(after.stats().overload_waits, 0);
        assert_eq!(after.stats().clock_regressions, 0);
    }

    #[test]
    fn a_standby_replaying_reservations_continues_above_them_when_promoted() {
        let mut standby = Generator::new();
        assert!(standby.observe_reservation(T0 + 1_000));
        assert!(standby.observe_reservation(T0 + 2_000));
        assert!(!standby.observe_reservation(T0 + 1_500));
        let first = id(&mut standby, T0 - HOUR);
        assert_eq!(unix_ms(first), T0 + 2_000);
    }

    #[test]
    fn clock_before_the_epoch_is_an_error_on_a_fresh_generator() {
        let mut g = Generator::new();
        let now = DEFAULT_EPOCH_UNIX_MS - 1;
        assert_eq!(
            next(&mut g, &L, NODE, Clocks::from(now), &LIMITS, accept),
            Err(SnowflakeError::ClockBeforeEpoch { now_unix_ms: now })
        );
        assert_eq!(g.stats().issued, 0);
    }

    #[test]
    fn clock_before_the_epoch_after_issuing_is_just_a_regression() {
        let mut g = Generator::new();
        let a = id(&mut g, T0);
        let b = id(&mut g, 0);
        assert!(a < b);
    }

    #[test]
    fn time_field_running_out_is_an_error_never_a_wrap_or_negative() {
        let mut g = Generator::new();
        let end = L.end_unix_ms();
        let mut last = 0;
        for _ in 0..=L.max_seq() {
            last = id(&mut g, end);
            assert!(last > 0);
        }
        let before = g;
        let exhausted = Err(SnowflakeError::TimeExhausted { end_unix_ms: end });
        assert_eq!(
            next(&mut g, &L, NODE, Clocks::from(end), &LIMITS, accept),
            exhausted
        );
        assert_eq!(
            next(&mut g, &L, NODE, Clocks::from(end + 1), &LIMITS, accept),
            exhausted
        );
        // A refused call does not move the generator.
        assert_eq!(g.last, before.last);
        assert_eq!(g.stats().issued, before.stats().issued);
        assert_eq!(parts(last).time, L.max_time());
        // The last reservation stops at the end of the field.
        assert_eq!(g.reserved_until(), end + 1);
    }

    #[test]
    fn node_out_of_range_is_refused() {
        let mut g = Generator::new();
        assert_eq!(
            next(&mut g, &L, 1024, Clocks::from(T0), &LIMITS, accept),
            Err(SnowflakeError::NodeOutOfRange {
                node: 1024,
                max: 1023
            })
        );
        assert_eq!(g.stats().issued, 0);
    }

    #[test]
    fn batch_sizes_outside_1_to_100_million_are_refused() {
        assert_eq!(batch_size(1), Ok(1));
        assert_eq!(batch_size(MAX_BATCH), Ok(100_000_000));
        for n in [0, -1, i32::MIN, MAX_BATCH + 1, i32::MAX] {
            assert_eq!(
                batch_size(n),
                Err(SnowflakeError::BatchSizeOutOfRange { n, max: MAX_BATCH })
            );
        }
    }

    fn allocate(g: &mut Generator, now: i64, want: u64, limits: &Limits) -> Allocation {
        g.allocate(&L, NODE, Clocks::at(now), limits, want, accept)
            .unwrap()
    }

    fn run_ids(allocation: Allocation) -> Vec<i64> {
        match allocation {
            Allocation::Run { run, .. } => run.ids(L, NODE).collect(),
            wait => panic!("unexpected {wait:?}"),
        }
    }

    #[test]
    fn a_batch_is_what_the_same_number_of_single_calls_would_give() {
        let mut batch = Generator::new();
        let mut single = Generator::new();
        id(&mut batch, T0);
        id(&mut single, T0);
        let ids = run_ids(allocate(&mut batch, T0, 10_000, &LIMITS));
        let singles: Vec<i64> = (0..10_000).map(|_| id(&mut single, T0)).collect();
        assert_eq!(ids, singles);
        assert_eq!(batch.stats(), single.stats());
        assert!(strictly_increasing(&ids));
        // 10,001 IDs in millisecond T0 and the two borrowed after it.
        assert_eq!(batch.stats().exhausted_ms, 2);
        assert_eq!(unix_ms(*ids.last().unwrap()), T0 + 2);
    }

    #[test]
    fn a_huge_batch_stops_at_the_borrowing_limit_then_waits() {
        let mut g = Generator::new();
        let ids = run_ids(allocate(&mut g, T0, 10_000_000, &LIMITS));
        // Millisecond T0 and 1000 borrowed ones.
        assert_eq!(ids.len(), 1_001 * 4096);
        assert_eq!(unix_ms(*ids.last().unwrap()), T0 + 1_000);
        assert_eq!(
            allocate(&mut g, T0, 10, &LIMITS),
            Allocation::Wait { ms: 1 }
        );
        // As the clock moves on, room comes back a millisecond at a time.
        assert_eq!(
            run_ids(allocate(&mut g, T0 + 5, 1_000_000, &LIMITS)).len(),
            5 * 4096
        );
    }

    #[test]
    fn a_batch_reserves_past_its_last_id() {
        let mut g = Generator::new();
        let mut reserved = 0;
        let result = g.allocate(&L, NODE, Clocks::at(T0), &LIMITS, 100_000, |until| {
            reserved = until;
            Ok(())
        });
        let ids = run_ids(result.unwrap());
        assert!(unix_ms(*ids.last().unwrap()) < reserved);
        assert_eq!(reserved, unix_ms(*ids.last().unwrap()) + 1_000);
    }

    #[test]
    fn a_batch_stops_at_the_end_of_the_time_field() {
        let mut g = Generator::new();
        let ids = run_ids(allocate(&mut g, L.end_unix_ms(), 10_000, &LIMITS));
        assert_eq!(ids.len(), 4096);
        let last = L.compose(Parts {
            time: L.max_time(),
            node: NODE,
            seq: L.max_seq(),
        });
        assert_eq!(ids.last().copied(), last.ok());
        assert_eq!(
            g.allocate(&L, NODE, Clocks::at(L.end_unix_ms()), &LIMITS, 1, accept),
            Err(SnowflakeError::TimeExhausted {
                end_unix_ms: L.end_unix_ms()
            })
        );
    }

    fn first_id(allocation: Allocation, layout: Layout, node: u32) -> Option<i64> {
        match allocation {
            Allocation::Run { run, .. } => run.ids(layout, node).next(),
            Allocation::Wait { .. } => None,
        }
    }

    #[test]
    fn other_layouts_generate_decode_and_order() {
        let layouts = [
            Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1000, 22, 9).unwrap(),
            Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1, 8, 16).unwrap(),
            Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 10, 16, 8).unwrap(),
        ];
        for layout in layouts {
            let node = layout.max_node();
            let borrow_ticks = LIMITS.max_borrow_ms / layout.unit_ms;
            let (mut g, mut now, mut previous, mut made, mut waits) =
                (Generator::new(), T0, -1i64, 0, 0);
            for step in 0..3_000 {
                now += 3;
                for _ in 0..step % 7 + 1 {
                    let allocation = g
                        .allocate(&layout, node, Clocks::at(now), &LIMITS, 1, accept)
                        .unwrap();
                    let Some(id) = first_id(allocation, layout, node) else {
                        waits += 1;
                        continue;
                    };
                    assert!(id > previous, "{layout:?}");
                    let parts = layout.decompose(id).unwrap();
                    assert_eq!(parts.node, node);
                    let tick = parts.time as i64;
                    assert!(
                        tick >= layout.tick_at(now) && tick <= layout.tick_at(now) + borrow_ticks
                    );
                    previous = id;
                    made += 1;
                }
            }
            assert!(made > 5_000, "{layout:?}: {made}");
            // 512 IDs a second is less than the ~1,300 asked for: that layout waits.
            assert_eq!(
                waits > 0,
                layout.unit_ms == 1000,
                "{layout:?}: {waits} waits"
            );
        }
    }

    #[test]
    fn sequence_spread_makes_low_rate_ids_cover_the_low_bits_evenly() {
        let spread = Limits {
            sequence_spread: 16,
            ..LIMITS
        };
        for (limits, expected) in [
            (spread, [625; 16]),
            (LIMITS, {
                let mut all_in_one = [0; 16];
                all_in_one[(NODE as usize * 4096) % 16] = 10_000;
                all_in_one
            }),
        ] {
            let mut g = Generator::new();
            let mut buckets = [0; 16];
            for ms in 0..10_000 {
                let allocation = g
                    .allocate(&L, NODE, Clocks::at(T0 + ms), &limits, 1, accept)
                    .unwrap();
                let id = first_id(allocation, L, NODE).unwrap();
                buckets[(id % 16) as usize] += 1;
            }
            assert_eq!(buckets, expected);
        }
    }

    #[test]
    fn sequence_spread_costs_at_most_its_offset_of_a_ticks_capacity() {
        let limits = Limits {
            sequence_spread: 16,
            ..LIMITS
        };
        let mut g = Generator::new();
        id(&mut g, T0 - 1); // the next fresh tick starts at offset 1
        let allocation = g
            .allocate(&L, NODE, Clocks::at(T0), &limits, 10_000, accept)
            .unwrap();
        let Allocation::Run { run, .. } = allocation else {
            panic!("{allocation:?}")
        };
        assert_eq!(run.seq, 1);
        let ids: Vec<i64> = run.ids(L, NODE).collect();
        // Tick T0 holds 4095 of them; the rest borrow T0 + 1 from sequence 0.
        assert_eq!(parts(ids[4094]).time, parts(ids[0]).time);
        assert_eq!(parts(ids[4095]).time, parts(ids[0]).time + 1);
        assert_eq!(parts(ids[4095]).seq, 0);
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
                    match next(&mut g, &L, NODE, Clocks::from(now), &LIMITS, accept).unwrap() {
                        Next::Id { id, .. } => {
                            prop_assert!(id > previous);
                            prop_assert_eq!(parts(id).node, NODE);
                            previous = id;
                        }
                        // Overloaded: the clock moves on while the caller waits.
                        Next::Wait { ms } => now += ms,
                    }
                }
            }
        }

        #[test]
        fn batches_and_single_calls_interleaved_stay_strictly_increasing(
            steps in proptest::collection::vec((-2_000i64..2_000, 1u64..20_000), 1..30)
        ) {
            let mut g = Generator::new();
            let mut now = T0;
            let mut previous = -1i64;
            for (jump, want) in steps {
                now += jump;
                let mut got = vec![];
                match g.allocate(&L, NODE, Clocks::at(now), &LIMITS, want, accept).unwrap() {
                    Allocation::Run { run, .. } => {
                        prop_assert!(run.count >= 1 && run.count <= want);
                        got.extend(run.ids(L, NODE));
                    }
                    Allocation::Wait { ms } => now += ms,
                }
                got.push(id(&mut g, now));
                for id in got {
                    prop_assert!(id > previous);
                    previous = id;
                }
            }
        }

        #[test]
        fn restarts_at_any_clock_never_go_below_earlier_ids(
            runs in proptest::collection::vec((-HOUR..HOUR, 1usize..10_000), 1..8)
        ) {
            let mut reserved = i64::MIN;
            let mut previous = -1i64;
            for (clock_offset, calls) in runs {
                let mut g = Generator::resume(reserved);
                for i in 0..calls {
                    let now = T0 + clock_offset + i as i64 / 4;
                    let result = next(&mut g, &L, NODE, Clocks::from(now), &LIMITS, |until| {
                        reserved = until;
                        Ok(())
                    });
                    if let Ok(Next::Id { id, .. }) = result {
                        prop_assert!(id > previous);
                        previous = id;
                    }
                }
            }
        }

        #[test]
        fn logical_clock_is_never_behind_the_highest_wall_clock_seen(
            readings in proptest::collection::vec(-100_000i64..100_000, 1..500)
        ) {
            let mut g = Generator::new();
            let mut latest_wall = i64::MIN;
            for offset in readings {
                let now = T0 + offset;
                latest_wall = latest_wall.max(now);
                let id = id(&mut g, now);
                prop_assert!(unix_ms(id) >= latest_wall);
            }
        }
    }
}
