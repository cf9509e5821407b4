//! The node-id registry (`pg_snowflake.registry`), with real servers on 127.0.0.1: one plain
//! PostgreSQL holds the registry's table, the others claim node ids from it through their
//! renewers. Every claim the registry refuses is asserted by its message, every ID set by the
//! absence of overlap; clones, crashes, clock offsets, a stopped registry, retiring and
//! recycling are done for real (pg_basebackup, kill -9, libfaketime, pg_ctl).

use snowflake_it::registry::{next_id, registry_config, registry_server};
use snowflake_it::{assert_error, count, describe, take_ids, wait_until, Config, Server};
use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LEASE_MS: i64 = 3_000;

/// The registry: a plain server, with the table made by a member's snowflake_registry_create().
fn registry() -> Server {
    registry_server("registry")
}

/// A member of the fleet using `registry`, with node id `node` (None: assigned).
fn member_config(registry: &Server, node: Option<i32>) -> Config {
    Config {
        preload: true,
        node_id: node,
        ..Config::default()
    }
    .setting(&format!(
        "pg_snowflake.registry = '{}'",
        registry.conninfo("postgres")
    ))
    .setting(&format!("pg_snowflake.registry_lease_ms = {LEASE_MS}"))
    .setting("pg_snowflake.max_clock_skew_ms = 2000")
}

fn member(name: &str, registry: &Server, node: Option<i32>) -> Server {
    Server::start(name, member_config(registry, node))
}

/// This server's node id once it has claimed one (the test waits for the claim; on a timeout
/// the server's log is printed).
fn claimed_node(server: &Server) -> i32 {
    let started = Instant::now();
    loop {
        let row = server
            .connect()
            .query_one("SELECT node_id, refusing FROM snowflake_stats()", &[])
            .unwrap();
        let refusing: Option<String> = row.get(1);
        if refusing.is_none() {
            return row.get::<_, Option<i32>>(0).unwrap_or(-1);
        }
        if started.elapsed() > Duration::from_secs(30) {
            panic!(
                "no claim within 30 s (refusing: {refusing:?}); the server's log:\n{}",
                server.log()
            );
        }
        thread::sleep(Duration::from_millis(100));
    }
}

fn refusing(server: &Server) -> Option<String> {
    server.query_one("SELECT refusing FROM snowflake_stats()")
}

fn ids_issued(server: &Server) -> i64 {
    server.query_one("SELECT ids_issued FROM snowflake_stats()")
}

fn node_of(server: &Server, id: i64) -> i32 {
    server.query_one(&format!("SELECT snowflake_node_id({id}::bigint)"))
}

/// Asserts that `result` is the error with this SQLSTATE and message (`…`: a prefix), with a
/// DETAIL and a HINT.
fn expect_error<T: std::fmt::Debug>(
    result: Result<T, postgres::Error>,
    sqlstate: &str,
    message: &str,
) {
    let err = result.expect_err("an error");
    let db = assert_error(&err, sqlstate, message, None, None);
    assert!(
        db.detail().is_some() || sqlstate == "42704",
        "a DETAIL: {db:?}"
    );
    assert!(
        db.hint().is_some_and(|h| h.ends_with('.')),
        "a HINT: {db:?}"
    );
}

fn create_table(server: &Server) {
    server.execute("SELECT snowflake_registry_create()");
}

