//! Models that can break the server's identity: the transitions of [`Node`] driven together with
//! the generator, the state file, the WAL and the registry's decisions, by actors that crash,
//! restart, replay, promote, race, partition, step their clocks and heal at any step. A renewer's
//! round and its contact with the registry are the core's own (`renewer::Renewer`,
//! `renewer::contact`, over `registry::table`'s procedures), run over an in-memory table
//! ([`Session`]) and the member (`member.rs`: [`InRound`] hands the round its session, a
//! `MemberView` is the member as a contact sees it) where the extension runs them over SQL and
//! shared memory; the other actors mirror the extension (`src/reservation/redo.rs`, the
//! renewer's exit in `src/registry/link.rs`): only the I/O is modelled.
//!
//! The properties are the safety model's: no ID issued twice across the servers (in available
//! mode, none once a partition has healed and the registry was reached), one registry row per
//! server, and no refusal at the end that the docs do not list.
//!
//! This file holds what the models share: the layout, the limits, the state file and the issuing
//! of IDs. The rooms: [`pair`], a primary and its standby; the fleet on one registry, in
//! [`registry`] (its table in memory), [`member`] (a server as its renewer and its contact turn
//! it), [`fleet`], [`acts`] (what befalls the fleet, and what each act does), [`checks`] (after
//! every act, at the end, and the property over random runs) and [`directed`] (cases written act
//! by act); [`sim`] and [`search`] drive the fleet from seeds and exhaustively.

mod acts;
mod applications;
mod checks;
mod directed;
mod fleet;
mod member;
mod pair;
mod registry;
mod search;
mod sim;

use super::*;
use crate::clock::Clocks;
use crate::generator::{Allocation, Limits};
use crate::issuer::{Issuer, Renewal};
use crate::layout::{Layout, DEFAULT_EPOCH_UNIX_MS, DEFAULT_LAYOUT};
use crate::registry::table::{self, HeartbeatRequest, Request, Retirement, RowRead, Table};
use crate::registry::{exchange_deadline_ms, Bounds, LayoutRows, Row};
use crate::renewer::contact;
use crate::renewer::memory::{GivenUp, Memory};
use crate::renewer::{self, Renewer};
use proptest::prelude::*;
use std::cell::Cell;
use std::collections::{btree_map::Entry, BTreeMap, BTreeSet, HashMap};

// The rooms' items, for one another: each room has `use super::*`.
use acts::{act, Act, Commit};
use checks::{run_fleet, run_fleet_leased};
use fleet::{Before, Fleet, LEASE, MARGIN, MAX_NODE, SERVERS};
use member::{InRound, Member};
use registry::{row_of, Failed, RegRow, Registry, Session};

const L: Layout = DEFAULT_LAYOUT;
const T0: i64 = DEFAULT_EPOCH_UNIX_MS + 1_000_000_000;
const LIMITS: Limits = Limits {
    max_borrow_ms: 1_000,
    sequence_spread: 0,
    reservation_ms: 500,
    ceiling: i64::MAX,
};

/// A server's state file, as the model keeps it.
fn file_of(durable: &Durable) -> Reservation {
    file_in(durable, L)
}

/// A server's state file of `layout`.
fn file_in(durable: &Durable, layout: Layout) -> Reservation {
    Reservation {
        until: durable.until,
        layout,
        node: durable.node,
        history: durable.history,
        system: Some(1),
        identity: durable.identity,
    }
}

fn found(file: Option<Reservation>) -> Found {
    file.map_or(Found::Nothing, Found::Reservation)
}

/// IDs of `issuer` at wall time `now`, up to `want`, through its gate, ceiling and turns as
/// the extension takes them (`Issuer::allocate`, `renewal_turn`, `turn_ended`), each turn's
/// reservation written by `write` (into the state file; the pair also logs it, as its WAL
/// record). The IDs made, or none when a reservation cannot be had.
fn issue(issuer: &mut Issuer, now: i64, want: u64, write: impl FnMut(&Durable)) -> Vec<i64> {
    issue_in(issuer, L, now, want, write)
}

/// [`issue`], of IDs of `layout`.
fn issue_in(
    issuer: &mut Issuer,
    layout: Layout,
    now: i64,
    want: u64,
    mut write: impl FnMut(&Durable),
) -> Vec<i64> {
    for _ in 0..4 {
        match issuer.allocate(&layout, &mut Clocks::at(now), &LIMITS, want) {
            Ok((node, Ok(Allocation::Run { run, .. }))) => return run.ids(layout, node).collect(),
            Ok((_, Ok(Allocation::AwaitReservation { .. }))) => {
                let Some(turn) = issuer.renewal_turn(true, 1) else {
                    return vec![];
                };
                if let Some(fenced) = turn.unwritten() {
                    issuer.turn_ended(fenced);
                    return vec![];
                }
                write(&Durable {
                    until: turn.until,
                    node: Some(turn.node),
                    history: turn.history,
                    identity: turn.identity,
                });
                issuer.turn_ended(Renewal::Done {
                    until: turn.until,
                    took_ms: 0,
                });
            }
            Ok((_, Ok(Allocation::Wait { .. }) | Err(_))) | Err(_) => return vec![],
        }
    }
    vec![]
}
