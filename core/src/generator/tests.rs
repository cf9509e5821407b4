use super::*;
use crate::clock::{Clock, Clocks};
use crate::layout::{DEFAULT_EPOCH_UNIX_MS, DEFAULT_LAYOUT};
use proptest::prelude::*;

/// One ID at a time, as `snowflake_nextval()` asks for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    Id {
        id: i64,
        clock_stepped_back_ms: Option<i64>,
    },
    Wait {
        ms: i64,
    },
}

/// One call as the server makes it, with a renewer that writes at once: a call that is told to
/// await a reservation has it written by `reserve` (as the renewer would) and calls again; a
/// renewal due after a run is written right after it. Returns a run or an overload wait, or the
/// write's error when the renewal the call waited for failed.
fn drive(
    g: &mut Generator,
    layout: &Layout,
    node: u32,
    now: Clocks,
    limits: &Limits,
    want: u64,
    mut reserve: impl FnMut(i64) -> Result<(), Error>,
) -> Result<Allocation, Error> {
    let mut now = now;
    loop {
        let allocation = g.allocate(layout, node, &mut now, limits, want)?;
        match allocation {
            Allocation::AwaitReservation { .. } => {
                let until = g.claim_renewal(true).expect("a renewal is due");
                if let Err(e) = reserve(until) {
                    g.renewal_failed();
                    return Err(e);
                }
                g.renewal_done(until, 0);
            }
            Allocation::Run {
                wake_renewer: true, ..
            } => {
                if let Some(until) = g.claim_renewal(true) {
                    match reserve(until) {
                        Ok(()) => g.renewal_done(until, 0),
                        Err(_) => g.renewal_failed(),
                    }
                }
                return Ok(allocation);
            }
            _ => return Ok(allocation),
        }
    }
}

fn next(
    g: &mut Generator,
    layout: &Layout,
    node: u32,
    now: Clocks,
    limits: &Limits,
    reserve: impl FnMut(i64) -> Result<(), Error>,
) -> Result<Next, Error> {
    Ok(match drive(g, layout, node, now, limits, 1, reserve)? {
        Allocation::Run {
            run, clock_event, ..
        } => Next::Id {
            id: run.ids(*layout, node).next().unwrap(),
            clock_stepped_back_ms: match clock_event {
                Some(ClockEvent::SteppedBack { ms }) => Some(ms),
                _ => None,
            },
        },
        Allocation::Wait { ms } => Next::Wait { ms },
        Allocation::AwaitReservation { .. } => unreachable!("drive writes reservations"),
    })
}

const L: Layout = DEFAULT_LAYOUT;
const NODE: u32 = 7;
/// Some ordinary moment well after the epoch.
const T0: i64 = DEFAULT_EPOCH_UNIX_MS + 1_000_000_000;
const LIMITS: Limits = Limits {
    max_borrow_ms: 1_000,
    reservation_ms: 1_000,
    sequence_spread: 0,
};
const HOUR: i64 = 3_600_000;

fn parts(id: i64) -> Parts {
    L.decompose(id).unwrap()
}

fn strictly_increasing(ids: &[i64]) -> bool {
    ids.windows(2).all(|w| w[0] < w[1])
}

fn unix_ms(id: i64) -> i64 {
    L.unix_ms(parts(id).time)
}

/// Reservations accepted without being recorded anywhere.
fn accept(_: i64) -> Result<(), Error> {
    Ok(())
}

/// Wall and monotonic clock reading the same: time only moves forwards.
impl From<i64> for Clocks {
    fn from(ms: i64) -> Self {
        Clocks::at(ms)
    }
}

/// Calls `next` once; panics unless it gives an ID.
fn id(g: &mut Generator, now: impl Into<Clocks>) -> i64 {
    match next(g, &L, NODE, now.into(), &LIMITS, accept).unwrap() {
        Next::Id { id, .. } => id,
        wait => panic!("unexpected {wait:?}"),
    }
}

#[test]
fn first_id_carries_the_clock_node_and_sequence_zero() {
    let mut g = Generator::new();
    let id = id(&mut g, T0);
    assert_eq!(
        parts(id),
        Parts {
            time: (T0 - DEFAULT_EPOCH_UNIX_MS) as u64,
            node: NODE,
            seq: 0
        }
    );
}

#[test]
fn ids_increase_within_a_millisecond_and_across_milliseconds() {
    let mut g = Generator::new();
    let a = id(&mut g, T0);
    let b = id(&mut g, T0);
    let c = id(&mut g, T0 + 1);
    assert!(a < b && b < c);
    assert_eq!(parts(b).seq, 1);
    assert_eq!(parts(c).seq, 0);
    assert_eq!(parts(c).time, parts(a).time + 1);
}

#[test]
fn the_4097th_id_in_one_millisecond_borrows_the_next_millisecond() {
    let mut g = Generator::new();
    let ids: Vec<i64> = (0..4097).map(|_| id(&mut g, T0)).collect();
    let last = parts(ids[4095]);
    assert_eq!(last.seq, 4095);
    let borrowed = parts(ids[4096]);
    assert_eq!(borrowed.time, last.time + 1);
    assert_eq!(borrowed.seq, 0);
    assert_eq!(g.stats().exhausted_ms, 1);
    assert_eq!(g.lead_ms(&L, T0), 1);
    assert_eq!(g.borrowed_ms(&L), 1);
    // When the wall clock reaches the borrowed millisecond, the sequence continues there.
    let next = parts(id(&mut g, T0 + 1));
    assert_eq!((next.time, next.seq), (borrowed.time, 1));
}

