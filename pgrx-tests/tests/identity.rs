//! A server's identity across restarts: the node ids it used before (its history) and its
//! registry claim (token, generation) must survive whatever a restart can fall between. A
//! standby that replayed its primary's move to a new node id remembers it past a restartpoint
//! and a restart, so that promoted under that id with its clock behind it makes none of the
//! primary's IDs again; a restart between a registry claim and the claim's pin in
//! the state file leaves the server able to claim its node id again. Real servers:
//! streaming replication (pg_basebackup), libfaketime for the clocks, a registry server.

use snowflake_it::registry::{
    claimed_node, claimed_within, member_config, next_id, refusing, registry_rows, registry_server,
};
use snowflake_it::{describe, wait_until, Config, Server};
use std::time::{Duration, Instant};

/// The real time, Unix ms.
fn real_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Waits until `standby` has replayed everything `primary` has written so far.
fn caught_up(primary: &Server, standby: &Server) {
    let lsn: String = primary.query_one("SELECT pg_current_wal_lsn()::text");
    wait_until(Duration::from_secs(30), "the standby's replay", || {
        standby.query_one::<bool>(&format!(
            "SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn"
        ))
    });
}

/// The documented remedy for a lead (SAFETY.md §3: give the server a node id it
/// never used) on a primary with a streaming standby: the primary's clock ran 10 minutes
/// ahead under node id 5, then it restarts with node id 6 and its clock right. Its node-6
/// reservations lie below the standby's floor (node 5's lead), so replaying them raises
/// nothing. After an idle minute (keep-ahead stops) and a restartpoint past the last node-6
/// record, the standby restarts with node id 6, is promoted when the primary is gone, and its
/// clock is set back to the time of the primary's first node-6 rows: every ID it makes must
/// lie above the primary's node-6 IDs (no duplicate key).
#[test]
fn a_standby_promoted_under_its_primarys_new_node_id_makes_none_of_that_ids_ids_again() {
    let primary = Server::start("g1primary", Config::node(5).fake_clock("+600"));
    primary.execute(
        "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), who text); \
         INSERT INTO t (who) SELECT 'P5' FROM generate_series(1, 1000)",
    );
    let standby = Server::standby_of(&primary, "g1standby", Config::default().fake_clock("+0"));
    primary.execute("INSERT INTO t (who) SELECT 'P5' FROM generate_series(1, 1000)");
    caught_up(&primary, &standby);

    // The remedy: node id 6, never used, and the clock set right.
    primary.execute("ALTER SYSTEM SET pg_snowflake.node_id = 6");
    primary.set_clock("+0");
    primary.stop();
    primary.start_again();
    primary.execute("INSERT INTO t (who) SELECT 'P6' FROM generate_series(1, 50000)");
    let (first_6, last_6): (i64, i64) = {
        let row = primary
            .connect()
            .query_one("SELECT min(id), max(id) FROM t WHERE who = 'P6'", &[])
            .unwrap();
        (row.get(0), row.get(1))
    };
    let stamped_ms = |server: &Server, id: i64| -> i64 {
        server.query_one(&format!(
            "SELECT (extract(epoch FROM snowflake_timestamp({id}::bigint)) * 1000)::bigint"
        ))
    };
    let (first_6_ms, last_6_ms) = (stamped_ms(&primary, first_6), stamped_ms(&primary, last_6));
    assert_eq!(
        primary.query_one::<i32>(&format!("SELECT snowflake_node_id({first_6}::bigint)")),
        6
    );
    println!(
        "the primary's node-6 IDs: {first_6}..{last_6}, stamped over {} ms",
        last_6_ms - first_6_ms
    );
    assert!(
        (first_6_ms - real_now_ms()).abs() < 10_000,
        "node 6 kept the lead: the remedy did not apply"
    );

    // An idle minute: keep-ahead stops, no node-6 reservation follows. The minute (the core's
    // `KEEP_AHEAD_MS`) is slept, then the primary's last reservation is waited for to run out,
    // to a tenth of a second. Then a checkpoint on the primary and a restartpoint on the
    // standby, past the last node-6 record.
    std::thread::sleep(Duration::from_secs(60));
    let mut watcher = primary.connect();
    let ran_out = watcher
        .prepare(
            "SELECT coalesce(reserved_until < clock_timestamp(), false) FROM snowflake_stats()",
        )
        .unwrap();
    let idle = Instant::now();
    while !watcher.query_one(&ran_out, &[]).unwrap().get::<_, bool>(0) {
        assert!(
            idle.elapsed() < Duration::from_secs(90),
            "the primary's reservation never ran out"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "the primary's reservation ran out {:.1} s after the idle minute",
        idle.elapsed().as_secs_f64()
    );
    primary.execute("CHECKPOINT");
    caught_up(&primary, &standby);
    standby.execute("CHECKPOINT");
    let file =
        standby.output_as_postgres(&format!("cat {}", standby.data_file("pg_snowflake.state")));
    println!("the standby's state file: {}", file.trim());

    // The standby takes its primary's node id (a standby keeps its primary's), restarts, and
    // is promoted once the primary is gone.
    standby.execute("ALTER SYSTEM SET pg_snowflake.node_id = 6");
    standby.stop();
    standby.start_again();
    primary.stop();
    standby.promote();
    // Its clock set back to 2 s before the primary's first node-6 row (the backends read the
    // offset within a second, a connection at its start).
    let settle_ms = 2_200;
    let offset_s = (first_6_ms - 2_000 - settle_ms - real_now_ms()) / 1_000;
    standby.set_clock(&format!("{offset_s:+}"));
    std::thread::sleep(Duration::from_millis(settle_ms as u64));
    println!(
        "the promoted standby's clock is {:.1} s behind",
        standby.clock_behind_s()
    );

    // Rows until the standby's clock has passed the primary's node-6 rows (a few seconds), or
    // the first error.
    let mut client = standby.connect();
    let started = Instant::now();
    let mut failure = None;
    let mut inserted = 0;
    while started.elapsed() < Duration::from_secs(20) {
        match client.batch_execute("INSERT INTO t (who) SELECT 'S' FROM generate_series(1, 20000)")
        {
            Ok(()) => inserted += 20_000,
            Err(e) => {
                failure = Some(describe(&e));
                break;
            }
        }
        let latest: i64 = client
            .query_one("SELECT max(id) FROM t WHERE who = 'S'", &[])
            .unwrap()
            .get(0);
        if stamped_ms(&standby, latest) > last_6_ms + 1_000 {
            break;
        }
    }
    assert_eq!(
        failure, None,
        "the promoted standby re-issued its primary's node-6 IDs ({first_6}..{last_6}) after \
         {inserted} rows"
    );
    let lowest: i64 = standby.query_one("SELECT min(id) FROM t WHERE who = 'S'");
    assert!(
        lowest > last_6,
        "the standby's IDs start at {lowest}, within or below its primary's node-6 IDs \
         ({first_6}..{last_6})"
    );
    let next: i64 = standby.query_one("SELECT snowflake_nextval()");
    assert!(next > last_6);
}

/// A restart between a registry claim and its pin: the claim raised the registry's
/// generation, the pin (the state file's rewrite) failed (`pg_snowflake.state.tmp` made a
/// directory: EISDIR), and the server stopped. Once the file can be written again, the next
/// start claims its node id again and makes IDs above the ones it made before, within seconds.
#[test]
fn a_restart_between_a_claim_and_its_pin_does_not_refuse_the_server_for_good() {
    let registry = registry_server("g4registry");
    let server = Server::start(
        "g4member",
        member_config(&registry.conninfo("postgres"), Some(5)),
    );
    server.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&server), 5);
    let first: i64 = server.query_one("SELECT snowflake_nextval()");
    let generation = || -> i64 {
        registry.query_one("SELECT generation FROM snowflake_nodes WHERE node_id = 5")
    };
    assert_eq!(generation(), 1);
    server.stop();

    // The state file cannot be written (the claim's intent before the registry's commit, or on
    // 0.5.0 the pin after it: the claim is made, generation 2, and the file keeps 1).
    let tmp = server.data_file("pg_snowflake.state.tmp");
    server.as_postgres(&format!("mkdir {tmp}"));
    server.start_again();
    wait_until(Duration::from_secs(15), "a failed write", || {
        server.log().contains("Is a directory")
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        refusing(&server).as_deref(),
        Some("awaiting the registry claim"),
        "no claim without its state file; the server's log:\n{}\nstats {}\nrow {}",
        server.log(),
        server.query_one::<String>("SELECT row_to_json(s)::text FROM snowflake_stats() s"),
        registry.query_one::<String>("SELECT row_to_json(n)::text FROM snowflake_nodes n")
    );
    println!("the registry's generation meanwhile: {}", generation());
    server.stop();
    server.as_postgres(&format!("rmdir {tmp}"));
    server.start_again();

    let node = claimed_within(&server, Duration::from_secs(15)).unwrap_or_else(|said| {
        panic!(
            "the server did not claim its node id again: {said}; registry generation {}",
            generation()
        )
    });
    assert_eq!(node, 5);
    let after = next_id(&server).unwrap_or_else(|e| panic!("{}", describe(&e)));
    assert!(after > first, "{after} <= {first}, the ID it made before");
}

