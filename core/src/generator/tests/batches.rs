//! Many IDs per call: a batch is what as many single calls would give, and a flood of them
//! never makes a single call wait.

use super::*;

#[test]
fn batch_sizes_outside_1_to_100_million_are_refused() {
    assert_eq!(batch_size(1), Ok(1));
    assert_eq!(batch_size(MAX_BATCH), Ok(100_000_000));
    for n in [0, -1, i32::MIN, MAX_BATCH + 1, i32::MAX] {
        assert_eq!(
            batch_size(n),
            Err(Error::BatchSizeOutOfRange { n, max: MAX_BATCH })
        );
    }
}

fn allocate(g: &mut Generator, now: i64, want: u64, limits: &Limits) -> Allocation {
    drive(g, &L, NODE, Clocks::at(now), limits, want, accept).unwrap()
}

fn run_ids(allocation: Allocation) -> Vec<i64> {
    match allocation {
        Allocation::Run { run, .. } => run.ids(L, NODE).collect(),
        wait => panic!("unexpected {wait:?}"),
    }
}

#[test]
fn a_batch_is_what_the_same_number_of_single_calls_would_give() {
    let mut batch = Generator::new();
    let mut single = Generator::new();
    id(&mut batch, T0);
    id(&mut single, T0);
    let ids = run_ids(allocate(&mut batch, T0, 10_000, &LIMITS));
    let singles: Vec<i64> = (0..10_000).map(|_| id(&mut single, T0)).collect();
    assert_eq!(ids, singles);
    assert_eq!(batch.stats(), single.stats());
    assert!(strictly_increasing(&ids));
    // 10,001 IDs in millisecond T0 and the two borrowed after it.
    assert_eq!(batch.stats().exhausted_ms, 2);
    assert_eq!(unix_ms(*ids.last().unwrap()), T0 + 2);
}

#[test]
fn a_huge_batch_stops_at_half_the_borrowing_limit_then_waits_while_singles_still_get_ids() {
    let mut g = Generator::new();
    let ids = run_ids(allocate(&mut g, T0, 10_000_000, &LIMITS));
    // Millisecond T0 and 500 borrowed ones: a batch borrows up to half of max_borrow_ms.
    assert_eq!(ids.len(), 501 * 4096);
    assert_eq!(unix_ms(*ids.last().unwrap()), T0 + 500);
    assert_eq!(
        allocate(&mut g, T0, 10, &LIMITS),
        Allocation::Wait { ms: 1 }
    );
    // A single call still finds room above the batch, at once.
    assert_eq!(unix_ms(id(&mut g, T0)), T0 + 501);
    // As the clock moves on, room comes back a millisecond at a time.
    assert_eq!(
        run_ids(allocate(&mut g, T0 + 5, 1_000_000, &LIMITS)).len(),
        4 * 4096 + 4095
    );
}

#[test]
fn a_batch_never_goes_past_the_durable_reservation_nor_into_its_last_quarter() {
    let mut g = Generator::new();
    let mut reserved = vec![];
    let result: Result<_, Error> = drive(
        &mut g,
        &L,
        NODE,
        Clocks::at(T0),
        &Limits {
            max_borrow_ms: 10_000,
            ..LIMITS
        },
        10_000_000,
        |until| {
            reserved.push(until);
            Ok(())
        },
    );
    let ids = run_ids(result.unwrap());
    // The reservation made for the batch reaches 1 s past its first ID; the batch stops a
    // quarter of that before its end, whatever it may borrow.
    assert_eq!(reserved[0], T0 + 1_000);
    assert_eq!(unix_ms(*ids.last().unwrap()), T0 + 749);
    assert_eq!(ids.len(), 750 * 4096);
}

#[test]
fn a_batch_stops_at_the_end_of_the_time_field() {
    let mut g = Generator::new();
    let ids = run_ids(allocate(&mut g, L.end_unix_ms(), 10_000, &LIMITS));
    assert_eq!(ids.len(), 4096);
    let last = L.compose(Parts {
        time: L.max_time(),
        node: NODE,
        seq: L.max_seq(),
    });
    assert_eq!(ids.last().copied(), last.ok());
    assert_eq!(
        drive(
            &mut g,
            &L,
            NODE,
            Clocks::at(L.end_unix_ms()),
            &LIMITS,
            1,
            accept
        ),
        Err(Error::TimeExhausted {
            end_unix_ms: L.end_unix_ms()
        })
    );
}

#[test]
fn a_flood_of_huge_batches_never_makes_a_single_call_wait() {
    // Two sessions asking for 100 million IDs at a time and a third asking for one, each once
    // per millisecond, with a renewer taking 50 ms per write.
    let mut g = Generator::new();
    let mut renewer = SlowRenewer::new(50);
    // Reserve once before the flood starts, as a server does for its first ID.
    let mut warm_up = Clocks::at(T0 - 100);
    assert!(matches!(
        g.allocate(&L, NODE, &mut warm_up, &LIMITS, 1).unwrap(),
        Allocation::AwaitReservation { .. }
    ));
    for ms in -100..0 {
        renewer.step(&mut g, T0 + ms);
    }
    let (mut singles, mut batch_ids, mut previous) = (0u64, 0u64, -1);
    for ms in 0..10_000 {
        renewer.step(&mut g, T0 + ms);
        for want in [100_000_000, 100_000_000, 1] {
            let allocation = g
                .allocate(&L, NODE, &mut Clocks::at(T0 + ms), &LIMITS, want)
                .unwrap();
            match allocation {
                Allocation::Run { run, .. } => {
                    let last = last_of(run);
                    assert!(run.ids(L, NODE).next().unwrap() > previous);
                    assert!(unix_ms(last) < g.reserved_until());
                    previous = last;
                    if want == 1 {
                        singles += 1;
                    } else {
                        batch_ids += run.count;
                    }
                }
                other => assert!(want > 1, "a single call at {ms} ms got {other:?}"),
            }
        }
    }
    assert_eq!(singles, 10_000);
    // The batches still take (nearly) everything the clock makes: 4096 IDs per millisecond.
    assert!(batch_ids >= 10_000 * 4096 * 95 / 100, "{batch_ids}");
}
