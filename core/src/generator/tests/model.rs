//! Property tests across the whole generator: any clock, any mix of calls and batches, any
//! interleaving of renewer and crashes.

use super::*;
use proptest::prelude::*;

/// One step of the model below: the clock moves, a caller asks for IDs, and the renewer may
/// act: start a renewal (the writer's turn), finish it, fail it, or the whole server crashes.
#[derive(Clone, Debug)]
enum Step {
    Call {
        jump: i64,
        want: u64,
    },
    StartRenewal,
    /// The started renewal is reported done, as written in `took_ms`.
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
        2 => Just(Step::StartRenewal),
        2 => prop_oneof![Just(0i64), 0i64..30_000].prop_map(|took_ms| Step::Finish { took_ms }),
        1 => Just(Step::Fail),
        1 => Just(Step::Crash),
    ]
}

/// The renewer and the disk of the models below: a started renewal, and the furthest
/// reservation that reached the disk.
struct Renewer {
    started: Option<i64>,
    on_disk: i64,
}

impl Renewer {
    const fn new() -> Self {
        Renewer {
            started: None,
            on_disk: i64::MIN,
        }
    }

    /// A step other than a call: start a renewal, finish it (written in `took_ms`), fail it, or
    /// crash the whole server (a write may have reached the disk without being reported).
    fn act(&mut self, g: &mut Generator, step: Step) {
        match step {
            Step::Call { .. } => unreachable!("calls are the model's"),
            Step::StartRenewal => {
                if self.started.is_none() {
                    self.started = g.start_renewal(true);
                }
            }
            Step::Finish { took_ms } => {
                if let Some(until) = self.started.take() {
                    self.on_disk = self.on_disk.max(until);
                    g.renewal_done(until, took_ms);
                }
            }
            Step::Fail => {
                if self.started.take().is_some() {
                    g.renewal_failed();
                }
            }
            Step::Crash => {
                if let Some(until) = self.started.take() {
                    self.on_disk = self.on_disk.max(until);
                }
                *g = Generator::resume(self.on_disk);
            }
        }
    }
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
    /// renewer writes before it reports) but a wake's (one call after a quiet spell, and those
    /// while its reservation is written: in the wake range, below that reservation, within
    /// `WAKE_MS` of the durable one); a failed renewal never issues uncovered IDs; and IDs only
    /// ever increase within a run, and across crashes are never issued twice and stay above
    /// every covered one (`Issued`).
    #[test]
    fn no_id_is_ever_issued_past_the_durable_reservation_but_a_wakes(
        steps in proptest::collection::vec(step(), 1..300)
    ) {
        let mut g = Generator::new();
        let mut now = T0;
        let mut issued = Issued::new(L);
        let mut renewer = Renewer::new();
        let first_wake = L.wake_seq().unwrap();
        for step in steps {
            match step {
                Step::Call { jump, want } => {
                    now += jump;
                    let durable = g.reserved_until();
                    let allocation = g.allocate(&L, NODE, &mut Clocks::at(now), &LIMITS, want);
                    if let Allocation::Run { run, .. } = allocation.unwrap() {
                        let last = last_of(run);
                        if unix_ms(last) >= durable.min(renewer.on_disk) {
                            prop_assert!(g.waking() && run.count == 1, "uncovered, not a wake");
                            prop_assert!(parts(last).seq >= first_wake);
                            prop_assert!(unix_ms(last) < durable + WAKE_MS);
                        }
                        for id in run.ids(L, NODE) {
                            issued.check(id, durable.min(renewer.on_disk)).map_err(TestCaseError::fail)?;
                        }
                    }
                }
                Step::Crash => {
                    renewer.act(&mut g, Step::Crash);
                    issued.crash(renewer.on_disk);
                }
                step => renewer.act(&mut g, step),
            }
        }
    }
}

/// The layouts the fast path is checked on: the default, ticks longer than 1 ms, and a
/// sequence of 4 numbers per tick (so that ticks run out and are borrowed).
fn fast_path_layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(L),
        Just(Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 10, 16, 8).unwrap()),
        Just(Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1, 10, 2).unwrap()),
    ]
}

