use super::*;

const MINE: Identity = Identity {
    token: 0xfeed,
    generation: 4,
};
const OTHER: Identity = Identity {
    token: 0xbeef,
    generation: 9,
};
const NOW: i64 = 1_800_000_000_000;
const MARGIN: i64 = 5_000;

fn row(holder: Identity) -> Row {
    Row {
        node: 7,
        holder,
        retired: false,
        high_water: NOW - 1_000,
        lease_until: NOW + 10_000,
        connected: false,
    }
}

fn claimant(identity: Option<Identity>, wanted: Wanted) -> Claimant {
    Claimant { identity, wanted }
}

fn take(floor: i64, generation: i64, recycled: bool) -> Decision {
    Decision::Take {
        node: 7,
        floor,
        generation,
        recycled,
    }
}

#[test]
fn an_id_nobody_had_is_taken_with_nothing_owed() {
    let me = claimant(None, Wanted::Configured(7));
    assert_eq!(decide(&me, 7, None, NOW, MARGIN), take(i64::MIN, 1, false));
}

#[test]
fn a_restart_continues_its_own_id_above_the_high_water_mark() {
    let me = claimant(Some(MINE), Wanted::Configured(7));
    let row = row(MINE);
    assert_eq!(
        decide(&me, 7, Some(&row), NOW, MARGIN),
        take(NOW - 1_000, 5, false)
    );
}

#[test]
fn a_copy_of_a_connected_holder_is_refused_or_sent_to_a_fresh_id() {
    let row = Row {
        connected: true,
        ..row(MINE)
    };
    let configured = claimant(Some(MINE), Wanted::Configured(7));
    assert_eq!(
        decide(&configured, 7, Some(&row), NOW, MARGIN),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::CopyOfLiveHolder
        }
    );
    let pinned = claimant(Some(MINE), Wanted::Pinned(7));
    assert_eq!(
        decide(&pinned, 7, Some(&row), NOW, MARGIN),
        Decision::Fresh {
            not: Some((7, Refusal::CopyOfLiveHolder))
        }
    );
}

#[test]
fn an_older_copy_is_stale_even_when_the_holder_is_gone() {
    let me = claimant(
        Some(Identity {
            generation: 3,
            ..MINE
        }),
        Wanted::Configured(7),
    );
    let row = Row {
        lease_until: NOW - 1,
        ..row(MINE)
    };
    assert_eq!(
        decide(&me, 7, Some(&row), NOW, MARGIN),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::StaleCopy
        }
    );
}

#[test]
fn another_servers_id_is_refused_while_its_lease_runs_and_taken_over_after() {
    let me = claimant(Some(MINE), Wanted::Configured(7));
    let live = row(OTHER);
    assert_eq!(
        decide(&me, 7, Some(&live), NOW, MARGIN),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HeldByAnother
        }
    );
    let connected_but_expired = Row {
        connected: true,
        lease_until: NOW - 1,
        ..row(OTHER)
    };
    assert_eq!(
        decide(&me, 7, Some(&connected_but_expired), NOW, MARGIN),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HeldByAnother
        }
    );
    let expired = Row {
        lease_until: NOW,
        ..row(OTHER)
    };
    assert_eq!(
        decide(&me, 7, Some(&expired), NOW, MARGIN),
        take(NOW - 1_000, 10, false)
    );
    let newcomer = claimant(None, Wanted::Configured(7));
    assert_eq!(
        decide(&newcomer, 7, Some(&expired), NOW, MARGIN),
        take(NOW - 1_000, 10, false)
    );
}

#[test]
fn a_retired_id_comes_back_only_past_its_mark_and_the_margin() {
    let me = claimant(None, Wanted::Configured(7));
    let mut retired = Row {
        retired: true,
        high_water: NOW - MARGIN,
        ..row(OTHER)
    };
    assert_eq!(
        decide(&me, 7, Some(&retired), NOW, MARGIN),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::RetiredUntil { until: NOW }
        }
    );
    assert!(!is_free(Some(&retired), NOW, MARGIN));
    retired.high_water -= 1;
    assert_eq!(
        decide(&me, 7, Some(&retired), NOW, MARGIN),
        take(NOW - MARGIN - 1, 10, true)
    );
    assert!(is_free(Some(&retired), NOW, MARGIN));
    assert!(is_free(None, NOW, MARGIN));
    assert!(!is_free(Some(&row(OTHER)), NOW, MARGIN));
}

#[test]
fn the_clock_offset_is_read_at_the_midpoint_of_the_round_trip() {
    assert_eq!(clock_offset(1_000, 1_010, 1_005), 0);
    assert_eq!(clock_offset(1_000, 1_010, 1_000 - 3_600_000), 3_600_005);
    assert_eq!(clock_offset(1_000, 1_100, 1_200), -150);
}

#[test]
fn a_lease_ends_lease_ms_after_the_heartbeat_was_sent() {
    let ceiling = Lease::ceiling_for(NOW, i64::MIN, 3_000);
    assert_eq!(ceiling, NOW + 3_000);
    let lease = Lease::granted(50, ceiling, 3_000);
    assert!(lease.runs_at(3_049));
    assert!(!lease.runs_at(3_050));
    // A generator ahead of the clock (a floor from a takeover, a clock behind): a lease's worth
    // past its position.
    assert_eq!(Lease::ceiling_for(NOW, NOW + 600_000, 3_000), NOW + 603_000);
    assert_eq!(heartbeat_interval_ms(3_000), 1_000);
    assert_eq!(heartbeat_interval_ms(10), 100);
}
