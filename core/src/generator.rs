//! The next-ID state machine: [`Generator`], one per server, which the extension keeps in shared
//! memory and calls under its lock. Pure Rust: the clock is passed in ([`Clock`]) and durable
//! writes are done by the caller and reported back, so tests move time and fail writes at will.
//!
//! Policy for the next ID ([`Generator::allocate`]):
//! 1. the steady clock is past the last issued millisecond: issue from it, sequence 0;
//! 2. otherwise take the next sequence number in the last issued millisecond;
//! 3. if that millisecond's sequence is used up, borrow the next millisecond — unless the logical
//!    clock would then lead the steady clock by more than `max_borrow_ms`: then the caller is
//!    told to wait (outside the lock) for the steady clock to catch up.
//!
//! So IDs always increase, and a clock stepping back causes neither an error nor a wait. Only
//! sustained overload (more than 4096 IDs per ms with the default layout) makes callers wait,
//! and only once it has built up `max_borrow_ms`.
//!
//! Fairness: a request for many IDs at once (a batch) may borrow only half of `max_borrow_ms`
//! and may not use the last quarter of the covered time, so that single calls always find room
//! above a flood of batches instead of waiting behind it.
//!
//! The wake: the first call after a quiet spell finds its time past the durable reservation
//! (nothing is written while idle). It neither waits for the write nor takes covered time from
//! the past: it and the calls after it, while the reservation they asked for is being written,
//! are issued at once, at their own time, in the *wake range* of the sequence field (its top
//! eighth, [`Layout::wake_seq`]), and no further than [`WAKE_MS`] past the durable reservation
//! (and never past a fenced lease's ceiling, `Limits::ceiling`). A crash before the write lands
//! leaves those IDs uncovered, so a generator that resumes from a durable reservation (a
//! restart: [`Generator::resume`]; a standby's replay, a registry claim:
//! [`Generator::observe_reservation`]) stays below the wake range for `WAKE_MS` past it, and
//! starts no wake of its own there: whatever the clock says after the crash, it can never make
//! an ID the crashed run made (`reservation.rs`, *The wake*).
//!
//! The two state machines inside: `steady_clock.rs` (reading the clocks: steps back slewed,
//! forward steps held) and `reservation.rs` (no ID without a durable reservation: the one full
//! telling of the reservation protocol).

mod reservation;
mod steady_clock;

use crate::clock::Clock;
use crate::error::Error;
use crate::layout::{Layout, Parts, LATEST_END_UNIX_MS};
use reservation::Reservation;
use steady_clock::{Reading, SteadyClock};

pub use steady_clock::{FORWARD_CONFIRM_MS, FORWARD_STEP_MS};

/// Tunables of the policy, read from the GUCs by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// How far the logical clock may lead the steady clock by borrowing before callers wait.
    pub max_borrow_ms: i64,
    /// The first ID of each fresh tick starts at a sequence number cycling through
    /// `0..sequence_spread` (0 and 1: always 0), so that IDs made at low rates spread over their
    /// low bits.
    pub sequence_spread: u32,
    /// How far ahead of the issued time each durable reservation reaches (ms): the setting
    /// `pg_snowflake.reservation_ms`. While renewals are slow, reservations reach further
    /// ([`Generator::effective_reservation_ms`]).
    pub reservation_ms: i64,
    /// No ID at this time (Unix ms) or later is issued before its reservation is durable (the
    /// wake): the fenced lease's ceiling (`Node::ceiling`), `i64::MAX` without one. Not a
    /// setting: the extension sets it from the node under the generator's lock, and
    /// `i64::MIN` (no wake at all) is the safe value anywhere else.
    pub ceiling: i64,
}

/// What the generator has done since the server started. Counters only: nothing here decides
/// an ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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
    /// Calls told to wait for a reservation: the issued time had caught up with the durable one.
    pub reservation_waits: u64,
    /// Renewals that failed: the reservation was not written, nothing it would cover was issued.
    pub renewal_failures: u64,
    /// Forward steps of the wall clock held instead of followed (`steady_clock.rs`, *Forward
    /// steps*).
    pub clock_jumps: u64,
}

/// Something about the clock that the caller should warn about (after releasing the lock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClockEvent {
    /// The wall clock stepped back by `ms` (warned at most once a minute).
    SteppedBack { ms: i64 },
    /// The wall clock stepped `ms` ahead of the monotonic clock: held, not followed.
    JumpHeld { ms: i64 },
    /// A held step has lasted `FORWARD_CONFIRM_MS`: the steady clock follows it now.
    JumpFollowed { ms: i64 },
}

