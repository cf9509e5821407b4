//! `CALL snowflake_adopt_online(table, column)`: an integer primary key and the foreign key
//! that points at it adopted while writers insert, update and delete on both tables; an
//! adoption interrupted mid-backfill (its backend terminated, then the server killed and
//! started again) and resumed to the end; each input it refuses, with its SQLSTATE and hint;
//! and the swap's two refusals under its lock (a lock not granted within its retries, a key
//! written after the check that IDs could repeat), each rolled back and resumed; a short step
//! ended by a deadlock with a writer, tried again while the writer goes on. Thousands of
//! rows, in small batches: the figures at scale are bench/adopt-online's.

use postgres::Client;
use snowflake_it::{assert_error, describe, Config, Server};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const PARENTS: i64 = 4_000;
const CHILDREN: i64 = 6_000;

/// `parent` (serial key) with PARENTS rows and `child` with CHILDREN rows pointing at them.
fn load(server: &Server) {
    server.execute(&format!(
        "CREATE TABLE parent (id serial PRIMARY KEY, v integer NOT NULL);
         CREATE TABLE child (cid serial PRIMARY KEY,
                             parent_id integer NOT NULL REFERENCES parent ON DELETE CASCADE,
                             w integer NOT NULL);
         CREATE INDEX ON child (parent_id);
         INSERT INTO parent (v) SELECT g FROM generate_series(1, {PARENTS}) g;
         INSERT INTO child (parent_id, w)
             SELECT 1 + (g * 7) % {PARENTS}, g FROM generate_series(1, {CHILDREN}) g;
         ANALYZE parent, child;"
    ));
}

/// Counts and sums of the rows no writer deletes: every loaded parent, the lower half of the
/// children; `parent_key` and `child_key` name the old key's values (renamed after the swap).
fn fingerprint(server: &Server, parent_key: &str, child_key: &str) -> String {
    server.query_one(&format!(
        "SELECT (SELECT count(*) || ':' || sum({parent_key}::bigint) FROM parent
                 WHERE {parent_key} <= {PARENTS})
             || '/' || (SELECT count(*) || ':' || sum({child_key}::bigint) FROM child
                        WHERE cid <= {})",
        CHILDREN / 2
    ))
}

/// Runs the adoption to its end: CALL, the index statements it names, CALL again.
fn adopt(client: &mut Client) {
    client
        .batch_execute("CALL snowflake_adopt_online('parent', 'id', 300)")
        .unwrap_or_else(|e| panic!("the first CALL: {}", describe(&e)));
    let statements: Vec<String> = client
        .query("SELECT snowflake_adopt_online_indexes('parent', 'id')", &[])
        .expect("the index statements")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        statements
            .iter()
            .any(|s| s.starts_with("CREATE UNIQUE INDEX CONCURRENTLY")),
        "{statements:?}"
    );
    for statement in &statements {
        client
            .batch_execute(statement)
            .unwrap_or_else(|e| panic!("{statement}: {}", describe(&e)));
    }
    client
        .batch_execute("CALL snowflake_adopt_online('parent', 'id', 300)")
        .unwrap_or_else(|e| panic!("the second CALL: {}", describe(&e)));
}

