//! The node-id registry's decisions, as pure functions: which node id a server takes when it
//! claims one, whether its lease still lets it issue, and how far its clock is from the
//! registry's. The extension's `src/registry/` talks to the registry database (libpq) and acts
//! on these; the registry's own transactions (a row lock, a session advisory lock, its clock)
//! are what make a decision hold among several servers.
//!
//! Identity. A server is known to the registry by an *owner token* (128 random bits, made at
//! its first claim) and a *generation*, both kept in its state file. The registry raises the
//! generation at every claim. So:
//! - a restart (kill -9 or not) finds the token and the generation it wrote: the same server;
//! - a copy of the data directory (pg_basebackup, a snapshot, a restored backup) carries the
//!   token too, but either its holder is still connected to the registry (its session holds
//!   the id's advisory lock: the copy is not the holder) or the holder has claimed since the
//!   copy was made (the copy's generation is behind): the copy is refused its origin's id, or
//!   given a fresh one with a token of its own;
//! - a standby promoted when its primary is gone, with the primary's token and generation,
//!   continues the node, as a restart would.
//!
//! Uniqueness across a takeover never rests on telling these apart: every claim of an id that
//! was held before starts above the id's *high-water mark*, the end of the last reservation the
//! registry granted or was told of. In fenced mode the holder never reserves past the ceiling
//! the registry recorded (written there before it is used), so the mark bounds every ID the old
//! holder made, even one still running and cut off from the registry.

/// What a server wants to claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// `pg_snowflake.node_id` is set: that id, or nothing.
    Configured(u32),
    /// Assigned before and pinned in the state file: that id if it is still this server's,
    /// else a fresh one.
    Pinned(u32),
    /// No node id yet: the lowest free one.
    Any,
}

/// The claimant: its identity from its state file (`None`: none recorded yet, or a state file
/// that could not be read) and what it wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claimant {
    pub identity: Option<Identity>,
    pub wanted: Wanted,
}

/// Who holds a node id: the owner token and the generation of its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub token: u128,
    pub generation: i64,
}

/// A node id's row in the registry, as the claim reads it (row locked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub node: u32,
    pub holder: Identity,
    pub retired: bool,
    /// The end of the last reservation the registry knows under this id (Unix ms, the holder's
    /// clock; `i64::MIN`: none).
    pub high_water: i64,
    /// The end of the holder's lease (Unix ms, the registry's clock).
    pub lease_until: i64,
    /// A session holds the id's advisory lock: its holder is connected to the registry now.
    pub connected: bool,
}

/// Why a claim of one node id is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another server holds it and is live (connected, or its lease has not run out).
    HeldByAnother,
    /// This data directory is a copy of the live server holding it (same token, and that
    /// server is connected).
    CopyOfLiveHolder,
    /// This data directory is an older copy: its holder has claimed it again since.
    StaleCopy,
    /// Retired; handed out again once the registry's clock passes `until` (Unix ms).
    RetiredUntil { until: i64 },
}

/// What a claim of one node id comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Take it (again): issue only above `floor` (Unix ms; `i64::MIN`: nothing owed), with
    /// the next generation. `recycled`: a retired id handed out again.
    Take {
        node: u32,
        floor: i64,
        generation: i64,
        recycled: bool,
    },
    /// Take the lowest free id instead, under a new token (this server is not `node`'s holder,
    /// and its node id is the registry's to assign).
    Fresh { not: Option<(u32, Refusal)> },
    /// Refused: the configured id is not this server's to take.
    Refuse { node: u32, refusal: Refusal },
}

/// Decides a claim of `row`'s node id (or of an id without a row, `row == None`, numbered
/// `node`), at the registry's time `now` (Unix ms); a retired id is handed out again once
/// `now` is past its high-water mark by `margin_ms`.
pub fn decide(
    claimant: &Claimant,
    node: u32,
    row: Option<&Row>,
    now: i64,
    margin_ms: i64,
) -> Decision {
    let outcome = match row {
        None => Ok((i64::MIN, 1, false)),
        Some(row) => judge(claimant, row, now, margin_ms),
    };
    match (outcome, claimant.wanted) {
        (Ok((floor, generation, recycled)), _) => Decision::Take {
            node,
            floor,
            generation,
            recycled,
        },
        (Err(refusal), Wanted::Configured(_)) => Decision::Refuse { node, refusal },
        (Err(refusal), _) => Decision::Fresh {
            not: Some((node, refusal)),
        },
    }
}