/// The outcome of one call of [`Generator::allocate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Allocation {
    /// IDs. `clock_event` is set when this call saw the clock do something worth a warning (a
    /// step back: at most one warning a minute). `wake_renewer`: this call raised the demand for
    /// a reservation and nobody has been told yet; wake the renewer (after releasing the lock).
    Run {
        run: Run,
        clock_event: Option<ClockEvent>,
        wake_renewer: bool,
    },
    /// Overloaded: release the lock, wait this long for the clock, and call again.
    Wait { ms: i64 },
    /// The next ID is not covered by a durable reservation yet: release the lock, wake the
    /// renewer if told to, wait until a renewal is reported, and call again. `failures` is the
    /// count of failed renewals now: if it has grown when the caller is woken, the renewal this
    /// call waited for failed.
    AwaitReservation { wake_renewer: bool, failures: u64 },
}

/// `count` consecutive positions of one node's ID space, from tick `time` (since the layout's
/// epoch) and sequence `seq` on: the sequence counts up, and after the layout's last sequence
/// number continues at 0 in the next tick. Every ID of a run is greater than the one before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// For this long after the last call (ms), the renewer keeps the reservation ahead of the clock;
/// and after the server starts, if its last reservation is no older than this (a restart, not a
/// cold start or a clock far ahead).
pub const KEEP_AHEAD_MS: i64 = 60_000;

/// The wake reaches at most this far (ms) past the durable reservation: the longest quiet
/// spell after which the first call issues at once (an hour, plus the keep-ahead minute and the
/// reservation); and a resumed generator stays below the wake range for this long past its
/// floor.
pub const WAKE_MS: i64 = 3_600_000;

/// A batch (a request for more than one ID) may borrow up to `max_borrow_ms` divided by this...
const BULK_BORROW_DIVISOR: i64 = 2;
/// ...and may not use the last (effective) reservation divided by this of the covered time: the
/// rest is left to single calls, so that a flood of batches never makes them wait.
const BULK_COVER_MARGIN_DIVISOR: i64 = 4;