/// What must hold after an adoption: the loaded rows kept with their keys, the new key equal
/// to the old wherever the old one was set, the foreign key valid and unbroken, the new column
/// the primary key with the snowflake default, and a new row's key a snowflake ID above every
/// old key.
fn assert_adopted(server: &Server, before: &str) {
    assert_eq!(
        fingerprint(server, "id_before_snowflake", "parent_id_before_snowflake"),
        before,
        "rows lost or changed"
    );
    let moved: i64 = server.query_one(
        "SELECT (SELECT count(*) FROM parent WHERE id_before_snowflake <> id)
              + (SELECT count(*) FROM child WHERE parent_id_before_snowflake <> parent_id)",
    );
    assert_eq!(moved, 0, "a key changed its value");
    let orphans: i64 = server.query_one(
        "SELECT count(*) FROM child c WHERE NOT EXISTS (SELECT 1 FROM parent p WHERE p.id = c.parent_id)",
    );
    assert_eq!(orphans, 0);
    let invalid: i64 = server
        .query_one("SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND NOT convalidated");
    assert_eq!(invalid, 0, "a foreign key left NOT VALID");
    let references: String = server.query_one(
        "SELECT string_agg(pg_get_constraintdef(oid), ', ') FROM pg_constraint
         WHERE contype = 'f' AND conrelid = 'child'::regclass",
    );
    assert_eq!(
        references,
        "FOREIGN KEY (parent_id) REFERENCES parent(id) ON DELETE CASCADE"
    );
    let shape: String = server.query_one(
        "SELECT string_agg(format('%s.%s %s %s', attrelid::regclass, attname,
                                  format_type(atttypid, NULL), attnotnull), ', ' ORDER BY 1)
         FROM pg_attribute WHERE attrelid IN ('parent'::regclass, 'child'::regclass)
           AND attname IN ('id', 'parent_id')",
    );
    assert_eq!(shape, "parent.id bigint t, child.parent_id bigint t");
    let key: String = server.query_one(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint
         WHERE conrelid = 'parent'::regclass AND contype = 'p'",
    );
    assert_eq!(key, "PRIMARY KEY (id)");
    let default: String = server
        .query_one("SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'parent'::regclass AND adnum = (SELECT attnum FROM pg_attribute WHERE attrelid = 'parent'::regclass AND attname = 'id')");
    assert!(default.contains("snowflake_nextval()"), "{default}");
    let new_id_ok: bool = server.query_one(
        "WITH n AS (INSERT INTO parent (v) VALUES (0) RETURNING id)
         SELECT n.id > (SELECT max(id) FROM parent)
                AND n.id >= snowflake_from_timestamp(now() - interval '1 hour') FROM n",
    );
    assert!(
        new_id_ok,
        "a new row's key is no snowflake ID above the old keys"
    );
    let phase: String = server.query_one("SELECT phase FROM snowflake_adopt_progress");
    assert_eq!(phase, "done");
    let leftovers: i64 = server.query_one(
        "SELECT (SELECT count(*) FROM pg_trigger WHERE tgname = 'snowflake_adopt_sync')
              + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'snowflake_adopt_sync_%')",
    );
    assert_eq!(leftovers, 0, "a trigger or its function left behind");
}

/// Writers inserting a parent and a child of it (deleting that parent one time in four),
/// updating a random parent and child, deleting a random child of the upper half, until told to
/// stop; returns how many transactions they committed. Any error fails the test.
fn writers(server: &Server, stop: &Arc<AtomicBool>) -> Vec<thread::JoinHandle<u64>> {
    (0..2)
        .map(|w| {
            let (mut client, stop) = (server.connect(), stop.clone());
            thread::spawn(move || {
                let mut n: u64 = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let k = (n * 7919 + w * 13) as i64;
                    let sql = match n % 4 {
                        0 | 1 => format!(
                            "WITH p AS (INSERT INTO parent (v) VALUES (1) RETURNING id)
                             INSERT INTO child (parent_id, w) SELECT id, 1 FROM p;
                             {}",
                            if n % 8 == 1 {
                                "DELETE FROM parent WHERE id = (SELECT max(id) FROM parent)"
                            } else {
                                ""
                            }
                        ),
                        2 => format!(
                            "UPDATE parent SET v = v + 1 WHERE id = {};
                             UPDATE child SET w = w + 1 WHERE cid = {};",
                            1 + k % PARENTS,
                            1 + k % CHILDREN
                        ),
                        _ => format!(
                            "DELETE FROM child WHERE cid = {}",
                            CHILDREN / 2 + 1 + k % (CHILDREN / 2)
                        ),
                    };
                    client
                        .batch_execute(&sql)
                        .unwrap_or_else(|e| panic!("writer {w}: {sql}: {}", describe(&e)));
                }
                n
            })
        })
        .collect()
}