#[test]
fn clock_going_back_gives_no_duplicate_no_error_and_no_wait() {
    let mut g = Generator::new();
    let before = id(&mut g, T0);
    // An hour back, then the clock runs on for 10 s at 20,000 IDs per second.
    let mut after = vec![];
    for ms in 0..10_000 {
        for _ in 0..20 {
            let now = Clocks {
                wall: T0 - HOUR + ms,
                monotonic: T0 + ms,
            };
            after.push(id(&mut g, now));
        }
    }
    assert!(before < after[0]);
    assert!(after.windows(2).all(|w| w[0] < w[1]));
    // The IDs keep counting from before the step, at 9/10 of real time, not the wall clock.
    assert_eq!(unix_ms(after[0]), T0);
    assert_eq!(unix_ms(*after.last().unwrap()), T0 + 9_000);
    assert_eq!(g.stats().clock_regressions, 1);
    assert_eq!(g.stats().overload_waits, 0);
    assert_eq!(g.lead_ms(&L, T0 - HOUR + 9_999), HOUR - 999);
    // When the wall clock is put right (a step forward), IDs follow it again, with no lead.
    let put_right = Clocks {
        wall: T0 + 10_000,
        monotonic: T0 + 10_000,
    };
    assert_eq!(unix_ms(id(&mut g, put_right)), T0 + 10_000);
    assert_eq!(g.lead_ms(&L, T0 + 10_000), 0);
}

#[test]
fn a_lead_from_a_backward_step_shrinks_to_nothing_in_ten_times_its_length() {
    let mut g = Generator::new();
    id(&mut g, T0);
    // The wall clock steps back 1 s and then runs normally, one ID a millisecond.
    let mut leads = vec![];
    for ms in 1..=10_020 {
        let now = Clocks {
            wall: T0 - 1_000 + ms,
            monotonic: T0 + ms,
        };
        id(&mut g, now);
        if ms % 2_500 == 0 || ms == 10_020 {
            leads.push(g.lead_ms(&L, now.wall));
        }
    }
    // A tenth of the time passing comes off the lead: 1 s is gone after 10 s.
    assert_eq!(leads, vec![750, 500, 250, 0, 0]);
    // Rejoined: IDs follow the wall clock again.
    let now = Clocks {
        wall: T0 + 9_100,
        monotonic: T0 + 10_100,
    };
    assert_eq!(unix_ms(id(&mut g, now)), T0 + 9_100);
}

#[test]
fn after_a_restart_the_reservations_lead_shrinks_too() {
    let mut g = Generator::resume(T0 + 1_000);
    for ms in 0..=10_020 {
        id(&mut g, T0 + ms);
    }
    assert_eq!(g.lead_ms(&L, T0 + 10_020), 0);
}

#[test]
fn a_clock_regression_asks_for_a_warning_at_most_once_a_minute() {
    let mut g = Generator::new();
    let mut warnings = vec![];
    let mut now = Clocks::at(T0);
    for step in 0..300 {
        // Every second the clock runs 1 s forward, then the wall clock steps back 10 ms.
        if step % 2 == 0 {
            now.wall += 1_000;
            now.monotonic += 1_000;
        } else {
            now.wall -= 10;
        }
        if let Next::Id {
            clock_stepped_back_ms: Some(ms),
            ..
        } = next(&mut g, &L, NODE, now, &LIMITS, accept).unwrap()
        {
            warnings.push(ms);
        }
    }
    assert_eq!(g.stats().clock_regressions, 150);
    // 150 s of steady time: one warning at the first step back, then one per minute.
    assert_eq!(warnings, vec![10, 10, 10]);
}

#[test]
fn overload_borrows_up_to_the_limit_then_asks_to_wait() {
    let limits = Limits {
        max_borrow_ms: 2,
        reservation_ms: 1_000,
        sequence_spread: 0,
    };
    let mut g = Generator::new();
    let mut ids = 0;
    let wait = loop {
        match next(&mut g, &L, NODE, Clocks::from(T0), &limits, accept).unwrap() {
            Next::Id { .. } => ids += 1,
            Next::Wait { ms } => break ms,
        }
    };
    // Millisecond T0 plus two borrowed ones, then wait 1 ms for the clock.
    assert_eq!(ids, 3 * 4096);
    assert_eq!(wait, 1);
    assert_eq!(g.borrowed_ms(&L), 2);
    assert_eq!(g.stats().overload_waits, 1);
    // A millisecond later there is room again.
    assert!(matches!(
        next(&mut g, &L, NODE, Clocks::from(T0 + 1), &limits, accept).unwrap(),
        Next::Id { .. }
    ));
}

#[test]
fn without_borrowing_a_full_millisecond_waits_for_the_next() {
    let limits = Limits {
        max_borrow_ms: 0,
        reservation_ms: 1_000,
        sequence_spread: 0,
    };
    let mut g = Generator::new();
    for _ in 0..4096 {
        next(&mut g, &L, NODE, Clocks::from(T0), &limits, accept).unwrap();
    }
    assert_eq!(
        next(&mut g, &L, NODE, Clocks::from(T0), &limits, accept).unwrap(),
        Next::Wait { ms: 1 }
    );
    let Next::Id { id, .. } =
        next(&mut g, &L, NODE, Clocks::from(T0 + 1), &limits, accept).unwrap()
    else {
        panic!("expected an ID");
    };
    assert_eq!(unix_ms(id), T0 + 1);
}

#[test]
fn reservations_are_written_ahead_of_use_and_amortised() {
    let mut g = Generator::new();
    let mut written = vec![];
    for ms in 0..5_000 {
        for _ in 0..3 {
            let durable_before = g.reserved_until();
            let result = next(&mut g, &L, NODE, Clocks::from(T0 + ms), &LIMITS, |until| {
                written.push(until);
                Ok(())
            });
            let Ok(Next::Id { id, .. }) = result else {
                panic!("{result:?}")
            };
            // Every issued ID lies under the latest durable reservation, and after the very
            // first call under the one that was durable before the call: the renewal came
            // ahead of need, so no call waited for it.
            assert!(unix_ms(id) < g.reserved_until());
            if ms > 0 {
                assert!(unix_ms(id) < durable_before, "call at {ms} ms waited");
            }
        }
    }
    // 15,000 IDs over 5 s with 1 s reservations renewed when half is left: the first on
    // demand, then one every 501 ms of issued time, each reaching 1 s past the ID that asked.
    let expected: Vec<i64> = (0..10).map(|i| T0 + 1_000 + i * 501).collect();
    assert_eq!(written, expected);
    assert_eq!(g.stats().reservations, 10);
    assert_eq!(g.stats().reservation_waits, 1);
}

