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

/// A crash loop (a Kubernetes CrashLoopBackOff: each restart killed again as soon as it has made
/// an ID, or after a heartbeat or two) under the lease that ships, in both modes. A crash
/// releases nothing, so each restart resumes above the registry's mark: no ID the crashed run
/// could have made is made again. But the mark must not pile up: after any number of crash
/// restarts in a row, the first ID is stamped at most one lease ahead of the clock, and above
/// every ID before it. Each claim used to record its mark a lease past the floor it resumed
/// from (itself a lease past the clock), so the leads grew by a lease per crash: 28, 56, 84
/// and 112 s ahead after four kill -9s on a real server.
#[test]
fn crash_restarts_in_a_row_stamp_the_first_id_at_most_a_lease_ahead() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        for heartbeats in [0, 2] {
            let mut fleet = directed_shipped(
                &[Some(0)],
                fenced,
                &[
                    Round { s: 0, commit: done },
                    Round { s: 0, commit: done },
                    Call { s: 0, want: 1 },
                ],
            );
            let lease = fleet.lease;
            let interval = crate::registry::heartbeat_interval_ms(lease);
            let mut leads = vec![];
            for crash in 1..=10 {
                fleet.step(Crash { s: 0 });
                fleet.step(Notice);
                fleet.step(Wait {
                    ms: crate::registry::holder_may_return_ms(lease, MARGIN),
                });
                fleet.step(Round { s: 0, commit: done });
                fleet.step(Round { s: 0, commit: done });
                assert!(
                    fleet.members[0].issuer.issuing(),
                    "fenced {fenced}: crash {crash} not claimed again: {:?}",
                    fleet.members[0].issuer.node().refusing
                );
                let (before, highest) =
                    (fleet.issued.len(), fleet.issued.keys().next_back().copied());
                fleet.step(Call { s: 0, want: 1 });
                let id = *fleet.issued.keys().next_back().expect("an ID");
                assert!(
                    fleet.issued.len() == before + 1 && highest.is_none_or(|h| id > h),
                    "fenced {fenced}: the first ID after crash {crash} is not above every ID \
                     before it ({highest:?})"
                );
                let lead = L.id_unix_ms(id).expect("an ID") - fleet.now;
                leads.push(lead);
                assert!(
                    lead <= lease,
                    "fenced {fenced}, {heartbeats} heartbeats a run: the first ID after crash \
                     {crash} is stamped {lead} ms ahead of the clock, past a lease ({lease} ms); \
                     leads so far: {leads:?}"
                );
                for _ in 0..heartbeats {
                    fleet.step(Wait { ms: interval });
                    fleet.step(Round { s: 0, commit: done });
                    fleet.step(Call { s: 0, want: 1 });
                }
            }
        }
    }
}

/// One run of a crash loop: how long past the restart's wait its claim comes, how many IDs its
/// first call asks for, and the heartbeats (each that long after the contact before) and calls
/// it lives through before the next kill -9.
#[derive(Clone, Debug)]
struct LoopRun {
    late_ms: i64,
    want: u64,
    heartbeats: Vec<i64>,
}

fn loop_run(lease: i64) -> impl Strategy<Value = LoopRun> {
    let interval = crate::registry::heartbeat_interval_ms(lease);
    (
        prop_oneof![Just(0i64), 0..lease],
        1u64..200,
        prop::collection::vec(0..=interval, 0..4),
    )
        .prop_map(|(late_ms, want, heartbeats)| LoopRun {
            late_ms,
            want,
            heartbeats,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Crash loops of up to a dozen kill -9s, under the model's lease and the one that ships,
    /// in both modes, each restart claimed as soon as it may or later, living through a few
    /// heartbeats and calls or none: the first ID after every crash restart is stamped at most
    /// a lease ahead of the clock (the promise: crashes in a row do not add up), and each act
    /// is checked as the seeded simulation checks it (no ID twice, every ID below its mark).
    #[test]
    fn the_first_id_after_any_crash_loop_is_at_most_a_lease_ahead(
        fenced in any::<bool>(),
        (lease, runs) in prop_oneof![Just(LEASE), Just(30_000i64)].prop_flat_map(|lease| {
            (Just(lease), prop::collection::vec(loop_run(lease), 1..12))
        }),
    ) {
        use Act::*;
        let done = Commit::Done;
        let mut fleet = Fleet::new(&[Some(0)], fenced);
        fleet.lease = lease;
        for act in [Round { s: 0, commit: done }, Round { s: 0, commit: done }, Call { s: 0, want: 1 }] {
            fleet.act(act)?;
            fleet.keepalives();
        }
        let wait = crate::registry::holder_may_return_ms(lease, MARGIN);
        for (crash, run) in runs.iter().enumerate() {
            for act in [
                Crash { s: 0 },
                Notice,
                Wait { ms: wait + run.late_ms },
                Round { s: 0, commit: done },
                Round { s: 0, commit: done },
            ] {
                fleet.act(act)?;
                fleet.keepalives();
            }
            prop_assert!(
                fleet.members[0].issuer.issuing(),
                "crash {crash} not claimed again: {:?}",
                fleet.members[0].issuer.node().refusing
            );
            let (before, highest) = (fleet.issued.len(), fleet.issued.keys().next_back().copied());
            fleet.act(Call { s: 0, want: run.want })?;
            let above: Vec<i64> = fleet
                .issued
                .keys()
                .copied()
                .filter(|&id| highest.is_none_or(|h| id > h))
                .collect();
            prop_assert!(
                !above.is_empty() && above.len() == fleet.issued.len() - before,
                "fenced {fenced}: after crash {crash}, {} IDs made, {} of them above every ID \
                 before",
                fleet.issued.len() - before,
                above.len()
            );
            let first = above[0];
            let lead = L.id_unix_ms(first).expect("an ID") - fleet.now;
            prop_assert!(
                lead <= lease,
                "fenced {fenced}: the first ID after crash {crash} is stamped {lead} ms ahead of \
                 the clock, past a lease ({lease} ms)"
            );
            for &ms in &run.heartbeats {
                for act in [Wait { ms }, Round { s: 0, commit: done }, Call { s: 0, want: run.want }] {
                    fleet.act(act)?;
                    fleet.keepalives();
                }
            }
        }
    }
}
