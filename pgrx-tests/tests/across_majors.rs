//! Crossing PostgreSQL majors keeps the promise "every new ID is greater than every ID issued
//! before" and the layout pin.
//!
//! pg_upgrade carries the catalog and the tables, not the other files of the data directory, so
//! `pg_snowflake.state` (the durable reservation and the layout pin) stays behind. When the new
//! server runs in binary-upgrade mode with pg_snowflake preloaded and finds no state file, the
//! library writes a marker state file; a server started on the marker decodes IDs but refuses
//! `snowflake_nextval()` (SQLSTATE 55000) until the old server's file is copied over the marker.
//! docs/UPGRADING.md's procedure: shared_preload_libraries and the pg_snowflake settings in the new
//! cluster's postgresql.conf before pg_upgrade, pg_upgrade, copy OLD/pg_snowflake.state to NEW/,
//! start. Checked here with the new server's clock an hour behind the old one's.
//!
//! The old side is PyPI's vanilla 15 ("15-vanilla"), not Debian's: Debian 12's 15.20 gives every
//! column an attribute option (pg_attver) that vanilla builds reject, so pg_upgrade and a dump
//! restored into them fail for any table, extension or not.
//!
//! Every test here is `#[ignore]`d: it needs two majors, which only `./dev test`'s across stage
//! has. That stage selects this file by its test binary (`--test across_majors
//! --include-ignored`), with `PGSF_UPGRADE_PAIRS` (the pairs of scripts/lib/trees.sh whose majors are
//! both tested, e.g. "15-vanilla:18 16:17": old tree, new tree) and the pg_config of every tree
//! in `PGSF_PG_CONFIG_<TREE>`; without them the tests fail, never pass.

use postgres::Client;
use snowflake_it::{
    assert_error, describe, pg_config_of, pg_config_value, pg_major_of, run, strictly_increasing,
    take_ids, Config, Server,
};

const NODE: i32 = 5;
const OLD_IDS: i64 = 100_000;
const STATE: &str = "pg_snowflake.state";
/// The refusal of IDs by a server pg_upgrade made without the old state file.
const NO_STATE_FILE: &str =
    "this data directory was made by pg_upgrade without its pg_snowflake state file";

/// The (old tree, new tree) pairs to cross.
fn pairs() -> Vec<(String, String)> {
    let pairs = std::env::var("PGSF_UPGRADE_PAIRS")
        .expect("PGSF_UPGRADE_PAIRS is not set: run these tests through ./dev test");
    let pairs: Vec<(String, String)> = pairs
        .split_whitespace()
        .map(|pair| {
            let (old, new) = pair.split_once(':').expect("OLD:NEW");
            (old.to_string(), new.to_string())
        })
        .collect();
    assert!(!pairs.is_empty(), "no pairs of majors to cross");
    pairs
}

fn node_on(tree: &str) -> Config {
    Config::node(NODE).postgres(pg_config_of(tree))
}

fn version(server: &Server) -> String {
    server.query_one("SELECT current_setting('server_version')")
}

/// An old server of `tree` that made `OLD_IDS` IDs into `orders`, stopped; returns it and the
/// largest ID it made.
fn old_server_with_ids(tree: &str) -> (Server, i64) {
    old_server_with_ids_as(node_on(tree))
}

/// [`old_server_with_ids`], configured by `config`.
fn old_server_with_ids_as(config: Config) -> (Server, i64) {
    let old = Server::start("upold", config);
    old.execute(&format!(
        "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
         INSERT INTO orders (item) SELECT 'old ' || g FROM generate_series(1, {OLD_IDS}) g;"
    ));
    let old_max: i64 = old.query_one("SELECT max(id) FROM orders");
    println!(
        "PostgreSQL {}: {OLD_IDS} IDs of node {NODE}, the largest {old_max}",
        version(&old)
    );
    old.stop();
    (old, old_max)
}