#[test]
fn a_failed_reservation_issues_nothing_and_moves_nothing() {
    let mut g = Generator::new();
    let first = id(&mut g, T0);
    let failure = Error::TimeExhausted { end_unix_ms: 0 };
    let result = next(&mut g, &L, NODE, Clocks::from(T0 + 1_000), &LIMITS, |_| {
        Err(failure.clone())
    });
    assert_eq!(result, Err(failure));
    assert_eq!(g.stats().issued, 1);
    assert_eq!(g.last_issued(&L), Some(unix_ms(first)));
    assert_eq!(g.reserved_until(), T0 + 1_000);
    // The next successful call writes the reservation and issues.
    let second = id(&mut g, T0 + 1_000);
    assert!(second > first);
    assert_eq!(g.reserved_until(), T0 + 2_000);
}

#[test]
fn after_a_restart_with_the_clock_set_back_ids_continue_above_the_reservation() {
    let mut before = Generator::new();
    let mut reserved = 0;
    let mut last_before = 0;
    for ms in 0..2_500 {
        let result = next(
            &mut before,
            &L,
            NODE,
            Clocks::from(T0 + ms),
            &LIMITS,
            |until| {
                reserved = until;
                Ok(())
            },
        );
        if let Ok(Next::Id { id, .. }) = result {
            last_before = id;
        }
    }
    // The server restarts with its clock 10 minutes behind.
    let mut after = Generator::resume(reserved);
    let mut previous = last_before;
    for ms in 0..20_000 {
        for _ in 0..2 {
            let id = id(&mut after, T0 - 600_000 + ms);
            assert!(id > previous);
            previous = id;
        }
    }
    assert!(unix_ms(previous) >= reserved);
    // No wait and no regression: the steady clock starts at the floor.
    assert_eq!(after.stats().overload_waits, 0);
    assert_eq!(after.stats().clock_regressions, 0);
}

#[test]
fn a_standby_replaying_reservations_continues_above_them_when_promoted() {
    let mut standby = Generator::new();
    assert!(standby.observe_reservation(T0 + 1_000));
    assert!(standby.observe_reservation(T0 + 2_000));
    assert!(!standby.observe_reservation(T0 + 1_500));
    let first = id(&mut standby, T0 - HOUR);
    assert_eq!(unix_ms(first), T0 + 2_000);
}

#[test]
fn clock_before_the_epoch_is_an_error_on_a_fresh_generator() {
    let mut g = Generator::new();
    let now = DEFAULT_EPOCH_UNIX_MS - 1;
    assert_eq!(
        next(&mut g, &L, NODE, Clocks::from(now), &LIMITS, accept),
        Err(Error::ClockBeforeEpoch { now_unix_ms: now })
    );
    assert_eq!(g.stats().issued, 0);
}

#[test]
fn clock_before_the_epoch_after_issuing_is_just_a_regression() {
    let mut g = Generator::new();
    let a = id(&mut g, T0);
    let b = id(&mut g, 0);
    assert!(a < b);
}

#[test]
fn time_field_running_out_is_an_error_never_a_wrap_or_negative() {
    let mut g = Generator::new();
    let end = L.end_unix_ms();
    let mut last = 0;
    for _ in 0..=L.max_seq() {
        last = id(&mut g, end);
        assert!(last > 0);
    }
    let before = g;
    let exhausted = Err(Error::TimeExhausted { end_unix_ms: end });
    assert_eq!(
        next(&mut g, &L, NODE, Clocks::from(end), &LIMITS, accept),
        exhausted
    );
    assert_eq!(
        next(&mut g, &L, NODE, Clocks::from(end + 1), &LIMITS, accept),
        exhausted
    );
    // A refused call does not move the generator.
    assert_eq!(g.last, before.last);
    assert_eq!(g.stats().issued, before.stats().issued);
    assert_eq!(parts(last).time, L.max_time());
    // The last reservation stops at the end of the field.
    assert_eq!(g.reserved_until(), end + 1);
}

#[test]
fn node_out_of_range_is_refused() {
    let mut g = Generator::new();
    assert_eq!(
        next(&mut g, &L, 1024, Clocks::from(T0), &LIMITS, accept),
        Err(Error::NodeOutOfRange {
            node: 1024,
            max: 1023
        })
    );
    assert_eq!(g.stats().issued, 0);
}

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

fn first_id(allocation: Allocation, layout: Layout, node: u32) -> Option<i64> {
    match allocation {
        Allocation::Run { run, .. } => run.ids(layout, node).next(),
        Allocation::Wait { .. } | Allocation::AwaitReservation { .. } => None,
    }
}

#[test]
fn other_layouts_generate_decode_and_order() {
    let layouts = [
        Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1000, 22, 9).unwrap(),
        Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1, 8, 16).unwrap(),
        Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 10, 16, 8).unwrap(),
    ];
    for layout in layouts {
        let node = layout.max_node();
        let borrow_ticks = LIMITS.max_borrow_ms / layout.unit_ms;
        let (mut g, mut now, mut previous, mut made, mut waits) =
            (Generator::new(), T0, -1i64, 0, 0);
        for step in 0..3_000 {
            now += 3;
            for _ in 0..step % 7 + 1 {
                let allocation =
                    drive(&mut g, &layout, node, Clocks::at(now), &LIMITS, 1, accept).unwrap();
                let Some(id) = first_id(allocation, layout, node) else {
                    waits += 1;
                    continue;
                };
                assert!(id > previous, "{layout:?}");
                let parts = layout.decompose(id).unwrap();
                assert_eq!(parts.node, node);
                let tick = parts.time as i64;
                assert!(tick >= layout.tick_at(now) && tick <= layout.tick_at(now) + borrow_ticks);
                previous = id;
                made += 1;
            }
        }
        assert!(made > 5_000, "{layout:?}: {made}");
        // 512 IDs a second is less than the ~1,300 asked for: that layout waits.
        assert_eq!(
            waits > 0,
            layout.unit_ms == 1000,
            "{layout:?}: {waits} waits"
        );
    }
}

