//! The node-id registry when it misbehaves: commits slower than a member gives an exchange (a
//! claim that times out on the member's side but commits on the registry) leave neither a
//! restarted member refused as "an older copy" of itself nor a new member with a row per try;
//! a registry that cannot be reached or refuses the password is reported with
//! libpq's whole cause, and never the password; a high-water mark far past the registry's
//! clock (a junk or clock-damaged row) is a clock fault, not a lead to follow: a configured
//! member is refused naming both times, an assigned one takes another id; a holder whose
//! link froze before its server died frees its id within seconds, not the two hours of the
//! system's TCP keepalive. Real servers; the registry's commits are slowed by a deferred
//! constraint trigger that sleeps at COMMIT; a link is frozen by an nftables rule of the test's
//! own that drops every packet of one connection.

use snowflake_it::registry::{
    claimed_node, claimed_within, locked_nodes, log_lines_since, member_config, next_id, refusing,
    registry_rows, registry_server, VacantPort, LEASE_MS,
};
use snowflake_it::{assert_error, describe, take_ids, wait_until, Proxy, Server};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

/// How long a slowed commit sleeps (ms): longer than a member of these tests
/// gives one exchange with the registry (a third of its lease,
/// [`snowflake_it::registry::LEASE_MS`]: 1 s).
const SLOW_COMMIT_MS: i64 = 1_500;

/// A year (ms).
const YEAR_MS: i64 = 365 * 86_400_000;

/// The trigger function that sleeps [`SLOW_COMMIT_MS`] and counts the commits it slowed in the
/// sequence `slowed_commits` (which a rollback does not undo).
fn slow_commit_function() -> String {
    format!(
        "CREATE SEQUENCE IF NOT EXISTS slowed_commits; \
         CREATE OR REPLACE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN PERFORM nextval('slowed_commits'); PERFORM pg_sleep({}); RETURN NULL; END $$",
        SLOW_COMMIT_MS as f64 / 1_000.0
    )
}

/// The deferred constraint trigger that makes every transaction writing a row of
/// `snowflake_nodes` (a claim, a heartbeat) sleep at its COMMIT.
const SLOW_COMMIT_TRIGGER: &str = "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT OR UPDATE \
     ON snowflake_nodes DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()";

/// From now on, the registry's commits that wrote a row of its table take [`SLOW_COMMIT_MS`]
/// (the table exists).
fn slow_commits(registry: &Server) {
    registry.execute(&format!(
        "{}; {SLOW_COMMIT_TRIGGER}",
        slow_commit_function()
    ));
}

/// [`slow_commits`] from the moment the table is made (`snowflake_registry_create()`, later):
/// an event trigger adds the slowing trigger in the transaction that makes the table, so that
/// no claim ever commits fast before it.
fn slow_commits_from_the_table_on(registry: &Server) {
    registry.execute(&format!(
        "{}; \
         CREATE FUNCTION slow_the_new_table() RETURNS event_trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF to_regclass('snowflake_nodes') IS NOT NULL AND NOT EXISTS \
         (SELECT 1 FROM pg_trigger WHERE tgname = 'slow_commit') THEN EXECUTE '{}'; END IF; \
         END $$; \
         CREATE EVENT TRIGGER slow_the_new_table ON ddl_command_end WHEN TAG IN ('CREATE TABLE') \
         EXECUTE FUNCTION slow_the_new_table()",
        slow_commit_function(),
        SLOW_COMMIT_TRIGGER
    ));
}

/// The registry's commits fast again.
fn fast_commits(registry: &Server) {
    registry.execute(
        "DROP EVENT TRIGGER IF EXISTS slow_the_new_table; \
         DROP TRIGGER slow_commit ON snowflake_nodes",
    );
}

/// How many commits of the registry were slowed so far.
fn slowed_commits(registry: &Server) -> i64 {
    registry.query_one("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM slowed_commits")
}

/// Waits until no session of the registry holds `node`'s advisory lock: its last holder's
/// session is gone.
fn unlocked(registry: &Server, node: i64) {
    wait_until(
        Duration::from_secs(20),
        "the end of the old holder's registry session",
        || !locked_nodes(registry).contains(&node),
    );
}

/// How far ahead of the server's clock the ID `id` is stamped (s).
fn stamped_ahead_s(server: &Server, id: i64) -> f64 {
    server.query_one(&format!(
        "SELECT extract(epoch FROM snowflake_timestamp({id}::bigint) - clock_timestamp())::float8"
    ))
}

