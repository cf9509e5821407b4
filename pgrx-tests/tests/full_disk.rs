//! A full disk: the data directory on a small disk of its own, filled while a session inserts
//! rows with snowflake IDs one by one. The reservation cannot be written, so calls fail with
//! the disk's error — but the renewer does not hammer the disk or flood the log (0.3.0 retried
//! at once and logged every failure: over 100,000 lines a second), and IDs flow again within a
//! second of space returning.

use snowflake_it::{describe, strictly_increasing, Config, Server};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OUTAGE: Duration = Duration::from_secs(30);

#[test]
fn a_full_disk_for_30_s_leaves_a_few_log_lines_and_ids_flow_again_within_a_second() {
    let server = Server::start("fulldisk", Config::node(12).small_disk(96));
    server.execute("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())");
    let filler = server.data_file("filler");
    let (stop, ok, failed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let last_ok = Arc::new(Mutex::new(Instant::now()));
    let ids = Arc::new(Mutex::new(vec![]));
    let inserter = {
        let (stop, ok, failed, last_ok, ids) = (
            stop.clone(),
            ok.clone(),
            failed.clone(),
            last_ok.clone(),
            ids.clone(),
        );
        let mut client = server.connect();
        std::thread::spawn(move || {
            let mut first_error = None;
            while !stop.load(Ordering::Relaxed) {
                match client.query_one("INSERT INTO t DEFAULT VALUES RETURNING id", &[]) {
                    Ok(row) => {
                        ids.lock().unwrap().push(row.get::<_, i64>(0));
                        ok.fetch_add(1, Ordering::Relaxed);
                        *last_ok.lock().unwrap() = Instant::now();
                    }
                    Err(e) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        first_error.get_or_insert_with(|| describe(&e));
                    }
                }
            }
            first_error
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        ok.load(Ordering::Relaxed) > 100,
        "no inserts before the disk filled"
    );
    let log_before = server.log().lines().count();

    // Fill the disk to the last byte (dd stops with "No space left on device").
    let _ = std::process::Command::new("sudo")
        .args([
            "-u",
            "postgres",
            "dd",
            "if=/dev/zero",
            &format!("of={filler}"),
            "bs=1M",
        ])
        .stderr(std::process::Stdio::null())
        .status();
    let full_at = Instant::now();
    let failed_before = failed.load(Ordering::Relaxed);
    std::thread::sleep(OUTAGE);
    let failed_during = failed.load(Ordering::Relaxed) - failed_before;
    let log = server.log();
    let outage_lines: Vec<&str> = log.lines().skip(log_before).collect();
    let ours = outage_lines
        .iter()
        .filter(|line| line.contains("WARNING:  could not write pg_snowflake's reservation"))
        .count();
    let statements = outage_lines
        .iter()
        .filter(|line| line.contains("ERROR:  "))
        .count();
    // The lines of every message but the failed statements' ERRORs (each with its DETAIL,
    // HINT, CONTEXT and STATEMENT lines).
    let mut in_error = false;
    let others = outage_lines
        .iter()
        .filter(|line| {
            let continues = ["DETAIL:  ", "HINT:  ", "CONTEXT:  ", "STATEMENT:  "]
                .iter()
                .any(|tag| line.contains(tag));
            if !continues {
                in_error = line.contains("ERROR:  ");
            }
            !in_error
        })
        .count();

    // Space returns.
    server.as_postgres(&format!("rm {filler}"));
    let freed = Instant::now();
    let back = loop {
        if *last_ok.lock().unwrap() > freed {
            break freed.elapsed();
        }
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "no ID 10 s after the disk has space again"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let first_error = inserter.join().unwrap();
    println!(
        "full disk for {:?}: {failed_during} statements failed (first: {first_error:?}), {} log \
         lines ({statements} ERRORs of the statements; {others} lines of other messages, among them \
         {ours} WARNINGs of pg_snowflake); IDs again {back:?} after space returned",
        full_at.elapsed(),
        outage_lines.len()
    );
    assert!(failed_during > 0, "the full disk failed no statement");
    assert!(
        (1..=5).contains(&ours),
        "{ours} WARNINGs of pg_snowflake in 30 s of a full disk"
    );
    // Each failed statement logs an ERROR with its DETAIL, HINT and STATEMENT; everything else
    // (our WARNINGs with theirs) stays within a few dozen lines.
    let others = outage_lines.len() as i64 - 4 * statements as i64;
    assert!(
        others < 60,
        "{others} log lines besides the statements' errors"
    );
    assert!(
        back < Duration::from_millis(1_500),
        "IDs again only {back:?} after space returned"
    );
    let ids = ids.lock().unwrap();
    assert!(strictly_increasing(&ids));
    let stored: i64 = server.query_one("SELECT count(DISTINCT id) FROM t");
    assert_eq!(stored, ids.len() as i64);
}
