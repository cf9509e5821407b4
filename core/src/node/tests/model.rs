//! Models that can break the server's identity: the transitions of [`Node`] driven together
//! with the generator, the state file, the WAL and the registry's decisions, by actors that
//! crash, restart, replay, promote, race, partition, step their clocks and heal at any step. A
//! renewer's turn and its contact with the registry are the core's own (`renewer::Renewer`,
//! `node::contact`, over `registry::table`'s procedures), turned over an in-memory table
//! ([`Session`]) and the member ([`Turning`], [`Host`]) where the extension turns them over SQL
//! and shared memory; the other actors mirror the extension (`src/reservation/redo.rs`, the
//! renewer's exit in `src/registry/holder.rs`): only the I/O is modelled.
//!
//! The properties are the safety model's: no ID issued twice across the servers (in available
//! mode, none once a partition has healed and the registry was reached), one registry row per
//! server, and no refusal at the end that the docs do not list.

use super::*;
use crate::clock::Clocks;
use crate::generator::{Allocation, Limits};
use crate::issuer::{Issuer, Renewal};
use crate::layout::{Layout, DEFAULT_EPOCH_UNIX_MS, DEFAULT_LAYOUT};
use crate::node::contact;
use crate::node::holder::{GivenUp, HolderState};
use crate::registry::table::{self, Lowering, RenewRequest, Request, Retirement, RowRead, Table};
use crate::registry::{exchange_deadline_ms, Bounds, LayoutRows, Row};
use crate::renewer::{self, Renewer};
use proptest::prelude::*;
use std::cell::Cell;
use std::collections::{btree_map::Entry, BTreeMap, BTreeSet, HashMap};

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
        claim: durable.claim,
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
                    claim: turn.claim,
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

/// The durable state of a reservation until `until` with `node`'s identity.
fn durable(node: &Node, until: i64, configured: Option<u32>) -> Durable {
    Durable {
        until,
        node: node.known_id(configured),
        history: node.history,
        claim: node.claim,
    }
}

// ---------------------------------------------------------------------------------------------
// A primary and its standby: node ids changed by restarts, the standby's restartpoints and
// restarts, a promotion with the standby's clock anywhere.

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
    /// standby's replay, restartpoints and restarts, the promoted standby (its clock behind or ahead)
    /// never issues an ID its primary issued, and issues only above every one its primary
    /// issued under a reservation it wrote (a wake's ID, issued before its reservation was
    /// written, may sort above). Synchronous replication: every record the primary wrote
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
                        claim: None,
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

// ---------------------------------------------------------------------------------------------
// A fleet on one registry: configured and assigned node ids, fenced or available, with crashes
// between any two durable writes, partitions that heal, registry outages, commits that fail or
// whose answer is lost, retirements.

const LEASE: i64 = 3_000;
const MARGIN: i64 = 2_000;
/// The node ids the model's layout has (a small fleet runs out of them quickly).
const MAX_NODE: u32 = 3;
const SERVERS: usize = 4;

#[derive(Clone, Debug)]
enum Act {
    /// Time passes.
    Wait { ms: i64 },
    /// Server `s` makes IDs.
    Call { s: usize, want: u64 },
    /// Server `s`'s renewer turns: a contact (claim or heartbeat), the pin, the publication.
    Turn { s: usize, commit: Commit },
    /// Server `s` is killed and restarted from its state file.
    Crash { s: usize },
    /// Server `s`'s renewer exits and releases its claim (`Node::release`); `restart`: with
    /// the server, a clean shutdown and start.
    Release { s: usize, restart: bool },
    /// Server `s`'s link to the registry is cut, or healed.
    Link { s: usize, up: bool },
    /// The registry stops (every session ends) or starts.
    Registry { up: bool },
    /// The registry's server notices sessions whose client is gone, and ends them.
    Notice,
    /// An operator retires node id `node`.
    Retire { node: u32 },
    /// A row of another layout appears in the table under node id `node` if it has no row
    /// (another fleet's server pointed at this registry, a hand edit): under an id above the
    /// fleet's or among its own, it blocks its own id only (FLEETS, the failure table).
    Stray { node: u32 },
    /// Server `s`'s wall clock is set `offset` ms off the registry's (a step either way; its
    /// monotonic clock does not move).
    Clock { s: usize, offset: i64 },
    /// Server `s` is gone for good and a copy of server `from`'s data directory runs in its
    /// place (pg_basebackup, a restored snapshot, a cloned VM): `from`'s state file, settings
    /// and system identifier, tokens of its own; `same_label`: `from`'s label too (a cloned
    /// VM keeps cluster name, host name and port), else `s`'s.
    Copy {
        s: usize,
        from: usize,
        same_label: bool,
    },
    /// Server `s` is gone for good and a new server of another layout ([`other_layout`]: the
    /// node and sequence fields split otherwise) runs in its place, node id unset, pointed at
    /// this registry (another fleet's, a mistyped setting).
    Foreign { s: usize },
    /// Server `from` fails over to its synchronous standby, which runs in place of server
    /// `s` (gone for good) from `from`'s state as it is (every record reached it), started as
    /// a standby and promoted; `fresh`: with `fresh_node_id_on_promotion`. The old primary is
    /// killed: in fenced mode it comes back at once (the registry's mark fences it); in
    /// available mode the operator fences it as FLEETS asks, and a new server with its settings
    /// runs in its place.
    Failover { s: usize, from: usize, fresh: bool },
    /// The registry fails over to its synchronous standby on a host whose clock is `skew` ms
    /// off real time: every session (and advisory lock) ends; the rows are as committed.
    RegistryFailover { skew: i64 },
    /// Server `s` is gone for good and a server that made IDs without a registry under node
    /// id `node` (a few in each of `span` milliseconds), its clock `lead` ms ahead, joins in
    /// its place with its node id unset and its clock set right (FLEETS, *Servers that already
    /// make IDs*): its state file names `node`, which its first claim records as used.
    Join {
        s: usize,
        node: u32,
        lead: i64,
        span: i64,
    },
    /// Server `s` is switched to `fenced` mode, or to available (`ALTER SYSTEM` and a reload):
    /// its renewer's next turn publishes what the new mode lets it do (before its contact,
    /// which may not reach the registry).
    Mode { s: usize, fenced: bool },
    /// Server `s`'s disk turns slow (every fsync outlasts the time a claim may stay idle on the
    /// registry), or fast again: each claim it makes stalls on writing its intent while its
    /// transaction holds the registry table's lock, until the registry ends the transaction;
    /// the intent is written once the fsync returns, after the claim failed.
    Stall { s: usize, slow: bool },
}

/// The layout of [`Act::Foreign`]'s server: 9 bits of node id and 13 of sequence, so that its
/// node id 1's first ID of a millisecond is the fleet's node id 2's.
fn other_layout() -> Layout {
    Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1, 9, 13).expect("a valid layout")
}

/// How a claim's COMMIT ends.
#[derive(Clone, Copy, Debug)]
enum Commit {
    Done,
    /// Committed, but the answer never reached the server (a time-out): its session is gone.
    AnswerLost,
    /// Not committed: the session failed first.
    Failed,
}

fn act() -> impl Strategy<Value = Act> {
    let s = 0..SERVERS;
    let commit = prop_oneof![
        8 => Just(Commit::Done),
        1 => Just(Commit::AnswerLost),
        1 => Just(Commit::Failed),
    ];
    prop_oneof![
        4 => (0i64..2_500).prop_map(|ms| Act::Wait { ms }),
        // A quiet spell: the next call is a wake (issued before its reservation is written).
        1 => (61_000i64..90_000).prop_map(|ms| Act::Wait { ms }),
        6 => (s.clone(), 1u64..100).prop_map(|(s, want)| Act::Call { s, want }),
        6 => (s.clone(), commit).prop_map(|(s, commit)| Act::Turn { s, commit }),
        1 => s.clone().prop_map(|s| Act::Crash { s }),
        1 => (s.clone(), any::<bool>()).prop_map(|(s, restart)| Act::Release { s, restart }),
        2 => (s, any::<bool>()).prop_map(|(s, up)| Act::Link { s, up }),
        1 => any::<bool>().prop_map(|up| Act::Registry { up }),
        2 => Just(Act::Notice),
        1 => (0..=MAX_NODE).prop_map(|node| Act::Retire { node }),
        1 => (0..=MAX_NODE + 2).prop_map(|node| Act::Stray { node }),
        // A step within the clock check's margin (either way), past it, or back to right.
        1 => (0..SERVERS, prop_oneof![
            Just(0i64),
            Just(MARGIN / 2),
            Just(-MARGIN / 2),
            Just(3 * MARGIN),
            Just(-3 * MARGIN),
        ])
            .prop_map(|(s, offset)| Act::Clock { s, offset }),
        1 => (0..SERVERS, 0..SERVERS, any::<bool>())
            .prop_map(|(s, from, same_label)| Act::Copy { s, from, same_label }),
        1 => (0..SERVERS).prop_map(|s| Act::Foreign { s }),
        1 => (0..SERVERS, 0..SERVERS, any::<bool>())
            .prop_map(|(s, from, fresh)| Act::Failover { s, from, fresh }),
        1 => prop_oneof![Just(0i64), Just(MARGIN / 2), Just(-MARGIN / 2), Just(3 * MARGIN)]
            .prop_map(|skew| Act::RegistryFailover { skew }),
        1 => (0..SERVERS, any::<bool>()).prop_map(|(s, fenced)| Act::Mode { s, fenced }),
        1 => (0..SERVERS, any::<bool>()).prop_map(|(s, slow)| Act::Stall { s, slow }),
    ]
}

/// One row of the registry's table.
#[derive(Clone, Debug, Hash)]
struct RegRow {
    holder: Identity,
    high_water: i64,
    lease_until: i64,
    retired: bool,
    label: String,
    system: u64,
    layout: String,
    claimed_at: i64,
    last_seen: i64,
    /// The data directory whose claim wrote it ([`Member::range`]; 0: none of the fleet's).
    by: u128,
    /// The boot value its holder wrote with its claim and heartbeats (`None`: none).
    boot: Option<u64>,
    /// Released by its holder's renewer on its way out, not claimed or renewed since.
    released: bool,
    /// The data directories ([`Member::range`]) whose claims recorded this id as used here
    /// since the row was last written by a claim (`Table::record_used`).
    recorded_by: Vec<u128>,
}

