//! The steady clock: the generator's reading of time, which never runs backwards.
//!
//! Times are Unix milliseconds. Three clocks are involved:
//! - the *wall clock*: what the server's clock reads; it may step backwards (NTP, VM restore);
//! - the *steady clock*: the wall clock, or, when the wall clock is behind it, the steady clock's
//!   previous reading plus the real time elapsed since (from the monotonic clock), slowed to
//!   9/10 of real time. So it never runs backwards, keeps counting through a backward step of the
//!   wall clock, and the lead it then has over the wall clock shrinks by a tenth of the time that
//!   passes (an hour's lead is gone in ten hours) until it rejoins the wall clock. It never reads
//!   less than the *floor*, the previous run's reservation (see `reservation.rs`);
//! - the *logical clock*: the time of the last issued ID; never less than the steady clock
//!   (`generator.rs`).
//!
//! Forward steps: the steady clock follows the wall clock forwards at once, unless the wall
//! clock has moved more than `FORWARD_STEP_MS` ahead of where the monotonic clock says it should
//! be (a bad RTC, a broken time source, a mistyped `date`; also a VM resumed after a suspend,
//! whose monotonic clock stood still). Such a step is *held*: the steady clock keeps counting
//! real time on the monotonic clock, the step is counted (`clock_jumps`) and warned about, and
//! only if the wall clock still leads by that much `FORWARD_CONFIRM_MS` later is the step
//! followed. A glitch that comes and goes within that time leaves no trace in the IDs, and no
//! reading — held or not, valid or not — is taken in when the call fails (a time past the field
//! or before the epoch changes nothing, shared or durable: see [`Reading`]).
//!
//! Where the wall clock should be is the monotonic clock plus the *anchor*: the difference of the
//! two at the last reading that read both and trusted the wall clock. A step the steady clock
//! follows moves the anchor with it, so that steps are measured one at a time: the wall clock
//! alone is read only while it moves at most `NORMAL_PATH_MS` from one reading to the next (busy
//! calls, the common case), and a reading further on reads the monotonic clock too and
//! re-anchors. So small steps followed at once are not taken for a leap at the next pause, and
//! steps back hidden in a pause do not let a later leap through. Steps of under a second on the
//! normal path, which would add up while calls never pause for a second, are taken in by the
//! renewer: between calls it reads both clocks and re-anchors.
//!
//! What the clocks did worth a warning comes out as a [`ClockEvent`] with the next call's IDs.

use super::{ClockEvent, Stats};
use crate::clock::Clock;

/// While ahead of the wall clock, the steady clock holds back 1 ms of every this many.
const SLEW_DIVISOR: i64 = 10;

/// Minimum time between two clock-regression warnings, on the steady clock.
const WARNING_INTERVAL_MS: i64 = 60_000;

/// A wall clock more than this far (ms) ahead of the monotonic clock's account of time is not
/// followed at once. NTP corrects by slewing, or by steps well under a second; a VM paused for
/// a live migration loses under a second. Ten seconds is far above those and far below the
/// steps that do damage (hours, years: every later ID stamped in the future, the time field
/// used up). A step below it is followed at once: its lead is at most ten seconds, gone in
/// a hundred (see the slew).
pub const FORWARD_STEP_MS: i64 = 10_000;

/// The wall clock alone is read (the *normal path*) while it reads at most this far (ms) past
/// the previous reading; further on, the monotonic clock is read too, and the wall clock, if
/// followed, re-anchored to it (see the module's *anchor*). Busy calls are far closer together;
/// a call after a pause of a second costs one more clock read.
const NORMAL_PATH_MS: i64 = 1_000;

/// A held forward step is followed once the wall clock has kept it this long (ms, on the
/// monotonic clock): long enough for a glitch to pass unnoticed by the IDs, short enough that a
/// VM resumed after a suspend stamps its IDs with the right time again within half a minute
/// (until then, with the time the monotonic clock counted: earlier, never a duplicate).
pub const FORWARD_CONFIRM_MS: i64 = 30_000;

/// The steady clock's state: a part of the [`Generator`](super::Generator), so plain data in
/// shared memory like it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub(super) struct SteadyClock {
    /// The steady clock at the previous reading, or `i64::MIN` before the first reading.
    pub(super) steady: i64,
    /// The next reading takes the normal path if the wall clock reads at or past the steady
    /// clock, and less than this much (ms) past it: `NORMAL_PATH_MS + 1` normally, 0 (never)
    /// while the previous reading was off the normal path (before the first one, behind the
    /// steady clock, a step held), so that the normal path has nothing to reset.
    normal_window: u64,
    /// The wall clock at the previous reading.
    wall: i64,
    /// The monotonic clock at the previous reading, if that reading needed it (the wall clock
    /// was behind the steady clock).
    monotonic: Option<i64>,
    /// No reading is below this, and no ID is issued at a time before it: the reservation of
    /// the previous run, or one replayed from the WAL.
    pub(super) floor: i64,
    /// Steady-clock time of the last clock-regression warning.
    warned_at: Option<i64>,
    /// Milliseconds of real time, fewer than `SLEW_DIVISOR`, not yet slowed by the slew.
    slew_remainder: i64,
    /// The wall clock minus the monotonic clock at the last reading off the normal path whose
    /// wall clock was trusted: what the wall clock should read now is the monotonic clock plus
    /// this (the normal path moves the wall clock at most `NORMAL_PATH_MS` at a time).
    anchor: i64,
    /// The monotonic clock when a forward step now held was first seen, or `None`.
    held_since: Option<i64>,
    /// A clock event seen by a call that issued nothing, for the next call that does to warn of.
    pending_event: Option<ClockEvent>,
    /// The off-path part of the reading in progress (see [`Reading`]): scratch, meaningful only
    /// while a call runs.
    staged: OffPath,
}

