use super::*;
use crate::layout::{Layout, DEFAULT_LAYOUT};
use crate::registry::Lease;

const T0: i64 = 1_800_000_000_000;
/// The start of the server the unit cases start.
const BOOT: Boot = Boot {
    value: 0xb007,
    after_clean_stop: true,
    place: 0x91ace,
};
const TOKEN: Identity = Identity {
    token: 0xfeed,
    generation: 3,
};

fn layout() -> Layout {
    DEFAULT_LAYOUT
}

fn reservation(until: i64, node: Option<u32>, identity: Option<Identity>) -> Reservation {
    Reservation {
        until,
        layout: layout(),
        node,
        history: History::EMPTY,
        system: Some(1),
        identity,
    }
}

fn record(until: i64, node: u32, identity: Option<Identity>) -> Record {
    Record {
        until,
        layout: layout(),
        node: Some(node),
        identity,
    }
}

const PLAIN: Settings = Settings {
    configured: Some(5),
    registry: false,
};

const ASSIGNED: Settings = Settings {
    configured: None,
    registry: true,
};

#[test]
fn a_fresh_server_starts_with_nothing_owed_and_refuses_without_a_node_id() {
    let start = Node::start(&Found::Nothing, PLAIN, false, BOOT);
    assert_eq!(start.floor, i64::MIN);
    assert_eq!(start.node.refusing, Refusing::Nothing);
    assert_eq!(start.node.id, 5);
    let unset = Settings {
        configured: None,
        registry: false,
    };
    assert_eq!(
        Node::start(&Found::Nothing, unset, false, BOOT)
            .node
            .refusing,
        Refusing::NodeUnset
    );
    assert_eq!(
        Node::start(&Found::Nothing, ASSIGNED, true, BOOT).node,
        Node {
            refusing: Refusing::AwaitingClaim,
            id: 0,
            history: History::EMPTY,
            identity: None,
            ceiling: i64::MAX,
            gives_way: false,
            started_as_standby: true,
            history_lost: false,
            mark: None,
            boot: BOOT.value,
            after_clean_stop: true,
            met_holder: false,
            place: BOOT.place,
        }
    );
}

#[test]
fn the_upgrade_marker_refuses_whatever_the_settings() {
    for settings in [PLAIN, ASSIGNED] {
        let start = Node::start(&Found::AwaitingOldStateFile, settings, false, BOOT);
        assert_eq!(start.node.refusing, Refusing::AwaitingOldStateFile);
        assert!(!start.node.may_claim());
    }
}

#[test]
fn a_restart_resumes_above_its_reservation_and_keeps_its_claim() {
    let found = Found::Reservation(reservation(T0, Some(5), Some(TOKEN)));
    let start = Node::start(
        &found,
        Settings {
            configured: Some(5),
            registry: true,
        },
        false,
        BOOT,
    );
    assert_eq!(start.floor, T0);
    assert_eq!(start.node.identity, Some(TOKEN));
    assert_eq!(start.switched, None);
    // With the id the registry's to assign, the file pins it.
    let start = Node::start(&found, ASSIGNED, false, BOOT);
    assert_eq!((start.node.id, start.node.identity), (5, Some(TOKEN)));
}

#[test]
fn a_new_node_id_drops_the_old_ones_lead_and_keeps_it_in_the_history() {
    let found = Found::Reservation(reservation(T0 + 3_600_000, Some(5), None));
    let start = Node::start(
        &found,
        Settings {
            configured: Some(6),
            registry: false,
        },
        false,
        BOOT,
    );
    assert_eq!(start.floor, i64::MIN);
    assert!(start.node.history.covers(5));
    assert_eq!(
        start.switched,
        Some(Switch {
            from: Some(5),
            to: 6,
            lead_dropped: true
        })
    );
    // Written before the server goes on, and read back as it was decided.
    let rewrite = start.rewrite.expect("a switch is written");
    assert_eq!(
        (rewrite.until, rewrite.node, rewrite.history),
        (i64::MIN, Some(6), start.node.history)
    );
    let mut buffer = [0u8; state_file::MAX_LEN];
    let file = Reservation {
        until: rewrite.until,
        node: rewrite.node,
        history: rewrite.history,
        ..reservation(0, None, None)
    };
    let bytes = state_file::format(&file, &mut buffer).to_vec();
    assert_eq!(
        state_file::parse(&bytes),
        Ok(state_file::State::Reservation(file))
    );
    let again = Node::start(
        &Found::Reservation(file),
        Settings {
            configured: Some(6),
            registry: false,
        },
        false,
        BOOT,
    );
    assert_eq!(
        (again.floor, again.switched, again.rewrite),
        (i64::MIN, None, None)
    );
}