fn node_of(server: &Server, id: i64) -> i32 {
    server.query_one(&format!("SELECT snowflake_node_id({id}::bigint)"))
}

/// The lines of the server's log since `skip` that speak of the registry or a node id, for
/// failure messages.
fn registry_log(server: &Server, skip: usize) -> String {
    server
        .log()
        .get(skip..)
        .unwrap_or("")
        .lines()
        .filter(|line| line.contains("registry") || line.contains("node id"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Holds the registry table's lock (SHARE ROW EXCLUSIVE, as a claim takes it) on a session of
/// its own from now until [`RivalClaim::commit`], as a rival's claim does through its slow
/// commit.
struct RivalClaim(postgres::Client);

impl RivalClaim {
    fn begin(registry: &Server) -> RivalClaim {
        let mut session = registry.connect();
        session
            .batch_execute("BEGIN; LOCK TABLE snowflake_nodes IN SHARE ROW EXCLUSIVE MODE")
            .unwrap_or_else(|e| panic!("the rival's lock: {}", describe(&e)));
        RivalClaim(session)
    }

    /// Waits (up to 10 s) until a member's session waits for the lock, then 1.5 s more (past
    /// the member's deadline), and commits.
    fn commit_after_a_member_waited(mut self, registry: &Server) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10)
            && !registry.query_one::<bool>(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND application_name = 'pg_snowflake'",
            )
        {
            thread::sleep(Duration::from_millis(50));
        }
        thread::sleep(Duration::from_millis(SLOW_COMMIT_MS as u64));
        self.0.batch_execute("COMMIT").unwrap();
    }
}

/// A restart's claim. A member configured with node id 720 made IDs and restarts
/// while the registry's commits take 1.5 s, longer than the member gives an exchange (a third
/// of its 3 s lease). Its first claim waits for the table's lock, held by a rival's claim
/// committing slowly, past its deadline; the next times out at its own COMMIT on the member's
/// side but commits on the registry; it tries again for a few seconds. Once commits are fast
/// again, within 15 s it claims 720 again and makes IDs above the ones it made before: it is
/// never refused as "an older copy" of itself; and its log never says "another command is
/// already in progress" for a time-out.
#[test]
fn a_restart_whose_claim_timed_out_but_committed_claims_its_node_id_again() {
    let registry = registry_server("r4registry");
    let member = Server::start(
        "r4member",
        member_config(&registry.conninfo("postgres"), Some(720)),
    );
    member.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&member), 720);
    let before = take_ids(&mut member.connect(), 1_000, 1_000);
    member.stop();
    unlocked(&registry, 720);

    // Slow commits from before the restart's claim (and after the last heartbeat).
    slow_commits(&registry);
    let rival = RivalClaim::begin(&registry);
    let log_at_restart = member.log().len();
    member.start_again();
    rival.commit_after_a_member_waited(&registry);
    wait_until(Duration::from_secs(30), "the claim's slowed commit", || {
        slowed_commits(&registry) >= 1
    });
    thread::sleep(Duration::from_secs(3));
    fast_commits(&registry);
    let fast = Instant::now();
    let slowed = slowed_commits(&registry);

    let node = claimed_within(&member, Duration::from_secs(15)).unwrap_or_else(|said| {
        panic!(
            "the member did not claim its node id again within 15 s of the registry's commits \
             being fast again ({slowed} commits slowed before): {said}\nthe registry:\n{}\nthe \
             member's log since the restart:\n{}",
            registry_rows(&registry),
            registry_log(&member, log_at_restart)
        )
    });
    println!(
        "claimed node id {node} {:?} after commits were fast again ({slowed} slowed)",
        fast.elapsed()
    );
    assert_eq!(node, 720);
    let after = take_ids(&mut member.connect(), 1_000, 1_000);
    assert_eq!(node_of(&member, after[0]), 720);
    assert!(
        after[0] > *before.last().unwrap(),
        "{} <= {}, the last ID it made before",
        after[0],
        before.last().unwrap()
    );
    let busy = log_lines_since(
        &member,
        log_at_restart,
        "another command is already in progress",
    );
    assert!(
        busy.is_empty(),
        "the member's log hides the time-out:\n{}",
        busy.join("\n")
    );
}

