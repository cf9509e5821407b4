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
const AT: Bounds = Bounds {
    now: NOW,
    margin_ms: MARGIN,
    lease_ms: 30_000,
};

fn row(identity: Identity) -> Row {
    Row {
        node: 7,
        identity,
        retired: false,
        high_water: NOW - 1_000,
        lease_until: NOW + 10_000,
        connected: false,
        same_label: false,
        stray: false,
        boot: Some(BOOT),
        last_seen: NOW - 1_000,
        absent_since: NOW - 1_000,
        released: false,
        place: Some(PLACE),
    }
}

/// The boot value of the running holder the cases' claimants are, unless they say otherwise.
const BOOT: u64 = 0xb007;
/// Where the cases' claimants, and the rows' holders, run, unless they say otherwise.
const PLACE: u64 = 0x91ace;

/// `claimant` started from disk (a restart, a copy, a promoted standby): its boot value is not
/// the one the row's holder wrote.
fn from_disk(claimant: Claimant) -> Claimant {
    Claimant {
        boot: 0xd15c,
        ..claimant
    }
}

fn claimant(identity: Option<Identity>, wanted: Want) -> Claimant {
    Claimant {
        identity,
        wanted,
        reserved: i64::MIN,
        history_lost: false,
        patient: true,
        boot: BOOT,
        after_clean_stop: true,
        met_holder: false,
        mark: None,
        place: PLACE,
    }
}

/// This server's token at `generation`, configured with id 7.
fn mine_at(generation: i64) -> Claimant {
    claimant(Some(Identity { generation, ..MINE }), Want::Configured(7))
}

/// `holder`'s row, its lease run out.
fn gone(identity: Identity) -> Row {
    Row {
        lease_until: NOW - 1,
        absent_since: NOW - 1 - AT.lease_ms,
        ..row(identity)
    }
}

fn take(floor: i64, generation: i64, recycled: bool) -> Decision {
    Decision::Take {
        node: 7,
        floor,
        generation,
        recycled,
        own: false,
    }
}

/// Taken by its running holder, which keeps its token.
fn resume(floor: i64, generation: i64) -> Decision {
    Decision::Take {
        node: 7,
        floor,
        generation,
        recycled: false,
        own: true,
    }
}

#[test]
fn an_id_nobody_had_is_taken_with_nothing_owed() {
    let me = claimant(None, Want::Configured(7));
    assert_eq!(decide(&me, 7, None, &AT), take(i64::MIN, 1, false));
}

#[test]
fn the_running_holder_continues_its_own_id_above_the_mark_under_its_token() {
    let me = claimant(Some(MINE), Want::Configured(7));
    let row = row(MINE);
    assert_eq!(decide(&me, 7, Some(&row), &AT), resume(NOW - 1_000, 5));
}

/// A claim asked again because its answer was lost (the row names it, with the mark it wrote)
/// is taken again from where its reservation reaches, not from that mark: answers lost in a row
/// leave the IDs where they were. Anything else that moved the row (another's raise, a
/// heartbeat since, another generation, a claimant from disk) makes the mark the floor.
#[test]
fn a_claim_asked_again_after_its_answer_was_lost_starts_where_it_was_granted() {
    let row = row(MINE);
    let asked_again = Claimant {
        reserved: NOW - 20_000,
        mark: Some(row.high_water),
        ..claimant(Some(MINE), Want::Configured(7))
    };
    assert_eq!(
        decide(&asked_again, 7, Some(&row), &AT),
        resume(NOW - 20_000, 5)
    );
    let raised = Claimant {
        mark: Some(row.high_water - 1),
        ..asked_again
    };
    assert_eq!(decide(&raised, 7, Some(&row), &AT), resume(NOW - 1_000, 5));
    let unknown = Claimant {
        mark: None,
        ..asked_again
    };
    assert_eq!(decide(&unknown, 7, Some(&row), &AT), resume(NOW - 1_000, 5));
    let intent_ahead = Claimant {
        identity: Some(Identity {
            generation: MINE.generation + 1,
            ..MINE
        }),
        ..asked_again
    };
    assert_eq!(
        decide(&intent_ahead, 7, Some(&row), &AT),
        resume(NOW - 1_000, 5)
    );
    assert_ne!(
        decide(&from_disk(asked_again), 7, Some(&row), &AT),
        resume(NOW - 20_000, 5)
    );
}

