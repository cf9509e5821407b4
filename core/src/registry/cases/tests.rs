//! The table of cases against the decision it replaced, over every combination of the facts a
//! claim reads; and each case's grant against docs/FLEETS.md.

use super::*;
use crate::registry::{heartbeat_interval_ms, judge, Identity, MARK_AHEAD_SLACK_MS};

const NOW: i64 = 1_800_000_000_000;
const LEASE: i64 = 30_000;
const MARGIN: i64 = 5_000;
const AT: Bounds = Bounds {
    now: NOW,
    margin_ms: MARGIN,
    lease_ms: LEASE,
};
/// The row's claim.
const ROW: Identity = Identity {
    token: 0xfeed,
    generation: 4,
};
const BOOT: u64 = 0xb007;
const PLACE: u64 = 0x91ace;

/// The reference the table is checked against: `registry::judge` as it was written before the
/// table, one `match` whose arms' order was the rule, kept here word for word (its name aside),
/// but for the place a planned restart is asked for since the table (a cold copy of a stopped
/// data directory passed for its planned restart).
fn judge_before_the_table(claimant: &Claimant, row: &Row, at: &Bounds) -> Result<Taken, Refusal> {
    let now = at.now;
    let next = row.identity.generation.saturating_add(1);
    let same_token = claimant
        .identity
        .is_some_and(|me| me.token == row.identity.token);
    let own = claimant.identity.filter(|me| {
        same_token && (me.generation == row.identity.generation || me.generation == next)
    });
    let own_reserved = own.map_or(i64::MIN, |_| claimant.reserved);
    if row.high_water > at.mark_limit(own_reserved) {
        return Err(Refusal::MarkAhead {
            mark: row.high_water,
            now,
        });
    }
    if row.retired {
        let until = row.high_water.saturating_add(at.margin_ms);
        // Its old holder, whose id was retired under it (cut off past its lease), with the id
        // the registry's to assign: given a fresh id, as after any loss, not the one the
        // operator retired (taking it straight back would undo the retirement). A
        // configured one takes it back once it is free, as it would another's.
        if same_token && matches!(claimant.wanted, Want::Pinned(_)) {
            return Err(Refusal::RetiredUntil { until });
        }
        return if now > until {
            Ok(Taken {
                floor: row.high_water,
                generation: next,
                recycled: true,
                own: false,
            })
        } else {
            Err(Refusal::RetiredUntil { until })
        };
    }
    let proven = row.boot == Some(claimant.boot);
    if row.connected {
        return Err(match () {
            // Its own session from before its renewer restarted, not yet ended: never a copy.
            () if same_token && proven => Refusal::OpenSession,
            () if same_token => Refusal::CopyOfLiveHolder,
            () => Refusal::HeldByAnother { connected: true },
        });
    }
    let taken = |own| {
        Ok(Taken {
            floor: row.high_water,
            generation: next,
            recycled: false,
            own,
        })
    };
    // When a running holder, last seen then, would be back by (Unix ms).
    let may_return = row
        .absent_since
        .saturating_add(holder_may_return_ms(at.lease_ms, at.margin_ms));
    match claimant.identity {
        // The running holder itself, its renewer restarted (its shared memory, and so its boot
        // value, is the row's): continues above everything the id reserved, under its token.
        // Its state file may also name the generation after the row's: the claim's intent,
        // written before the registry's commit (`node::Node::intend`), which did not commit; or
        // did, unseen (a time-out), and then the row names it. Either way it claims the row's
        // next generation, so that intents that keep failing never run ahead of the row.
        //
        // And when the row is still as its claim left it (the same claim, the mark it wrote),
        // the claim is asked again, its answer lost: no other server's IDs lie above the floor
        // it was granted, which its reservation reaches (`node::Node::intend`), so it takes the
        // id again from there, not a lease past the mark the lost answer recorded (answers lost
        // in a row each moved its IDs a lease ahead of the clock, until a claim found the mark
        // too far ahead and refused it).
        Some(me) if own.is_some() && proven => {
            let unchanged = me == row.identity && claimant.mark == Some(row.high_water);
            Ok(Taken {
                floor: if unchanged {
                    claimant.reserved
                } else {
                    row.high_water
                },
                generation: next,
                recycled: false,
                own: true,
            })
        }
        Some(_) if same_token && own.is_none() => Err(Refusal::StaleCopy),
        // The row's claim, from disk: the holder restarted, a copy of it, or a standby promoted
        // in its place. Released by its holder (its renewer stopped), and this claimant
        // started after a clean stop and never met a running holder of its token since: the
        // holder's planned restart, taken at once. (A release is also its holder's renewer
        // restarting while the server runs on: a copy of it does not start clean, and one that
        // met it waits.) Else a running holder between sessions comes back within a heartbeat
        // interval; past that, the claimant takes the id over above its mark, as any server
        // would. Under a token of its own either way.
        Some(_)
            if same_token
                && row.released
                && claimant.after_clean_stop
                && row.place == Some(claimant.place)
                && !claimant.met_holder =>
        {
            taken(false)
        }
        Some(_) if same_token => {
            if now < may_return {
                Err(Refusal::HolderMayReturn { until: may_return })
            } else {
                taken(false)
            }
        }
        // Another server's id, whose holder is gone: taken over once its lease has run out,
        // and no sooner than a running holder would be back after a registry restart.
        _ if now >= row.lease_until && now >= may_return => taken(false),
        _ => Err(Refusal::HeldByAnother { connected: false }),
    }
}

