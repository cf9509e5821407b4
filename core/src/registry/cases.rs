//! The cases of a claim of one node id that has a row, as one ordered table ([`CASES`]): each
//! case a guard over what the claim reads of the claimant, the row and the registry's clock
//! ([`Facts`]), what it decides ([`Outcome`]: taken, and from where, or refused, and why), and
//! the sentence of docs/FLEETS.md that grants it. `registry::judge` reads the table from the
//! top: the first case whose guard holds decides, and the last one's always holds. The order is
//! part of the rule: a case reads only what no case above it has decided (a mark far ahead is
//! refused before anything else is asked; a connected holder is met before any proof is
//! weighed; the running holder is known before a copy of it is).

use super::{holder_may_return_ms, Bounds, Claimant, Refusal, Row, Taken, Want};

/// What a claim reads to decide, each a yes or a no.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Facts {
    /// The row's mark leads the registry's clock further than any holder's IDs can, or the
    /// claimant's own reservation, for its own claim (`Bounds::mark_limit`).
    pub mark_ahead: bool,
    pub retired: bool,
    /// The registry's clock is past the row's mark by the margin (a retired id is free again).
    pub retired_past_margin: bool,
    /// The claimant wants the id its state file pins (not one configured).
    pub pinned: bool,
    /// The claimant carries the row's owner token.
    pub same_token: bool,
    /// ...at the row's generation or the next (its claim's intent): the row's claim is the
    /// claimant's own, as its files know it.
    pub own_claim: bool,
    /// The row's boot value is the claimant's: the row's holder is this very running server.
    pub proven: bool,
    /// The row is exactly as the claimant's claim left it (its identity, the mark it wrote):
    /// the claim asked again, its answer lost.
    pub unchanged: bool,
    /// A session holds the id's advisory lock.
    pub connected: bool,
    /// The row's holder released its claim when its renewer stopped.
    pub released: bool,
    /// The claimant started after a clean stop of its data directory.
    pub after_clean_stop: bool,
    /// The claimant's data directory lies where the row's holder ran: its place is the row's.
    pub same_place: bool,
    /// A claim of the claimant's met a running holder of its token since it started.
    pub met_holder: bool,
    /// A running holder, absent since the row says, could still be on its way back: within a
    /// heartbeat interval and the margin ([`holder_may_return_ms`]).
    pub holder_may_return: bool,
    /// The row's lease still runs.
    pub lease_runs: bool,
}

impl Facts {
    /// What `claimant` reads of `row` at `at`.
    pub(super) fn of(claimant: &Claimant, row: &Row, at: &Bounds) -> Facts {
        let mine = claimant.identity;
        let same_token = mine.is_some_and(|me| me.token == row.identity.token);
        let next = row.identity.generation.saturating_add(1);
        let own_claim = same_token
            && mine.is_some_and(|me| [row.identity.generation, next].contains(&me.generation));
        let own_reserved = if own_claim {
            claimant.reserved
        } else {
            i64::MIN
        };
        Facts {
            mark_ahead: row.high_water > at.mark_limit(own_reserved),
            retired: row.retired,
            retired_past_margin: at.now > retired_until(row, at),
            pinned: matches!(claimant.wanted, Want::Pinned(_)),
            same_token,
            own_claim,
            proven: row.boot == Some(claimant.boot),
            unchanged: mine == Some(row.identity) && claimant.mark == Some(row.high_water),
            connected: row.connected,
            released: row.released,
            after_clean_stop: claimant.after_clean_stop,
            same_place: row.place == Some(claimant.place),
            met_holder: claimant.met_holder,
            holder_may_return: at.now < may_return(row, at),
            lease_runs: at.now < row.lease_until,
        }
    }

    /// The claimant is the running holder itself: its own claim, and the shared memory that
    /// made it (its renewer restarted).
    fn running_holder(&self) -> bool {
        self.own_claim && self.proven
    }
}

/// When a retired id is handed out again: once the registry's clock is past this (Unix ms).
fn retired_until(row: &Row, at: &Bounds) -> i64 {
    row.high_water.saturating_add(at.margin_ms)
}

/// When a running holder, absent since the row says, would be back by (Unix ms).
fn may_return(row: &Row, at: &Bounds) -> i64 {
    row.absent_since
        .saturating_add(holder_may_return_ms(at.lease_ms, at.margin_ms))
}

/// What a case decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Outcome {
    /// Taken above the row's mark under the row's next generation; `recycled`: a retired id
    /// handed out again; `own`: by its running holder, which keeps its token.
    Take { recycled: bool, own: bool },
    /// Taken again by its running holder from its own reservation, which reaches the floor the
    /// lost answer granted, under the row's next generation.
    TakeAgain,
    /// Refused, for this reason.
    Refuse(Refusal),
    /// Refused: [`Refusal::MarkAhead`], with the mark and the registry's clock.
    MarkAhead,
    /// Refused: [`Refusal::RetiredUntil`], until the mark and the margin are past.
    RetiredUntil,
    /// Refused: [`Refusal::HolderMayReturn`], until a running holder would be back.
    HolderMayReturn,
}

