use super::*;
use crate::clock::Clocks;
use crate::layout::DEFAULT_LAYOUT;
use crate::node::{Boot, Found, Settings};

const T0: i64 = 1_800_000_000_000;
const L: Layout = DEFAULT_LAYOUT;
const LIMITS: Limits = Limits {
    max_borrow_ms: 1_000,
    sequence_spread: 1,
    reservation_ms: 10_000,
    ceiling: i64::MIN,
};
const PID: i32 = 4_242;

/// A server with node id 5 set and no registry: issuing from the start.
fn plain() -> Issuer {
    Issuer::start(&Node::start(
        &Found::Nothing,
        Settings {
            configured: Some(5),
            registry: false,
        },
        false,
        Boot {
            value: 0xb007,
            after_clean_stop: true,
            place: 0x91ace,
        },
    ))
}

/// A member of a registry holding node id 7 under a claim with this lease `ceiling`
/// (`fenced`: the ceiling bounds it), its durable reservation ending at `reserved`, pinned and
/// issuing at `T0`.
fn member(ceiling: i64, fenced: bool, reserved: i64) -> Issuer {
    let mut issuer = Issuer::start(&Node::start(
        &Found::Nothing,
        Settings {
            configured: None,
            registry: true,
        },
        false,
        Boot {
            value: 0xb007,
            after_clean_stop: true,
            place: 0x91ace,
        },
    ));
    assert!(!issuer.issuing(), "a member waits for its claim");
    let lease = Lease {
        ends_at: T0 + 30_000,
        ceiling,
    };
    issuer.intend(
        &Claim {
            node: 7,
            identity: Identity {
                token: 1,
                generation: 1,
            },
            floor: i64::MIN,
            lease,
        },
        fenced,
    );
    let turn = issuer.rewrite_turn(PID).expect("no turn is taken");
    assert_eq!(turn.node, 7);
    issuer.turn_ended(Renewal::Done {
        until: reserved,
        took_ms: 0,
    });
    assert!(issuer.publish(
        Holding::Held {
            pinned: true,
            lease
        },
        false,
        fenced,
        T0
    ));
    assert!(issuer.issuing());
    issuer
}

/// Allocates at `now` and returns the IDs made, or the refusal.
fn ids(issuer: &mut Issuer, now: i64, want: u64) -> Result<Vec<i64>, Refusing> {
    let (node, allocation) = issuer.allocate(&L, &mut Clocks::at(now), &LIMITS, want)?;
    Ok(match allocation {
        Ok(Allocation::Run { run, .. }) => run.ids(L, node).collect(),
        _ => vec![],
    })
}

#[test]
fn the_gate_refuses_every_way_to_an_id_and_changes_nothing() {
    let mut issuer = Issuer::start(&Node::start(
        &Found::Nothing,
        Settings {
            configured: None,
            registry: false,
        },
        false,
        Boot {
            value: 0xb007,
            after_clean_stop: true,
            place: 0x91ace,
        },
    ));
    let before = issuer;
    assert_eq!(ids(&mut issuer, T0, 1), Err(Refusing::NodeUnset));
    assert_eq!(issuer.next_one(&L, &mut Clocks::at(T0), &LIMITS), None);
    // Between calls the renewer reserves nothing for a server that may not issue.
    issuer.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0), T0);
    assert_eq!(issuer.renewal_turn(true, PID), None);
    assert_eq!(issuer, before);
}

#[test]
fn an_open_gate_makes_ids_under_the_node_id_through_a_turn() {
    let mut issuer = plain();
    // Nothing durable yet: the first call waits for a reservation (or wakes).
    let first = ids(&mut issuer, T0, 1).unwrap();
    let turn = issuer.renewal_turn(false, PID).expect("a renewal is due");
    assert!(!turn.fenced);
    assert_eq!(turn.unwritten(), None);
    assert_eq!((turn.node, turn.identity), (5, None));
    assert!(turn.until > T0);
    issuer.turn_ended(Renewal::Done {
        until: turn.until,
        took_ms: 1,
    });
    let next = ids(&mut issuer, T0 + 1, 3).unwrap();
    assert_eq!(next.len(), 3);
    for id in first.iter().chain(&next) {
        assert_eq!(L.decompose(*id).unwrap().node, 5);
    }
    let (time, _, node) = issuer
        .next_one(&L, &mut Clocks::at(T0 + 2), &LIMITS)
        .expect("the fast path, within the reservation");
    assert_eq!(node, 5);
    assert!(L.unix_ms(time as u64) < turn.until);
}

#[test]
fn a_fenced_turn_is_capped_at_the_leases_ceiling_and_fenced_once_it_covers_nothing_more() {
    let ceiling = T0 + 2_000;
    let mut issuer = member(ceiling, true, T0 + 1_000);
    // Up to the reservation, then a renewal is due: capped at the ceiling.
    let _ = ids(&mut issuer, T0 + 990, 1).unwrap();
    let turn = issuer.renewal_turn(true, PID).expect("a renewal is due");
    assert_eq!(turn.until, ceiling);
    assert!(!turn.fenced);
    issuer.turn_ended(Renewal::Done {
        until: turn.until,
        took_ms: 0,
    });
    // At the ceiling: the next turn would cover nothing more.
    let _ = ids(&mut issuer, ceiling - 1, 1).unwrap();
    let _ = ids(&mut issuer, ceiling + 10, 1).unwrap();
    let turn = issuer.renewal_turn(true, PID).expect("a renewal is due");
    assert!(turn.fenced);
    assert_eq!(turn.unwritten(), Some(Renewal::Fenced { ceiling }));
    issuer.turn_ended(turn.unwritten().unwrap());
    assert_eq!(issuer.last_failure(), RenewalFailure::Fenced { ceiling });
    // No ID past the ceiling, wake or not.
    assert_eq!(ids(&mut issuer, ceiling + 20, 1), Ok(vec![]));
    assert!(issuer.generator().reserved_until() <= ceiling);
}