#[test]
fn sequence_spread_makes_low_rate_ids_cover_the_low_bits_evenly() {
    let spread = Limits {
        sequence_spread: 16,
        ..LIMITS
    };
    for (limits, expected) in [
        (spread, [625; 16]),
        (LIMITS, {
            let mut all_in_one = [0; 16];
            all_in_one[(NODE as usize * 4096) % 16] = 10_000;
            all_in_one
        }),
    ] {
        let mut g = Generator::new();
        let mut buckets = [0; 16];
        for ms in 0..10_000 {
            let allocation =
                drive(&mut g, &L, NODE, Clocks::at(T0 + ms), &limits, 1, accept).unwrap();
            let id = first_id(allocation, L, NODE).unwrap();
            buckets[(id % 16) as usize] += 1;
        }
        assert_eq!(buckets, expected);
    }
}

#[test]
fn sequence_spread_costs_at_most_its_offset_of_a_ticks_capacity() {
    let limits = Limits {
        sequence_spread: 16,
        ..LIMITS
    };
    let mut g = Generator::new();
    id(&mut g, T0 - 1); // the next fresh tick starts at offset 1
    let allocation = drive(&mut g, &L, NODE, Clocks::at(T0), &limits, 10_000, accept).unwrap();
    let Allocation::Run { run, .. } = allocation else {
        panic!("{allocation:?}")
    };
    assert_eq!(run.seq, 1);
    let ids: Vec<i64> = run.ids(L, NODE).collect();
    // Tick T0 holds 4095 of them; the rest borrow T0 + 1 from sequence 0.
    assert_eq!(parts(ids[4094]).time, parts(ids[0]).time);
    assert_eq!(parts(ids[4095]).time, parts(ids[0]).time + 1);
    assert_eq!(parts(ids[4095]).seq, 0);
}

/// The last ID of a run, without making the others.
fn last_of(run: Run) -> i64 {
    let end = u64::from(run.seq) + run.count - 1;
    L.pack(Parts {
        time: run.time as u64 + end / 4096,
        node: NODE,
        seq: (end % 4096) as u32,
    })
}

/// A clock that counts how often the generator reads its monotonic side.
struct CountingClock {
    now: Clocks,
    monotonic_reads: u32,
}

impl Clock for CountingClock {
    fn wall(&mut self) -> i64 {
        self.now.wall
    }
    fn monotonic(&mut self) -> i64 {
        self.monotonic_reads += 1;
        self.now.monotonic
    }
}

#[test]
fn the_normal_path_reads_one_clock_and_the_monotonic_one_only_while_behind() {
    let mut g = Generator::new();
    let mut clock = CountingClock {
        now: Clocks::at(T0),
        monotonic_reads: 0,
    };
    // One call, with a renewer that writes at once.
    let call = |g: &mut Generator, clock: &mut CountingClock| loop {
        let allocation = g.allocate(&L, NODE, clock, &LIMITS, 1).unwrap();
        if let Some(until) = g.claim_renewal(true) {
            g.renewal_done(until, 0);
        }
        match allocation {
            Allocation::Run { .. } => break,
            Allocation::AwaitReservation { .. } => continue,
            wait => panic!("{wait:?}"),
        }
    };
    // The first reading anchors the wall clock to the monotonic one; after it, none.
    for ms in 0..10_000 {
        clock.now = Clocks::at(T0 + ms / 3);
        call(&mut g, &mut clock);
    }
    assert_eq!(clock.monotonic_reads, 1);
    clock.monotonic_reads = 0;
    // The wall clock steps back 1 s: every call reads the monotonic clock until the wall clock
    // is ahead of the generator again, and the first call after that once more.
    for ms in 0..100 {
        clock.now = Clocks {
            wall: T0 + 3_333 - 1_000 + ms,
            monotonic: T0 + 3_333 + ms,
        };
        call(&mut g, &mut clock);
    }
    assert_eq!(clock.monotonic_reads, 100);
    clock.now = Clocks::at(T0 + 10_000);
    for _ in 0..10 {
        call(&mut g, &mut clock);
    }
    assert_eq!(clock.monotonic_reads, 101);
}

/// A renewer that takes `latency_ms` per write, run beside the callers as the server's renewer
/// runs beside its backends: woken by a call, it claims the renewal and reports it done
/// `latency_ms` later (in the callers' time).
struct SlowRenewer {
    latency_ms: i64,
    in_flight: Option<(i64, i64)>,
    written: Vec<i64>,
}

impl SlowRenewer {
    fn new(latency_ms: i64) -> Self {
        SlowRenewer {
            latency_ms,
            in_flight: None,
            written: vec![],
        }
    }

    /// Lets the renewer act at time `now`: finish a write that is due, start the next one.
    fn step(&mut self, g: &mut Generator, now: i64) {
        if let Some((until, done_at)) = self.in_flight {
            if now < done_at {
                return;
            }
            self.written.push(until);
            g.renewal_done(until, self.latency_ms);
            self.in_flight = None;
        }
        if let Some(until) = g.claim_renewal(true) {
            self.in_flight = Some((until, now + self.latency_ms));
        }
    }
}

