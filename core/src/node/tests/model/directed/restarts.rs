//! Directed cases on restarts: a claim whose intent cannot be written leaves the server as it was,
//! a clean restart takes its released claim back at once while a crash waits, a clean restart
//! after a renewer restart starts where the IDs are, and a registry that fails over slowly
//! hands no running holder's id to another.

use super::*;

/// A clean restart whose state file cannot be written for a while (its temporary file's name
/// taken by a directory): each claim's intent fails and the registry's transaction rolls back.
/// Once the file can be written, the next claim is the same claimant's and takes the id back at
/// once. The failed intent used to leave its new token in shared memory: the next claim came
/// from a stranger, refused while the id's lease ran ("held by another server").
#[test]
fn a_claim_whose_intent_cannot_be_written_leaves_the_server_as_it_was() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        let start = [
            Round { s: 0, commit: done },
            Round { s: 0, commit: done },
            Call { s: 0, want: 10 },
            Release {
                s: 0,
                restart: true,
            },
        ];
        let mut fleet = directed(&[Some(0), None], fenced, &start);
        let before = *fleet.members[0].issuer.node();
        fleet.members[0].unwritable = true;
        fleet.act(Round { s: 0, commit: done }).expect("a claim");
        let after = fleet.members[0].issuer.node();
        assert_eq!(
            (
                after.id,
                after.identity,
                after.history,
                after.mark,
                after.ceiling
            ),
            (
                before.id,
                before.identity,
                before.history,
                before.mark,
                before.ceiling
            ),
            "fenced {fenced}: the failed intent changed the server"
        );
        fleet.members[0].unwritable = false;
        fleet.act(Round { s: 0, commit: done }).expect("a claim");
        fleet.act(Round { s: 0, commit: done }).expect("the pin");
        let node = fleet.members[0].issuer.node();
        assert!(
            fleet.members[0].issuer.issuing() && node.id == 0,
            "fenced {fenced}: the file writable again, the server takes its id back at once: \
             {:?}",
            node.refusing
        );
    }
}

/// A planned restart waits for nothing: the renewer's exit released the claim, the server
/// starts after a clean stop, and its first claim takes the id back at once (under a token of
/// its own), in both modes. A crash releases nothing: the restart cannot prove it is not a copy
/// of a running holder, and waits until its old run has been silent a heartbeat interval and the
/// clock margin.
#[test]
fn a_clean_restart_takes_its_released_claim_at_once_a_crash_waits() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        let start = [
            Round { s: 0, commit: done },
            Round { s: 0, commit: done },
            Call { s: 0, want: 10 },
        ];
        let mut fleet = directed(&[Some(0), None, None, None], fenced, &start);
        let token = fleet.members[0].issuer.node().identity.map(|c| c.token);
        for act in [
            Release {
                s: 0,
                restart: true,
            },
            Round { s: 0, commit: done },
            Round { s: 0, commit: done },
        ] {
            fleet.act(act).expect("the act");
        }
        let node = *fleet.members[0].issuer.node();
        assert!(
            fleet.members[0].issuer.issuing() && node.id == 0,
            "fenced {fenced}: the clean restart makes IDs under node id 0 at once: {:?}",
            node.refusing
        );
        assert_ne!(
            node.identity.map(|c| c.token),
            token,
            "under a token of its own"
        );
        fleet.act(Call { s: 0, want: 10 }).expect("IDs");
        // A crash: refused until the old run has been silent long enough.
        fleet.act(Crash { s: 0 }).expect("the crash");
        fleet.act(Notice).expect("the registry notices");
        fleet.act(Round { s: 0, commit: done }).expect("a claim");
        assert_eq!(
            fleet.members[0].issuer.node().refusing,
            Refusing::ClaimRefused,
            "fenced {fenced}: the crashed server waits"
        );
        fleet
            .act(Wait {
                ms: crate::registry::holder_may_return_ms(LEASE, MARGIN),
            })
            .expect("time");
        fleet.act(Round { s: 0, commit: done }).expect("a claim");
        fleet.act(Round { s: 0, commit: done }).expect("the pin");
        let node = fleet.members[0].issuer.node();
        assert!(
            fleet.members[0].issuer.issuing() && node.id == 0,
            "fenced {fenced}: then takes its id back: {:?}",
            node.refusing
        );
    }
}

