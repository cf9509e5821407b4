//! pg_dump / pg_restore: a database using the extension moves to a fresh server, with the same
//! node id (a migration) or another one (a copy that will go on as a new shard). The extension,
//! the defaults and the data come back intact, and generation goes on above every restored key.

use snowflake_it::{pg_bin, run, Config, Server};

const ROWS: i64 = 20_000;

/// What must survive the round trip: row count, a digest of every key and value in key order,
/// the largest key, and the column default as Postgres prints it.
fn digest(client: &mut postgres::Client) -> (i64, String, i64, String) {
    let row = client
        .query_one(
            "SELECT count(*), md5(string_agg(id || ':' || item, ',' ORDER BY id)), max(id),
                    (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
                     WHERE d.adrelid = 'orders'::regclass)
             FROM orders",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

#[test]
fn dump_and_restore_into_a_fresh_server_then_keep_generating() {
    let dump = std::env::temp_dir().join(format!("pgsf-dump-{}.dump", std::process::id()));
    let dump = dump.to_str().unwrap().to_string();
    let before = {
        let source = Server::start("dumpsrc", Config::node(1));
        let mut client = source.connect();
        client
            .batch_execute(&format!(
                "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                                      item text NOT NULL);
                 INSERT INTO orders (item) SELECT 'item' || n FROM generate_series(1, {ROWS}) n;"
            ))
            .unwrap();
        let before = digest(&mut client);
        run(
            pg_bin("pg_dump"),
            &[
                "--format=custom",
                "--file",
                &dump,
                &source.conninfo("postgres"),
            ],
        );
        before
        // The source server stops here: a restore with its node id must never run beside it.
    };
    println!(
        "dumped {} rows, largest key {}, default {}",
        before.0, before.2, before.3
    );
    assert_eq!(before.0, ROWS);
    assert_eq!(before.3, "snowflake_nextval()");

    for node in [1, 2] {
        let target = Server::start("restore", Config::node(node));
        target
            .connect()
            .batch_execute("CREATE DATABASE restored")
            .unwrap();
        run(
            pg_bin("pg_restore"),
            &[
                "--exit-on-error",
                "--dbname",
                &target.conninfo("restored"),
                &dump,
            ],
        );
        let mut client = target.connect_db("restored");
        let extension: String = client
            .query_one(
                "SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'",
                &[],
            )
            .unwrap()
            .get(0);
        let after = digest(&mut client);
        assert_eq!(after, before, "node {node}: the restored table differs");

        let added = client
            .execute(
                "INSERT INTO orders (item) SELECT 'new' || n FROM generate_series(1, 5000) n",
                &[],
            )
            .unwrap();
        let row = client
            .query_one(
                "SELECT count(*), count(DISTINCT id),
                        count(*) FILTER (WHERE item LIKE 'new%' AND id > $1),
                        count(*) FILTER (WHERE item LIKE 'new%' AND snowflake_node_id(id) = $2)
                 FROM orders",
                &[&before.2, &node],
            )
            .unwrap();
        let (rows, distinct, above, on_node): (i64, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        println!(
            "restored into node {node} (extension {extension}): data identical; {added} new rows, \
             {above} above the largest restored key, {on_node} with node {node}; {rows} rows, \
             {distinct} distinct keys"
        );
        assert_eq!(added, 5000);
        assert_eq!((rows, distinct), (ROWS + 5000, ROWS + 5000));
        assert_eq!(above, 5000);
        assert_eq!(on_node, 5000);
    }
    std::fs::remove_file(&dump).ok();
}
