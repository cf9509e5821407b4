//! The next-id state machine: a logical clock that never runs backwards, and a durable
//! reservation that keeps it from running backwards across restarts.
//!
//! Pure Rust: the clocks are passed in ([`Clock`]) and the durable write is done by the caller
//! and reported back, so tests can move time at will and fail writes on purpose. The
//! shared-memory layer (`shmem.rs`) keeps one [`Generator`] per server and calls its methods
//! under its lock; `renewer.rs` writes the reservations.
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
//! steady clock simply keeps counting.
//!
//! Forward steps: the steady clock follows the wall clock forwards at once, unless the wall
//! clock has moved more than `FORWARD_STEP_MS` ahead of where the monotonic clock says it should
//! be (a bad RTC, a broken time source, a mistyped `date`; also a VM resumed after a suspend,
//! whose monotonic clock stood still). Such a step is *held*: the steady clock keeps counting
//! real time on the monotonic clock, the step is counted (`clock_jumps`) and warned about, and
//! only if the wall clock still leads by that much `FORWARD_CONFIRM_MS` later is the step
//! followed. A glitch that comes and goes within that time leaves no trace in the IDs, and no
//! reading — held or not, valid or not — is taken in when the call fails (a time past the field
//! or before the epoch changes nothing, shared or durable). Only sustained overload (more than 4096 IDs per ms with
//! the default layout) makes callers wait, and only once it has built up `max_borrow_ms`.
//!
//! Durability: no ID is issued unless a durable reservation covers it (its time is below
//! `durable_until`). The reservation is renewed ahead of need and outside the generator's lock:
//! when less than half of `reserve_ahead_ms` remains above the last issued ID, the call that
//! notices raises the *demand* (`wanted_until`) and tells its caller to wake the renewer. One
//! renewer at a time ([`Generator::claim_renewal`] is the flag that serialises them) writes the
//! reservation with no lock held and reports back ([`Generator::renewal_done`] or
//! [`Generator::renewal_failed`]); only then does the new reservation count. A call whose next ID
//! is not covered issues nothing and is told to wait for the renewer
//! ([`Allocation::AwaitReservation`]): only when the issued time has truly caught up with the
//! reservation (sustained overload, or a disk slower than the reservation window). A failed
//! renewal leaves `durable_until` where it was, so it never issues an uncovered ID. After a
//! restart (or on a promoted standby) the generator resumes with the last reservation as its
//! floor, so every new ID is greater than every ID issued before, whatever the clock says.
//!
//! Between calls: a reservation asked for by calls runs out when calls pause, and the first call
//! after a pause longer than half of it would wait for a write. So for `KEEP_AHEAD_MS` after
//! the last call, and after the server starts, the renewer also asks itself
//! ([`Generator::keep_ahead`], each turn of its loop): the reservation stays ahead of the clock
//! as if calls went on, and only a call after a longer idle time waits for one write.
//!
//! A slow disk: the next renewal starts when half of the reservation is left, so it must be
//! written within that half, or calls wait for it. Each renewal reports how long it took, and
//! while renewals take more than a quarter of `reserve_ahead_ms`, reservations reach
//! `SLOW_RENEWAL_FACTOR` times the last one's duration instead (at most `MAX_RESERVATION_GROWTH`
//! times `reserve_ahead_ms`): the next renewal then has twice as long as the last one took. The
//! price is only a longer lead after a restart with the clock set back, on that slow disk.
//!
//! Fairness: a request for many IDs at once (a batch) may borrow only half of `max_borrow_ms`
//! and may not use the last quarter of the covered time, so that single calls always find room
//! above a flood of batches instead of waiting behind it.

use crate::clock::Clock;
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
    /// Calls told to wait for a reservation: the issued time had caught up with the durable one.
    pub reservation_waits: u64,
    /// Renewals that failed: the reservation was not written, nothing it would cover was issued.
    pub renewal_failures: u64,
    /// Forward steps of the wall clock held instead of followed (see the module's *Forward
    /// steps*).
    pub clock_jumps: u64,
}