#[derive(Clone, Debug, Default, Hash)]
struct Registry {
    up: bool,
    rows: BTreeMap<u32, RegRow>,
    /// The session holding each id's advisory lock.
    locks: BTreeMap<u32, u64>,
    /// The sessions open now: one the registry ended fails its client's next exchange.
    open: BTreeSet<u64>,
    /// Its clock less real time (ms): another host's after a failover ([`Act::RegistryFailover`]).
    skew: i64,
    next_session: u64,
    /// When its server last started (its clock): `pg_postmaster_start_time()`. A failover's
    /// standby started long before, as far as the model knows.
    started: i64,
    /// The stalled claims that hold or wait for the table's lock ([`Act::Stall`]), in the
    /// lock's queue: whose (its data directory, [`Member::range`]), and until when (the
    /// registry's clock) it holds the lock before the registry ends it for being idle.
    locked: Vec<(u128, i64)>,
}

impl Registry {
    fn new_session(&mut self) -> u64 {
        self.next_session += 1;
        self.open.insert(self.next_session);
        self.next_session
    }

    fn end_session(&mut self, session: u64) {
        self.locks.retain(|_, held| *held != session);
        self.open.remove(&session);
    }

    /// Ends every session but `kept` (the registry's server noticed their clients gone).
    fn end_sessions_but(&mut self, kept: &[u64]) {
        self.locks.retain(|_, session| kept.contains(session));
        self.open.retain(|session| kept.contains(session));
        // A stalled claim's session is never one kept (its server waits on its disk).
        self.locked.clear();
    }
}

/// The exchange that failed (the session is gone, or the commit's answer with it).
#[derive(Debug)]
struct Failed;

/// The registry's table in memory, as one session sees it at `now` (`client::Sql` in SQL): a
/// transaction's writes are kept apart until its commit, which ends as `commit` says.
struct Session<'a> {
    registry: &'a mut Registry,
    session: u64,
    now: i64,
    commit: Commit,
    /// The data directory it serves ([`Member::range`]; 0: an operator's).
    by: u128,
    /// The rows as the open transaction wrote them (`None`: no transaction open).
    pending: Option<BTreeMap<u32, RegRow>>,
    /// How long the open transaction may stay idle on the registry (`Table::begin`).
    idle_limit_ms: i64,
    /// The claimant's disk stalled on its intent ([`Act::Stall`]): the registry ends the
    /// transaction once it has been idle its idle limit, and its COMMIT fails.
    stalled: &'a Cell<bool>,
}

impl<'a> Session<'a> {
    /// A session at real time `now` (its clock is the registry's: `now` and its skew).
    fn new(
        registry: &'a mut Registry,
        session: u64,
        now: i64,
        commit: Commit,
        stalled: &'a Cell<bool>,
    ) -> Session<'a> {
        Session {
            now: now + registry.skew,
            registry,
            session,
            commit,
            by: 0,
            pending: None,
            idle_limit_ms: 0,
            stalled,
        }
    }

    fn rows(&mut self) -> &mut BTreeMap<u32, RegRow> {
        self.pending.as_mut().unwrap_or(&mut self.registry.rows)
    }

    fn live(&mut self, node: u32, holder: Identity) -> Option<&mut RegRow> {
        self.rows()
            .get_mut(&node)
            .filter(|r| !r.retired && r.holder == holder)
    }
}

impl Table for Session<'_> {
    type Failure = Failed;

    fn begin(&mut self, idle_limit_ms: i64) -> Result<(), Failed> {
        self.pending = Some(self.registry.rows.clone());
        self.idle_limit_ms = idle_limit_ms;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), Failed> {
        let written = self.pending.take().expect("a transaction");
        if self.stalled.get() {
            // The table stays locked until the registry ends the idle transaction (which took
            // the lock once the claims ahead of it in the queue were ended).
            let start = self
                .registry
                .locked
                .last()
                .map_or(self.now, |&(_, until)| until);
            let until = start.max(self.now) + self.idle_limit_ms;
            self.registry.locked.push((self.by, until));
            return Err(Failed);
        }
        match self.commit {
            Commit::Done => {
                self.registry.rows = written;
                Ok(())
            }
            Commit::AnswerLost => {
                self.registry.rows = written;
                Err(Failed)
            }
            Commit::Failed => Err(Failed),
        }
    }

    fn rollback(&mut self) {
        self.pending = None;
    }

    fn clock(&mut self) -> Result<i64, Failed> {
        Ok(self.now)
    }

    fn layouts(&mut self) -> Result<Vec<LayoutRows>, Failed> {
        let mut layouts: Vec<LayoutRows> = vec![];
        for (&node, r) in self.rows().iter() {
            let oldest = (r.claimed_at, node);
            match layouts.iter_mut().find(|l| l.layout == r.layout) {
                Some(l) => {
                    l.rows += 1;
                    if oldest < (l.first_claimed_at, l.first_node) {
                        (l.first_claimed_at, l.first_node) = oldest;
                    }
                }
                None => layouts.push(LayoutRows {
                    layout: r.layout.clone(),
                    rows: 1,
                    first_node: node,
                    first_claimed_at: r.claimed_at,
                }),
            }
        }
        Ok(layouts)
    }

    fn cluster_known(&mut self, system: u64) -> Result<bool, Failed> {
        Ok(self.rows().values().any(|r| r.system == system))
    }

    fn record_used(&mut self, node: u32, request: &Request) -> Result<(), Failed> {
        let (now, by) = (self.now, self.by);
        let until = request.used_until;
        let row = self.rows().entry(node).or_insert(RegRow {
            holder: Identity {
                token: 0,
                generation: 0,
            },
            high_water: until,
            lease_until: now,
            retired: true,
            label: request.label.clone(),
            system: request.system,
            layout: request.layout.clone(),
            claimed_at: now,
            last_seen: now,
            by: 0,
            boot: None,
            released: false,
            recorded_by: vec![],
        });
        row.recorded_by.push(by);
        // A live row's mark moves by a millisecond at least, as `client::Sql` moves it.
        let moved = if row.retired {
            row.high_water
        } else {
            row.high_water.saturating_add(1)
        };
        row.high_water = moved.max(until);
        Ok(())
    }

    /// `pg_try_advisory_lock` in this session: taken if free or already this session's.
    fn try_lock(&mut self, node: u32) -> Result<bool, Failed> {
        Ok(*self.registry.locks.entry(node).or_insert(self.session) == self.session)
    }

    fn unlock(&mut self, node: u32) -> Result<(), Failed> {
        if self.registry.locks.get(&node) == Some(&self.session) {
            self.registry.locks.remove(&node);
        }
        Ok(())
    }

    fn read_row(&mut self, node: u32) -> Result<Option<RowRead>, Failed> {
        let started = self.registry.started;
        Ok(self.rows().get(&node).map(|r| RowRead {
            row: Row {
                absent_since: r.last_seen.max(started),
                ..row_of(node, r)
            },
            label: r.label.clone(),
            layout: r.layout.clone(),
        }))
    }

    fn candidates(&mut self, request: &Request, limit: usize) -> Result<Vec<u32>, Failed> {
        Ok((0..=request.max_node).take(limit).collect())
    }

    fn write_claim(
        &mut self,
        node: u32,
        identity: Identity,
        mark: i64,
        request: &Request,
    ) -> Result<(), Failed> {
        let (now, by) = (self.now, self.by);
        let rows = self.rows();
        let high_water = rows.get(&node).map_or(i64::MIN, |r| r.high_water);
        rows.insert(
            node,
            RegRow {
                holder: identity,
                high_water: high_water.max(mark),
                lease_until: now + request.lease_ms,
                retired: false,
                label: request.label.clone(),
                system: request.system,
                layout: request.layout.clone(),
                claimed_at: now,
                last_seen: now,
                by,
                boot: Some(request.boot),
                released: false,
                recorded_by: vec![],
            },
        );
        Ok(())
    }

    fn renew(
        &mut self,
        node: u32,
        identity: Identity,
        renewal: &RenewRequest,
    ) -> Result<Option<i64>, Failed> {
        let now = self.now;
        Ok(self.live(node, identity).map(|r| {
            let before = r.high_water;
            r.lease_until = now + renewal.lease_ms;
            r.last_seen = now;
            r.high_water = r.high_water.max(renewal.high_water);
            r.boot = Some(renewal.boot);
            r.released = false;
            before
        }))
    }

    fn live_label(&mut self, node: u32) -> Result<Option<String>, Failed> {
        Ok(self
            .rows()
            .get(&node)
            .filter(|r| !r.retired)
            .map(|r| r.label.clone()))
    }

    fn release(
        &mut self,
        node: u32,
        claim: Identity,
        lower: Option<Lowering>,
        covers: i64,
    ) -> Result<Option<bool>, Failed> {
        Ok(self.live(node, claim).map(|r| {
            r.released = true;
            let lowered = lower
                .filter(|l| r.high_water == l.from && l.from != i64::MIN)
                .map(|l| r.high_water = l.mark)
                .is_some();
            if !lowered {
                r.high_water = r.high_water.max(covers);
            }
            lowered
        }))
    }

    fn retire_row(&mut self, node: u32) -> Result<(), Failed> {
        if let Some(r) = self.rows().get_mut(&node) {
            r.retired = true;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash)]
