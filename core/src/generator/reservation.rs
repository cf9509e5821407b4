//! The reservation protocol: no ID is issued unless a durable reservation covers it. This is the
//! one full telling of the protocol; the extension's modules that take part in it say only what
//! they do and point here: `src/reservation/` (`renew.rs` takes the writer's turn for one renewal,
//! writes and reports it; `src/renewer.rs` is the renewer; `store.rs` the state file and WAL
//! record; `redo.rs` their replay) and `src/shmem.rs` (the shared state and its lock).
//!
//! The promise: a reservation "until T", once durable, means that no ID at time T or later has
//! been issued but a wake's (below). IDs are issued only below `durable_until`, the highest
//! durable reservation, or in a wake.
//!
//! Renewal, ahead of need and outside the generator's lock: when less than half of the
//! effective reservation ([`Generator::effective_reservation_ms`]) remains above the last issued
//! ID, the call that notices raises the *demand* (`wanted_until`, to a reservation ahead of that
//! ID) and tells its caller to wake the renewer. One writer at a time takes it up:
//! [`Generator::start_renewal`] is the flag that serialises them and returns the reservation to
//! write. The writer writes it with no lock held (the extension: state file, WAL record, flush,
//! the wait for the synchronous standbys) and reports back, [`Generator::renewal_done`] or
//! [`Generator::renewal_failed`]; only then does the new reservation count.
//!
//! Waiting: a call whose next ID is not covered (and is no wake's, below) issues nothing and is
//! told to wait for the renewer ([`Allocation::AwaitReservation`]): only when the issued time
//! has truly caught up with the reservation (sustained overload, or a disk slower than the
//! reservation window). A
//! failed renewal leaves `durable_until` where it was, so it never issues an uncovered ID; it
//! drops the demand, and the waiting calls see the count of failures grow.
//!
//! Rewrites: when what is written with the reservation changes (a node-id registry claim),
//! the renewer writes the durable reservation again, taking the writer's turn like a renewal
//! ([`Generator::start_rewrite`]), so that it never writes at the same time as a stand-in.
//!
//! Writers: normally the server's renewer process; where none runs, a backend that needs the
//! renewal takes the writer's turn and writes it itself, standing in. A turn always ends: by its
//! report; as abandoned when its writer is gone without one, its process exited or its write
//! ended by an error, or given back unused ([`Generator::renewal_abandoned`]: the demand stays
//! for the next writer); or when a renewer process starts, which ends a turn its predecessor
//! left but never that of a stand-in backend, still writing ([`Generator::renewer_started`]).
//! So two writers never write at once.
//!
//! Restarts and standbys: after a restart the generator resumes with the last reservation as
//! its floor ([`Generator::resume`]); a standby raises its floor with every reservation it
//! replays from the WAL ([`Generator::observe_reservation`]). So every new ID is greater than
//! every ID issued before, whatever the clock says, also after a promotion — but a wake's whose
//! write had not landed (below), which is never issued again but may sort above.
//!
//! Between calls: a reservation asked for by calls runs out when calls pause, and the first call
//! after a pause longer than half of it would wait for a write. So for `KEEP_AHEAD_MS` after
//! the last call, and after the server starts, the renewer also asks itself
//! ([`Generator::keep_ahead`], each turn of its loop): the reservation stays ahead of the clock
//! as if calls went on. Past that minute nothing is written while idle, and no reservation
//! reaches far past the last call.
//!
//! The wake: so the first call after a longer quiet spell finds its time past every
//! reservation. It takes no covered time from the past (it would be stamped before it was
//! made) and does not wait for the write it asks for: it and the calls after it, until that
//! reservation's end, are issued at once in the wake range of the sequence field
//! (`Layout::wake_seq`), at most `WAKE_MS` past the durable reservation and below the fenced
//! ceiling (`generator.rs`, *The wake*), while the write is under way; it ends when a renewal
//! is reported, done or failed. Uncovered, those IDs are kept apart instead: a generator that
//! resumes from a durable reservation (`resume`, `observe_reservation`) uses no sequence number
//! of the wake range, and starts no wake, for `WAKE_MS` past it (`low_seq_until`), so a crash
//! before the write lands can never make them twice, whatever the clock says after it. Only a
//! quiet spell starts a wake (the last ID covered and more than `KEEP_AHEAD_MS` old): a
//! reservation that runs out under calls still makes them wait, as below
//! (docs/SAFETY.md, *The first call after a quiet minute*; `tests/model.rs` checks it with
//! crashes and the clock set back).
//!
//! A slow disk: the next renewal starts when half of the reservation is left, so it must be
//! written within that half, or calls wait for it. Each renewal reports how long it took, and
//! while renewals take more than a quarter of `reservation_ms`, reservations reach
//! `SLOW_RENEWAL_FACTOR` times the last one's duration instead (at most `MAX_RESERVATION_GROWTH`
//! times `reservation_ms`): the next renewal then has twice as long as the last one took. The
//! price is only a longer lead after a restart with the clock set back, on that slow disk.
//!
//! Batches may not use the last quarter of the covered time, so that single calls always find
//! it free (`generator.rs`, *Fairness*).

