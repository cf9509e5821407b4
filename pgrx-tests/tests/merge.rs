//! Shards meet in one table with zero key conflicts: three servers insert at the same time, and a
//! fourth pulls everything together through postgres_fdw, through logical replication while the
//! shards keep inserting, and two independent game servers are merged with INSERT … SELECT.
//!
//! Each shard's rows also carry a `bigserial` number, which is what a table keyed by bigserial
//! would have used: those collide by the hundred thousand, the snowflake keys not once.

use postgres::Client;
use snowflake_it::{count, replication_errors, start_cluster, wait_until, Server};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const SHARDS: [i32; 3] = [1, 2, 3];
const HUB: i32 = 4;
const CONNECTIONS_PER_SHARD: usize = 2;
const BATCHES_PER_CONNECTION: usize = 50;
const ROWS_PER_BATCH: usize = 1000;
const ROWS_PER_SHARD: i64 =
    (CONNECTIONS_PER_SHARD * BATCHES_PER_CONNECTION * ROWS_PER_BATCH) as i64;
const TOTAL: i64 = ROWS_PER_SHARD * SHARDS.len() as i64;

/// The table every shard has. `origin` is filled in by the server from its own configuration,
/// independently of the key, so that the merge can check each key's node against it.
const SHARD_TABLE: &str = "
    CREATE TABLE events (
        id       bigint PRIMARY KEY DEFAULT snowflake_nextval(),
        origin   int NOT NULL DEFAULT current_setting('pg_snowflake.node_id')::int,
        local_no bigserial NOT NULL,
        payload  text NOT NULL
    )";

/// The same table where the shards meet: keys as they come, no defaults.
const MERGED_TABLE: &str = "
    CREATE TABLE events (
        id       bigint PRIMARY KEY,
        origin   int NOT NULL,
        local_no bigint NOT NULL,
        payload  text NOT NULL
    )";

/// Inserts ROWS_PER_SHARD rows into every shard at once, from CONNECTIONS_PER_SHARD connections
/// each, in statements of ROWS_PER_BATCH rows; counts finished batches in `progress`.
fn insert_concurrently(shards: &[Server], progress: &AtomicUsize, pause: Duration) {
    thread::scope(|scope| {
        for shard in shards {
            for _ in 0..CONNECTIONS_PER_SHARD {
                let mut client = shard.connect();
                scope.spawn(move || {
                    let insert = client
                        .prepare(
                            "INSERT INTO events (payload)
                             SELECT md5(n::text) FROM generate_series(1, $1::int) n",
                        )
                        .unwrap();
                    for _ in 0..BATCHES_PER_CONNECTION {
                        client
                            .execute(&insert, &[&(ROWS_PER_BATCH as i32)])
                            .unwrap();
                        progress.fetch_add(1, Ordering::Relaxed);
                        thread::sleep(pause);
                    }
                });
            }
        }
    });
}

/// The checks every merge must pass, on the table `events` of `hub`: exact row count, no two
/// rows with one key, every key's node the node its row came from, each shard's full share, and
/// the shards' key ranges interleaved in time (they really inserted at the same time).
fn assert_merged(hub: &mut Client) {
    let rows = count(hub, "SELECT count(*) FROM events");
    let distinct = count(hub, "SELECT count(DISTINCT id) FROM events");
    let wrong_node = count(
        hub,
        "SELECT count(*) FROM events WHERE snowflake_node_id(id) <> origin",
    );
    let bigserial_collisions = count(
        hub,
        "SELECT count(*) - count(DISTINCT local_no) FROM events",
    );
    println!(
        "merged: {rows} rows, {distinct} distinct keys, key conflicts {}, rows whose key's node \
         is not their origin {wrong_node}; the shards' bigserial numbers collide {bigserial_collisions} times",
        rows - distinct
    );
    assert_eq!(rows, TOTAL);
    assert_eq!(distinct, TOTAL, "key conflicts");
    assert_eq!(wrong_node, 0);
    assert_eq!(bigserial_collisions, TOTAL - ROWS_PER_SHARD);

    for row in hub
        .query(
            "SELECT origin, count(*), min(snowflake_timestamp(id)) AS first,
                    max(snowflake_timestamp(id)) AS last
             FROM events GROUP BY origin ORDER BY origin",
            &[],
        )
        .unwrap()
    {
        let (origin, n): (i32, i64) = (row.get(0), row.get(1));
        println!("  from node {origin}: {n} rows");
        assert_eq!(n, ROWS_PER_SHARD, "rows from node {origin}");
    }
    let interleaved: bool = hub
        .query_one(
            "SELECT max(first) < min(last) FROM (
                 SELECT min(id) AS first, max(id) AS last FROM events GROUP BY origin) s",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(interleaved, "the shards did not insert at the same time");
}