fn fast_path_limits() -> impl Strategy<Value = Limits> {
    (
        prop_oneof![Just(0u32), Just(1), Just(3), Just(4_096)],
        prop_oneof![Just(1i64), Just(20), Just(1_000), Just(60_000)],
        prop_oneof![Just(0i64), Just(5), Just(1_000)],
    )
        .prop_map(|(sequence_spread, reservation_ms, max_borrow_ms)| Limits {
            max_borrow_ms,
            reservation_ms,
            ceiling: i64::MAX,
            sequence_spread,
        })
}

/// One step of the fast path's model: the clock moves (by small steps, steps back and forward
/// jumps past `FORWARD_STEP_MS`), single calls and batches, the renewer, restarts.
fn fast_path_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (prop_oneof![6 => -2i64..3, 1 => -20_000i64..40_000], Just(1u64))
            .prop_map(|(jump, want)| Step::Call { jump, want }),
        1 => (0i64..3, 2u64..50_000).prop_map(|(jump, want)| Step::Call { jump, want }),
        2 => Just(Step::StartRenewal),
        2 => prop_oneof![Just(0i64), 0i64..30_000].prop_map(|took_ms| Step::Finish { took_ms }),
        1 => Just(Step::Fail),
        1 => Just(Step::Crash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `Generator::next_one` (the extension's fast path) is `allocate` for one ID whenever it
    /// answers: the same ID, no event, nothing to wake, and the same state after, to the last
    /// field; when it does not answer it has changed nothing. Checked before every step of a
    /// model with any clock, single calls and batches, renewals done, failed and slow, and
    /// restarts; and the model's IDs strictly increase whichever path made them.
    #[test]
    fn the_fast_path_is_allocate_for_one_id_whenever_it_answers(
        layout in fast_path_layout(),
        limits in fast_path_limits(),
        node in 0u32..4,
        steps in proptest::collection::vec(fast_path_step(), 1..400),
    ) {
        let mut g = Generator::new();
        let mut now = T0;
        let mut issued = Issued::new(layout);
        let mut renewer = Renewer::new();
        for step in steps {
            match step {
                Step::Call { jump, want } => {
                    now += jump;
                    let (original, mut fast) = (g, g);
                    let answer = fast.next_one(&layout, node, now, &limits);
                    let allocation = g.allocate(&layout, node, &mut Clocks::at(now), &limits, want);
                    if want == 1 {
                        if let Some((time, seq)) = answer {
                            prop_assert_eq!(
                                allocation.clone().unwrap(),
                                Allocation::Run {
                                    run: Run { time, seq, count: 1 },
                                    clock_event: None,
                                    wake_renewer: false,
                                }
                            );
                            prop_assert_eq!(fast, g);
                        }
                    }
                    if answer.is_none() {
                        prop_assert_eq!(fast, original);
                    }
                    if let Ok(Allocation::Run { run, wake_renewer, .. }) = allocation {
                        for id in run.ids(layout, node) {
                            issued.check(id, g.reserved_until()).map_err(TestCaseError::fail)?;
                        }
                        if wake_renewer && renewer.started.is_none() {
                            renewer.started = g.start_renewal(true);
                        }
                    }
                }
                Step::Crash => {
                    renewer.act(&mut g, Step::Crash);
                    issued.crash(renewer.on_disk);
                }
                step => renewer.act(&mut g, step),
            }
        }
    }
}

/// The fast path answers in the steady state (it is not a path that never runs): after a
/// first ID and a reservation well ahead, the next IDs in the same tick and in later ticks, as
/// `allocate` would make them; and it declines a call `allocate` must decide (a clock step
/// back, an exhausted tick, the reservation nearly reached), changing nothing.
#[test]
fn the_fast_path_answers_the_common_case_and_declines_the_rest() {
    let mut g = Generator::new();
    let first = id(&mut g, T0);
    g.start_renewal(true);
    g.renewal_done(T0 + 10_000, 0);
    let (time, seq) = g.next_one(&L, NODE, T0, &LIMITS).expect("the same tick");
    let second = L.pack(Parts {
        time: time as u64,
        node: NODE,
        seq,
    });
    assert_eq!(second, first + 1);
    let (time, seq) = g.next_one(&L, NODE, T0 + 3, &LIMITS).expect("a later tick");
    assert_eq!(
        (
            unix_ms(L.pack(Parts {
                time: time as u64,
                node: NODE,
                seq
            })),
            seq
        ),
        (T0 + 3, 0)
    );
    assert_eq!(g.stats().issued, 3);

    // A step back: the steady clock leaves its normal path; allocate slews.
    let before = g;
    assert_eq!(g.next_one(&L, NODE, T0 - 5_000, &LIMITS), None);
    assert_eq!(g, before);
    // Past half of the reservation: allocate asks for the next one.
    assert_eq!(g.next_one(&L, NODE, T0 + 9_600, &LIMITS), None);
    assert_eq!(g, before);
    // A node outside the field: allocate refuses it.
    assert_eq!(g.next_one(&L, L.max_node() + 1, T0 + 4, &LIMITS), None);
    assert_eq!(g, before);
    // An exhausted tick: allocate borrows the next.
    let tiny = Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1, 10, 1).unwrap();
    let mut g = Generator::new();
    g.allocate(&tiny, NODE, &mut Clocks::at(T0), &LIMITS, 1)
        .unwrap(); // awaits a reservation
    g.start_renewal(true);
    g.renewal_done(T0 + 10_000, 0);
    g.allocate(&tiny, NODE, &mut Clocks::at(T0), &LIMITS, 1)
        .unwrap(); // sequence 0
    assert!(g.next_one(&tiny, NODE, T0, &LIMITS).is_some());
    let before = g;
    assert_eq!(g.next_one(&tiny, NODE, T0, &LIMITS), None);
    assert_eq!(g, before);
}

