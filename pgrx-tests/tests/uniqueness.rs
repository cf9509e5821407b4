//! The core promise, against real servers: no duplicate across concurrent connections of one
//! server, no overlap between servers with different node ids, and decode tells the truth.

use snowflake_it::{strictly_increasing, take_ids, Config, Server};
use std::collections::HashSet;
use std::thread;

const CONNECTIONS: usize = 8;
const IDS_PER_CONNECTION: usize = 50_000;
/// IDs per statement: small enough that the connections' statements interleave many times.
const BATCH: usize = 500;

/// Runs `connections` clients against `server` at once and returns each one's IDs in order.
fn concurrent_ids(server: &Server, connections: usize, per_connection: usize) -> Vec<Vec<i64>> {
    thread::scope(|scope| {
        let handles: Vec<_> = (0..connections)
            .map(|_| {
                let mut client = server.connect();
                scope.spawn(move || take_ids(&mut client, per_connection, BATCH))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn concurrent_connections_never_get_a_duplicate() {
    let server = Server::start("conc", Config::node(5));
    let per_connection = concurrent_ids(&server, CONNECTIONS, IDS_PER_CONNECTION);

    let mut all = HashSet::new();
    for (i, ids) in per_connection.iter().enumerate() {
        assert_eq!(ids.len(), IDS_PER_CONNECTION);
        assert!(
            strictly_increasing(ids),
            "connection {i}: IDs not increasing"
        );
        assert!(
            ids.iter().all(|&id| id > 0),
            "connection {i}: non-positive ID"
        );
        all.extend(ids.iter().copied());
    }
    let total = CONNECTIONS * IDS_PER_CONNECTION;
    println!(
        "{CONNECTIONS} connections x {IDS_PER_CONNECTION} IDs: {total} taken, {} distinct, {} duplicates",
        all.len(),
        total - all.len()
    );
    assert_eq!(all.len(), total, "duplicates across connections");

    // The connections really overlapped in time: their ID ranges interleave.
    let overlapping = per_connection
        .iter()
        .filter(|ids| {
            per_connection.iter().any(|other| {
                !std::ptr::eq(*ids, other)
                    && other[0] < ids[ids.len() - 1]
                    && ids[0] < other[other.len() - 1]
            })
        })
        .count();
    assert!(overlapping >= 2, "connections did not run concurrently");
}

#[test]
fn batches_and_single_ids_on_concurrent_connections_never_collide() {
    let server = Server::start("batch", Config::node(6));
    let per_connection: Vec<Vec<i64>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let mut client = server.connect();
                scope.spawn(move || {
                    if i % 2 == 0 {
                        take_ids(&mut client, 200_000, 1000)
                    } else {
                        let mut ids = vec![];
                        for _ in 0..20 {
                            let rows = client
                                .query("SELECT snowflake_nextval_batch(10000)", &[])
                                .unwrap();
                            ids.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
                        }
                        ids
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: HashSet<i64> = per_connection.iter().flatten().copied().collect();
    let total: usize = per_connection.iter().map(Vec::len).sum();
    println!(
        "2 connections of single IDs + 2 of 10,000-ID batches: {total} IDs, {} distinct",
        all.len()
    );
    assert_eq!(total, 800_000);
    assert_eq!(all.len(), total);
    for ids in &per_connection {
        assert!(strictly_increasing(ids));
    }
}

#[test]
fn servers_with_different_node_ids_never_overlap() {
    let servers = [
        Server::start("node1", Config::node(1)),
        Server::start("node2", Config::node(2)),
    ];
    let ids: Vec<Vec<i64>> = thread::scope(|scope| {
        let handles: Vec<_> = servers
            .iter()
            .map(|server| scope.spawn(move || concurrent_ids(server, 2, 50_000).concat()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first: HashSet<i64> = ids[0].iter().copied().collect();
    let second: HashSet<i64> = ids[1].iter().copied().collect();
    assert_eq!(first.len(), ids[0].len());
    assert_eq!(second.len(), ids[1].len());
    let overlap = first.intersection(&second).count();
    println!(
        "two servers, nodes 1 and 2: {} + {} IDs, overlap {overlap}",
        first.len(),
        second.len()
    );
    assert_eq!(overlap, 0);

    // Each server's IDs carry its own node id.
    for (server, expected) in servers.iter().zip([1, 2]) {
        let mut client = server.connect();
        let sample: Vec<i64> = ids[expected as usize - 1]
            .iter()
            .step_by(997)
            .copied()
            .collect();
        let nodes: Vec<i32> = client
            .query(
                "SELECT snowflake_node_id(id) FROM unnest($1::bigint[]) id",
                &[&sample],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(nodes.iter().all(|&n| n == expected), "{nodes:?}");
    }
}

#[test]
fn decode_returns_the_configured_node_and_the_current_time() {
    let server = Server::start("decode", Config::node(42));
    let mut client = server.connect();
    let row = client
        .query_one(
            "WITH made AS (SELECT clock_timestamp() AS before, snowflake_nextval() AS id)
             SELECT d.node_id, d.seq,
                    extract(epoch FROM d.ts - now())::float8 AS from_now,
                    d.ts >= date_trunc('milliseconds', m.before) AS not_before,
                    d.ts <= clock_timestamp() AS not_after
             FROM made m, snowflake_decode(m.id) d",
            &[],
        )
        .unwrap();
    let node: i32 = row.get("node_id");
    let from_now: f64 = row.get("from_now");
    println!(
        "decoded node {node}, ts - now() = {from_now:.6} s, seq {}",
        row.get::<_, i32>("seq")
    );
    assert_eq!(node, 42);
    assert!(from_now.abs() < 1.0, "ts is {from_now} s from now()");
    assert!(row.get::<_, bool>("not_before"));
    assert!(row.get::<_, bool>("not_after"), "{}", server.log());
}
