//! The core alone: what `Generator::allocate` costs per ID, with no Postgres, no lock and a fake
//! clock, so that the SQL figures of `bench/run` can be split into "core" and "everything around
//! it" (function call, LWLock, GUC reads).
//!
//!     cargo bench -p snowflake-core --bench core [-- --smoke] [-- --tsv]
//!
//! A plain binary (`harness = false`), no criterion: each case runs a fixed number of IDs several
//! times and prints the median ns per ID. `--tsv` prints the rows `bench/run` collects.

use snowflake_core::clock::{Clock, Clocks, SystemClock};
use snowflake_core::error::Error;
use snowflake_core::generator::{Allocation, Generator, Limits};
use snowflake_core::layout::{Parts, DEFAULT_LAYOUT};
use std::hint::black_box;
use std::time::Instant;

/// 2025-01-01 00:00:00 UTC: any time inside the default layout's range.
const START_MS: i64 = 1_735_689_600_000;
const LIMITS: Limits = Limits {
    max_borrow_ms: 1_000,
    reservation_ms: 1_000,
    sequence_spread: 0,
    ceiling: i64::MAX,
};
const NODE: u32 = 1;

/// One ID per call, as `snowflake_nextval()` asks: the fake clock moves one millisecond every
/// 4096 IDs, so the generator never borrows and renews its (no-op) reservation every 500 ms.
fn single(ids: u64) -> u64 {
    let mut generator = Generator::new();
    let mut sum = 0u64;
    for i in 0..ids {
        let mut now = black_box(Clocks::at(START_MS + (i >> 12) as i64));
        match renewing(&mut generator, |g| {
            g.allocate(&DEFAULT_LAYOUT, NODE, &mut now, &LIMITS, 1)
        }) {
            Ok(Allocation::Run { run, .. }) => {
                let id = DEFAULT_LAYOUT.pack(Parts {
                    time: run.time as u64,
                    node: NODE,
                    seq: run.seq,
                });
                sum = sum.wrapping_add(id as u64);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    sum
}

/// One allocation, with a renewer that writes at once (a no-op): the renewals cost only their
/// bookkeeping, about one per 500 ms of issued time.
fn renewing(
    generator: &mut Generator,
    mut allocate: impl FnMut(&mut Generator) -> Result<Allocation, Error>,
) -> Result<Allocation, Error> {
    loop {
        let allocation = allocate(generator)?;
        if let Some(until) = generator.start_renewal(true) {
            generator.renewal_done(until, 0);
        }
        if !matches!(allocation, Allocation::AwaitReservation { .. }) {
            return Ok(allocation);
        }
    }
}

/// Runs of `batch` IDs per call, each ID packed, as `snowflake_nextval_batch(n)` makes them.
fn batches(ids: u64, batch: u64) -> u64 {
    let mut generator = Generator::new();
    let mut sum = 0u64;
    let mut made = 0u64;
    while made < ids {
        let mut now = black_box(Clocks::at(START_MS + (made >> 12) as i64));
        match renewing(&mut generator, |g| {
            g.allocate(&DEFAULT_LAYOUT, NODE, &mut now, &LIMITS, batch)
        }) {
            Ok(Allocation::Run { run, .. }) => {
                for id in run.ids(DEFAULT_LAYOUT, NODE) {
                    sum = sum.wrapping_add(id as u64);
                }
                made += run.count;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    sum
}

/// The clock read the lock path makes per call on the normal path (`SystemClock::wall`, as
/// `shmem` has the generator call it).
fn clock_reads(calls: u64) -> u64 {
    let mut sum = 0u64;
    let mut clock = SystemClock;
    for _ in 0..calls {
        sum = sum.wrapping_add(black_box(clock.wall()) as u64);
    }
    sum
}

/// A case: its name in the TSV, what it times, and the function making `ids` IDs.
type Case = (&'static str, &'static str, fn(u64) -> u64);

/// Median ns per ID of `reps` runs of `ids` IDs each.
fn measure(reps: usize, ids: u64, f: impl Fn(u64) -> u64) -> f64 {
    let mut per_id: Vec<f64> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            black_box(f(black_box(ids)));
            started.elapsed().as_nanos() as f64 / ids as f64
        })
        .collect();
    per_id.sort_by(f64::total_cmp);
    per_id[per_id.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let tsv = args.iter().any(|a| a == "--tsv");
    let (reps, ids) = if smoke { (3, 200_000) } else { (7, 20_000_000) };

    let cases: [Case; 5] = [
        ("allocate_1", "allocate(want 1) + pack, per ID", single),
        ("allocate_1000", "allocate(want 1000) + pack, per ID", |n| {
            batches(n, 1_000)
        }),
        ("allocate_4096", "allocate(want 4096) + pack, per ID", |n| {
            batches(n, 4_096)
        }),
        (
            "allocate_1000000",
            "allocate(want 1000000) + pack, per ID",
            |n| batches(n, 1_000_000),
        ),
        (
            "clock_reads",
            "clock_gettime(REALTIME), per call (the normal path's one read)",
            clock_reads,
        ),
    ];
    for (name, what, f) in cases {
        let ns = measure(reps, ids, f);
        if tsv {
            println!("core_ns\t{name}\t-\t1\t{ns:.3}");
        } else {
            println!("{ns:>8.2} ns  {what}");
        }
    }
}
