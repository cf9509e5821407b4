//! The steady clock (`steady_clock.rs`): steps back slewed, forward steps held, warnings, and
//! readings that fail taking nothing in.

use super::*;
use crate::clock::Clock;

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
fn the_normal_path_reads_one_clock_and_the_monotonic_one_only_after_a_pause_or_while_behind() {
    let mut g = Generator::new();
    let mut clock = CountingClock {
        now: Clocks::at(T0),
        monotonic_reads: 0,
    };
    // One call, with a renewer that writes at once.
    let call = |g: &mut Generator, clock: &mut CountingClock| loop {
        let allocation = g.allocate(&L, NODE, clock, &LIMITS, 1).unwrap();
        if let Some(until) = g.start_renewal(true) {
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
    // A call more than a second after the last one reads it once more, to re-anchor; a call a
    // second after, not.
    for ms in [4_500, 4_501, 5_501, 6_502] {
        clock.now = Clocks::at(T0 + ms);
        call(&mut g, &mut clock);
    }
    assert_eq!(clock.monotonic_reads, 3);
    clock.monotonic_reads = 0;
    // The wall clock steps back 1 s: every call reads the monotonic clock until the wall clock
    // is ahead of the generator again, and the first call after that once more.
    for ms in 0..100 {
        clock.now = Clocks {
            wall: T0 + 6_502 - 1_000 + ms,
            monotonic: T0 + 6_502 + ms,
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

/// The first allocation's outcome at `now`, with a renewer that writes at once before it.
fn call_at(g: &mut Generator, now: Clocks) -> Result<Allocation, Error> {
    let mut clock = now;
    loop {
        match g.allocate(&L, NODE, &mut clock, &LIMITS, 1)? {
            Allocation::AwaitReservation { .. } => {
                let until = g.start_renewal(true).expect("a renewal is due");
                g.renewal_done(until, 0);
            }
            other => {
                if let Some(until) = g.start_renewal(true) {
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
    g.keep_ahead(
        &L,
        &LIMITS,
        &mut Clocks::at(T0 + FORWARD_CONFIRM_MS + 2),
        i64::MIN,
    );
    if let Some(until) = g.start_renewal(true) {
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
    g.keep_ahead(&L, &LIMITS, &mut { glitch }, i64::MIN);
    if let Some(until) = g.start_renewal(true) {
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

/// The wall clock at `offset_ms` from the monotonic clock, which reads `T0 + monotonic_ms`.
fn offset(monotonic_ms: i64, offset_ms: i64) -> Clocks {
    Clocks {
        wall: T0 + monotonic_ms + offset_ms,
        monotonic: T0 + monotonic_ms,
    }
}

#[test]
fn small_forward_steps_that_were_followed_are_not_held_after_a_pause() {
    let mut g = Generator::new();
    id(&mut g, T0);
    // Three steps of 8 s, one call a second after each: each is followed at once.
    for (s, step) in [(1, 8_000), (2, 16_000), (3, 24_000)] {
        let now = offset(s * 1_000, step);
        let (id, event) = run_of(call_at(&mut g, now).unwrap());
        assert_eq!(
            (unix_ms(id), event),
            (now.wall, None),
            "after the +{step} ms step"
        );
    }
    // 12 s with no call, then one: the clock did nothing but run, so nothing is held.
    let now = offset(15_000, 24_000);
    let (id, event) = run_of(call_at(&mut g, now).unwrap());
    assert_eq!((unix_ms(id), event), (now.wall, None));
    assert_eq!(g.stats().clock_jumps, 0);
}

#[test]
fn steps_back_within_pauses_do_not_let_a_later_glitch_through() {
    let mut g = Generator::new();
    id(&mut g, T0);
    // Three pauses of 7 s in which the wall clock also stepped back 5 s: it reads 2 s on.
    for n in 1..=3 {
        let now = offset(n * 7_000, -n * 5_000);
        let (id, event) = run_of(call_at(&mut g, now).unwrap());
        assert_eq!((unix_ms(id), event), (now.wall, None), "after pause {n}");
    }
    // A second later the wall clock leaps 20 s: more than FORWARD_STEP_MS, so held.
    let glitch = offset(22_000, -15_000 + 20_000);
    let (id, event) = run_of(call_at(&mut g, glitch).unwrap());
    assert_eq!(event, Some(ClockEvent::JumpHeld { ms: 20_000 }));
    assert_eq!(unix_ms(id), T0 + 22_000 - 15_000);
    assert_eq!(g.stats().clock_jumps, 1);
}

#[test]
fn steps_under_a_second_between_busy_calls_are_re_anchored_by_the_renewer() {
    let mut g = Generator::new();
    id(&mut g, T0);
    // Calls every 100 ms for 20 s, the wall clock stepping 600 ms ahead every second (each step
    // on the normal path), the renewer turning between calls.
    let mut step = 0;
    for ms in (100..=20_000).step_by(100) {
        if ms % 1_000 == 0 {
            step += 600;
        }
        let now = offset(ms, step);
        let (id, event) = run_of(call_at(&mut g, now).unwrap());
        assert_eq!((unix_ms(id), event), (now.wall, None), "at {ms} ms");
        g.keep_ahead(&L, &LIMITS, &mut { now }, i64::MIN);
    }
    // 12 s with no call, then one: nothing held.
    let now = offset(32_000, step);
    let (id, event) = run_of(call_at(&mut g, now).unwrap());
    assert_eq!((unix_ms(id), event), (now.wall, None));
    assert_eq!(g.stats().clock_jumps, 0);
}
