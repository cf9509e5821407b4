//! Upgrading from 0.5.0 as its users run it: the build of the commit that made 0.5.0, with its
//! own pgrx and SQL (`scripts/package/old-release`, which this binary's stage runs and names in
//! `PGSF_RELEASE_0_5_0`), then this build in its place, on real servers, IDs made throughout.
//!
//! A server of PostgreSQL 18 sees 0.5.0 only through `extension_control_path` and
//! `dynamic_library_path` pointing into that build (as CloudNativePG's image volumes do), so the
//! shared tree keeps this build installed; "installing the new build" is setting both back to
//! `$system` and `$libdir` while the server is down. What each test checks is what
//! docs/UPGRADING.md promises of an upgrade from 0.5.0: the node id kept, every new ID above every
//! old one, old IDs decoding the same, the extension at this version after
//! `ALTER EXTENSION pg_snowflake UPDATE`, and in a fleet no ID made twice, no node id lost, and no
//! refusal the docs do not list.
//!
//! #[ignore]d: its own stage runs it (`./dev test`, on the highest major outside the sid root,
//! 18 or later), after the build is installed there.

use postgres::Client;
use snowflake_it::registry::{claimed_within, member_config, registry_server};
use snowflake_it::{cargo_version, describe, pg_major, wait_until, Config, Server};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const OLD: &str = "0.5.0";

/// The fleets' lease (ms): the shortest either build allows. The fleet runs four leases between
/// upgrades, so that heartbeats of both builds pass through every lease's end; in seconds of a
/// 3 s lease that made each fleet take over a minute.
const FLEET_LEASE_MS: i64 = 1_000;

/// 0.5.0's build: `lib/pg_snowflake.so` and `share/extension/`.
fn old_build() -> PathBuf {
    let dir = std::env::var("PGSF_RELEASE_0_5_0").expect(
        "PGSF_RELEASE_0_5_0 is not set: this binary's stage sets it (scripts/package/old-release 0.5.0 \
         PG_CONFIG prints the directory)",
    );
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("lib/pg_snowflake.so").is_file(),
        "no 0.5.0 build in {}",
        dir.display()
    );
    dir
}

/// The lines that make a server load 0.5.0's build and nothing else.
fn old_paths() -> Vec<String> {
    let dir = old_build();
    assert!(
        pg_major() >= 18,
        "extension_control_path is PostgreSQL 18's: run on 18 or later"
    );
    vec![
        format!("extension_control_path = '{}'", dir.join("share").display()),
        format!("dynamic_library_path = '{}'", dir.join("lib").display()),
    ]
}

/// The lines that put this build, installed in the tree, in 0.5.0's place.
const NEW_PATHS: [&str; 2] = [
    "extension_control_path = '$system'",
    "dynamic_library_path = '$libdir'",
];

/// Gives a running server this build at its next start (ALTER SYSTEM: one statement at a time,
/// outside a transaction block).
fn point_at_this_build(client: &mut Client) {
    for line in NEW_PATHS {
        client
            .batch_execute(&format!("ALTER SYSTEM SET {line}"))
            .unwrap_or_else(|e| panic!("ALTER SYSTEM SET {line}: {}", describe(&e)));
    }
}

fn with_old_build(mut config: Config) -> Config {
    config.settings.extend(old_paths());
    config
}

/// Appends `lines` to the server's postgresql.conf (later lines win): how a stopped server, or a
/// standby (which takes no ALTER SYSTEM), is given the new build.
fn append_conf(server: &Server, lines: &[&str]) {
    server.as_postgres(&format!(
        "cat >> {} <<'EOF'\n{}\nEOF",
        server.data_file("postgresql.conf"),
        lines.join("\n")
    ));
}

fn extension_version(client: &mut Client) -> String {
    client
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'",
            &[],
        )
        .map(|row| row.get(0))
        .unwrap_or_else(|e| panic!("the extension's version: {}", describe(&e)))
}

/// Whether `snowflake_stats()` has a column `column`: which SQL the database carries.
fn stats_has(client: &mut Client, column: &str) -> bool {
    client
        .query_one(
            "SELECT count(*) FROM pg_proc p, unnest(p.proargnames) AS arg \
             WHERE p.proname = 'snowflake_stats' AND arg = $1",
            &[&column],
        )
        .map(|row| row.get::<_, i64>(0) > 0)
        .unwrap_or_else(|e| panic!("snowflake_stats()'s columns: {}", describe(&e)))
}