/// Five single calls a millisecond for 20 s, beside `renewer`: checks that every ID is above the
/// one before and under the durable reservation, calls `each_ms` after every millisecond with
/// the last ID, and returns the millisecond of every call that had to wait.
fn five_calls_a_ms_for_20_s(
    g: &mut Generator,
    renewer: &mut SlowRenewer,
    mut each_ms: impl FnMut(&Generator, i64),
) -> Vec<i64> {
    let (mut previous, mut waits) = (-1, vec![]);
    for ms in 0..20_000 {
        renewer.step(g, T0 + ms);
        for _ in 0..5 {
            match g
                .allocate(&L, NODE, &mut Clocks::at(T0 + ms), &LIMITS, 1)
                .unwrap()
            {
                Allocation::Run { run, .. } => {
                    let id = run.ids(L, NODE).next().unwrap();
                    assert!(id > previous && unix_ms(id) < g.reserved_until());
                    previous = id;
                }
                _ => waits.push(ms),
            }
        }
        each_ms(g, previous);
    }
    waits
}

#[test]
fn a_renewer_slower_than_a_quarter_of_the_reservation_never_makes_a_call_wait() {
    // 300 ms per write against 1 s reservations renewed at half: always done in time.
    let mut g = Generator::new();
    let mut renewer = SlowRenewer::new(300);
    let waits = five_calls_a_ms_for_20_s(&mut g, &mut renewer, |_, _| {});
    // Only the very first calls, with nothing reserved yet, waited: for the 300 ms of the
    // first write, from the millisecond after the first call woke the renewer.
    assert_eq!(waits.len(), 301 * 5);
    assert_eq!(g.stats().reservation_waits, 301 * 5);
    assert_eq!(g.stats().issued, (20_000 - 301) * 5);
    assert!(renewer.written.len() >= 35, "{}", renewer.written.len());
}

#[test]
fn a_renewer_slower_than_half_the_reservation_gets_longer_reservations_and_calls_stop_waiting() {
    // 700 ms per write against 1 s reservations renewed at half: with reservations of a fixed
    // length, every renewal would end 200 ms after the issued time caught up with the last one.
    let mut g = Generator::new();
    let mut renewer = SlowRenewer::new(700);
    let waits = five_calls_a_ms_for_20_s(&mut g, &mut renewer, |g, last| {
        // Never more than ten times the setting ahead of the issued time.
        if last >= 0 {
            assert!(g.reserved_until() - unix_ms(last) <= 10 * 1_000);
        }
    });
    let last_wait = waits.last().copied();
    // Calls waited while the first three writes were made: the first from nothing, the next two
    // asked for before the first reported how slow the disk is. Never again after those.
    let last_wait = last_wait.expect("the first calls wait for the first reservation");
    assert!(
        (1_000..2_200).contains(&last_wait),
        "last wait at {last_wait} ms"
    );
    assert_eq!(g.effective_reservation_ms(&LIMITS), 4 * 700);
    // One write at a time, each taking 700 ms: at most back to back.
    assert!(
        (10..=29).contains(&renewer.written.len()),
        "{}",
        renewer.written.len()
    );
}

#[test]
fn reservations_reach_four_times_a_slow_renewal_up_to_ten_times_the_setting_and_shrink_back() {
    let mut g = Generator::new();
    assert_eq!(g.effective_reservation_ms(&LIMITS), 1_000);
    let mut tick = L.tick_at(T0);
    let mut renew = |took_ms| {
        tick += 1_000;
        g.reservation.want(&L, tick);
        let until = g.claim_renewal(true).expect("a renewal is due");
        g.renewal_done(until, took_ms);
        g.effective_reservation_ms(&LIMITS)
    };
    // Up to a quarter of the setting: the setting.
    assert_eq!(renew(250), 1_000);
    assert_eq!(renew(251), 1_004);
    assert_eq!(renew(700), 2_800);
    assert_eq!(renew(2_499), 9_996);
    assert_eq!(renew(2_501), 10_000);
    assert_eq!(renew(3_600_000), 10_000);
    // A fast renewal brings it back at once.
    assert_eq!(renew(3), 1_000);
    // A zero or unset setting still reserves something.
    let tiny = Limits {
        reservation_ms: 0,
        ..LIMITS
    };
    assert_eq!(renew(0), 1_000);
    assert_eq!(g.effective_reservation_ms(&tiny), 1);
}

#[test]
fn between_calls_the_reservation_is_kept_ahead_of_the_clock_for_a_minute() {
    let mut g = Generator::new();
    // Nothing to keep before the first call, on a server that started long ago.
    assert!(!g.keep_ahead(&L, &LIMITS, T0, T0 - KEEP_AHEAD_MS - 1));
    let mut renewer = SlowRenewer::new(10);
    // One call at T0, then none: the renewer, turning every 100 ms, keeps the reservation
    // ahead of the clock.
    let first = id(&mut g, T0);
    for ms in (100..30_000).step_by(100) {
        g.keep_ahead(&L, &LIMITS, T0 + ms, i64::MIN);
        renewer.step(&mut g, T0 + ms);
        renewer.step(&mut g, T0 + ms + 10);
        assert!(
            g.reserved_until() > T0 + ms + 10,
            "behind the clock at {ms} ms"
        );
    }
    // A call after 30 s of silence is covered at once: it does not wait for a write.
    let before = g.stats().reservation_waits;
    match g
        .allocate(&L, NODE, &mut Clocks::at(T0 + 30_000), &LIMITS, 1)
        .unwrap()
    {
        Allocation::Run { run, .. } => assert!(run.ids(L, NODE).next().unwrap() > first),
        other => panic!("the call after the pause had to wait: {other:?}"),
    }
    assert_eq!(g.stats().reservation_waits, before);
    // (The renewal that call may have asked for is written.)
    renewer.step(&mut g, T0 + 30_000);
    renewer.step(&mut g, T0 + 30_010);
    // More than a minute after the last call, nothing more is asked for.
    let last = g.reserved_until();
    let quiet = T0 + 30_000 + KEEP_AHEAD_MS + 1;
    assert!(!g.keep_ahead(&L, &LIMITS, quiet, i64::MIN));
    assert_eq!(g.claim_renewal(true), None);
    assert_eq!(g.reserved_until(), last);
}