struct Member {
    settings: Settings,
    /// `pg_snowflake.registry_mode = fenced` ([`Act::Mode`] switches it).
    fenced: bool,
    issuer: Issuer,
    file: Option<Reservation>,
    session: Option<u64>,
    /// Its renewer: what it remembers of its claim, its clock's last reading, its next contact.
    renewer: Renewer,
    link: bool,
    /// When a contact last reached the registry (whatever it found).
    reached_at: i64,
    /// The lease of the claim a renewer that exited held: until its successor claims, the
    /// server goes on under it (in available mode, past it).
    orphaned: Option<Lease>,
    /// The mark a released claim left in the registry: until the next claim, no reservation
    /// reaches past it.
    released: Option<i64>,
    tokens: u128,
    /// Its label and system identifier in the registry: a member's own, kept across restarts;
    /// a copy's are its origin's ([`Act::Copy`]).
    label: String,
    system: u64,
    /// The first of its tokens: 2^64 of them, a server's own.
    range: u128,
    /// Its wall clock less the registry's (ms): kept across restarts ([`Act::Clock`]).
    offset: i64,
    /// Crashes of its data directory so far (a copy's include its origin's): each may resume a
    /// lease past the last reservation (FLEETS, *a crash in fenced mode resumes at the
    /// registry's mark*), so each adds a lease to how far ahead its IDs may be stamped.
    crashes: i64,
    /// The layout of its IDs: the fleet's ([`L`]), or another ([`Act::Foreign`]).
    layout: Layout,
    /// Its last claim was refused for its layout (`Refusal::OtherLayout`).
    refused_for_layout: bool,
    /// `pg_snowflake.fresh_node_id_on_promotion` ([`Act::Failover`]).
    fresh_on_promotion: bool,
    /// The claim a promoted standby started under, its primary's ([`Act::Failover`]): the
    /// only claim its contacts may retire.
    inherited: Option<Identity>,
    /// The data directory it is a copy of ([`Act::Copy`], [`Act::Failover`]: its origin's
    /// [`Member::range`], or its origin's origin).
    origin: Option<u128>,
    /// Its last claim was refused as a copy of its claim's holder (`Refusal::found_a_copy`).
    refused_as_copy: bool,
    /// When (the model's clock) a claim or heartbeat of its claim last recorded its mark, in a
    /// mode that has granted it a ceiling since (`None`: none since its start, its last loss,
    /// release, switch to fenced mode or step of its clock ahead).
    marked_at: Option<i64>,
    /// Its state file cannot be written (a directory in the way of its temporary file, a
    /// read-only disk): every claim's intent fails, and the registry's transaction with it.
    unwritable: bool,
    /// Its disk is slow ([`Act::Stall`]): kept across restarts (the same disk).
    slow_disk: bool,
    /// The IDs a joiner made without a registry ([`Act::Join`]), until a claim of its records
    /// them as used: their node id, the last one's stamp, and the IDs.
    unjoined: Option<(u32, i64, Vec<i64>)>,
}

impl Member {
    fn start(settings: Settings, file: Option<Reservation>, id: usize, tokens: u128) -> Member {
        Member::start_in(L, settings, file, id, tokens, false)
    }

    fn start_in(
        layout: Layout,
        settings: Settings,
        file: Option<Reservation>,
        id: usize,
        tokens: u128,
        standby: bool,
    ) -> Member {
        Member::started(layout, settings, file, id, tokens, standby, false)
    }

    /// [`Member::start_in`], `after_clean_stop` or not (a clean restart, or a crash).
    fn started(
        layout: Layout,
        settings: Settings,
        file: Option<Reservation>,
        id: usize,
        tokens: u128,
        standby: bool,
        after_clean_stop: bool,
    ) -> Member {
        // Each start draws a boot value none other has: its shared memory's.
        static BOOTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let boot = BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let boot = Boot {
            value: boot,
            after_clean_stop,
        };
        let start = Node::start(&found(file), settings, standby, boot);
        Member {
            settings,
            fenced: true,
            issuer: Issuer::start(&start),
            file: start.rewrite.as_ref().map(|d| file_in(d, layout)).or(file),
            session: None,
            renewer: Renewer::default(),
            link: true,
            reached_at: i64::MIN,
            orphaned: None,
            released: None,
            tokens: tokens.max((id as u128 + 1) << 64),
            label: format!("member {id}"),
            system: id as u64 + 1,
            range: (id as u128 + 1) << 64,
            offset: 0,
            crashes: 0,
            layout,
            refused_for_layout: false,
            fresh_on_promotion: false,
            inherited: None,
            origin: None,
            refused_as_copy: false,
            marked_at: None,
            unwritable: false,
            slow_disk: false,
            unjoined: None,
        }
    }

    /// The same server started again from its state file (a crash's or a clean restart's),
    /// its registry session left to the caller.
    fn restarted(&self, s: usize, after_clean_stop: bool) -> Member {
        let (layout, settings, file, tokens) = (self.layout, self.settings, self.file, self.tokens);
        let mut m = Member::started(layout, settings, file, s, tokens, false, after_clean_stop);
        m.fenced = self.fenced;
        m.fresh_on_promotion = self.fresh_on_promotion;
        m.link = self.link;
        m.system = self.system;
        m.range = self.range;
        m.offset = self.offset;
        m.label = self.label.clone();
        m.crashes = self.crashes;
        m.inherited = self.inherited;
        m.origin = self.origin;
        m.slow_disk = self.slow_disk;
        m.unjoined = self.unjoined.clone();
        m
    }

    fn new_token(&mut self) -> u128 {
        self.tokens += 1;
        self.tokens
    }

    fn write(&mut self, durable: &Durable) {
        self.file = Some(file_in(durable, self.layout));
    }
}

/// A member as its renewer turns it ([`renewer::Server`]): the fleet's registry, the member's
/// session, state file and issuing state.
struct Turning<'f> {
    fleet: &'f mut Fleet,
    s: usize,
    /// How a claim's COMMIT ends in this turn.
    commit: Commit,
    /// A check of the model that failed during the turn.
    checked: Result<(), TestCaseError>,
}

impl renewer::Server for Turning<'_> {
    type Failure = Failed;

    fn monotonic(&mut self) -> i64 {
        self.fleet.now
    }

    fn session_lost(&mut self) -> bool {
        let fleet = &self.fleet;
        let m = &fleet.members[self.s];
        // Seen only where the registry's end of it reaches the server.
        fleet.registry.up
            && m.link
            && m.session
                .is_some_and(|session| !fleet.registry.open.contains(&session))
    }

    fn contact(
        &mut self,
        state: &mut HolderState,
        settings: &contact::Settings,
    ) -> Result<Option<i64>, Failed> {
        match self.fleet.contact(self.s, self.commit, state, settings) {
            Ok(answered) => answered,
            Err(failed) => {
                self.checked = Err(failed);
                Err(Failed)
            }
        }
    }

    fn pin(&mut self) -> bool {
        // The pin: the state file (and the WAL) with the claim, before any ID.
        let m = &mut self.fleet.members[self.s];
        let (node, reserved) = m.issuer.state();
        let pin = durable(&node, reserved, None);
        m.write(&pin);
        true
    }

    fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, now: i64) {
        self.fleet.members[self.s]
            .issuer
            .publish(holding, skewed, fenced, now);
    }
}

/// A member as a contact sees it (`node::contact::Host`; shared memory and the state file in
/// the extension).
struct Host<'a> {
    m: &'a mut Member,
    now: i64,
    fenced: bool,
    /// Set when its intent's write stalls ([`Act::Stall`]), for the claim's [`Session`].
    stalled: &'a Cell<bool>,
    /// The clock offset the contact read, if it read one.
    offset: Option<i64>,
}

impl contact::Host for Host<'_> {
    type Failure = Failed;

    fn wall(&mut self) -> i64 {
        self.now + self.m.offset
    }

    fn monotonic(&mut self) -> i64 {
        self.now
    }

    fn state(&mut self) -> (Node, i64) {
        self.m
            .issuer
            .reaches(&mut Clocks::at(self.now + self.m.offset))
    }

    fn clock_read(&mut self, offset: i64, _sent: i64) {
        self.offset = Some(offset);
    }

    fn start_writing(&mut self) -> bool {
        true
    }

    fn stop_writing(&mut self) {}

    fn intend(&mut self, taken: &Claim, fenced: bool) -> Result<(), Failed> {
        // A claim's floor may raise the reservation past a released mark: the new claim's
        // mark covers it, whether or not it commits.
        let (intent, before) = self.m.issuer.intend(taken, fenced);
        if self.m.unwritable {
            self.m.issuer.intent_unwritten(before);
            return Err(Failed);
        }
        self.m.released = None;
        self.m.write(&intent);
        self.stalled.set(self.m.slow_disk);
        Ok(())
    }

    fn lease_renewed(&mut self, lease: &Lease, fenced: bool, before: i64) {
        debug_assert_eq!(fenced, self.fenced);
        self.m.issuer.lease_renewed(lease, fenced, before);
        // The heartbeat recorded a mark above the reservation: the release's is behind it.
        self.m.released = None;
    }

    fn disown(&mut self) {
        if let Some(durable) = self.m.issuer.disown() {
            self.m.write(&durable);
        }
    }

    fn retirement_pending(&mut self, given_up: Option<GivenUp>) {
        self.m.issuer.retirement_pending(given_up);
    }

    fn met_holder(&mut self) {
        self.m.issuer.met_holder();
    }

    fn names(&mut self) -> contact::Names {
        contact::Names {
            label: self.m.label.clone(),
            system: self.m.system,
            layout: self.m.layout.describe(),
            max_node: MAX_NODE,
        }
    }

    fn new_token(&mut self) -> u128 {
        self.m.new_token()
    }
}

#[derive(Clone, Debug, Hash)]
struct Fleet {
    now: i64,
    registry: Registry,
    members: Vec<Member>,
    /// Every ID issued: by which member, and whether it was made cut off from the registry
    /// past its lease (available mode).
    issued: BTreeMap<i64, (usize, bool)>,
    /// Registry sessions whose server process is gone (a crash, an exit that could not reach
    /// the registry), and since when: the registry ends each within two leases
    /// ([`Fleet::keepalives`]).
    gone: Vec<(u64, i64)>,
    /// Copies made so far, each with tokens of its own.
    copies: u128,
    /// The node ids promoted standbys gave up for fresh ones, to be retired: by which data
    /// directory ([`Member::range`]), after how many of its restarts, and the claim given up.
    given_up: BTreeMap<u32, (u128, i64, Identity)>,
    /// The mark each claim's row held when last seen naming it: what the registry knows of
    /// that claim's IDs after another has taken its id.
    marks: BTreeMap<(u128, i64), i64>,
    /// Every member's `pg_snowflake.registry_lease_ms` ([`LEASE`] unless a run sets another).
    lease: i64,
    /// The contacts made so far: the order of claims and records below.
    contacts: i64,
    /// After how many contacts each claim was first seen, noted as [`Fleet::marks`] is.
    claimed_at: BTreeMap<(u128, i64), i64>,
    /// The IDs joiners made before they joined, once a claim recorded their node id as used:
    /// after how many contacts.
    recorded: BTreeMap<i64, i64>,
}