#[test]
fn adopts_under_concurrent_writes_with_no_row_lost() {
    let server = Server::start("adopt-online-writes", Config::node(1));
    load(&server);
    let before = fingerprint(&server, "id", "parent_id");
    let stop = Arc::new(AtomicBool::new(false));
    let writers = writers(&server, &stop);
    thread::sleep(Duration::from_millis(300));
    adopt(&mut server.connect());
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers
        .into_iter()
        .map(|w| w.join().expect("a writer"))
        .sum();
    assert!(writes > 50, "the writers barely wrote: {writes}");
    println!("{writes} writer transactions during the adoption");
    assert_adopted(&server, &before);
    let batches: i64 = server.query_one("SELECT batches FROM snowflake_adopt_progress");
    assert!(batches > 10, "the backfill was not batched: {batches}");
}

#[test]
fn an_interrupted_adoption_resumes_to_the_end() {
    let server = Server::start("adopt-online-resume", Config::node(1));
    load(&server);
    let before = fingerprint(&server, "id", "parent_id");
    // The first CALL, in batches of 20 rows, on a connection of its own.
    let mut caller = server.connect();
    let pid: i32 = caller
        .query_one("SELECT pg_backend_pid()", &[])
        .expect("a pid")
        .get(0);
    let call = thread::spawn(move || {
        caller.batch_execute("CALL snowflake_adopt_online('parent', 'id', 20)")
    });
    // Terminated mid-backfill, once some batches are committed.
    let mut watcher = server.connect();
    let started = Instant::now();
    let batches_seen = Arc::new(AtomicU64::new(0));
    loop {
        let batches: i64 = watcher
            .query_opt(
                "SELECT batches FROM snowflake_adopt_progress WHERE phase = 'backfill'",
                &[],
            )
            .expect("the progress")
            .map_or(0, |row| row.get(0));
        if batches >= 5 {
            batches_seen.store(batches as u64, Ordering::Relaxed);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no batch committed"
        );
        thread::sleep(Duration::from_millis(5));
    }
    watcher
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .expect("terminated");
    let err = call
        .join()
        .expect("the caller")
        .expect_err("the CALL was terminated");
    println!("the CALL ended: {}", describe(&err));
    // The server killed (kill -9) and started again: what was committed stays.
    server.crash();
    server.start_again();
    let (phase, rows_done): (String, i64) = {
        let row = server
            .connect()
            .query_one("SELECT phase, rows_done FROM snowflake_adopt_progress", &[])
            .expect("the progress row survived");
        (row.get(0), row.get(1))
    };
    assert_eq!(phase, "backfill");
    assert!(
        rows_done > 0 && rows_done < PARENTS + CHILDREN,
        "not stopped mid-backfill: {rows_done} rows done"
    );
    // Rows written in between, through the trigger the first CALL left.
    server.execute(
        "INSERT INTO parent (v) VALUES (7); INSERT INTO child (parent_id, w) VALUES (1, 7)",
    );
    adopt(&mut server.connect());
    assert_adopted(&server, &before);
    let resumed_from: i64 = server.query_one("SELECT rows_done FROM snowflake_adopt_progress");
    println!(
        "terminated after {} batches ({rows_done} rows), resumed to {resumed_from} rows",
        batches_seen.load(Ordering::Relaxed)
    );
}

/// Calls `sql` and checks its error: SQLSTATE, the start of its message and of its hint.
fn assert_refused(client: &mut Client, sql: &str, code: &str, message: &str, hint: &str) {
    let err = client.batch_execute(sql).expect_err(sql);
    let db = err
        .as_db_error()
        .unwrap_or_else(|| panic!("{sql}: {}", describe(&err)));
    assert_eq!(db.code().code(), code, "{sql}: {db:?}");
    assert!(db.message().starts_with(message), "{sql}: {db:?}");
    if !hint.is_empty() {
        assert!(
            db.hint().is_some_and(|h| h.starts_with(hint)),
            "{sql}: {db:?}"
        );
    }
}