use super::{Allocation, Generator, Limits};
use crate::layout::Layout;

/// While renewals are slow, a reservation reaches this many times the last renewal's duration
/// ahead (renewed at half of it: the next renewal has twice as long as the last one took)...
const SLOW_RENEWAL_FACTOR: i64 = 4;
/// ...but never more than this many times `reservation_ms`.
const MAX_RESERVATION_GROWTH: i64 = 10;

/// The protocol's state: a part of the [`Generator`], so plain data in shared memory like it.
/// (Not `state_file::Reservation`, one written reservation.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub(super) struct Reservation {
    /// IDs at times before this are covered by a durable reservation. Never decreases.
    pub(super) durable_until: i64,
    /// The reservation asked for: renew up to here. `> durable_until` means a renewal is due.
    wanted_until: i64,
    /// A writer has taken its turn (a renewal or a rewrite) and is writing it.
    renewing: bool,
    /// That writer is the server's renewer process, not a backend standing in for it.
    taken_by_renewer: bool,
    /// How long the last successful renewal took (ms).
    renewal_took_ms: i64,
}

impl Reservation {
    /// Covering up to `floor` (Unix ms), nothing asked for.
    pub(super) const fn new(floor: i64) -> Self {
        Self {
            durable_until: floor,
            wanted_until: floor,
            renewing: false,
            taken_by_renewer: false,
            renewal_took_ms: 0,
        }
    }

    /// A reservation made elsewhere (replayed from the WAL) is durable.
    pub(super) fn observe(&mut self, until: i64) {
        self.made_durable(until);
        self.wanted_until = self.wanted_until.max(until);
    }

    /// A reservation until `until` is durable: the durable reservation rises to it, if it is
    /// higher. What is durable never falls: IDs may have been made below it, and a restart
    /// resumes above it.
    fn made_durable(&mut self, until: i64) {
        let durable = self.durable_until.max(until);
        assert!(
            durable >= self.durable_until,
            "the durable reservation would fall from {} to {durable}",
            self.durable_until
        );
        self.durable_until = durable;
    }

    /// The first tick the durable reservation does not cover (ticks before it are covered).
    pub(super) fn covered_end(&self, layout: &Layout) -> i64 {
        if self.durable_until == i64::MIN {
            i64::MIN
        } else {
            layout.tick_from(self.durable_until)
        }
    }

    /// Raises the demand to a reservation up to tick `until_tick` (at most the end of the time
    /// field); returns whether the renewer must be woken: a renewal is now due and none was
    /// due or running before.
    pub(super) fn want(&mut self, layout: &Layout, until_tick: i64) -> bool {
        let until = layout.unix_ms(until_tick.min(layout.end_tick() as i64 + 1) as u64);
        let already_due = self.due_or_running();
        self.wanted_until = self.wanted_until.max(until);
        !already_due && self.wanted_until > self.durable_until
    }

    /// Whether a renewal is due and no writer's turn is taken.
    pub(super) fn due(&self) -> bool {
        !self.renewing && self.wanted_until > self.durable_until
    }

