//! Time → ID bounds in the planner's hands: "rows made in the last day" is a range scan on the
//! primary key, and day partitions of a Snowflake-keyed table bounded by timestamps are pruned,
//! also when the bound is computed from now() at execution time.

use postgres::Client;
use snowflake_it::{count, Config, Server};

fn plan(client: &mut Client, explain: &str) -> String {
    let lines: Vec<String> = client
        .query(explain, &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    lines.join("\n")
}

/// The day partitions (`events_YYYYMMDD`) a plan mentions.
fn partitions_in(plan: &str) -> std::collections::BTreeSet<&str> {
    plan.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.len() == 15 && word.starts_with("events_"))
        .filter(|word| word[7..].bytes().all(|b| b.is_ascii_digit()))
        .collect()
}

#[test]
fn rows_of_the_last_day_are_an_index_range_scan_on_the_key() {
    let server = Server::start("idxscan", Config::node(1));
    let mut client = server.connect();
    // 100 days of history made by node 9 (1000 rows a day, each more than a day old), then 1000
    // rows from 23 hours ago and 1000 made now by this server.
    client
        .batch_execute(
            "CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text);
             INSERT INTO events (id, body)
                 SELECT snowflake_from_timestamp(now() - d * interval '1 day' - interval '1 hour')
                        + (9 << 12) + n, 'old'
                 FROM generate_series(1, 100) d, generate_series(0, 999) n;
             INSERT INTO events (id, body)
                 SELECT snowflake_from_timestamp(now() - interval '23 hours') + (9 << 12) + n, 'recent'
                 FROM generate_series(0, 999) n;
             INSERT INTO events (body) SELECT 'new' FROM generate_series(1, 1000);",
        )
        .unwrap();
    client.batch_execute("VACUUM ANALYZE events").unwrap();

    let query = "SELECT count(*) FROM events WHERE id >= snowflake_from_timestamp(now() - interval '1 day')";
    let shown = plan(&mut client, &format!("EXPLAIN (COSTS OFF) {query}"));
    println!("{query}\n{shown}");
    assert!(
        shown.contains("Index Only Scan using events_pkey on events"),
        "{shown}"
    );
    assert!(
        shown.contains("Index Cond: (id >= snowflake_from_timestamp((now() - '1 day'::interval)))"),
        "{shown}"
    );
    let rows = count(&mut client, query);
    println!("rows from the last day: {rows} of 102000");
    assert_eq!(rows, 2000);

    // A closed range: the rows made between 3 and 2 days ago, both ends from timestamps.
    let between = "SELECT count(*) FROM events
                   WHERE id >= snowflake_from_timestamp(now() - interval '3 days')
                     AND id <= snowflake_max_from_timestamp(now() - interval '2 days')";
    let shown = plan(&mut client, &format!("EXPLAIN (COSTS OFF) {between}"));
    println!("{between}\n{shown}");
    assert!(
        shown.contains("Index Only Scan using events_pkey"),
        "{shown}"
    );
    assert_eq!(count(&mut client, between), 1000);
}

#[test]
fn day_partitions_bounded_by_timestamps_are_pruned() {
    let server = Server::start("prune", Config::node(1));
    let mut client = server.connect();
    // docs/GUIDE.md's recipe: one partition per UTC day, from 3 days ago to tomorrow.
    client
        .batch_execute(
            "CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)
                 PARTITION BY RANGE (id);
             DO $$
             DECLARE
                 today timestamptz := date_trunc('day', now(), 'UTC');
                 day timestamptz;
             BEGIN
                 FOR day IN SELECT generate_series(today - interval '3 days',
                                                   today + interval '1 day', interval '1 day')
                 LOOP
                     EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%s) TO (%s)',
                                    'events_' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'),
                                    snowflake_from_timestamp(day),
                                    snowflake_from_timestamp(day + interval '1 day'));
                 END LOOP;
             END
             $$;
             INSERT INTO events (id, body)
                 SELECT snowflake_from_timestamp(date_trunc('day', now(), 'UTC')
                                                 - d * interval '1 day' + interval '12 hours')
                        + (9 << 12) + n, 'day -' || d
                 FROM generate_series(1, 3) d, generate_series(0, 999) n;
             INSERT INTO events (body) SELECT 'now' FROM generate_series(1, 1000);
             ANALYZE events;",
        )
        .unwrap();
    let partitions = count(
        &mut client,
        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass",
    );
    let today_rows = count(
        &mut client,
        "SELECT count(*) FROM events WHERE body = 'now'
           AND tableoid::regclass::text = 'events_' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')",
    );
    println!("{partitions} day partitions; the {today_rows} rows made now are in today's");
    assert_eq!(partitions, 5);
    assert_eq!(today_rows, 1000);

    // Bounds from now() are known at execution start: the partitions before yesterday are
    // removed before any is scanned.
    let query = "SELECT count(*) FROM events WHERE id >= snowflake_from_timestamp(now() - interval '1 day')";
    let shown = plan(
        &mut client,
        &format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {query}"),
    );
    println!("{query}\n{shown}");
    assert!(shown.contains("Subplans Removed: 2"), "{shown}");

    // Constant bounds are pruned at plan time: one partition in the plan.
    let row = client
        .query_one(
            "SELECT to_char(now() AT TIME ZONE 'UTC' - interval '2 days', 'YYYY-MM-DD'),
                    to_char(now() AT TIME ZONE 'UTC' - interval '1 day', 'YYYY-MM-DD')",
            &[],
        )
        .unwrap();
    let (from, to): (String, String) = (row.get(0), row.get(1));
    let query = format!(
        "SELECT count(*) FROM events
         WHERE id >= snowflake_from_timestamp('{from} 00:00:00+00')
           AND id < snowflake_from_timestamp('{to} 00:00:00+00')"
    );
    let shown = plan(&mut client, &format!("EXPLAIN (COSTS OFF) {query}"));
    println!("{query}\n{shown}");
    assert_eq!(partitions_in(&shown).len(), 1, "{shown}");
    assert_eq!(count(&mut client, &query), 1000);
}