/// A first claim. A member without a node id starts while the registry's commits
/// take 1.5 s (from the moment its table is made): each of its claims times out on its side
/// but commits on the registry, and it tries again for a few seconds. Once commits are fast
/// again it makes IDs, and exactly one row of the registry's table bears its label: a claim
/// that timed out does not leave a row of its own behind.
#[test]
fn a_member_whose_first_claims_timed_out_but_committed_holds_one_row() {
    let registry = registry_server("r4bregistry");
    slow_commits_from_the_table_on(&registry);
    let member = Server::start(
        "r4bmember",
        member_config(&registry.conninfo("postgres"), None),
    );
    member.execute("SELECT snowflake_registry_create()");
    wait_until(Duration::from_secs(30), "a claim's slowed commit", || {
        slowed_commits(&registry) >= 1
    });
    thread::sleep(Duration::from_secs(3));
    fast_commits(&registry);
    let slowed = slowed_commits(&registry);

    let node = claimed_within(&member, Duration::from_secs(15)).unwrap_or_else(|said| {
        panic!(
            "the member made no ID within 15 s of the registry's commits being fast again \
             ({slowed} commits slowed before): {said}\nthe registry:\n{}",
            registry_rows(&registry)
        )
    });
    next_id(&member).unwrap_or_else(|e| panic!("{}", describe(&e)));
    let label: String =
        member.query_one("SELECT holder_label FROM snowflake_registry() WHERE this_server");
    let rows: i64 = registry
        .connect()
        .query_one(
            "SELECT count(*) FROM snowflake_nodes WHERE holder_label = $1",
            &[&label],
        )
        .unwrap()
        .get(0);
    println!(
        "the member holds node id {node}; {rows} rows bear its label ({slowed} commits slowed)"
    );
    assert_eq!(
        rows,
        1,
        "rows of the registry bearing the member's label {label:?} ({slowed} commits slowed); the \
         registry:\n{}",
        registry_rows(&registry)
    );
}

/// A registry nobody listens at. A member whose `pg_snowflake.registry` names a
/// port where nothing listens: the renewer's WARNING and the 08006 of `snowflake_registry()`
/// quote libpq's cause whole enough to read it: "Connection refused".
#[test]
fn an_unreachable_registry_is_reported_with_its_cause() {
    let vacant = VacantPort::lease();
    let member = Server::start("r6refused", member_config(&vacant.conninfo(), None));
    let said = "could not reach the pg_snowflake registry";
    wait_until(Duration::from_secs(20), "the renewer's warning", || {
        !log_lines_since(&member, 0, said).is_empty()
    });
    let warning = log_lines_since(&member, 0, said).remove(0);
    println!("{warning}");
    let err = member
        .connect()
        .query("SELECT * FROM snowflake_registry()", &[])
        .expect_err("snowflake_registry() without a registry");
    println!("snowflake_registry(): {}", describe(&err));
    assert!(
        warning.contains("Connection refused"),
        "the renewer's warning does not say why: {warning}"
    );
    let db = assert_error(&err, "08006", "could not …", None, None);
    assert!(
        db.message().contains("Connection refused"),
        "snowflake_registry()'s error does not say why: {}",
        describe(&err)
    );
}

/// A wrong password. The registry requires scram-sha-256 of the role the member
/// connects as, and the member's connection string carries a wrong password: the renewer's
/// WARNING and the 08006 of `snowflake_registry()` say "password authentication failed", and
/// neither shows the password.
#[test]
fn a_wrong_password_is_reported_as_such_and_never_shown() {
    const WRONG: &str = "not-the-password-7d1f";
    let registry = registry_server("r6registry");
    registry.execute("CREATE ROLE snowflake_member LOGIN PASSWORD 'the-password-0c4e'");
    registry.as_postgres(&format!(
        "sed -i '1i host all snowflake_member 127.0.0.1/32 scram-sha-256' {}",
        registry.data_file("pg_hba.conf")
    ));
    registry.execute("SELECT pg_reload_conf()");
    let conninfo = |password: &str| {
        format!(
            "{} password={password}",
            registry.conninfo_as("snowflake_member", "postgres")
        )
    };
    wait_until(
        Duration::from_secs(10),
        "the registry's new pg_hba.conf",
        || postgres::Client::connect(&conninfo(WRONG), postgres::NoTls).is_err(),
    );
    postgres::Client::connect(&conninfo("the-password-0c4e"), postgres::NoTls)
        .expect("the right password");

    let member = Server::start("r6password", member_config(&conninfo(WRONG), None));
    let said = "could not reach the pg_snowflake registry";
    wait_until(Duration::from_secs(20), "the renewer's warning", || {
        !log_lines_since(&member, 0, said).is_empty()
    });
    let warning = log_lines_since(&member, 0, said).remove(0);
    println!("{warning}");
    let err = member
        .connect()
        .query("SELECT * FROM snowflake_registry()", &[])
        .expect_err("snowflake_registry() with a wrong password");
    println!("snowflake_registry(): {}", describe(&err));
    let log = member.log();
    assert!(
        !log.contains(WRONG) && !describe(&err).contains(WRONG),
        "the password is shown: {}\n{}",
        describe(&err),
        log_lines_since(&member, 0, WRONG).join("\n")
    );
    assert!(
        warning.contains("password authentication failed"),
        "the renewer's warning does not say why: {warning}"
    );
    let db = assert_error(&err, "08006", "could not …", None, None);
    assert!(
        db.message().contains("password authentication failed"),
        "snowflake_registry()'s error does not say why: {}",
        describe(&err)
    );
}

