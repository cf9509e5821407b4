//! The generator's tests, one file per part: `clock.rs` (the steady clock), `ids.rs` (the
//! next-ID policy: sequences, borrowing, overload, the fields' ends, other layouts),
//! `batches.rs` (many IDs per call, and their fairness to single calls), `reservations.rs` (the
//! reservation protocol, renewers and restarts) and `model.rs` (property tests across all of
//! them, crashes included). This file holds what they share: the constants, a call as the
//! server makes it, and a renewer that writes at once or slowly.

use super::*;
use crate::clock::Clocks;
use crate::layout::{DEFAULT_EPOCH_UNIX_MS, DEFAULT_LAYOUT};

mod batches;
mod clock;
mod ids;
mod model;
mod reservations;

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

/// One call as the server makes it, with a renewer that writes at once: a call that is told to
/// await a reservation has it written by `reserve` (as the renewer would) and calls again; a
/// renewal due after a run is written right after it. Returns a run or an overload wait, or the
/// write's error when the renewal the call waited for failed.
fn drive(
    g: &mut Generator,
    layout: &Layout,
    node: u32,
    now: Clocks,
    limits: &Limits,
    want: u64,
    mut reserve: impl FnMut(i64) -> Result<(), Error>,
) -> Result<Allocation, Error> {
    let mut now = now;
    loop {
        let allocation = g.allocate(layout, node, &mut now, limits, want)?;
        match allocation {
            Allocation::AwaitReservation { .. } => {
                let until = g.start_renewal(true).expect("a renewal is due");
                if let Err(e) = reserve(until) {
                    g.renewal_failed();
                    return Err(e);
                }
                g.renewal_done(until, 0);
            }
            Allocation::Run {
                wake_renewer: true, ..
            } => {
                if let Some(until) = g.start_renewal(true) {
                    match reserve(until) {
                        Ok(()) => g.renewal_done(until, 0),
                        Err(_) => g.renewal_failed(),
                    }
                }
                return Ok(allocation);
            }
            _ => return Ok(allocation),
        }
    }
}

fn next(
    g: &mut Generator,
    layout: &Layout,
    node: u32,
    now: Clocks,
    limits: &Limits,
    reserve: impl FnMut(i64) -> Result<(), Error>,
) -> Result<Next, Error> {
    Ok(match drive(g, layout, node, now, limits, 1, reserve)? {
        Allocation::Run {
            run, clock_event, ..
        } => Next::Id {
            id: run.ids(*layout, node).next().unwrap(),
            clock_stepped_back_ms: match clock_event {
                Some(ClockEvent::SteppedBack { ms }) => Some(ms),
                _ => None,
            },
        },
        Allocation::Wait { ms } => Next::Wait { ms },
        Allocation::AwaitReservation { .. } => unreachable!("drive writes reservations"),
    })
}

const L: Layout = DEFAULT_LAYOUT;
const NODE: u32 = 7;
/// Some ordinary moment well after the epoch.
const T0: i64 = DEFAULT_EPOCH_UNIX_MS + 1_000_000_000;
const LIMITS: Limits = Limits {
    max_borrow_ms: 1_000,
    reservation_ms: 1_000,
    ceiling: i64::MAX,
    sequence_spread: 0,
};
const HOUR: i64 = 3_600_000;

const YEAR: i64 = 365 * 24 * HOUR;

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
fn accept(_: i64) -> Result<(), Error> {
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

/// The last ID of a run, without making the others.
fn last_of(run: Run) -> i64 {
    let end = u64::from(run.seq) + run.count - 1;
    L.pack(Parts {
        time: run.time as u64 + end / 4096,
        node: NODE,
        seq: (end % 4096) as u32,
    })
}

/// A renewer that takes `latency_ms` per write, run beside the callers as the server's renewer
/// runs beside its backends: woken by a call, it starts the renewal and reports it done
/// `latency_ms` later (in the callers' time).
struct SlowRenewer {
    latency_ms: i64,
    in_flight: Option<(i64, i64)>,
    written: Vec<i64>,
}

impl SlowRenewer {
    fn new(latency_ms: i64) -> Self {
        SlowRenewer {
            latency_ms,
            in_flight: None,
            written: vec![],
        }
    }

    /// Lets the renewer act at time `now`: finish a write that is due, start the next one.
    fn step(&mut self, g: &mut Generator, now: i64) {
        if let Some((until, done_at)) = self.in_flight {
            if now < done_at {
                return;
            }
            self.written.push(until);
            g.renewal_done(until, self.latency_ms);
            self.in_flight = None;
        }
        if let Some(until) = g.start_renewal(true) {
            self.in_flight = Some((until, now + self.latency_ms));
        }
    }
}

/// The IDs one server of a model issued, checked as the safety model promises them
/// (docs/SAFETY.md, *The first call after a quiet minute*): within one run each above the one
/// before; across crashes never one issued before, and above every one that a durable
/// reservation covered when it was issued. An ID of a wake whose write had not landed at the
/// crash may sort above the IDs after the restart (a clock set back), never equal one.
struct Issued {
    layout: Layout,
    run_top: i64,
    /// The highest ID issued under a durable reservation, in any run.
    covered_top: i64,
    /// IDs issued past the durable reservation (wakes) since the last crash.
    uncovered_since: Vec<i64>,
    /// Wake IDs that a crash left uncovered: never to be issued again.
    orphans: std::collections::HashSet<i64>,
    /// How many wake IDs were issued in all (a model that never wakes tests nothing).
    pub wakes: u64,
}

impl Issued {
    fn new(layout: Layout) -> Self {
        Issued {
            layout,
            run_top: -1,
            covered_top: -1,
            uncovered_since: vec![],
            orphans: Default::default(),
            wakes: 0,
        }
    }

    /// One ID, issued while the durable reservation ended at `durable` (Unix ms).
    fn check(&mut self, id: i64, durable: i64) -> Result<(), String> {
        if id <= self.run_top {
            return Err(format!("{id} not above the run's last ID {}", self.run_top));
        }
        if id <= self.covered_top {
            return Err(format!("{id} not above a covered ID {}", self.covered_top));
        }
        if self.orphans.contains(&id) {
            return Err(format!("{id} issued again after a crash"));
        }
        self.run_top = id;
        if self.layout.id_unix_ms(id).unwrap() < durable {
            self.covered_top = id;
        } else {
            self.uncovered_since.push(id);
            self.wakes += 1;
        }
        Ok(())
    }

    /// The server crashed with `on_disk` the furthest reservation that reached its disk.
    fn crash(&mut self, on_disk: i64) {
        for id in self.uncovered_since.drain(..) {
            if self.layout.id_unix_ms(id).unwrap() < on_disk {
                self.covered_top = self.covered_top.max(id);
            } else {
                self.orphans.insert(id);
            }
        }
        self.run_top = -1;
    }
}
