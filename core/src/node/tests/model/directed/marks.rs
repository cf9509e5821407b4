//! Directed cases on the registry's mark: what a joiner's IDs raised stays raised through a clean
//! stop, a server switched to fenced mode while cut off makes no ID past it, and a server running
//! ahead of its clock makes IDs below it after an idle spell.

use super::*;

/// The mark a joiner's IDs raised stays raised through the clean stop of the id's holder: a
/// server that made IDs under node id 0 without a registry, its clock ahead, joins while
/// member 0 holds 0 (fenced); member 0 then stops cleanly, releasing its claim, and member 1,
/// configured with 0, takes it over. Its IDs start above the joiner's. The release used to
/// bring the mark down to the holder's own reservation whatever had raised it, and member 1
/// made the joiner's IDs again: those 40 s ahead, whose join raised the mark; and those a
/// second and a half ahead, below the holder's own ceiling, whose join left the mark's value
/// as the holder wrote it (member 1's clock 1.5 s behind, within the margin).
#[test]
fn a_clean_stop_never_lowers_the_mark_a_joiners_ids_raised() {
    joiner_then_clean_stop(40_000, 0);
    joiner_then_clean_stop(1_500, -1_500);
}

/// [`a_clean_stop_never_lowers_the_mark_a_joiners_ids_raised`] with the joiner's clock `lead`
/// ms ahead and the next holder's `offset` ms off.
fn joiner_then_clean_stop(lead: i64, offset: i64) {
    use Act::*;
    let mut fleet = Fleet::new(&[Some(0), Some(0), None, None], true);
    let done = Commit::Done;
    for a in [
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Call { s: 0, want: 10 },
        // Member 1 stays out of reach until member 0 is gone.
        Link { s: 1, up: false },
        Clock { s: 1, offset },
    ] {
        fleet.step(a);
    }
    let joined_at = fleet.now;
    let join = Join {
        s: 2,
        node: 0,
        lead,
        span: 20,
    };
    fleet.step(join);
    for a in [
        Round { s: 2, commit: done },
        Round { s: 2, commit: done },
        // Member 0 stops cleanly (its renewer's exit releases the claim) and stays down.
        Release {
            s: 0,
            restart: false,
        },
        Link { s: 0, up: false },
        Crash { s: 0 },
        Wait { ms: LEASE + 1 },
        Notice,
        Link { s: 1, up: true },
        Round { s: 1, commit: done },
        Round { s: 1, commit: done },
    ] {
        fleet.step(a);
    }
    assert_eq!(
        fleet.members[2].issuer.node().id,
        1,
        "the joiner took a fresh id"
    );
    assert_eq!(fleet.members[1].issuer.node().id, 0);
    assert!(
        fleet.members[1].issuer.issuing(),
        "member 1 took node id 0 over"
    );
    // Member 1, heartbeating, makes IDs on its clock in the milliseconds the joiner made its
    // IDs in.
    let target = joined_at + lead + 10;
    assert!(
        fleet.now + offset <= target,
        "member 1 reached the joiner's time already"
    );
    while fleet.now + offset + 1_000 < target {
        fleet.step(Wait { ms: 1_000 });
        fleet.step(Round { s: 1, commit: done });
    }
    let ms = target - fleet.now - offset;
    fleet.step(Wait { ms });
    for _ in 0..5 {
        fleet.step(Call { s: 1, want: 99 });
        fleet.step(Wait { ms: 1 });
    }
}