/// A new cluster of `tree` for pg_upgrade to fill from one of `old_tree`, configured by
/// `config`, not started.
fn new_cluster(old_tree: &str, tree: &str, mut config: Config) -> Server {
    // initdb turns data checksums on by default from 18 on; pg_upgrade needs the old cluster's
    // setting (off before 18, on from 18).
    if pg_major_of(&pg_config_of(tree)) >= 18 && pg_major_of(&pg_config_of(old_tree)) < 18 {
        config = config.initdb_arg("--no-data-checksums");
    }
    Server::init("upnew", config)
}

/// pg_upgrade from `old` into a fresh server of `tree` whose postgresql.conf already preloads
/// pg_snowflake with the same node id, running on a clock `clock` away from the real one.
fn upgraded(old: &Server, old_tree: &str, tree: &str, clock: &str) -> Server {
    let new = new_cluster(old_tree, tree, node_on(tree).fake_clock(clock));
    let printed = new.upgrade_from(old);
    assert!(
        printed.contains("Upgrade Complete"),
        "pg_upgrade said:\n{printed}"
    );
    new
}

fn rows_and_max(client: &mut Client) -> (i64, i64) {
    let row = client
        .query_one("SELECT count(*), max(id) FROM orders", &[])
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_upgrade_with_the_state_file_copied_keeps_every_new_id_above_the_old_ones() {
    for (old_tree, new_tree) in pairs() {
        let (old, old_max) = old_server_with_ids(&old_tree);
        let new = upgraded(&old, &old_tree, &new_tree, "-1h");
        // The documented step: the old server's state file over the one pg_upgrade left.
        new.as_postgres(&format!(
            "cp {} {}",
            old.data_file(STATE),
            new.data_file(STATE)
        ));
        new.start_again();
        let behind_s = new.clock_behind_s();
        assert!(
            (3590.0..3610.0).contains(&behind_s),
            "the new server's clock is {behind_s} s behind, not an hour"
        );

        let mut client = new.connect();
        assert_eq!(rows_and_max(&mut client), (OLD_IDS, old_max));
        let ids = take_ids(&mut client, 20_000, 1000);
        println!(
            "{old_tree} → {new_tree} (PostgreSQL {}), clock {behind_s:.0} s behind, state file \
             copied: first new ID {}, old maximum {old_max}",
            version(&new),
            ids[0]
        );
        assert!(
            ids[0] > old_max,
            "{old_tree} → {new_tree}: first new ID {} <= old maximum {old_max}",
            ids[0]
        );
        assert!(strictly_increasing(&ids));
        let node: i32 = client
            .query_one("SELECT snowflake_node_id($1)", &[&ids[0]])
            .unwrap()
            .get(0);
        assert_eq!(node, NODE);
        client
            .batch_execute("INSERT INTO orders (item) SELECT 'new' FROM generate_series(1, 1000)")
            .unwrap();
        let row = client
            .query_one(
                "SELECT count(*), count(DISTINCT id), min(id) FILTER (WHERE item = 'new')
                 FROM orders",
                &[],
            )
            .unwrap();
        let (rows, distinct, new_min): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!((rows, distinct), (OLD_IDS + 1000, OLD_IDS + 1000));
        assert!(new_min > old_max);
    }
}

#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_upgrade_without_the_state_file_refuses_new_ids_and_says_how_to_fix_it() {
    for (old_tree, new_tree) in pairs() {
        let (old, old_max) = old_server_with_ids(&old_tree);
        let new = upgraded(&old, &old_tree, &new_tree, "-1h");
        new.start_again();

        // The old rows are there and decode.
        let mut client = new.connect();
        assert_eq!(rows_and_max(&mut client), (OLD_IDS, old_max));
        let decoded: i32 = client
            .query_one(
                "SELECT (snowflake_decode(max(id))).node_id FROM orders",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(decoded, NODE);

        // New IDs are refused, with the way out.
        let err = client
            .query_one("SELECT snowflake_nextval()", &[])
            .expect_err("the server must refuse IDs without the old state file");
        println!(
            "{old_tree} → {new_tree} without the state file: {}",
            describe(&err)
        );
        assert_error(
            &err,
            "55000",
            NO_STATE_FILE,
            Some(
                "pg_upgrade does not copy \"pg_snowflake.state\", which holds the old server's \
                 last reservation of snowflake IDs; without it this server could issue IDs the \
                 old one issued.",
            ),
            Some(
                "Stop the server, copy \"pg_snowflake.state\" from the old data directory into \
                 this one, and start the server again. If this directory holds \
                 \"pg_snowflake.state.before-upgrade\", that is a reservation this cluster made \
                 itself before pg_upgrade: keep it, and copy the old directory's file. Delete this \
                 directory's \"pg_snowflake.state\" only if no server before it ever made \
                 snowflake IDs.",
            ),
        );
        let rows: i64 = client
            .query_one("SELECT count(*) FROM orders", &[])
            .unwrap()
            .get(0);
        assert_eq!(rows, OLD_IDS, "nothing was inserted");
        drop(client);

        follow_the_hint(&old, &new, old_max);
    }
}

/// The refusal's HINT followed: stop the new server, copy the old state file in, start; the
/// first new ID is above the old maximum, whatever the new server's clock says.
fn follow_the_hint(old: &Server, new: &Server, old_max: i64) {
    new.stop();
    new.as_postgres(&format!(
        "cp {} {}",
        old.data_file(STATE),
        new.data_file(STATE)
    ));
    new.start_again();
    let first: i64 = new.query_one("SELECT snowflake_nextval()");
    assert!(
        first > old_max,
        "after the copy: first new ID {first} <= {old_max}"
    );
}

/// Whether the file `name` is in `server`'s data directory.
fn has_file(server: &Server, name: &str) -> bool {
    server
        .output_as_postgres(&format!(
            "test -e {} && echo yes || echo no",
            server.data_file(name)
        ))
        .trim()
        == "yes"
}

/// The old data directory keeps a `pg_upgrade_output.d` from an earlier upgrade into
/// it (a failed run, as "If step 2 is forgotten" walks through, or `--retain`). pg_upgrade's
/// binary-upgrade start of the old cluster must not take it for the new one: 0.5.0 moved the
/// old reservation to `.before-upgrade` and wrote the marker *in the old directory*, so the
/// documented copy carried the marker over and both servers refused IDs. Now the old
/// directory is left as it was, and the documented steps work.
#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_upgrade_from_a_directory_left_with_an_earlier_upgrades_output_leaves_it_unmarked() {
    for (old_tree, new_tree) in pairs() {
        let (old, old_max) = old_server_with_ids(&old_tree);
        let before = old.output_as_postgres(&format!("cat {}", old.data_file(STATE)));
        old.as_postgres(&format!(
            "mkdir -p {}/20250101T000000.000/log",
            old.data_file("pg_upgrade_output.d")
        ));
        let new = upgraded(&old, &old_tree, &new_tree, "-1h");
        // Still the old server's reservation (pg_upgrade's start of the old cluster may renew it,
        // a server in use less than a minute ago: its `until` may move on), never the marker.
        let after = old.output_as_postgres(&format!("cat {}", old.data_file(STATE)));
        let until = |line: &str| -> i64 {
            let field = line
                .split_whitespace()
                .find_map(|f| f.strip_prefix("until="));
            field.and_then(|v| v.parse().ok()).unwrap_or(i64::MIN)
        };
        let system = |line: &str| {
            line.split_whitespace()
                .find(|f| f.starts_with("system="))
                .map(str::to_string)
        };
        assert!(
            after.starts_with("pg_snowflake reservation ")
                && system(&after) == system(&before)
                && until(&after) >= until(&before),
            "{old_tree} → {new_tree}: pg_upgrade changed the old directory's state file:\n\
             before: {before}after: {after}"
        );
        assert!(!has_file(&old, "pg_snowflake.state.before-upgrade"));
        new.start_again();
        follow_the_hint(&old, &new, old_max);
        new.stop();
        // Rolling back stays possible: the old server makes IDs above its own.
        old.start_again();
        let next: i64 = old.query_one("SELECT snowflake_nextval()");
        assert!(
            next > old_max,
            "the old server after the upgrade: {next} <= {old_max}"
        );
        old.stop();
    }
}

