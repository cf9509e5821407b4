//! The renewer's side of a registry claim, as plain data: whether it holds one (and under which
//! lease, pinned or not), whether its last claim was refused or its claim was found lost, and
//! whether its registry session still has to take the id's advisory lock. One contact
//! ([`contact`](super::contact)) calls one method per outcome, in the extension and in the fleet
//! model (`node/tests/model/fleet.rs`) alike, so that what the renewer remembers between contacts
//! is the one the model checks. What a claim does to the server's identity is
//! [`Node`](crate::node::Node)'s; this says what the renewer tells
//! [`Node::publish`](crate::node::Node::publish) ([`Memory::holding`]).

use crate::node::{Held, Holding};
use crate::registry::{Identity, Lease, OWN_SESSION_PATIENCE_LEASES};

/// What the renewer knows of its claim between contacts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Memory {
    /// The claim held, if any.
    pub held: Option<Held>,
    /// The session does not hold the id's advisory lock yet (a new session, or another session
    /// still held it at the last heartbeat): it is tried again at the next heartbeat.
    pub needs_lock: bool,
    /// The last claim was refused; retried at every contact.
    pub refused: bool,
    /// The last heartbeat found the id taken over; the next contact claims again, on a session
    /// of its own.
    pub lost: bool,
    /// The claim a promoted standby gave up for a fresh id: retired once its old holder's
    /// lease has run out (tried at each heartbeat), unless the id is claimed again first.
    pub retire_pending: Option<GivenUp>,
    /// Since when (monotonic ms) its claims have been refused because a session under its own
    /// label holds the id (`Refusal::OpenSession`): its own from before a restart, or a copy's.
    pub waiting_since: Option<i64>,
}

/// The claim of a node id a promoted standby inherited from its primary and gave up for a
/// fresh id: its retirement is that claim's, not the id's (another server may claim the id
/// once the primary's lease has run out, and it is then that server's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GivenUp {
    pub node: u32,
    pub identity: Identity,
}

impl Default for Memory {
    fn default() -> Self {
        Self::new()
    }
}

impl Memory {
    /// A renewer that has not claimed yet.
    pub const fn new() -> Memory {
        Memory {
            held: None,
            needs_lock: true,
            refused: false,
            lost: false,
            retire_pending: None,
            waiting_since: None,
        }
    }

    /// The registry session is new: its lock is still to be taken.
    pub fn new_session(&mut self) {
        self.needs_lock = true;
    }

    /// How long until the next contact (ms): a heartbeat `interval` while holding a claim; until
    /// the first claim, every second at most.
    pub fn next_contact_in(&self, interval: i64) -> i64 {
        if self.held.is_some() {
            interval
        } else {
            1_000.min(interval)
        }
    }

    /// A claim answered (taken, refused, or none free): the session holds the lock it claimed
    /// under, and a loss is over.
    fn answered(&mut self) {
        self.needs_lock = false;
        self.lost = false;
    }

    /// The registry granted `node` under `identity` with `lease`: held, to be pinned before
    /// the first ID.
    pub fn taken(&mut self, node: u32, identity: Identity, lease: Lease) {
        self.answered();
        self.refused = false;
        self.waiting_since = None;
        self.held = Some(Held {
            node,
            identity,
            lease,
            pinned: false,
        });
    }

    /// The claim was refused (or no id is free): retried at every contact.
    pub fn refused(&mut self) {
        self.answered();
        self.refused = true;
        self.waiting_since = None;
    }

    /// The claim was refused because a session under this server's own label holds the id
    /// (`Refusal::OpenSession`), at monotonic `now`: retried at every contact, patiently for a
    /// while ([`Memory::patient`]).
    pub fn waits_for_session(&mut self, now: i64) {
        let since = self.waiting_since.unwrap_or(now);
        self.refused();
        self.waiting_since = Some(since);
    }

    /// Whether a claim at monotonic `now` still waits for a session under this server's label
    /// to end (`registry::Claimant::patient`): until it has waited
    /// `registry::OWN_SESSION_PATIENCE_LEASES` leases of `lease_ms`.
    pub fn patient(&self, now: i64, lease_ms: i64) -> bool {
        self.waiting_since.is_none_or(|since| {
            now.saturating_sub(since) < lease_ms.saturating_mul(OWN_SESSION_PATIENCE_LEASES)
        })
    }

    /// The claim is in the state file and the WAL: IDs may be made under it.
    pub fn pinned(&mut self) {
        if let Some(held) = self.held.as_mut() {
            held.pinned = true;
        }
    }

    /// Whether the claim held waits for its pin.
    pub fn pin_due(&self) -> bool {
        self.held.is_some_and(|held| !held.pinned)
    }

    /// A heartbeat extended the lease; `locked`: the session holds the id's lock now.
    pub fn extended(&mut self, lease: Lease, locked: bool) {
        self.needs_lock = !locked;
        if let Some(held) = self.held.as_mut() {
            held.lease = lease;
        }
    }

    /// A heartbeat found the id taken over: given up, its session closed, claimed again at the
    /// next contact (refused while the other server holds a configured id, or a fresh id for
    /// an assigned one).
    pub fn lost(&mut self) {
        self.held = None;
        self.lost = true;
    }

    /// Whether the registry session is kept after a contact: a lost claim's is closed, so that
    /// the registry releases whatever lock it still held and the next claim has its own.
    pub fn keeps_session(&self) -> bool {
        !self.lost
    }

    /// What [`Node::publish`](crate::node::Node::publish) is told.
    pub fn holding(&self) -> Holding {
        match self.held {
            _ if self.lost => Holding::Lost,
            None => Holding::None {
                refused: self.refused,
            },
            Some(held) => Holding::Held {
                pinned: held.pinned,
                lease: held.lease,
            },
        }
    }
}