/// A claimant with the row's claim but not the holder's shared memory (a restart from disk, a
/// copy, a promoted standby) waits a heartbeat interval and the margin from the holder's last
/// contact, for a running holder between two sessions to come back; then takes the id over,
/// above its mark, under a token of its own (`own: false`), whatever the lease says.
#[test]
fn a_claimant_from_disk_waits_for_a_holder_seen_lately_then_takes_over() {
    let row = Row {
        lease_until: NOW + AT.lease_ms - 1_000,
        ..row(MINE)
    };
    let until = row.absent_since + heartbeat_interval_ms(AT.lease_ms) + MARGIN;
    for wanted in [Want::Configured(7), Want::Pinned(7)] {
        let me = from_disk(claimant(Some(MINE), wanted));
        assert_eq!(
            decide(&me, 7, Some(&row), &AT),
            Decision::Refuse {
                node: 7,
                refusal: Refusal::HolderMayReturn { until }
            }
        );
        let later = Bounds { now: until, ..AT };
        assert!(row.lease_until > until, "the lease still runs");
        assert_eq!(
            decide(&me, 7, Some(&row), &later),
            take(row.high_water, MINE.generation + 1, false)
        );
    }
    // The same for the claim's intent, one generation ahead of the row.
    let intent = from_disk(mine_at(MINE.generation + 1));
    assert_eq!(
        decide(&intent, 7, Some(&row), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HolderMayReturn { until }
        }
    );
    // A row its holder wrote without a boot value (an older server) proves no one.
    let unproven = Row { boot: None, ..row };
    assert_eq!(
        decide(
            &claimant(Some(MINE), Want::Configured(7)),
            7,
            Some(&unproven),
            &AT
        ),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HolderMayReturn { until }
        }
    );
}

#[test]
fn a_copy_of_a_connected_holder_is_refused_or_sent_to_a_fresh_id() {
    let row = Row {
        connected: true,
        same_label: false,
        stray: false,
        ..row(MINE)
    };
    let configured = from_disk(claimant(Some(MINE), Want::Configured(7)));
    assert_eq!(
        decide(&configured, 7, Some(&row), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::CopyOfLiveHolder
        }
    );
    // The running holder itself, its old session not ended yet: never taken for a copy.
    for wanted in [Want::Configured(7), Want::Pinned(7)] {
        assert_eq!(
            decide(&claimant(Some(MINE), wanted), 7, Some(&row), &AT),
            Decision::Refuse {
                node: 7,
                refusal: Refusal::OpenSession
            }
        );
    }
    let pinned = from_disk(claimant(Some(MINE), Want::Pinned(7)));
    assert_eq!(
        decide(&pinned, 7, Some(&row), &AT),
        Decision::Fresh {
            not: Some((7, Refusal::CopyOfLiveHolder))
        }
    );
}

#[test]
fn an_older_copy_is_stale_even_when_the_holder_is_gone() {
    let me = mine_at(3);
    let row = gone(MINE);
    assert_eq!(
        decide(&me, 7, Some(&row), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::StaleCopy
        }
    );
}

#[test]
fn another_servers_id_is_refused_while_its_lease_runs_and_taken_over_after() {
    let me = claimant(Some(MINE), Want::Configured(7));
    let live = row(OTHER);
    assert_eq!(
        decide(&me, 7, Some(&live), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HeldByAnother { connected: false }
        }
    );
    let connected_but_expired = Row {
        connected: true,
        same_label: false,
        stray: false,
        lease_until: NOW - 1,
        absent_since: NOW - 1 - AT.lease_ms,
        ..row(OTHER)
    };
    assert_eq!(
        decide(&me, 7, Some(&connected_but_expired), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HeldByAnother { connected: true }
        }
    );
    let expired = Row {
        lease_until: NOW,
        absent_since: NOW - AT.lease_ms,
        ..row(OTHER)
    };
    assert_eq!(
        decide(&me, 7, Some(&expired), &AT),
        take(NOW - 1_000, 10, false)
    );
    let newcomer = claimant(None, Want::Configured(7));
    assert_eq!(
        decide(&newcomer, 7, Some(&expired), &AT),
        take(NOW - 1_000, 10, false)
    );
}

