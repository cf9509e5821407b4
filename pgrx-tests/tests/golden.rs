//! Golden SQL tests: pg_regress runs every `pgrx-tests/golden/<setup>/sql/*.sql` against a real
//! server in that setup (one of [`SETUPS`], a configuration a user can be in), and compares
//! psql's output word for word with `pgrx-tests/golden/<setup>/expected/*.out`. A changed
//! message is a changed expected file.
//!
//! The files are found, not listed: a new `.sql` in a setup's folder runs with the others, in
//! name order, on one server and one database (each file creates and drops what it uses). A
//! `.sql` without its `.out`, an `.out` without its `.sql`, and a folder that is no setup here
//! fail.
//!
//! `PGSF_BLESS=1` takes what psql printed as the new expected output (also for a new `.sql`);
//! review `git diff pgrx-tests/golden` before committing.

use snowflake_it::{pg_config, pg_config_value, Config, Server};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The server setups, each a folder of `pgrx-tests/golden/`, and what the server looks like.
const SETUPS: &[&str] = &["preloaded", "node_unset", "not_preloaded"];

fn setup_config(setup: &str) -> Config {
    match setup {
        // Preloaded with node id 1: what every server of a deployment looks like.
        "preloaded" => Config::node(1),
        // Preloaded, pg_snowflake.node_id left unset.
        "node_unset" => Config {
            preload: true,
            ..Config::default()
        },
        // Installed but not in shared_preload_libraries.
        "not_preloaded" => Config::default(),
        _ => panic!("no golden setup named {setup:?} (known: {SETUPS:?})"),
    }
}

fn golden_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn blessing() -> bool {
    std::env::var_os("PGSF_BLESS").is_some()
}

fn pg_regress() -> PathBuf {
    pg_config_value(&pg_config(), "--pkglibdir").join("pgxs/src/test/regress/pg_regress")
}

/// The names (without extension) of the files ending in `.{ext}` in `dir`, in name order.
fn names_in(dir: &Path, ext: &str) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == ext))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// The golden tests of `setup`: every `sql/*.sql` of its folder, each with its
/// `expected/*.out` (a missing one is allowed only while blessing, which writes it).
fn golden_tests(setup: &str) -> Vec<String> {
    let dir = golden_root().join(setup);
    let sql = names_in(&dir.join("sql"), "sql");
    let expected = names_in(&dir.join("expected"), "out");
    assert!(!sql.is_empty(), "no .sql files in {}/sql", dir.display());
    let stale: Vec<_> = expected.difference(&sql).collect();
    assert!(
        stale.is_empty(),
        "{}/expected has .out files without a .sql: {stale:?}",
        dir.display()
    );
    let missing: Vec<_> = sql.difference(&expected).collect();
    assert!(
        missing.is_empty() || blessing(),
        "{}/sql has .sql files without an expected .out: {missing:?} (write it with PGSF_BLESS=1 \
         and review it)",
        dir.display()
    );
    sql.into_iter().collect()
}

/// Starts a server in `setup` and runs every golden test of that setup against it; on a
/// difference, fails with the diff.
fn run_setup(setup: &str) {
    let tests = golden_tests(setup);
    let server = Server::start(setup, setup_config(setup));
    let input = golden_root().join(setup);
    let output = std::env::temp_dir().join(format!("pgsf-regress-{}", server.port));
    std::fs::create_dir_all(&output).unwrap();
    server.execute("CREATE DATABASE pgsf_regress");
    let status = Command::new(pg_regress())
        .arg("--use-existing")
        .arg(format!(
            "--bindir={}",
            pg_config_value(&pg_config(), "--bindir").display()
        ))
        .arg("--host=127.0.0.1")
        .arg(format!("--port={}", server.port))
        .arg("--user=postgres")
        .arg("--dbname=pgsf_regress")
        .arg(format!("--inputdir={}", input.display()))
        .arg(format!("--outputdir={}", output.display()))
        .args(&tests)
        .status()
        .expect("pg_regress runs");
    if blessing() {
        bless(&output.join("results"), &input.join("expected"), &tests);
        return;
    }
    if !status.success() {
        let diffs = std::fs::read_to_string(output.join("regression.diffs")).unwrap_or_default();
        panic!(
            "golden tests {tests:?} differ from {}/expected:\n{diffs}",
            input.display()
        );
    }
    std::fs::remove_dir_all(&output).ok();
}

/// `PGSF_BLESS=1`: take what psql printed as the new expected output, on purpose (after a
/// deliberate change of a message, or for a new file).
fn bless(results: &Path, expected: &Path, tests: &[String]) {
    std::fs::create_dir_all(expected).unwrap();
    for test in tests {
        let name = format!("{test}.out");
        std::fs::copy(results.join(&name), expected.join(&name))
            .unwrap_or_else(|e| panic!("blessing {name}: {e}"));
        eprintln!("blessed {}", expected.join(&name).display());
    }
}

#[test]
fn preloaded_with_a_node_id() {
    run_setup("preloaded");
}

#[test]
fn preloaded_without_a_node_id() {
    run_setup("node_unset");
}

#[test]
fn not_preloaded() {
    run_setup("not_preloaded");
}

/// A folder of `pgrx-tests/golden/` that no test above runs would be silently skipped.
#[test]
fn every_golden_folder_is_a_setup_that_runs() {
    let folders: BTreeSet<String> = std::fs::read_dir(golden_root())
        .expect("pgrx-tests/golden")
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    let setups: BTreeSet<String> = SETUPS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        folders, setups,
        "the folders of pgrx-tests/golden/ and the setups golden.rs runs (SETUPS) differ"
    );
    for setup in SETUPS {
        golden_tests(setup);
    }
}

#[test]
fn node_id_out_of_range_in_postgresql_conf_stops_the_server_with_the_reason() {
    for bad in [1024, -2] {
        let server = Server::init("badnode", Config::node(bad));
        let log = server
            .try_start()
            .expect_err("a server with an out-of-range node id must not start");
        for expected in [
            format!(
                "WARNING:  {bad} is outside the valid range for parameter \"pg_snowflake.node_id\" (-1 .. 1023)"
            ),
            format!("FATAL:  invalid value for parameter \"pg_snowflake.node_id\": \"{bad}\""),
            "DETAIL:  Node ids run from 0 to 1023; -1 leaves the node unset.".to_string(),
            "HINT:  Correct pg_snowflake.node_id in postgresql.conf and start the server again."
                .to_string(),
        ] {
            assert!(log.contains(&expected), "expected {expected:?} in:\n{log}");
        }
    }
}