#[test]
fn without_a_node_id_every_node_id_owes_the_files_reservation() {
    let found = Found::Reservation(reservation(T0, Some(5), None));
    let unset = Settings {
        configured: None,
        registry: false,
    };
    let start = Node::start(&found, unset, false, BOOT);
    assert_eq!(start.floor, T0);
    assert!(start.node.history.covers(77));
    assert_eq!(start.node.refusing, Refusing::NodeUnset);
}

/// The primary moved to a node id the standby never used, reserving at its clock, below the
/// standby's floor (the old node id's lead). The floor does not rise, but the standby must
/// remember node 6: a restart with node 6 then resumes above its reservations.
#[test]
fn a_replayed_node_id_is_written_even_when_the_floor_does_not_rise() {
    let found = Found::Reservation(reservation(T0 + 3_600_000, Some(5), None));
    let mut node = Node::start(&found, PLAIN, true, BOOT).node;
    let mut generator = Generator::resume(T0 + 3_600_000);
    let durable = node
        .replay(&mut generator, &record(T0 + 1_000, 6, None), Some(5))
        .expect("the history changed: the file must say so");
    assert!(durable.history.covers(6));
    assert_eq!(durable.history.until, T0 + 1_000);
    assert_eq!(durable.until, T0 + 3_600_000);
    assert_eq!(durable.node, Some(5));
    // Restarted with node 6 from that file: above node 6's reservation.
    let file = Reservation {
        until: durable.until,
        node: durable.node,
        history: durable.history,
        ..reservation(0, None, None)
    };
    let start = Node::start(
        &Found::Reservation(file),
        Settings {
            configured: Some(6),
            registry: false,
        },
        false,
        BOOT,
    );
    assert!(start.floor >= T0 + 1_000, "floor {}", start.floor);
    // The next record of node 6 raises its history's bound: written again.
    assert!(node
        .replay(&mut generator, &record(T0 + 2_000, 6, None), Some(5))
        .is_some());
    // A record that changes nothing is not written.
    assert_eq!(
        node.replay(&mut generator, &record(T0 + 2_000, 6, None), Some(5)),
        None
    );
}

#[test]
fn a_replayed_claim_is_handed_on_and_the_old_node_id_joins_the_history() {
    let mut node = Node::start(&Found::Nothing, ASSIGNED, true, BOOT).node;
    let mut generator = Generator::new();
    let durable = node
        .replay(&mut generator, &record(T0, 2, Some(TOKEN)), None)
        .expect("written");
    assert_eq!((durable.node, durable.identity), (Some(2), Some(TOKEN)));
    assert_eq!(node.id, 2);
    let next = Identity {
        generation: 4,
        ..TOKEN
    };
    let durable = node
        .replay(&mut generator, &record(T0 + 10, 3, Some(next)), None)
        .expect("written");
    assert!(durable.history.covers(2));
    assert!(durable.history.until >= T0 + 10);
    assert_eq!(node.id, 3);
}

#[test]
fn a_claim_switches_the_node_id_raises_the_floor_and_awaits_its_pin() {
    let found = Found::Reservation(reservation(T0, Some(2), Some(TOKEN)));
    let mut node = Node::start(&found, ASSIGNED, true, BOOT).node;
    let mut generator = Generator::resume(T0);
    let taken = Claim {
        node: 9,
        identity: Identity {
            token: 0xbeef,
            generation: 1,
        },
        floor: T0 + 500,
        lease: Lease::granted(0, T0 + 30_500, 30_000),
    };
    let durable = node.intend(&mut generator, &taken, true);
    assert_eq!(durable.node, Some(9));
    assert_eq!(durable.until, T0 + 500);
    assert!(durable.history.covers(2));
    assert_eq!(node.ceiling, T0 + 30_500);
    assert_eq!(node.refusing, Refusing::AwaitingClaim);
    assert!(!node.started_as_standby);
    assert!(generator.reserved_until() >= T0 + 500);
}