#[test]
fn refuses_what_it_cannot_adopt_online() {
    let server = Server::start("adopt-online-refusals", Config::node(1));
    server.execute(
        "CREATE TABLE words (w text PRIMARY KEY, n serial);
         CREATE TABLE keyless (id serial, v int);
         CREATE TABLE two (a serial, b int, PRIMARY KEY (a, b));
         CREATE TABLE wide (id bigserial PRIMARY KEY);
         CREATE TABLE plain (id integer PRIMARY KEY);
         CREATE TABLE parts (id serial PRIMARY KEY) PARTITION BY RANGE (id);
         CREATE TABLE ok (id serial PRIMARY KEY, n serial);
         CREATE TABLE multi (id serial PRIMARY KEY, k int, UNIQUE (id, k));
         CREATE TABLE pair (a int, b int, FOREIGN KEY (a, b) REFERENCES multi (id, k));
         CREATE TABLE refd (id serial PRIMARY KEY);
         CREATE TABLE m (r int REFERENCES refd) PARTITION BY RANGE (r);
         CREATE VIEW v AS SELECT 1 AS id;
         CREATE TABLE seen (id serial PRIMARY KEY);
         CREATE VIEW seen_ids AS SELECT id FROM seen;",
    );
    let mut client = server.connect();
    let cases: [(&str, &str, &str, &str); 14] = [
        (
            "CALL snowflake_adopt_online('words', 'w')",
            "42804",
            "column \"w\" of table \"words\" is of type text, not an integer type",
            "snowflake_adopt switches smallint, integer and bigint",
        ),
        (
            "CALL snowflake_adopt_online('nosuch', 'id')",
            "42P01",
            "relation \"nosuch\" does not exist",
            "",
        ),
        (
            "CALL snowflake_adopt_online('ok', 'n')",
            "55000",
            "column \"n\" of table \"ok\" is not its one-column primary key",
            "Name the primary key's column",
        ),
        (
            "CALL snowflake_adopt_online('keyless', 'id')",
            "55000",
            "table \"keyless\" has no primary key",
            "snowflake_adopt_online swaps a primary key",
        ),
        (
            "CALL snowflake_adopt_online('two', 'a')",
            "55000",
            "column \"a\" of table \"two\" is not its one-column primary key",
            "Name the primary key's column",
        ),
        (
            "CALL snowflake_adopt_online('multi', 'id')",
            "0A000",
            "foreign key \"pair_a_b_fkey\" of table \"pair\" references the key with several",
            "snowflake_adopt_online widens one-column foreign keys only",
        ),
        (
            "CALL snowflake_adopt_online('parts', 'id')",
            "0A000",
            "snowflake_adopt_online does not adopt partitioned table \"parts\"",
            "Use snowflake_adopt in a maintenance window",
        ),
        (
            "CALL snowflake_adopt_online('refd', 'id')",
            "0A000",
            "snowflake_adopt_online: table public.m references refd.id but is partitioned",
            "A NOT VALID foreign key on a partitioned table is not supported",
        ),
        (
            "CALL snowflake_adopt_online('seen', 'id')",
            "55000",
            "snowflake_adopt_online: views read column public.seen.id",
            "A view reads a column by its number",
        ),
        (
            "CALL snowflake_adopt_online('wide', 'id')",
            "55000",
            "column \"id\" of table \"wide\" is already bigint",
            "Use snowflake_adopt",
        ),
        (
            "CALL snowflake_adopt_online('plain', 'id')",
            "55000",
            "column \"id\" of table \"plain\" does not draw its values from a sequence",
            "snowflake_adopt switches serial, identity and sequence-default columns",
        ),
        (
            "CALL snowflake_adopt_online('ok', 'nope')",
            "42703",
            "column \"nope\" of relation \"ok\" does not exist",
            "Name the key column",
        ),
        (
            "CALL snowflake_adopt_online('v', 'id')",
            "42809",
            "\"v\" is a view, not a table",
            "Pass the table that holds the rows",
        ),
        (
            "CALL snowflake_adopt_online(NULL, 'id')",
            "22023",
            "snowflake_adopt_online: arguments must not be null",
            "e.g. CALL snowflake_adopt_online",
        ),
    ];
    for (sql, code, message, hint) in cases {
        assert_refused(&mut client, sql, code, message, hint);
    }
    // Refused before anything was changed: no progress row, no shadow column.
    let touched: i64 = server.query_one(
        "SELECT (SELECT count(*) FROM snowflake_adopt_progress)
              + (SELECT count(*) FROM pg_attribute WHERE attname LIKE '%snowflake_new')",
    );
    assert_eq!(touched, 0);
}

