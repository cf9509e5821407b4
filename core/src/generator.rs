//! The next-id state machine: a logical clock that never runs backwards, and a durable
//! reservation that keeps it from running backwards across restarts.
//!
//! Pure Rust: the clocks are passed in as a value and the durable write as a closure, so tests
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

use crate::clock::Clocks;
use crate::error::Error;
use crate::layout::{Layout, Parts};

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
pub fn batch_size(n: i32) -> Result<u64, Error> {
    if (1..=MAX_BATCH).contains(&n) {
        Ok(n as u64)
    } else {
        Err(Error::BatchSizeOutOfRange { n, max: MAX_BATCH })
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
    pub fn allocate<E: From<Error>>(
        &mut self,
        layout: &Layout,
        node: u32,
        now: Clocks,
        limits: &Limits,
        want: u64,
        reserve: impl FnOnce(i64) -> Result<(), E>,
    ) -> Result<Allocation, E> {
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
            return Err(Error::ClockBeforeEpoch {
                now_unix_ms: now.wall,
            }
            .into());
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
mod tests;