/// Whether `claimant` may take `row`'s id: its floor, generation and whether it is a
/// recycled one, or why not.
fn judge(
    claimant: &Claimant,
    row: &Row,
    now: i64,
    margin_ms: i64,
) -> Result<(i64, i64, bool), Refusal> {
    let next = row.holder.generation.saturating_add(1);
    if row.retired {
        let until = row.high_water.saturating_add(margin_ms);
        return if now > until {
            Ok((row.high_water, next, true))
        } else {
            Err(Refusal::RetiredUntil { until })
        };
    }
    let same_token = claimant
        .identity
        .is_some_and(|me| me.token == row.holder.token);
    if row.connected {
        return Err(if same_token {
            Refusal::CopyOfLiveHolder
        } else {
            Refusal::HeldByAnother
        });
    }
    match claimant.identity {
        // The holder itself, restarted (or a copy standing in for a holder that is gone, as a
        // promoted standby does): continues above everything the id reserved.
        Some(me) if same_token && me.generation == row.holder.generation => {
            Ok((row.high_water, next, false))
        }
        Some(_) if same_token => Err(Refusal::StaleCopy),
        // Another server's id, whose holder is gone: taken over once its lease has run out.
        _ if now >= row.lease_until => Ok((row.high_water, next, false)),
        _ => Err(Refusal::HeldByAnother),
    }
}

/// Whether an id without a row, or with `row`, is free to hand out as a fresh id at `now`.
pub fn is_free(row: Option<&Row>, now: i64, margin_ms: i64) -> bool {
    row.is_none_or(|row| row.retired && now > row.high_water.saturating_add(margin_ms))
}

/// How far the local wall clock is ahead of the registry's (ms; negative: behind): the
/// registry read `registry_ms` between the local readings `sent` and `received`, so at their
/// midpoint, within half the round trip.
pub fn clock_offset(sent: i64, received: i64, registry_ms: i64) -> i64 {
    sent + (received - sent) / 2 - registry_ms
}

/// The registry's lease as the holder sees it, on its monotonic clock: a heartbeat sent at
/// `sent` renews it for `lease_ms` from then (the registry counts from when it received it,
/// later, so the holder's end is never after the registry's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Monotonic ms at which the lease ends here.
    pub ends_at: i64,
    /// The highest time (Unix ms, the time of this server's IDs) its reservations may reach:
    /// the mark the registry recorded before granting it.
    pub ceiling: i64,
}

impl Lease {
    /// The lease a heartbeat sent at monotonic `sent_mono` gets, with the `ceiling` it recorded.
    pub fn granted(sent_mono: i64, ceiling: i64, lease_ms: i64) -> Lease {
        Lease {
            ends_at: sent_mono.saturating_add(lease_ms),
            ceiling,
        }
    }

    /// The ceiling to record in a heartbeat (or claim) sent at wall time `sent_wall` by a
    /// generator whose IDs may already reach `position` (its durable reservation, or the floor
    /// a takeover starts above; Unix ms): a lease's worth past whichever is later, so that a
    /// holder whose clock is behind its floor can still reserve, and never past what the
    /// registry recorded.
    pub fn ceiling_for(sent_wall: i64, position: i64, lease_ms: i64) -> i64 {
        sent_wall.max(position).saturating_add(lease_ms)
    }

    /// Whether the lease still runs at monotonic `now`.
    pub fn runs_at(&self, now: i64) -> bool {
        now < self.ends_at
    }
}

/// How often the holder renews a lease of `lease_ms`: three times per lease, so two heartbeats
/// in a row may fail before it runs out.
pub fn heartbeat_interval_ms(lease_ms: i64) -> i64 {
    (lease_ms / 3).max(100)
}

#[cfg(test)]
mod tests;