#[test]
fn a_retired_id_comes_back_only_past_its_mark_and_the_margin() {
    let me = claimant(None, Want::Configured(7));
    let mut retired = Row {
        retired: true,
        high_water: NOW - MARGIN,
        ..row(OTHER)
    };
    assert_eq!(
        decide(&me, 7, Some(&retired), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::RetiredUntil { until: NOW }
        }
    );
    assert!(!is_free(Some(&retired), &AT));
    retired.high_water -= 1;
    assert_eq!(
        decide(&me, 7, Some(&retired), &AT),
        take(NOW - MARGIN - 1, 10, true)
    );
    assert!(is_free(Some(&retired), &AT));
    assert!(is_free(None, &AT));
    assert!(!is_free(Some(&row(OTHER)), &AT));
}

/// The old holder of a retired id, its id the registry's to assign, is given a fresh
/// one even once the id is free again; configured, it takes it back as anyone would.
#[test]
fn the_old_holder_of_a_retired_id_is_given_a_fresh_one_when_its_id_is_assigned() {
    let retired = Row {
        retired: true,
        high_water: NOW - MARGIN - 1,
        ..row(MINE)
    };
    assert!(is_free(Some(&retired), &AT));
    let assigned = claimant(Some(MINE), Want::Pinned(7));
    assert!(matches!(
        decide(&assigned, 7, Some(&retired), &AT),
        Decision::Fresh { .. }
    ));
    let configured = claimant(Some(MINE), Want::Configured(7));
    assert_eq!(
        decide(&configured, 7, Some(&retired), &AT),
        take(NOW - MARGIN - 1, 5, true)
    );
}

#[test]
fn the_clock_offset_is_read_at_the_midpoint_of_the_round_trip() {
    assert_eq!(clock_offset(1_000, 1_010, 1_005), 0);
    assert_eq!(clock_offset(1_000, 1_010, 1_000 - 3_600_000), 3_600_005);
    assert_eq!(clock_offset(1_000, 1_100, 1_200), -150);
}

#[test]
fn a_lease_ends_lease_ms_after_the_heartbeat_was_sent() {
    let ceiling = Lease::ceiling_for(NOW, i64::MIN, 3_000, 2_000);
    assert_eq!(ceiling, NOW + 3_000);
    let lease = Lease::granted(50, ceiling, 3_000);
    assert!(lease.runs_at(3_049));
    assert!(!lease.runs_at(3_050));
    // A generator ahead of the clock (a floor from a takeover, a crash restart's, a clock set
    // back): the room past its position, never a lease (crash restarts in a row would add a
    // lease each), and a lease past the clock once that is later.
    assert_eq!(
        Lease::ceiling_for(NOW, NOW + 600_000, 30_000, 15_000),
        NOW + 615_000
    );
    assert_eq!(
        Lease::ceiling_for(NOW, NOW + 10_000, 30_000, 15_000),
        NOW + 30_000
    );
    assert_eq!(heartbeat_interval_ms(3_000), 1_000);
    assert_eq!(heartbeat_interval_ms(10), 100);
}

#[test]
fn a_restart_between_the_claims_intent_and_the_registrys_commit_is_the_holder() {
    // The state file names the generation it was claiming (g + 1); the registry did not commit
    // it and still says g: the same server, continuing above the mark, at a newer generation.
    let me = mine_at(MINE.generation + 1);
    let row = gone(MINE);
    assert_eq!(
        decide(&me, 7, Some(&row), &AT),
        resume(row.high_water, MINE.generation + 1)
    );
    // Two generations ahead is no intent of this row's: a copy of something else.
    let me = mine_at(MINE.generation + 2);
    assert_eq!(
        decide(&me, 7, Some(&row), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::StaleCopy
        }
    );
}

#[test]
fn a_mark_far_ahead_of_the_registrys_clock_is_refused_as_a_clock_fault() {
    let year = 365 * 86_400_000;
    let ahead = Row {
        lease_until: NOW - 1,
        absent_since: NOW - 1 - AT.lease_ms,
        high_water: NOW + year,
        ..row(OTHER)
    };
    let refusal = Refusal::MarkAhead {
        mark: NOW + year,
        now: NOW,
    };
    let configured = claimant(None, Want::Configured(7));
    assert_eq!(
        decide(&configured, 7, Some(&ahead), &AT),
        Decision::Refuse { node: 7, refusal }
    );
    let pinned = claimant(Some(OTHER), Want::Pinned(7));
    assert_eq!(
        decide(&pinned, 7, Some(&ahead), &AT),
        Decision::Fresh {
            not: Some((7, refusal))
        }
    );
    // A fenced holder's mark leads by its lease: taken over as usual.
    let fenced = Row {
        high_water: NOW + AT.lease_ms + MARGIN,
        ..ahead
    };
    assert_eq!(
        decide(&configured, 7, Some(&fenced), &AT),
        take(fenced.high_water, OTHER.generation + 1, false)
    );
}