/// A member configured with node id 7 in fenced mode with the shipped lease (30 s), once it
/// has claimed it (the registry's table made).
fn fenced_member_of_7(name: &str, registry: &Server) -> Server {
    let server = Server::start(
        name,
        member_config(&registry.conninfo("postgres"), Some(7))
            .setting("pg_snowflake.registry_mode = 'fenced'")
            .setting("pg_snowflake.registry_lease_ms = 30000"),
    );
    server.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&server), 7);
    server
}

/// How far an ID made now is stamped ahead of the server's clock (ms).
fn lead_of_a_new_id(server: &Server) -> i64 {
    server.query_one(
        "SELECT (extract(epoch FROM snowflake_timestamp(snowflake_nextval()) - clock_timestamp()) \
         * 1000)::bigint",
    )
}

/// With a fenced registry and the shipped lease (30 s), every restart resumed at the
/// registry's mark, a lease past the last heartbeat, and the next heartbeat's mark a lease
/// past that: 0.5.0 stamped the first ID after each of three quick restarts 26.6, 55.3 and
/// 84.1 s ahead of the clock. A clean stop now releases the claim (the renewer's exit brings
/// the mark down to the durable reservation), so each restart resumes where a server without
/// a registry does, at its reservation's end (`pg_snowflake.reservation_ms` and keep-ahead,
/// about a second past its last IDs: here each restart's IDs lie 0.7 s further ahead, well
/// under the 10 s checked). A kill -9 still resumes at the mark (a copy of the directory could not
/// be told from the restart): at most a lease ahead, and never a second lease.
#[test]
fn clean_restarts_with_a_fenced_registry_stamp_no_id_ahead_of_the_clock() {
    let registry = registry_server("g5registry");
    let server = fenced_member_of_7("g5member", &registry);
    let mut leads = vec![lead_of_a_new_id(&server)];
    for _ in 0..3 {
        server.stop();
        let mark: i64 = registry.query_one("SELECT high_water_ms FROM snowflake_nodes");
        let now = real_now_ms();
        assert!(
            mark < now + 10_000,
            "the stopped server's mark is {} ms ahead of the clock, not its reservation's end; \
             its log:\n{}",
            mark - now,
            server.log()
        );
        server.start_again();
        assert_eq!(claimed_node(&server), 7);
        leads.push(lead_of_a_new_id(&server));
    }
    println!("IDs' lead after each clean restart (ms): {leads:?}");
    assert!(
        leads.iter().all(|&lead| lead < 10_000),
        "IDs stamped ahead of the clock after clean restarts (ms): {leads:?}"
    );
    assert!(
        server.log().contains("released its claim of node id 7"),
        "no release logged:\n{}",
        server.log()
    );

    // A crash resumes at the mark: at most a lease (and the clock margin) ahead.
    server.crash();
    server.start_again();
    assert_eq!(claimed_node(&server), 7);
    let crashed = lead_of_a_new_id(&server);
    println!("IDs' lead after a kill -9 (ms): {crashed}");
    assert!(crashed < 32_000, "{crashed} ms ahead after one crash");
}