impl Fleet {
    /// A fleet of servers with these configured node ids, none of which has claimed yet.
    fn new(configured: &[Option<u32>], fenced: bool) -> Fleet {
        let members = configured
            .iter()
            .enumerate()
            .map(|(i, &configured)| {
                let settings = Settings {
                    configured,
                    registry: true,
                };
                let mut m = Member::start(settings, None, i, 0);
                m.fenced = fenced;
                m
            })
            .collect();
        Fleet {
            now: T0,
            registry: Registry {
                up: true,
                ..Registry::default()
            },
            members,
            issued: BTreeMap::new(),
            gone: vec![],
            copies: 0,
            given_up: BTreeMap::new(),
            marks: BTreeMap::new(),
            lease: LEASE,
            contacts: 0,
            claimed_at: BTreeMap::new(),
            recorded: BTreeMap::new(),
        }
    }

    /// Notes the mark each live row holds for its claim.
    fn note_marks(&mut self) {
        for row in self.registry.rows.values() {
            let claim = (row.holder.token, row.holder.generation);
            self.marks.insert(claim, row.high_water);
            self.claimed_at.entry(claim).or_insert(self.contacts);
        }
    }

    /// What [`Fleet::call`] needs to tell, of an ID member `s` makes again, whether a joiner
    /// made it before it joined while `s`'s claim already held the id, before the registry
    /// knew of the joiner's IDs: two servers made IDs under one id, one of them outside the
    /// fleet, which no registry can keep apart (FLEETS, *Servers that already make IDs*: "IDs
    /// two servers made under one node id before either joined … are beyond it"). When
    /// `s`'s claim was taken, and the IDs joiners made that no claim has recorded yet.
    fn joiners_before(&self, s: usize) -> (Option<i64>, BTreeSet<i64>) {
        let claim = self.members[s].issuer.node().claim;
        let claimed = claim.and_then(|c| self.claimed_at.get(&(c.token, c.generation)).copied());
        let unrecorded = self
            .members
            .iter()
            .filter_map(|m| m.unjoined.as_ref())
            .flat_map(|(_, _, ids)| ids.iter().copied())
            .collect();
        (claimed, unrecorded)
    }

    /// The mark the registry holds for `claim` of node id `node`: its row's, while the row
    /// names it; the last one seen for it, once another claim has taken the id.
    fn mark_of(&self, node: u32, claim: Identity) -> Option<i64> {
        match self.registry.rows.get(&node) {
            Some(row) if row.holder == claim => Some(row.high_water),
            _ => self.marks.get(&(claim.token, claim.generation)).copied(),
        }
    }

    /// Server `s`'s process is gone: its registry session, if any, lives on until the registry
    /// notices (an `Act::Notice`, or keepalives a lease later).
    fn session_gone(&mut self, s: usize) {
        if let Some(session) = self.members[s].session.take() {
            self.gone.push((session, self.now));
        }
    }

    /// Server `s` is gone for good, another runs in its place: its session is left to the
    /// registry to notice, and the IDs it made without a registry and never told one of leave
    /// the count once no copy of its data carries them (made outside the fleet by a server
    /// that never claimed: FLEETS, *Servers that already make IDs*: "those of a server that
    /// never claims (it was replaced before its first claim reached the registry), are beyond
    /// it").
    fn gone_for_good(&mut self, s: usize) {
        self.session_gone(s);
        if let Some((_, _, ids)) = self.members[s].unjoined.take() {
            let carried: BTreeSet<i64> = self
                .members
                .iter()
                .filter_map(|m| m.unjoined.as_ref())
                .flat_map(|(_, _, ids)| ids.iter().copied())
                .collect();
            for id in ids.into_iter().filter(|id| !carried.contains(id)) {
                self.issued.remove(&id);
            }
        }
    }

    /// The registry ends the sessions whose process is gone, each at its own time over the
    /// real range (`registry::keepalives`): at once when the server's host answered with a
    /// reset ([`Act::Notice`] ends them all then), within two thirds of a lease by the TCP
    /// keepalives, within a lease by the user timeout when data was in flight, within two
    /// leases by the idle limit when a hung proxy answered the probes. Which one a session
    /// meets is drawn from its number: eight steps from a quarter of a lease to two leases.
    fn keepalives(&mut self) {
        let (now, lease, registry) = (self.now, self.lease, &mut self.registry);
        self.gone.retain(|&(session, since)| {
            let after = lease / 4 * (1 + (session.wrapping_mul(7_919) % 8) as i64);
            let ended = now - since >= after;
            if ended {
                registry.end_session(session);
            }
            !ended
        });
    }

    /// A turn's contact ([`renewer::Server::contact`]: `node::contact` on the member's
    /// session, made anew when it has none), answered as `commit` says: the clock offset it
    /// read, or `Err(Failed)` if the exchange failed; the outer `Err` is a check that failed.
    fn contact(
        &mut self,
        s: usize,
        commit: Commit,
        holder: &mut HolderState,
        settings: &contact::Settings,
    ) -> Result<Result<Option<i64>, Failed>, TestCaseError> {
        self.contacts += 1;
        let (now, fenced, lease) = (self.now, settings.fenced, self.lease);
        if !self.registry.up || !self.members[s].link {
            // The exchange times out and the server drops its session; the registry's end of
            // it lives on until its keepalives find the server gone.
            self.session_gone(s);
            return Ok(Err(Failed));
        }
        // A claim stalled on its intent holds the table's lock, which every exchange waits
        // for, until the registry ends it: behind one member's stalled claim no exchange waits
        // past its own deadline (FLEETS, *a member's disk stalls in the middle of its claim*).
        // Behind the claims of several, stalled at once, it may, as FLEETS says: it times out.
        // (The model does not move the clock for the wait.)
        let registry_now = now + self.registry.skew;
        self.registry
            .locked
            .retain(|&(_, until)| until > registry_now);
        if let Some(&(_, until)) = self.registry.locked.last() {
            let (waited, deadline) = (until - registry_now, exchange_deadline_ms(lease));
            let stalled: BTreeSet<u128> = self.registry.locked.iter().map(|l| l.0).collect();
            if waited > deadline {
                prop_assert!(
                    stalled.len() > 1,
                    "member {s}'s exchange waited {waited} ms behind a stalled claim, past its \
                     deadline of {deadline} ms (lease {lease} ms)"
                );
                self.session_gone(s);
                return Ok(Err(Failed));
            }
        }
        let registry = &mut self.registry;
        let holders: BTreeMap<u32, Identity> =
            registry.rows.iter().map(|(&n, r)| (n, r.holder)).collect();
        // Each live row's holder, the running server that wrote it if it still runs (the same
        // data directory and shared memory), and its last contact (the registry's clock, or its
        // start if later), before this contact.
        let seen: BTreeMap<u32, (Identity, Option<usize>, i64, bool)> = registry
            .rows
            .iter()
            .filter(|(_, r)| !r.retired)
            .map(|(&n, r)| {
                let running = self
                    .members
                    .iter()
                    .position(|o| o.range == r.by && Some(o.issuer.node().boot) == r.boot);
                let since = r.last_seen.max(registry.started);
                (n, (r.holder, running, since, r.released))
            })
            .collect();
        // Whether this member may take a released claim of its token at once, as the holder's
        // planned restart does (FLEETS, *The rules that keep IDs unique*, its one exemption).
        let (restarted_clean, token) = {
            let node = self.members[s].issuer.node();
            (
                node.after_clean_stop && !node.met_holder,
                node.claim.map(|c| c.token),
            )
        };
        let m = &mut self.members[s];
        m.reached_at = now;
        let session = match m.session {
            // Ended by the registry (it noticed the client gone, or restarted): the exchange
            // fails, and the next turn connects anew.
            Some(session) if !registry.open.contains(&session) => {
                m.session = None;
                return Ok(Err(Failed));
            }
            Some(session) => session,
            None => {
                holder.new_session();
                let session = registry.new_session();
                m.session = Some(session);
                session
            }
        };
        let stalled = Cell::new(false);
        let mut table = Session::new(registry, session, now, commit, &stalled);
        table.by = m.range;
        let mut host = Host {
            m,
            now,
            fenced,
            stalled: &stalled,
            offset: None,
        };
        let contacted = contact::contact(&mut table, &mut host, holder, settings);
        let offset = host.offset;
        // A contact retires only the claim its server gave up on a promotion, never a claim
        // made of the id since.
        if let Ok(
            contact::Contact::Granted { retired, .. } | contact::Contact::Renewed { retired, .. },
        ) = &contacted
        {
            if let Some((node, Ok(Retirement::Retired { .. }))) = retired {
                let under = holders.get(node).copied();
                prop_assert!(
                    under == m.inherited,
                    "member {} retired node id {} under a claim it did not give up ({:?}, not \
                     {:?})",
                    s,
                    node,
                    under,
                    m.inherited
                );
            }
        }
        match &contacted {
            Ok(contact::Contact::Refused { why, .. }) => {
                m.refused_for_layout = *why == Refusal::OtherLayout;
                m.refused_as_copy = why.found_a_copy();
            }
            Ok(contact::Contact::Granted { .. }) => {
                m.refused_for_layout = false;
                m.refused_as_copy = false;
                m.marked_at = Some(now);
            }
            Ok(contact::Contact::Renewed { .. }) => m.marked_at = Some(now),
            Ok(contact::Contact::Lost { .. }) => m.marked_at = None,
            _ => {}
        }
        if let Ok(contact::Contact::Granted { taken, .. }) = &contacted {
            // A running holder keeps its id: no other server's claim takes it within a
            // heartbeat interval and the clock margin of its holder's last contact (FLEETS,
            // *The rules that keep IDs unique*).
            // (Or of the registry's start, if later: no holder reaches a registry that is down.)
            if let Some(&(holder, Some(o), last_seen, released)) = seen.get(&taken.node) {
                let quiet = registry_now.saturating_sub(last_seen);
                let may_return = crate::registry::holder_may_return_ms(lease, MARGIN);
                let exempt = released && restarted_clean && token == Some(holder.token);
                prop_assert!(
                    holder == taken.identity || o == s || quiet >= may_return || exempt,
                    "member {s} took node id {} from member {o}, which runs and was last seen \
                     {quiet} ms ago (a running holder comes back within {may_return} ms)",
                    taken.node
                );
            }
        }
        if let Some(old) = holder.retire_pending {
            self.given_up
                .insert(old.node, (m.range, m.crashes, old.claim));
        }
        if contacted.is_err() || !holder.keeps_session() {
            registry.end_session(session);
            m.session = None;
        }
        if let Some((node, last, ids)) = m.unjoined.clone() {
            // Its claim recorded them (committed, whether or not its answer came back).
            let recorded = registry
                .rows
                .get(&node)
                .is_some_and(|r| r.recorded_by.contains(&m.range) && r.high_water > last);
            if recorded {
                // The registry knows of them: for every copy of the data that carries them.
                for o in &mut self.members {
                    if o.unjoined.as_ref().is_some_and(|u| u.2 == ids) {
                        o.unjoined = None;
                    }
                }
                for id in ids {
                    self.recorded.insert(id, self.contacts);
                }
            }
        }
        self.note_marks();
        Ok(contacted.map(|_| offset))
    }

