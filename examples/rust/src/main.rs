//! pg_snowflake with tokio-postgres: the recipe of docs/CLIENTS.md#rust-tokio-postgres, and its
//! test.
//!
//! Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
//! NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded).
//! A failed check panics: non-zero exit.
use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

/// The test server's pg_snowflake.node_id (scripts/test/clients).
const NODE_ID: i32 = 7;
/// The last ID of the layout: 19 digits.
const LARGEST: i64 = i64::MAX;

// snippet: connect
async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("connection error: {e}");
        }
    });
    client
        .batch_execute(include_str!("../migrations/0001_orders.sql"))
        .await?;
    Ok(client)
}

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    item: String,
}
// end snippet

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = connect(&std::env::var("DATABASE_URL")?).await?;
    let default: String = client
        .query_one(
            "SELECT column_default FROM information_schema.columns \
             WHERE table_name = 'orders' AND column_name = 'id'",
            &[],
        )
        .await?
        .get(0);
    assert_eq!(default, "snowflake_nextval()");
    say("1. migration made orders.id bigint DEFAULT snowflake_nextval()");

    // snippet: insert
    let id: i64 = client
        .query_one(
            "INSERT INTO orders (item) VALUES ($1) RETURNING id",
            &[&"apple"],
        )
        .await?
        .get("id");

    let items: Vec<String> = (0..5000).map(|i| format!("bulk {i}")).collect();
    let bulk_ids: Vec<i64> = client
        .query(
            "INSERT INTO orders (item) SELECT unnest($1::text[]) RETURNING id",
            &[&items],
        )
        .await?
        .iter()
        .map(|row| row.get("id"))
        .collect();
    // end snippet
    assert!(id > 0, "{id}");
    check_bulk(&client, &bulk_ids).await?;
    say(&format!(
        "2. single insert returned {id}; 5,000 bulk IDs returned in order"
    ));

    // snippet: round-trip
    const END: &str = "snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')";
    let largest: i64 = client
        .query_one(&format!("SELECT {END}"), &[])
        .await?
        .get(0);
    let text = serde_json::to_string(&Order {
        id: largest,
        item: "far".into(),
    })?; // {"id":9223372036854775807,"item":"far"}
    let back: Order = serde_json::from_str(&text)?;
    let same: bool = client
        .query_one(&format!("SELECT $1::bigint = {END}"), &[&back.id])
        .await?
        .get(0);
    // end snippet
    assert_eq!(largest, LARGEST);
    assert_eq!(largest.to_string().len(), 19);
    assert_eq!(text, r#"{"id":9223372036854775807,"item":"far"}"#);
    assert_eq!(back.id, LARGEST);
    assert!(same);
    let again: Order = serde_json::from_str(&serde_json::to_string(&Order {
        id,
        item: "apple".into(),
    })?)?;
    let item: String = client
        .query_one("SELECT item FROM orders WHERE id = $1", &[&again.id])
        .await?
        .get(0);
    assert_eq!(item, "apple");
    say("3. 19 digits through tokio-postgres (i64) and serde_json, both ways");

    // 100,000 older rows (30 to 18 days ago): the table of an application that has run a while.
    client
        .batch_execute(
            "INSERT INTO orders (id, item) \
             SELECT snowflake_from_timestamp(now() - interval '30 days' + g * interval '10 seconds'), 'old' \
             FROM generate_series(0, 99999) g; \
             ANALYZE orders",
        )
        .await?;

    // snippet: decode
    let row = client
        .query_one(
            "SELECT d.ts, d.node_id, d.seq, snowflake_timestamp(o.id) AS ts_only \
             FROM orders o, snowflake_decode(o.id) d WHERE o.id = $1",
            &[&id],
        )
        .await?;
    let (ts, node, seq): (SystemTime, i32, i32) =
        (row.get("ts"), row.get("node_id"), row.get("seq"));

    let last_hour = "SELECT id FROM orders \
                     WHERE id >= snowflake_from_timestamp(now() - interval '1 hour')";
    let recent: Vec<i64> = client
        .query(last_hour, &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let plan: Vec<String> = client
        .query(&format!("EXPLAIN {last_hour}"), &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    // end snippet
    assert_eq!(node, NODE_ID);
    assert!((0..4096).contains(&seq), "{seq}");
    assert_eq!(ts, row.get::<_, SystemTime>("ts_only"));
    let age = SystemTime::now()
        .duration_since(ts)
        .unwrap_or_else(|e| e.duration());
    assert!(age < Duration::from_secs(120), "{age:?}");
    let mut mine: Vec<i64> = bulk_ids.clone();
    mine.push(id);
    mine.sort();
    let mut recent = recent;
    recent.sort();
    assert_eq!(recent, mine, "the last hour's rows");
    let plan = plan.join("\n");
    assert!(
        plan.contains("orders_pkey") && !plan.contains("Seq Scan"),
        "{plan}"
    );
    say(&format!(
        "4. decoded (node {node}, seq {seq}, {:?} ago); last hour by key: {}",
        age,
        plan.lines().next().unwrap_or("")
    ));

    // snippet: errors
    for (variable, sqlstate, message) in [
        (
            "NODE_UNSET_URL",
            SqlState::CONFIG_FILE_ERROR,
            "pg_snowflake.node_id is not set",
        ), // F0000
        (
            "NOT_PRELOADED_URL",
            SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE, // 55000
            "pg_snowflake must be loaded via shared_preload_libraries",
        ),
    ] {
        let other = connect(&std::env::var(variable)?).await?;
        let error = other
            .execute("INSERT INTO orders (item) VALUES ('pear')", &[])
            .await
            .expect_err("the insert worked");
        assert_eq!(error.code(), Some(&sqlstate), "{error}");
        assert_eq!(error.as_db_error().map(|e| e.message()), Some(message));
        say(&format!("5. {}: {message}", sqlstate.code()));
    }
    // end snippet
    say("all five points hold");
    Ok(())
}

/// 5,000 IDs, positive, distinct, increasing, and each the ID of its own row.
async fn check_bulk(client: &Client, ids: &[i64]) -> Result<(), tokio_postgres::Error> {
    assert_eq!(ids.len(), 5000);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 5000);
    assert!(ids.iter().all(|&id| id > 0));
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "not increasing");
    let items: HashMap<i64, String> = client
        .query("SELECT id, item FROM orders WHERE id = ANY($1)", &[&ids])
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(items[id], format!("bulk {n}"), "the row of {id}");
    }
    Ok(())
}

fn say(words: &str) {
    println!("rust: {words}");
}
