//! The durable state file: a damaged or unreadable one stops the server with the reason and the
//! way out, never a silent reset; a failed write refuses the ID instead of issuing it unrecorded.

use snowflake_it::{describe, strictly_increasing, take_ids, Config, Server};

const STATE: &str = "pg_snowflake.state";

fn ids(server: &Server, count: usize) -> Vec<i64> {
    take_ids(&mut server.connect(), count, 1000)
}

fn assert_contains_all(log: &str, expected: &[&str]) {
    for line in expected {
        assert!(log.contains(line), "expected {line:?} in:\n{log}");
    }
}

#[test]
fn an_unreadable_state_file_stops_the_server_with_the_reason() {
    let server = Server::start("unreadable", Config::node(2));
    let before = ids(&server, 1000);
    server.stop();
    server.as_postgres(&format!("chmod 000 {}", server.data_file(STATE)));
    let log = server
        .try_start()
        .expect_err("the server must not start without its state");
    assert_contains_all(
        &log,
        &[
            "FATAL:  could not read pg_snowflake state file \"pg_snowflake.state\": Permission denied (os error 13)",
            "DETAIL:  The file holds this server's last reservation of snowflake IDs; without it the server could issue IDs it has issued before.",
            "HINT:  Check that the server's operating-system user can read and write the file, and that the disk has free space.",
        ],
    );
    server.as_postgres(&format!("chmod 600 {}", server.data_file(STATE)));
    server.start_again();
    let after = ids(&server, 1000);
    assert!(after[0] > *before.last().unwrap());
}

#[test]
fn a_damaged_state_file_stops_the_server_until_it_is_restored_or_moved_away() {
    let server = Server::start("damaged", Config::node(2));
    ids(&server, 1000);
    server.stop();
    let state = server.data_file(STATE);
    server.as_postgres(&format!(
        "cp {state} {state}.good && printf 'pg_snowf' > {state}"
    ));
    let log = server
        .try_start()
        .expect_err("the server must not start with a damaged state");
    assert_contains_all(
        &log,
        &[
            "FATAL:  pg_snowflake state file \"pg_snowflake.state\" is damaged: it does not end with a newline (truncated?)",
            "DETAIL:  The file holds this server's last reservation of snowflake IDs; without it the server could issue IDs it has issued before.",
            "HINT:  Restore the file from a backup of this data directory. If you are certain the clock is past every ID this server ever issued, move the file away and start the server again.",
        ],
    );
    // A flipped digit is caught by the check value: the reservation's last digit becomes 9, or
    // 8 when it is 9, so the file always changes (cmp fails the step if it did not).
    server.as_postgres(&format!(
        "sed -E 's/(until=[0-9]*)9 /\\18 /; t; s/(until=[0-9]*)[0-8] /\\19 /' {state}.good > {state} \
         && ! cmp -s {state}.good {state}"
    ));
    let log = server
        .try_start()
        .expect_err("a changed reservation must be caught");
    assert!(
        log.contains("is damaged: its check value does not match its contents"),
        "{log}"
    );

    // The documented way out: move the file away (the clock here is right).
    server.as_postgres(&format!("mv {state} {state}.damaged"));
    server.start_again();
    assert!(strictly_increasing(&ids(&server, 1000)));
}

#[test]
fn a_failed_reservation_write_refuses_the_id() {
    let server = Server::start("nowrite", Config::node(2));
    server.stop();
    // A directory where the temporary state file goes: the next reservation cannot be written.
    server.as_postgres(&format!("mkdir {}.tmp", server.data_file(STATE)));
    server.start_again();
    let err = server
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_err();
    assert_eq!(
        describe(&err),
        "58030 could not write pg_snowflake state file \"pg_snowflake.state\": Is a directory (os error 21)"
    );
    let issued: i64 = server.query_one("SELECT ids_issued FROM snowflake_stats()");
    assert_eq!(issued, 0);

    server.as_postgres(&format!("rmdir {}.tmp", server.data_file(STATE)));
    assert_eq!(ids(&server, 10).len(), 10);
}

/// FNV-1a, the state line's check value.
fn check_value(body: &str) -> u64 {
    body.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A data directory of 0.3.0 — its state file names no node id — upgraded in place to this
/// version: the server resumes above the old reservation (an hour ahead of the clock here), for
/// its node id and for any other it is given, since the old file cannot say which node id made
/// its IDs. Its next reservation records the node id.
#[test]
fn a_state_file_of_0_3_0_is_read_and_kept_for_every_node_id() {
    let server = Server::start("v1file", Config::node(3));
    ids(&server, 10);
    server.execute("ALTER SYSTEM SET pg_snowflake.node_id = 4");
    server.stop();
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 3_600_000;
    let body = format!("pg_snowflake reservation v1 until={until} layout=1704067200000/1/10/12");
    let line = format!("{body} check={:016x}", check_value(&body));
    server.as_postgres(&format!(
        "printf '%s\\n' '{line}' > {}",
        server.data_file(STATE)
    ));
    server.start_again();
    let first: i64 = server.query_one("SELECT snowflake_nextval()");
    let stamped: i64 = server.query_one(&format!(
        "SELECT (extract(epoch FROM snowflake_timestamp({first})) * 1000)::bigint"
    ));
    assert!(
        stamped >= until,
        "node 4 started below the old file's reservation"
    );
    assert!(server
        .log()
        .contains("the state file does not say which node id its reservation was made for"));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let written = server.output_as_postgres(&format!("cat {}", server.data_file(STATE)));
    assert!(
        written.starts_with("pg_snowflake reservation v3 ") && written.contains(" node=4 used=*/"),
        "{written}"
    );
}