/// The backfill's ceilings (`pg_snowflake_backfill.state`) stay behind too. The upgraded
/// server refuses `snowflake_nextval_at` until they are copied in; then the backfill continues
/// above every sequence number the old server used, at the very instant it last stamped.
#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_upgrade_without_the_backfill_file_refuses_the_backfill_until_it_is_copied() {
    const BACKFILL: &str = "pg_snowflake_backfill.state";
    const AT: &str = "SELECT snowflake_nextval_at('2025-03-01 12:00:00.5+00') \
                      FROM generate_series(1, 5)";
    let config = |tree: &str| node_on(tree).setting("pg_snowflake.backfill_node_id = 900");
    for (old_tree, new_tree) in pairs() {
        let old = Server::start("upold", config(&old_tree));
        old.execute("SELECT snowflake_nextval()");
        let ids = |client: &mut Client| -> Vec<i64> {
            let rows = client.query(AT, &[]).unwrap();
            rows.iter().map(|row| row.get(0)).collect()
        };
        let old_ids = ids(&mut old.connect());
        old.stop();
        let new = new_cluster(&old_tree, &new_tree, config(&new_tree));
        let printed = new.upgrade_from(&old);
        assert!(
            printed.contains("Upgrade Complete"),
            "pg_upgrade said:\n{printed}"
        );
        new.as_postgres(&format!(
            "cp {} {}",
            old.data_file(STATE),
            new.data_file(STATE)
        ));
        new.start_again();
        let err = new
            .connect()
            .query(AT, &[])
            .expect_err("no backfill before the old file is copied");
        println!(
            "{old_tree} → {new_tree} without the backfill file: {}",
            describe(&err)
        );
        assert_error(
            &err,
            "55000",
            "this data directory was made by pg_upgrade without its backfill file",
            None,
            Some(
                "Stop the server, copy \"pg_snowflake_backfill.state\" from the old data \
                 directory into this one, and start the server again. If the old server never \
                 ran snowflake_nextval_at (it has no such file), delete this directory's \
                 \"pg_snowflake_backfill.state\" instead.",
            ),
        );
        new.stop();
        new.as_postgres(&format!(
            "cp {} {}",
            old.data_file(BACKFILL),
            new.data_file(BACKFILL)
        ));
        new.start_again();
        let mut client = new.connect();
        let new_ids = ids(&mut client);
        for id in &new_ids {
            assert!(
                !old_ids.contains(id),
                "{id} was made before the upgrade too"
            );
            let row = client
                .query_one(
                    "SELECT snowflake_node_id($1), \
                            snowflake_timestamp($1) = '2025-03-01 12:00:00.5+00'",
                    &[id],
                )
                .unwrap();
            let (node, at_instant): (i32, bool) = (row.get(0), row.get(1));
            assert_eq!((node, at_instant), (900, true), "{id}");
        }
    }
}