/// The crash loop's lease (ms). A restart waits a heartbeat interval (a third of a lease) and
/// the clock margin (2 s) before its claim, so the loop's time grows with the lease; a mark
/// that piled up a lease per crash is past this one at the second crash whatever its length.
/// (With the shipped 30 s the loop took a minute.)
const CRASH_LOOP_LEASE_MS: i64 = 9_000;

/// One `snowflake_nextval()` on a new connection, and how far ahead of the server's clock it
/// is stamped (ms).
fn id_and_lead(server: &Server) -> (i64, i64) {
    let row = server
        .connect()
        .query_one(
            "SELECT id, (extract(epoch FROM snowflake_timestamp(id) - clock_timestamp()) \
             * 1000)::bigint FROM (SELECT snowflake_nextval() AS id) AS call",
            &[],
        )
        .unwrap_or_else(|e| panic!("an ID: {}", describe(&e)));
    (row.get(0), row.get(1))
}

/// A crash loop, as a Kubernetes CrashLoopBackOff makes one: four kill -9s in a row, each as
/// soon as the restarted server has made one ID. A crash releases nothing, so each restart
/// resumes above the registry's mark (no ID the crashed run could have made is made again);
/// but the mark must not pile up a lease per crash: the first ID after each restart is stamped
/// at most one lease (the server's own `pg_snowflake.registry_lease_ms`) ahead of the clock,
/// and above every ID before it. Each restart is claimed within seconds, never refused its own
/// id as a clock fault. Before this, the four restarts stamped their IDs 28, 56, 84 and 112 s
/// ahead under a 30 s lease. The lease here is [`CRASH_LOOP_LEASE_MS`].
fn crash_loop(mode: &str) {
    let registry = registry_server(&format!("crashloop{mode}registry"));
    let server = Server::start(
        &format!("crashloop{mode}member"),
        member_config(&registry.conninfo("postgres"), Some(7))
            .setting(&format!("pg_snowflake.registry_mode = '{mode}'"))
            .setting(&format!(
                "pg_snowflake.registry_lease_ms = {CRASH_LOOP_LEASE_MS}"
            )),
    );
    server.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&server), 7);
    let lease_ms: i64 = server.query_one(
        "SELECT setting::bigint FROM pg_settings WHERE name = 'pg_snowflake.registry_lease_ms'",
    );
    let (mut last, lead) = id_and_lead(&server);
    let mut leads = vec![lead];
    for crash in 1..=4 {
        server.crash();
        server.start_again();
        let node = claimed_within(&server, Duration::from_secs(25)).unwrap_or_else(|said| {
            panic!("{mode}: after crash {crash} (leads so far, ms: {leads:?}): {said}")
        });
        assert_eq!(node, 7);
        let (id, lead) = id_and_lead(&server);
        assert!(
            id > last,
            "{mode}: the first ID after crash {crash}, {id}, is not above the one before, {last}"
        );
        last = id;
        leads.push(lead);
    }
    println!("{mode}: IDs' lead before and after each crash (ms): {leads:?}");
    assert!(
        leads.iter().all(|&lead| lead <= lease_ms),
        "{mode}: the first IDs after crash restarts in a row are stamped further ahead of the \
         clock than a lease ({lease_ms} ms): {leads:?} ms; the registry's rows:\n{}",
        registry_rows(&registry)
    );
}

