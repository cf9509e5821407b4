//! Golden SQL tests: pg_regress runs `tests/pg_regress/sql/*.sql` against real servers in each
//! configuration a user can be in, and compares psql's output word for word with
//! `tests/pg_regress/expected/*.out`. A changed message is a changed expected file.

use snowflake_it::{pg_config, pg_config_value, repo_root, Config, Server};
use std::path::PathBuf;
use std::process::Command;

fn pg_regress() -> PathBuf {
    pg_config_value(&pg_config(), "--pkglibdir").join("pgxs/src/test/regress/pg_regress")
}

/// Runs the named golden tests against `server`; on a difference, fails with the diff.
fn run_golden(server: &Server, tests: &[&str]) {
    let input = repo_root().join("tests/pg_regress");
    let output = std::env::temp_dir().join(format!("pgsf-regress-{}", server.port));
    std::fs::create_dir_all(&output).unwrap();
    server
        .connect()
        .batch_execute("CREATE DATABASE pgsf_regress")
        .expect("CREATE DATABASE");
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
        .args(tests)
        .status()
        .expect("pg_regress runs");
    if std::env::var_os("PGSF_BLESS").is_some() {
        bless(&output.join("results"), &input.join("expected"), tests);
        return;
    }
    if !status.success() {
        let diffs = std::fs::read_to_string(output.join("regression.diffs")).unwrap_or_default();
        panic!("golden tests {tests:?} differ from tests/pg_regress/expected:\n{diffs}");
    }
    std::fs::remove_dir_all(&output).ok();
}

/// `PGSF_BLESS=1`: take what psql printed as the new expected output, on purpose (after a
/// deliberate change of a message). Review `git diff tests/pg_regress` before committing.
fn bless(results: &std::path::Path, expected: &std::path::Path, tests: &[&str]) {
    for test in tests {
        let name = format!("{test}.out");
        std::fs::copy(results.join(&name), expected.join(&name))
            .unwrap_or_else(|e| panic!("blessing {name}: {e}"));
        eprintln!("blessed tests/pg_regress/expected/{name}");
    }
}

#[test]
fn preloaded_with_a_node_id() {
    let server = Server::start("golden", Config::node(1));
    run_golden(&server, &["api", "bounds", "adopt"]);
}

#[test]
fn preloaded_without_a_node_id() {
    let server = Server::start(
        "unset",
        Config {
            preload: true,
            ..Config::default()
        },
    );
    run_golden(&server, &["node_unset"]);
}

#[test]
fn not_preloaded() {
    let server = Server::start("nopreload", Config::default());
    run_golden(&server, &["not_preloaded"]);
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