#[test]
fn a_fenced_claim_released_caps_the_reservations_at_the_mark_it_leaves() {
    let taken = Claim {
        node: 4,
        identity: TOKEN,
        floor: T0 + 500,
        lease: Lease::granted(0, T0 + 30_500, 30_000),
    };
    let intended = |fenced| {
        let mut node = Node::start(&Found::Nothing, ASSIGNED, false, BOOT).node;
        let mut generator = Generator::resume(T0);
        node.intend(&mut generator, &taken, fenced);
        (node, generator)
    };
    // Seen to hold: committed, pinned, published.
    let claimed = |fenced| {
        let (mut node, generator) = intended(fenced);
        let held = Holding::Held {
            pinned: true,
            lease: taken.lease,
        };
        node.publish(held, false, fenced, 0);
        assert_eq!(node.refusing, Refusing::Nothing);
        (node, generator)
    };
    // An intent whose commit was not seen (it failed, or its answer was lost): the row may
    // name that very claim for a copy carrying this server's token, whose mark it is.
    let (mut node, generator) = intended(true);
    node.publish(Holding::None { refused: false }, false, true, 0);
    assert_eq!(node.release(&generator), None);
    assert_eq!(node.ceiling, taken.lease.ceiling);
    // Fenced: the claim is released, its mark comes down from the lease's ceiling to the
    // durable reservation, and no renewal may pass it any more.
    let (mut node, generator) = claimed(true);
    let released = node
        .release(&generator)
        .expect("a fenced claim is released");
    assert_eq!(released.node, 4);
    assert_eq!(released.identity, TOKEN);
    let lower = released.lower.expect("its mark comes down");
    assert_eq!(lower.from, taken.lease.ceiling, "the mark the claim wrote");
    assert_eq!(lower.mark, generator.reserved_until());
    assert!(lower.mark < taken.lease.ceiling);
    assert_eq!(node.ceiling, lower.mark);
    // A heartbeat that found the mark where the claim left it keeps it the claim's own, at
    // the new ceiling; the release brings it down from there.
    let (mut node, generator) = claimed(true);
    let extended = Lease::granted(10_000, T0 + 40_000, 30_000);
    node.lease_extended(&extended, true, taken.lease.ceiling);
    let released = node.release(&generator).expect("its own mark");
    assert_eq!(released.lower.map(|l| l.from), Some(T0 + 40_000));
    // Raised by another (a server that joined with IDs made under the id): the mark is no
    // longer the claim's own, and its release leaves it where it is, at every later heartbeat
    // too; the claim is released all the same.
    let unlowered = |node: &mut Node, generator: &Generator| {
        let released = node.release(generator).expect("released");
        assert_eq!(released.lower, None);
    };
    let (mut node, generator) = claimed(true);
    node.lease_extended(&extended, true, taken.lease.ceiling + 1);
    unlowered(&mut node, &generator);
    assert_eq!(
        node.ceiling, extended.ceiling,
        "nothing lowered, nothing capped"
    );
    let later = Lease::granted(20_000, T0 + 50_000, 30_000);
    node.lease_extended(&later, true, extended.ceiling);
    unlowered(&mut node, &generator);
    // A renewal being written may end past the reservation read now: nothing is lowered.
    let (mut node, mut writing) = claimed(true);
    assert!(writing.start_rewrite().is_some());
    unlowered(&mut node, &writing);
    assert_eq!(node.ceiling, taken.lease.ceiling);
    // Available mode: the mark comes down as in fenced mode, but the ceiling stays (the
    // server goes on until its next claim, counting what it makes: `Issuer::release`).
    let (mut node, generator) = claimed(false);
    let released = node.release(&generator).expect("released");
    assert_eq!(
        released.lower.map(|l| l.mark),
        Some(generator.reserved_until())
    );
    assert_eq!(node.ceiling, taken.lease.ceiling, "nothing capped");
    // No claim of its own.
    let mut plain = Node::start(&Found::Nothing, PLAIN, false, BOOT).node;
    assert_eq!(plain.release(&generator), None);
}