/// A server switched from available to fenced mode while cut off from the registry makes no
/// ID until a fenced heartbeat grants it a ceiling: member 0 (available) holds node id 0, is cut
/// off right after a heartbeat and switched to fenced; member 1 (fenced, configured with 0, its
/// clock a second behind: within the margin) takes 0 over once member 0's lease has run out, and
/// makes IDs in the milliseconds member 0 was still in its lease. Member 0 used to go on issuing
/// uncapped until its lease ran out, up to a lease past the mark member 1 starts above, and
/// member 1 made those IDs again.
#[test]
fn a_switch_to_fenced_while_cut_off_makes_no_id_past_the_mark() {
    use Act::*;
    let mut fleet = Fleet::new(&[Some(0), Some(0), None, None], false);
    let done = Commit::Done;
    for a in [
        Mode { s: 1, fenced: true },
        Clock {
            s: 1,
            offset: -MARGIN / 2,
        },
        Link { s: 1, up: false },
        Round { s: 0, commit: done },
        Round { s: 0, commit: done },
        Call { s: 0, want: 10 },
        Round { s: 0, commit: done },
        Link { s: 0, up: false },
        Mode { s: 0, fenced: true },
    ] {
        fleet.step(a);
    }
    let cut_at = fleet.now;
    // Member 0 is asked for IDs throughout its lease, each millisecond a few hundred apart.
    for _ in 0..(LEASE / 250) {
        fleet.step(Wait { ms: 250 });
        fleet.step(Round { s: 0, commit: done });
        fleet.step(Call { s: 0, want: 10 });
    }
    assert!(
        !fleet.members[0].issuer.issuing(),
        "member 0's lease ran out"
    );
    for a in [
        Notice,
        Link { s: 1, up: true },
        Round { s: 1, commit: done },
        Round { s: 1, commit: done },
    ] {
        fleet.step(a);
    }
    assert!(
        fleet.members[1].issuer.issuing(),
        "member 1 took node id 0 over"
    );
    assert_eq!(fleet.members[1].issuer.node().id, 0);
    // Member 1's clock is a second behind: it makes IDs in the milliseconds member 0 was
    // asked for them in, the last second of its lease.
    let from = cut_at + LEASE - 1_000 + MARGIN / 2;
    assert!(
        fleet.now <= from + 250,
        "member 1 came too late to meet them"
    );
    while fleet.now < cut_at + LEASE + MARGIN / 2 + 250 {
        fleet.step(Call { s: 1, want: 10 });
        fleet.step(Wait { ms: 1 });
        if fleet.now % 500 == 0 {
            fleet.step(Round { s: 1, commit: done });
        }
    }
}

/// A server whose IDs run ahead of its clock by more than a lease (here a joiner's, 40 s ahead;
/// a step of the clock back does the same) stays idle for longer than a lease; its steady clock
/// keeps the lead, its reservation does not. The heartbeat after the idle spell records a mark a
/// lease past where its IDs now are, not past its old reservation: in available mode its next
/// IDs are below it (nothing counted, checked at every call), in fenced mode its next call is
/// granted. The mark used to be a lease past the reservation: available mode counted the IDs
/// past it right after a heartbeat, fenced mode refused calls until heartbeats had raised the
/// ceiling a lease at a time.
#[test]
fn a_server_running_ahead_of_its_clock_makes_ids_below_the_mark_after_an_idle_spell() {
    use Act::*;
    let done = Commit::Done;
    for fenced in [true, false] {
        let mut fleet = directed(
            &[None, None, None, None],
            fenced,
            &[
                Join {
                    s: 2,
                    node: 0,
                    lead: 40_000,
                    span: 6,
                },
                Round { s: 2, commit: done },
                Call { s: 2, want: 1 },
                Wait { ms: 5_000 },
                Round { s: 2, commit: done },
            ],
        );
        let before = fleet.members[2].issuer.generator().stats().issued;
        fleet
            .call(2, 10)
            .unwrap_or_else(|e| panic!("fenced {fenced}: {e}"));
        let m = &fleet.members[2];
        assert_eq!(
            m.issuer.generator().stats().issued - before,
            10,
            "fenced {fenced}: the call after the idle spell made too few IDs (ceiling {}, \
             reserved to {})",
            m.issuer.node().ceiling,
            m.issuer.generator().reserved_until()
        );
        assert_eq!(m.issuer.ids_past_mark(), 0, "fenced {fenced}");
    }
}