/// With a registry, the upgraded server's renewer must not claim (and so pin, a
/// rewrite of the state file) while the marker awaits the old state file: 0.5.0 replaced the
/// marker with its pin, and after one restart made IDs without the old reservation. Now it
/// refuses across restarts until the file is copied, then claims and makes IDs above the old.
#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_upgrade_with_a_registry_refuses_until_the_state_file_is_copied_across_restarts() {
    for (old_tree, new_tree) in pairs() {
        let registry = Server::start("upregistry", Config::default());
        let with_registry = |tree: &str| {
            node_on(tree)
                .setting(&format!(
                    "pg_snowflake.registry = '{}'",
                    registry.conninfo("postgres")
                ))
                .setting("pg_snowflake.registry_lease_ms = 3000")
        };
        let old = Server::start("upold", with_registry(&old_tree));
        old.execute("SELECT snowflake_registry_create()");
        old.execute(&format!(
            "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             INSERT INTO orders (item) SELECT 'old ' || g FROM generate_series(1, {OLD_IDS}) g;"
        ));
        let old_max: i64 = old.query_one("SELECT max(id) FROM orders");
        old.stop();
        // On the registry's clock: a clock off by more than the margin would be refused its
        // claim anyway, which is not what this checks.
        let new = new_cluster(&old_tree, &new_tree, with_registry(&new_tree));
        let printed = new.upgrade_from(&old);
        assert!(
            printed.contains("Upgrade Complete"),
            "pg_upgrade said:\n{printed}"
        );
        for start in ["first", "second"] {
            new.start_again();
            // Longer than a claim and its pin take.
            std::thread::sleep(std::time::Duration::from_secs(4));
            let err = new
                .connect()
                .query_one("SELECT snowflake_nextval()", &[])
                .expect_err("no IDs before the old state file is copied");
            println!(
                "{old_tree} → {new_tree} with a registry, {start} start: {}",
                describe(&err)
            );
            assert_error(&err, "55000", NO_STATE_FILE, None, None);
            if start == "first" {
                new.stop();
            }
        }
        follow_the_hint(&old, &new, old_max);
    }
}