/// A mark that leads the registry's clock by the holder's own lead (a floor its IDs resumed from,
/// or a mark left by a build whose crash restarts each resumed a lease past the last): the
/// holder's own restart takes it (its reservation reaches that far already), where a copy whose
/// reservation is older, or another server, is refused it.
#[test]
fn a_mark_ahead_by_the_holders_own_lead_is_its_own_restarts() {
    let lead = 5 * 60_000;
    let ahead = Row {
        lease_until: NOW - 1,
        absent_since: NOW - 1 - AT.lease_ms,
        high_water: NOW + lead + AT.lease_ms,
        ..row(MINE)
    };
    let restart = Claimant {
        reserved: NOW + lead,
        ..mine_at(MINE.generation)
    };
    assert_eq!(
        decide(&restart, 7, Some(&ahead), &AT),
        resume(ahead.high_water, MINE.generation + 1)
    );
    let refusal = Refusal::MarkAhead {
        mark: ahead.high_water,
        now: NOW,
    };
    for other in [
        // An older copy of it: its reservation is an hour old.
        Claimant {
            reserved: NOW - 3_600_000,
            ..mine_at(MINE.generation)
        },
        // Another server, however far its own reservation reaches.
        Claimant {
            reserved: NOW + lead,
            ..claimant(Some(OTHER), Want::Configured(7))
        },
    ] {
        assert_eq!(
            decide(&other, 7, Some(&ahead), &AT),
            Decision::Refuse { node: 7, refusal }
        );
    }
}

#[test]
fn a_registry_named_with_its_standbys_is_tried_one_host_at_a_time() {
    let h = |host: &str, port: &str| Host {
        host: Some(host.into()),
        hostaddr: None,
        port: Some(port.into()),
    };
    assert_eq!(
        hosts(Some("db1,db2"), None, Some("5432,5433")),
        Some(vec![h("db1", "5432"), h("db2", "5433")])
    );
    // One port for every host.
    assert_eq!(
        hosts(Some("db1,db2"), None, Some("5432")),
        Some(vec![h("db1", "5432"), h("db2", "5432")])
    );
    assert_eq!(
        hosts(None, Some("10.0.0.1,10.0.0.2"), None),
        Some(vec![
            Host {
                host: None,
                hostaddr: Some("10.0.0.1".into()),
                port: None
            },
            Host {
                host: None,
                hostaddr: Some("10.0.0.2".into()),
                port: None
            },
        ])
    );
    // One host, none, or lists libpq refuses: libpq's own connection.
    assert_eq!(hosts(Some("db1"), None, Some("5432")), None);
    assert_eq!(hosts(None, None, None), None);
    assert_eq!(hosts(Some("db1,db2"), None, Some("1,2,3")), None);
}

#[test]
fn the_node_ids_used_before_are_recorded_all_but_the_one_claimed_by_name() {
    assert_eq!(used_before(&[3, 4], Want::Any), vec![3, 4]);
    assert_eq!(used_before(&[3, 4], Want::Configured(3)), vec![4]);
    assert_eq!(used_before(&[3, 4], Want::Pinned(4)), vec![3]);
    assert_eq!(used_before(&[], Want::Any), Vec::<u32>::new());
}

#[test]
fn a_heartbeat_is_judged_by_the_row_not_by_the_lock() {
    assert_eq!(beat(true, true), Beat::Extended { locked: true });
    assert_eq!(beat(true, false), Beat::Extended { locked: false });
    assert_eq!(beat(false, false), Beat::Lost);
    assert_eq!(beat(false, true), Beat::Lost);
}