/// Something about the clock that the caller should warn about (after releasing the lock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockEvent {
    /// The wall clock stepped back by `ms` (warned at most once a minute).
    SteppedBack { ms: i64 },
    /// The wall clock stepped `ms` ahead of the monotonic clock: held, not followed.
    JumpHeld { ms: i64 },
    /// A held step has lasted `FORWARD_CONFIRM_MS`: the steady clock follows it now.
    JumpFollowed { ms: i64 },
}

/// The outcome of one call of [`Generator::allocate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// For this long after the last call (ms), the renewer keeps the reservation ahead of the clock;
/// and after the server starts, if its last reservation is no older than this (a restart, not a
/// cold start or a clock far ahead).
pub const KEEP_AHEAD_MS: i64 = 60_000;

/// A wall clock more than this far (ms) ahead of the monotonic clock's account of time is not
/// followed at once. NTP corrects by slewing, or by steps well under a second; a VM paused for
/// a live migration loses under a second. Ten seconds is far above those and far below the
/// steps that do damage (hours, years: every later ID stamped in the future, the time field
/// used up). A step below it is followed at once: its lead is at most ten seconds, gone in
/// a hundred (see the slew).
pub const FORWARD_STEP_MS: i64 = 10_000;

/// A held forward step is followed once the wall clock has kept it this long (ms, on the
/// monotonic clock): long enough for a glitch to pass unnoticed by the IDs, short enough that a
/// VM resumed after a suspend stamps its IDs with the right time again within half a minute
/// (until then, with the time the monotonic clock counted: earlier, never a duplicate).
pub const FORWARD_CONFIRM_MS: i64 = 30_000;

/// While renewals are slow, a reservation reaches this many times the last renewal's duration
/// ahead (renewed at half of it: the next renewal has twice as long as the last one took)...
const SLOW_RENEWAL_FACTOR: i64 = 4;
/// ...but never more than this many times `reserve_ahead_ms`.
const MAX_RESERVATION_GROWTH: i64 = 10;

/// A batch (a request for more than one ID) may borrow up to `max_borrow_ms` divided by this...
const BULK_BORROW_DIVISOR: i64 = 2;
/// ...and may not use the last `reserve_ahead_ms` divided by this of the covered time: the
/// rest is left to single calls, so that a flood of batches never makes them wait.
const BULK_COVER_MARGIN_DIVISOR: i64 = 4;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Generator {
    /// The last issued ID's time and sequence, or `None` before the first ID.
    last: Option<(i64, u32)>,
    /// The steady clock at the previous reading, or `i64::MIN` before the first reading.
    steady: i64,
    /// The next reading takes the normal path if the wall clock reads at most this much (ms)
    /// past the steady clock, and less than this: `FORWARD_STEP_MS + 1` normally, 0 (never)
    /// while the previous reading was off the normal path (before the first one, behind the
    /// steady clock, a step held), so that the normal path has nothing to reset.
    normal_window: u64,
    /// The wall clock at the previous reading.
    wall: i64,
    /// The monotonic clock at the previous reading, if that reading needed it (the wall clock
    /// was behind the steady clock).
    monotonic: Option<i64>,
    /// No ID may be issued at a time before this: the reservation of the previous run.
    floor: i64,
    /// IDs at times before this are covered by a durable reservation. Never decreases.
    durable_until: i64,
    /// The reservation asked for: renew up to here. `> durable_until` means a renewal is due.
    wanted_until: i64,
    /// A renewer has claimed the renewal and is writing it.
    renewing: bool,
    /// That renewer is the server's renewer process, not a backend standing in for it.
    claimed_by_renewer: bool,
    /// How long the last successful renewal took (ms).
    renewal_took_ms: i64,
    /// Steady-clock time of the last clock-regression warning.
    warned_at: Option<i64>,
    /// Counts fresh ticks, to rotate their first sequence number (`sequence_spread`).
    rotation: u32,
    /// Milliseconds of real time, fewer than `SLEW_DIVISOR`, not yet slowed by the slew.
    slew_remainder: i64,
    /// The wall clock minus the monotonic clock at the last reading whose wall clock was
    /// trusted: what the wall clock should read now is the monotonic clock plus this.
    anchor: i64,
    /// The monotonic clock when a forward step now held was first seen, or `None`.
    held_since: Option<i64>,
    /// A clock event seen by a call that issued nothing, for the next call that does to warn of.
    pending_event: Option<ClockEvent>,
    /// The off-path part of the reading in progress (see [`Reading`]): scratch, meaningful only
    /// while a call runs.
    staged: OffPath,
    stats: Stats,
}