/// `snowflake_nextval()` on `server` once its claim is decided (a call that waited for a claim
/// not made yet is tried again, for up to 30 s).
fn decided_next_id(server: &Server) -> Result<i64, postgres::Error> {
    let started = Instant::now();
    loop {
        match next_id(server) {
            Err(e)
                if started.elapsed() < Duration::from_secs(30)
                    && e.as_db_error().is_some_and(|db| {
                        db.message()
                            .starts_with("this server has not claimed its node id")
                    }) => {}
            answer => return answer,
        }
    }
}

/// Moves node id `node`'s high-water mark in the registry a year ahead, as a junk row or a
/// clock-damaged holder would leave it.
fn mark_a_year_ahead(registry: &Server, node: i32) {
    registry.execute(&format!(
        "UPDATE snowflake_nodes SET high_water_ms = high_water_ms + {YEAR_MS} \
         WHERE node_id = {node}"
    ));
}

/// A configured member. Node id 5's earlier holder made IDs and is gone (its lease
/// ran out); its row's high-water mark is then moved a year ahead. A new member configured with
/// node id 5 is refused (SQLSTATE 55000) naming both times: "node id 5's high-water mark in
/// the registry, <time>, is <N> s ahead of the registry's clock, <time>" — it does not stamp
/// its IDs a year ahead.
#[test]
fn a_configured_member_is_refused_an_id_whose_mark_is_a_year_ahead() {
    let registry = registry_server("r7registry");
    let conninfo = registry.conninfo("postgres");
    let earlier = Server::start("r7earlier", member_config(&conninfo, Some(5)));
    earlier.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&earlier), 5);
    next_id(&earlier).unwrap_or_else(|e| panic!("{}", describe(&e)));
    drop(earlier);
    unlocked(&registry, 5);
    wait_until(Duration::from_secs(20), "the end of the lease", || {
        registry.query_one(
            "SELECT lease_until < clock_timestamp() FROM snowflake_nodes WHERE node_id = 5",
        )
    });
    mark_a_year_ahead(&registry, 5);

    let member = Server::start("r7member", member_config(&conninfo, Some(5)));
    match decided_next_id(&member) {
        Ok(id) => panic!(
            "the member took node id {} and stamps its IDs {:.1} days ahead (ID {id}); the \
             registry:\n{}",
            node_of(&member, id),
            stamped_ahead_s(&member, id) / 86_400.0,
            registry_rows(&registry)
        ),
        Err(err) => {
            println!("refused: {}", describe(&err));
            let db = assert_error(
                &err,
                "55000",
                "node id 5's high-water mark in the registry, …",
                None,
                None,
            );
            assert!(
                db.message().contains(" s ahead of the registry's clock, "),
                "{}",
                describe(&err)
            );
        }
    }
}