#[test]
fn only_an_id_whose_holder_is_gone_is_retired() {
    let gone = Row {
        lease_until: NOW - 1,
        absent_since: NOW - 1 - AT.lease_ms,
        ..row(OTHER)
    };
    assert_eq!(may_retire(Some(&gone), NOW), Ok(()));
    assert_eq!(
        may_retire(
            Some(&Row {
                connected: true,
                same_label: false,
                stray: false,
                ..gone
            }),
            NOW
        ),
        Err(Unretirable::Connected)
    );
    // Not connected (the registry restarted under it, or it is cut off) but within its lease:
    // it may still be making IDs.
    assert_eq!(
        may_retire(Some(&row(OTHER)), NOW),
        Err(Unretirable::LeaseRuns {
            until: NOW + 10_000
        })
    );
    assert_eq!(
        may_retire(
            Some(&Row {
                retired: true,
                ..gone
            }),
            NOW
        ),
        Err(Unretirable::NoLiveRow)
    );
    assert_eq!(may_retire(None, NOW), Err(Unretirable::NoLiveRow));
}

/// A session under the claimant's own label and token is never ended for it nor
/// taken for the claimant's own: a clone of a VM carries the whole label. The claimant waits
/// while patient (its own old session ends within about a lease of its host going); then a
/// configured id is refused as a copy's, a pinned one gives way to a fresh id. A session
/// under another label is a copy's at once.
#[test]
fn a_session_under_the_claimants_own_label_is_waited_for_never_taken() {
    let open = Row {
        connected: true,
        same_label: true,
        stray: false,
        ..row(MINE)
    };
    let patient = |wanted| from_disk(claimant(Some(MINE), wanted));
    let impatient = |wanted| Claimant {
        patient: false,
        ..from_disk(claimant(Some(MINE), wanted))
    };
    for wanted in [Want::Configured(7), Want::Pinned(7)] {
        assert_eq!(
            decide(&patient(wanted), 7, Some(&open), &AT),
            Decision::Refuse {
                node: 7,
                refusal: Refusal::OpenSession
            }
        );
    }
    assert_eq!(
        decide(&impatient(Want::Configured(7)), 7, Some(&open), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::CopyOfLiveHolder
        }
    );
    assert_eq!(
        decide(&impatient(Want::Pinned(7)), 7, Some(&open), &AT),
        Decision::Fresh {
            not: Some((7, Refusal::CopyOfLiveHolder))
        }
    );
    // Under another label: a copy of the running holder, however patient.
    let elsewhere = Row {
        same_label: false,
        stray: false,
        ..open
    };
    assert_eq!(
        decide(&patient(Want::Pinned(7)), 7, Some(&elsewhere), &AT),
        Decision::Fresh {
            not: Some((7, Refusal::CopyOfLiveHolder))
        }
    );
    // Another server's session under the same label (a label is no identity either way).
    assert_eq!(
        decide(&claimant(Some(OTHER), Want::Pinned(7)), 7, Some(&open), &AT),
        Decision::Fresh {
            not: Some((7, Refusal::HeldByAnother { connected: true }))
        }
    );
    // Once the session is gone, the restart waits for a holder seen lately, then takes its
    // id over.
    let ended = Row {
        connected: false,
        ..open
    };
    assert!(matches!(
        decide(&impatient(Want::Pinned(7)), 7, Some(&ended), &AT),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HolderMayReturn { .. }
        }
    ));
    let later = Bounds {
        now: ended.absent_since + holder_may_return_ms(AT.lease_ms, MARGIN),
        ..AT
    };
    assert!(matches!(
        decide(&impatient(Want::Pinned(7)), 7, Some(&ended), &later),
        Decision::Take {
            node: 7,
            own: false,
            ..
        }
    ));
}

#[test]
fn a_vanished_holders_session_ends_within_about_a_lease() {
    for lease_ms in [1_000, 3_000, 30_000, 300_000] {
        let k = keepalives(lease_ms);
        assert!(k.idle_s >= 1 && k.interval_s >= 1);
        let gone_after_ms = (k.idle_s + k.interval_s * k.probes) * 1_000;
        assert!(
            gone_after_ms <= lease_ms.max(4_000),
            "lease {lease_ms}: {gone_after_ms}"
        );
        // An answer that froze on its way is given up on as soon.
        assert!(k.user_timeout_ms <= lease_ms.max(1_000), "lease {lease_ms}");
        // A session silent behind a hung proxy within two leases, never a live holder's (it
        // heartbeats every third of a lease, each exchange within a third).
        let beat = heartbeat_interval_ms(lease_ms);
        assert!(
            k.idle_session_ms <= (2 * lease_ms).max(2_000),
            "lease {lease_ms}"
        );
        assert!(
            k.idle_session_ms >= 2 * beat + lease_ms / 3,
            "lease {lease_ms}"
        );
    }
}

