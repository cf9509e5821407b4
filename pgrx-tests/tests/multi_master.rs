//! Multi-master with stock PostgreSQL 16+: two primaries with their own node ids, each publishing
//! its table and subscribing to the other's publication with `origin = none` (a row that arrived
//! by replication is not sent back), both inserting at the same time. Snowflake keys from
//! different node ids never collide, so there is no apply error and no key conflict, and both
//! servers end with the same rows. docs/GUIDE.md's "Multi-master" recipe is this test's SQL.
//!
//! PostgreSQL 15 has no `origin` subscription parameter: there the test checks that 15 refuses
//! it, which is why the recipe needs 16 or later.

use snowflake_it::{
    count, describe, pg_major, replication_errors, start_cluster, wait_until, Server,
};
use std::thread;
use std::time::{Duration, Instant};

const NODES: [i32; 2] = [1, 2];
const ROWS_PER_NODE: i64 = 50_000;
const CLIENTS_PER_NODE: i64 = 2;
const ROWS_PER_STATEMENT: i64 = 250;
const TABLE: &str = "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                                          made_on int NOT NULL, item text NOT NULL)";

/// The subscription that makes `server` apply what `other` publishes.
fn subscribe(server: &Server, other: &Server, name: &str) -> Result<(), postgres::Error> {
    server.connect().batch_execute(&format!(
        "CREATE SUBSCRIPTION {name} CONNECTION '{}' PUBLICATION orders_pub
             WITH (origin = none, copy_data = false)",
        other.conninfo("postgres")
    ))
}

/// `CLIENTS_PER_NODE` connections to `server` insert `ROWS_PER_NODE` rows together, in
/// multi-row statements; returns when they started and finished.
fn insert_rows(server: &Server, node: i32) -> (Instant, Instant) {
    let started = Instant::now();
    thread::scope(|scope| {
        for _ in 0..CLIENTS_PER_NODE {
            let mut client = server.connect();
            scope.spawn(move || {
                for _ in 0..ROWS_PER_NODE / CLIENTS_PER_NODE / ROWS_PER_STATEMENT {
                    client
                        .execute(
                            "INSERT INTO orders (made_on, item)
                             SELECT $1, 'item ' || g FROM generate_series(1, $2::int) g",
                            &[&node, &(ROWS_PER_STATEMENT as i32)],
                        )
                        .unwrap_or_else(|e| panic!("insert on node {node}: {}", describe(&e)));
                }
            });
        }
    });
    (started, Instant::now())
}

#[test]
fn two_primaries_replicate_to_each_other_with_origin_none_without_a_conflict() {
    let servers = start_cluster("mm", &NODES, &["wal_level = logical"]);
    let (a, b) = (&servers[0], &servers[1]);
    for server in [a, b] {
        server.execute(&format!(
            "{TABLE}; CREATE PUBLICATION orders_pub FOR TABLE orders"
        ));
    }

    if pg_major() < 16 {
        let err = subscribe(a, b, "from_b").expect_err("PostgreSQL 15 has no origin parameter");
        assert_eq!(
            describe(&err),
            "42601 unrecognized subscription parameter: \"origin\""
        );
        println!(
            "PostgreSQL {}: origin = none is refused, as expected",
            pg_major()
        );
        return;
    }

    // Each slot exists once CREATE SUBSCRIPTION returns: every row inserted from now on reaches
    // the other server.
    subscribe(a, b, "from_b").unwrap_or_else(|e| panic!("{}", describe(&e)));
    subscribe(b, a, "from_a").unwrap_or_else(|e| panic!("{}", describe(&e)));

    let (spans, elapsed) = {
        let started = Instant::now();
        let spans = thread::scope(|scope| {
            let on_a = scope.spawn(|| insert_rows(a, NODES[0]));
            let on_b = scope.spawn(|| insert_rows(b, NODES[1]));
            [on_a.join().unwrap(), on_b.join().unwrap()]
        });
        (spans, started.elapsed())
    };
    let overlap = spans[0]
        .1
        .min(spans[1].1)
        .saturating_duration_since(spans[0].0.max(spans[1].0));
    println!(
        "{} rows inserted on each primary by {CLIENTS_PER_NODE} connections in {elapsed:?}; \
         the two primaries inserted at the same time for {overlap:?}",
        ROWS_PER_NODE
    );
    let shorter = spans
        .iter()
        .map(|(start, end)| *end - *start)
        .min()
        .unwrap();
    assert!(
        overlap >= shorter / 2,
        "the primaries did not insert at the same time: {spans:?}"
    );

    let total = 2 * ROWS_PER_NODE;
    let mut clients = [a.connect(), b.connect()];
    let caught_up = wait_until(
        Duration::from_secs(180),
        "both primaries to hold every row",
        || {
            clients
                .iter_mut()
                .all(|client| count(client, "SELECT count(*) FROM orders") >= total)
        },
    );
    println!("both primaries held all {total} rows {caught_up:?} after the inserts");

    let mut digests = vec![];
    for (client, node) in clients.iter_mut().zip(NODES) {
        let errors = replication_errors(client);
        assert_eq!(errors, 0, "node {node}: apply or sync errors");
        let row = client
            .query_one(
                "SELECT count(*), count(DISTINCT id),
                        count(*) FILTER (WHERE snowflake_node_id(id) <> made_on),
                        md5(string_agg(id || ':' || made_on || ':' || item, ',' ORDER BY id))
                 FROM orders",
                &[],
            )
            .unwrap();
        let (rows, distinct, wrong_node): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        println!(
            "node {node}: {rows} rows, {distinct} distinct keys, {wrong_node} keys of another node"
        );
        assert_eq!(
            (rows, distinct, wrong_node),
            (total, total, 0),
            "node {node}"
        );
        for made_on in NODES {
            assert_eq!(
                count(
                    client,
                    &format!("SELECT count(*) FROM orders WHERE made_on = {made_on}")
                ),
                ROWS_PER_NODE,
                "node {node}: rows made on node {made_on}"
            );
        }
        digests.push(row.get::<_, String>(3));
    }
    assert_eq!(
        digests[0], digests[1],
        "the two primaries hold different rows"
    );
    a.execute("DROP SUBSCRIPTION from_b");
    b.execute("DROP SUBSCRIPTION from_a");
}