#[test]
fn three_shards_merge_through_postgres_fdw_without_a_conflict() {
    let mut nodes = SHARDS.to_vec();
    nodes.push(HUB);
    let mut servers = start_cluster("fdw", &nodes, &[]);
    let hub = servers.pop().unwrap();
    let shards = servers;
    for shard in &shards {
        shard.connect().batch_execute(SHARD_TABLE).unwrap();
    }

    let started = Instant::now();
    insert_concurrently(&shards, &AtomicUsize::new(0), Duration::ZERO);
    println!(
        "{} shards x {ROWS_PER_SHARD} rows inserted concurrently in {:.1?}",
        shards.len(),
        started.elapsed()
    );

    let mut client = hub.connect();
    client
        .batch_execute(&format!("CREATE EXTENSION postgres_fdw; {MERGED_TABLE}"))
        .unwrap();
    for (shard, node) in shards.iter().zip(SHARDS) {
        client
            .batch_execute(&format!(
                "CREATE SERVER shard{node} FOREIGN DATA WRAPPER postgres_fdw
                     OPTIONS (host '127.0.0.1', port '{}', dbname 'postgres');
                 CREATE USER MAPPING FOR postgres SERVER shard{node} OPTIONS (user 'postgres');
                 CREATE SCHEMA shard{node};
                 IMPORT FOREIGN SCHEMA public LIMIT TO (events) FROM SERVER shard{node}
                     INTO shard{node};",
                shard.port
            ))
            .unwrap();
    }
    let started = Instant::now();
    let pulled = client
        .execute(
            "INSERT INTO events
             SELECT * FROM shard1.events UNION ALL
             SELECT * FROM shard2.events UNION ALL
             SELECT * FROM shard3.events",
            &[],
        )
        .unwrap_or_else(|e| panic!("the merge failed: {e}"));
    println!(
        "node {HUB} pulled {pulled} rows through postgres_fdw in one INSERT … SELECT in {:.1?}",
        started.elapsed()
    );
    assert_eq!(pulled as i64, TOTAL);
    assert_merged(&mut client);
}

#[test]
fn three_shards_merge_through_logical_replication_while_inserting() {
    let shards = start_cluster("pub", &SHARDS, &["wal_level = logical"]);
    let hub = Server::start(
        "sub",
        snowflake_it::Config::node(HUB)
            .setting("max_logical_replication_workers = 8")
            .setting("max_worker_processes = 16"),
    );
    for shard in &shards {
        shard
            .connect()
            .batch_execute(&format!(
                "{SHARD_TABLE}; CREATE PUBLICATION shard_pub FOR TABLE events"
            ))
            .unwrap();
    }
    let mut client = hub.connect();
    client.batch_execute(MERGED_TABLE).unwrap();

    let progress = AtomicUsize::new(0);
    let total_batches = shards.len() * CONNECTIONS_PER_SHARD * BATCHES_PER_CONNECTION;
    let started = Instant::now();
    let rows_when_subscribed = thread::scope(|scope| {
        // The shards insert for a few seconds; the subscriptions start while they do.
        scope.spawn(|| insert_concurrently(&shards, &progress, Duration::from_millis(20)));
        wait_until(Duration::from_secs(60), "the first batches", || {
            progress.load(Ordering::Relaxed) >= 6
        });
        for (shard, node) in shards.iter().zip(SHARDS) {
            client
                .batch_execute(&format!(
                    "CREATE SUBSCRIPTION shard{node} CONNECTION '{}' PUBLICATION shard_pub",
                    shard.conninfo("postgres")
                ))
                .unwrap();
        }
        let batches = progress.load(Ordering::Relaxed);
        assert!(
            batches < total_batches,
            "the shards had finished before the subscriptions started"
        );
        batches * ROWS_PER_BATCH
    });
    println!(
        "subscribed to {} shards after about {rows_when_subscribed} of {TOTAL} rows; \
         the shards finished inserting after {:.1?}",
        shards.len(),
        started.elapsed()
    );

    let caught_up = wait_until(
        Duration::from_secs(180),
        "the subscriber to catch up",
        || count(&mut client, "SELECT count(*) FROM events") >= TOTAL,
    );
    let errors = replication_errors(&mut client);
    println!(
        "node {HUB} caught up {caught_up:.1?} after the shards stopped; replication errors {errors}"
    );
    assert_eq!(errors, 0, "{}", hub.log());
    assert_merged(&mut client);
    for node in SHARDS {
        client
            .batch_execute(&format!("DROP SUBSCRIPTION shard{node}"))
            .unwrap();
    }
}