/// The operator starts the new cluster before pg_upgrade (to check the preload, or to apply
/// settings with ALTER SYSTEM), and even makes a test ID there; then runs pg_upgrade and forgets
/// to copy the old state file. The old server's IDs lie an hour ahead of the real clock (its
/// clock ran fast). 0.3.0 trusted the new cluster's own reservation there, and the upgraded
/// server issued IDs below the old maximum. Now: a start with no call reserves nothing, and a
/// reservation the new cluster wrote itself is moved aside by pg_upgrade's start, so the
/// upgraded server refuses IDs until the old file is copied in.
#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_upgrade_into_a_cluster_started_before_still_refuses_without_the_state_file() {
    for (old_tree, new_tree) in pairs() {
        let (old, old_max) = old_server_with_ids_as(node_on(&old_tree).fake_clock("+1h"));
        let new = new_cluster(&old_tree, &new_tree, node_on(&new_tree));
        new.start_again();
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert!(
            !has_file(&new, STATE),
            "a start with no call wrote a reservation"
        );
        new.execute("CREATE EXTENSION pg_snowflake");
        let test_id: i64 = new.query_one("SELECT snowflake_nextval()");
        assert!(has_file(&new, STATE));
        new.execute("DROP EXTENSION pg_snowflake");
        // The role the extension made for application leases is the cluster's and outlives it;
        // pg_upgrade takes a new cluster with no role but the install user (UPGRADING says so).
        new.execute("DROP ROLE snowflake_lease");
        new.stop();

        let printed = new.upgrade_from(&old);
        assert!(printed.contains("Upgrade Complete"), "{printed}");
        assert!(
            has_file(&new, "pg_snowflake.state.before-upgrade"),
            "the new cluster's own reservation was not moved aside"
        );
        new.start_again(); // the old state file NOT copied; the real clock, an hour behind
        let mut client = new.connect();
        let refused = client.query_one("SELECT snowflake_nextval()", &[]);
        let err = match refused {
            Ok(row) => panic!(
                "{old_tree} → {new_tree}: ID {} issued without the old state file (old maximum \
                 {old_max}, the test ID before pg_upgrade {test_id})",
                row.get::<_, i64>(0)
            ),
            Err(err) => err,
        };
        let db = assert_error(
            &err,
            "55000",
            NO_STATE_FILE,
            None,
            Some("Stop the server, copy…"),
        );
        drop(client);
        println!(
            "{old_tree} → {new_tree}, new cluster started and used before pg_upgrade, state \
             file not copied: refused ({})",
            db.message()
        );
        follow_the_hint(&old, &new, old_max);
    }
}