/// A reading of the clocks, not yet taken in: [`Generator::allocate`](super::Generator::allocate)
/// takes it in only when the call succeeds or waits, so that a reading that fails changes
/// nothing. On the normal path it is the steady clock and the wall clock alone; off it
/// (`off_path`), the rest is staged in the steady clock's `staged`, taken in with it.
#[derive(Clone, Copy)]
pub(super) struct Reading {
    pub(super) steady: i64,
    pub(super) wall: i64,
    off_path: bool,
}

/// What a reading off the normal path changes besides the steady and the wall clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
struct OffPath {
    monotonic: Option<i64>,
    slew_remainder: i64,
    anchor: i64,
    held_since: Option<i64>,
    regressed: bool,
    event: Option<ClockEvent>,
}

impl SteadyClock {
    /// Before the first reading, never below `floor`.
    pub(super) const fn new(floor: i64) -> Self {
        Self {
            steady: i64::MIN,
            normal_window: 0,
            wall: i64::MIN,
            monotonic: None,
            floor,
            warned_at: None,
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
        }
    }

    /// Whether the wall clock reading `wall` is on the normal path (see [`SteadyClock::read`])
    /// with no event waiting to be warned of. Changes nothing: [`SteadyClock::take_in_normal`]
    /// takes the reading in.
    #[inline(always)]
    pub(super) fn is_normal(&self, wall: i64) -> bool {
        (wall.wrapping_sub(self.steady) as u64) < self.normal_window && self.pending_event.is_none()
    }

    /// Takes in a normal-path reading `wall` that is past the floor (so the steady clock is the
    /// wall clock), as [`SteadyClock::take_in`] does.
    #[inline(always)]
    pub(super) fn take_in_normal(&mut self, wall: i64) {
        self.steady = wall;
        self.wall = wall;
    }

    /// Reads `clock` and works out the steady clock from it, without taking the reading in (see
    /// [`Reading`]). On the normal path (the wall clock at or ahead of the steady clock by at
    /// most `NORMAL_PATH_MS`, no step held) only the wall clock is read; the rest is
    /// [`SteadyClock::read_off_path`].
    #[inline(always)]
    pub(super) fn read(&mut self, clock: &mut impl Clock) -> Reading {
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

    /// What a call reading `clock` now would read (the steady clock, and the wall clock as it
    /// is taken), without taking it in: a forward step that the call would hold is held here
    /// too, and while it is, the steady clock counts the monotonic clock's time. For the renewer
    /// between calls ([`Generator::keep_ahead`](super::Generator::keep_ahead)). On the normal
    /// path it also re-anchors the wall clock to the monotonic clock, as a call off it would:
    /// on a server whose calls never pause for a second, small steps followed on the normal path
    /// would otherwise add up in the anchor (see the module's *anchor*).
    pub(super) fn read_between_calls(&mut self, clock: &mut impl Clock) -> Reading {
        let mut probe = *self;
        let reading = probe.read(clock);
        if !reading.off_path {
            self.anchor = reading.wall - clock.monotonic();
        }
        reading
    }

    /// A reading off the normal path. The monotonic clock is read: on the first reading, to
    /// anchor the wall clock to it; when the wall clock is behind the steady clock (a step back:
    /// the steady clock counts on, slowed; real time that passed before the first such reading
    /// is not counted, so the steady clock stands still across the call that sees the step); and
    /// when it is further ahead than `NORMAL_PATH_MS`, or a step is held: up to `FORWARD_STEP_MS`
    /// ahead, followed at once and re-anchored; further, a pause between calls (followed at once
    /// if the monotonic clock counted as much) or a forward step (held until it has lasted
    /// `FORWARD_CONFIRM_MS`: see the module's *Forward steps*).
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
                    // At most a step's length past the steady clock (a short pause, a small step,
                    // back from behind it or from a held step that went away): followed, and the
                    // anchor moves with it.
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

    /// Takes in a clock reading of a call that did not fail; counts regressions and held steps
    /// in `stats`.
    #[inline(always)]
    pub(super) fn take_in(&mut self, reading: Reading, stats: &mut Stats) {
        self.steady = reading.steady;
        self.wall = reading.wall;
        if reading.off_path {
            self.take_in_off_path(stats);
        }
    }

    #[inline(never)]
    fn take_in_off_path(&mut self, stats: &mut Stats) {
        let rest = self.staged;
        // Back on the normal path only once a reading has had nothing to count or hold.
        self.normal_window = if rest.monotonic.is_none() && rest.held_since.is_none() {
            NORMAL_PATH_MS as u64 + 1
        } else {
            0
        };
        self.monotonic = rest.monotonic;
        self.slew_remainder = rest.slew_remainder;
        self.anchor = rest.anchor;
        self.held_since = rest.held_since;
        stats.clock_regressions += u64::from(rest.regressed);
        if rest.event.is_some() {
            if let Some(ClockEvent::JumpHeld { .. }) = rest.event {
                stats.clock_jumps += 1;
            }
            self.pending_event = rest.event;
        }
    }

    /// The clock event to warn of with the IDs of a call whose reading (taken in) was
    /// `steady_ms`, if any.
    #[inline(always)]
    pub(super) fn event_to_warn_of(&mut self, steady_ms: i64) -> Option<ClockEvent> {
        if self.pending_event.is_none() {
            None
        } else {
            self.take_pending_event(steady_ms)
        }
    }

    /// The pending event, if it is to be warned of now: a step back at most once every
    /// `WARNING_INTERVAL_MS` of the steady clock (`steady_ms` now), the others each time.
    #[inline(never)]
    fn take_pending_event(&mut self, steady_ms: i64) -> Option<ClockEvent> {
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
}