    /// `renewer.rs`'s exit: a fenced claim's mark comes down to the durable reservation where
    /// the row still names the claim (`table::release`), and the session ends; then its
    /// successor's start.
    fn release(&mut self, s: usize) {
        let fenced = self.members[s].fenced;
        let reachable = self.registry.up && self.members[s].link;
        let m = &mut self.members[s];
        if let Some(released) = m.issuer.release() {
            if let Some(lower) = released.lower {
                m.released = Some(lower.mark);
            }
            if reachable {
                // On a connection of its own (`holder.rs`'s `release_on_exit`).
                let session = self.registry.new_session();
                let stalled = Cell::new(false);
                let mut table = Session::new(
                    &mut self.registry,
                    session,
                    self.now,
                    Commit::Done,
                    &stalled,
                );
                let (node, claim) = (released.node, released.claim);
                table::release(&mut table, node, claim, released.lower, released.covers)
                    .expect("the registry is up");
                self.registry.end_session(session);
            }
        }
        if let Some(session) = m.session.take() {
            if reachable {
                self.registry.end_session(session);
            } else {
                self.gone.push((session, self.now));
            }
        }
        let lease = m.renewer.state.held.map(|h| h.lease);
        m.orphaned = lease.or(m.orphaned);
        m.marked_at = None;
        // Its successor goes on under the claim in available mode, and claims again in fenced
        // mode; either way it retires what was left pending.
        m.renewer = Renewer::new(m.issuer.renewer_restarted(!fenced));
        self.note_marks();
    }

    /// The settings member `s`'s renewer turns under.
    fn settings_of(&self, s: usize) -> contact::Settings {
        let m = &self.members[s];
        contact::Settings {
            fenced: m.fenced,
            lease_ms: self.lease,
            max_clock_skew_ms: MARGIN,
            configured: m.settings.configured,
            fresh_on_promotion: m.fresh_on_promotion,
        }
    }

    /// Member `s`'s renewer turns (`Renewer::turn`) with its contact due now: the model turns
    /// a renewer at any moment, sooner than its heartbeat interval as readily as on time.
    fn turn(&mut self, s: usize, commit: Commit) -> Result<(), TestCaseError> {
        // A renewer whose claim stalled on its disk is stuck in that write until the registry
        // ends the claim (and after, as far as the model knows).
        let registry_now = self.now + self.registry.skew;
        let range = self.members[s].range;
        if self
            .registry
            .locked
            .iter()
            .any(|&(by, until)| by == range && until > registry_now)
        {
            return Ok(());
        }
        let settings = self.settings_of(s);
        let mut renewer = std::mem::take(&mut self.members[s].renewer);
        let mut turning = Turning {
            fleet: self,
            s,
            commit,
            checked: Ok(()),
        };
        renewer.turn(&mut turning, &settings);
        let checked = turning.checked;
        // Kept due: the next turn contacts whenever it comes (and states that differ only in
        // when a contact falls due are one state to the search).
        renewer.contact_now();
        self.members[s].renewer = renewer;
        checked
    }

    fn call(&mut self, s: usize, want: u64) -> Result<(), TestCaseError> {
        let now = self.now;
        let node = *self.members[s].issuer.node();
        // Every ID lies below the mark the registry holds for the claim it was made under, so
        // that whoever takes the id next starts above it (FLEETS, *The rules that keep IDs
        // unique*): in fenced mode always (no ID without a grant), in available mode unless it
        // was made while its ceiling had given way, counted (`Issuer::ids_past_mark`): the one
        // exemption the rules grant, and the only IDs a later holder may repeat.
        let granted = node.claim.and_then(|claim| self.mark_of(node.id, claim));
        let (claimed, unrecorded) = self.joiners_before(s);
        let m = &mut self.members[s];
        let counted_before = m.issuer.ids_past_mark();
        let mut file = m.file;
        let layout = m.layout;
        let ids = issue_in(&mut m.issuer, layout, now + m.offset, want, |durable| {
            file = Some(file_in(durable, layout));
        });
        m.file = file;
        // Past its release's mark only in available mode, counted (FLEETS, *The rules that
        // keep IDs unique*: the IDs made between a release and the next claim).
        let counted = m.issuer.past_the_mark();
        if let Some(mark) = m.released.filter(|_| !counted && !ids.is_empty()) {
            let until = m.issuer.generator().reserved_until();
            prop_assert!(
                until <= mark,
                "member {s} reserved to {until}, past its release {mark}"
            );
        }
        // How far ahead of the registry's clock an ID may be stamped: the mark a claim may
        // take (`registry::MARK_AHEAD_SLACK_MS`: the lease, the clock margin and a minute), and
        // a lease more for each crash since (each resumes a lease past the last reservation).
        let bound = self.lease * (1 + m.crashes) + MARGIN + crate::registry::MARK_AHEAD_SLACK_MS;
        let made = ids.len() as u64;
        for id in ids {
            let stamped = layout.id_unix_ms(id).expect("an ID of the layout");
            let mode = if m.fenced { "fenced" } else { "available" };
            prop_assert!(
                counted || granted.is_some_and(|mark| stamped < mark),
                "ID {id} of member {s}, {mode}, stamped {stamped}: not below the mark the \
                 registry holds for its claim ({granted:?}), and not counted as past it"
            );
            prop_assert!(
                stamped - now <= bound,
                "ID {id} of member {s} stamped {} ms ahead of the registry's clock, past {bound}",
                stamped - now
            );
            if let Some(&(other, other_counted)) = self.issued.get(&id) {
                prop_assert!(
                    counted || other_counted || {
                        let known_at = self
                            .recorded
                            .get(&id)
                            .copied()
                            .or(unrecorded.contains(&id).then_some(i64::MAX));
                        claimed.zip(known_at).is_some_and(|(c, k)| c < k)
                    },
                    "ID {id} (node {}) issued by member {s} and member {other}, neither counted \
                     as past the mark",
                    node.id
                );
            }
            self.issued.insert(id, (s, counted));
        }
        if counted && made > 0 {
            prop_assert!(
                m.issuer.ids_past_mark() > counted_before,
                "member {s} made {made} IDs past the mark, uncounted"
            );
            // Available mode's one risk comes only without heartbeats: the ceiling gives way
            // "only when no heartbeat has recorded a higher mark for about a lease (the
            // registry out of reach, the renewer stuck), when the server's clock is stepped
            // ahead past it, or between a renewer's release of its claim and its next claim"
            // (FLEETS, *The rules that keep IDs unique*, rule 3).
            let interval = crate::registry::heartbeat_interval_ms(self.lease);
            if let Some(at) = m.marked_at.filter(|&at| now - at < interval) {
                prop_assert!(
                    false,
                    "member {s} counted {made} IDs past the mark {} ms after a contact recorded \
                     its mark (within a heartbeat interval, {interval} ms): ceiling {}, \
                     reserved to {}, the registry's clock {now}",
                    now - at,
                    m.issuer.node().ceiling,
                    m.issuer.generator().reserved_until()
                );
            }
        }
        Ok(())
    }

    /// A connected holder keeps its id: where a member's open session holds a node id's
    /// advisory lock, the id's live row names that member's claim (no claim takes an id whose
    /// lock another session holds: the lock is how the registry knows its holder is there).
    fn locks_name_their_holders(&self) -> Result<(), TestCaseError> {
        for (&node, &session) in &self.registry.locks {
            let Some((s, m)) = self
                .members
                .iter()
                .enumerate()
                .find(|(_, m)| m.session == Some(session))
            else {
                continue;
            };
            if let Some(row) = self.registry.rows.get(&node).filter(|r| !r.retired) {
                prop_assert!(
                    m.issuer.node().claim == Some(row.holder),
                    "node id {node} taken from member {s}, whose session holds its lock: \
                     the row names {:?}, the member {:?}",
                    row.holder,
                    m.issuer.node().claim
                );
            }
        }
        Ok(())
    }

    /// One row per server: no member's claims wrote more than one live row (a copy's are its
    /// own, whatever token it carried).
    fn rows_per_member(&self) -> Result<(), TestCaseError> {
        for (s, m) in self.members.iter().enumerate() {
            let rows = self
                .registry
                .rows
                .values()
                .filter(|r| r.by == m.range && !r.retired)
                .count();
            prop_assert!(rows <= 1, "member {s} holds {rows} rows");
        }
        Ok(())
    }
}