/// A clean restart after a renewer restart starts where the IDs are, in both modes, not a
/// lease ahead of the clock. In available mode the server goes on under its claim through a
/// renewer's restart, whose release lowered the registry's mark; the node kept the old value as
/// its own, so its next heartbeat took the mark for another's raise and its clean stop left it a
/// lease ahead: the restart's first IDs were stamped there (29 s ahead under the shipped lease,
/// measured on a real server by `pgrx-tests/tests/first_id.rs`).
#[test]
fn a_clean_restart_after_a_renewer_restart_starts_where_the_ids_are() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        let mut fleet = directed(
            &[Some(0)],
            fenced,
            &[
                Round { s: 0, commit: done },
                Round { s: 0, commit: done },
                Call { s: 0, want: 10 },
                Release {
                    s: 0,
                    restart: false,
                },
                Round { s: 0, commit: done },
                Round { s: 0, commit: done },
                Call { s: 0, want: 10 },
                Release {
                    s: 0,
                    restart: true,
                },
                Round { s: 0, commit: done },
                Round { s: 0, commit: done },
            ],
        );
        let now = fleet.now;
        let m = &mut fleet.members[0];
        let ids = issue_in(&mut m.issuer, L, now, 1, |_| {});
        let lead = L.id_unix_ms(ids[0]).expect("an ID") - now;
        assert!(
            lead < LEASE / 2,
            "fenced {fenced}: the first ID after the clean restart is stamped {lead} ms ahead"
        );
    }
}

/// The registry's primary dies and its standby is promoted only after a heartbeat interval, the
/// clock margin and the lease have passed (a typical HA failover takes tens of seconds). No
/// holder could reach the registry meanwhile, so its running holder has not been absent at all:
/// a rival configured with its id, and a clone carrying its token, each claiming the moment the
/// standby is promoted, wait for it; it reconnects, heartbeats and keeps its id.
#[test]
fn a_slow_registry_failover_hands_no_running_holders_id_to_another() {
    use Act::*;
    let done = Commit::Done;
    let clone = Copy {
        s: 2,
        from: 0,
        same_label: false,
    };
    for fenced in [true, false] {
        for (claimant, copied) in [(1, None), (2, Some(clone.clone()))] {
            let mut acts = vec![
                Round { s: 0, commit: done },
                Round { s: 0, commit: done },
                Call { s: 0, want: 10 },
                Round { s: 1, commit: done },
            ];
            acts.extend(copied);
            acts.extend([
                Registry { up: false },
                Wait { ms: LEASE },
                RegistryFailover { skew: 0 },
                // The claimant finds its session gone (the rival's), and claims on a new one.
                Round {
                    s: claimant,
                    commit: done,
                },
                Round {
                    s: claimant,
                    commit: done,
                },
                // The holder finds its session gone, and reconnects.
                Round { s: 0, commit: done },
                Round { s: 0, commit: done },
                Round {
                    s: claimant,
                    commit: done,
                },
                Call { s: 0, want: 10 },
            ]);
            let fleet = directed(&[Some(0), Some(0), Some(0)], fenced, &acts);
            let (holder, other) = (&fleet.members[0], &fleet.members[claimant]);
            assert!(
                holder.issuer.issuing() && holder.issuer.node().id == 0,
                "fenced {fenced}: the holder keeps node id 0: {:?}",
                holder.issuer.node().refusing
            );
            assert_eq!(
                other.issuer.node().refusing,
                Refusing::ClaimRefused,
                "fenced {fenced}: member {claimant} is refused"
            );
        }
    }
}