#[test]
fn crash_restarts_in_a_row_stamp_the_first_id_at_most_a_lease_ahead_in_fenced_mode() {
    crash_loop("fenced");
}

#[test]
fn crash_restarts_in_a_row_stamp_the_first_id_at_most_a_lease_ahead_in_available_mode() {
    crash_loop("available");
}

/// A copy of `origin`'s data directory that carries its whole label: the same `cluster_name`,
/// host name and port, as a cloned VM keeps them (it listens on 127.0.0.2, the origin on
/// 127.0.0.1), with `pg_snowflake.node_id` set to `node` (-1: unset), promoted.
fn copy_with_the_label_of(origin: &Server, name: &str, cluster: &str, node: i32) -> Server {
    let config = Config::default()
        .setting(&format!("cluster_name = '{cluster}'"))
        .setting("listen_addresses = '127.0.0.2'")
        .setting(&format!("port = {}", origin.port))
        .setting(&format!("pg_snowflake.node_id = {node}"));
    let copy = Server::standby_of(origin, name, config);
    copy.promote();
    copy
}

/// A connection to a copy made by [`copy_with_the_label_of`] (on 127.0.0.2, at its origin's port).
fn connect_copy(origin: &Server) -> postgres::Client {
    postgres::Client::connect(
        &format!(
            "host=127.0.0.2 port={} user=postgres dbname=postgres",
            origin.port
        ),
        postgres::NoTls,
    )
    .unwrap_or_else(|e| panic!("connecting to the copy: {e}"))
}

