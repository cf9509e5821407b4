//! Directed cases on claims: a node id given up on a promotion and claimed again, a heartbeat
//! queued behind a stalled claim, claims asked again after lost answers, a stray row under a
//! pinned id, and a pin refused while a stand-in holds the writer's turn.

use super::*;

/// A node id a promoted standby gave up, claimed again by another server once the old
/// primary's lease ran out, is that server's: the standby's pending retirement ends there. It
/// was kept and retried at every heartbeat, logged as "held by …, which is connected", and
/// retired the new holder's id the first time that server was cut off past its lease (a
/// proptest seed of the fleet model, 2026-11-27: "node id 0, given up on a promotion, never
/// retired").
#[test]
fn a_given_up_node_id_claimed_again_is_never_retired_under_its_new_holder() {
    use Act::*;
    let mut fleet = Fleet::new(&[Some(0), None, None, None], false);
    let act = |fleet: &mut Fleet, act: Act| {
        fleet.act(act).unwrap();
        fleet.keepalives();
        fleet.locks_name_their_holders().unwrap();
    };
    // Member 2 takes node id 0 (member 0, configured with it, has not claimed yet), fails
    // over to member 3 with a fresh id: node id 0 is given up while its lease runs.
    act(
        &mut fleet,
        Round {
            s: 2,
            commit: Commit::Done,
        },
    );
    assert_eq!(fleet.registry.rows[&0].by, fleet.members[2].range);
    act(
        &mut fleet,
        Failover {
            s: 3,
            from: 2,
            fresh: true,
        },
    );
    act(
        &mut fleet,
        Round {
            s: 3,
            commit: Commit::Done,
        },
    );
    assert!(fleet.members[3].renewer.state.retire_pending.is_some());
    // The old primary's lease runs out; member 0 claims its configured id.
    act(&mut fleet, Wait { ms: LEASE + 1 });
    act(&mut fleet, Notice);
    act(
        &mut fleet,
        Round {
            s: 0,
            commit: Commit::Done,
        },
    );
    assert_eq!(fleet.registry.rows[&0].by, fleet.members[0].range);
    act(
        &mut fleet,
        Round {
            s: 3,
            commit: Commit::Done,
        },
    );
    // Member 0 is cut off past its lease, and member 3 heartbeats meanwhile.
    act(&mut fleet, Link { s: 0, up: false });
    act(&mut fleet, Wait { ms: 2 * LEASE });
    act(&mut fleet, Notice);
    act(
        &mut fleet,
        Round {
            s: 3,
            commit: Commit::Done,
        },
    );
    act(&mut fleet, Wait { ms: LEASE });
    act(
        &mut fleet,
        Round {
            s: 3,
            commit: Commit::Done,
        },
    );
    assert!(
        !fleet.registry.rows[&0].retired,
        "node id 0, claimed again by member 0, retired by the standby that gave it up"
    );
    assert_eq!(fleet.members[3].renewer.state.retire_pending, None);
    // Its link back, member 0 goes on under node id 0.
    act(&mut fleet, Link { s: 0, up: true });
    act(
        &mut fleet,
        Round {
            s: 0,
            commit: Commit::Done,
        },
    );
    act(
        &mut fleet,
        Round {
            s: 0,
            commit: Commit::Done,
        },
    );
    assert_eq!(fleet.members[0].issuer.node().id, 0);
    assert!(fleet.members[0].issuer.issuing());
    fleet.call(0, 10).unwrap();
}

/// Under the lease that ships, a fenced member's disk turns slow and its renewer restarts: its
/// claim stalls on its intent under the registry table's lock a second before the other
/// member's heartbeat, which waits for the lock. The registry ends the stalled claim once it has
/// been idle half a heartbeat's deadline (2.5 s), so the heartbeat never times out. The idle
/// limit used to be a quarter of the lease (7.5 s), past the heartbeat's 5 s deadline.
#[test]
fn a_heartbeat_behind_a_stalled_claim_never_waits_past_its_deadline() {
    use Act::*;
    let done = Commit::Done;
    {
        let fenced = true;
        let fleet = directed_shipped(
            &[Some(0), Some(1)],
            fenced,
            &[
                Round { s: 0, commit: done },
                Round { s: 1, commit: done },
                Stall { s: 1, slow: true },
                Release {
                    s: 1,
                    restart: false,
                },
                Round { s: 1, commit: done },
                Wait { ms: 1_000 },
                Round { s: 0, commit: done },
            ],
        );
        assert_eq!(fleet.registry.locked.len(), 1, "the claim did not stall");
        assert!(
            fleet.members[0].session.is_some() && fleet.members[0].issuer.issuing(),
            "the heartbeat behind the stalled claim failed"
        );
    }
}