impl Outcome {
    /// What the claim comes to, with the row's and the clock's numbers.
    pub(super) fn ruling(
        self,
        claimant: &Claimant,
        row: &Row,
        at: &Bounds,
    ) -> Result<Taken, Refusal> {
        let taken = |floor, recycled, own| {
            let generation = row.identity.generation.saturating_add(1);
            Ok(Taken {
                floor,
                generation,
                recycled,
                own,
            })
        };
        match self {
            Outcome::Take { recycled, own } => taken(row.high_water, recycled, own),
            Outcome::TakeAgain => taken(claimant.reserved, false, true),
            Outcome::Refuse(refusal) => Err(refusal),
            Outcome::MarkAhead => Err(Refusal::MarkAhead {
                mark: row.high_water,
                now: at.now,
            }),
            Outcome::RetiredUntil => Err(Refusal::RetiredUntil {
                until: retired_until(row, at),
            }),
            Outcome::HolderMayReturn => Err(Refusal::HolderMayReturn {
                until: may_return(row, at),
            }),
        }
    }
}

/// One case: when it applies, what it decides, and where docs/FLEETS.md grants it. The name and
/// the grant are for the reader and the tests, which hold each grant against docs/FLEETS.md.
#[cfg_attr(not(test), expect(dead_code, reason = "read by the tests only"))]
pub(super) struct Case {
    /// The case in a few words.
    pub name: &'static str,
    pub guard: fn(&Facts) -> bool,
    pub outcome: Outcome,
    /// The section of docs/FLEETS.md that grants it...
    pub section: &'static str,
    /// ...and the sentence there, word for word (line breaks aside).
    pub grant: &'static str,
}

const IDENTITY: &str = "Identity: the same server, or a copy of it";
const RULES: &str = "The rules that keep IDs unique";
const RETIRING: &str = "Retiring and recycling node ids";