#[test]
fn a_token_is_written_as_32_lowercase_hex_digits_and_read_only_from_such() {
    assert_eq!(Token(0).to_string(), "0".repeat(32));
    assert_eq!(Token(0xfeed).to_string(), format!("{}feed", "0".repeat(28)));
    assert_eq!(Token(u128::MAX).to_string(), "f".repeat(32));
    for token in [
        0,
        0xfeed,
        u128::MAX,
        0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
    ] {
        assert_eq!(Token(token).to_string().parse(), Ok(Token(token)));
    }
    assert_eq!("F".repeat(32).parse(), Ok(Token(u128::MAX)));
    let signed = format!("+{}", "f".repeat(31));
    let (short, long, spaced) = (
        "f".repeat(31),
        "0".repeat(33),
        format!(" {}", "f".repeat(31)),
    );
    for bad in [signed, short, long, spaced, "g".repeat(32), String::new()] {
        assert_eq!(bad.parse::<Token>(), Err(()), "{bad:?} is not a token");
    }
}

/// A server whose history was lost is given an id only by a registry that has
/// recorded its cluster (every id it used is a row there); one whose history is known, by any.
#[test]
fn a_lost_history_is_vouched_for_only_by_a_registry_that_has_seen_the_cluster() {
    let lost = Claimant {
        history_lost: true,
        ..claimant(None, Want::Any)
    };
    assert_eq!(vouched(&lost, false), Err(Refusal::HistoryLost));
    assert_eq!(vouched(&lost, true), Ok(()));
    let known = claimant(None, Want::Any);
    assert_eq!(vouched(&known, false), Ok(()));
    assert_eq!(vouched(&known, true), Ok(()));
}

fn layout_rows(layout: &str, rows: u64, first_node: u32, first_claimed_at: i64) -> LayoutRows {
    LayoutRows {
        layout: layout.into(),
        rows,
        first_node,
        first_claimed_at,
    }
}

/// Two layouts with as many rows each both claim; the first to claim once more is the fleet's,
/// and the other's claims (its servers' restarts too) are refused from then on, as FLEETS says
/// (a registry serves one fleet).
#[test]
fn of_two_layouts_with_as_many_rows_the_first_to_claim_once_more_is_the_fleets() {
    let tie = [layout_rows("A", 2, 0, 100), layout_rows("B", 2, 900, 50)];
    assert_eq!(check_layout(&tie, "A"), Ok(Some(&tie[1])));
    assert_eq!(check_layout(&tie, "B"), Ok(Some(&tie[0])));
    let b_ahead = [layout_rows("A", 2, 0, 100), layout_rows("B", 3, 900, 50)];
    assert_eq!(check_layout(&b_ahead, "A"), Err(&b_ahead[1]));
}

/// A row of another layout blocks no claim of the fleet's layout, and is named
/// as a stray; a claimant of another layout than the fleet's (the most rows') is refused,
/// naming the fleet's oldest row.
#[test]
fn a_row_of_another_layout_is_a_stray_to_the_fleet_and_its_layout_still_refused() {
    assert_eq!(check_layout(&[], "A"), Ok(None));
    // One server's fleet and one junk row: neither outweighs the other; the fleet goes on.
    let one = [layout_rows("A", 1, 0, 100), layout_rows("B", 1, 900, 50)];
    assert_eq!(check_layout(&one, "A"), Ok(Some(&one[1])));
    assert_eq!(check_layout(&one[..1], "A"), Ok(None));
    let fleet = [
        layout_rows("A", 3, 0, 100),
        layout_rows("C", 1, 901, 300),
        layout_rows("B", 1, 900, 200),
    ];
    assert_eq!(
        check_layout(&fleet, "A"),
        Ok(Some(&fleet[2])),
        "the oldest stray"
    );
    // A server of a stray's layout, or of none in the table: the fleet's oldest row named.
    assert_eq!(check_layout(&fleet, "B"), Err(&fleet[0]));
    assert_eq!(check_layout(&fleet, "D"), Err(&fleet[0]));
    // Of two layouts with more rows than the claimant's, the one of the most.
    let two = [layout_rows("A", 2, 3, 100), layout_rows("A2", 4, 1, 190)];
    assert_eq!(check_layout(&two, "B"), Err(&two[1]));
}