/// The node id the copy makes IDs under (None: it refuses).
fn copy_node_id(origin: &Server) -> Option<i32> {
    let row = connect_copy(origin)
        .query_one("SELECT refusing, node_id FROM snowflake_stats()", &[])
        .unwrap_or_else(|e| panic!("snowflake_stats() on the copy: {}", describe(&e)));
    let refusing: Option<String> = row.get(0);
    row.get::<_, Option<i32>>(1).filter(|_| refusing.is_none())
}

/// A copy of a running holder that carries its whole label (a cloned VM keeps
/// cluster_name, host name and port) was taken for the holder restarted: its claim ended the
/// origin's registry session and took the node id ("restart"), and both made IDs under it (in
/// available mode 52,456 common IDs in one run). A label is not an identity: a session that
/// holds the id's lock is never ended by a claim. A copy waits two leases for the session to
/// end, as the holder's own would after its host went down; then the copy configured with the
/// origin's id is refused as a copy of a running holder, and the one whose id was pinned
/// (assigned) takes a fresh id. The origin keeps its id, its session and its IDs throughout.
#[test]
fn a_copy_with_its_origins_label_never_ends_the_origins_session_nor_takes_its_id() {
    let registry = registry_server("h1registry");
    let config = member_config(&registry.conninfo("postgres"), Some(7))
        .setting("cluster_name = 'db'")
        .setting("pg_snowflake.registry_mode = 'available'");
    let origin = Server::start("h1origin", config);
    origin.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&origin), 7);
    origin.execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())");

    const WAITING: &str = "node id 7 is held by a registry session under this server's own name";
    const COPY: &str = "this data directory is a copy of the server holding node id 7, \"db (";
    const HELD: &str = "node id 7 is held by another server, \"db (";
    for (name, node) in [("h1copy", 7), ("h1clone", -1)] {
        let copy = copy_with_the_label_of(&origin, name, "db", node);
        let started = Instant::now();
        let (mut copy_node, mut waited, mut refused_as_copy) = (None, false, None);
        let mut copy_refusal_logged = false;
        // Both make IDs, the copy refused while it waits for the session to end (two leases
        // of patience); then the configured copy is refused as a copy, the assigned one takes
        // a fresh id. A copy found out drops its origin's token, so a statement hears "a
        // copy" during one renewal only (a second), then "held by another server": a poll a
        // loaded machine delays past that second finds the refusal in the renewer's warning.
        while started.elapsed() < Duration::from_secs(20) {
            origin.execute("INSERT INTO t SELECT FROM generate_series(1, 100)");
            if let Some(made_under) = copy_node_id(&origin) {
                assert_ne!(
                    made_under,
                    7,
                    "the copy {name} makes IDs under its running origin's node id; its log:\n{}",
                    copy.log()
                );
                copy_node = Some(made_under);
                break;
            }
            if let Err(err) = connect_copy(&origin).query_one("SELECT snowflake_nextval()", &[]) {
                let said = err.as_db_error().map(|db| db.message().to_string());
                if said.as_deref().is_some_and(|m| m.starts_with(WAITING)) {
                    snowflake_it::assert_error(
                        &err,
                        "55000",
                        &format!("{WAITING}, \"db (…"),
                        Some("The registry refused this server's claim: it makes no IDs. …"),
                        Some("Wait: the registry ends the session of a server that went down …"),
                    );
                    waited = true;
                }
                if said.as_deref().is_some_and(|m| m.starts_with(COPY)) {
                    refused_as_copy = Some(err);
                    break;
                }
                if node == 7 && said.as_deref().is_some_and(|m| m.starts_with(HELD)) {
                    copy_refusal_logged = copy.log().contains(&format!("WARNING:  {COPY}"));
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            waited,
            "the copy {name} never waited for the session under its own name; its log:\n{}",
            copy.log()
        );
        if node == 7 {
            match refused_as_copy {
                Some(err) => {
                    snowflake_it::assert_error(&err, "55000", &format!("{COPY}…"), None, None);
                }
                None => assert!(
                    copy_refusal_logged,
                    "the configured copy was not refused as a copy; its log:\n{}",
                    copy.log()
                ),
            }
        } else {
            let fresh = copy_node.unwrap_or_else(|| {
                panic!(
                    "the assigned copy took no fresh id; its log:\n{}",
                    copy.log()
                )
            });
            assert!(
                copy.log().contains("fresh id"),
                "the copy's claim: {}",
                copy.log()
            );
            let id: i64 = connect_copy(&origin)
                .query_one("SELECT snowflake_nextval()", &[])
                .map(|row| row.get(0))
                .unwrap_or_else(|e| panic!("the copy's ID: {}", describe(&e)));
            let of: i32 = origin.query_one(&format!("SELECT snowflake_node_id({id}::bigint)"));
            assert_eq!(of, fresh);
        }
        // The origin never lost its id nor its session.
        assert_eq!(refusing(&origin), None);
        assert!(
            !origin.log().contains("lost node id")
                && !origin
                    .log()
                    .contains("terminating connection due to administrator"),
            "the origin's log:\n{}",
            origin.log()
        );
        let id = next_id(&origin).unwrap_or_else(|e| panic!("the origin: {}", describe(&e)));
        let of: i32 = origin.query_one(&format!("SELECT snowflake_node_id({id}::bigint)"));
        assert_eq!(of, 7);
        drop(copy);
    }
}

/// Ends `server`'s renewer (SIGTERM) and waits for the one the postmaster starts a second
/// later.
fn restart_renewer(server: &Server) {
    let old = *server.renewer_pids().first().expect("a renewer runs");
    server.as_postgres(&format!("kill -TERM {old}"));
    wait_until(Duration::from_secs(15), "a new renewer", || {
        server.renewer_pids().first().is_some_and(|&pid| pid != old)
    });
}

/// The IDs `client` makes under node id 7 in one call of 200, if it makes any (a refusal: none).
fn ids_under_7(client: &mut postgres::Client) -> Vec<i64> {
    client
        .query(
            "SELECT id FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 200)) s \
             WHERE snowflake_node_id(id) = 7",
            &[],
        )
        .map(|rows| rows.iter().map(|r| r.get(0)).collect())
        .unwrap_or_default()
}

/// For `seconds`, the origin and `other` (a copy of it) are both asked for IDs, a few hundred
/// every 100 ms: the origin's IDs go into its table `t`; returns those `other` made under node
/// id 7, and how many of them the origin made too.
fn both_asked_for_ids(
    origin: &Server,
    other: &mut dyn FnMut() -> postgres::Client,
    seconds: u64,
) -> (Vec<i64>, usize) {
    let started = Instant::now();
    let (mut others, mut client) = (vec![], other());
    while started.elapsed() < Duration::from_secs(seconds) {
        let _ = origin
            .connect()
            .execute("INSERT INTO t SELECT FROM generate_series(1, 200)", &[]);
        let made = ids_under_7(&mut client);
        if made.is_empty() {
            client = other();
        }
        others.extend(made);
        std::thread::sleep(Duration::from_millis(100));
    }
    let common = others
        .chunks(5_000)
        .map(|chunk| {
            let list: Vec<String> = chunk.iter().map(i64::to_string).collect();
            origin.query_one::<i64>(&format!(
                "SELECT count(*) FROM t WHERE id IN ({})",
                list.join(",")
            )) as usize
        })
        .sum();
    (others, common)
}

/// A copy that carries its origin's whole label (a cloned VM) waits while the origin's
/// session is open; the origin's renewer then restarts (in fenced mode it releases its claim
/// and claims again; in available mode it goes on under it), its session gone for a moment.
/// The copy cannot prove it is the running holder (its boot value is not the row's), so it
/// waits for the holder to come back, and the origin's new renewer (which can) has the id
/// again within a second. In both modes the copy makes no ID under node id 7, the origin is
/// never refused, and never told it is a copy. Before, the copy took the id at the restart as
/// "the holder restarted": fenced, the origin was refused as "a copy" for good; available,
/// both made IDs under 7 for a moment.
#[test]
fn a_copy_with_its_origins_label_never_wins_its_origins_renewer_restart() {
    for mode in ["fenced", "available"] {
        let registry = registry_server(&format!("restart{mode}registry"));
        let config = member_config(&registry.conninfo("postgres"), Some(7))
            .setting("cluster_name = 'db'")
            .setting(&format!("pg_snowflake.registry_mode = '{mode}'"))
            .setting("pg_snowflake.registry_lease_ms = 6000");
        let origin = Server::start(&format!("restart{mode}origin"), config);
        origin.execute("SELECT snowflake_registry_create()");
        assert_eq!(claimed_node(&origin), 7);
        origin.execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())");
        let copy = copy_with_the_label_of(&origin, &format!("restart{mode}copy"), "db", 7);
        wait_until(Duration::from_secs(20), "the copy waiting", || {
            connect_copy(&origin)
                .query_one("SELECT snowflake_nextval()", &[])
                .err()
                .and_then(|e| e.as_db_error().map(|db| db.message().to_string()))
                .is_some_and(|m| m.contains("under this server's own name"))
        });
        restart_renewer(&origin);
        let (copys, common) = both_asked_for_ids(&origin, &mut || connect_copy(&origin), 15);
        assert!(
            copys.is_empty(),
            "{mode}: the copy made {} IDs under node id 7 after its origin's renewer restarted, \
             {common} of them made by the origin too; the copy's log:\n{}",
            copys.len(),
            copy.log()
        );
        assert_eq!(
            refusing(&origin),
            None,
            "{mode}: the origin refuses; its log:\n{}",
            origin.log()
        );
        let id = next_id(&origin).unwrap_or_else(|e| panic!("{mode}: {}", describe(&e)));
        let of: i32 = origin.query_one(&format!("SELECT snowflake_node_id({id}::bigint)"));
        assert_eq!(of, 7);
        for said in ["is a copy of the server holding", "lost node id"] {
            assert!(
                !origin.log().contains(said),
                "{mode}: the origin's log says \"{said}\":\n{}",
                origin.log()
            );
        }
        println!(
            "{mode}: the origin made {} IDs, the copy none under node id 7",
            origin.query_one::<i64>("SELECT count(*) FROM t")
        );
    }
}