fn fleet_settings() -> impl Strategy<Value = Vec<Option<u32>>> {
    proptest::collection::vec(prop_oneof![Just(None), (0..2u32).prop_map(Some)], SERVERS)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// The registry's actors: whatever crashes, partitions, outages, lost answers,
    /// retirements, copies and clock steps do, no ID is issued twice (in available mode: none
    /// by a member that reached the registry since its lease ran out), no member's tokens name
    /// two rows, and once every fault has healed each member makes IDs — or is refused a
    /// configured id another live member holds, or finds no id free.
    #[test]
    fn no_fleet_fault_makes_a_duplicate_or_strands_a_server(
        configured in fleet_settings(),
        fenced in any::<bool>(),
        acts in proptest::collection::vec(act(), 1..160),
    ) {
        run_fleet(&configured, fenced, acts)?;
    }
}

/// One run of the fleet: `acts`, then every fault healed and a few leases of turns, then the
/// end's check (see `no_fleet_fault_makes_a_duplicate_or_strands_a_server`).
fn run_fleet(
    configured: &[Option<u32>],
    fenced: bool,
    acts: Vec<Act>,
) -> Result<(), TestCaseError> {
    run_fleet_leased(configured, fenced, LEASE, acts)
}

/// [`run_fleet`] with every member's lease `lease` ms.
fn run_fleet_leased(
    configured: &[Option<u32>],
    fenced: bool,
    lease: i64,
    acts: Vec<Act>,
) -> Result<(), TestCaseError> {
    let mut fleet = Fleet::new(configured, fenced);
    fleet.lease = lease;
    for act in acts {
        fleet.checked(act)?;
    }
    healed(&mut fleet)
}

impl Fleet {
    /// One act, and the checks that hold after every act.
    fn checked(&mut self, act: Act) -> Result<(), TestCaseError> {
        self.act(act)?;
        self.keepalives();
        self.rows_per_member()?;
        self.locks_name_their_holders()
    }
}

/// The checks of the end: every fault heals, and the fleet settles as the docs promise.
fn healed(fleet: &mut Fleet) -> Result<(), TestCaseError> {
    // Every fault heals (clocks set right); the registry notices the dead sessions; time
    // passes lease by lease with every renewer turning.
    if !fleet.registry.up {
        fleet.registry.started = fleet.now + fleet.registry.skew;
    }
    fleet.registry.up = true;
    fleet.registry.skew = 0;
    for m in &mut fleet.members {
        m.link = true;
        m.offset = 0;
        m.slow_disk = false;
    }
    for _ in 0..12 {
        let live: Vec<u64> = fleet.members.iter().filter_map(|m| m.session).collect();
        fleet.registry.end_sessions_but(&live);
        fleet.now += fleet.lease / 2;
        for s in 0..SERVERS {
            fleet.turn(s, Commit::Done)?;
            fleet.call(s, 10)?;
        }
    }
    let at = Bounds {
        now: fleet.now + fleet.registry.skew,
        margin_ms: MARGIN,
        lease_ms: fleet.lease,
    };
    let none_free =
        (0..=MAX_NODE).all(|node| {
            fleet.registry.rows.get(&node).is_some_and(|r| {
                !r.retired || !crate::registry::is_free(Some(&row_of(node, r)), &at)
            })
        });
    // An id given up on a promotion is retired at a heartbeat of the server that gave it up
    // once its old holder is gone, whatever the renewer's restarts meanwhile,
    // unless it was claimed again (the row names another claim: its new holder's, whom the
    // retirement leaves alone) or a member holds it. (A restart of that server forgets it,
    // with shared memory, and one that holds no claim any more has no heartbeat: the id then
    // stays `lost` until an operator retires it, as FLEETS says.)
    for (&node, &(range, crashes, claim)) in &fleet.given_up {
        let heartbeating = fleet
            .members
            .iter()
            .any(|m| m.range == range && m.crashes == crashes && m.issuer.issuing());
        if !heartbeating {
            continue;
        }
        let retired = fleet
            .registry
            .rows
            .get(&node)
            .is_none_or(|r| r.retired || r.holder != claim);
        let held = fleet
            .members
            .iter()
            .any(|m| m.issuer.issuing() && m.issuer.node().id == node);
        prop_assert!(
            retired || held,
            "node id {node}, given up on a promotion, never retired"
        );
    }
    for (s, m) in fleet.members.iter().enumerate() {
        match m.issuer.node().refusing {
            Refusing::Nothing => {}
            // One layout per fleet: a member of another is refused (or, its claim first, the
            // fleet's members are) for as long as the other stays.
            Refusing::ClaimRefused if m.refused_for_layout => {}
            Refusing::ClaimRefused => {
                let configured = m.settings.configured;
                prop_assert!(
                    configured.is_some() || none_free,
                    "member {s}, assigned, refused"
                );
                let held_by_other = fleet.members.iter().enumerate().any(|(o, other)| {
                    o != s && other.issuer.issuing() && Some(other.issuer.node().id) == configured
                });
                // An id a joiner recorded as used, retired at the end of its IDs: refused until
                // the registry's clock is past them (FLEETS, *What each failure does*: "a server
                // configured with one is refused until the registry's clock is past it"; a server
                // that made IDs before it joined).
                let retired_ahead = configured
                    .and_then(|node| fleet.registry.rows.get(&node))
                    .is_some_and(|r| r.retired && at.now <= r.high_water + MARGIN);
                // A row of another layout under its id (FLEETS, *What each failure does*: it
                // "blocks its own node id only").
                let stray = configured
                    .and_then(|node| fleet.registry.rows.get(&node))
                    .is_some_and(|r| r.layout != L.describe());
                prop_assert!(
                    held_by_other || retired_ahead || stray || configured.is_none(),
                    "member {s} refused {configured:?}, held by no one"
                );
                // The refusal is true: a server told it is a copy is one, never the origin
                // while a copy of it makes IDs under its id.
                let copy_of_it_issues = fleet.members.iter().enumerate().find(|(_, other)| {
                    other.origin == Some(m.range)
                        && other.issuer.issuing()
                        && Some(other.issuer.node().id) == configured
                });
                if let (true, Some((o, _))) = (m.refused_as_copy, copy_of_it_issues) {
                    prop_assert!(
                        false,
                        "member {s} refused {configured:?} as a copy, while its copy, member \
                         {o}, makes IDs under it"
                    );
                }
            }
            refusing => prop_assert!(false, "member {s} stranded: {refusing:?}"),
        }
    }
    Ok(())
}

/// A row of the in-memory table as the rules read it (connected and same label: the caller's
/// to set).
fn row_of(node: u32, r: &RegRow) -> Row {
    Row {
        node,
        holder: r.holder,
        retired: r.retired,
        high_water: r.high_water,
        lease_until: r.lease_until,
        connected: false,
        same_label: false,
        stray: false,
        boot: r.boot,
        last_seen: r.last_seen,
        absent_since: r.last_seen,
        released: r.released,
    }
}