#[test]
fn servers_without_node_ids_are_assigned_distinct_ones_and_keep_them() {
    let registry = registry();
    let first = member("fleet0", &registry, None);
    create_table(&first);
    let mut members = vec![first];
    for i in 1..5 {
        members.push(member(&format!("fleet{i}"), &registry, None));
    }
    let nodes: Vec<i32> = members.iter().map(claimed_node).collect();
    println!("assigned node ids: {nodes:?}");
    assert_eq!(
        nodes.iter().collect::<HashSet<_>>().len(),
        5,
        "distinct: {nodes:?}"
    );
    assert!(
        nodes.iter().all(|&n| (0..5).contains(&n)),
        "lowest free: {nodes:?}"
    );

    // A clean restart and a kill -9 keep the id (it is pinned in the state file).
    members[1].stop();
    members[1].start_again();
    members[2].crash();
    members[2].start_again();
    for i in [1, 2] {
        assert_eq!(
            claimed_node(&members[i]),
            nodes[i],
            "member {i} after a restart"
        );
    }
    let listed = count(
        &mut members[0].connect(),
        "SELECT count(*) FROM snowflake_registry() WHERE state = 'live'",
    );
    assert_eq!(listed, 5);
    assert_eq!(
        count(
            &mut members[0].connect(),
            "SELECT count(*) FROM snowflake_registry() WHERE this_server"
        ),
        1
    );

    // 200,000 IDs from each, all at once: no ID twice, each carrying its server's node id.
    let all: Vec<Vec<i64>> = thread::scope(|scope| {
        let handles: Vec<_> = members
            .iter()
            .map(|m| {
                let mut client = m.connect();
                scope.spawn(move || take_ids(&mut client, 200_000, 10_000))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut seen = HashSet::new();
    for (ids, member) in all.iter().zip(&members) {
        let node = claimed_node(member);
        assert_eq!(node_of(member, ids[0]), node);
        assert_eq!(node_of(member, ids[ids.len() - 1]), node);
        for id in ids {
            assert!(seen.insert(*id), "ID {id} made twice");
        }
    }
    assert_eq!(seen.len(), 1_000_000);
}

#[test]
fn a_second_server_with_the_same_node_id_is_refused_and_makes_nothing() {
    let registry = registry();
    let first = member("same1", &registry, Some(7));
    create_table(&first);
    assert_eq!(claimed_node(&first), 7);
    let second = member("same2", &registry, Some(7));
    wait_until(Duration::from_secs(20), "the refusal", || {
        refusing(&second).as_deref() == Some("claim refused")
    });
    expect_error(
        second
            .connect()
            .query_one("SELECT snowflake_nextval()", &[]),
        "55000",
        "node id 7 is held by another server, \"…",
    );
    assert_eq!(ids_issued(&second), 0);
    assert!(second.log().contains("node id 7 is held by another server"));
    // The first is unaffected.
    let id: i64 = first.query_one("SELECT snowflake_nextval()");
    assert_eq!(node_of(&first, id), 7);
}

#[test]
fn a_clone_promoted_beside_its_origin_takes_a_fresh_id() {
    let registry = registry();
    let origin = member("origin", &registry, None);
    create_table(&origin);
    let node = claimed_node(&origin);
    let before: i64 = origin.query_one("SELECT snowflake_nextval()");
    let clone = Server::standby_of(&origin, "clone", member_config(&registry, None));
    clone.promote();
    let fresh = claimed_node(&clone);
    assert_ne!(
        fresh, node,
        "the clone must not make IDs under its origin's node id"
    );
    let id: i64 = clone.query_one("SELECT snowflake_nextval()");
    assert_eq!(node_of(&clone, id), fresh);
    assert!(clone.log().contains("fresh id"), "{}", clone.log());
    // The origin goes on under its own.
    let after: i64 = origin.query_one("SELECT snowflake_nextval()");
    assert!(after > before && node_of(&origin, after) == node);
}

#[test]
fn a_damaged_state_file_with_a_registry_starts_under_a_fresh_id() {
    let registry = registry();
    let server = member("damaged", &registry, None);
    create_table(&server);
    let node = claimed_node(&server);
    let _: i64 = server.query_one("SELECT snowflake_nextval()");
    server.stop();
    server.as_postgres(&format!(
        "echo 'not a state file' > {}",
        server.data_file("pg_snowflake.state")
    ));
    server.start_again();
    let fresh = claimed_node(&server);
    assert_ne!(fresh, node);
    assert!(server.log().contains("is damaged"), "{}", server.log());
}

/// Configures `server` (from its next start) as a member of `registry` with its node id unset,
/// as [`member_config`] does for a new one.
fn join_with_node_id_unset(server: &Server, registry: &Server) {
    server.execute(&format!(
        "ALTER SYSTEM SET pg_snowflake.registry = '{}'",
        registry.conninfo("postgres")
    ));
    server.execute(&format!(
        "ALTER SYSTEM SET pg_snowflake.registry_lease_ms = {LEASE_MS}"
    ));
    server.execute("ALTER SYSTEM SET pg_snowflake.max_clock_skew_ms = 2000");
    server.execute("ALTER SYSTEM SET pg_snowflake.node_id = -1");
}

/// A server that made IDs without a registry (node id 1, its clock an hour ahead,
/// so that its IDs lie ahead of every clock of the fleet) joins one with its node id unset and a
/// damaged state file. The file is moved aside, and with it the only record of the node ids
/// the server used: the registry has never seen this server, so it cannot know them. Before
/// the fix it was assigned node id 1 again, the lowest free, and made IDs an hour below its own
/// (a duplicate key within seconds). It is now refused, saying why and what to do; restoring
/// the file (the first way the hint names) gives it a fresh id above nothing it used.
#[test]
fn a_damaged_state_file_new_to_the_registry_is_refused_not_given_back_the_id_it_used() {
    let registry = registry();
    let first = member("lost0", &registry, None);
    create_table(&first);
    assert_eq!(claimed_node(&first), 0);
    let server = Server::start("lost1", Config::node(1).fake_clock("+1h"));
    let ids = take_ids(&mut server.connect(), 1_000, 1_000);
    let old_max = *ids.iter().max().unwrap();
    server.set_clock("+0");
    join_with_node_id_unset(&server, &registry);
    server.stop();
    let state = server.data_file("pg_snowflake.state");
    server.as_postgres(&format!(
        "cp {state} {state}.good && echo garbage > {state}"
    ));
    server.start_again();
    // The claim's answer: a refusal, or (before the fix) a node id.
    wait_until(Duration::from_secs(15), "the claim answered", || {
        refusing(&server).as_deref() != Some("awaiting the registry claim")
    });
    if let Ok(node) = snowflake_it::registry::claimed_within(&server, Duration::ZERO) {
        let id: i64 = server.query_one("SELECT snowflake_nextval()");
        panic!(
            "the server was given node id {node} and made {id} (node {}), {} below the IDs it \
             made under node id 1 up to {old_max}; the registry:\n{}",
            node_of(&server, id),
            if id <= old_max { "at or" } else { "not" },
            snowflake_it::registry::registry_rows(&registry)
        );
    }
    assert_eq!(refusing(&server).as_deref(), Some("claim refused"));
    let err = server
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .expect_err("no ID from a server whose used node ids are unknown");
    assert_error(
        &err,
        "55000",
        "this server's state file was damaged, and the registry has never seen this server: \
         the node ids it made IDs under are unknown",
        Some("The registry refused this server's claim: it makes no IDs. …"),
        Some(
            "Restore pg_snowflake.state from a backup of this data directory (or \
              pg_snowflake.state.damaged, repaired). …",
        ),
    );
    assert_eq!(ids_issued(&server), 0);
    assert!(server.log().contains("is damaged"), "{}", server.log());
    // A restart does not forget: the state file says the history is lost.
    server.stop();
    server.start_again();
    wait_until(Duration::from_secs(15), "the claim refused again", || {
        refusing(&server).as_deref() == Some("claim refused")
    });
    assert_eq!(ids_issued(&server), 0);
    // With the node id set (here the one it used), that state file stops the server as the
    // damaged one would: no start from the clock under an id whose IDs are unknown.
    server.stop();
    let auto = server.data_file("postgresql.auto.conf");
    let set_node = |from: &str, to: &str| {
        server.as_postgres(&format!(
            "sed -i \"s/^pg_snowflake.node_id = '{from}'$/pg_snowflake.node_id = '{to}'/\" {auto} \
             && grep -q \"^pg_snowflake.node_id = '{to}'$\" {auto}"
        ))
    };
    set_node("-1", "1");
    let log = server
        .try_start()
        .expect_err("no start with the node id set and the history lost");
    assert!(
        log.contains(
            "FATAL:  pg_snowflake state file \"pg_snowflake.state\" is damaged: it says that the \
             one before it was damaged (moved to \"pg_snowflake.state.damaged\"), and no node id \
             has been claimed since"
        ),
        "{log}"
    );
    set_node("1", "-1");
    // The file restored: its history names node id 1, recorded in the registry up to the end
    // of its IDs, and the server is given another.
    server.as_postgres(&format!("mv {state}.good {state}"));
    server.start_again();
    let node = claimed_node(&server);
    assert!(node != 0 && node != 1, "given node id {node}");
    let id: i64 = server.query_one("SELECT snowflake_nextval()");
    assert_eq!(node_of(&server, id), node);
}

#[test]
fn a_clock_an_hour_ahead_of_the_registrys_is_refused_until_it_is_back() {
    // The registry's clock an hour behind (libfaketime; each of its backends reads the offset
    // when it starts): every member's clock is an hour ahead of it.
    let registry = Server::start("registry", registry_config().fake_clock("-1h"));
    let ahead = member("skew", &registry, Some(2));
    create_table(&ahead);
    wait_until(Duration::from_secs(20), "the clock check", || {
        refusing(&ahead).as_deref() == Some("clock skew")
    });
    let err = ahead
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_err();
    let text = snowflake_it::describe(&err);
    let off_ms: i64 = text
        .strip_prefix("55000 this server's clock is ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((3_590_000..3_610_000).contains(&off_ms), "{text}");
    assert!(
        text.ends_with(
            "ms ahead of the registry's, more than pg_snowflake.max_clock_skew_ms (2000 ms)"
        ),
        "{text}"
    );
    assert_eq!(ids_issued(&ahead), 0);
    // The registry's clock set right; its session with the member ends (as a registry restart
    // would end it), and the member's next contact, on a new session, finds the clocks agree.
    registry.set_clock("+0");
    thread::sleep(Duration::from_millis(1_200));
    registry.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'pg_snowflake'",
    );
    assert_eq!(claimed_node(&ahead), 2);
    let id: i64 = ahead.query_one("SELECT snowflake_nextval()");
    assert_eq!(node_of(&ahead, id), 2);
}

/// With the registry unreachable (`cut` makes it so, `restore` undoes it): the fenced server
/// issues until its lease runs out and then refuses, the available one goes on; both issue
/// again once the registry is back. Prints the figures.
fn registry_outage(
    registry: &Server,
    fenced: &Server,
    available: &Server,
    how: &str,
    cut: impl FnOnce(&Server),
    restore: impl FnOnce(&Server),
) {
    cut(registry);
    let cut_at = Instant::now();
    let mut last_fenced = Instant::now();
    let err = loop {
        match fenced
            .connect()
            .query_one("SELECT snowflake_nextval()", &[])
        {
            Ok(_) => last_fenced = Instant::now(),
            Err(err) => break err,
        }
        assert!(
            cut_at.elapsed() < Duration::from_secs(20),
            "fenced kept issuing"
        );
        thread::sleep(Duration::from_millis(50));
    };
    let issued_for = last_fenced - cut_at;
    println!("registry {how}: the fenced server issued for {issued_for:?}, then refused");
    assert!(issued_for <= Duration::from_millis(LEASE_MS as u64 + 500));
    // Refused as out of lease; or, when its reservations reached the lease's ceiling before
    // the renewer could say so, as at the end of its lease.
    let db = err.as_db_error().expect("an error of the server");
    assert_eq!(db.code().code(), "55000", "{db:?}");
    assert!(
        db.message().starts_with("the lease on node id 1 ran out")
            || db
                .message()
                .starts_with("the generator has reached the end of its lease"),
        "{db:?}"
    );
    assert!(db
        .hint()
        .is_some_and(|h| h.starts_with("Make the registry reachable again")));
    // A registry function says it cannot reach it.
    let err = fenced
        .connect()
        .query_one("SELECT count(*) FROM snowflake_registry()", &[])
        .expect_err("no registry to list");
    let db = assert_error(
        &err,
        "08006",
        "could not connect to the pg_snowflake registry: …",
        None,
        None,
    );
    assert!(db
        .hint()
        .is_some_and(|h| h.starts_with("Check pg_snowflake.registry")));
    // The renewer says why in the log (at most once in ten seconds).
    assert!(
        fenced
            .log()
            .contains("could not reach the pg_snowflake registry: "),
        "{}",
        fenced.log()
    );
    // Available: still issuing well past the lease.
    thread::sleep(Duration::from_millis(LEASE_MS as u64));
    let id: i64 = available.query_one("SELECT snowflake_nextval()");
    assert_eq!(node_of(available, id), 2);

    restore(registry);
    let back = Instant::now();
    claimed_node(fenced);
    let id: i64 = fenced.query_one("SELECT snowflake_nextval()");
    assert_eq!(node_of(fenced, id), 1);
    println!(
        "registry {how}: the fenced server issued again {:?} after it was back",
        back.elapsed()
    );
}

#[test]
fn an_unreachable_registry_fences_one_mode_and_not_the_other() {
    let registry = registry();
    let fenced = member("fenced", &registry, Some(1));
    create_table(&fenced);
    let available = Server::start(
        "available",
        member_config(&registry, Some(2)).setting("pg_snowflake.registry_mode = 'available'"),
    );
    claimed_node(&fenced);
    claimed_node(&available);
    // Frozen (SIGSTOP): connections hang rather than fail.
    registry_outage(
        &registry,
        &fenced,
        &available,
        "SIGSTOPped",
        |r| r.signal_all("STOP"),
        |r| r.signal_all("CONT"),
    );
    // Down: connections are refused.
    registry_outage(
        &registry,
        &fenced,
        &available,
        "stopped",
        |r| r.stop(),
        |r| r.start_again(),
    );
}

/// IDs from `server` on new connections every 200 ms for `how_long`, each above the last
/// (from `first`) and of node id `node`; the last one. A refusal fails the test, naming `who`
/// and when.
fn ids_through(server: &Server, node: i32, first: i64, how_long: Duration, who: &str) -> i64 {
    let started = Instant::now();
    let mut last = first;
    while started.elapsed() < how_long {
        let id: i64 = server
            .connect()
            .query_one("SELECT snowflake_nextval()", &[])
            .unwrap_or_else(|e| {
                panic!(
                    "{who} refused {:?} in: {}; refusing: {:?}",
                    started.elapsed(),
                    snowflake_it::describe(&e),
                    refusing(server)
                )
            })
            .get(0);
        assert!(id > last, "{id} <= {last}");
        assert_eq!(node_of(server, id), node);
        last = id;
        thread::sleep(Duration::from_millis(200));
    }
    last
}

/// Ends the server's renewer (SIGTERM; `pg_terminate_backend` does not reach it) and waits for
/// the one the postmaster starts a second later.
fn restart_renewer(server: &Server) {
    let old = *server.renewer_pids().first().expect("a renewer runs");
    server.as_postgres(&format!("kill -TERM {old}"));
    wait_until(Duration::from_secs(15), "a new renewer", || {
        server.renewer_pids().first().is_some_and(|&pid| pid != old)
    });
}

/// The registry is down and each member's renewer restarts (an error, or
/// `pg_terminate_backend`). The available member goes on under the claim its predecessor
/// held (shared memory and the state file hold it) and makes IDs through two leases; once the
/// registry is back, its heartbeat renews that claim (the generation unchanged: no new claim
/// was needed). The fenced member, as before, makes none until it claims again. On 0.5.0 the
/// available member's new renewer waited for a claim: "awaiting the registry claim" until the
/// registry was back.
#[test]
fn an_available_server_whose_renewer_restarts_while_the_registry_is_down_goes_on() {
    let registry = registry();
    let available = Server::start(
        "availrenewer",
        member_config(&registry, Some(3)).setting("pg_snowflake.registry_mode = 'available'"),
    );
    let fenced = member("fencedrenewer", &registry, Some(4));
    create_table(&available);
    assert_eq!(claimed_node(&available), 3);
    assert_eq!(claimed_node(&fenced), 4);
    let generation = |node: i32| -> i64 {
        registry.query_one(&format!(
            "SELECT generation FROM snowflake_nodes WHERE node_id = {node}"
        ))
    };
    let before = generation(3);
    let first: i64 = available.query_one("SELECT snowflake_nextval()");

    registry.stop();
    restart_renewer(&available);
    restart_renewer(&fenced);
    let last = ids_through(
        &available,
        3,
        first,
        Duration::from_millis(2 * LEASE_MS as u64),
        "the available member, its renewer restarted with the registry down",
    );
    wait_until(
        Duration::from_secs(10),
        "the fenced member's refusal",
        || refusing(&fenced).is_some(),
    );

    registry.start_again();
    wait_until(
        Duration::from_secs(15),
        "the available member's heartbeat",
        || {
            registry.query_one::<bool>(
                "SELECT last_seen > clock_timestamp() - interval '2 seconds' \
                 FROM snowflake_nodes WHERE node_id = 3",
            )
        },
    );
    assert_eq!(
        generation(3),
        before,
        "the claim was made again, not renewed"
    );
    assert_eq!(claimed_node(&fenced), 4);
    let after: i64 = available.query_one("SELECT snowflake_nextval()");
    assert!(after > last);
}

/// A fenced member whose registry stops is switched to available mode
/// (`ALTER SYSTEM`, reload), as FLEETS.md says to do to keep making IDs through an outage: it
/// goes on past its lease, refusing nothing. Before the fix it kept the fenced lease's ceiling:
/// with `refusing` NULL, every call a lease after the stop failed with "the generator has
/// reached the end of its lease in the registry", until the registry was back. The lease is
/// twice the fleet's here, so that the renewer reads the new mode well before the lease ends
/// even on a busy machine (it refuses while the lease has run out in fenced mode, as it must).
#[test]
fn a_fenced_server_switched_to_available_during_an_outage_goes_on_past_its_lease() {
    const LEASE: u64 = 2 * LEASE_MS as u64;
    let registry = registry();
    let server = Server::start(
        "switched",
        member_config(&registry, Some(5))
            .setting(&format!("pg_snowflake.registry_lease_ms = {LEASE}")),
    );
    create_table(&server);
    assert_eq!(claimed_node(&server), 5);
    let first: i64 = server.query_one("SELECT snowflake_nextval()");

    registry.stop();
    server.execute("ALTER SYSTEM SET pg_snowflake.registry_mode = 'available'");
    server.execute("SELECT pg_reload_conf()");
    let last = ids_through(
        &server,
        5,
        first,
        Duration::from_millis(3 * LEASE),
        "the member switched to available mode with the registry stopped",
    );
    assert_eq!(refusing(&server), None);
    registry.start_again();
    let after: i64 = server.query_one("SELECT snowflake_nextval()");
    assert!(after > last);
}

/// A fleet has one layout: a server with 12 node bits and 10 sequence bits
/// joining a registry whose first member has the default 10 and 12 is refused at claim,
/// whether its node id is set or not, with both layouts in the message, and the registry's
/// table keeps only the fleet's layout. On 0.5.0 it was assigned node id 1 and made IDs that
/// read, in the fleet's layout, as another node's.
#[test]
fn a_server_of_another_layout_is_refused_naming_both_layouts() {
    let registry = registry();
    let first = member("layoutfirst", &registry, None);
    create_table(&first);
    assert_eq!(claimed_node(&first), 0);
    let fleet: String = first.query_one("SELECT layout FROM snowflake_stats()");
    for (name, node) in [("layoutunset", None), ("layoutset", Some(7))] {
        let other = Server::start(
            name,
            member_config(&registry, node)
                .setting("pg_snowflake.node_bits = 12")
                .setting("pg_snowflake.sequence_bits = 10"),
        );
        let mine: String = other.query_one("SELECT layout FROM snowflake_stats()");
        assert_ne!(mine, fleet);
        wait_until(Duration::from_secs(15), "the claim refused", || {
            refusing(&other).as_deref() == Some("claim refused")
        });
        expect_error(
            other.connect().query_one("SELECT snowflake_nextval()", &[]),
            "55000",
            &format!(
                "the pg_snowflake registry's fleet makes IDs of another layout than this \
                 server: {fleet} (node id 0's), here {mine}"
            ),
        );
        assert!(
            other.log().contains("of another layout than this server"),
            "the refusal is logged:\n{}",
            other.log()
        );
    }
    let layouts: i64 = registry.query_one("SELECT count(DISTINCT layout) FROM snowflake_nodes");
    assert_eq!(layouts, 1);
}

/// One row of another layout in the registry's table (another fleet's server
/// pointed here, a hand edit, junk) blocks its own node id only: a new server is assigned an
/// id, and the fleet's holder whose renewer restarts claims its id again, each warning of the
/// row; `snowflake_registry()` shows it as `stray`; a server of that other layout is still
/// refused, naming the fleet's layout and its oldest claim (node id 1's: node id 0 was
/// claimed again since). Before the fix every claim was refused ("the pg_snowflake
/// registry's fleet makes IDs of another layout than this server: … (node id 900's)") and the
/// fleet stopped, one claim at a time.
#[test]
fn a_row_of_another_layout_blocks_only_its_own_node_id() {
    let registry = registry();
    let first = member("strayfirst", &registry, None);
    create_table(&first);
    assert_eq!(claimed_node(&first), 0);
    let fleet: String = first.query_one("SELECT layout FROM snowflake_stats()");
    let other = fleet.replace(
        "10 bits node | 12 bits sequence",
        "12 bits node | 10 bits sequence",
    );
    assert_ne!(other, fleet);
    registry.execute(&format!(
        "INSERT INTO snowflake_nodes (node_id, state, owner_token, generation, holder_label, \
         layout, claimed_at, last_seen, lease_until) VALUES (900, 'live', \
         'feedfeedfeedfeedfeedfeedfeedfeed', 1, 'elsewhere', '{other}', clock_timestamp(), \
         clock_timestamp(), clock_timestamp() + interval '1 day')"
    ));
    let warning = format!(
        "the pg_snowflake registry has a row of another layout than the fleet's: node id 900's, \
         {other}"
    );

    let second = member("straysecond", &registry, None);
    assert_eq!(claimed_node(&second), 1);
    assert!(
        second.log().contains(&warning),
        "the stray row is warned of:\n{}",
        second.log()
    );
    let before: i64 = first.query_one("SELECT snowflake_nextval()");
    restart_renewer(&first);
    wait_until(Duration::from_secs(15), "the claim made again", || {
        first
            .log()
            .matches("pg_snowflake claimed node id 0")
            .count()
            >= 2
    });
    assert_eq!(claimed_node(&first), 0);
    let after: i64 = first.query_one("SELECT snowflake_nextval()");
    assert!(after > before);
    assert_eq!(node_of(&first, after), 0);

    let state: String =
        first.query_one("SELECT state FROM snowflake_registry() WHERE node_id = 900");
    assert_eq!(state, "stray");
    let live: i64 =
        first.query_one("SELECT count(*) FROM snowflake_registry() WHERE state = 'live'");
    assert_eq!(live, 2);

    let mismatched = Server::start(
        "straymismatch",
        member_config(&registry, None)
            .setting("pg_snowflake.node_bits = 12")
            .setting("pg_snowflake.sequence_bits = 10"),
    );
    wait_until(Duration::from_secs(15), "the claim refused", || {
        refusing(&mismatched).as_deref() == Some("claim refused")
    });
    expect_error(
        mismatched
            .connect()
            .query_one("SELECT snowflake_nextval()", &[]),
        "55000",
        &format!(
            "the pg_snowflake registry's fleet makes IDs of another layout than this server: \
             {fleet} (node id 1's), here {other}"
        ),
    );
}

/// Unix ms of an ID's time.
fn ms_of(server: &Server, id: i64) -> i64 {
    server.query_one(&format!(
        "SELECT (extract(epoch FROM snowflake_timestamp({id}::bigint)) * 1000)::bigint"
    ))
}

/// Joining a fleet that already makes IDs. Two servers made IDs without a
/// registry under node ids 3 and 4, their clocks an hour ahead (so that their IDs lie ahead of
/// every clock of the fleet: the case only a mark protects), then are given the registry with
/// their node ids unset (assigned 1 and 2: node id 0 is taken). Their claims record 3 and 4 in
/// the registry as retired at the end of their reservations, so a third server is assigned
/// neither (5), and a server configured with 3 is refused. On 0.5.0 the third was assigned 3
/// and stamped its IDs an hour below the old server's.
#[test]
fn node_ids_used_before_joining_are_never_handed_out_below_their_ids() {
    let registry = registry();
    let first = member("join0", &registry, None);
    create_table(&first);
    assert_eq!(claimed_node(&first), 0);
    let mut last_ms = vec![];
    let (mut joined, mut olds) = (vec![], vec![]);
    for (name, node) in [("joinold3", 3), ("joinold4", 4)] {
        let old = Server::start(name, Config::node(node).fake_clock("+1h"));
        let ids = take_ids(&mut old.connect(), 1_000, 1_000);
        last_ms.push((node, ms_of(&old, *ids.last().unwrap())));
        old.set_clock("+0");
        join_with_node_id_unset(&old, &registry);
        old.stop();
        old.start_again();
        joined.push(claimed_node(&old));
        olds.push(old);
    }
    assert_eq!(joined, vec![1, 2], "assigned the lowest free ids");
    for (node, last) in &last_ms {
        let row: (String, i64) = {
            let row = registry
                .connect()
                .query_one(
                    "SELECT state, high_water_ms FROM snowflake_nodes WHERE node_id = $1",
                    &[node],
                )
                .unwrap_or_else(|e| panic!("no row for node id {node}: {e}"));
            (row.get(0), row.get(1))
        };
        assert_eq!(row.0, "retired", "node id {node}");
        assert!(
            row.1 >= *last,
            "node id {node}'s mark {} is below the IDs made under it ({last})",
            row.1
        );
    }
    let third = member("jointhird", &registry, None);
    let node = claimed_node(&third);
    assert!(
        node != 3 && node != 4,
        "the third server was given node id {node}, used before up to an hour ahead; the \
         registry:\n{}",
        snowflake_it::registry::registry_rows(&registry)
    );
    let configured = member("joinconfigured", &registry, Some(3));
    wait_until(Duration::from_secs(15), "the claim of 3 refused", || {
        refusing(&configured).as_deref() == Some("claim refused")
    });
}

/// A server that made IDs without a registry under node id 0, its clock an hour
/// ahead, joins a fleet where another server holds 0 live. Its claim records 0 as used: the
/// live row's mark is raised to the end of its IDs (its holder left alone, still making IDs),
/// so that whoever claims 0 next starts above them. Before the fix a live row was left as it
/// was, its mark an hour below the IDs made under its id.
#[test]
fn a_node_id_used_before_joining_raises_the_mark_of_its_live_holder() {
    let registry = registry();
    let holder = member("rbholder", &registry, None);
    create_table(&holder);
    assert_eq!(claimed_node(&holder), 0);
    let old = Server::start("rbold", Config::node(0).fake_clock("+1h"));
    let ids = take_ids(&mut old.connect(), 1_000, 1_000);
    let last = ms_of(&old, *ids.last().unwrap());
    old.set_clock("+0");
    join_with_node_id_unset(&old, &registry);
    old.stop();
    old.start_again();
    assert_eq!(claimed_node(&old), 1, "the lowest free id");
    let (state, mark): (String, i64) = {
        let row = registry
            .connect()
            .query_one(
                "SELECT state, high_water_ms FROM snowflake_nodes WHERE node_id = 0",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(state, "live", "the holder's row stays its own");
    assert!(
        mark >= last,
        "node id 0's mark {mark} is below the IDs made under it before the join ({last})"
    );
    let _: i64 = holder.query_one("SELECT snowflake_nextval()");
}

/// The mark a joiner's IDs raised stays raised through its holder's clean stop. A server that
/// made IDs under node id 0 without a registry, its clock 40 s ahead, joins a fleet where
/// another server holds 0 (fenced); the join raises 0's mark above those IDs. The holder then
/// stops cleanly, which releases its claim: its release may bring the mark down only from the
/// value its own claim wrote, never below another server's raise. The next holder of 0 starts
/// above the joiner's IDs. Before the fix the release brought the mark back to the holder's own
/// reservation, 38.8 s below them, and the next holder made the joiner's IDs again.
#[test]
fn a_clean_stop_never_lowers_the_mark_a_joiners_ids_raised() {
    clean_stop_after_a_join("+40s", LEASE_MS, false);
}

/// The same with the joiner's clock 10 s ahead and a lease of 20 s: the joiner's IDs lie below
/// the holder's ceiling, so the join finds the mark past them already; it moves it all the same
/// (a millisecond), so that the holder's release, a compare-and-set on the value its own claim
/// wrote, leaves it there. Before the fix the release brought it below them too.
#[test]
fn a_clean_stop_never_lowers_the_mark_below_a_joiners_ids_under_its_ceiling() {
    clean_stop_after_a_join("+10s", 20_000, true);
}

/// A holder of node id 0 with a lease of `lease_ms`, a joiner that made IDs under 0 with its
/// clock `lead` ahead (`under_ceiling`: below the mark the holder's heartbeats leave), the
/// holder's clean stop, then the next holder of 0: the mark and the IDs on either side.
fn clean_stop_after_a_join(lead: &str, lease_ms: i64, under_ceiling: bool) {
    let registry = registry();
    let lease = format!("pg_snowflake.registry_lease_ms = {lease_ms}");
    let holder = Server::start(
        "csholder",
        member_config(&registry, Some(0)).setting(&lease),
    );
    create_table(&holder);
    assert_eq!(claimed_node(&holder), 0);
    // The holder makes IDs: its release has a reservation to bring the mark down to.
    let _ = take_ids(&mut holder.connect(), 1_000, 500);
    let joiner = Server::start("csjoiner", Config::node(0).fake_clock(lead));
    let joined = take_ids(&mut joiner.connect(), 2_000, 500);
    let last = *joined.iter().max().unwrap();
    let last_ms = ms_of(&joiner, last);
    let mark = || -> i64 {
        registry.query_one("SELECT high_water_ms FROM snowflake_nodes WHERE node_id = 0")
    };
    assert_eq!(
        mark() >= last_ms,
        under_ceiling,
        "the holder's mark against the joiner's IDs"
    );
    joiner.set_clock("+0");
    join_with_node_id_unset(&joiner, &registry);
    joiner.stop();
    joiner.start_again();
    assert_eq!(claimed_node(&joiner), 1, "the lowest free id");
    assert!(mark() >= last_ms, "the join raised node id 0's mark");
    holder.stop();
    let after = mark();
    assert!(
        after >= last_ms,
        "the holder's clean stop brought node id 0's mark down to {after}, {} ms below the \
         joiner's IDs ({last_ms})",
        last_ms - after
    );
    let next = Server::start("csnext", member_config(&registry, Some(0)).setting(&lease));
    assert_eq!(claimed_node(&next), 0);
    let ids = take_ids(&mut next.connect(), 2_000, 500);
    let joined: HashSet<i64> = joined.into_iter().collect();
    let again = ids.iter().filter(|id| joined.contains(id)).count();
    assert_eq!(
        again, 0,
        "the next holder of node id 0 made {again} of the joiner's IDs again"
    );
    assert!(
        ids[0] > last,
        "the next holder's first ID {} is below the joiner's last {last}",
        ids[0]
    );
}

#[test]
fn a_server_whose_id_was_taken_over_stops_at_its_next_heartbeat() {
    let registry = registry();
    let holder = member("holder", &registry, Some(9));
    create_table(&holder);
    claimed_node(&holder);
    let _: i64 = holder.query_one("SELECT snowflake_nextval()");
    // What a takeover does to the row: another server's token, a generation more, its lease.
    registry.execute(
        "UPDATE snowflake_nodes SET generation = generation + 1, owner_token = repeat('ab', 16), \
         holder_label = 'rival', lease_until = clock_timestamp() + interval '1 hour' \
         WHERE node_id = 9",
    );
    // Found at the next heartbeat, said once, then claimed again: the configured id is refused
    // while the rival holds it, naming the rival.
    wait_until(Duration::from_secs(10), "the claim refused", || {
        refusing(&holder).as_deref() == Some("claim refused")
    });
    assert!(
        holder.log().contains(
            "WARNING:  this server lost node id 9: another server, \"rival\", took it over in the registry"
        ),
        "the loss is logged: {}",
        holder.log()
    );
    expect_error(
        holder
            .connect()
            .query_one("SELECT snowflake_nextval()", &[]),
        "55000",
        "node id 9 is held by another server, \"rival\", last seen at …",
    );
}

#[test]
fn a_retired_id_is_handed_out_again_only_past_its_mark_and_above_its_ids() {
    let registry = registry();
    let old = member("old", &registry, Some(5));
    create_table(&old);
    claimed_node(&old);
    let old_ids = take_ids(&mut old.connect(), 1_000, 1_000);
    let other = member("other", &registry, Some(6));
    claimed_node(&other);
    old.stop();
    // Gone, but within its lease: it might still be making IDs (cut off, not stopped).
    expect_error(
        other
            .connect()
            .query_one("SELECT snowflake_registry_retire(5)", &[]),
        "55006",
        "node id 5 is leased to \"…",
    );
    expect_error(
        other
            .connect()
            .query_one("SELECT snowflake_registry_retire(77)", &[]),
        "42704",
        "the registry holds no live node id 77…",
    );
    // An id whose holder is connected is not retired.
    let err = other
        .connect()
        .query_one("SELECT snowflake_registry_retire(6)", &[])
        .expect_err("a connected holder's id");
    let db = assert_error(&err, "55006", "node id 6 is held by \"…", None, None);
    assert!(
        db.message()
            .ends_with(", which is connected to the registry"),
        "{db:?}"
    );
    assert!(db
        .hint()
        .is_some_and(|h| h.starts_with("Stop that server first")));
    let mut mark = String::new();
    wait_until(Duration::from_secs(10), "the lease run out", || {
        let retired = other
            .connect()
            .query_one("SELECT snowflake_registry_retire(5)::text", &[]);
        retired.map(|row| mark = row.get(0)).is_ok()
    });
    println!("node id 5 retired with its high-water mark at {mark}");
    let retired_at = Instant::now();
    // The new holder's margin: its clock within 20 s of the registry's. The id stays retired
    // until the registry's clock is past the mark by that much, which is the window in which
    // the new server's first claim must come to be refused: 20 s leaves room for a slow start
    // on a busy machine (with 8 s, a start beside seven other tests once came after it).
    let new = Server::start(
        "new",
        member_config(&registry, Some(5)).setting("pg_snowflake.max_clock_skew_ms = 20000"),
    );
    wait_until(Duration::from_secs(10), "the refusal", || {
        refusing(&new).as_deref() == Some("claim refused")
    });
    expect_error(
        new.connect().query_one("SELECT snowflake_nextval()", &[]),
        "55000",
        "node id 5 is retired and is handed out again only after …",
    );
    assert_eq!(claimed_node(&new), 5);
    let waited = retired_at.elapsed();
    println!("recycled after {waited:?}");
    assert!(new.log().contains("recycled"), "{}", new.log());
    let first_new: i64 = new.query_one("SELECT snowflake_nextval()");
    assert!(first_new > *old_ids.iter().max().unwrap());
}

/// The IDs `server` hands out in `n` separate calls, each acknowledged to the client.
fn acknowledged(server: &Server, n: usize) -> Vec<i64> {
    let mut client = server.connect();
    (0..n)
        .map(|_| {
            client
                .query_one("SELECT snowflake_nextval()", &[])
                .unwrap()
                .get(0)
        })
        .collect()
}

#[test]
fn a_standby_promoted_after_its_primary_died_continues_above_every_acknowledged_id() {
    let registry = registry();
    let primary = member("primary", &registry, None);
    create_table(&primary);
    let node = claimed_node(&primary);
    // An asynchronous standby whose clock is 20 s behind, within the clock margin it is
    // configured with (21 s). Promoted, it cannot prove it is the running primary: it waits
    // until the primary has been silent a heartbeat interval and that margin, and then starts
    // above the id's mark. Either would keep its IDs above the primary's; both are its.
    let standby = Server::standby_of(
        &primary,
        "standby",
        member_config(&registry, None)
            .fake_clock("-20s")
            .setting("pg_snowflake.max_clock_skew_ms = 21000"),
    );
    let ids = acknowledged(&primary, 2_000);
    primary.crash();
    standby.promote();
    let behind = standby.clock_behind_s();
    assert!(behind > 19.0, "the standby's clock is {behind} s behind");
    let took = snowflake_it::registry::claimed_within(&standby, Duration::from_secs(60))
        .unwrap_or_else(|said| panic!("the promoted standby claimed nothing: {said}"));
    assert_eq!(took, node, "the standby continues its primary's node id");
    let after = acknowledged(&standby, 2_000);
    let highest = *ids.iter().max().unwrap();
    assert!(
        after.iter().all(|&id| id > highest),
        "an ID at or below the old primary's last acknowledged one"
    );
    assert!(standby.log().contains("(takeover") || standby.log().contains("(restart"));
    // The old primary back, beside its successor: an older generation of the same node id.
    primary.start_again();
    let moved = claimed_node(&primary);
    assert_ne!(
        moved, node,
        "the old primary must not make IDs under its old node id again"
    );
    assert!(primary.log().contains("fresh id"), "{}", primary.log());
}

#[test]
fn a_standby_told_to_take_a_fresh_id_on_promotion_does_and_retires_its_primarys() {
    let registry = registry();
    let primary = member("primary2", &registry, None);
    create_table(&primary);
    let node = claimed_node(&primary);
    let standby = Server::standby_of(
        &primary,
        "standby2",
        member_config(&registry, None).setting("pg_snowflake.fresh_node_id_on_promotion = on"),
    );
    let _ = acknowledged(&primary, 100);
    primary.crash();
    standby.promote();
    let fresh = claimed_node(&standby);
    assert_ne!(fresh, node);
    // Retired once the primary's lease has run out: until then it might still make IDs.
    wait_until(Duration::from_secs(15), "the primary's id retired", || {
        standby.query_one::<String>(&format!(
            "SELECT state FROM snowflake_registry() WHERE node_id = {node}"
        )) == "retired"
    });
    assert!(standby
        .log()
        .contains(&format!("retired node id {node}, its primary's")));
    // A restart does not take yet another one.
    standby.stop();
    standby.start_again();
    assert_eq!(claimed_node(&standby), fresh);
}

/// A standby promoted with `fresh_node_id_on_promotion` takes a fresh id and leaves its
/// primary's to retire once the primary's lease has run out (10 s here: at least 6.7 s after
/// the crash, heartbeats being a third of a lease apart; the restart is checked about 1.7 s
/// after it); its renewer restarts before that. The id is retired all the same: the pending
/// retirement is kept in shared memory, where the restarted renewer finds it. Before the fix
/// the new renewer had forgotten it, and the primary's id stayed `lost` until an operator
/// retired it.
#[test]
fn a_promoted_standbys_renewer_restarted_before_its_primarys_lease_ran_out_still_retires_it() {
    let registry = registry();
    let lease = "pg_snowflake.registry_lease_ms = 10000";
    let primary = Server::start("primary_ra", member_config(&registry, None).setting(lease));
    create_table(&primary);
    let node = claimed_node(&primary);
    let standby = Server::standby_of(
        &primary,
        "standby_ra",
        member_config(&registry, None)
            .setting(lease)
            .setting("pg_snowflake.fresh_node_id_on_promotion = on"),
    );
    let _ = acknowledged(&primary, 100);
    primary.crash();
    standby.promote();
    let fresh = claimed_node(&standby);
    assert_ne!(fresh, node);
    let state = |server: &Server| {
        server.query_one::<String>(&format!(
            "SELECT state FROM snowflake_registry() WHERE node_id = {node}"
        ))
    };
    assert_ne!(state(&standby), "retired", "retired while its lease ran");
    restart_renewer(&standby);
    assert_ne!(state(&standby), "retired", "retired while its lease ran");
    // Retired a lease after its last heartbeat, past its mark already: free at once.
    wait_until(Duration::from_secs(40), "the primary's id retired", || {
        standby
            .log()
            .contains(&format!("retired node id {node}, its primary's"))
    });
    assert!(["retired", "free"].contains(&state(&standby).as_str()));
    assert_eq!(claimed_node(&standby), fresh);
}

#[test]
fn a_restored_backup_started_while_its_origin_is_down_continues_above_the_mark() {
    let registry = registry();
    let origin = member("origin3", &registry, None);
    create_table(&origin);
    let node = claimed_node(&origin);
    // The backup: a copy of the data directory, kept stopped.
    let backup = Server::standby_of(&origin, "backup3", member_config(&registry, None));
    backup.stop();
    // The origin restarts (under a token of its own: a start from disk proves nothing), makes
    // IDs, and is then stopped (its claim released).
    origin.stop();
    origin.start_again();
    assert_eq!(claimed_node(&origin), node);
    let made = acknowledged(&origin, 1_000);
    origin.stop();
    // The backup, restored as a primary while its origin is down (a disaster recovery): a
    // stranger to the id's claim now, it takes the released id over above its mark, after
    // the wait any takeover makes.
    backup.as_postgres(&format!("rm {}", backup.data_file("standby.signal")));
    backup.start_again();
    assert_eq!(claimed_node(&backup), node, "the backup continues the id");
    let after = acknowledged(&backup, 1_000);
    let highest = *made.iter().max().unwrap();
    assert!(
        after.iter().all(|&id| id > highest),
        "the backup made an ID at or below its origin's last one, {highest}"
    );
    // The origin, back beside it, is given a fresh id.
    origin.start_again();
    let fresh = claimed_node(&origin);
    assert_ne!(
        fresh, node,
        "the origin took its id back from the running backup"
    );
    assert!(origin.log().contains("fresh id"), "{}", origin.log());
}

/// A statement on `copy`, refused as a copy of the server holding `node`. A copy found out
/// drops its origin's token, so a statement hears "a copy" during one renewal only (a second)
/// and "held by another server" after: on a machine that delayed the statement past that
/// second, the refusal is the renewer's warning in the copy's log.
fn expect_refused_as_copy(copy: &Server, node: i32) {
    let copy_said =
        format!("this data directory is a copy of the server holding node id {node}, \"");
    let result = copy.connect().query_one("SELECT snowflake_nextval()", &[]);
    let later = format!("node id {node} is held by another server, \"");
    match result
        .as_ref()
        .err()
        .and_then(|e| e.as_db_error())
        .map(|db| db.message())
    {
        Some(said) if said.starts_with(&later) => assert!(
            copy.log().contains(&format!("WARNING:  {copy_said}")),
            "the copy was not refused as a copy; its log:\n{}",
            copy.log()
        ),
        _ => expect_error(result, "55000", &format!("{copy_said}…")),
    }
}

#[test]
fn a_clone_configured_with_its_origins_node_id_is_refused() {
    let registry = registry();
    let origin = member("origin4", &registry, Some(4));
    create_table(&origin);
    claimed_node(&origin);
    let clone = Server::standby_of(&origin, "clone4", member_config(&registry, Some(4)));
    clone.promote();
    wait_until(Duration::from_secs(20), "the refusal", || {
        refusing(&clone).as_deref() == Some("claim refused")
    });
    expect_refused_as_copy(&clone, 4);
    assert_eq!(ids_issued(&clone), 0);
}

/// A copy of a fenced holder (pg_basebackup, its own port and label, the holder's
/// node id configured) is refused as a copy while the holder is connected. The holder's
/// renewer then restarts, three times: each time its registry session is gone for about a
/// second, its claim released. The copy never takes the id in that gap, and the holder claims
/// it again each time and goes on making IDs. Before the fix the copy took the id as "the
/// holder restarted" (same token and generation, not connected) at the first restart, and the
/// holder was refused for good as "a copy of the server holding node id 7". After a release
/// the copy, another server now, waits a heartbeat interval and the clock margin for a running
/// holder to come back: a margin of 10 s, not the fleet's 2 s, keeps the gap inside it on a
/// loaded machine (one run's second restart took 3.3 s, and the copy took the id).
#[test]
fn a_refused_copy_never_takes_the_id_while_its_holders_renewer_restarts() {
    let registry = registry();
    let config =
        || member_config(&registry, Some(7)).setting("pg_snowflake.max_clock_skew_ms = 10000");
    let origin = Server::start("h2origin", config());
    create_table(&origin);
    assert_eq!(claimed_node(&origin), 7);
    let copy = Server::standby_of(&origin, "h2copy", config());
    copy.promote();
    wait_until(Duration::from_secs(20), "the copy refused", || {
        refusing(&copy).as_deref() == Some("claim refused")
    });
    expect_refused_as_copy(&copy, 7);
    let mut last: i64 = origin.query_one("SELECT snowflake_nextval()");
    for restart in 1..=3 {
        let claims = origin
            .log()
            .matches("pg_snowflake claimed node id 7")
            .count();
        restart_renewer(&origin);
        wait_until(
            Duration::from_secs(20),
            &format!("the holder's claim after its renewer's restart {restart}"),
            || {
                origin
                    .log()
                    .matches("pg_snowflake claimed node id 7")
                    .count()
                    > claims
                    || copy.log().contains("pg_snowflake claimed node id 7")
            },
        );
        assert!(
            !copy.log().contains("pg_snowflake claimed node id 7"),
            "the copy took node id 7 at the holder's renewer restart {restart}:\n{}",
            copy.log()
        );
        assert_eq!(claimed_node(&origin), 7);
        let id: i64 = origin.query_one("SELECT snowflake_nextval()");
        assert!(id > last, "{id} <= {last}");
        last = id;
        // A second for the copy's next attempts, with the holder back.
        thread::sleep(Duration::from_millis(1_500));
        assert_eq!(refusing(&copy).as_deref(), Some("claim refused"));
    }
    assert_eq!(ids_issued(&copy), 0);
    assert_eq!(node_of(&origin, last), 7);
}

#[test]
fn the_registry_setting_is_hidden_from_ordinary_users() {
    let registry = registry();
    let server = member("hidden", &registry, Some(3));
    server.execute("CREATE ROLE app LOGIN");
    // Postgres words the refusal differently from one major to the next: its SQLSTATE is the
    // contract.
    let err = server
        .connect_as("app")
        .query_one("SHOW pg_snowflake.registry", &[])
        .expect_err("only superusers may read the connection string");
    assert_eq!(err.code().map(|c| c.code()), Some("42501"), "{err}");
    let shown: String = server.query_one("SHOW pg_snowflake.registry");
    assert!(shown.contains("dbname=postgres"), "{shown}");
}

/// How long after its last call a server's renewer keeps its reservation ahead of the clock
/// (ms; the core's `generator::KEEP_AHEAD_MS`).
const KEEP_AHEAD_MS: i64 = 60_000;

/// A server whose IDs run ahead of its clock by more than a lease and an idle minute (it made
/// IDs with its clock 100 s ahead before joining; its lease is 3 s) makes a few IDs, then stays
/// idle past the minute in which its renewer keeps the reservation ahead of the clock. Its
/// steady clock counts on (slowed to nine tenths: the clock is still behind it), its
/// reservation stays where it was; its heartbeats record a mark a lease past where its IDs now are, so its next call is
/// granted in fenced mode, and in available mode nothing it makes is counted past the mark. Before, the mark was a lease past the old reservation: the fenced
/// server's call was refused (the reservation would pass the ceiling) until heartbeats had
/// raised the ceiling a lease at a time, and the available server counted its IDs past the mark
/// while every heartbeat succeeded.
#[test]
fn a_server_running_ahead_of_its_clock_makes_ids_below_the_mark_after_an_idle_minute() {
    let registry = registry();
    let first = member("aheadreg", &registry, None);
    create_table(&first);
    let servers: Vec<(Server, &str)> = [("aheadf", "fenced"), ("aheada", "available")]
        .into_iter()
        .enumerate()
        .map(|(i, (name, mode))| {
            let server = Server::start(name, Config::node(10 + i as i32).fake_clock("+100s"));
            let _ = take_ids(&mut server.connect(), 200, 100);
            server.set_clock("+0");
            join_with_node_id_unset(&server, &registry);
            server.execute(&format!(
                "ALTER SYSTEM SET pg_snowflake.registry_mode = '{mode}'"
            ));
            server.stop();
            server.start_again();
            claimed_node(&server);
            // Two calls a second and a half apart: the second finds the clock behind the
            // steady clock, which counts on from then (slowed to nine tenths) while calls come.
            for _ in 0..2 {
                next_id(&server).unwrap_or_else(|e| panic!("{mode}: an ID after the join: {e}"));
                thread::sleep(Duration::from_millis(1_500));
            }
            (server, mode)
        })
        .collect();
    // Idle past the minute of keeping the reservation ahead, and past a lease more.
    thread::sleep(Duration::from_millis((KEEP_AHEAD_MS + 5 * LEASE_MS) as u64));
    for (server, mode) in &servers {
        let id = next_id(server).unwrap_or_else(|e| {
            panic!(
                "{mode}: the call after the idle minute was refused: {}",
                describe(&e)
            )
        });
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64;
        let ahead = ms_of(server, id) - now_ms;
        assert!(
            ahead > LEASE_MS,
            "{mode}: the ID is stamped {ahead} ms ahead of the clock, within the lease: the case \
             is not made"
        );
        let past: i64 = server.query_one("SELECT ids_past_mark FROM snowflake_stats()");
        assert_eq!(
            past, 0,
            "{mode}: IDs counted past the mark while heartbeats succeed"
        );
    }
}

/// A cold copy of a cleanly stopped holder's data directory (`cp -a`, a snapshot of its stopped
/// volume) carries every file of it: its token, its clean stop, the claim it released. It is
/// still not the holder's planned restart, which only a start where the holder ran is. Started
/// before its origin, it waits as a restart from a crash waits, and the origin started meanwhile
/// takes its id back at once and finds the copy out; started after, it meets the running origin.
/// Either way the origin keeps node id 7 and the copy makes no ID. The clock margin is wide here
/// (10 s), so that the copy's wait outlasts the copying and both starts.
fn a_cold_copy_never_passes_for_its_origins_planned_restart(name: &str, copy_first: bool) {
    let registry = registry();
    let wide = |c: Config| {
        c.setting("pg_snowflake.max_clock_skew_ms = 10000")
            .setting(&format!("cluster_name = '{name}origin'"))
    };
    let origin = Server::start(
        &format!("{name}origin"),
        wide(member_config(&registry, Some(7))),
    );
    create_table(&origin);
    assert_eq!(claimed_node(&origin), 7);
    let before = *take_ids(&mut origin.connect(), 1_000, 1_000)
        .iter()
        .max()
        .unwrap();
    origin.stop();
    assert!(
        origin.log().contains("released its claim of node id 7"),
        "{}",
        origin.log()
    );
    let copy = Server::cold_copy_of(
        &origin,
        &format!("{name}copy"),
        &[&format!("cluster_name = '{name}copy'")],
    );
    if copy_first {
        copy.start_again();
        origin.start_again();
    } else {
        origin.start_again();
        assert_eq!(claimed_node(&origin), 7);
        copy.start_again();
    }
    assert_eq!(claimed_node(&origin), 7, "{}", copy.log());
    // The copy's wait (a heartbeat interval and the margin) runs out while the origin runs: it
    // is refused all along.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(13_000) {
        assert!(
            !copy.log().contains("claimed node id 7"),
            "the copy took node id 7:\n{}",
            copy.log()
        );
        assert_eq!(refusing(&origin), None, "{}", origin.log());
        thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        refusing(&copy).as_deref(),
        Some("claim refused"),
        "{}",
        copy.log()
    );
    assert_eq!(ids_issued(&copy), 0);
    let after = take_ids(&mut origin.connect(), 1_000, 1_000);
    assert!(
        after.iter().all(|&id| id > before),
        "an ID at or below {before}"
    );
    assert_eq!(node_of(&origin, after[0]), 7);
}

#[test]
fn a_cold_copy_started_before_its_stopped_origin_does_not_take_its_id() {
    a_cold_copy_never_passes_for_its_origins_planned_restart("cold1", true);
}

#[test]
fn a_cold_copy_started_after_its_origin_does_not_take_its_id() {
    a_cold_copy_never_passes_for_its_origins_planned_restart("cold2", false);
}
