//! Property tests across the whole generator: any clock, any mix of calls and batches, any
//! interleaving of renewer and crashes.

use super::*;
use proptest::prelude::*;

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
