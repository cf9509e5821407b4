//! Applications' node-id leases (`registry::lease`) over the fleet model's in-memory registry:
//! the acquisition, renewal and release that ship, run against the table the model keeps, each
//! call a session of its own as a member's call is.

use super::*;
use crate::registry::lease::{self, Acquired, Acquisition, Asked, Renewed};
use crate::registry::Identity;

const LEASE_MS: i64 = 3_000;
const MARGIN_MS: i64 = 2_000;
const T: i64 = 1_800_000_000_000;

fn asked(now: i64) -> Asked {
    Asked {
        label: "orders (application via db-1)".into(),
        layout: DEFAULT_LAYOUT.describe(),
        max_node: DEFAULT_LAYOUT.max_node(),
        lease_ms: LEASE_MS,
        margin_ms: MARGIN_MS,
        now,
        offset_ms: 0,
    }
}

/// `call` on a session of its own at real time `now`, committing.
fn at<R>(registry: &mut Registry, now: i64, call: impl FnOnce(&mut Session<'_>) -> R) -> R {
    let stalled = Cell::new(false);
    let session = registry.new_session();
    let out = call(&mut Session::new(
        registry,
        session,
        now,
        Commit::Done,
        &stalled,
    ));
    registry.end_session(session);
    out
}

fn acquire(registry: &mut Registry, now: i64, token: u128) -> Acquired {
    match at(registry, now, |s| lease::acquire(s, &asked(now), token)) {
        Ok(Acquisition::Granted(acquired)) => acquired,
        other => panic!("no lease: {other:?}"),
    }
}

fn renew(registry: &mut Registry, now: i64, lease: &Acquired, last_ceiling: i64) -> Renewed {
    at(registry, now, |s| {
        lease::renew(s, &asked(now), lease.node, lease.identity, last_ceiling)
    })
    .expect("the exchange")
}

#[test]
fn each_acquisition_takes_its_own_id_under_a_fresh_token_fenced_a_lease_ahead() {
    let mut registry = Registry::default();
    let first = acquire(&mut registry, T, 1);
    let second = acquire(&mut registry, T, 2);
    assert_eq!((first.node, second.node), (0, 1));
    assert_eq!(
        first.identity,
        Identity {
            token: 1,
            generation: 1
        }
    );
    assert_eq!(first.floor, i64::MIN);
    assert_eq!(first.ceiling, T + LEASE_MS);
    assert_eq!(
        registry.rows[&0].high_water, first.ceiling,
        "the mark is the ceiling"
    );
}

#[test]
fn a_lapsed_lease_is_handed_out_again_only_past_its_mark_and_the_margin_above_it() {
    let mut registry = Registry::default();
    let killed = acquire(&mut registry, T, 1);
    let Renewed::Extended { ceiling, own } =
        renew(&mut registry, T + 1_000, &killed, killed.ceiling)
    else {
        panic!("not renewed")
    };
    assert_eq!((ceiling, own), (T + 1_000 + LEASE_MS, true));
    // Its lease ran out: retired by the next acquisition, not free until the margin is past.
    let lapsed = T + 1_000 + LEASE_MS + 1;
    let next = acquire(&mut registry, lapsed, 2);
    assert_eq!(next.node, 1);
    assert!(registry.rows[&0].retired);
    let at_margin = ceiling + MARGIN_MS;
    assert_eq!(acquire(&mut registry, at_margin, 3).node, 2);
    // Past the mark and the margin: recycled above the mark, under the next generation.
    let recycled = acquire(&mut registry, at_margin + 1, 4);
    assert_eq!(recycled.node, 0);
    assert_eq!(recycled.floor, ceiling);
    assert_eq!(
        recycled.identity,
        Identity {
            token: 4,
            generation: 2
        }
    );
    assert!(recycled.ceiling > recycled.floor);
    // The killed lease, back, is lost.
    assert!(matches!(
        renew(&mut registry, at_margin + 2, &killed, ceiling),
        Renewed::Lost { .. }
    ));
}

#[test]
fn a_renewal_sees_a_raise_of_the_mark_by_anyone_else_and_the_release_keeps_it() {
    let mut registry = Registry::default();
    let held = acquire(&mut registry, T, 1);
    // A joiner records IDs it made under node id 0 before it joined.
    registry.rows.get_mut(&0).unwrap().high_water += 1;
    let Renewed::Extended { ceiling, own } = renew(&mut registry, T + 1_000, &held, held.ceiling)
    else {
        panic!("not renewed")
    };
    assert!(!own, "the raise goes unseen");
    // Released without lowering: the mark stays.
    let released = at(&mut registry, T + 1_500, |s| {
        lease::release(s, held.node, held.identity, None, LEASE_MS)
    });
    assert_eq!(released.unwrap(), Some(false));
    assert_eq!(registry.rows[&0].high_water, ceiling);
    assert!(registry.rows[&0].released);
}

#[test]
fn a_release_brings_its_own_mark_down_to_its_last_id_never_below_its_renewal() {
    let mut registry = Registry::default();
    let held = acquire(&mut registry, T, 1);
    let Renewed::Extended { ceiling, own: true } =
        renew(&mut registry, T + 1_000, &held, held.ceiling)
    else {
        panic!("not renewed as its own")
    };
    let release = |registry: &mut Registry, last: i64| {
        at(registry, T + 1_500, |s| {
            lease::release(s, held.node, held.identity, Some((ceiling, last)), LEASE_MS)
        })
        .unwrap()
    };
    // A last ID before its renewal (none since, or a wrong one): the renewal's time.
    let mut before = registry.clone();
    assert_eq!(release(&mut before, T), Some(true));
    assert_eq!(before.rows[&0].high_water, T + 1_000);
    assert_eq!(release(&mut registry, T + 1_400), Some(true));
    assert_eq!(registry.rows[&0].high_water, T + 1_400);
    // Another token releases nothing.
    let other = Identity {
        token: 9,
        generation: 1,
    };
    let foreign = at(&mut registry, T + 1_600, |s| {
        lease::release(s, 0, other, Some((T + 1_400, T)), LEASE_MS)
    });
    assert_eq!(foreign.unwrap(), None);
}

#[test]
fn a_servers_lapsed_row_is_never_retired_by_an_applications_acquisition() {
    let mut registry = Registry::default();
    let app = acquire(&mut registry, T, 1);
    // Make node id 0 a server's row (a cluster's system identifier), its lease long run out.
    registry.rows.get_mut(&app.node).unwrap().system = 7_000_000_000_000_000_001;
    let later = T + 10 * LEASE_MS;
    assert_eq!(acquire(&mut registry, later, 2).node, 1);
    assert!(!registry.rows[&0].retired);
}