#[test]
fn in_available_mode_the_leases_ceiling_caps_nothing() {
    let mut issuer = member(T0 + 2_000, false, T0 + 1_000);
    let _ = ids(&mut issuer, T0 + 990, 1).unwrap();
    let turn = issuer.renewal_turn(true, PID).expect("a renewal is due");
    assert!(turn.until > T0 + 2_000, "{}", turn.until);
    assert!(!turn.fenced);
}

#[test]
fn a_turn_is_given_back_only_by_its_own_process() {
    let mut issuer = plain();
    let _ = ids(&mut issuer, T0, 1).unwrap();
    assert!(issuer.renewal_turn(false, PID).is_some());
    assert_eq!(
        issuer.renewal_turn(true, PID + 1),
        None,
        "one turn at a time"
    );
    assert!(!issuer.writer_exited(PID + 1));
    assert!(issuer.generator().renewing());
    assert!(issuer.writer_exited(PID));
    assert!(!issuer.generator().renewing());
    // The demand stays: the next writer takes it up.
    assert!(issuer.renewal_turn(true, PID + 1).is_some());
    assert!(!issuer.writer_exited(PID), "not its turn any more");
}

#[test]
fn a_failed_turn_is_what_the_waiting_callers_are_told() {
    let mut issuer = plain();
    let _ = ids(&mut issuer, T0, 1).unwrap();
    issuer.renewal_turn(false, PID).unwrap();
    issuer.turn_ended(Renewal::Failed { errno: 28 });
    assert_eq!(issuer.last_failure(), RenewalFailure::Io { errno: 28 });
    assert_eq!(issuer.generator().stats().renewal_failures, 1);
}

/// A fenced member switched to available mode while the registry is out of reach
/// (no heartbeat to bring the new mode in) is capped by the fenced lease no more, from the first
/// publication in the new mode, though it still refuses nothing (so nothing else changed).
#[test]
fn a_fenced_member_switched_to_available_is_capped_no_more() {
    let ceiling = T0 + 2_000;
    let mut issuer = member(ceiling, true, T0 + 1_000);
    let lease = Lease {
        ends_at: T0 + 30_000,
        ceiling,
    };
    let held = Holding::Held {
        pinned: true,
        lease,
    };
    issuer.publish(held, false, false, T0 + 500);
    assert!(issuer.issuing());
    let _ = ids(&mut issuer, T0 + 990, 1).unwrap();
    let turn = issuer.renewal_turn(true, PID).expect("a renewal is due");
    assert!(turn.until > ceiling, "capped at {}: {turn:?}", turn.until);
    assert!(!turn.fenced);
}

/// A fenced claim released (the renewer exits) while the first calls after a quiet
/// spell are being issued ahead of their reservation (the wake; the renewer's write abandoned
/// on its way out) leaves a mark above those IDs, not at the durable reservation below them.
#[test]
fn a_claim_released_during_a_wake_leaves_its_mark_above_the_wakes_ids() {
    let mut issuer = member(T0 + 600_000, true, T0 + 1_000);
    let _ = ids(&mut issuer, T0 + 990, 1).unwrap();
    let at = T0 + 120_000;
    let woken = ids(&mut issuer, at, 1).unwrap();
    assert_eq!(woken.len(), 1, "the wake issues at once");
    assert!(issuer.generator().waking());
    let wake_top = L.id_unix_ms(woken[0]).unwrap();
    assert!(wake_top >= issuer.generator().reserved_until());
    let turn = issuer
        .renewal_turn(true, PID)
        .expect("the wake's reservation");
    issuer.turn_ended(Renewal::Abandoned);
    let released = issuer.release().expect("a fenced claim is released");
    let lowered = released.lower.expect("its mark comes down").mark;
    assert!(
        lowered > wake_top,
        "mark {lowered} at or below the wake's ID at {wake_top}"
    );
    assert!(lowered <= turn.until);
}

/// A turn given back on the ordinary path ends as an abandoned one does: the same issuing
/// state after it, the turn free again and the demand kept for the next writer.
#[test]
fn a_turn_given_back_ends_as_an_abandoned_one() {
    let ended = |renewal: Renewal| {
        let mut issuer = member(T0 + 600_000, false, T0 + 1_000);
        issuer.rewrite_turn(PID).expect("no turn is taken");
        issuer.turn_ended(renewal);
        assert!(issuer.rewrite_turn(PID).is_some(), "the turn is free again");
        issuer
    };
    let given_back = ended(Renewal::GivenBack);
    let abandoned = ended(Renewal::Abandoned);
    assert_eq!(given_back.generator(), abandoned.generator());
    assert_eq!(given_back.node(), abandoned.node());
    assert_eq!(given_back.last_failure(), abandoned.last_failure());
}