/// A decision as plain values, to compare: the floor, generation, recycled and own of a take.
fn plain(decided: Result<Taken, Refusal>) -> Result<(i64, i64, bool, bool), Refusal> {
    decided.map(|t| (t.floor, t.generation, t.recycled, t.own))
}

/// How many facts a claim reads ([`Facts`]).
const FACTS: u32 = 15;

/// The facts of combination `bits`, one bit each.
fn facts(bits: u32) -> Facts {
    let bit = |i: u32| bits >> i & 1 == 1;
    Facts {
        mark_ahead: bit(0),
        retired: bit(1),
        retired_past_margin: bit(2),
        pinned: bit(3),
        same_token: bit(4),
        own_claim: bit(5),
        proven: bit(6),
        unchanged: bit(7),
        connected: bit(8),
        released: bit(9),
        after_clean_stop: bit(10),
        met_holder: bit(11),
        holder_may_return: bit(12),
        lease_runs: bit(13),
        same_place: bit(14),
    }
}

/// Whether a claim can read these facts at all. Three combinations cannot be made:
/// - its own claim without the row's token: the claim is the claimant's only under the token
///   the row names (its own claim is the same token at the row's generation or the next);
/// - the row exactly as its claim left it, and not its own claim: the row then names the
///   claimant's identity, the row's very token and generation;
/// - a mark far ahead of the registry's clock, and the clock past that mark by the margin: the
///   mark cannot be both ahead of the clock and behind it.
fn possible(f: &Facts) -> bool {
    (f.same_token || !f.own_claim)
        && (f.own_claim || !f.unchanged)
        && !(f.mark_ahead && f.retired_past_margin)
}

