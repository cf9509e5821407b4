//! Directed cases on copies of a data directory (a cloned VM, a restored snapshot): a copy never
//! takes its origin's id, through a renewer restart or a registry restart, a cold copy of a
//! stopped server never passes for its planned restart, and a server whose copy took its id while
//! it was down takes a fresh one at once.

use super::*;

/// A copy carrying its origin's whole label (a cloned VM: cluster name, host name and port)
/// waits while its origin's session is open; the origin's renewer then restarts (in fenced
/// mode it releases and claims again), and the copy's next claim comes first. The copy cannot
/// prove it is the running holder: it waits for it to come back, and the origin's new renewer,
/// which can, takes its id again. The copy is then found out and never makes an ID under it.
/// It used to take the id as "the holder restarted", and the origin was refused as "a copy".
#[test]
fn a_same_label_copy_never_wins_its_origins_renewer_restart() {
    use Act::*;
    let done = Commit::Done;
    let mut acts = vec![
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Copy {
            s: 1,
            from: 0,
            same_label: true,
        },
        Round { s: 1, commit: done },
        Release {
            s: 0,
            restart: false,
        },
        Round { s: 1, commit: done },
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Round { s: 1, commit: done },
    ];
    for _ in 0..8 {
        acts.extend([
            Wait { ms: LEASE / 2 },
            Round { s: 1, commit: done },
            Round { s: 0, commit: done },
            Call { s: 0, want: 10 },
            Call { s: 1, want: 10 },
        ]);
    }
    let fleet = directed(&[Some(0), None, None, None], true, &acts);
    let (origin, copy) = (&fleet.members[0], &fleet.members[1]);
    assert!(
        origin.issuer.issuing() && origin.issuer.node().id == 0,
        "the origin makes IDs under node id 0: {:?}",
        origin.issuer.node().refusing
    );
    assert!(
        !(copy.issuer.issuing() && copy.issuer.node().id == 0),
        "the copy makes none under it"
    );
    run_fleet(&[Some(0), None, None, None], true, acts).expect("the end's checks hold");
}

/// A server without a node id whose copy (its label too) took its id over while it was down
/// is given a fresh id at its first claim: the id's holder is connected under another token,
/// so the server waits for no session under its own label to end (nor two leases).
#[test]
fn a_server_without_a_node_id_whose_copy_took_its_id_takes_a_fresh_one_at_once() {
    use Act::*;
    let done = Commit::Done;
    let acts = [
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Crash { s: 0 },
        Copy {
            s: 1,
            from: 0,
            same_label: true,
        },
        Wait { ms: LEASE + 1 },
        Notice,
        Wait { ms: LEASE },
        Round { s: 1, commit: done },
        Round { s: 1, commit: done },
        Call { s: 1, want: 10 },
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Call { s: 0, want: 10 },
    ];
    for fenced in [true, false] {
        let fleet = directed(&[None, None, None, None], fenced, &acts);
        let (origin, copy) = (&fleet.members[0], &fleet.members[1]);
        assert!(
            copy.issuer.issuing() && copy.issuer.node().id == 0,
            "fenced {fenced}: the copy took node id 0 over: {:?}",
            copy.issuer.node()
        );
        assert!(
            origin.issuer.issuing() && origin.issuer.node().id != 0,
            "fenced {fenced}: the origin has a fresh id after one claim: {:?}",
            origin.issuer.node()
        );
    }
}

/// A clone of a holder started while the registry restarts claims the moment the registry is
/// back, before its origin's renewer has noticed its session gone. It cannot prove it is the
/// running holder, and the origin was seen a moment ago: it waits, the origin reconnects at
/// once and heartbeats, and the clone is found out (the origin's session is open) and given an
/// id of its own. It used to take the origin's id as "the holder restarted".
#[test]
fn a_clone_started_during_a_registry_restart_never_takes_its_origins_id() {
    use Act::*;
    let done = Commit::Done;
    let mut acts = vec![
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Registry { up: false },
        Copy {
            s: 1,
            from: 0,
            same_label: false,
        },
        Wait { ms: LEASE / 4 },
        Registry { up: true },
        Round { s: 1, commit: done },
        Round { s: 1, commit: done },
        Round { s: 0, commit: done },
        Round { s: 1, commit: done },
        Round { s: 1, commit: done },
    ];
    for _ in 0..8 {
        acts.extend([
            Wait { ms: LEASE / 3 },
            Round { s: 0, commit: done },
            Round { s: 1, commit: done },
            Call { s: 0, want: 10 },
            Call { s: 1, want: 10 },
        ]);
    }
    let fleet = directed(&[None, None, None, None], true, &acts);
    let (origin, clone) = (&fleet.members[0], &fleet.members[1]);
    assert!(
        origin.issuer.issuing() && origin.issuer.node().id == 0,
        "the origin keeps node id 0: {:?}",
        origin.issuer.node().refusing
    );
    assert!(
        clone.issuer.issuing() && clone.issuer.node().id != 0,
        "the clone makes IDs under an id of its own: {:?} under {}",
        clone.issuer.node().refusing,
        clone.issuer.node().id
    );
    run_fleet(&[None, None, None, None], true, acts).expect("the end's checks hold");
}

/// A server is stopped cleanly (its claim released) and its data directory copied while it is
/// down (`cp -a`, a snapshot of its volume): the copy carries the same state file, token and
/// control file ("shut down"), and here the same label. Started before its origin or after it,
/// the copy never passes for the origin's planned restart: the origin, started again a moment
/// later, takes its id back at once, and the copy is refused (node id set) or given an id of its
/// own (unset), in both modes. Whichever started first used to take the id as the planned
/// restart, and a configured origin was then refused for as long as its copy ran.
#[test]
fn a_cold_copy_never_passes_for_its_origins_planned_restart() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        for configured in [Some(0), None] {
            for copy_first in [true, false] {
                let mut acts = vec![
                    Round { s: 0, commit: done },
                    Round { s: 0, commit: done },
                    Call { s: 0, want: 10 },
                    Wait { ms: LEASE / 3 },
                    Stop { s: 0 },
                    ColdCopy {
                        s: 1,
                        from: 0,
                        same_label: true,
                    },
                ];
                let (first, second) = if copy_first { (1, 0) } else { (0, 1) };
                for s in [first, second] {
                    acts.extend([
                        Start { s },
                        Round { s, commit: done },
                        Round { s, commit: done },
                    ]);
                }
                acts.extend([
                    Round { s: 1, commit: done },
                    Round { s: 1, commit: done },
                    Call { s: 0, want: 10 },
                    Call { s: 1, want: 10 },
                ]);
                let settings = [configured, None, None, None];
                let fleet = directed(&settings, fenced, &acts);
                let (origin, copy) = (&fleet.members[0], &fleet.members[1]);
                let case = format!("fenced {fenced}, {configured:?}, copy first {copy_first}");
                assert!(
                    origin.issuer.issuing() && origin.issuer.node().id == 0,
                    "{case}: the origin's planned restart keeps node id 0: {:?}",
                    origin.issuer.node().refusing
                );
                match configured {
                    Some(_) => assert_eq!(
                        copy.issuer.node().refusing,
                        Refusing::ClaimRefused,
                        "{case}: the copy is refused"
                    ),
                    None => assert!(
                        copy.issuer.issuing() && copy.issuer.node().id != 0,
                        "{case}: the copy makes IDs under an id of its own: {:?} under {}",
                        copy.issuer.node().refusing,
                        copy.issuer.node().id
                    ),
                }
                run_fleet(&settings, fenced, acts).expect("the end's checks hold");
            }
        }
    }
}