/// A claim its holder released (its renewer stopped) is taken at once by a claimant from disk
/// that started after a clean stop, where the holder ran, and has not met a running holder of
/// its token: the holder's planned restart. A claimant that started otherwise (a crash, a copy
/// of a running server), elsewhere (a copy of the stopped data directory, every file of it the
/// holder's), or that met the holder live waits for it, as for a claim not released.
#[test]
fn a_released_claim_is_taken_at_once_only_by_a_clean_start_in_its_place_that_met_no_holder() {
    let released = Row {
        released: true,
        ..row(MINE)
    };
    let until = released.absent_since + holder_may_return_ms(AT.lease_ms, MARGIN);
    let planned = from_disk(claimant(Some(MINE), Want::Configured(7)));
    assert_eq!(
        decide(&planned, 7, Some(&released), &AT),
        take(released.high_water, MINE.generation + 1, false)
    );
    let waits = Decision::Refuse {
        node: 7,
        refusal: Refusal::HolderMayReturn { until },
    };
    let crashed = Claimant {
        after_clean_stop: false,
        ..planned
    };
    assert_eq!(decide(&crashed, 7, Some(&released), &AT), waits);
    let met = Claimant {
        met_holder: true,
        ..planned
    };
    assert_eq!(decide(&met, 7, Some(&released), &AT), waits);
    let cold_copy = Claimant {
        place: PLACE + 1,
        ..planned
    };
    assert_eq!(decide(&cold_copy, 7, Some(&released), &AT), waits);
    let placeless = Row {
        place: None,
        ..released
    };
    assert_eq!(decide(&planned, 7, Some(&placeless), &AT), waits);
    assert!(Refusal::HolderMayReturn { until }.met_holder());
    assert!(Refusal::OpenSession.met_holder() && Refusal::CopyOfLiveHolder.met_holder());
    assert!(!Refusal::HeldByAnother { connected: true }.met_holder());
    // Not released: the planned restart's claimant waits too.
    assert_eq!(decide(&planned, 7, Some(&row(MINE)), &AT), waits);
}

/// A row of another layout blocks its own id only: an id the claimant's state file pins there
/// (its own claim's intent, not committed) is given up for a fresh one, however long the row's
/// lease runs; a configured id stays refused. A row of the claimant's own layout, held by
/// another and not connected, is waited for (it may be the claimant's own takeover).
#[test]
fn a_row_of_another_layout_under_a_pinned_id_is_given_up_for_a_fresh_one() {
    let stray = Row {
        stray: true,
        lease_until: i64::MAX,
        boot: None,
        ..row(OTHER)
    };
    let refusal = Refusal::HeldByAnother { connected: false };
    let pinned = from_disk(claimant(Some(MINE), Want::Pinned(7)));
    assert_eq!(
        decide(&pinned, 7, Some(&stray), &AT),
        Decision::Fresh {
            not: Some((7, refusal))
        }
    );
    let configured = claimant(None, Want::Configured(7));
    assert_eq!(
        decide(&configured, 7, Some(&stray), &AT),
        Decision::Refuse { node: 7, refusal }
    );
    let own_layout = Row {
        stray: false,
        ..stray
    };
    assert_eq!(
        decide(&pinned, 7, Some(&own_layout), &AT),
        Decision::Refuse { node: 7, refusal }
    );
}

#[test]
fn a_release_lowers_the_mark_only_from_the_value_its_claim_wrote() {
    use table::{released_mark, Lowering};
    let lower = Some(Lowering {
        from: 5_000,
        mark: 3_000,
    });
    // Still the claim's own value: it comes down.
    assert_eq!(released_mark(5_000, lower, 2_000), (3_000, true));
    // Raised by anyone else since (a joiner's IDs): it stays, or rises to what the claim covers.
    assert_eq!(released_mark(9_000, lower, 2_000), (9_000, false));
    assert_eq!(released_mark(4_000, lower, 6_000), (6_000, false));
    // Nothing to lower from: no mark is a mark of no one's.
    let from_none = Some(Lowering {
        from: i64::MIN,
        mark: 3_000,
    });
    assert_eq!(
        released_mark(i64::MIN, from_none, i64::MIN),
        (i64::MIN, false)
    );
    assert_eq!(released_mark(i64::MIN, None, 2_000), (2_000, false));
}
