//! The in-server tier: `#[pg_test]`s that run inside a backend of a server with the library
//! really preloaded (`pg_test::postgresql_conf_options` in lib.rs), for what needs a backend's
//! own view: the planner accepting the decoders in an index and a generated column, the
//! catalog's comments on every member, and the time bounds against the shared generator's
//! lead. Everything else a user sees is pinned by another tier, once: messages, volatility and
//! NULL handling by the golden files (`pgrx-tests/golden`), uniqueness and decoding of fresh IDs
//! by `pgrx-tests/tests/uniqueness.rs`, the arithmetic by the core's unit tests.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn boolean(sql: &str) -> bool {
        Spi::get_one::<bool>(sql).unwrap().unwrap()
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

    /// The upper bound allows for the generator's lead over the clock: the other #[pg_test]s
    /// share this server's generator, and one that takes a batch of 50,000 IDs borrows about
    /// 12 ms ahead of the clock, so an ID made right after it is "from the future". The ID's
    /// time is at most the last issued time, i.e. the clock plus `lead_ms`, read afterwards.
    #[pg_test]
    fn a_new_id_lies_between_the_bounds_of_the_time_around_it() {
        Spi::run(
            "CREATE TEMP TABLE made AS SELECT clock_timestamp() AS before, snowflake_nextval() AS id",
        )
        .unwrap();
        assert!(boolean(
            "SELECT snowflake_from_timestamp(before) <= id
                    AND id <= snowflake_max_from_timestamp(latest)
             FROM made,
                  (SELECT clock_timestamp() + lead_ms * interval '1 ms' AS latest
                   FROM snowflake_stats()) generator"
        ));
    }

    #[pg_test]
    fn bounds_round_trip_through_decode_to_the_millisecond() {
        assert!(boolean(
            "SELECT bool_and(snowflake_timestamp(snowflake_from_timestamp(t))
                                 = date_trunc('milliseconds', t)
                             AND snowflake_timestamp(snowflake_max_from_timestamp(t))
                                 = date_trunc('milliseconds', t))
             FROM generate_series(timestamptz '2024-01-01 00:00:00.0005+00',
                                  timestamptz '2093-01-01 00:00:00+00',
                                  interval '1234 days 5 hours 6 minutes 7.891234 seconds') t"
        ));
    }
}