/// docs/UPGRADING.md's step 2 skipped: the new cluster does not preload pg_snowflake, so nothing would
/// mark its data directory as awaiting the old state file. pg_upgrade LOADs every library the
/// old cluster's functions use into the new one before it changes anything; pg_snowflake
/// refuses to be loaded that way, and pg_upgrade stops with its reason.
#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_upgrade_into_a_cluster_that_does_not_preload_the_library_is_refused() {
    for (old_tree, new_tree) in pairs() {
        let (old, _) = old_server_with_ids(&old_tree);
        let new = new_cluster(
            &old_tree,
            &new_tree,
            Config::default().postgres(pg_config_of(&new_tree)),
        );
        let printed = new
            .try_upgrade_from(&old)
            .expect_err("pg_upgrade into a cluster that does not preload pg_snowflake");
        let report = new.output_as_postgres(&format!(
            "cat $(find {} -name loadable_libraries.txt)",
            new.dir()
        ));
        println!(
            "{old_tree} → {new_tree}, the new cluster not preloading pg_snowflake: pg_upgrade stopped; loadable_libraries.txt:\n{report}"
        );
        assert!(
            printed.contains("Checking for presence of required libraries"),
            "{printed}"
        );
        assert!(
            report.contains(
                "ERROR:  pg_snowflake must be in shared_preload_libraries of the new cluster \
                 while pg_upgrade runs"
            ),
            "pg_upgrade said:\n{printed}\nloadable_libraries.txt:\n{report}"
        );
        assert!(
            report.contains(
                "HINT:  Add pg_snowflake to shared_preload_libraries, and copy every \
                 pg_snowflake setting of the old cluster, into the new cluster's \
                 postgresql.conf; then run pg_upgrade again."
            ),
            "{report}"
        );
    }
}

/// The old major's data moved by the new major's pg_dump and pg_restore, into servers with the
/// same node id (a migration) and another one (a copy that goes on as a new shard).
#[test]
#[ignore = "needs two majors: ./dev test runs it in its across stage (--test across_majors --include-ignored)"]
fn pg_dump_of_the_old_major_restores_into_the_new_one() {
    for (old_tree, new_tree) in pairs() {
        dump_and_restore(&old_tree, &new_tree);
    }
}

fn dump_and_restore(old_tree: &str, new_tree: &str) {
    let new_bin = pg_config_value(&pg_config_of(new_tree), "--bindir");
    let dump = std::env::temp_dir().join(format!("pgsf-dumpold-{}.dump", std::process::id()));
    let dump = dump.to_str().unwrap().to_string();
    let digest = "SELECT count(*), md5(string_agg(id || ':' || item, ',' ORDER BY id)), max(id)
                  FROM orders";
    let (before, old_version) = {
        let old = Server::start("dumpold", node_on(old_tree));
        old.execute(
            "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             INSERT INTO orders (item) SELECT 'old ' || g FROM generate_series(1, 20000) g;",
        );
        let row = old.connect().query_one(digest, &[]).unwrap();
        let before: (i64, String, i64) = (row.get(0), row.get(1), row.get(2));
        // The newer major's pg_dump, as PostgreSQL's documentation asks.
        run(
            new_bin.join("pg_dump"),
            &[
                "--format=custom",
                "--file",
                &dump,
                &old.conninfo("postgres"),
            ],
        );
        (before, version(&old))
    };
    for node in [NODE, NODE + 1] {
        let new = Server::start(
            "restorenew",
            Config::node(node).postgres(pg_config_of(new_tree)),
        );
        new.execute("CREATE DATABASE restored");
        run(
            new_bin.join("pg_restore"),
            &[
                "--exit-on-error",
                "--dbname",
                &new.conninfo("restored"),
                &dump,
            ],
        );
        let mut client = new.connect_db("restored");
        let row = client.query_one(digest, &[]).unwrap();
        let after: (i64, String, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!(after, before, "node {node}: the restored rows differ");
        client
            .batch_execute("INSERT INTO orders (item) SELECT 'new' FROM generate_series(1, 1000)")
            .unwrap();
        let row = client
            .query_one(
                "SELECT count(DISTINCT id), min(id) FILTER (WHERE item = 'new'),
                        bool_and(snowflake_node_id(id) = $1) FILTER (WHERE item = 'new')
                 FROM orders",
                &[&node],
            )
            .unwrap();
        let (distinct, new_min, on_node): (i64, i64, bool) = (row.get(0), row.get(1), row.get(2));
        println!(
            "pg_dump of PostgreSQL {old_version} restored into {} as node {node}: rows identical, \
             1000 new IDs from {new_min} (old maximum {})",
            version(&new),
            before.2
        );
        assert_eq!(distinct, before.0 + 1000);
        assert!(new_min > before.2);
        assert!(on_node);
    }
    std::fs::remove_file(&dump).ok();
}
