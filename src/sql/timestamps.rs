//! Conversions between Unix milliseconds, which the core counts in, and Postgres' timestamptz.

use pgrx::prelude::*;

/// Unix time (ms) of Postgres' epoch, from Postgres' own Julian day numbers.
const POSTGRES_EPOCH_UNIX_MS: i64 = (pg_sys::POSTGRES_EPOCH_JDATE as i64
    - pg_sys::UNIX_EPOCH_JDATE as i64)
    * pg_sys::SECS_PER_DAY as i64
    * 1000;

/// A Unix time (ms) as a timestamptz. Layouts end by year 9999 at the latest, far inside
/// timestamptz's range (4713 BC to 294276 AD), so every time the core produces fits.
pub fn timestamptz(unix_ms: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from((unix_ms - POSTGRES_EPOCH_UNIX_MS) * 1000)
        .unwrap_or_else(|_| unreachable!("every layout's times fit timestamptz"))
}

/// A Unix time (ms) from outside (a registry's row, which anyone may have written) as a
/// timestamptz, or `None` when it is none: out of timestamptz's range, or `i64::MIN` (what a
/// holder that has reserved nothing reports).
pub fn timestamptz_checked(unix_ms: i64) -> Option<TimestampWithTimeZone> {
    let micros = unix_ms
        .checked_sub(POSTGRES_EPOCH_UNIX_MS)?
        .checked_mul(1000)?;
    TimestampWithTimeZone::try_from(micros)
        .ok()
        .filter(|ts| !ts.is_infinity() && !ts.is_neg_infinity())
}

/// The Unix millisecond that holds `ts` (rounded down); `infinity` and `-infinity` become the
/// `i64` extremes, which every layout refuses and every message names as infinities.
pub fn unix_ms(ts: TimestampWithTimeZone) -> i64 {
    if ts.is_infinity() {
        i64::MAX
    } else if ts.is_neg_infinity() {
        i64::MIN
    } else {
        pg_sys::TimestampTz::from(ts).div_euclid(1000) + POSTGRES_EPOCH_UNIX_MS
    }
}