#[test]
fn a_server_that_just_started_has_a_reservation_before_its_first_call() {
    // Restarted with the last reservation as its floor, a minute ahead of the clock.
    let floor = T0 + 60_000;
    let mut g = Generator::resume(floor);
    let mut renewer = SlowRenewer::new(10);
    // The renewer started at T0: it asks for a reservation with no call to ask for it, above
    // the floor.
    assert!(g.keep_ahead(&L, &LIMITS, T0, T0));
    renewer.step(&mut g, T0);
    renewer.step(&mut g, T0 + 10);
    assert!(
        g.reserved_until() >= floor + 1_000,
        "{}",
        g.reserved_until() - floor
    );
    // So the first call, 100 ms later, is served at once, above the floor.
    match g
        .allocate(&L, NODE, &mut Clocks::at(T0 + 100), &LIMITS, 1)
        .unwrap()
    {
        Allocation::Run { run, .. } => assert!(unix_ms(run.ids(L, NODE).next().unwrap()) >= floor),
        other => panic!("the first call had to wait: {other:?}"),
    }
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

#[test]
fn a_failed_renewal_fails_the_calls_waiting_for_it_and_the_next_call_asks_again() {
    let mut g = Generator::new();
    let mut clock = Clocks::at(T0);
    let Allocation::AwaitReservation {
        wake_renewer: true,
        failures: 0,
    } = g.allocate(&L, NODE, &mut clock, &LIMITS, 1).unwrap()
    else {
        panic!("expected to await a reservation")
    };
    // A second caller arrives while it is due: the renewer has been woken already.
    assert_eq!(
        g.allocate(&L, NODE, &mut clock, &LIMITS, 1).unwrap(),
        Allocation::AwaitReservation {
            wake_renewer: false,
            failures: 0
        }
    );
    let until = g.claim_renewal(true).unwrap();
    assert_eq!(until, T0 + 1_000);
    assert_eq!(g.claim_renewal(true), None, "one renewer at a time");
    g.renewal_failed();
    assert_eq!(g.reserved_until(), i64::MIN);
    assert_eq!(g.stats().issued, 0);
    // The waiters see the failure count grown; the next call asks again.
    assert_eq!(
        g.allocate(&L, NODE, &mut clock, &LIMITS, 1).unwrap(),
        Allocation::AwaitReservation {
            wake_renewer: true,
            failures: 1
        }
    );
    let until = g.claim_renewal(true).unwrap();
    g.renewal_done(until, 0);
    assert!(matches!(
        g.allocate(&L, NODE, &mut clock, &LIMITS, 1).unwrap(),
        Allocation::Run { .. }
    ));
}

#[test]
fn an_abandoned_renewal_is_taken_up_by_the_next_renewer() {
    let mut g = Generator::new();
    g.allocate(&L, NODE, &mut Clocks::at(T0), &LIMITS, 1)
        .unwrap();
    let until = g.claim_renewal(true).unwrap();
    assert!(g.renewing());
    // The renewer exits before reporting; its successor releases the claim and takes it up.
    g.renewer_started();
    assert!(!g.renewing());
    assert_eq!(g.claim_renewal(true), Some(until));
}

#[test]
fn a_renewer_that_starts_leaves_a_backends_claim_to_that_backend() {
    let mut g = Generator::new();
    g.allocate(&L, NODE, &mut Clocks::at(T0), &LIMITS, 1)
        .unwrap();
    // No renewer runs: a backend claims the renewal and writes it. A renewer starts meanwhile.
    let until = g.claim_renewal(false).unwrap();
    g.renewer_started();
    assert!(g.renewing(), "the backend's claim was released under it");
    assert_eq!(
        g.claim_renewal(true),
        None,
        "a second writer at the same time"
    );
    g.renewal_done(until, 0);
    assert_eq!(g.reserved_until(), until);
}

/// One step of the model below: the clock moves, a caller asks for IDs, and the renewer may
/// act: claim a renewal, finish it, fail it, or the whole server crashes.
#[derive(Clone, Debug)]
enum Step {
    Call {
        jump: i64,
        want: u64,
    },
    Claim,
    /// The claimed renewal is reported done, as written in `took_ms`.
    Finish {
        took_ms: i64,
    },
    Fail,
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (-3_000i64..400, prop_oneof![Just(1u64), 1u64..5_000_000])
            .prop_map(|(jump, want)| Step::Call { jump, want }),
        2 => Just(Step::Claim),
        2 => prop_oneof![Just(0i64), 0i64..30_000].prop_map(|took_ms| Step::Finish { took_ms }),
        1 => Just(Step::Fail),
        1 => Just(Step::Crash),
    ]
}