/// A reading of the clocks, not yet taken in: [`Generator::allocate`] takes it in only when the
/// call succeeds or waits, so that a reading that fails changes nothing. On the normal path it
/// is the steady clock and the wall clock alone; off it (`off_path`), the rest is staged in the
/// generator's `staged`, taken in with it.
#[derive(Clone, Copy)]
struct Reading {
    steady: i64,
    wall: i64,
    off_path: bool,
}

/// What a reading off the normal path changes besides the steady and the wall clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
struct OffPath {
    monotonic: Option<i64>,
    slew_remainder: i64,
    anchor: i64,
    held_since: Option<i64>,
    regressed: bool,
    event: Option<ClockEvent>,
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
            steady: i64::MIN,
            normal_window: 0,
            wall: i64::MIN,
            monotonic: None,
            floor,
            durable_until: floor,
            wanted_until: floor,
            renewing: false,
            claimed_by_renewer: false,
            renewal_took_ms: 0,
            warned_at: None,
            rotation: 0,
            slew_remainder: 0,
            anchor: 0,
            held_since: None,
            pending_event: None,
            staged: OffPath {
                monotonic: None,
                slew_remainder: 0,
                anchor: 0,
                held_since: None,
                regressed: false,
                event: None,
            },
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
        if until <= self.floor {
            return false;
        }
        self.floor = until;
        self.durable_until = self.durable_until.max(until);
        self.wanted_until = self.wanted_until.max(until);
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
        let reading = self.read_clock(clock);
        let steady_ms = reading.steady;
        // The steady clock's tick; after a restart, no earlier than the first tick wholly past
        // the previous run's reservation.
        let mut steady = layout.tick_at(steady_ms);
        // (The steady clock is never below the floor; a whole tick past it, its tick is past
        // the floor's too, and the division is saved.)
        if steady_ms < self.floor.saturating_add(layout.unit_ms) {
            steady = steady.max(layout.tick_from(self.floor));
        }
        let max_seq = layout.max_seq();
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
            self.take_in(reading);
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
        let ahead_ms = self.reservation_ms(limits);
        let ahead_ticks = |ahead_ms: i64| (ahead_ms + layout.unit_ms - 1) / layout.unit_ms;
        let (count, end_time, end_seq, wake_renewer) = if !bulk {
            // One ID (the common case), without a division: it is covered if its tick begins
            // before the durable reservation ends.
            let at = layout.unix_ms(time as u64);
            if at >= self.durable_until {
                self.take_in(reading);
                return Ok(self.await_reservation(layout, time + ahead_ticks(ahead_ms)));
            }
            let wake_renewer = 2 * (self.durable_until - at) < ahead_ms
                && self.want_reservation(layout, time + ahead_ticks(ahead_ms));
            (1, time, seq, wake_renewer)
        } else {
            let ahead = ahead_ticks(ahead_ms);
            let covered_end = self.covered_end(layout);
            // A batch leaves the end of the covered time to single calls, unless the
            // reservation already reaches the end of the time field (nothing more to reserve).
            let usable_end = if covered_end <= layout.end_tick() as i64 {
                covered_end.saturating_sub(ahead / BULK_COVER_MARGIN_DIVISOR)
            } else {
                covered_end
            };
            if time >= usable_end {
                self.take_in(reading);
                return Ok(self.await_reservation(layout, time + ahead));
            }
            let per_tick = u64::from(max_seq) + 1;
            let limit = limit.min(usable_end - 1).min(layout.end_tick() as i64);
            let room = (limit - time) as u64 * per_tick + (per_tick - u64::from(seq));
            let count = want.min(room);
            let end = u64::from(seq) + count - 1;
            let (end_time, end_seq) = (time + (end / per_tick) as i64, (end % per_tick) as u32);
            let wake_renewer = 2 * (covered_end - end_time) < ahead
                && self.want_reservation(layout, end_time + ahead);
            (count, end_time, end_seq, wake_renewer)
        };