/// The server's generator: plain data (`#[repr(C)]`, `Copy`), kept in shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Generator {
    /// The steady clock and its floor (`steady_clock.rs`). First, so that the hot path reaches
    /// it at the generator's own address.
    clock: SteadyClock,
    /// The last issued ID's time and sequence, or `None` before the first ID.
    last: Option<(i64, u32)>,
    /// Ticks beginning before this (Unix ms) use no sequence number of the wake range, and no
    /// wake starts there: a run before the last restart or promotion may have used it, past the
    /// durable reservation it resumed from.
    low_seq_until: i64,
    /// While the reservation the first call after a quiet spell asked for is written, calls
    /// before this time (Unix ms: that reservation's end) are issued at once in the wake range;
    /// `i64::MIN` otherwise (no wake), and again once a renewal is reported.
    waking_until: i64,
    /// The durable reservation, the demand for the next one, its writer (`reservation.rs`).
    reservation: Reservation,
    /// Counts fresh ticks, to rotate their first sequence number (`sequence_spread`).
    rotation: u32,
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
            clock: SteadyClock::new(floor),
            last: None,
            low_seq_until: floor.saturating_add(WAKE_MS),
            waking_until: i64::MIN,
            reservation: Reservation::new(floor),
            rotation: 0,
            stats: Stats {
                issued: 0,
                clock_regressions: 0,
                exhausted_ms: 0,
                overload_waits: 0,
                reservations: 0,
                reservation_waits: 0,
                renewal_failures: 0,
                clock_jumps: 0,
            },
        }
    }

    /// Takes in a reservation made elsewhere (replayed from the WAL, e.g. on a standby); returns
    /// whether it raised the floor.
    pub fn observe_reservation(&mut self, until: i64) -> bool {
        if until <= self.clock.floor {
            return false;
        }
        self.clock.floor = until;
        self.reservation.observe(until);
        self.low_seq_until = self.low_seq_until.max(until.saturating_add(WAKE_MS));
        true
    }

    /// The next `want` (at least 1) IDs for `node`, reading `clock`: as many of them as fit
    /// before the generator would lead the steady clock by more than `max_borrow_ms` (half of it
    /// for a batch), before the durable reservation ends, or before the time field ends.
    ///
    /// On error, `Wait` or `AwaitReservation` no ID is issued and the position is unchanged, so a
    /// failed call never skips or reuses an ID. On error the clock reading is not taken in
    /// either: a time past the field or before the epoch moves nothing.
    pub fn allocate(
        &mut self,
        layout: &Layout,
        node: u32,
        clock: &mut impl Clock,
        limits: &Limits,
        want: u64,
    ) -> Result<Allocation, Error> {
        let reading = self.clock.read(clock);
        let steady_ms = reading.steady;
        // The steady clock's tick; after a restart, no earlier than the first tick wholly past
        // the previous run's reservation.
        let mut steady = layout.tick_at(steady_ms);
        // (The steady clock is never below the floor; a whole tick past it, its tick is past
        // the floor's too, and the division is saved.)
        if steady_ms < self.clock.floor.saturating_add(layout.unit_ms) {
            steady = steady.max(layout.tick_from(self.clock.floor));
        }
        // Below the wake range while a run before the last restart may have used it.
        let restricted = tick_start(layout, self.last.map_or(steady, |(t, _)| t.max(steady)))
            < self.low_seq_until;
        let max_seq = if restricted {
            layout.low_max_seq()
        } else {
            layout.max_seq()
        };
        let (time, seq, borrowed) = match self.last {
            Some((last_time, _)) if steady > last_time => {
                (steady, self.fresh_seq(limits, max_seq), false)
            }
            None => (steady, self.fresh_seq(limits, max_seq), false),
            Some((last_time, last_seq)) if last_seq < max_seq => (last_time, last_seq + 1, false),
            Some((last_time, _)) => (last_time + 1, 0, true),
        };
        let fresh = !borrowed && self.last.is_none_or(|(last_time, _)| time > last_time);
        let bulk = want > 1;
        // The last tick this call may use: borrowing stops at max_borrow_ms ahead of the steady
        // clock (half of it for a batch), but a tick already in use is never refused.
        let borrow_ms = if bulk {
            limits.max_borrow_ms / BULK_BORROW_DIVISOR
        } else {
            limits.max_borrow_ms
        };
        let mut limit = steady.saturating_add(borrow_ms / layout.unit_ms);
        if !borrowed {
            limit = limit.max(time);
        }
        if time < 0 {
            return Err(Error::ClockBeforeEpoch {
                now_unix_ms: reading.wall,
            });
        }
        if time > limit {
            self.clock.take_in(reading, &mut self.stats);
            self.stats.overload_waits += 1;
            return Ok(Allocation::Wait {
                ms: (time - limit) * layout.unit_ms,
            });
        }
        // The node and the first tick must fit their fields (the sequence always does; so does
        // the tick of the last ID issued); when one does not, `compose` says which.
        let new_tick = fresh || borrowed;
        if node > layout.max_node() || (new_tick && time as u64 > layout.end_tick()) {
            layout.compose(Parts {
                time: time as u64,
                node,
                seq,
            })?;
        }

        // Reservations reach `ahead` ticks past the last ID they are made for, and are renewed
        // once less than half of that remains above the last issued ID.
        let ahead_ms = self.effective_reservation_ms(limits);
        let covered = if !bulk {
            self.cover_one(layout, limits, time, seq, new_tick, ahead_ms)
        } else {
            // Below the wake range, one tick at a time (a run continues in the next tick at 0,
            // past the wake range).
            let limit = if restricted { time } else { limit };
            self.cover_batch(layout, (time, seq), limit, max_seq, want, ahead_ms)
        };
        let (count, seq, end_time, end_seq, wake_renewer) = match covered {
            Ok(covered) => covered,
            Err(wanted) => {
                self.clock.take_in(reading, &mut self.stats);
                return Ok(self.await_reservation(layout, wanted));
            }
        };

        if fresh {
            self.rotation = self.rotation.wrapping_add(1);
        }
        self.clock.take_in(reading, &mut self.stats);
        self.last = Some((end_time, end_seq));
        self.stats.issued += count;
        self.stats.exhausted_ms += (end_time - time) as u64 + u64::from(borrowed);
        Ok(Allocation::Run {
            run: Run { time, seq, count },
            clock_event: self.clock.event_to_warn_of(steady_ms),
            wake_renewer,
        })
    }

    /// The coverage of one ID at tick `time`, sequence number `seq` ([`Generator::allocate`]'s
    /// common case, without a division: it is covered if its tick begins before the durable
    /// reservation ends, or a wake issues it): `(count, seq, end_time, end_seq, wake_renewer)`,
    /// or `Err` with the reservation to wait for.
    #[inline(always)]
    fn cover_one(
        &mut self,
        layout: &Layout,
        limits: &Limits,
        time: i64,
        seq: u32,
        new_tick: bool,
        ahead_ms: i64,
    ) -> Result<(u64, u32, i64, u32, bool), i64> {
        let ahead_ticks = (ahead_ms + layout.unit_ms - 1) / layout.unit_ms;
        let at = layout.unix_ms(time as u64);
        if at >= self.reservation.durable_until {
            let wanted = time + ahead_ticks;
            let Some(seq) = self.wake(layout, limits, at, seq, new_tick, wanted) else {
                return Err(wanted);
            };
            let wake_renewer = self.reservation.want(layout, wanted);
            if self.waking_until == i64::MIN {
                self.waking_until = tick_start(layout, wanted);
            }
            Ok((1, seq, time, seq, wake_renewer))
        } else {
            let wake_renewer = 2 * (self.reservation.durable_until - at) < ahead_ms
                && self.reservation.want(layout, time + ahead_ticks);
            Ok((1, seq, time, seq, wake_renewer))
        }
    }

    /// The coverage of a batch of up to `want` IDs from tick and sequence number `from`, up to
    /// tick `limit`: how many the durable reservation covers, `(count, seq, end_time, end_seq,
    /// wake_renewer)`, or `Err` with the reservation to wait for. A batch leaves the end of the
    /// covered time to single calls, unless the reservation already reaches the end of the time
    /// field (nothing more to reserve).
    #[inline(always)]
    fn cover_batch(
        &mut self,
        layout: &Layout,
        (time, seq): (i64, u32),
        limit: i64,
        max_seq: u32,
        want: u64,
        ahead_ms: i64,
    ) -> Result<(u64, u32, i64, u32, bool), i64> {
        let ahead = (ahead_ms + layout.unit_ms - 1) / layout.unit_ms;
        let covered_end = self.reservation.covered_end(layout);
        let usable_end = if covered_end <= layout.end_tick() as i64 {
            covered_end.saturating_sub(ahead / BULK_COVER_MARGIN_DIVISOR)
        } else {
            covered_end
        };
        if time >= usable_end {
            return Err(time + ahead);
        }
        let per_tick = u64::from(max_seq) + 1;
        let limit = limit.min(usable_end - 1).min(layout.end_tick() as i64);
        let room = (limit - time) as u64 * per_tick + (per_tick - u64::from(seq));
        let count = want.min(room);
        let end = u64::from(seq) + count - 1;
        let (end_time, end_seq) = (time + (end / per_tick) as i64, (end % per_tick) as u32);
        let wake_renewer =
            2 * (covered_end - end_time) < ahead && self.reservation.want(layout, end_time + ahead);
        Ok((count, seq, end_time, end_seq, wake_renewer))
    }

    /// The common case of [`Generator::allocate`] for one ID, for the wall clock reading
    /// `wall` (Unix ms): the steady clock on its normal path with nothing to warn of, a whole
    /// tick past the floor, the ID in a fresh tick or the next sequence number of the last
    /// one (no borrowing, so no wait), inside the time field and the node field, and covered by
    /// the durable reservation with at least half of the reservation left (nothing to renew).
    /// Then it issues that ID exactly as `allocate(layout, node, wall, limits, 1)` would, to the
    /// last field of the state, and returns its tick and sequence number; otherwise it returns
    /// `None` and has changed nothing, and the caller calls `allocate`. The extension's fast
    /// path (`allocate::next_id_fast`, for `snowflake_nextval()`) calls it under the lock;
    /// `tests/model.rs` checks it against `allocate` on every state the model reaches.
    ///
    /// Never panics: no indexing, no division but by the layout's `unit_ms` (at least 1) and the
    /// clamped spread, and every sum and product bounded (a wall clock within `i64` milliseconds,
    /// ticks and reservations within the layout's time field, which ends by year 9999).
    #[inline(always)]
    pub fn next_one(
        &mut self,
        layout: &Layout,
        node: u32,
        wall: i64,
        limits: &Limits,
    ) -> Option<(i64, u32)> {
        // Within a tick of the floor, `allocate` starts at the floor's tick: left to it. Past it,
        // the steady clock (the wall clock, or the floor when that is later) is the wall clock.
        // (`wall - unit_ms >= floor` is `wall >= floor + unit_ms` without the saturation.)
        if !self.clock.is_normal(wall)
            || wall
                .checked_sub(layout.unit_ms)
                .is_none_or(|w| w < self.clock.floor)
            || node > layout.max_node()
        {
            return None;
        }
        let (last_time, last_seq) = self.last?;
        let steady = layout.tick_at(wall);
        let fresh = steady > last_time;
        let time = if fresh {
            // Within the time field: at most its last tick (a shift), and not past the year
            // 9999 (`end_tick` without its division: a tick that begins before that ends
            // at or before it).
            if steady as u64 > layout.max_time() || wall > LATEST_END_UNIX_MS {
                return None;
            }
            steady
        } else {
            last_time
        };
        // Covered, and at least half of the reservation left: `2 * left < ahead` is
        // `left < ahead - ahead / 2`, without an overflow.
        let at = layout.unix_ms(time as u64);
        if at >= self.reservation.durable_until {
            return None;
        }
        // Below the wake range while a run before the last restart may have used it (as
        // `allocate`: the tick is the later of the clock's and the last ID's).
        let max_seq = if at < self.low_seq_until {
            layout.low_max_seq()
        } else {
            layout.max_seq()
        };
        let seq = if fresh {
            self.fresh_seq(limits, max_seq)
        } else if last_seq < max_seq {
            last_seq + 1
        } else {
            return None;
        };
        let (left, ahead) = (
            self.reservation.durable_until - at,
            self.effective_reservation_ms(limits),
        );
        if left < ahead - ahead / 2 {
            return None;
        }
        if fresh {
            self.rotation = self.rotation.wrapping_add(1);
        }
        self.clock.take_in_normal(wall);
        self.last = Some((time, seq));
        self.stats.issued += 1;
        Some((time, seq))
    }

    /// The sequence number at which a call whose tick begins at `at`, past the durable
    /// reservation, is issued at once (the wake), or `None`: it waits for the reservation.
    /// `seq` is the one it would have had, `new_tick` whether its tick is a new one, `wanted`
    /// the tick its reservation will reach. A wake starts only after a quiet spell: the last
    /// ID is covered and more than `KEEP_AHEAD_MS` old (the reservation ran out between calls,
    /// not under them: a stalled disk or sustained overload still makes calls wait); it goes on
    /// while its reservation is being written, up to that reservation, within `WAKE_MS` of the
    /// durable one, below the ceiling, and past `low_seq_until`.
    fn wake(
        &self,
        layout: &Layout,
        limits: &Limits,
        at: i64,
        seq: u32,
        new_tick: bool,
        wanted: i64,
    ) -> Option<u32> {
        let first = layout.wake_seq()?;
        let durable = self.reservation.durable_until;
        let waking = self.waking_until > i64::MIN;
        let starts = !waking
            && self.last.is_none_or(|(t, _)| {
                let last_at = tick_start(layout, t);
                last_at < durable && last_at.saturating_add(KEEP_AHEAD_MS) < at
            });
        let reaches = if waking {
            self.waking_until
        } else {
            tick_start(layout, wanted)
        };
        let allowed = (waking || starts)
            && durable > i64::MIN
            && at >= self.low_seq_until
            && at < reaches
            && at < durable.saturating_add(WAKE_MS)
            && at < limits.ceiling;
        if !allowed {
            None
        } else if new_tick {
            Some(first)
        } else {
            (seq >= first).then_some(seq)
        }
    }

    /// The first sequence number of a fresh tick (`sequence_spread`).
    #[inline]
    fn fresh_seq(&self, limits: &Limits, max_seq: u32) -> u32 {
        let spread = u64::from(limits.sequence_spread).clamp(1, u64::from(max_seq) + 1);
        (u64::from(self.rotation) % spread) as u32
    }

    /// Keeps the reservation ahead of the clock between calls (`reservation.rs`, *Between
    /// calls*): if a call came within `KEEP_AHEAD_MS`, or the generator became `active_since`
    /// (the renewer's start, on the wall clock) within it on a server whose last reservation is
    /// no older than that (a restart), and less than half of the reservation is left above the
    /// time a call reading `clock` now would issue at, raises the demand as a call would. That
    /// time is the steady clock's reading, not taken in ([`SteadyClock::read_between_calls`],
    /// which also re-anchors the wall clock): the wall clock as far as calls follow it, so a
    /// forward step that calls would hold (a glitch) is held here too and never reaches the
    /// durable reservation, and while it is held the time since the last call is what the
    /// monotonic clock counted. So a server that never issued an ID reserves nothing, and a
    /// wall clock far ahead reserves nothing for it. Returns whether a renewal is due and no
    /// writer's turn is taken (the renewer then takes it).
    pub fn keep_ahead(
        &mut self,
        layout: &Layout,
        limits: &Limits,
        clock: &mut impl Clock,
        active_since: i64,
    ) -> bool {
        let (last_call, floor) = (self.clock.steady, self.clock.floor);
        // Never below the last call or the floor.
        let Reading {
            steady: at, wall, ..
        } = self.clock.read_between_calls(clock);
        let recent_call = at.saturating_sub(last_call) <= KEEP_AHEAD_MS;
        let restarted = floor > i64::MIN
            && wall.saturating_sub(floor) <= KEEP_AHEAD_MS
            && wall.saturating_sub(active_since) <= KEEP_AHEAD_MS;
        if !recent_call && !restarted {
            return false;
        }
        let ahead_ms = self.effective_reservation_ms(limits);
        if self
            .reservation
            .durable_until
            .saturating_sub(at)
            .saturating_mul(2)
            < ahead_ms
        {
            let ahead_ticks = (ahead_ms + layout.unit_ms - 1) / layout.unit_ms;
            let until_tick = layout.tick_at(at).saturating_add(ahead_ticks);
            self.reservation.want(layout, until_tick);
        }
        self.reservation.due()
    }

    pub const fn stats(&self) -> Stats {
        self.stats
    }

    /// Whether calls are being issued past the durable reservation while it is written (the
    /// wake).
    pub const fn waking(&self) -> bool {
        self.waking_until > i64::MIN
    }

    /// Time (Unix ms) at which the last issued ID's tick begins.
    pub fn last_issued(&self, layout: &Layout) -> Option<i64> {
        self.last.map(|(time, _)| layout.unix_ms(time as u64))
    }

    /// How far this generator's IDs may reach already (Unix ms): the later of the durable
    /// reservation and the time a call reading `clock` now would issue at (the steady clock,
    /// not taken in). The steady clock leads the wall clock after a step back or a start above
    /// a floor ahead of it, and keeps its lead through idle spells that the reservation does
    /// not follow; a mark recorded at or past this covers every ID made so far, and the room
    /// it leaves above (`registry::Lease::ceiling_for`) is what calls may make until the next
    /// heartbeat.
    pub fn reaches(&self, clock: &mut impl Clock) -> i64 {
        let mut probe = self.clock;
        let at = probe.read(clock).steady;
        self.reservation.durable_until.max(at)
    }

    /// IDs may be issued up to (not including) this time (Unix ms) under the durable reservation.
    pub const fn reserved_until(&self) -> i64 {
        self.reservation.durable_until
    }

    /// No ID has been issued at this time (Unix ms) or later: the durable reservation, or during
    /// a wake the end of the reservation it asked for, below which its IDs were issued before
    /// it is durable (until a renewal is reported, done or failed).
    pub const fn issued_below(&self) -> i64 {
        if self.waking_until > self.reservation.durable_until {
            self.waking_until
        } else {
            self.reservation.durable_until
        }
    }

    /// How far (ms) the logical clock leads the wall clock `now`; 0 when it does not.
    pub fn lead_ms(&self, layout: &Layout, now: i64) -> i64 {
        self.last_issued(layout)
            .map_or(0, |time| (time - now).max(0))
    }

    /// How far (ms) the logical clock leads the steady clock through borrowing under overload.
    pub fn borrowed_ms(&self, layout: &Layout) -> i64 {
        match self.last_issued(layout) {
            Some(time) if self.clock.steady > i64::MIN => (time - self.clock.steady).max(0),
            _ => 0,
        }
    }
}

/// The time (Unix ms) at which tick `t` begins, for any tick (saturating).
#[inline]
fn tick_start(layout: &Layout, t: i64) -> i64 {
    layout
        .epoch_unix_ms
        .saturating_add(t.saturating_mul(layout.unit_ms))
}

#[cfg(test)]
mod tests;