/// A claimant, a row and bounds that read as `f`, in one of eight ways (`way`) where `f` leaves
/// a choice: no identity or another's token; an older or a newer generation of the row's
/// token; the row's generation (another mark) or the next; no boot value or place in the row,
/// or another's; a reservation behind the clock or far ahead of it; a mark right at either
/// edge.
/// Every time is at the edge its fact turns on.
fn realize(f: &Facts, way: u32) -> (Claimant, Row, Bounds) {
    let (a, b, c) = (way & 1 == 1, way & 2 == 2, way & 4 == 4);
    let reserved = if c { NOW + 200_000 } else { NOW - 20_000 };
    let own_reserved = if f.own_claim { reserved } else { i64::MIN };
    let mark_limit = NOW.max(own_reserved) + LEASE + MARGIN + MARK_AHEAD_SLACK_MS;
    let high_water = match (f.mark_ahead, f.retired_past_margin) {
        (true, _) => mark_limit + 1,
        (false, true) => NOW - MARGIN - 1,
        (false, false) if a => mark_limit,
        (false, false) => NOW - MARGIN,
    };
    let generation = match (f.same_token, f.own_claim, f.unchanged) {
        (_, true, true) => ROW.generation,
        (_, true, false) if b => ROW.generation + 1,
        (_, true, false) => ROW.generation,
        (true, false, _) if a => ROW.generation - 2,
        (true, false, _) => ROW.generation + 2,
        (false, ..) => ROW.generation,
    };
    let identity = match (f.same_token, a) {
        (true, _) => Some(Identity { generation, ..ROW }),
        (false, true) => Some(Identity {
            token: 0xbeef,
            generation,
        }),
        (false, false) => None,
    };
    let mark = match (f.unchanged, b, a) {
        (true, ..) => Some(high_water),
        // The next generation's intent, the mark as it was.
        (false, true, _) => Some(high_water),
        (false, false, true) => None,
        (false, false, false) => Some(high_water - 1),
    };
    let wait = heartbeat_interval_ms(LEASE) + MARGIN;
    let absent_since = if f.holder_may_return {
        NOW - wait + 1
    } else {
        NOW - wait
    };
    let claimant = Claimant {
        identity,
        wanted: if f.pinned {
            Want::Pinned(7)
        } else {
            Want::Configured(7)
        },
        reserved,
        history_lost: false,
        patient: true,
        boot: BOOT,
        after_clean_stop: f.after_clean_stop,
        met_holder: f.met_holder,
        mark,
        place: PLACE,
    };
    let row = Row {
        node: 7,
        identity: ROW,
        retired: f.retired,
        high_water,
        lease_until: if f.lease_runs { NOW + 1 } else { NOW },
        connected: f.connected,
        same_label: false,
        stray: false,
        boot: match (f.proven, c) {
            (true, _) => Some(BOOT),
            (false, true) => None,
            (false, false) => Some(0xd15c),
        },
        last_seen: absent_since,
        absent_since,
        released: f.released,
        place: match (f.same_place, c) {
            (true, _) => Some(PLACE),
            (false, true) => None,
            (false, false) => Some(0x0e15e),
        },
    };
    (claimant, row, AT)
}

/// Every combination of the facts a claim can read, each made eight ways, is decided by the
/// table exactly as the decision before it decided it, and by the case the table names for it:
/// that case's guard holds, and the decision is that case's outcome (so the sentence it quotes
/// is the one that grants it). Every case decides some combination: none is dead, shadowed by
/// the cases above it.
#[test]
fn the_table_decides_every_combination_of_facts_as_the_match_before_it() {
    let mut decided_by = [0usize; CASES.len()];
    let mut combinations = 0;
    for f in (0..1 << FACTS).map(facts).filter(possible) {
        combinations += 1;
        let case = deciding(&f);
        let index = CASES
            .iter()
            .position(|c| std::ptr::eq(c, case))
            .expect("a case of the table");
        decided_by[index] += 1;
        assert!((case.guard)(&f), "{}: its guard does not hold", case.name);
        for way in 0..8 {
            let (claimant, row, at) = realize(&f, way);
            assert_eq!(Facts::of(&claimant, &row, &at), f, "made as {way}");
            let reference = plain(judge_before_the_table(&claimant, &row, &at));
            let table = plain(judge(&claimant, &row, &at));
            assert_eq!(
                table, reference,
                "{f:?}, made as {way}: the table's case is \"{}\"",
                case.name
            );
            assert_eq!(
                plain(case.outcome.ruling(&claimant, &row, &at)),
                reference,
                "{f:?}, made as {way}: not what \"{}\" decides",
                case.name
            );
        }
    }
    // 2^15 less the three kinds of combination no claim can read.
    assert_eq!(combinations, 12_288);
    for (case, n) in CASES.iter().zip(decided_by) {
        assert!(n > 0, "\"{}\" decides no combination", case.name);
    }
}

/// The text of `## section` in docs/FLEETS.md (or `### section`), its lines run together.
fn fleets_section(fleets: &str, section: &str) -> Option<String> {
    let mut lines = fleets.lines();
    lines.find(|line| line.trim_start_matches('#').trim() == section && line.starts_with("##"))?;
    let body: Vec<&str> = lines.take_while(|line| !line.starts_with("## ")).collect();
    Some(words(&body.join(" ")))
}

fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Each case quotes the sentence that grants it, word for word, from the section it names.
#[test]
fn every_case_quotes_docs_fleets() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FLEETS.md");
    let fleets = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    for case in &CASES {
        let section = fleets_section(&fleets, case.section)
            .unwrap_or_else(|| panic!("\"{}\": no section {:?}", case.name, case.section));
        assert!(
            section.contains(&words(case.grant)),
            "\"{}\": {:?} is not in the section {:?}",
            case.name,
            case.grant,
            case.section
        );
    }
}