proptest! {
    #[test]
    fn any_clock_readings_give_strictly_increasing_ids(
        steps in proptest::collection::vec((-5_000i64..5_000, 1usize..6_000), 1..40)
    ) {
        let mut g = Generator::new();
        let mut now = T0;
        let mut previous = -1i64;
        for (jump, calls) in steps {
            now += jump;
            for _ in 0..calls {
                match next(&mut g, &L, NODE, Clocks::from(now), &LIMITS, accept).unwrap() {
                    Next::Id { id, .. } => {
                        prop_assert!(id > previous);
                        prop_assert_eq!(parts(id).node, NODE);
                        previous = id;
                    }
                    // Overloaded: the clock moves on while the caller waits.
                    Next::Wait { ms } => now += ms,
                }
            }
        }
    }

    #[test]
    fn batches_and_single_calls_interleaved_stay_strictly_increasing(
        steps in proptest::collection::vec((-2_000i64..2_000, 1u64..20_000), 1..30)
    ) {
        let mut g = Generator::new();
        let mut now = T0;
        let mut previous = -1i64;
        for (jump, want) in steps {
            now += jump;
            let mut got = vec![];
            match drive(&mut g, &L, NODE, Clocks::at(now), &LIMITS, want, accept).unwrap() {
                Allocation::Run { run, .. } => {
                    prop_assert!(run.count >= 1 && run.count <= want);
                    got.extend(run.ids(L, NODE));
                }
                Allocation::Wait { ms } => now += ms,
                Allocation::AwaitReservation { .. } => unreachable!("drive writes reservations"),
            }
            got.push(id(&mut g, now));
            for id in got {
                prop_assert!(id > previous);
                previous = id;
            }
        }
    }

    #[test]
    fn restarts_at_any_clock_never_go_below_earlier_ids(
        runs in proptest::collection::vec((-HOUR..HOUR, 1usize..10_000), 1..8)
    ) {
        let mut reserved = i64::MIN;
        let mut previous = -1i64;
        for (clock_offset, calls) in runs {
            let mut g = Generator::resume(reserved);
            for i in 0..calls {
                let now = T0 + clock_offset + i as i64 / 4;
                let result = next(&mut g, &L, NODE, Clocks::from(now), &LIMITS, |until| {
                    reserved = until;
                    Ok(())
                });
                if let Ok(Next::Id { id, .. }) = result {
                    prop_assert!(id > previous);
                    previous = id;
                }
            }
        }
    }

    #[test]
    fn logical_clock_is_never_behind_the_highest_wall_clock_seen(
        readings in proptest::collection::vec(-100_000i64..100_000, 1..500)
    ) {
        let mut g = Generator::new();
        let mut latest_wall = i64::MIN;
        for offset in readings {
            let now = T0 + offset;
            latest_wall = latest_wall.max(now);
            let id = id(&mut g, now);
            prop_assert!(unix_ms(id) >= latest_wall);
        }
    }

    /// The renewal state machine under any interleaving of callers, renewer and crashes: no ID
    /// is ever issued at or above the durable reservation (in memory, nor on disk, where the
    /// renewer writes before it reports), a failed renewal never issues uncovered IDs, and IDs
    /// only ever increase, across crashes too.
    #[test]
    fn no_id_is_ever_issued_at_or_above_the_durable_reservation(
        steps in proptest::collection::vec(step(), 1..300)
    ) {
        let mut g = Generator::new();
        let (mut now, mut previous) = (T0, -1i64);
        let mut on_disk = i64::MIN;
        let mut claimed: Option<i64> = None;
        for step in steps {
            match step {
                Step::Call { jump, want } => {
                    now += jump;
                    let durable = g.reserved_until();
                    let allocation = g.allocate(&L, NODE, &mut Clocks::at(now), &LIMITS, want);
                    if let Allocation::Run { run, .. } = allocation.unwrap() {
                        let last = last_of(run);
                        prop_assert!(run.ids(L, NODE).next().unwrap() > previous);
                        prop_assert!(unix_ms(last) < durable);
                        prop_assert!(unix_ms(last) < on_disk);
                        previous = last;
                    }
                }
                Step::Claim => {
                    if claimed.is_none() {
                        claimed = g.claim_renewal(true);
                    }
                }
                Step::Finish { took_ms } => {
                    if let Some(until) = claimed.take() {
                        on_disk = on_disk.max(until);
                        g.renewal_done(until, took_ms);
                    }
                }
                Step::Fail => {
                    if claimed.take().is_some() {
                        g.renewal_failed();
                    }
                }
                Step::Crash => {
                    // A write may have reached the disk without being reported.
                    if let Some(until) = claimed.take() {
                        on_disk = on_disk.max(until);
                    }
                    g = Generator::resume(on_disk);
                }
            }
        }
    }
}

/// The first allocation's outcome at `now`, with a renewer that writes at once before it.
fn call_at(g: &mut Generator, now: Clocks) -> Result<Allocation, Error> {
    let mut clock = now;
    loop {
        match g.allocate(&L, NODE, &mut clock, &LIMITS, 1)? {
            Allocation::AwaitReservation { .. } => {
                let until = g.claim_renewal(true).expect("a renewal is due");
                g.renewal_done(until, 0);
            }
            other => {
                if let Some(until) = g.claim_renewal(true) {
                    g.renewal_done(until, 0);
                }
                return Ok(other);
            }
        }
    }
}

fn run_of(allocation: Allocation) -> (i64, Option<ClockEvent>) {
    match allocation {
        Allocation::Run {
            run, clock_event, ..
        } => (run.ids(L, NODE).next().unwrap(), clock_event),
        other => panic!("no ID: {other:?}"),
    }
}

const YEAR: i64 = 365 * 24 * HOUR;

#[test]
fn a_reading_past_the_time_field_changes_nothing_and_ids_resume_when_the_clock_is_right() {
    let mut g = Generator::new();
    let first = id(&mut g, T0);
    let before = (g.reserved_until(), g.stats());
    // 70 years ahead, the monotonic clock 1 ms on: past the end of the field (2093).
    let far = Clocks {
        wall: T0 + 70 * YEAR,
        monotonic: T0 + 1,
    };
    // Held, not followed: the ID is stamped at the monotonic clock's time.
    let (held, event) = run_of(call_at(&mut g, far).unwrap());
    assert!(
        held > first && unix_ms(held) < T0 + 1_000,
        "{}",
        unix_ms(held) - T0
    );
    assert!(matches!(event, Some(ClockEvent::JumpHeld { ms }) if ms > 69 * YEAR));
    // Still there after FORWARD_CONFIRM_MS: followed, and it fails for the field...
    let later = Clocks {
        wall: T0 + 70 * YEAR + FORWARD_CONFIRM_MS,
        monotonic: T0 + FORWARD_CONFIRM_MS + 1,
    };
    let stats = g.stats();
    let steady = g.clock.steady;
    assert!(matches!(
        call_at(&mut g, later),
        Err(Error::TimeExhausted { .. })
    ));
    // ...and that failed reading took nothing in: not the clock, not a reservation.
    assert_eq!(g.clock.steady, steady);
    assert_eq!(g.stats(), stats);
    assert!(g.reserved_until() <= before.0 + 2 * LIMITS.reservation_ms);
    // The renewer keeps ahead of the real clock only.
    g.keep_ahead(&L, &LIMITS, T0 + FORWARD_CONFIRM_MS + 2, i64::MIN);
    if let Some(until) = g.claim_renewal(true) {
        g.renewal_done(until, 0);
    }
    assert!(g.reserved_until() < T0 + KEEP_AHEAD_MS + 2 * LIMITS.reservation_ms);
    // The clock set right: IDs at once, at the right time.
    let (next, _) = run_of(call_at(&mut g, Clocks::at(T0 + FORWARD_CONFIRM_MS + 2)).unwrap());
    assert!(next > held);
    assert!((unix_ms(next) - (T0 + FORWARD_CONFIRM_MS + 2)).abs() < 1_000);
    assert_eq!(g.stats().clock_jumps, 1);
}