/// A server of `config` under 0.5.0's build, started, with the extension (0.5.0's SQL) and a
/// table `t` keyed by `snowflake_nextval()` in its `postgres` database.
fn started_under_0_5_0(name: &str, config: Config) -> Server {
    let server = Server::init(name, with_old_build(config));
    server.start_again();
    server
        .connect()
        .batch_execute(
            "CREATE EXTENSION pg_snowflake; \
             CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)",
        )
        .unwrap_or_else(|e| panic!("{name}: 0.5.0's CREATE EXTENSION: {}", describe(&e)));
    server
}

/// Inserts `rows` rows into `t` (its key made by `snowflake_nextval()`), returning their IDs.
fn try_insert(client: &mut Client, rows: i64) -> Result<Vec<i64>, postgres::Error> {
    let rows = client.query(
        "INSERT INTO t (v) SELECT g FROM generate_series(1, $1::bigint) g RETURNING id",
        &[&rows],
    )?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

fn insert(client: &mut Client, rows: i64) -> Vec<i64> {
    try_insert(client, rows).unwrap_or_else(|e| panic!("inserting {rows} rows: {}", describe(&e)))
}

/// Every ID of `t` decoded: (id, timestamp, node, sequence), by ID.
fn decoded(client: &mut Client) -> Vec<(i64, String, i32, i32)> {
    client
        .query(
            "SELECT t.id, d.ts::text, d.node_id, d.seq FROM t, snowflake_decode(t.id) d ORDER BY t.id",
            &[],
        )
        .unwrap_or_else(|e| panic!("decoding: {}", describe(&e)))
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect()
}

fn node_of(client: &mut Client, id: i64) -> i32 {
    client
        .query_one("SELECT snowflake_node_id($1)", &[&id])
        .map(|row| row.get(0))
        .unwrap_or_else(|e| panic!("snowflake_node_id: {}", describe(&e)))
}

#[derive(Clone, Copy, Debug)]
enum Down {
    Stop,
    Kill,
}

/// One server making IDs under 0.5.0, stopped cleanly (or killed), started under this build,
/// updated: node id kept, every new ID above every old one, old IDs decoding the same, and the
/// extension what this version installs.
fn single_server(down: Down) {
    let name = format!("release-single-{down:?}").to_lowercase();
    let server = started_under_0_5_0(&name, Config::node(5));
    let mut client = server.connect();
    assert_eq!(
        extension_version(&mut client),
        OLD,
        "the old build's default version"
    );
    assert!(
        !stats_has(&mut client, "ids_past_mark"),
        "0.5.0's snowflake_stats() has no ids_past_mark: the old build is not the one loaded"
    );
    let old_ids = insert(&mut client, 20_000);
    let old_decoded = decoded(&mut client);
    point_at_this_build(&mut client);
    drop(client);
    match down {
        Down::Stop => server.stop(),
        Down::Kill => server.crash(),
    }
    server.start_again();

    let mut client = server.connect();
    // The library is this build's at once; the SQL is 0.5.0's until the update.
    assert_eq!(extension_version(&mut client), OLD);
    let between = insert(&mut client, 1_000);
    client
        .batch_execute("ALTER EXTENSION pg_snowflake UPDATE")
        .unwrap_or_else(|e| panic!("ALTER EXTENSION pg_snowflake UPDATE: {}", describe(&e)));
    assert_eq!(extension_version(&mut client), cargo_version());
    assert!(stats_has(&mut client, "ids_past_mark"));
    let new_ids: Vec<i64> = between
        .into_iter()
        .chain(insert(&mut client, 20_000))
        .collect();

    let highest_old = *old_ids.iter().max().unwrap();
    let lowest_new = *new_ids.iter().min().unwrap();
    assert!(
        lowest_new > highest_old,
        "{down:?}: a new ID, {lowest_new}, is not above every ID 0.5.0 made (up to {highest_old})"
    );
    for id in [new_ids[0], *new_ids.last().unwrap()] {
        assert_eq!(node_of(&mut client, id), 5, "{down:?}: the node id kept");
    }
    let now_decoded: Vec<_> = decoded(&mut client)
        .into_iter()
        .filter(|(id, ..)| *id <= highest_old)
        .collect();
    assert_eq!(
        now_decoded, old_decoded,
        "{down:?}: 0.5.0's IDs decode the same under this build"
    );
    println!(
        "{down:?}: {} IDs under 0.5.0, {} under this build, the first {} ms after the last old one",
        old_ids.len(),
        new_ids.len(),
        (lowest_new >> 22) - (highest_old >> 22)
    );
}

#[test]
#[ignore]
fn a_server_stopped_under_0_5_0_starts_under_this_build_above_every_old_id() {
    single_server(Down::Stop);
}

#[test]
#[ignore]
fn a_server_killed_under_0_5_0_starts_under_this_build_above_every_old_id() {
    single_server(Down::Kill);
}

/// A primary and its standby under 0.5.0, IDs made on the primary throughout: the standby
/// upgraded first (it replays 0.5.0's WAL records under this build), then the primary, updated;
/// then the primary killed and the standby promoted: its IDs above every ID it replicated.
#[test]
#[ignore]
fn a_standby_upgraded_before_its_primary_follows_it_and_promotes_above_every_id() {
    let primary = started_under_0_5_0("release-primary", Config::node(3));
    let mut client = primary.connect();
    let mut ids = insert(&mut client, 5_000);
    let standby = Server::standby_of(&primary, "release-standby", Config::default());
    ids.extend(insert(&mut client, 5_000));

    // The standby first, while the primary goes on.
    standby.stop();
    append_conf(&standby, &NEW_PATHS);
    ids.extend(insert(&mut client, 5_000));
    standby.start_again();
    ids.extend(insert(&mut client, 5_000));
    caught_up(&primary, &standby);

    // Then the primary, updated; the update replicates.
    point_at_this_build(&mut client);
    drop(client);
    primary.stop();
    primary.start_again();
    let mut client = primary.connect();
    ids.extend(insert(&mut client, 5_000));
    client
        .batch_execute("ALTER EXTENSION pg_snowflake UPDATE")
        .unwrap();
    ids.extend(insert(&mut client, 5_000));
    caught_up(&primary, &standby);
    assert_eq!(extension_version(&mut standby.connect()), cargo_version());
    drop(client);

    // The primary lost, the standby promoted: above every ID it replicated.
    primary.crash();
    standby.promote();
    let mut client = standby.connect();
    let after = insert(&mut client, 5_000);
    let highest = *ids.iter().max().unwrap();
    assert!(
        after.iter().all(|id| *id > highest),
        "the promoted standby made an ID, {}, not above every ID of the primary (up to {highest})",
        after.iter().min().unwrap()
    );
    assert_eq!(node_of(&mut client, after[0]), 3);
    let all: BTreeSet<i64> = ids.iter().chain(&after).copied().collect();
    assert_eq!(all.len(), ids.len() + after.len(), "no ID made twice");
}

/// Waits until `standby` has replayed everything `primary` has written so far.
fn caught_up(primary: &Server, standby: &Server) {
    let target: String = primary.query_one("SELECT pg_current_wal_lsn()::text");
    wait_until(
        Duration::from_secs(60),
        &format!("the standby to replay up to {target}"),
        || {
            standby.query_one(&format!(
                "SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            ))
        },
    );
}

/// What a member said when it made no ID: `snowflake_stats().refusing` values and the
/// errors of `snowflake_nextval()`.
#[derive(Default)]
struct Said {
    refusals: BTreeSet<String>,
    errors: BTreeSet<String>,
}

impl Said {
    /// Each refusal must be one GUIDE lists for `refusing`, each error one ERRORS lists (its
    /// longest stretch without numbers or quoted names, found there) under SQLSTATE 55000.
    fn check_documented(&self, who: &str) {
        let docs = |file: &str| {
            std::fs::read_to_string(snowflake_it::repo_root().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"))
        };
        let guide = docs("docs/GUIDE.md");
        let listed = guide
            .lines()
            .find(|line| line.starts_with("| `refusing` |"))
            .expect("GUIDE's row of `refusing`");
        for refusal in &self.refusals {
            assert!(
                listed.contains(&format!("`{refusal}`")),
                "{who} refused IDs with `{refusal}`, which GUIDE's `refusing` does not list:\n{listed}"
            );
        }
        let errors = docs("docs/ERRORS.md");
        for error in &self.errors {
            let (state, message) = error.split_once(' ').unwrap();
            assert_eq!(state, "55000", "{who}: {error}");
            let stretch = message
                .split(|c: char| c.is_ascii_digit() || c == '"')
                .map(str::trim)
                .max_by_key(|part| part.len())
                .unwrap();
            assert!(
                errors.contains(stretch),
                "{who}: the error {message:?} is not in docs/ERRORS.md (looked for {stretch:?})"
            );
        }
    }
}

/// `rows` IDs from `server` (rows of `t`), or what it said instead.
fn try_ids(server: &Server, rows: i64, said: &mut Said) -> Vec<i64> {
    let mut client = match Client::connect(&server.conninfo("postgres"), postgres::NoTls) {
        Ok(client) => client,
        Err(_) => return vec![],
    };
    if let Ok(row) = client.query_one("SELECT refusing FROM snowflake_stats()", &[]) {
        if let Some(refusal) = row.get::<_, Option<String>>(0) {
            said.refusals.insert(refusal);
        }
    }
    match try_insert(&mut client, rows) {
        Ok(ids) => ids,
        Err(e) => {
            let db = e
                .as_db_error()
                .map(|db| format!("{} {}", db.code().code(), db.message()));
            said.errors.insert(db.unwrap_or_else(|| describe(&e)));
            vec![]
        }
    }
}

/// A fleet of three servers without node ids on one registry, all under 0.5.0 in `mode`,
/// upgraded one at a time (stopped cleanly, this build in its place, started, updated) while
/// the others make IDs; the mixed fleet runs four leases after each. No ID made twice, each
/// server back on the node id it had, and every refusal one the docs list.
fn fleet(mode: &str) {
    let registry = registry_server(&format!("release-registry-{mode}"));
    let conninfo = registry.conninfo("postgres");
    let members: Vec<Server> = (0..3)
        .map(|i| {
            started_under_0_5_0(
                &format!("release-{mode}-{i}"),
                member_config(&conninfo, None)
                    .setting(&format!("pg_snowflake.registry_mode = '{mode}'"))
                    .setting(&format!(
                        "pg_snowflake.registry_lease_ms = {FLEET_LEASE_MS}"
                    )),
            )
        })
        .collect();
    // 0.5.0's own table, which this build's first holder brings up to date.
    members[0].execute("SELECT snowflake_registry_create()");
    let nodes: Vec<i32> = members
        .iter()
        .map(|m| claimed_within(m, Duration::from_secs(30)).unwrap())
        .collect();
    assert_eq!(
        nodes.iter().collect::<BTreeSet<_>>().len(),
        3,
        "0.5.0's members claimed distinct ids: {nodes:?}"
    );
    let mut made: Vec<Vec<i64>> = vec![vec![]; 3];
    let mut said: Vec<Said> = (0..3).map(|_| Said::default()).collect();
    let lease = Duration::from_millis(FLEET_LEASE_MS as u64);

    // The others make IDs while `upgrading` (if any) is down or waits for its claim; then all
    // run for `leases` leases.
    let run = |made: &mut Vec<Vec<i64>>, said: &mut Vec<Said>, until: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !until() {
            for (i, member) in members.iter().enumerate() {
                made[i].extend(try_ids(member, 200, &mut said[i]));
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{mode}: the fleet did not settle within two minutes"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let four_leases = |started: Instant| move || started.elapsed() > lease * 4;
    run(&mut made, &mut said, &four_leases(Instant::now()));

    for (k, member) in members.iter().enumerate() {
        point_at_this_build(&mut member.connect());
        member.stop();
        member.start_again();
        let back = || {
            member
                .connect()
                .query_one("SELECT refusing IS NULL FROM snowflake_stats()", &[])
                .map(|row| row.get::<_, bool>(0))
                .unwrap_or(false)
        };
        let started = Instant::now();
        run(&mut made, &mut said, &back);
        println!(
            "{mode}: server {k} (node id {}) under this build made IDs again {:.1} s after its start",
            nodes[k],
            started.elapsed().as_secs_f64()
        );
        member
            .connect()
            .batch_execute("ALTER EXTENSION pg_snowflake UPDATE")
            .unwrap_or_else(|e| panic!("{mode}: server {k}'s update: {}", describe(&e)));
        run(&mut made, &mut said, &four_leases(Instant::now()));
    }

    for (k, member) in members.iter().enumerate() {
        let mut client = member.connect();
        assert_eq!(extension_version(&mut client), cargo_version());
        assert_eq!(
            claimed_within(member, Duration::from_secs(5)),
            Ok(nodes[k]),
            "{mode}: server {k} is back on its node id"
        );
        let last = *made[k].last().expect("IDs of every server");
        assert_eq!(node_of(&mut client, last), nodes[k]);
        said[k].check_documented(&format!("{mode}: server {k}"));
    }
    let all: BTreeSet<i64> = made.iter().flatten().copied().collect();
    let count: usize = made.iter().map(Vec::len).sum();
    println!(
        "{mode}: {count} IDs ({:?} by server); refusals {:?}; errors {:?}",
        made.iter().map(Vec::len).collect::<Vec<_>>(),
        said.iter().map(|s| &s.refusals).collect::<Vec<_>>(),
        said.iter().map(|s| &s.errors).collect::<Vec<_>>()
    );
    assert_eq!(all.len(), count, "{mode}: an ID made twice");
}

#[test]
#[ignore]
fn a_fenced_fleet_upgraded_one_server_at_a_time_makes_no_id_twice_and_keeps_its_ids() {
    fleet("fenced");
}

#[test]
#[ignore]
fn an_available_fleet_upgraded_one_server_at_a_time_makes_no_id_twice_and_keeps_its_ids() {
    fleet("available");
}