impl Fleet {
    /// One act of the run.
    fn act(&mut self, act: Act) -> Result<(), TestCaseError> {
        match act {
            Act::Wait { ms } => self.now += ms,
            Act::Call { s, want } => self.call(s, want)?,
            Act::Turn { s, commit } => self.turn(s, commit)?,
            Act::Crash { s } => {
                // Its registry session lives on until the registry notices.
                self.session_gone(s);
                self.members[s] = self.members[s].restarted(s, false);
                self.members[s].crashes += 1;
            }
            Act::Release { s, restart } => {
                self.release(s);
                if restart {
                    // A release that could not reach the registry leaves the mark a lease
                    // ahead, as a crash does.
                    self.members[s] = self.members[s].restarted(s, true);
                    self.members[s].crashes += 1;
                }
            }
            Act::Link { s, up } => self.members[s].link = up,
            Act::Registry { up } => {
                if !up {
                    // Every session ends with the registry's server.
                    self.registry.end_sessions_but(&[]);
                } else if !self.registry.up {
                    self.registry.started = self.now + self.registry.skew;
                }
                self.registry.up = up;
            }
            Act::Notice => {
                let live: Vec<u64> = self
                    .members
                    .iter()
                    .filter(|m| m.link)
                    .filter_map(|m| m.session)
                    .collect();
                self.registry.end_sessions_but(&live);
            }
            Act::Retire { node } if self.registry.up => {
                // `snowflake_registry_retire`, on a connection of its own.
                let registry = &mut self.registry;
                let session = registry.new_session();
                let stalled = Cell::new(false);
                let mut table = Session::new(registry, session, self.now, Commit::Done, &stalled);
                table::retire(&mut table, node).expect("an operator's retirement commits");
                registry.end_session(session);
            }
            Act::Retire { .. } => {}
            // Once the fleet has a row: a stray in an empty table would be the first claim of
            // another fleet, whose layout is the registry's from then on.
            Act::Stray { node } if !self.registry.rows.is_empty() => {
                let now = self.now;
                self.registry.rows.entry(node).or_insert(RegRow {
                    holder: Identity {
                        token: 0xfeed,
                        generation: 1,
                    },
                    high_water: i64::MIN,
                    lease_until: i64::MAX,
                    retired: false,
                    label: "another fleet's".into(),
                    system: 0,
                    layout: "another layout".into(),
                    claimed_at: now,
                    last_seen: now,
                    by: 0,
                    boot: None,
                    released: false,
                    recorded_by: vec![],
                });
            }
            Act::Stray { .. } => {}
            Act::Clock { s, offset } => {
                let m = &mut self.members[s];
                if offset > m.offset {
                    // Stepped ahead: its IDs may pass the mark until a contact records one
                    // above them (FLEETS, rule 3).
                    m.marked_at = None;
                }
                m.offset = offset;
            }
            // A copy never passes for its running origin (it cannot prove it is that server),
            // and waits for an origin seen lately to come back; in either mode.
            Act::Copy {
                s,
                from,
                same_label,
            } if s != from => {
                // Server `s` is gone for good.
                self.gone_for_good(s);
                let origin = &self.members[from];
                self.copies += 1;
                let range = (SERVERS as u128 + self.copies) << 64;
                let mut copy = Member::start(origin.settings, origin.file, s, range);
                copy.fenced = origin.fenced;
                copy.system = origin.system;
                copy.range = range;
                copy.origin = origin.origin.or(Some(origin.range));
                copy.crashes = origin.crashes;
                copy.offset = self.members[s].offset;
                copy.unjoined = origin.unjoined.clone();
                if same_label {
                    copy.label = origin.label.clone();
                }
                self.members[s] = copy;
            }
            Act::Copy { .. } => {}
            Act::Foreign { s } => {
                self.gone_for_good(s);
                self.copies += 1;
                let range = (SERVERS as u128 + self.copies) << 64;
                let settings = Settings {
                    configured: None,
                    registry: true,
                };
                let mut foreign = Member::start_in(other_layout(), settings, None, s, range, false);
                foreign.fenced = self.members[s].fenced;
                foreign.range = range;
                foreign.system = 1_000 + self.copies as u64;
                foreign.label = format!("foreign {}", self.copies);
                foreign.offset = self.members[s].offset;
                self.members[s] = foreign;
            }
            Act::Failover { s, from, fresh } if s != from => {
                self.gone_for_good(s);
                self.session_gone(from);
                let primary = &self.members[from];
                self.copies += 1;
                let range = (SERVERS as u128 + self.copies) << 64;
                let (layout, settings, file) = (primary.layout, primary.settings, primary.file);
                let fenced = primary.fenced;
                let mut standby = Member::start_in(layout, settings, file, s, range, true);
                standby.fenced = fenced;
                standby.range = range;
                standby.origin = primary.origin.or(Some(primary.range));
                standby.system = primary.system;
                standby.crashes = primary.crashes;
                standby.offset = self.members[s].offset;
                standby.fresh_on_promotion = fresh;
                standby.inherited = standby.issuer.node().claim;
                standby.unjoined = primary.unjoined.clone();
                self.members[s] = standby;
                if fenced {
                    self.members[from] = self.members[from].restarted(from, false);
                    self.members[from].crashes += 1;
                } else {
                    self.gone_for_good(from);
                    self.copies += 1;
                    let range = (SERVERS as u128 + self.copies) << 64;
                    let mut new = Member::start_in(L, settings, None, from, range, false);
                    new.fenced = fenced;
                    new.range = range;
                    new.system = 1_000 + self.copies as u64;
                    new.offset = self.members[from].offset;
                    self.members[from] = new;
                }
            }
            Act::Failover { .. } => {}
            Act::RegistryFailover { skew } => {
                self.registry.end_sessions_but(&[]);
                self.registry.skew = skew;
            }
            Act::Stall { s, slow } => self.members[s].slow_disk = slow,
            Act::Mode { s, fenced } => {
                self.members[s].fenced = fenced;
                if fenced {
                    // An available lease's ceiling is no grant in fenced mode.
                    self.members[s].marked_at = None;
                }
                // The renewer publishes a switch at once, before any contact
                // (`Renewer::turn`): the contact may wait for the registry.
                let (now, renewer) = (self.now, self.members[s].renewer);
                let mut turning = Turning {
                    fleet: self,
                    s,
                    commit: Commit::Done,
                    checked: Ok(()),
                };
                renewer.publish(&mut turning, fenced, now);
            }
            Act::Join {
                s,
                node,
                lead,
                span,
            } => {
                self.gone_for_good(s);
                self.copies += 1;
                let range = (SERVERS as u128 + self.copies) << 64;
                let alone = Settings {
                    configured: Some(node),
                    registry: false,
                };
                let mut before = Member::start(alone, None, s, range);
                let mut file = None;
                let mut ids = vec![];
                for ms in 0..span {
                    let at = self.now + lead + ms;
                    ids.extend(issue(&mut before.issuer, at, 8, |durable| {
                        file = Some(file_of(durable));
                    }));
                }
                // An ID some member made already was made twice before the join, by two
                // servers under one id, one of them outside the fleet: no registry can undo
                // that (FLEETS, *Servers that already make IDs*). Every other one must stay
                // unique.
                let mut made = vec![];
                for id in ids {
                    if let Entry::Vacant(v) = self.issued.entry(id) {
                        v.insert((s, false));
                        made.push(id);
                    }
                }
                let last = self.now + lead + span - 1;
                let joined = Settings {
                    configured: None,
                    registry: true,
                };
                let mut joiner = Member::start(joined, file, s, range);
                joiner.fenced = self.members[s].fenced;
                joiner.range = range;
                joiner.system = 1_000 + self.copies as u64;
                joiner.label = format!("joiner {}", self.copies);
                joiner.offset = self.members[s].offset;
                joiner.unjoined = Some((node, last, made));
                self.members[s] = joiner;
            }
        }
        Ok(())
    }
}

/// The mark a joiner's IDs raised stays raised through the clean stop of the id's holder: a
/// server that made IDs under node id 0 without a registry, its clock ahead, joins while
/// member 0 holds 0 (fenced); member 0 then stops cleanly, releasing its claim, and member 1,
/// configured with 0, takes it over. Its IDs start above the joiner's. The release used to
/// bring the mark down to the holder's own reservation whatever had raised it, and member 1
/// made the joiner's IDs again: those 40 s ahead, whose join raised the mark; and those a
/// second and a half ahead, below the holder's own ceiling, whose join left the mark's value
/// as the holder wrote it (member 1's clock 1.5 s behind, within the margin).
#[test]
fn a_clean_stop_never_lowers_the_mark_a_joiners_ids_raised() {
    joiner_then_clean_stop(40_000, 0);
    joiner_then_clean_stop(1_500, -1_500);
}

impl Fleet {
    /// One act of a directed case, and the keepalives after it: panics with the act the run's
    /// checks refused.
    fn step(&mut self, act: Act) {
        self.act(act.clone())
            .unwrap_or_else(|e| panic!("at {act:?}: {e}"));
        self.keepalives();
    }
}

