//! The reservation protocol (`reservation.rs`): written ahead of use, failed, abandoned,
//! slow, kept ahead between calls, and resumed after a restart or on a standby.

use super::*;

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
        let until = g.start_renewal(true).expect("a renewal is due");
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
    assert!(!g.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0), T0 - KEEP_AHEAD_MS - 1));
    let mut renewer = SlowRenewer::new(10);
    // One call at T0, then none: the renewer, turning every 100 ms, keeps the reservation
    // ahead of the clock.
    let first = id(&mut g, T0);
    for ms in (100..30_000).step_by(100) {
        g.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0 + ms), i64::MIN);
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
    assert!(!g.keep_ahead(&L, &LIMITS, &mut Clocks::at(quiet), i64::MIN));
    assert_eq!(g.start_renewal(true), None);
    assert_eq!(g.reserved_until(), last);
}

#[test]
fn a_glitch_the_calls_hold_is_not_reserved_between_calls_either() {
    let mut g = Generator::new();
    let first = id(&mut g, T0);
    let mut renewer = SlowRenewer::new(10);
    // A second after the last call the wall clock leaps 30 s ahead and stays there: the
    // renewer, turning every 100 ms, keeps the reservation ahead of the real time only.
    for ms in (1_000..20_000).step_by(100) {
        let real = T0 + ms;
        let now = Clocks {
            wall: real + 30_000,
            monotonic: real,
        };
        g.keep_ahead(&L, &LIMITS, &mut { now }, i64::MIN);
        renewer.step(&mut g, real);
        renewer.step(&mut g, real + 10);
        let ahead = g.reserved_until() - real;
        assert!(
            ahead > 10 && ahead <= 2 * LIMITS.reservation_ms,
            "reserved {ahead} ms past the real time at {ms} ms"
        );
    }
    // A call during the glitch holds it: stamped with the real time, covered at once.
    let real = T0 + 20_000;
    let glitch = Clocks {
        wall: real + 30_000,
        monotonic: real,
    };
    match g.allocate(&L, NODE, &mut { glitch }, &LIMITS, 1).unwrap() {
        Allocation::Run { run, .. } => {
            let id = run.ids(L, NODE).next().unwrap();
            assert!(id > first && unix_ms(id) == real, "{}", unix_ms(id) - real);
        }
        other => panic!("the call during the glitch had to wait: {other:?}"),
    }
}

#[test]
fn a_server_that_just_started_has_a_reservation_before_its_first_call() {
    // Restarted with the last reservation as its floor, a minute ahead of the clock.
    let floor = T0 + 60_000;
    let mut g = Generator::resume(floor);
    let mut renewer = SlowRenewer::new(10);
    // The renewer started at T0: it asks for a reservation with no call to ask for it, above
    // the floor.
    assert!(g.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0), T0));
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
fn a_server_that_never_issued_or_was_down_long_reserves_nothing_at_start() {
    // Never issued an ID (no state file): the renewer's start asks for nothing.
    let mut fresh = Generator::new();
    assert!(!fresh.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0), T0));
    assert_eq!(fresh.start_renewal(true), None);
    // Its last reservation an hour old (a cold start, or a clock an hour ahead): nothing either;
    // the first call waits for one write.
    let mut cold = Generator::resume(T0 - HOUR);
    assert!(!cold.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0), T0));
    // A clock 10 years ahead at start: nothing.
    let mut ahead = Generator::resume(T0);
    assert!(!ahead.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0 + 10 * YEAR), T0 + 10 * YEAR));
    assert_eq!(ahead.start_renewal(true), None);
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
    let until = g.start_renewal(true).unwrap();
    assert_eq!(until, T0 + 1_000);
    assert_eq!(g.start_renewal(true), None, "one renewer at a time");
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
    let until = g.start_renewal(true).unwrap();
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
    let until = g.start_renewal(true).unwrap();
    assert!(g.renewing());
    // The renewer exits before reporting; its successor ends that turn and takes it up anew.
    g.renewer_started();
    assert!(!g.renewing());
    assert_eq!(g.start_renewal(true), Some(until));
}