    fn due_or_running(&self) -> bool {
        self.renewing || self.wanted_until > self.durable_until
    }
}

/// The writers' side of the protocol.
impl Generator {
    /// Takes the writer's turn for the due renewal, for the renewer process (`by_renewer`) or
    /// for a backend standing in for it, if one is due and no turn is taken: returns the
    /// reservation to write (Unix ms). The caller writes it with no lock held and then reports
    /// [`Generator::renewal_done`] or [`Generator::renewal_failed`]. While the turn is taken,
    /// no other writer can take one: writers are serialised.
    pub fn start_renewal(&mut self, by_renewer: bool) -> Option<i64> {
        let r = &mut self.reservation;
        if !r.due() {
            return None;
        }
        r.renewing = true;
        r.taken_by_renewer = by_renewer;
        Some(r.wanted_until)
    }

    /// Takes the writer's turn, for the renewer, to write the durable reservation again as it
    /// is (returned, Unix ms), when no renewal is being written: what is written with it has
    /// changed (the node id's registry claim), and only one writer may write at a time.
    /// Reported like a renewal; it raises nothing.
    pub fn start_rewrite(&mut self) -> Option<i64> {
        let r = &mut self.reservation;
        if r.renewing {
            return None;
        }
        r.renewing = true;
        r.taken_by_renewer = true;
        Some(r.durable_until)
    }

    /// How far ahead of the issued time reservations reach now (ms): the setting
    /// `limits.reservation_ms`, or longer while renewals are slow (see *A slow disk*).
    #[inline]
    pub fn effective_reservation_ms(&self, limits: &Limits) -> i64 {
        let set = limits.reservation_ms.max(1);
        let slow = (self
            .reservation
            .renewal_took_ms
            .saturating_mul(SLOW_RENEWAL_FACTOR))
        .min(set.saturating_mul(MAX_RESERVATION_GROWTH));
        set.max(slow)
    }

    /// The turn's reservation `until` is durable, written in `took_ms`: IDs below it may now
    /// be issued.
    pub fn renewal_done(&mut self, until: i64, took_ms: i64) {
        let r = &mut self.reservation;
        r.renewing = false;
        r.renewal_took_ms = took_ms.max(0);
        r.made_durable(until);
        self.waking_until = i64::MIN;
        self.stats.reservations += 1;
    }

    /// The turn's reservation could not be written. Nothing changes but the count of failures
    /// (which tells the waiting callers) and the demand, which is dropped: the next call that
    /// needs a reservation asks again.
    pub fn renewal_failed(&mut self) {
        let r = &mut self.reservation;
        r.renewing = false;
        r.wanted_until = r.durable_until;
        self.waking_until = i64::MIN;
        self.stats.renewal_failures += 1;
    }

    /// Whether a writer's turn is taken and not reported yet.
    pub const fn renewing(&self) -> bool {
        self.reservation.renewing
    }

    /// A writer's turn ends unreported: its writer is gone (it exited, or its write ended by an
    /// error) or gave it back unused. The turn is free again and the demand stays, so the next
    /// writer takes it up.
    pub fn renewal_abandoned(&mut self) {
        self.reservation.renewing = false;
    }

    /// A renewer process starts: a turn its predecessor left (the postmaster starts it only
    /// after that one exited) ends as abandoned. The turn of a backend standing in for the
    /// renewer stays: that backend is still writing and will report it, and ending it would let
    /// a second writer write at the same time.
    pub fn renewer_started(&mut self) {
        if self.reservation.renewing && self.reservation.taken_by_renewer {
            self.renewal_abandoned();
        }
    }

    /// Tells the caller of `allocate` to wait for a reservation reaching tick `until_tick`.
    pub(super) fn await_reservation(&mut self, layout: &Layout, until_tick: i64) -> Allocation {
        self.stats.reservation_waits += 1;
        Allocation::AwaitReservation {
            wake_renewer: self.reservation.want(layout, until_tick),
            failures: self.stats.renewal_failures,
        }
    }
}