/// Under the lease that ships, four claims in a row commit and lose their answers (time-outs),
/// each asked again at once. Each is the same claimant asking for the claim it recorded, and
/// the registry grants it again from where it was granted: its first IDs are stamped no further
/// ahead of the clock than one claim's lead. Each used to be taken a lease past the mark the
/// one before recorded: its IDs were stamped two minutes ahead, and a fifth lost answer would
/// have found the mark too far ahead and refused the server its own id.
#[test]
fn claims_whose_answers_are_lost_in_a_row_leave_the_ids_where_they_were() {
    use Act::*;
    for fenced in [true, false] {
        let lost = Commit::AnswerLost;
        let fleet = directed_shipped(
            &[Some(0)],
            fenced,
            &[
                Round { s: 0, commit: lost },
                Round { s: 0, commit: lost },
                Round { s: 0, commit: lost },
                Round { s: 0, commit: lost },
                Round {
                    s: 0,
                    commit: Commit::Done,
                },
                Round {
                    s: 0,
                    commit: Commit::Done,
                },
                Call { s: 0, want: 1 },
            ],
        );
        let mark = fleet.registry.rows[&0].high_water;
        assert!(
            mark <= fleet.now + 2 * fleet.lease,
            "fenced {fenced}: the mark ran {} ms ahead of the clock",
            mark - fleet.now
        );
    }
}

/// A row of another layout appears under the node id an assigned server's state file pins (the
/// intent of a claim whose commit failed): the row blocks its own id only, so the server takes
/// a fresh one. It used to wait for the row's holder as for its own claim's, for as long as the
/// row's lease ran (a hand edit's: for good).
#[test]
fn a_stray_row_under_a_pinned_id_sends_an_assigned_server_to_a_fresh_one() {
    use Act::*;
    let mut fleet = directed(
        &[None, None, None, None],
        true,
        &[
            Round {
                s: 3,
                commit: Commit::Done,
            },
            Round {
                s: 2,
                commit: Commit::Failed,
            },
            Stray { node: 1 },
            Round {
                s: 2,
                commit: Commit::Done,
            },
        ],
    );
    let m = &fleet.members[2];
    assert_eq!(
        m.issuer.node().refusing,
        Refusing::Nothing,
        "still refused: it waits for the stray row's holder"
    );
    assert_ne!(m.issuer.node().id, 1);
    assert_eq!(m.issuer.node().history.named(), &[1], "pinned to 1 first");
    fleet.call(2, 10).expect("no ID made twice");
}

/// A backend waiting for a reservation stands in for the renewer and takes the writer's turn
/// the moment a claim gives it back (the renewer restarted in fenced mode claims again while the
/// server still makes IDs below the released mark): the claim's pin, which takes the same turn,
/// is refused, so no ID is made under the claim, and the round retries the pin soon. The pin
/// fails the same way while the state file cannot be written; once both are over, the next round
/// pins and IDs are made.
#[test]
fn a_pin_refused_while_a_stand_in_writes_is_retried_and_no_id_is_made_before_it() {
    use Act::*;
    let done = Commit::Done;
    let start = [
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Release {
            s: 0,
            restart: false,
        },
        Wait { ms: 1_000 },
    ];
    let mut fleet = directed(&[Some(0)], true, &start);
    // A call that needs a reservation past the durable one waits for it: a renewal is due.
    let now = fleet.now;
    let m = &mut fleet.members[0];
    let asked = m.issuer.allocate(&L, &mut Clocks::at(now), &LIMITS, 1);
    assert!(
        matches!(asked, Ok((_, Ok(Allocation::AwaitReservation { .. })))),
        "the call did not wait for a reservation: {asked:?}"
    );
    m.stand_in_waits = true;
    let issued = fleet.issued.len();
    fleet.act(Round { s: 0, commit: done }).expect("a claim");
    let m = &fleet.members[0];
    assert!(m.stand_in.is_some(), "the stand-in took no turn");
    assert!(
        m.renewer.state.pin_due() && !m.issuer.issuing(),
        "the pin passed while a stand-in held the writer's turn: {:?}",
        m.issuer.node().refusing
    );
    fleet.act(Call { s: 0, want: 10 }).expect("a call");
    assert_eq!(
        fleet.issued.len(),
        issued,
        "IDs made under a claim not pinned"
    );
    // The stand-in's write ends, but the disk fails the pin's: still not pinned.
    fleet.members[0].end_stand_in();
    fleet.members[0].unwritable = true;
    fleet.act(Round { s: 0, commit: done }).expect("a round");
    assert!(
        fleet.members[0].renewer.state.pin_due(),
        "a pin that could not be written passed"
    );
    fleet.members[0].unwritable = false;
    fleet.act(Round { s: 0, commit: done }).expect("the pin");
    fleet.act(Call { s: 0, want: 10 }).expect("a call");
    assert!(
        !fleet.members[0].renewer.state.pin_due() && fleet.issued.len() > issued,
        "the pin retried did not let IDs be made: {:?}",
        fleet.members[0].issuer.node().refusing
    );
}