#[test]
fn a_glitch_ten_years_ahead_for_one_call_leaves_no_trace_in_the_ids_or_the_reservation() {
    let mut g = Generator::new();
    let first = id(&mut g, T0);
    let glitch = Clocks {
        wall: T0 + 10 * YEAR,
        monotonic: T0 + 5,
    };
    let (during, event) = run_of(call_at(&mut g, glitch).unwrap());
    assert!(matches!(event, Some(ClockEvent::JumpHeld { .. })));
    assert!(during > first && unix_ms(during) <= T0 + 5);
    // The renewer, reading the glitch too, reserves nothing for it.
    g.keep_ahead(&L, &LIMITS, T0 + 10 * YEAR, i64::MIN);
    if let Some(until) = g.claim_renewal(true) {
        assert!(until < T0 + KEEP_AHEAD_MS + 2 * LIMITS.reservation_ms);
        g.renewal_done(until, 0);
    }
    // The clock is back: no lead, no warning of a step back, IDs go on from the real time.
    let (after, event) = run_of(call_at(&mut g, Clocks::at(T0 + 10)).unwrap());
    assert!(after > during && unix_ms(after) == T0 + 10);
    assert_eq!(event, None);
    assert_eq!(g.lead_ms(&L, T0 + 10), 0);
    assert!(g.reserved_until() < T0 + 10 + 2 * LIMITS.reservation_ms);
}

#[test]
fn a_step_that_lasts_like_a_vm_resumed_after_a_suspend_is_followed_after_the_confirmation() {
    let mut g = Generator::new();
    id(&mut g, T0);
    // Suspended for a day: the monotonic clock stood still, the wall clock did not.
    let mut last = 0;
    let mut events = vec![];
    for ms in (1..=FORWARD_CONFIRM_MS + 2_000).step_by(500) {
        let now = Clocks {
            wall: T0 + 24 * HOUR + ms,
            monotonic: T0 + ms,
        };
        let (id, event) = run_of(call_at(&mut g, now).unwrap());
        assert!(id > last);
        last = id;
        events.extend(event);
        if ms < FORWARD_CONFIRM_MS {
            // Held: stamped with the time the monotonic clock counted.
            assert_eq!(unix_ms(id), T0 + ms, "at {ms}");
        } else {
            assert_eq!(unix_ms(id), T0 + 24 * HOUR + ms, "at {ms}");
        }
    }
    assert_eq!(
        events,
        [
            ClockEvent::JumpHeld { ms: 24 * HOUR },
            ClockEvent::JumpFollowed { ms: 24 * HOUR }
        ]
    );
    assert_eq!(g.stats().clock_jumps, 1);
}

#[test]
fn a_pause_between_calls_is_no_step() {
    let mut g = Generator::new();
    id(&mut g, T0);
    // An hour with no call, counted by both clocks: followed at once, nothing held.
    let (id, event) = run_of(call_at(&mut g, Clocks::at(T0 + HOUR)).unwrap());
    assert_eq!((unix_ms(id), event), (T0 + HOUR, None));
    // Steps under FORWARD_STEP_MS are followed at once too.
    let small = Clocks {
        wall: T0 + HOUR + FORWARD_STEP_MS,
        monotonic: T0 + HOUR,
    };
    let (id, event) = run_of(call_at(&mut g, small).unwrap());
    assert_eq!((unix_ms(id), event), (T0 + HOUR + FORWARD_STEP_MS, None));
    assert_eq!(g.stats().clock_jumps, 0);
}

#[test]
fn a_clock_before_the_epoch_changes_nothing() {
    let mut g = Generator::new();
    let steady = g.clock.steady;
    assert!(g
        .allocate(
            &L,
            NODE,
            &mut Clocks::at(DEFAULT_EPOCH_UNIX_MS - 1),
            &LIMITS,
            1
        )
        .is_err());
    assert_eq!((g.clock.steady, g.stats()), (steady, Stats::default()));
}

#[test]
fn a_server_that_never_issued_or_was_down_long_reserves_nothing_at_start() {
    // Never issued an ID (no state file): the renewer's start asks for nothing.
    let mut fresh = Generator::new();
    assert!(!fresh.keep_ahead(&L, &LIMITS, T0, T0));
    assert_eq!(fresh.claim_renewal(true), None);
    // Its last reservation an hour old (a cold start, or a clock an hour ahead): nothing either;
    // the first call waits for one write.
    let mut cold = Generator::resume(T0 - HOUR);
    assert!(!cold.keep_ahead(&L, &LIMITS, T0, T0));
    // A clock 10 years ahead at start: nothing.
    let mut ahead = Generator::resume(T0);
    assert!(!ahead.keep_ahead(&L, &LIMITS, T0 + 10 * YEAR, T0 + 10 * YEAR));
    assert_eq!(ahead.claim_renewal(true), None);
}