/// `keys` (serial key, 100 rows) taken to the swap: the first CALL and the index statements it
/// names.
fn to_the_swap(server: &Server, client: &mut Client) {
    server.execute(
        "CREATE TABLE keys (id serial PRIMARY KEY, v integer);
         INSERT INTO keys (v) SELECT g FROM generate_series(1, 100) g;",
    );
    client
        .batch_execute("CALL snowflake_adopt_online('keys', 'id')")
        .unwrap_or_else(|e| panic!("the first CALL: {}", describe(&e)));
    let statements: Vec<String> = client
        .query("SELECT snowflake_adopt_online_indexes('keys', 'id')", &[])
        .expect("the index statements")
        .iter()
        .map(|row| row.get(0))
        .collect();
    for statement in &statements {
        client
            .batch_execute(statement)
            .unwrap_or_else(|e| panic!("{statement}: {}", describe(&e)));
    }
}

/// The phase the adoption of `keys` is at, and the type of its key column.
fn keys_state(server: &Server) -> String {
    server.query_one(
        "SELECT phase || ' ' || format_type(atttypid, NULL) FROM snowflake_adopt_progress,
                pg_attribute WHERE attrelid = 'keys'::regclass AND attname = 'id'",
    )
}

/// The swap waits for ACCESS EXCLUSIVE at most `lock_timeout_ms`, `lock_retries` + 1 times: a
/// transaction that holds the table for longer gets the procedure's 55P03 and its hint, the
/// swap is rolled back whole, and a CALL after the transaction ends resumes it to the end.
#[test]
fn a_swap_locked_out_longer_than_its_retries_is_refused_and_resumes() {
    let server = Server::start("adopt-online-locked-out", Config::node(1));
    let mut client = server.connect();
    to_the_swap(&server, &mut client);
    let mut holder = server.connect();
    holder
        .batch_execute("BEGIN; LOCK TABLE keys IN ACCESS SHARE MODE")
        .expect("the lock held");
    let started = Instant::now();
    let err = client
        .batch_execute("CALL snowflake_adopt_online('keys', 'id', 10000, 20, 2)")
        .expect_err("the swap is locked out");
    assert_error(
        &err,
        "55P03",
        "snowflake_adopt_online: a lock was not granted within 20 ms, 3 times",
        Some("The statement waiting: LOCK TABLE …"),
        Some(
            "Long transactions on the tables hold it; CALL again (it resumes here), or raise \
             lock_retries or lock_timeout_ms.",
        ),
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        keys_state(&server),
        "swap integer",
        "the swap was not rolled back"
    );
    holder.batch_execute("COMMIT").expect("the lock released");
    client
        .batch_execute("CALL snowflake_adopt_online('keys', 'id', 10000, 20, 2)")
        .unwrap_or_else(|e| panic!("the CALL after the lock: {}", describe(&e)));
    assert_eq!(keys_state(&server), "done bigint");
}

