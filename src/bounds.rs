//! Time → ID bounds: the SQL side of `Layout::first_id_at` / `Layout::last_id_at`, so that
//! "rows made yesterday" is a range scan on the primary key and day partitions of a
//! Snowflake-keyed table can be bounded by timestamps.

use crate::error::OrReport;
use crate::gucs;
use crate::timestamps::unix_ms;
use pgrx::prelude::*;

/// The smallest ID any node can issue at `ts` (node 0, sequence 0), with this server's layout.
///
/// IMMUTABLE: a timestamptz is an absolute instant and the layout is fixed for a data directory
/// (see decode.rs), so the planner may fold it into a constant and use it as an index or
/// partition-pruning bound.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_from_timestamp(ts: TimestampWithTimeZone) -> i64 {
    gucs::layout().first_id_at(unix_ms(ts)).or_report()
}

/// The largest ID any node can issue at `ts` (highest node and sequence), with this server's
/// layout.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_max_from_timestamp(ts: TimestampWithTimeZone) -> i64 {
    gucs::layout().last_id_at(unix_ms(ts)).or_report()
}

extension_sql!(
    r#"
COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz) IS
'Returns the smallest snowflake ID any node can issue at this instant: id >= snowflake_from_timestamp(t) selects the rows made from t on, as a range scan on the key.';
COMMENT ON FUNCTION snowflake_max_from_timestamp(timestamptz) IS
'Returns the largest snowflake ID any node can issue at this instant (to the millisecond): id <= snowflake_max_from_timestamp(t) selects the rows made up to t.';
"#,
    name = "bounds_comments",
    requires = [snowflake_from_timestamp, snowflake_max_from_timestamp],
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn boolean(sql: &str) -> bool {
        Spi::get_one::<bool>(sql).unwrap().unwrap()
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

    #[pg_test(error = "timestamp 2023-12-31 23:59:59.999 UTC is before the snowflake epoch")]
    fn a_timestamp_before_the_epoch_is_refused() {
        Spi::run("SELECT snowflake_from_timestamp('2023-12-31 23:59:59.9999+00')").unwrap();
    }
}