/// An assigned member. A member without a node id was assigned id 0, made IDs and
/// stopped; its row's high-water mark is then moved a year ahead. At its restart it takes
/// another id within seconds and stamps its IDs within a few seconds of its clock: it does not
/// resume under 0 a year ahead.
#[test]
fn an_assigned_member_whose_ids_mark_is_a_year_ahead_takes_another_id() {
    let registry = registry_server("r7bregistry");
    let member = Server::start(
        "r7bmember",
        member_config(&registry.conninfo("postgres"), None),
    );
    member.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&member), 0);
    next_id(&member).unwrap_or_else(|e| panic!("{}", describe(&e)));
    member.stop();
    unlocked(&registry, 0);
    mark_a_year_ahead(&registry, 0);
    member.start_again();

    let node = claimed_within(&member, Duration::from_secs(15)).unwrap_or_else(|said| {
        panic!(
            "no claim after the restart: {said}; the registry:\n{}",
            registry_rows(&registry)
        )
    });
    let id = next_id(&member).unwrap_or_else(|e| panic!("{}", describe(&e)));
    let ahead = stamped_ahead_s(&member, id);
    println!("node id {node}; its first ID stamped {ahead:.1} s ahead");
    assert!(
        node != 0 && ahead.abs() < 5.0,
        "the member resumed under node id {node} (ID {id}, of node id {}) stamping its IDs \
         {ahead:.0} s ({:.1} days) ahead; the registry:\n{}",
        node_of(&member, id),
        ahead / 86_400.0,
        registry_rows(&registry)
    );
}

/// Runs `nft` (as root, through sudo) with `command`; panics with its error if it fails.
fn nft(command: &str) {
    let output = Command::new("sudo")
        .args(["-n", "nft"])
        .args(command.split_whitespace())
        .output()
        .expect("sudo runs (package sudo)");
    assert!(
        output.status.success(),
        "nft {command}: {} (package nftables; ./dev setup --for-tests installs it)",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A frozen link: an nftables table of this test's own drops every packet of one TCP
/// connection (the client's local port and the server's port, both ways), as a cable pulled or
/// a host gone dark would (no FIN, no reset reaches the other side). Thawed when dropped, a
/// failed test's too. The rules name both ports: the kernel hands a local port still in use
/// toward one server to new connections toward others, so a rule on the client's port alone
/// also swallowed, now and then, a later connection of the test to another server (its SYNs
/// dropped for two minutes: "error connecting to server").
struct FrozenLink {
    table: String,
}

impl FrozenLink {
    fn freeze(client_port: i32, server_port: u16) -> FrozenLink {
        let table = format!("pg_snowflake_test_frozen_{client_port}");
        nft(&format!("add table inet {table}"));
        nft(&format!(
            "add chain inet {table} out {{ type filter hook output priority 0 ; }}"
        ));
        nft(&format!(
            "add rule inet {table} out tcp sport {client_port} tcp dport {server_port} drop"
        ));
        nft(&format!(
            "add rule inet {table} out tcp sport {server_port} tcp dport {client_port} drop"
        ));
        FrozenLink { table }
    }
}

impl Drop for FrozenLink {
    fn drop(&mut self) {
        let _ = Command::new("sudo")
            .args(["-n", "nft", "delete", "table", "inet", &self.table])
            .status();
    }
}

/// A fenced holder of node id 9 whose link to the registry freezes (every packet
/// of its registry session dropped) and whose server then dies (kill -9: the FIN is dropped
/// too): the registry's session for it stays open, and with it the id's advisory lock, until
/// the registry's server finds the client gone. The holder asks its session for TCP
/// keepalives of a third of its lease (`registry::keepalives`), so a rival configured with
/// id 9 claims it within seconds of the lease running out. The holder's lease is 9 s (its
/// keepalives end a silent session 6 s after the last packet): under the default 3 s of these
/// tests they could end it in the 4 s a loaded machine took between the freeze and the check
/// that the session is still there, as if the death had got through. 0.5.0 set none: the rival stayed
/// refused "held by another server" (and `snowflake_registry_retire` said "connected") for
/// the system's two hours.
#[test]
fn a_holder_whose_link_froze_before_it_died_frees_its_node_id_within_seconds() {
    let registry = registry_server("r5registry");
    let holder = Server::start(
        "r5holder",
        member_config(&registry.conninfo("postgres"), Some(9))
            .setting("pg_snowflake.registry_mode = 'fenced'")
            .setting(&format!(
                "pg_snowflake.registry_lease_ms = {}",
                3 * LEASE_MS
            )),
    );
    holder.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&holder), 9);
    let port: i32 = registry.query_one(
        "SELECT a.client_port FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid \
         WHERE l.locktype = 'advisory' AND l.objid = 9 AND l.objsubid = 2 AND l.granted",
    );
    let frozen = FrozenLink::freeze(port, registry.port);
    holder.crash();
    let died = Instant::now();
    // The registry has not heard of the death: the session and its lock are still there.
    assert_eq!(
        locked_nodes(&registry),
        vec![9],
        "the frozen link let the holder's death through"
    );

    let rival = Server::start(
        "r5rival",
        member_config(&registry.conninfo("postgres"), Some(9)),
    );
    let claimed = claimed_within(&rival, Duration::from_secs(30));
    let took = died.elapsed();
    let rows = registry_rows(&registry);
    drop(frozen);
    let node = claimed.unwrap_or_else(|said| {
        panic!(
            "the rival did not take node id 9 within 30 s of its holder's death behind a frozen \
             link: {said}\nthe registry:\n{rows}"
        )
    });
    println!("the rival claimed node id {node} {took:?} after the holder died");
    assert_eq!(node, 9);
}