        if fresh {
            self.rotation = self.rotation.wrapping_add(1);
        }
        self.take_in(reading);
        self.last = Some((end_time, end_seq));
        self.stats.issued += count;
        self.stats.exhausted_ms += (end_time - time) as u64 + u64::from(borrowed);
        let clock_event = if self.pending_event.is_none() {
            None
        } else {
            self.event_to_warn_of(steady_ms)
        };
        Ok(Allocation::Run {
            run: Run { time, seq, count },
            clock_event,
            wake_renewer,
        })
    }

    /// The clock event to warn of with this call's IDs, if any: a step back at most once every
    /// `WARNING_INTERVAL_MS` of the steady clock (`steady_ms` now), the others each time.
    #[inline(never)]
    fn event_to_warn_of(&mut self, steady_ms: i64) -> Option<ClockEvent> {
        match self.pending_event.take() {
            event @ Some(ClockEvent::SteppedBack { .. }) => event.filter(|_| {
                let due = self
                    .warned_at
                    .is_none_or(|at| steady_ms - at >= WARNING_INTERVAL_MS);
                if due {
                    self.warned_at = Some(steady_ms);
                }
                due
            }),
            event => event,
        }
    }

    /// Takes in a clock reading of a call that did not fail.
    #[inline(always)]
    fn take_in(&mut self, reading: Reading) {
        self.steady = reading.steady;
        self.wall = reading.wall;
        if reading.off_path {
            self.take_in_off_path();
        }
    }

    #[inline(never)]
    fn take_in_off_path(&mut self) {
        let rest = self.staged;
        // Back on the normal path only once a reading has had nothing to count or hold.
        self.normal_window = if rest.monotonic.is_none() && rest.held_since.is_none() {
            FORWARD_STEP_MS as u64 + 1
        } else {
            0
        };
        self.monotonic = rest.monotonic;
        self.slew_remainder = rest.slew_remainder;
        self.anchor = rest.anchor;
        self.held_since = rest.held_since;
        self.stats.clock_regressions += u64::from(rest.regressed);
        if rest.event.is_some() {
            if let Some(ClockEvent::JumpHeld { .. }) = rest.event {
                self.stats.clock_jumps += 1;
            }
            self.pending_event = rest.event;
        }
    }

    /// Tells the caller to wait for a reservation reaching tick `until_tick`.
    fn await_reservation(&mut self, layout: &Layout, until_tick: i64) -> Allocation {
        self.stats.reservation_waits += 1;
        Allocation::AwaitReservation {
            wake_renewer: self.want_reservation(layout, until_tick),
            failures: self.stats.renewal_failures,
        }
    }

    /// The first sequence number of a fresh tick (`sequence_spread`).
    fn fresh_seq(&self, limits: &Limits, max_seq: u32) -> u32 {
        let spread = u64::from(limits.sequence_spread).clamp(1, u64::from(max_seq) + 1);
        (u64::from(self.rotation) % spread) as u32
    }

    /// The first tick the durable reservation does not cover (ticks before it are covered).
    fn covered_end(&self, layout: &Layout) -> i64 {
        if self.durable_until == i64::MIN {
            i64::MIN
        } else {
            layout.tick_from(self.durable_until)
        }
    }

    /// Raises the demand to a reservation up to tick `until_tick` (at most the end of the time
    /// field); returns whether the renewer must be woken: a renewal is now due and none was
    /// due or running before.
    fn want_reservation(&mut self, layout: &Layout, until_tick: i64) -> bool {
        let until = layout.unix_ms(until_tick.min(layout.end_tick() as i64 + 1) as u64);
        let already_due = self.renewing || self.wanted_until > self.durable_until;
        self.wanted_until = self.wanted_until.max(until);
        !already_due && self.wanted_until > self.durable_until
    }

    /// Claims the renewal for the renewer process (`by_renewer`) or for a backend standing in
    /// for it, if one is due and none is running: returns the reservation to write (Unix ms).
    /// The caller writes it with no lock held and then reports [`Generator::renewal_done`] or
    /// [`Generator::renewal_failed`]. While claimed, no other renewal can be claimed: writers
    /// are serialised.
    pub fn claim_renewal(&mut self, by_renewer: bool) -> Option<i64> {
        if self.renewing || self.wanted_until <= self.durable_until {
            return None;
        }
        self.renewing = true;
        self.claimed_by_renewer = by_renewer;
        Some(self.wanted_until)
    }

    /// Keeps the reservation ahead of the wall clock `now` between calls: if a call came within
    /// `KEEP_AHEAD_MS`, or the generator became `active_since` (the renewer's start) within it
    /// on a server whose last reservation is no older than that (a restart: the server was in
    /// use and is about to be again), and less than half of the reservation is left above `now`
    /// (or above the generator's clock or floor, when they lead), raises the demand as a call
    /// would. So a reservation never reaches more than `KEEP_AHEAD_MS` plus a reservation past
    /// the last call's steady clock (or, after a restart, past the last reservation): a server
    /// that never issued an ID reserves nothing, and a wall clock far ahead reserves nothing
    /// for it. Returns whether a renewal is due and unclaimed (the renewer then claims it).
    pub fn keep_ahead(
        &mut self,
        layout: &Layout,
        limits: &Limits,
        now: i64,
        active_since: i64,
    ) -> bool {
        let last_call = self.steady;
        let restarted = self.floor > i64::MIN && now.saturating_sub(self.floor) <= KEEP_AHEAD_MS;
        let since = if restarted {
            last_call.max(active_since)
        } else {
            last_call
        };
        if now.saturating_sub(since) > KEEP_AHEAD_MS {
            return false;
        }
        let at = now.max(last_call).max(self.floor);
        let ahead_ms = self.reservation_ms(limits);
        if self.durable_until.saturating_sub(at).saturating_mul(2) < ahead_ms {
            let ahead_ticks = (ahead_ms + layout.unit_ms - 1) / layout.unit_ms;
            self.want_reservation(layout, layout.tick_at(at).saturating_add(ahead_ticks));
        }
        !self.renewing && self.wanted_until > self.durable_until
    }

    /// How far ahead of the issued time reservations reach now (ms): `reserve_ahead_ms`, or
    /// longer while renewals are slow (see the module's *A slow disk*).
    #[inline]
    pub fn reservation_ms(&self, limits: &Limits) -> i64 {
        let set = limits.reserve_ahead_ms.max(1);
        let slow = (self.renewal_took_ms.saturating_mul(SLOW_RENEWAL_FACTOR))
            .min(set.saturating_mul(MAX_RESERVATION_GROWTH));
        set.max(slow)
    }

    /// The claimed reservation `until` is durable, written in `took_ms`: IDs below it may now
    /// be issued.
    pub fn renewal_done(&mut self, until: i64, took_ms: i64) {
        self.renewing = false;
        self.renewal_took_ms = took_ms.max(0);
        self.durable_until = self.durable_until.max(until);
        self.stats.reservations += 1;
    }

    /// The claimed reservation could not be written. Nothing changes but the count of failures
    /// (which tells the waiting callers) and the demand, which is dropped: the next call that
    /// needs a reservation asks again.
    pub fn renewal_failed(&mut self) {
        self.renewing = false;
        self.wanted_until = self.durable_until;
        self.stats.renewal_failures += 1;
    }

    /// Whether a renewal has been claimed and not reported yet.
    pub const fn renewing(&self) -> bool {
        self.renewing
    }

    /// A renewer that claimed a renewal is gone without reporting it (it exited): the claim is
    /// released, the demand stays, so the next renewer takes it up.
    pub fn renewal_abandoned(&mut self) {
        self.renewing = false;
    }

    /// A renewer process starts: a claim its predecessor left (the postmaster starts it only
    /// after that one exited) is released as abandoned. A claim of a backend standing in for
    /// the renewer stays: that backend is still writing and will report it, and releasing it
    /// would let a second writer write at the same time.
    pub fn renewer_started(&mut self) {
        if self.renewing && self.claimed_by_renewer {
            self.renewal_abandoned();
        }
    }

    /// Reads `clock` and works out the steady clock from it, without taking the reading in (see
    /// [`Reading`]). On the normal path (the wall clock at or ahead of the steady clock by at
    /// most `FORWARD_STEP_MS`, no step held) only the wall clock is read; the rest is
    /// [`Generator::read_off_path`].
    #[inline(always)]
    fn read_clock(&mut self, clock: &mut impl Clock) -> Reading {
        let wall = clock.wall();
        // One comparison: a wall clock behind the steady clock wraps to a huge distance.
        if (wall.wrapping_sub(self.steady) as u64) < self.normal_window {
            Reading {
                steady: wall.max(self.floor),
                wall,
                off_path: false,
            }
        } else {
            self.read_off_path(clock, wall)
        }
    }

    /// A reading off the normal path. The monotonic clock is read: on the first reading, to
    /// anchor the wall clock to it; when the wall clock is behind the steady clock (a step back:
    /// the steady clock counts on, slowed; real time that passed before the first such reading
    /// is not counted, so the steady clock stands still across the call that sees the step); and
    /// when it is further ahead than `FORWARD_STEP_MS`, or a step is held (a pause between
    /// calls, followed at once if the monotonic clock counted as much; or a forward step, held
    /// until it has lasted `FORWARD_CONFIRM_MS`: see the module's *Forward steps*).
    #[inline(never)]
    #[cold]
    fn read_off_path(&mut self, clock: &mut impl Clock, wall: i64) -> Reading {
        let now = clock.monotonic();
        let mut rest = OffPath {
            monotonic: None,
            slew_remainder: 0,
            anchor: wall - now,
            held_since: None,
            regressed: false,
            event: None,
        };
        let mut reading_wall = wall;
        let steady = match self.steady {
            // The first reading: nothing to compare it with.
            i64::MIN => wall,
            steady => {
                if wall < self.wall {
                    rest.regressed = true;
                    rest.event = Some(ClockEvent::SteppedBack {
                        ms: self.wall - wall,
                    });
                }
                if wall < steady {
                    // A monotonic clock that went backwards (a faked one) counts as standing
                    // still.
                    let elapsed = self.monotonic.map_or(0, |before| (now - before).max(0));
                    let slewed = self.slew_remainder + elapsed;
                    rest.monotonic = Some(now);
                    rest.slew_remainder = slewed % SLEW_DIVISOR;
                    // (The wall clock behind is trusted: a step back is a correction.)
                    steady + elapsed - slewed / SLEW_DIVISOR
                } else if wall - steady <= FORWARD_STEP_MS {
                    // At most a step's length past the steady clock (back from behind it, or
                    // from a held step that went away): followed.
                    wall
                } else {
                    // What the wall clock should read now, by the monotonic clock.
                    let expected = now.saturating_add(self.anchor);
                    let step = wall.saturating_sub(expected);
                    let since = self.held_since.unwrap_or(now);
                    if step <= FORWARD_STEP_MS {
                        wall
                    } else if now - since >= FORWARD_CONFIRM_MS {
                        rest.event = Some(ClockEvent::JumpFollowed { ms: step });
                        wall
                    } else {
                        // Held: real time counted from the last reading, never less than the
                        // expected wall clock; the next reading is compared with that one, so
                        // that the end of the step is not taken for a step back.
                        let elapsed = self.monotonic.map_or(0, |before| (now - before).max(0));
                        rest.monotonic = Some(now);
                        rest.anchor = self.anchor;
                        rest.held_since = Some(since);
                        if self.held_since.is_none() {
                            rest.event = Some(ClockEvent::JumpHeld { ms: step });
                        }
                        reading_wall = expected.min(wall);
                        steady.saturating_add(elapsed).max(reading_wall)
                    }
                }
            }
        };
        self.staged = rest;
        Reading {
            steady: steady.max(self.floor),
            wall: reading_wall,
            off_path: true,
        }
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
        self.durable_until
    }

    /// How far (ms) the logical clock leads the wall clock `now`; 0 when it does not.
    pub fn lead_ms(&self, layout: &Layout, now: i64) -> i64 {
        self.last_issued(layout)
            .map_or(0, |time| (time - now).max(0))
    }

    /// How far (ms) the logical clock leads the steady clock through borrowing under overload.
    pub fn borrowed_ms(&self, layout: &Layout) -> i64 {
        match self.last_issued(layout) {
            Some(time) if self.steady > i64::MIN => (time - self.steady).max(0),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests;