#[test]
fn a_renewer_that_starts_leaves_a_backends_turn_to_that_backend() {
    let mut g = Generator::new();
    g.allocate(&L, NODE, &mut Clocks::at(T0), &LIMITS, 1)
        .unwrap();
    // No renewer runs: a backend takes the turn and writes the renewal. A renewer starts meanwhile.
    let until = g.start_renewal(false).unwrap();
    g.renewer_started();
    assert!(g.renewing(), "the backend's turn was ended under it");
    assert_eq!(
        g.start_renewal(true),
        None,
        "a second writer at the same time"
    );
    g.renewal_done(until, 0);
    assert_eq!(g.reserved_until(), until);
}

#[test]
fn a_rewrite_waits_for_a_running_renewal_and_raises_nothing() {
    let mut g = Generator::resume(T0 + 1_000);
    // A stand-in is writing a renewal: no rewrite meanwhile.
    let wanted = g.keep_ahead(&L, &LIMITS, &mut Clocks::at(T0 + 900), T0);
    assert!(wanted);
    let started = g.start_renewal(false).expect("a due renewal");
    assert_eq!(g.start_rewrite(), None);
    g.renewal_done(started, 3);
    // Then the renewer may rewrite the reservation as it is; nobody else may write meanwhile.
    let durable = g.reserved_until();
    assert_eq!(g.start_rewrite(), Some(durable));
    assert!(g.renewing());
    assert_eq!(g.start_renewal(false), None);
    assert_eq!(g.start_rewrite(), None);
    g.renewal_done(durable, 1);
    assert_eq!(g.reserved_until(), durable);
    assert!(!g.renewing());
}

/// One call through `allocate`, its renewal left unwritten: the run, and whether it woke the
/// renewer; `None` when it was told to wait for a reservation.
fn call_unwritten(g: &mut Generator, now: i64, limits: &Limits) -> Option<(i64, bool)> {
    match g
        .allocate(&L, NODE, &mut Clocks::at(now), limits, 1)
        .unwrap()
    {
        Allocation::Run {
            run, wake_renewer, ..
        } => Some((run.ids(L, NODE).next().unwrap(), wake_renewer)),
        Allocation::AwaitReservation { .. } => None,
        Allocation::Wait { .. } => panic!("overloaded"),
    }
}

/// A generator that made an ID at `T0` and went quiet: its reservation (a second) long over.
fn quiet_after_one_id() -> (Generator, i64) {
    let mut g = Generator::new();
    let first = id(&mut g, T0);
    assert_eq!(g.reserved_until(), T0 + 1_000);
    (g, first)
}

#[test]
fn the_first_calls_after_a_quiet_spell_are_issued_at_once_in_the_wake_range() {
    let (mut g, first) = quiet_after_one_id();
    let wake = L.wake_seq().unwrap();
    assert_eq!(wake, 3_584);
    let at = T0 + 2 * 60_000;
    // Past the reservation, and issued at once at its own time: the top eighth of the
    // sequence field; the renewer is woken for the reservation it needs.
    let (a, woke) = call_unwritten(&mut g, at, &LIMITS).unwrap();
    assert!(woke && g.waking() && a > first);
    assert_eq!((unix_ms(a), parts(a).seq), (at, wake));
    // While that reservation is written, the next calls go on in the wake range.
    let (b, woke) = call_unwritten(&mut g, at, &LIMITS).unwrap();
    assert_eq!((unix_ms(b), parts(b).seq, woke), (at, wake + 1, false));
    let (c, _) = call_unwritten(&mut g, at + 3, &LIMITS).unwrap();
    assert_eq!((unix_ms(c), parts(c).seq), (at + 3, wake));
    // Not past the reservation asked for (a second ahead): that call waits.
    assert_eq!(call_unwritten(&mut g, at + 1_000, &LIMITS), None);
    // Once it is written, IDs are covered and the whole sequence field is used again.
    let until = g.start_renewal(true).unwrap();
    g.renewal_done(until, 20);
    assert!(!g.waking() && g.reserved_until() > at + 1_000);
    let (d, _) = call_unwritten(&mut g, at + 4, &LIMITS).unwrap();
    assert!(d > c && parts(d).seq < wake);
    // The first call ever, and the one past the wake's reach, waited; the wake's did not.
    assert_eq!(g.stats().reservation_waits, 2);
}