/// One member's disk turns slow (every fsync takes 20 s) and its renewer restarts,
/// so that its claim writes its intent on that disk while the claim's transaction holds the
/// registry table's lock, which every heartbeat waits for. A healthy fenced member beside it
/// makes IDs through three leases of it without a refusal: the registry ends the stuck claim
/// once it has been idle for half a heartbeat's deadline (its log says so), and the heartbeats
/// behind it pass. The slow member claims its id again once its disk is fast. Before the fix
/// the healthy member's heartbeats waited behind the lock until its lease ran out (as
/// reproduced: refused from 3.9 s to 31 s after the slow claim began, with 15 s fsyncs).
#[test]
fn a_slow_disk_in_one_members_claim_never_stops_the_others() {
    let registry = registry_server("h3registry");
    let conninfo = registry.conninfo("postgres");
    let healthy = Server::start("h3healthy", member_config(&conninfo, Some(1)));
    healthy.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&healthy), 1);
    let slow = Server::start("h3slow", member_config(&conninfo, Some(2)).slow_disk());
    assert_eq!(claimed_node(&slow), 2);
    let registry_log = registry.log().len();

    slow.set_fsync_delay_ms(20_000);
    let old = *slow.renewer_pids().first().expect("a renewer runs");
    slow.as_postgres(&format!("kill -TERM {old}"));
    let stalled = Instant::now();
    let mut refusals = vec![];
    let mut made = 0;
    while stalled.elapsed() < Duration::from_millis(3 * LEASE_MS as u64) {
        match next_id(&healthy) {
            Ok(_) => made += 1,
            Err(e) => refusals.push(format!("{:?}: {}", stalled.elapsed(), describe(&e))),
        }
        thread::sleep(Duration::from_millis(100));
    }
    let ended = log_lines_since(&registry, registry_log, "idle-in-transaction");
    assert!(
        refusals.is_empty(),
        "the healthy member refused {} of {} calls while the slow member's claim was stuck \
         (first: {}); the registry ended idle claims: {ended:?}",
        refusals.len(),
        refusals.len() + made,
        refusals[0]
    );
    assert!(
        !ended.is_empty(),
        "the slow member's claim was never ended by the registry (did it claim?); its log:\n{}",
        slow.log()
    );

    slow.set_fsync_delay_ms(0);
    assert_eq!(
        claimed_within(&slow, Duration::from_secs(60))
            .unwrap_or_else(|said| panic!("the slow member, its disk fast again: {said}")),
        2
    );
}

