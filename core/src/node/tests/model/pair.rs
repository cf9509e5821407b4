//! A primary and its standby: node ids changed by restarts, the standby's restartpoints and
//! restarts, a promotion with the standby's clock anywhere. The property over random phases, and
//! the cases written step by step.

use super::*;

#[derive(Clone, Debug)]
enum Pair {
    /// Time passes and the primary makes IDs.
    Call { jump: i64, want: u64 },
    /// The standby replays up to this many records received.
    Replay { records: usize },
    /// A restartpoint: the standby's WAL before it is not replayed again.
    Restartpoint,
    /// The primary restarts with this node id and a clock this far ahead.
    RestartPrimary { node: u32, lead: i64 },
    /// The standby restarts, configured as the primary is now (a standby keeps its primary's
    /// node id), and replays its WAL since the restartpoint.
    RestartStandby,
}

/// One phase of the pair's life: the primary (re)started with a node id and a lead, some calls,
/// some of its records replayed, and perhaps a restartpoint and a restart of the standby.
fn phase() -> impl Strategy<Value = Vec<Pair>> {
    let restart = (
        5u32..8,
        prop_oneof![Just(0i64), Just(3_600_000), Just(90_000)],
    )
        .prop_map(|(node, lead)| Pair::RestartPrimary { node, lead });
    // Calls close together, and some after a quiet spell (the wake: issued before their
    // reservation is written; this model's renewer writes only when a call waits).
    let jump = prop_oneof![4 => 0i64..1_000, 1 => 61_000i64..200_000];
    let calls = proptest::collection::vec(
        (jump, 1u64..200).prop_map(|(jump, want)| Pair::Call { jump, want }),
        0..6,
    );
    let replay = (0usize..30).prop_map(|records| Pair::Replay { records });
    (restart, calls, replay, any::<bool>(), any::<bool>()).prop_map(
        |(restart, calls, replay, restartpoint, restart_standby)| {
            let mut steps = vec![restart];
            steps.extend(calls);
            steps.push(replay);
            if restartpoint {
                steps.push(Pair::Restartpoint);
            }
            if restart_standby {
                steps.push(Pair::RestartStandby);
            }
            steps
        },
    )
}

struct Server {
    configured: u32,
    issuer: Issuer,
    file: Option<Reservation>,
    /// How far this server's clock is ahead of real time (ms; negative: behind).
    lead: i64,
}

impl Server {
    fn start(file: Option<Reservation>, configured: u32, lead: i64, standby: bool) -> Server {
        let settings = Settings {
            configured: Some(configured),
            registry: false,
        };
        let start = Node::start(
            &found(file),
            settings,
            standby,
            Boot {
                value: 0,
                after_clean_stop: false,
                place: 0,
            },
        );
        Server {
            configured,
            issuer: Issuer::start(&start),
            file: start.rewrite.as_ref().map(file_of).or(file),
            lead,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_024))]

    /// A standby's actors: whatever the primary's node ids, leads and restarts, and the
    /// standby's replay, restartpoints and restarts, the promoted standby (its clock behind or
    /// ahead) never issues an ID its primary issued, and issues only above every one its
    /// primary issued under a reservation it wrote (a wake's ID, issued before its reservation
    /// was written, may sort above). Synchronous replication: every record the primary wrote
    /// reaches the standby before the promotion. The primary's own restarts are held to the
    /// same rule.
    #[test]
    fn a_promoted_standby_never_issues_its_primarys_ids(
        phases in proptest::collection::vec(phase(), 1..5),
        promoted_lead in -30_000i64..60_000,
        at_a_wake in any::<bool>(),
    ) {
        run_pair(phases.concat(), promoted_lead, at_a_wake)?;
    }
}