/// [`a_clean_stop_never_lowers_the_mark_a_joiners_ids_raised`] with the joiner's clock `lead`
/// ms ahead and the next holder's `offset` ms off.
fn joiner_then_clean_stop(lead: i64, offset: i64) {
    use Act::*;
    let mut fleet = Fleet::new(&[Some(0), Some(0), None, None], true);
    let done = Commit::Done;
    for a in [
        Turn { s: 0, commit: done },
        Turn { s: 0, commit: done },
        Call { s: 0, want: 10 },
        // Member 1 stays out of reach until member 0 is gone.
        Link { s: 1, up: false },
        Clock { s: 1, offset },
    ] {
        fleet.step(a);
    }
    let joined_at = fleet.now;
    let join = Join {
        s: 2,
        node: 0,
        lead,
        span: 20,
    };
    fleet.step(join);
    for a in [
        Turn { s: 2, commit: done },
        Turn { s: 2, commit: done },
        // Member 0 stops cleanly (its renewer's exit releases the claim) and stays down.
        Release {
            s: 0,
            restart: false,
        },
        Link { s: 0, up: false },
        Crash { s: 0 },
        Wait { ms: LEASE + 1 },
        Notice,
        Link { s: 1, up: true },
        Turn { s: 1, commit: done },
        Turn { s: 1, commit: done },
    ] {
        fleet.step(a);
    }
    assert_eq!(
        fleet.members[2].issuer.node().id,
        1,
        "the joiner took a fresh id"
    );
    assert_eq!(fleet.members[1].issuer.node().id, 0);
    assert!(
        fleet.members[1].issuer.issuing(),
        "member 1 took node id 0 over"
    );
    // Member 1, heartbeating, makes IDs on its clock in the milliseconds the joiner made its
    // IDs in.
    let target = joined_at + lead + 10;
    assert!(
        fleet.now + offset <= target,
        "member 1 reached the joiner's time already"
    );
    while fleet.now + offset + 1_000 < target {
        fleet.step(Wait { ms: 1_000 });
        fleet.step(Turn { s: 1, commit: done });
    }
    let ms = target - fleet.now - offset;
    fleet.step(Wait { ms });
    for _ in 0..5 {
        fleet.step(Call { s: 1, want: 99 });
        fleet.step(Wait { ms: 1 });
    }
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
        Turn {
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
        Turn {
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
        Turn {
            s: 0,
            commit: Commit::Done,
        },
    );
    assert_eq!(fleet.registry.rows[&0].by, fleet.members[0].range);
    act(
        &mut fleet,
        Turn {
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
        Turn {
            s: 3,
            commit: Commit::Done,
        },
    );
    act(&mut fleet, Wait { ms: LEASE });
    act(
        &mut fleet,
        Turn {
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
        Turn {
            s: 0,
            commit: Commit::Done,
        },
    );
    act(
        &mut fleet,
        Turn {
            s: 0,
            commit: Commit::Done,
        },
    );
    assert_eq!(fleet.members[0].issuer.node().id, 0);
    assert!(fleet.members[0].issuer.issuing());
    fleet.call(0, 10).unwrap();
}

/// A server switched from available to fenced mode while cut off from the registry makes no
/// ID until a fenced heartbeat grants it a ceiling: member 0 (available) holds node id 0, is cut
/// off right after a heartbeat and switched to fenced; member 1 (fenced, configured with 0, its
/// clock a second behind: within the margin) takes 0 over once member 0's lease has run out, and
/// makes IDs in the milliseconds member 0 was still in its lease. Member 0 used to go on issuing
/// uncapped until its lease ran out, up to a lease past the mark member 1 starts above, and
/// member 1 made those IDs again.
#[test]
fn a_switch_to_fenced_while_cut_off_makes_no_id_past_the_mark() {
    use Act::*;
    let mut fleet = Fleet::new(&[Some(0), Some(0), None, None], false);
    let done = Commit::Done;
    for a in [
        Mode { s: 1, fenced: true },
        Clock {
            s: 1,
            offset: -MARGIN / 2,
        },
        Link { s: 1, up: false },
        Turn { s: 0, commit: done },
        Turn { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Turn { s: 0, commit: done },
        Link { s: 0, up: false },
        Mode { s: 0, fenced: true },
    ] {
        fleet.step(a);
    }
    let cut_at = fleet.now;
    // Member 0 is asked for IDs throughout its lease, each millisecond a few hundred apart.
    for _ in 0..(LEASE / 250) {
        fleet.step(Wait { ms: 250 });
        fleet.step(Turn { s: 0, commit: done });
        fleet.step(Call { s: 0, want: 10 });
    }
    assert!(
        !fleet.members[0].issuer.issuing(),
        "member 0's lease ran out"
    );
    for a in [
        Notice,
        Link { s: 1, up: true },
        Turn { s: 1, commit: done },
        Turn { s: 1, commit: done },
    ] {
        fleet.step(a);
    }
    assert!(
        fleet.members[1].issuer.issuing(),
        "member 1 took node id 0 over"
    );
    assert_eq!(fleet.members[1].issuer.node().id, 0);
    // Member 1's clock is a second behind: it makes IDs in the milliseconds member 0 was
    // asked for them in, the last second of its lease.
    let from = cut_at + LEASE - 1_000 + MARGIN / 2;
    assert!(
        fleet.now <= from + 250,
        "member 1 came too late to meet them"
    );
    while fleet.now < cut_at + LEASE + MARGIN / 2 + 250 {
        fleet.step(Call { s: 1, want: 10 });
        fleet.step(Wait { ms: 1 });
        if fleet.now % 500 == 0 {
            fleet.step(Turn { s: 1, commit: done });
        }
    }
}

mod search;
mod sim;

/// Runs `acts` on a fleet of these settings, each act checked as the seeded simulation checks
/// it, and panics with the act that failed.
fn directed(configured: &[Option<u32>], fenced: bool, acts: &[Act]) -> Fleet {
    let mut fleet = Fleet::new(configured, fenced);
    for act in acts {
        fleet
            .act(act.clone())
            .unwrap_or_else(|e| panic!("at {act:?}: {e}"));
        fleet.keepalives();
        fleet.rows_per_member().expect("one row per member");
        fleet
            .locks_name_their_holders()
            .expect("locks name holders");
    }
    fleet
}

/// [`directed`] under the lease that ships (30 s): a heartbeat's exchange deadline and a
/// claim's idle limit reach their caps.
fn directed_shipped(configured: &[Option<u32>], fenced: bool, acts: &[Act]) -> Fleet {
    let mut fleet = directed(configured, fenced, &[]);
    fleet.lease = 30_000;
    for act in acts {
        fleet
            .act(act.clone())
            .unwrap_or_else(|e| panic!("at {act:?}: {e}"));
        fleet.keepalives();
    }
    fleet
}

/// Under the lease that ships, a fenced member's disk turns slow and its renewer restarts: its claim
/// stalls on its intent under the registry table's lock a second before the other member's
/// heartbeat, which waits for the lock. The registry ends the stalled claim once it has been
/// idle half a heartbeat's deadline (2.5 s), so the heartbeat never times out. The idle limit
/// used to be a quarter of the lease (7.5 s), past the heartbeat's 5 s deadline.
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
                Turn { s: 0, commit: done },
                Turn { s: 1, commit: done },
                Stall { s: 1, slow: true },
                Release {
                    s: 1,
                    restart: false,
                },
                Turn { s: 1, commit: done },
                Wait { ms: 1_000 },
                Turn { s: 0, commit: done },
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
                Turn { s: 0, commit: lost },
                Turn { s: 0, commit: lost },
                Turn { s: 0, commit: lost },
                Turn { s: 0, commit: lost },
                Turn {
                    s: 0,
                    commit: Commit::Done,
                },
                Turn {
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
        Turn { s: 0, commit: done },
        Turn { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Copy {
            s: 1,
            from: 0,
            same_label: true,
        },
        Turn { s: 1, commit: done },
        Release {
            s: 0,
            restart: false,
        },
        Turn { s: 1, commit: done },
        Turn { s: 0, commit: done },
        Turn { s: 0, commit: done },
        Turn { s: 1, commit: done },
    ];
    for _ in 0..8 {
        acts.extend([
            Wait { ms: LEASE / 2 },
            Turn { s: 1, commit: done },
            Turn { s: 0, commit: done },
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
        Turn { s: 0, commit: done },
        Turn { s: 0, commit: done },
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
        Turn { s: 1, commit: done },
        Turn { s: 1, commit: done },
        Call { s: 1, want: 10 },
        Turn { s: 0, commit: done },
        Turn { s: 0, commit: done },
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
        Turn { s: 0, commit: done },
        Turn { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Registry { up: false },
        Copy {
            s: 1,
            from: 0,
            same_label: false,
        },
        Wait { ms: LEASE / 4 },
        Registry { up: true },
        Turn { s: 1, commit: done },
        Turn { s: 1, commit: done },
        Turn { s: 0, commit: done },
        Turn { s: 1, commit: done },
        Turn { s: 1, commit: done },
    ];
    for _ in 0..8 {
        acts.extend([
            Wait { ms: LEASE / 3 },
            Turn { s: 0, commit: done },
            Turn { s: 1, commit: done },
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

/// A planned restart waits for nothing: the renewer's exit released the claim, the server
/// starts after a clean stop, and its first claim takes the id back at once (under a token of
/// its own), in both modes. A crash releases nothing: the restart cannot prove it is not a copy
/// of a running holder, and waits until its old run has been silent a heartbeat interval and the
/// clock margin.
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
            Turn { s: 0, commit: done },
            Turn { s: 0, commit: done },
            Call { s: 0, want: 10 },
            Release {
                s: 0,
                restart: true,
            },
        ];
        let mut fleet = directed(&[Some(0), None], fenced, &start);
        let before = *fleet.members[0].issuer.node();
        fleet.members[0].unwritable = true;
        fleet.act(Turn { s: 0, commit: done }).expect("a claim");
        let after = fleet.members[0].issuer.node();
        assert_eq!(
            (
                after.id,
                after.claim,
                after.history,
                after.mark,
                after.ceiling
            ),
            (
                before.id,
                before.claim,
                before.history,
                before.mark,
                before.ceiling
            ),
            "fenced {fenced}: the failed intent changed the server"
        );
        fleet.members[0].unwritable = false;
        fleet.act(Turn { s: 0, commit: done }).expect("a claim");
        fleet.act(Turn { s: 0, commit: done }).expect("the pin");
        let node = fleet.members[0].issuer.node();
        assert!(
            fleet.members[0].issuer.issuing() && node.id == 0,
            "fenced {fenced}: the file writable again, the server takes its id back at once: \
             {:?}",
            node.refusing
        );
    }
}

#[test]
fn a_clean_restart_takes_its_released_claim_at_once_a_crash_waits() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        let start = [
            Turn { s: 0, commit: done },
            Turn { s: 0, commit: done },
            Call { s: 0, want: 10 },
        ];
        let mut fleet = directed(&[Some(0), None, None, None], fenced, &start);
        let token = fleet.members[0].issuer.node().claim.map(|c| c.token);
        for act in [
            Release {
                s: 0,
                restart: true,
            },
            Turn { s: 0, commit: done },
            Turn { s: 0, commit: done },
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
            node.claim.map(|c| c.token),
            token,
            "under a token of its own"
        );
        fleet.act(Call { s: 0, want: 10 }).expect("IDs");
        // A crash: refused until the old run has been silent long enough.
        fleet.act(Crash { s: 0 }).expect("the crash");
        fleet.act(Notice).expect("the registry notices");
        fleet.act(Turn { s: 0, commit: done }).expect("a claim");
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
        fleet.act(Turn { s: 0, commit: done }).expect("a claim");
        fleet.act(Turn { s: 0, commit: done }).expect("the pin");
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
                Turn { s: 0, commit: done },
                Turn { s: 0, commit: done },
                Call { s: 0, want: 10 },
                Release {
                    s: 0,
                    restart: false,
                },
                Turn { s: 0, commit: done },
                Turn { s: 0, commit: done },
                Call { s: 0, want: 10 },
                Release {
                    s: 0,
                    restart: true,
                },
                Turn { s: 0, commit: done },
                Turn { s: 0, commit: done },
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

/// A server whose IDs run ahead of its clock by more than a lease (here a joiner's, 40 s ahead;
/// a step of the clock back does the same) stays idle for longer than a lease; its steady clock
/// keeps the lead, its reservation does not. The heartbeat after the idle spell records a mark a
/// lease past where its IDs now are, not past its old reservation: in available mode its next
/// IDs are below it (nothing counted, checked at every call), in fenced mode its next call is
/// granted. The mark used to be a lease past the reservation: available mode counted the IDs
/// past it right after a heartbeat, fenced mode refused calls until heartbeats had raised the
/// ceiling a lease at a time.
#[test]
fn a_server_running_ahead_of_its_clock_makes_ids_below_the_mark_after_an_idle_spell() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        let mut fleet = directed(
            &[None, None, None, None],
            fenced,
            &[
                Join {
                    s: 2,
                    node: 0,
                    lead: 40_000,
                    span: 6,
                },
                Turn { s: 2, commit: done },
                Call { s: 2, want: 1 },
                Wait { ms: 5_000 },
                Turn { s: 2, commit: done },
            ],
        );
        let before = fleet.members[2].issuer.generator().stats().issued;
        fleet
            .call(2, 10)
            .unwrap_or_else(|e| panic!("fenced {fenced}: {e}"));
        let m = &fleet.members[2];
        assert_eq!(
            m.issuer.generator().stats().issued - before,
            10,
            "fenced {fenced}: the call after the idle spell made too few IDs (ceiling {}, \
             reserved to {})",
            m.issuer.node().ceiling,
            m.issuer.generator().reserved_until()
        );
        assert_eq!(m.issuer.ids_past_mark(), 0, "fenced {fenced}");
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
            Turn {
                s: 3,
                commit: Commit::Done,
            },
            Turn {
                s: 2,
                commit: Commit::Failed,
            },
            Stray { node: 1 },
            Turn {
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