/// One step of the idle model below: calls close together, a quiet spell of any length, or a
/// crash and restart with the clock set back.
#[derive(Clone, Debug)]
enum Traffic {
    /// A call `jump` ms after the previous step.
    Call { jump: i64 },
    /// No call for `ms`; the renewer runs its rounds as it does.
    Quiet { ms: i64 },
    /// The server crashes (a write under way reached the disk or not: `landed`) and restarts
    /// with its clock set back `back` ms.
    Crash { landed: bool, back: i64 },
}

fn traffic() -> impl Strategy<Value = Traffic> {
    prop_oneof![
        6 => (0i64..50).prop_map(|jump| Traffic::Call { jump }),
        2 => prop_oneof![
            0i64..KEEP_AHEAD_MS,
            KEEP_AHEAD_MS..3 * KEEP_AHEAD_MS,
            (2 * 60_000i64)..(2 * HOUR),
        ]
        .prop_map(|ms| Traffic::Quiet { ms }),
        1 => (any::<bool>(), prop_oneof![Just(0i64), 0i64..2 * HOUR])
            .prop_map(|(landed, back)| Traffic::Crash { landed, back }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The first call after a quiet spell (SAFETY.md, *The first call after a quiet minute*),
    /// under any mix of calls, quiet spells and crashes with the clock set back, with the
    /// renewer turning between calls as it does (`keep_ahead`, then the renewal it makes due;
    /// a renewal a call asked for lands at the next step, or a crash comes first):
    /// 1. every ID is covered by a reservation on disk when issued, or is a wake's: in the wake
    ///    range, below the reservation being written and within `WAKE_MS` of the one on disk;
    /// 2. no ID is stamped before the call that made it;
    /// 3. nothing is written while quiet (no renewal due more than `KEEP_AHEAD_MS` after the
    ///    last call), and no reservation reaches past the last call by more than
    ///    `KEEP_AHEAD_MS` and the reservation (plus the borrowing limit);
    /// 4. no ID is issued twice across the crashes, and each is above every ID a reservation on
    ///    disk covered (`Issued`);
    /// and the first call past the reservation after a quiet spell does not wait, unless it is
    /// within `WAKE_MS` of the reservation a restart resumed from, or `WAKE_MS` past the one on
    /// disk.
    #[test]
    fn after_any_quiet_spell_the_first_call_waits_for_no_write_and_no_crash_repeats_its_ids(
        steps in proptest::collection::vec(traffic(), 1..60)
    ) {
        let mut g = Generator::new();
        let mut now = T0;
        let mut on_disk = i64::MIN;
        let mut last_call: Option<i64> = None;
        // The latest call in any run: reservations are bounded from it (the clock set back by a
        // restart does not take back what was reserved before).
        let mut latest_call: Option<i64> = None;
        let mut restricted_until = i64::MIN;
        let mut issued = Issued::new(L);
        let first_wake = L.wake_seq().unwrap();
        // The renewer's write: to disk, then reported.
        let write = |g: &mut Generator, on_disk: &mut i64| {
            if let Some(until) = g.start_renewal(true) {
                *on_disk = (*on_disk).max(until);
                g.renewal_done(until, 0);
            }
        };
        let bound = |last_call: Option<i64>| {
            last_call.map_or(i64::MIN, |at| {
                at + KEEP_AHEAD_MS + LIMITS.reservation_ms + LIMITS.max_borrow_ms + L.unit_ms
            })
        };
        for step in steps {
            match step {
                Traffic::Crash { landed, back } => {
                    if landed {
                        write(&mut g, &mut on_disk);
                    }
                    issued.crash(on_disk);
                    g = Generator::resume(on_disk);
                    restricted_until = restricted_until.max(on_disk.saturating_add(WAKE_MS));
                    now -= back;
                    last_call = None;
                }
                Traffic::Quiet { ms } => {
                    write(&mut g, &mut on_disk);
                    // A renewer's round every 250 ms (at most a second apart in the extension);
                    // sampled once a minute once the keep-ahead minute is long over.
                    let end = now + ms;
                    while now < end {
                        let quiet_for = last_call.map_or(i64::MAX, |at| now - at);
                        now = (now + if quiet_for < 2 * KEEP_AHEAD_MS { 250 } else { 60_000 })
                            .min(end);
                        let due = g.keep_ahead(&L, &LIMITS, &mut Clocks::at(now), i64::MIN);
                        if last_call.is_none_or(|at| now - at > KEEP_AHEAD_MS + L.unit_ms) {
                            prop_assert!(!due, "a renewal due {} ms after the last call", quiet_for);
                            prop_assert_eq!(g.start_renewal(true), None);
                        }
                        write(&mut g, &mut on_disk);
                        prop_assert!(on_disk <= bound(latest_call).max(T0));
                    }
                }
                Traffic::Call { jump } => {
                    write(&mut g, &mut on_disk);
                    now += jump;
                    // A call after a quiet spell, past the reservation on disk, within reach of
                    // the wake.
                    let may_wake = on_disk > i64::MIN
                        && now >= on_disk
                        && now >= restricted_until
                        && now < on_disk + WAKE_MS
                        && last_call.is_some_and(|at| now - at > KEEP_AHEAD_MS + L.unit_ms);
                    let mut waited = false;
                    let (id, durable) = loop {
                        let durable = g.reserved_until();
                        match g.allocate(&L, NODE, &mut Clocks::at(now), &LIMITS, 1).unwrap() {
                            Allocation::Run { run, .. } => {
                                break (run.ids(L, NODE).next().unwrap(), durable);
                            }
                            Allocation::AwaitReservation { .. } => {
                                waited = true;
                                write(&mut g, &mut on_disk);
                            }
                            Allocation::Wait { ms } => now += ms,
                        }
                    };
                    prop_assert!(!(may_wake && waited), "the first call after a quiet spell waited");
                    issued.check(id, on_disk.min(durable)).map_err(TestCaseError::fail)?;
                    let at = unix_ms(id);
                    if at >= on_disk {
                        prop_assert!(parts(id).seq >= first_wake, "uncovered outside the wake range");
                        prop_assert!(at < on_disk + WAKE_MS && at >= restricted_until);
                    }
                    prop_assert!(at >= now, "stamped {} ms early", now - at);
                    // (After a restart the IDs may lead the clock: the keep-ahead minute counts
                    // from the last ID's time.)
                    last_call = Some(now.max(at));
                    latest_call = latest_call.max(last_call);
                    prop_assert!(on_disk <= bound(latest_call));
                }
            }
        }
        prop_assert!(issued.orphans.len() as u64 <= issued.wakes);
    }
}
