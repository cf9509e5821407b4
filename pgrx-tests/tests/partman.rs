//! docs/GUIDE.md's pg_partman recipe, with Debian's postgresql-15-partman (pg_partman 4.7): ID-based
//! native partitioning whose interval is one UTC day of snowflake IDs (86400000 << 22) and whose
//! start is snowflake_from_timestamp of a UTC midnight, so every partition holds exactly one UTC
//! day; maintenance makes partitions ahead of the newest ID and drops those past retention.
//!
//! `#[ignore]`d: pg_partman is packaged only for Debian's 15 (PGSF_TREE_TABLE, scripts/lib/trees.sh);
//! `./dev test` runs this file there by its test binary (`--test partman --include-ignored`).

use postgres::Client;
use snowflake_it::{Config, Server};

/// Each partition of `events` with the UTC day its lower bound starts, in order.
fn partitions(client: &mut Client) -> Vec<(String, String)> {
    client
        .query(
            "SELECT c.relname::text,
                    to_char(snowflake_timestamp((regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                                              'FROM \\(''(\\d+)''\\)'))[1]::bigint)
                            AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') AS day
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'events'::regclass AND c.relname <> 'events_default'
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

fn utc_days(client: &mut Client, offsets: &[i32]) -> Vec<String> {
    offsets
        .iter()
        .map(|offset| {
            client
                .query_one(
                    "SELECT to_char(date_trunc('day', now() AT TIME ZONE 'UTC')
                                    + $1 * interval '1 day', 'YYYY-MM-DD HH24:MI:SS.MS')",
                    &[&(*offset as f64)],
                )
                .unwrap()
                .get(0)
        })
        .collect()
}

#[test]
#[ignore = "needs pg_partman (Debian's postgresql-15-partman): ./dev test runs it on PostgreSQL 15 (--test partman --include-ignored)"]
fn pg_partman_keeps_one_partition_per_utc_day() {
    let server = Server::start("partman", Config::node(1));
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE SCHEMA partman;
             CREATE EXTENSION pg_partman SCHEMA partman;
             CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)
                 PARTITION BY RANGE (id);
             SELECT partman.create_parent(
                 p_parent_table    => 'public.events',
                 p_control         => 'id',
                 p_type            => 'native',
                 p_interval        => (86400000::bigint << 22)::text,
                 p_premake         => 2,
                 p_start_partition => snowflake_from_timestamp(
                                          date_trunc('day', now(), 'UTC') - interval '2 days')::text);",
        )
        .unwrap();
    let made = partitions(&mut client);
    println!("after create_parent: {made:?}");
    let days: Vec<String> = made.iter().map(|(_, day)| day.clone()).collect();
    assert_eq!(days, utc_days(&mut client, &[-2, -1, 0]));

    // New rows land in today's partition, not in the default one.
    client
        .batch_execute("INSERT INTO events (body) SELECT 'now' FROM generate_series(1, 1000)")
        .unwrap();
    let today = &made[2].0;
    let in_today: i64 = client
        .query_one(&format!("SELECT count(*) FROM ONLY {today}"), &[])
        .unwrap()
        .get(0);
    assert_eq!(in_today, 1000);

    // Maintenance premakes two days ahead of the newest ID; retention drops what is older than
    // one day of IDs before it.
    // (CALL commits inside, so it runs as a statement of its own.)
    client
        .batch_execute("CALL partman.run_maintenance_proc()")
        .unwrap();
    client
        .batch_execute(
            "UPDATE partman.part_config SET retention = (86400000::bigint << 22)::text,
                                            retention_keep_table = false
             WHERE parent_table = 'public.events'",
        )
        .unwrap();
    client
        .batch_execute("CALL partman.run_maintenance_proc()")
        .unwrap();
    let kept = partitions(&mut client);
    println!("after maintenance with one day's retention: {kept:?}");
    let days: Vec<String> = kept.iter().map(|(_, day)| day.clone()).collect();
    assert_eq!(days, utc_days(&mut client, &[-1, 0, 1, 2]));
    let rows: i64 = client
        .query_one("SELECT count(*) FROM events", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1000);
}