#[test]
fn the_claimant_is_the_configured_id_the_pinned_one_or_any() {
    let found = Found::Reservation(reservation(T0, Some(2), Some(TOKEN)));
    let node = Node::start(&found, ASSIGNED, false, BOOT).node;
    assert_eq!(
        node.claimant(None, false, T0, true),
        (
            Claimant {
                identity: Some(TOKEN),
                wanted: Want::Pinned(2),
                reserved: T0,
                history_lost: false,
                patient: true,
                boot: BOOT.value,
                after_clean_stop: true,
                met_holder: false,
                mark: None,
                place: BOOT.place,
            },
            Some(2)
        )
    );
    assert_eq!(
        node.claimant(Some(7), false, T0, true).0.wanted,
        Want::Configured(7)
    );
    // A promoted standby told to take a fresh id gives up its primary's.
    let standby = Node::start(&found, ASSIGNED, true, BOOT).node;
    assert_eq!(
        standby.claimant(None, true, T0, true),
        (
            Claimant {
                identity: None,
                wanted: Want::Any,
                reserved: T0,
                history_lost: false,
                patient: true,
                boot: BOOT.value,
                after_clean_stop: true,
                met_holder: false,
                mark: None,
                place: BOOT.place,
            },
            None
        )
    );
}

/// A damaged state file moved aside leaves a claimant whose history is lost, until
/// its first claim (whose intent the state file then holds).
#[test]
fn a_damaged_state_file_leaves_the_history_lost_until_the_first_claim() {
    let mut node = Node::start(&Found::Damaged, ASSIGNED, false, BOOT).node;
    assert_eq!(node.refusing, Refusing::AwaitingClaim);
    let (claimant, recorded) = node.claimant(None, false, i64::MIN, true);
    assert!(claimant.history_lost);
    assert_eq!(
        (claimant.wanted, claimant.identity, recorded),
        (Want::Any, None, None)
    );
    let mut generator = Generator::resume(i64::MIN);
    let taken = Claim {
        node: 4,
        identity: TOKEN,
        floor: i64::MIN,
        lease: Lease::granted(0, T0, 3_000),
    };
    node.intend(&mut generator, &taken, true);
    assert!(!node.claimant(None, false, T0, true).0.history_lost);
    assert!(
        !Node::start(&Found::Nothing, ASSIGNED, false, BOOT)
            .node
            .claimant(None, false, T0, true)
            .0
            .history_lost
    );
}

#[test]
fn publish_says_why_ids_are_refused_and_never_overrides_the_upgrade_marker() {
    let mut node = Node::start(&Found::Nothing, ASSIGNED, false, BOOT).node;
    let lease = Lease::granted(1_000, T0, 3_000);
    let held = Holding::Held {
        pinned: true,
        lease,
    };
    node.lease_extended(&lease, true, i64::MIN);
    assert!(node.publish(held, false, true, 2_000));
    assert_eq!(node.refusing, Refusing::Nothing);
    assert!(!node.publish(held, false, true, 2_000), "unchanged");
    assert!(node.publish(held, false, true, 4_000));
    assert_eq!(node.refusing, Refusing::LeaseExpired);
    assert!(node.publish(held, false, false, 4_000));
    assert_eq!(node.refusing, Refusing::Nothing, "available mode");
    // Switched back to fenced: no ceiling since available mode lifted it, so no ID until a
    // fenced heartbeat grants one, whose lease then counts.
    assert!(node.publish(held, false, true, 2_000));
    assert_eq!(node.refusing, Refusing::AwaitingLease);
    node.lease_extended(&lease, true, i64::MIN);
    assert!(node.publish(held, false, true, 2_000));
    assert_eq!(node.refusing, Refusing::Nothing);
    assert!(node.publish(held, false, false, 4_000));
    assert!(node.publish(held, true, false, 4_000));
    assert_eq!(node.refusing, Refusing::ClockSkew);
    assert!(node.publish(Holding::Lost, true, false, 4_000));
    assert_eq!(node.refusing, Refusing::ClaimLost);
    assert!(node.publish(Holding::None { refused: true }, false, false, 0));
    assert_eq!(node.refusing, Refusing::ClaimRefused);
    let mut marked = Node::start(&Found::AwaitingOldStateFile, ASSIGNED, false, BOOT).node;
    assert!(!marked.publish(held, false, true, 2_000));
    assert_eq!(marked.refusing, Refusing::AwaitingOldStateFile);
}