/// A heartbeat never times out behind a claim. Two fenced members under the shipped lease of
/// 30 s (a heartbeat every 10 s, its exchange deadline 5 s); the slow one's disk turns slow
/// (every fsync 12 s) and its renewer is restarted about a second before the healthy member's
/// next heartbeat, so that its claim stalls on its intent under the registry table's lock just
/// as that heartbeat queues for it. Twice. The registry ends each stalled claim once it has been
/// idle half a heartbeat's deadline (2.5 s), so the heartbeat behind it never times out. Before,
/// the idle limit was a quarter of the lease (7.5 s), past the 5 s deadline: the heartbeat timed
/// out ("could not reach the pg_snowflake registry: timed out"), and three in a row would have
/// stopped the member.
#[test]
fn a_heartbeat_behind_a_stalled_claim_never_times_out_under_the_shipped_lease() {
    let registry = registry_server("j4registry");
    let conninfo = registry.conninfo("postgres");
    let shipped = "pg_snowflake.registry_lease_ms = 30000";
    let healthy = Server::start(
        "j4healthy",
        member_config(&conninfo, Some(1)).setting(shipped),
    );
    healthy.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&healthy), 1);
    let slow = Server::start(
        "j4slow",
        member_config(&conninfo, Some(2))
            .setting(shipped)
            .slow_disk(),
    );
    assert_eq!(claimed_node(&slow), 2);
    let (healthy_log, registry_log) = (healthy.log().len(), registry.log().len());
    let last_seen = || -> String {
        registry.query_one("SELECT last_seen::text FROM snowflake_nodes WHERE node_id = 1")
    };

    slow.set_fsync_delay_ms(12_000);
    for _ in 0..2 {
        // The healthy member's heartbeat lands; its next is due 10 s later.
        let seen = last_seen();
        wait_until(
            Duration::from_secs(15),
            "the healthy member's heartbeat",
            || last_seen() != seen,
        );
        thread::sleep(Duration::from_millis(7_800));
        let old = *slow.renewer_pids().first().expect("a renewer runs");
        slow.as_postgres(&format!("kill -TERM {old}"));
        // The restarted renewer's claim stalls from about 9 s to its end; the heartbeat at 10 s
        // waits for it and gives up 5 s later if nothing ends the claim first.
        thread::sleep(Duration::from_secs(10));
    }
    let timed_out = log_lines_since(&healthy, healthy_log, "could not reach the pg_snowflake");
    let ended = log_lines_since(&registry, registry_log, "idle-in-transaction");
    slow.set_fsync_delay_ms(0);
    println!(
        "of two claims stalled before the healthy member's heartbeat, the registry ended {}; \
         the healthy member's heartbeats timed out {} times",
        ended.len(),
        timed_out.len()
    );
    assert!(
        !ended.is_empty(),
        "no stalled claim was ended (did the slow member claim?); its log:\n{}",
        slow.log()
    );
    assert!(
        timed_out.is_empty(),
        "the healthy member's heartbeats timed out behind stalled claims: {timed_out:?}"
    );
    assert_eq!(refusing(&healthy), None, "the healthy member refuses");
}

/// A fenced holder of node id 11 reaches the registry through a proxy, which then
/// hangs (frozen: its kernel still acknowledges, as a hung pooler or load balancer does, so
/// the registry's TCP keepalives are answered), and the holder dies (kill -9). A rival
/// configured with id 11, started before, is refused, the refusal saying the holder is still
/// connected; the registry keeps the dead holder's session (and the id's lock) until it has
/// sent nothing for two leases (`idle_session_timeout`, set by the holder on its own session),
/// and the rival takes the id within seconds of that. Before the fix the rival stayed refused
/// "held by another server" for as long as the proxy hung (42 s in the
/// reproduction). The rival
/// starts before the death: started after it, on a busy machine its first claim could come
/// after the session had ended, and find nothing to be refused by (a rehearsal, 2026-11-27).
#[test]
fn a_holder_behind_a_hung_proxy_frees_its_node_id_two_leases_after_its_last_heartbeat() {
    let registry = registry_server("p2registry");
    let proxy = Proxy::to(registry.port);
    let holder = Server::start(
        "p2holder",
        member_config(&proxy.conninfo("postgres"), Some(11)),
    );
    holder.execute("SELECT snowflake_registry_create()");
    assert_eq!(claimed_node(&holder), 11);
    let rival = Server::start(
        "p2rival",
        member_config(&registry.conninfo("postgres"), Some(11)),
    );
    wait_until(Duration::from_secs(60), "the rival's first refusal", || {
        rival.log().contains("node id 11 is held by another server")
    });
    let refused = log_lines_since(&rival, 0, "node id 11 is held by another server");
    assert!(
        refused[0].contains("and still connected to the registry"),
        "the refusal says the holder is connected: {refused:?}"
    );

    proxy.freeze();
    holder.crash();
    let died = Instant::now();
    assert_eq!(
        locked_nodes(&registry),
        vec![11],
        "the hung proxy let the death through"
    );
    let claimed = claimed_within(&rival, Duration::from_secs(30));
    let took = died.elapsed();
    let rows = registry_rows(&registry);
    drop(proxy);
    let node = claimed.unwrap_or_else(|said| {
        panic!(
            "the rival did not take node id 11 within 30 s of its holder's death behind a hung \
             proxy: {said}\nthe registry:\n{rows}"
        )
    });
    println!("the rival claimed node id {node} {took:?} after the holder died");
    assert_eq!(node, 11);
}
