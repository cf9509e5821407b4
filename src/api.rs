//! The generator's SQL functions: thin wrappers over the shared generator (`shmem`), the
//! GUCs (`gucs`) and the core. The decoders are in `decode.rs`, the time bounds in `bounds.rs`.

use crate::error::OrReport;
use crate::generator::{self, Run};
use crate::timestamps::timestamptz;
use crate::{gucs, shmem};
use pgrx::prelude::*;

/// A new ID from this server's generator.
///
/// VOLATILE: every call returns a different value and advances shared state, so the planner
/// must call it once per row. PARALLEL RESTRICTED: it may write a WAL record (the durable
/// reservation), which is the leader's business, not a parallel worker's.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextval() -> i64 {
    // Without preloading, the node id setting does not even exist: say that first.
    shmem::ensure_available().or_report();
    let node = gucs::node_id().or_report();
    shmem::next_id(&gucs::layout(), node, &gucs::limits()).or_report()
}

/// `n` new IDs, strictly increasing, taken from the generator in as few lock acquisitions as
/// the clock allows: one for up to about four million IDs with the default settings, more only
/// when the batch has to wait for the clock. In the select list the IDs are made as rows are
/// read (a LIMIT leaves the rest unmade); in FROM, Postgres collects all rows first. Volatile and
/// parallel restricted like `snowflake_nextval()`.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextval_batch(n: i32) -> SetOfIterator<'static, i64> {
    shmem::ensure_available().or_report();
    let mut remaining = generator::batch_size(n).or_report();
    let node = gucs::node_id().or_report();
    let (layout, limits) = (gucs::layout(), gucs::limits());
    let mut ids = Run::EMPTY.ids(layout, node);
    SetOfIterator::new(std::iter::from_fn(move || loop {
        if let Some(id) = ids.next() {
            return Some(id);
        }
        if remaining == 0 {
            return None;
        }
        let run = shmem::next_run(&layout, node, &limits, remaining).or_report();
        remaining -= run.count;
        ids = run.ids(layout, node);
    }))
}

/// The generator's state and counters since the server started: one row.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
fn snowflake_stats() -> TableIterator<
    'static,
    (
        name!(node_id, Option<i32>),
        name!(layout, String),
        name!(ids_issued, i64),
        name!(last_issued, Option<TimestampWithTimeZone>),
        name!(lead_ms, i64),
        name!(borrowed_ms, i64),
        name!(clock_regressions, i64),
        name!(exhausted_ms, i64),
        name!(overload_waits, i64),
        name!(reservations, i64),
        name!(reserved_until, Option<TimestampWithTimeZone>),
        name!(time_field_ends, TimestampWithTimeZone),
    ),
> {
    let generator = shmem::snapshot().or_report();
    let now = shmem::read_clocks().wall;
    let stats = generator.stats();
    let layout = gucs::layout();
    let reserved = generator.reserved_until();
    TableIterator::once((
        gucs::node_id().ok().map(|node| node as i32),
        layout.describe(),
        stats.issued as i64,
        generator.last_issued(&layout).map(timestamptz),
        generator.lead_ms(&layout, now),
        generator.borrowed_ms(&layout),
        stats.clock_regressions as i64,
        stats.exhausted_ms as i64,
        stats.overload_waits as i64,
        stats.reservations as i64,
        (reserved > i64::MIN).then(|| timestamptz(reserved)),
        timestamptz(layout.end_unix_ms()),
    ))
}

extension_sql!(
    r#"
COMMENT ON FUNCTION snowflake_nextval() IS
'Returns a new snowflake ID from this server''s generator: time-ordered, unique across every server with its own pg_snowflake.node_id.';
COMMENT ON FUNCTION snowflake_nextval_batch(integer) IS
'Returns n (1 to 100000000) new snowflake IDs, strictly increasing, taken from this server''s generator in as few lock acquisitions as the clock allows.';
COMMENT ON FUNCTION snowflake_stats() IS
'Shows this server''s generator: node, layout, IDs issued since start, last issued time, lead over the clock, clock regressions, exhausted milliseconds, overload waits, durable reservation, and when the time field runs out.';
"#,
    name = "generator_comments",
    requires = [snowflake_nextval, snowflake_nextval_batch, snowflake_stats],
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
    fn a_batch_is_increasing_and_above_every_earlier_id() {
        let before = bigint("SELECT snowflake_nextval()");
        assert!(boolean(&format!(
            "SELECT bool_and(id > {before}) AND count(*) = 50000 AND count(DISTINCT id) = 50000
             FROM snowflake_nextval_batch(50000) id"
        )));
        let batch_max = bigint("SELECT max(id) FROM snowflake_nextval_batch(10) id");
        assert!(bigint("SELECT snowflake_nextval()") > batch_max);
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
        assert_eq!(volatility("snowflake_nextval"), "vtruer");
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
        let uncommented = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc p
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                             AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_snowflake'
             WHERE p.pronamespace <> 'tests'::regnamespace
               AND obj_description(p.oid, 'pg_proc') IS NULL",
        );
        assert_eq!(uncommented, Ok(Some(0)));
        assert!(boolean(
            "SELECT count(*) > 0 FROM pg_proc WHERE proname = 'snowflake_nextval'
                 AND obj_description(oid, 'pg_proc') IS NOT NULL"
        ));
    }
}