/// Two game servers, started on their own with node ids 7 and 8, each with players and their
/// items; then game 8 is merged into game 7 with INSERT … SELECT, foreign keys checked by
/// Postgres as the rows arrive.
#[test]
fn two_game_servers_merge_with_foreign_keys_intact() {
    const PLAYERS: i64 = 2000;
    const ITEMS_PER_PLAYER: i64 = 5;
    let games = start_cluster("game", &[7, 8], &[]);
    let fingerprint =
        "SELECT md5(string_agg(p.name || ':' || i.name || ':' || i.id, ',' ORDER BY i.id))
                       FROM items i JOIN players p ON p.id = i.player_id";
    let mut fingerprints = vec![];
    for (game, node) in games.iter().zip([7, 8]) {
        let mut client = game.connect();
        client
            .batch_execute(&format!(
                "CREATE TABLE players (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                                       name text NOT NULL);
                 CREATE TABLE items (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                                     player_id bigint NOT NULL REFERENCES players,
                                     name text NOT NULL);
                 INSERT INTO players (name)
                     SELECT 'game{node}-player' || n FROM generate_series(1, {PLAYERS}) n;
                 INSERT INTO items (player_id, name)
                     SELECT p.id, 'item' || k FROM players p, generate_series(1, {ITEMS_PER_PLAYER}) k;"
            ))
            .unwrap();
        let row = client.query_one(fingerprint, &[]).unwrap();
        fingerprints.push(row.get::<_, String>(0));
    }

    let mut target = games[0].connect();
    target
        .batch_execute(&format!(
            "CREATE EXTENSION postgres_fdw;
             CREATE SERVER game8 FOREIGN DATA WRAPPER postgres_fdw
                 OPTIONS (host '127.0.0.1', port '{}', dbname 'postgres');
             CREATE USER MAPPING FOR postgres SERVER game8 OPTIONS (user 'postgres');
             CREATE SCHEMA game8;
             IMPORT FOREIGN SCHEMA public LIMIT TO (players, items) FROM SERVER game8 INTO game8;",
            games[1].port
        ))
        .unwrap();
    let started = Instant::now();
    target
        .batch_execute(
            "BEGIN;
             INSERT INTO players SELECT * FROM game8.players;
             INSERT INTO items SELECT * FROM game8.items;
             COMMIT;",
        )
        .unwrap_or_else(|e| panic!("the merge failed: {e}"));
    println!("merged game 8 into game 7 in {:.1?}", started.elapsed());

    let players = count(&mut target, "SELECT count(*) FROM players");
    let items = count(&mut target, "SELECT count(*) FROM items");
    let orphans = count(
        &mut target,
        "SELECT count(*) FROM items i LEFT JOIN players p ON p.id = i.player_id WHERE p.id IS NULL",
    );
    let wrong_node = count(
        &mut target,
        "SELECT count(*) FROM items i JOIN players p ON p.id = i.player_id
         WHERE snowflake_node_id(i.id) <> snowflake_node_id(p.id)",
    );
    println!(
        "after the merge: {players} players, {items} items, orphaned items {orphans}, \
         items whose player came from another game {wrong_node}"
    );
    assert_eq!(players, 2 * PLAYERS);
    assert_eq!(items, 2 * PLAYERS * ITEMS_PER_PLAYER);
    assert_eq!(orphans, 0);
    assert_eq!(wrong_node, 0);
    // Each game's players own exactly the items they owned before, key for key.
    for (node, before) in [7, 8].iter().zip(&fingerprints) {
        let after: String = target
            .query_one(
                &format!("{fingerprint} WHERE snowflake_node_id(p.id) = {node}"),
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(&after, before, "game {node}'s players and items");
    }

    // The merged game goes on making keys, without a conflict.
    let added = target
        .execute(
            "INSERT INTO players (name) SELECT 'new' || n FROM generate_series(1, 1000) n",
            &[],
        )
        .unwrap();
    assert_eq!(added, 1000);
    assert_eq!(
        count(
            &mut target,
            "SELECT count(*) FROM players WHERE snowflake_node_id(id) = 7"
        ),
        PLAYERS + 1000
    );
}
