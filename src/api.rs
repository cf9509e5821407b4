//! The SQL functions: thin wrappers over the core (`layout`, `generator`), the shared generator
//! (`shmem`) and the GUCs (`gucs`).

use crate::error::OrReport;
use crate::layout::{Parts, DEFAULT_LAYOUT};
use crate::{gucs, shmem};
use pgrx::prelude::*;

/// Unix time (ms) of Postgres' own epoch, 2000-01-01 00:00:00 UTC.
const POSTGRES_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// A new ID from this server's generator.
///
/// VOLATILE: every call returns a different value and advances shared state, so the planner
/// must call it once per row. PARALLEL SAFE: the generator lives in shared memory, which parallel
/// workers share, and its lock serialises them like any other backend.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_nextval() -> i64 {
    // Without preloading, the node id setting does not even exist: say that first.
    shmem::ensure_available().or_report();
    let node = gucs::node_id().or_report();
    shmem::next_id(&DEFAULT_LAYOUT, node).or_report()
}

/// The time an ID was made, to the millisecond.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    let parts = decompose(id);
    let micros = (DEFAULT_LAYOUT.unix_ms(parts.time) - POSTGRES_EPOCH_UNIX_MS) * 1000;
    // The default layout ends in 2093, far inside timestamptz's range (up to 294276 AD).
    TimestampWithTimeZone::try_from(micros)
        .unwrap_or_else(|_| unreachable!("every ID's time fits timestamptz"))
}

/// The node id of the server that made an ID.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_node_id(id: i64) -> i32 {
    decompose(id).node as i32
}

/// The sequence number of an ID within its millisecond.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_seq(id: i64) -> i32 {
    decompose(id).seq as i32
}

fn decompose(id: i64) -> Parts {
    DEFAULT_LAYOUT.decompose(id).or_report()
}

extension_sql!(
    r#"
CREATE FUNCTION snowflake_decode(id bigint, OUT ts timestamptz, OUT node_id integer, OUT seq integer)
RETURNS record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (snowflake_timestamp(id), snowflake_node_id(id), snowflake_seq(id));

COMMENT ON FUNCTION snowflake_nextval() IS
'Returns a new snowflake ID from this server''s generator: time-ordered, unique across every server with its own pg_snowflake.node_id.';
COMMENT ON FUNCTION snowflake_decode(bigint) IS
'Splits a snowflake ID into the time it was made, the node that made it and its sequence number within that millisecond.';
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
'Returns the time a snowflake ID was made, to the millisecond. Immutable: usable in indexes and generated columns.';
COMMENT ON FUNCTION snowflake_node_id(bigint) IS
'Returns the node id of the server that made a snowflake ID. Immutable: usable in indexes and generated columns.';
COMMENT ON FUNCTION snowflake_seq(bigint) IS
'Returns the sequence number of a snowflake ID within its millisecond. Immutable: usable in indexes and generated columns.';
"#,
    name = "decode_and_comments",
    requires = [
        snowflake_nextval,
        snowflake_timestamp,
        snowflake_node_id,
        snowflake_seq
    ],
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// `postgresql_conf_options` in lib.rs sets this node id.
    const TEST_NODE: i32 = 1;

    fn bigint(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).unwrap().unwrap()
    }

    fn boolean(sql: &str) -> bool {
        Spi::get_one::<bool>(sql).unwrap().unwrap()
    }

    #[pg_test]
    fn nextval_is_positive_and_strictly_increasing() {
        let ids: Vec<i64> = (0..10_000)
            .map(|_| bigint("SELECT snowflake_nextval()"))
            .collect();
        assert!(ids[0] > 0);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    #[pg_test]
    fn many_ids_in_one_statement_are_strictly_increasing() {
        assert!(boolean(
            "SELECT bool_and(id > prev) FROM (
                 SELECT id, lag(id) OVER (ORDER BY n) AS prev
                 FROM (SELECT n, snowflake_nextval() AS id FROM generate_series(1, 50000) n) s
             ) t WHERE prev IS NOT NULL"
        ));
    }

    #[pg_test]
    fn decode_gives_the_configured_node_and_the_current_time() {
        let id = bigint("SELECT snowflake_nextval()");
        let node = Spi::get_one::<i32>(&format!("SELECT (snowflake_decode({id})).node_id"));
        assert_eq!(node, Ok(Some(TEST_NODE)));
        assert!(boolean(&format!(
            "SELECT abs(extract(epoch FROM (snowflake_decode({id})).ts - clock_timestamp())) < 1"
        )));
    }

    #[pg_test]
    fn decode_agrees_with_the_documented_bit_arithmetic() {
        assert!(boolean(
            "SELECT bool_and(
                 d.ts = timestamptz '2024-01-01 00:00:00+00' + (v.id >> 22) * interval '1 millisecond'
                 AND d.node_id = (v.id >> 12) & 1023
                 AND d.seq = v.id & 4095)
             FROM (VALUES (0::bigint), (4194304), (123456789012345), (9223372036854775807)) v(id),
                  LATERAL snowflake_decode(v.id) d"
        ));
    }

    #[pg_test]
    fn accessors_agree_with_decode() {
        assert!(boolean(
            "WITH ids AS (SELECT snowflake_nextval() AS id FROM generate_series(1, 100))
             SELECT bool_and((snowflake_decode(id)).ts = snowflake_timestamp(id)
                         AND (snowflake_decode(id)).node_id = snowflake_node_id(id)
                         AND (snowflake_decode(id)).seq = snowflake_seq(id))
             FROM ids"
        ));
    }

    #[pg_test]
    fn decoders_work_in_an_index_and_a_generated_column() {
        Spi::run(
            "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                             node int GENERATED ALWAYS AS (snowflake_node_id(id)) STORED);
             CREATE INDEX ON t (snowflake_timestamp(id));
             INSERT INTO t SELECT FROM generate_series(1, 1000);",
        )
        .unwrap();
        assert!(boolean(
            "SELECT count(*) = 1000 AND bool_and(node = 1) FROM t"
        ));
    }

    #[pg_test]
    fn decoders_are_strict() {
        assert!(boolean(
            "SELECT snowflake_decode(NULL) IS NULL AND snowflake_timestamp(NULL) IS NULL
                 AND snowflake_node_id(NULL) IS NULL AND snowflake_seq(NULL) IS NULL"
        ));
    }

    #[pg_test(error = "snowflake id -1 is negative")]
    fn decode_of_a_negative_id_is_an_error() {
        Spi::run("SELECT snowflake_decode(-1)").unwrap();
    }

    #[pg_test]
    fn declared_volatility_matches_what_the_functions_are() {
        let volatility = |name: &str| {
            Spi::get_one::<String>(&format!(
                "SELECT provolatile::text || proisstrict::text || proparallel::text
                 FROM pg_proc WHERE proname = '{name}'"
            ))
            .unwrap()
            .unwrap()
        };
        // STRICT means nothing for a function without arguments; pgrx declares it anyway.
        assert_eq!(volatility("snowflake_nextval"), "vtrues");
        for decoder in [
            "snowflake_decode",
            "snowflake_timestamp",
            "snowflake_node_id",
            "snowflake_seq",
        ] {
            assert_eq!(volatility(decoder), "itrues", "{decoder}");
        }
    }

    #[pg_test]
    fn every_function_has_a_comment() {
        assert!(boolean(
            "SELECT bool_and(obj_description(p.oid, 'pg_proc') IS NOT NULL) AND count(*) = 8
             FROM pg_proc p WHERE p.proname LIKE 'snowflake\\_%'"
        ));
    }
}