/// A renewer that published a lease whose ceiling lies below the one the node reserves up to
/// (a heartbeat's ceiling not taken into the node, say) would let a fenced server make IDs past
/// its grant: the node refuses to publish it.
#[test]
#[should_panic(expected = "a fenced server would make IDs up to")]
fn a_fenced_node_never_makes_ids_under_a_ceiling_above_its_lease() {
    let mut node = Node::start(&Found::Nothing, ASSIGNED, false, BOOT).node;
    node.lease_extended(&Lease::granted(1_000, T0 + 1, 3_000), true, i64::MIN);
    let held = Holding::Held {
        pinned: true,
        lease: Lease::granted(1_000, T0, 3_000),
    };
    node.publish(held, false, true, 2_000);
}

#[test]
fn registry_labels_are_cut_at_a_character_boundary() {
    let mut status = RegistryStatus::NONE;
    status.set_label(&"é".repeat(70));
    assert_eq!(status.label(), "é".repeat(63));
}

mod model;

#[test]
fn the_holder_state_publishes_a_claim_once_pinned_and_a_loss_until_the_next_answer() {
    use crate::renewer::memory::Memory;
    let lease = Lease::granted(0, T0 + 30_000, 30_000);
    let mut holder = Memory::new();
    assert_eq!(holder.holding(), Holding::None { refused: false });
    assert_eq!(holder.next_contact_in(10_000), 1_000);
    holder.refused();
    assert_eq!(holder.holding(), Holding::None { refused: true });
    holder.taken(4, TOKEN, lease);
    assert!(holder.pin_due());
    assert_eq!(
        holder.holding(),
        Holding::Held {
            pinned: false,
            lease
        }
    );
    holder.pinned();
    assert!(!holder.pin_due());
    assert_eq!(holder.next_contact_in(10_000), 10_000);
    let later = Lease::granted(10_000, T0 + 40_000, 30_000);
    holder.extended(later, false);
    assert!(
        holder.needs_lock,
        "the lock is tried again at the next heartbeat"
    );
    assert_eq!(
        holder.holding(),
        Holding::Held {
            pinned: true,
            lease: later
        }
    );
    holder.lost();
    assert_eq!(holder.holding(), Holding::Lost);
    assert!(!holder.keeps_session(), "a lost claim's session is closed");
    holder.refused();
    assert_eq!(holder.holding(), Holding::None { refused: true });
    assert!(holder.keeps_session());
}

/// A renewer refused because a session under its own label holds the id waits
/// patiently for two leases from its first such refusal, then no longer; a claim taken, or
/// another refusal, starts the count anew.
#[test]
fn the_holder_waits_for_a_session_under_its_own_label_for_two_leases() {
    use crate::renewer::memory::Memory;
    const LEASE_MS: i64 = 3_000;
    let mut holder = Memory::new();
    assert!(holder.patient(0, LEASE_MS));
    holder.waits_for_session(1_000);
    assert_eq!(holder.holding(), Holding::None { refused: true });
    holder.waits_for_session(5_000);
    assert!(holder.patient(6_999, LEASE_MS));
    assert!(
        !holder.patient(7_000, LEASE_MS),
        "two leases from the first refusal"
    );
    holder.refused();
    assert!(
        holder.patient(7_000, LEASE_MS),
        "another refusal ends the wait"
    );
    holder.waits_for_session(8_000);
    holder.taken(4, TOKEN, Lease::granted(0, T0, LEASE_MS));
    assert!(
        holder.patient(100_000, LEASE_MS),
        "a claim taken ends the wait"
    );
}