/// The cases, in the order they are asked.
pub(super) static CASES: [Case; 15] = [
    // A clock that ran far ahead, or a damaged row: taking it would stamp every ID that far in
    // the future. The claim's own restart is measured from its own reservation instead (a floor
    // it resumed from, or a mark a build whose crash restarts piled up leads left): its lead is
    // its own.
    Case {
        name: "a mark far ahead of the registry's clock",
        guard: |f| f.mark_ahead,
        outcome: Outcome::MarkAhead,
        section: IDENTITY,
        grant: "A mark further ahead of the registry's clock than a holder's IDs can be (a lease, \
                the clock margin and a minute) is taken for a clock fault, not followed",
    },
    // Its old holder, whose id was retired under it (cut off past its lease), with the id the
    // registry's to assign: given a fresh id, as after any loss, not the one the operator
    // retired (taking it straight back would undo the retirement). A configured one takes it
    // back once it is free, as it would another's.
    Case {
        name: "a retired id's old holder, the id pinned",
        guard: |f| f.retired && f.same_token && f.pinned,
        outcome: Outcome::RetiredUntil,
        section: RETIRING,
        grant: "The old holder itself, back after the retirement with its node id unset, finds \
                its claim lost and is given another free id: its own retired one only when no \
                other is free, so a retirement is not undone a second later.",
    },
    Case {
        name: "a retired id past its mark and the margin",
        guard: |f| f.retired && f.retired_past_margin,
        outcome: Outcome::Take {
            recycled: true,
            own: false,
        },
        section: RETIRING,
        grant: "It is handed out again only once the registry's clock is past that mark by \
                `pg_snowflake.max_clock_skew_ms`, and its new holder starts above the mark anyway",
    },
    Case {
        name: "a retired id before its mark and the margin",
        guard: |f| f.retired,
        outcome: Outcome::RetiredUntil,
        section: RETIRING,
        grant: "It is handed out again only once the registry's clock is past that mark by \
                `pg_snowflake.max_clock_skew_ms`",
    },
    // Its own session from before its renewer restarted, not yet ended: never a copy.
    Case {
        name: "the running holder's own session, not ended yet",
        guard: |f| f.connected && f.same_token && f.proven,
        outcome: Outcome::Refuse(Refusal::OpenSession),
        section: IDENTITY,
        grant: "the running holder itself (the boot value is the row's: its renewer restarted, \
                its old session not ended yet): waits for it",
    },
    Case {
        name: "a copy beside its connected origin",
        guard: |f| f.connected && f.same_token,
        outcome: Outcome::Refuse(Refusal::CopyOfLiveHolder),
        section: IDENTITY,
        grant: "anyone else is a copy beside its running origin, not the holder",
    },
    Case {
        name: "another server's id, its holder connected",
        guard: |f| f.connected,
        outcome: Outcome::Refuse(Refusal::HeldByAnother { connected: true }),
        section: "What the registry does",
        grant: "Until then a rival is refused with `node id N is held by another server, …, and \
                still connected to the registry`.",
    },
    // The row still as its claim left it (the same claim, the mark it wrote): the claim is
    // asked again, its answer lost. No other server's IDs lie above the floor it was granted,
    // which its reservation reaches (`node::Node::intend`), so it takes the id again from
    // there, not a lease past the mark the lost answer recorded (answers lost in a row each
    // moved its IDs a lease ahead of the clock, until a claim found the mark too far ahead and
    // refused it).
    Case {
        name: "the running holder asking again for a claim whose answer it lost",
        guard: |f| f.running_holder() && f.unchanged,
        outcome: Outcome::TakeAgain,
        section: "What the registry does",
        grant: "A running server that asks again for a claim whose answer it lost, the row still \
                as that claim left it, is granted it again from where it was granted",
    },
    // The running holder itself, its renewer restarted (its shared memory, and so its boot
    // value, is the row's): continues above everything the id reserved, under its token. Its
    // state file may also name the generation after the row's: the claim's intent, written
    // before the registry's commit (`node::Node::intend`), which did not commit; or did,
    // unseen (a time-out), and then the row names it. Either way it claims the row's next
    // generation, so that intents that keep failing never run ahead of the row.
    Case {
        name: "the running holder, its renewer restarted",
        guard: |f| f.running_holder(),
        outcome: Outcome::Take {
            recycled: false,
            own: true,
        },
        section: IDENTITY,
        grant: "the running holder itself (its renewer restarted): takes the id again at once, \
                under its token",
    },
    Case {
        name: "an older copy of the row's holder",
        guard: |f| f.same_token && !f.own_claim,
        outcome: Outcome::Refuse(Refusal::StaleCopy),
        section: IDENTITY,
        grant: "an older copy (the holder claimed since it was made): not the holder",
    },
    // The row's claim, from disk: the holder restarted, a copy of it, or a standby promoted in
    // its place, under a token of its own from here on. Released by its holder (its renewer
    // stopped), and this claimant started after a clean stop, where the holder ran, and never
    // met a running holder of its token since: the holder's planned restart. (A release is also
    // its holder's renewer restarting while the server runs on: a copy of it does not start
    // clean, and one that met it waits. A copy of a stopped data directory does start clean,
    // with every file of it: elsewhere, it waits as any claimant from disk does, and the origin
    // started again meanwhile takes its id back at once.)
    Case {
        name: "a planned restart: a released claim, a clean stop where it ran, no holder met",
        guard: |f| {
            f.same_token && f.released && f.after_clean_stop && f.same_place && !f.met_holder
        },
        outcome: Outcome::Take {
            recycled: false,
            own: false,
        },
        section: RULES,
        grant: "a server started after a clean stop of its data directory (its control file \
                says so), where that data directory lay when it stopped (its place: a value the \
                server measures at each start from its host and the directory, on no disk), \
                that has not met a running holder of its token since takes its own released \
                claim at once.",
    },
    // Else a running holder between sessions comes back within a heartbeat interval...
    Case {
        name: "the row's claim from disk, its holder seen lately",
        guard: |f| f.same_token && f.holder_may_return,
        outcome: Outcome::HolderMayReturn,
        section: RULES,
        grant: "A claimant that cannot prove it (a restart from disk, a copy, a promoted \
                standby) waits until the row's holder has been silent for a heartbeat interval \
                and the clock margin",
    },
    // ...past that, the claimant takes the id over above its mark, as any server would.
    Case {
        name: "the row's claim from disk, its holder silent long enough",
        guard: |f| f.same_token,
        outcome: Outcome::Take {
            recycled: false,
            own: false,
        },
        section: RULES,
        grant: "and then takes the id over above its mark under a token of its own",
    },
    // Another server's id, whose holder is gone: taken over once its lease has run out, and no
    // sooner than a running holder would be back (rule 4's wait is any claimant's).
    Case {
        name: "another server's id, its lease run out and its holder silent",
        guard: |f| !f.lease_runs && !f.holder_may_return,
        outcome: Outcome::Take {
            recycled: false,
            own: false,
        },
        section: IDENTITY,
        grant: "taken over once the lease has run out",
    },
    Case {
        name: "another server's id, held",
        guard: |_| true,
        outcome: Outcome::Refuse(Refusal::HeldByAnother { connected: false }),
        section: "What each failure does",
        grant: "the second is refused: `node id 7 is held by another server, \"db-2 \
                (host:5432)\", last seen at …`",
    },
];

/// The case that decides a claim of these facts: the first whose guard holds.
pub(super) fn deciding(facts: &Facts) -> &'static Case {
    CASES
        .iter()
        .find(|case| (case.guard)(facts))
        .expect("the last case's guard always holds")
}

#[cfg(test)]
mod tests;
