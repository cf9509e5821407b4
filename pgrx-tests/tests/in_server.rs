//! What a backend of each major does with the extension's members: the planner accepting the
//! decoders in an index and a generated column, the catalog's comment on every member, and the
//! time bounds against the shared generator's lead. Everything else a user sees is pinned by
//! another tier, once: messages, volatility and NULL handling by the golden files, uniqueness
//! and decoding of fresh IDs by `uniqueness.rs`, the arithmetic by the core's unit tests.

use snowflake_it::{one, Config, Server};

#[test]
fn decoders_work_in_an_index_and_a_generated_column() {
    let server = Server::start("decoders", Config::node(1));
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                             node int GENERATED ALWAYS AS (snowflake_node_id(id)) STORED);
             CREATE INDEX ON t (snowflake_timestamp(id));
             INSERT INTO t SELECT FROM generate_series(1, 1000);",
        )
        .unwrap();
    let (rows, all_node_1): (i64, bool) = {
        let row = client
            .query_one("SELECT count(*), bool_and(node = 1) FROM t", &[])
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((rows, all_node_1), (1000, true));
}

#[test]
fn every_function_has_a_comment() {
    let server = Server::start("comments", Config::node(1));
    let mut client = server.connect();
    let uncommented: Vec<String> = client
        .query(
            "SELECT p.oid::regprocedure::text FROM pg_proc p
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                             AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_snowflake'
             WHERE obj_description(p.oid, 'pg_proc') IS NULL
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(uncommented, Vec::<String>::new());
    // The query above sees the extension's members at all.
    let members: i64 = one(
        &mut client,
        "SELECT count(*) FROM pg_depend d
         JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_snowflake'
         WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'",
    );
    assert!(members > 10, "{members} functions belong to the extension");
}

/// The upper bound allows for the generator's lead over the clock: a batch taken just before
/// borrows ahead of the clock, so an ID made right after it is "from the future". The ID's time
/// is at most the last issued time, i.e. the clock plus `lead_ms`, read afterwards.
#[test]
fn a_new_id_lies_between_the_bounds_of_the_time_around_it() {
    let server = Server::start("bounds-now", Config::node(1));
    let mut client = server.connect();
    client
        .batch_execute(
            "SELECT count(snowflake_nextval()) FROM generate_series(1, 50000);
             CREATE TEMP TABLE made AS
                 SELECT clock_timestamp() AS before, snowflake_nextval() AS id",
        )
        .unwrap();
    let between: bool = one(
        &mut client,
        "SELECT snowflake_from_timestamp(before) <= id
                AND id <= snowflake_max_from_timestamp(latest)
         FROM made,
              (SELECT clock_timestamp() + lead_ms * interval '1 ms' AS latest
               FROM snowflake_stats()) generator",
    );
    assert!(between);
}

#[test]
fn bounds_round_trip_through_decode_to_the_millisecond() {
    let server = Server::start("bounds-trip", Config::node(1));
    let mut client = server.connect();
    let wrong: Vec<String> = client
        .query(
            "SELECT t::text FROM generate_series(timestamptz '2024-01-01 00:00:00.0005+00',
                                                 timestamptz '2093-01-01 00:00:00+00',
                                                 interval '1234 days 5 hours 6 minutes 7.891234 seconds') t
             WHERE snowflake_timestamp(snowflake_from_timestamp(t)) <> date_trunc('milliseconds', t)
                OR snowflake_timestamp(snowflake_max_from_timestamp(t)) <> date_trunc('milliseconds', t)",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(wrong, Vec::<String>::new());
}