#[test]
fn a_restarted_renewer_resumes_only_a_claim_made_and_pinned_since_the_start() {
    let lease = Lease::granted(0, T0 + 30_000, 30_000);
    let taken = Claim {
        node: 4,
        identity: TOKEN,
        floor: T0,
        lease,
    };
    let found = Found::Reservation(reservation(T0, Some(4), Some(TOKEN)));
    let mut node = Node::start(&found, ASSIGNED, false, BOOT).node;
    assert_eq!(
        node.resumable(lease),
        None,
        "the file's claim is not claimed yet"
    );
    let mut generator = Generator::resume(T0);
    node.intend(&mut generator, &taken, false);
    assert_eq!(node.resumable(lease), None, "not pinned yet");
    let pinned = Holding::Held {
        pinned: true,
        lease,
    };
    node.publish(pinned, false, false, 0);
    let held = node.resumable(lease).expect("made and pinned");
    assert_eq!((held.node, held.identity, held.pinned), (4, TOKEN, true));
    node.publish(Holding::Lost, false, false, 0);
    assert_eq!(node.resumable(lease), None, "a lost claim is claimed again");
    let mut standby = Node::start(&found, ASSIGNED, true, BOOT).node;
    standby.publish(pinned, false, false, 0);
    assert_eq!(standby.resumable(lease), None, "a promoted standby claims");
}

/// A copy of a holder's data directory (the same token and generation), refused
/// as such while the holder is connected, forgets the claim; when the holder's session is gone
/// for a second (its renewer restarting) with its lease running, the copy is refused, not
/// taken for the holder's restart. Its state file says so too.
#[test]
fn a_copy_found_out_disowns_the_claim_and_never_passes_for_the_holders_restart() {
    use crate::registry::{decide, Bounds, Decision, Refusal, Row};
    let configured = Settings {
        configured: Some(7),
        registry: true,
    };
    let found = Found::Reservation(reservation(T0, Some(7), Some(TOKEN)));
    let mut copy = Node::start(&found, configured, false, BOOT).node;
    let generator = Generator::resume(T0);
    let at = Bounds {
        now: T0 + 1_000,
        margin_ms: 2_000,
        lease_ms: 30_000,
    };
    let mut row = Row {
        node: 7,
        identity: TOKEN,
        retired: false,
        high_water: T0 + 30_000,
        lease_until: T0 + 20_000,
        connected: true,
        same_label: false,
        stray: false,
        // The running holder's, which the copy (started from its files) does not have.
        boot: Some(BOOT.value + 1),
        last_seen: T0,
        absent_since: T0,
        released: false,
        place: Some(BOOT.place + 1),
    };
    let judged = |node: &Node, row: &Row| {
        let (claimant, _) = node.claimant(Some(7), false, T0, false);
        decide(&claimant, 7, Some(row), &at)
    };
    let refusal = Refusal::CopyOfLiveHolder;
    assert_eq!(judged(&copy, &row), Decision::Refuse { node: 7, refusal });
    assert!(refusal.found_a_copy() && Refusal::StaleCopy.found_a_copy());
    assert!(!Refusal::HeldByAnother { connected: true }.found_a_copy());
    // The holder's renewer restarts: its session is gone, its lease runs. A copy that kept the
    // token would still not pass for the holder: it cannot prove it is the running server, and
    // waits for it to come back.
    row.connected = false;
    assert!(matches!(
        judged(&copy, &row),
        Decision::Refuse {
            refusal: Refusal::HolderMayReturn { .. },
            ..
        }
    ));
    let durable = copy.disown(&generator).expect("the file forgets the claim");
    assert_eq!((durable.identity, durable.node), (None, Some(7)));
    assert_eq!(copy.disown(&generator), None, "once");
    assert_eq!(
        judged(&copy, &row),
        Decision::Refuse {
            node: 7,
            refusal: Refusal::HeldByAnother { connected: false }
        }
    );
    // Taken over only once the holder's lease has run out and its session is gone.
    row.lease_until = at.now;
    row.absent_since = at.now - at.lease_ms;
    assert!(matches!(judged(&copy, &row), Decision::Take { .. }));
}

#[test]
fn a_place_is_the_same_for_the_same_directory_and_another_for_a_copy() {
    let here = Boot::place_of("db1\nmachine", 64_769, 1_310_721);
    assert_eq!(here, Boot::place_of("db1\nmachine", 64_769, 1_310_721));
    // Another directory, another file system, another host: each its own place.
    let elsewhere = [
        Boot::place_of("db1\nmachine", 64_769, 1_310_722),
        Boot::place_of("db1\nmachine", 64_770, 1_310_721),
        Boot::place_of("db2\nmachine", 64_769, 1_310_721),
    ];
    for (i, place) in elsewhere.iter().enumerate() {
        assert_ne!(*place, here, "copy {i}");
    }
}