/// A clone of a running holder (its own port and cluster_name, node id 7 as its origin's) is
/// started while the registry restarts, and asks for node id 7 the moment the registry is
/// back. Every holder's session ended with the registry; the origin finds its own gone within
/// a turn and reconnects at once, and the clone, which cannot prove it is the holder, waits for
/// it (from the registry's start: the holder could not reach a registry that was down). The
/// clone is then found a copy of a running holder, forgets its token, and is refused as held by
/// its origin; the origin keeps its id. Before,
/// the origin reconnected only at its next heartbeat, the clone took the id as "the holder
/// restarted" about a second after the registry came back, and both made IDs under it
/// (available) or the origin was refused as "a copy" (fenced).
#[test]
fn a_clone_started_during_a_registry_restart_never_takes_its_origins_id() {
    for mode in ["fenced", "available"] {
        let registry = registry_server(&format!("outage{mode}registry"));
        let config = member_config(&registry.conninfo("postgres"), Some(7))
            .setting("cluster_name = 'origin'")
            .setting(&format!("pg_snowflake.registry_mode = '{mode}'"))
            .setting("pg_snowflake.registry_lease_ms = 9000");
        let origin = Server::start(&format!("outage{mode}origin"), config);
        origin.execute("SELECT snowflake_registry_create()");
        assert_eq!(claimed_node(&origin), 7);
        origin.execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())");
        registry.stop();
        let clone = Server::standby_of(
            &origin,
            &format!("outage{mode}clone"),
            Config::default()
                .setting("cluster_name = 'clone'")
                .setting("pg_snowflake.node_id = 7"),
        );
        clone.promote();
        std::thread::sleep(Duration::from_secs(2));
        registry.start_again();
        let (clones, common) = both_asked_for_ids(&origin, &mut || clone.connect(), 15);
        assert!(
            clones.is_empty(),
            "{mode}: the clone made {} IDs under node id 7, {common} of them made by the origin \
             too; the clone's log:\n{}",
            clones.len(),
            clone.log()
        );
        assert_eq!(
            refusing(&origin),
            None,
            "{mode}: the origin refuses; its log:\n{}",
            origin.log()
        );
        for said in ["is a copy of the server holding", "lost node id"] {
            assert!(
                !origin.log().contains(said),
                "{mode}: the origin's log says \"{said}\":\n{}",
                origin.log()
            );
        }
        // Found a copy once (and told so in its log), the clone forgets the origin's token:
        // from then on it is refused as any other server would be, naming its origin.
        assert!(
            clone
                .log()
                .contains("this data directory is a copy of the server holding node id 7"),
            "{mode}: the clone was never told it is a copy; its log:\n{}",
            clone.log()
        );
        let refused = next_id(&clone).expect_err("the clone refuses");
        snowflake_it::assert_error(
            &refused,
            "55000",
            "node id 7 is held by another server, \"origin (…",
            None,
            None,
        );
    }
}