/// A key written after the first CALL's check that IDs made now could repeat is found by the
/// swap's check under its lock: refused with 55000 and its hint, the swap rolled back whole; once
/// the row is gone, a CALL resumes to the end. The layout makes IDs small enough for an integer
/// to reach: a day per tick and 16 bits below it, so IDs made now are under 2^31 until 2113.
#[test]
fn a_collision_written_after_the_check_is_refused_by_the_swap() {
    let config = Config::node(1)
        .setting("pg_snowflake.epoch = '2024-01-01'")
        .setting("pg_snowflake.time_unit_ms = 86400000")
        .setting("pg_snowflake.node_bits = 8")
        .setting("pg_snowflake.sequence_bits = 8");
    let server = Server::start("adopt-online-late-collision", config);
    let mut client = server.connect();
    to_the_swap(&server, &mut client);
    let first: i64 = server.query_one("SELECT snowflake_from_timestamp(now())");
    assert!(
        first < i64::from(i32::MAX),
        "IDs made now are above an integer: {first}"
    );
    server.execute("INSERT INTO keys (id, v) VALUES (2147483647, 0)");
    let err = client
        .batch_execute("CALL snowflake_adopt_online('keys', 'id')")
        .expect_err("the swap finds the collision");
    assert_error(
        &err,
        "55000",
        "snowflake_adopt_online: keys.id holds values that snowflake IDs could repeat",
        None,
        Some("Renumber the rows below snowflake_from_timestamp(now()), or keep the sequence."),
    );
    assert_eq!(
        keys_state(&server),
        "swap integer",
        "the swap was not rolled back"
    );
    server.execute("DELETE FROM keys WHERE id = 2147483647");
    client
        .batch_execute("CALL snowflake_adopt_online('keys', 'id')")
        .unwrap_or_else(|e| panic!("the CALL without the row: {}", describe(&e)));
    assert_eq!(keys_state(&server), "done bigint");
}

/// The adoption takes its tables' locks one statement at a time, so a writer that holds one
/// table and then needs another the adoption holds closes a cycle: with `deadlock_timeout`
/// below `lock_timeout_ms`, PostgreSQL ends one of the two. When that is the adoption, it is
/// rolled back and tried again as after a lock timeout, and the writer goes on; the CALL does
/// not fail. Here the adoption waits first (for `child`, held by the writer's update), so its
/// own deadlock check finds the cycle the writer's insert closes (its foreign key on `parent`).
#[test]
fn an_adoption_ended_by_a_deadlock_with_a_writer_is_tried_again() {
    let config = Config::node(1).setting("deadlock_timeout = '100ms'");
    let server = Server::start("adopt-online-deadlock", config);
    load(&server);
    let before = fingerprint(&server, "id", "parent_id");
    let mut writer = server.connect();
    writer
        .batch_execute("BEGIN; UPDATE child SET w = w + 1 WHERE cid = 1")
        .expect("child held by the writer");
    let call = thread::spawn({
        let mut client = server.connect();
        move || {
            client
                .batch_execute("CALL snowflake_adopt_online('parent', 'id', 300, 1000, 5)")
                .map_err(|e| describe(&e))
        }
    });
    let started = Instant::now();
    while server.query_one::<i64>(
        "SELECT count(*) FROM pg_locks WHERE relation = 'child'::regclass AND NOT granted",
    ) == 0
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the adoption never waited for child"
        );
        thread::sleep(Duration::from_millis(5));
    }
    writer
        .batch_execute("INSERT INTO child (parent_id, w) VALUES (1, -1); COMMIT")
        .unwrap_or_else(|e| panic!("the writer was ended: {}", describe(&e)));
    call.join()
        .expect("the CALL's thread")
        .unwrap_or_else(|e| panic!("the first CALL: {e}"));
    let retried: i64 =
        server.query_one("SELECT lock_retries::bigint FROM snowflake_adopt_progress");
    assert!(retried >= 1, "the adoption was not tried again: {retried}");
    adopt(&mut server.connect());
    assert_adopted(&server, &before);
}