#[test]
fn no_wake_under_calls_past_an_hour_of_quiet_past_the_ceiling_or_after_a_failed_write() {
    let wake_at = |g: &mut Generator, at: i64, limits: &Limits| call_unwritten(g, at, limits);
    // Under calls: a reservation that ran out while calls went on (a stalled disk, overload)
    // makes the next call wait, as it always did.
    let (mut g, _) = quiet_after_one_id();
    assert_eq!(wake_at(&mut g, T0 + 1_000, &LIMITS), None);
    // More than `WAKE_MS` past the reservation: it waits.
    let (mut g, _) = quiet_after_one_id();
    assert_eq!(wake_at(&mut g, T0 + 1_000 + WAKE_MS, &LIMITS), None);
    let (mut g, _) = quiet_after_one_id();
    assert!(wake_at(&mut g, T0 + 999 + WAKE_MS, &LIMITS).is_some());
    // At or past the fenced lease's ceiling (`Limits::ceiling`): it waits.
    let fenced = Limits {
        ceiling: T0 + 120_000,
        ..LIMITS
    };
    let (mut g, _) = quiet_after_one_id();
    assert_eq!(wake_at(&mut g, T0 + 120_000, &fenced), None);
    let (mut g, _) = quiet_after_one_id();
    assert!(wake_at(&mut g, T0 + 119_999, &fenced).is_some());
    // The wake's write failed: the calls after it wait (and fail) like any other.
    let (mut g, _) = quiet_after_one_id();
    assert!(wake_at(&mut g, T0 + 120_000, &LIMITS).is_some());
    g.start_renewal(true).unwrap();
    g.renewal_failed();
    assert!(!g.waking());
    assert_eq!(wake_at(&mut g, T0 + 120_001, &LIMITS), None);
    assert_eq!(wake_at(&mut g, T0 + 300_000, &LIMITS), None);
}

#[test]
fn after_a_restart_or_a_promotion_the_wake_range_is_left_alone_for_an_hour_past_the_floor() {
    // A wake, and a crash before its reservation reached the disk (on disk: `T0 + 1_000`).
    let (mut g, _) = quiet_after_one_id();
    let at = T0 + 2 * 60_000;
    let (wake_id, _) = call_unwritten(&mut g, at, &LIMITS).unwrap();
    let floor = g.reserved_until();
    let resumed = [Generator::resume(floor), {
        let mut standby = Generator::new();
        standby.observe_reservation(floor);
        standby
    }];
    for mut after in resumed {
        // With its clock back at the wake's time, it makes all of that millisecond's IDs
        // below the wake range, then borrows the next: never the wake's ID.
        let low = L.low_max_seq();
        for n in 0..=low {
            let id = id(&mut after, at);
            assert_eq!((unix_ms(id), parts(id).seq), (at, n));
        }
        let next = id(&mut after, at);
        assert_eq!((unix_ms(next), parts(next).seq), (at + 1, 0));
        assert!(next != wake_id);
        // And within the hour, a call after a quiet spell waits for its reservation.
        assert_eq!(call_unwritten(&mut after, at + 5 * 60_000, &LIMITS), None);
    }
    // Past the hour, a quiet spell ends in a wake again.
    let mut after = Generator::resume(floor);
    let later = floor + WAKE_MS + 1;
    id(&mut after, later - 2 * 60_000);
    let (id, _) = call_unwritten(&mut after, later, &LIMITS).unwrap();
    assert_eq!(parts(id).seq, L.wake_seq().unwrap());
}