/// One run of the pair: the primary's and the standby's steps, then the promotion with the
/// standby's clock `promoted_lead` ahead of real time, or (`at_a_wake`) at the time of the
/// primary's first ID that no reservation it wrote covers, if there is one (the worst clock).
fn run_pair(steps: Vec<Pair>, promoted_lead: i64, at_a_wake: bool) -> Result<(), TestCaseError> {
    let mut now = T0;
    let mut primary = Server::start(None, 5, 0, false);
    let mut wal: Vec<Record> = vec![];
    let mut standby = Server::start(None, 5, 0, true);
    let (mut replayed, mut restartpoint) = (0usize, 0usize);
    // Every ID the primary issued, by node id, and the last one of its current run.
    let mut issued: HashMap<u32, Vec<i64>> = HashMap::new();
    let mut run_top = -1i64;
    // The highest reservation the primary wrote for each node id (every one reaches the
    // standby), and the highest ID below it.
    let covered_top = |issued: &HashMap<u32, Vec<i64>>, wal: &[Record], node: u32| {
        let until = wal
            .iter()
            .filter(|r| r.node == Some(node))
            .map(|r| r.until)
            .max()
            .unwrap_or(i64::MIN);
        issued.get(&node).map_or(-1, |ids| {
            ids.iter()
                .copied()
                .filter(|&id| L.id_unix_ms(id).unwrap() < until)
                .max()
                .unwrap_or(-1)
        })
    };
    for step in steps {
        match step {
            Pair::Call { jump, want } => {
                now += jump;
                let p = &mut primary;
                let node = *p.issuer.node();
                let ids = issue(&mut p.issuer, now + p.lead, want, |durable| {
                    p.file = Some(file_of(durable));
                    wal.push(Record {
                        until: durable.until,
                        layout: L,
                        node: durable.node,
                        identity: None,
                    });
                });
                let covered = covered_top(&issued, &wal, node.id);
                let before = issued.entry(node.id).or_default();
                for id in ids {
                    prop_assert!(id > run_top, "the primary went back under node {}", node.id);
                    prop_assert!(
                        id > covered,
                        "the primary went below a covered ID of node {}",
                        node.id
                    );
                    prop_assert!(!before.contains(&id), "the primary issued {id} twice");
                    before.push(id);
                    run_top = id;
                }
            }
            Pair::Replay { records } => {
                let end = (replayed + records).min(wal.len());
                for record in &wal[replayed..end] {
                    let s = &mut standby;
                    if let Some(d) = s.issuer.replay(record, Some(s.configured)) {
                        s.file = Some(file_of(&d));
                    }
                }
                replayed = end;
            }
            Pair::Restartpoint => restartpoint = replayed,
            Pair::RestartPrimary { node, lead } => {
                primary = Server::start(primary.file, node, lead, false);
                run_top = -1;
            }
            Pair::RestartStandby => {
                standby = Server::start(standby.file, primary.configured, 0, true);
                for record in &wal[restartpoint..replayed] {
                    let s = &mut standby;
                    if let Some(d) = s.issuer.replay(record, Some(s.configured)) {
                        s.file = Some(file_of(&d));
                    }
                }
            }
        }
    }
    // The promotion: the rest of the WAL replayed, then IDs from the standby's clock.
    for record in &wal[replayed..] {
        let s = &mut standby;
        if let Some(d) = s.issuer.replay(record, Some(s.configured)) {
            s.file = Some(file_of(&d));
        }
    }
    let s = &mut standby;
    let node = *s.issuer.node();
    let top = covered_top(&issued, &wal, node.id);
    let primarys = issued.get(&node.id).cloned().unwrap_or_default();
    let wake = primarys.iter().copied().find(|&id| id > top);
    let clock = match wake {
        Some(id) if at_a_wake => L.id_unix_ms(id).unwrap(),
        _ => now + promoted_lead,
    };
    for id in issue(&mut s.issuer, clock, 1, |_| {}) {
        prop_assert!(
            id > top,
            "the promoted standby (node {}) issued {id}, below its primary's {top}",
            node.id
        );
        prop_assert!(
            !primarys.contains(&id),
            "the promoted standby issued its primary's {id}"
        );
    }
    Ok(())
}

/// A standby that replayed its primary's move to a new node id, restarted and promoted with its
/// clock behind, step by step: the model's deterministic case.
#[test]
fn a_standby_remembers_its_primarys_new_node_id_step_by_step() {
    use Pair::*;
    let steps = vec![
        RestartPrimary {
            node: 5,
            lead: 3_600_000,
        },
        Call {
            jump: 10,
            want: 100,
        },
        Replay { records: 19 },
        RestartPrimary { node: 6, lead: 0 },
        Call {
            jump: 10,
            want: 100,
        },
        Call {
            jump: 900,
            want: 100,
        },
        Replay { records: 19 },
        Restartpoint,
        RestartStandby,
    ];
    run_pair(steps, -500, false).unwrap();
}

/// The wake across a promotion (`generator.rs`, *The wake*): the primary's first call after a
/// quiet spell is issued before its reservation is written, and the standby, promoted before
/// that record reaches it, with its clock at that very time, never issues that ID.
#[test]
fn a_standby_promoted_during_its_primarys_wake_never_issues_the_wakes_ids() {
    use Pair::*;
    let steps = vec![
        RestartPrimary { node: 5, lead: 0 },
        Call { jump: 0, want: 1 },
        Call {
            jump: 120_000,
            want: 1,
        },
    ];
    run_pair(steps, 0, true).unwrap();
}
