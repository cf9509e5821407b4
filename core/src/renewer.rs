//! The renewer's room: one round of its loop, written once, with its contact ([`contact`]) and
//! what it remembers between contacts ([`memory`]). A round: whether a contact is due (its
//! heartbeat interval, a claim retried within a second, a switch of mode, a session the registry
//! ended, a claim found lost), the contact itself on the session its server hands it
//! ([`Server::session`]), the clock check its reading feeds, then the pin of a new claim and the
//! publication of what IDs may be made — in that order, so that no ID is made under a claim
//! before it is pinned and none under a mode the renewer has not yet published. The round returns
//! what the contact came to ([`Round::contact`]) for its caller to say. The extension runs it over
//! SQL and shared memory, and the fleet model (`node/tests/model/fleet.rs`) over its in-memory
//! registry, so the model runs the round that ships; nothing in it is the extension's alone, so
//! any process that holds a claim through a registry session may run it.

pub mod contact;
pub mod memory;

use crate::node::Holding;
use crate::registry;
use contact::{Contact, Session, Settings};
use memory::Memory;

/// How soon a contact that failed is tried again (ms), at most: within a second, not a
/// heartbeat interval later, so that a registry back from a restart hears from its holders
/// before a copy of one of them may take it for gone.
pub const RETRY_MS: i64 = 1_000;

/// How long a round that still waits to pin a claim sleeps (ms): the pin waits only for a
/// renewal being written (the writer's turn).
const PIN_RETRY_MS: i64 = 10;

/// What the renewer knows between rounds: its claim ([`Memory`]), its clock's offset
/// from the registry's, and when its next contact is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Renewer {
    /// What it knows of its claim.
    pub state: Memory,
    /// The clock was further from the registry's than the limit at its last reading (the
    /// offset, ms): no claim, no heartbeat, no ID is made, until a reading within it.
    skewed: Option<i64>,
    /// When the next contact is due (monotonic ms).
    next_contact: i64,
    /// The mode of the last contact (`true`: fenced), `None` before the first.
    contacted_in: Option<bool>,
}

impl Default for Renewer {
    fn default() -> Self {
        Renewer::new(Memory::new())
    }
}

/// The server the renewer runs its rounds for: its registry session, its state file and the shared
/// state its backends read. `Failure` is the registry session's.
pub trait Server {
    type Failure;
    /// The registry session and the server's side of a contact on it
    /// ([`contact::Parties`]).
    type Session<'s>: Session<Failure = Self::Failure>
    where
        Self: 's;

    /// The monotonic clock (ms).
    fn monotonic(&mut self) -> i64;
    /// Whether the registry ended the session the renewer holds (it restarted, failed over or
    /// found the session idle): the renewer makes a new one at once.
    fn session_lost(&mut self) -> bool;
    /// The renewer's registry session for one contact, made anew (connected, its exchanges
    /// bounded by `lease_ms`) when it has none, and whether it was: a new session holds no
    /// advisory lock yet ([`Memory::new_session`]).
    fn session(&mut self, lease_ms: i64) -> Result<(Self::Session<'_>, bool), Self::Failure>;
    /// Drops the registry session: after a failed contact, and after one after which
    /// [`Memory::keeps_session`] says no.
    fn end_session(&mut self);
    /// Writes the claim just taken into the state file and the WAL, as the one writer;
    /// whether it was written (if not, the next round tries again).
    fn pin(&mut self) -> bool;
    /// Says what IDs may be made ([`Issuer::publish`](crate::issuer::Issuer::publish)) and
    /// wakes the callers waiting for it.
    fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, now: i64);
    /// Shows what a contact came to where callers read why they are refused (the registry's
    /// status: a refusal and whose, a takeover, the lease's end), before the pin and the publish
    /// that follow it: a caller that meets the refusal published finds its reason already there.
    fn shown(&mut self, contact: &Contact<Self::Failure>);
}

/// What one round came to.
#[derive(Debug, PartialEq)]
pub struct Round<F> {
    /// How long the renewer may sleep before its next round (ms).
    pub sleep_ms: i64,
    /// Whether it contacted the registry.
    pub contacted: bool,
    /// The contact failed: tried again within [`RETRY_MS`].
    pub failure: Option<F>,
    /// What the contact came to, if it did not fail, for the caller to say and show.
    pub contact: Option<Contact<F>>,
}

impl Renewer {
    /// A renewer at its start, from what the issuing state kept for it
    /// ([`Issuer::renewer_restarted`](crate::issuer::Issuer::renewer_restarted)): its first
    /// round contacts the registry.
    pub const fn new(state: Memory) -> Renewer {
        Renewer {
            state,
            skewed: None,
            next_contact: i64::MIN,
            contacted_in: None,
        }
    }

    /// The clock's offset at the last reading, if it was past the limit.
    pub const fn skewed(&self) -> Option<i64> {
        self.skewed
    }

    /// The next round contacts the registry, whenever its contact was due.
    pub fn contact_now(&mut self) {
        self.next_contact = i64::MIN;
    }

    /// What the renewer tells [`Server::publish`] now, in mode `fenced`.
    pub fn publish<S: Server>(&self, server: &mut S, fenced: bool, now: i64) {
        server.publish(self.state.holding(), self.skewed.is_some(), fenced, now);
    }

    /// One round of the renewer's loop: a switch of mode published at once (before a contact
    /// that may wait for the registry); a contact if one is due; the pin of a claim taken;
    /// what may be made published.
    pub fn round<S: Server>(&mut self, server: &mut S, settings: &Settings) -> Round<S::Failure> {
        let now = server.monotonic();
        // A switch to fenced mode refuses IDs until a heartbeat grants a ceiling; a switch to
        // available lets a fenced ceiling give way.
        let switched = self.contacted_in != Some(settings.fenced);
        if switched {
            self.publish(server, settings.fenced, now);
        }
        // A holder whose session the registry ended is back within a round, before a copy of
        // it waiting for the id may take it for gone (`registry::Refusal::HolderMayReturn`).
        let session_lost = server.session_lost();
        let mut round = Round {
            sleep_ms: 0,
            contacted: false,
            failure: None,
            contact: None,
        };
        if now >= self.next_contact || switched || session_lost {
            round.contacted = true;
            self.contacted_in = Some(settings.fenced);
            let interval = registry::heartbeat_interval_ms(settings.lease_ms);
            self.next_contact = now.saturating_add(self.state.next_contact_in(interval));
            let contacted = match server.session(settings.lease_ms) {
                Ok((mut session, new)) => {
                    if new {
                        self.state.new_session();
                    }
                    session.contact(&mut self.state, settings)
                }
                Err(failure) => Err(failure),
            };
            match contacted {
                Ok((offset, contact)) => {
                    self.skewed = (offset.abs() > settings.max_clock_skew_ms).then_some(offset);
                    // A heartbeat that found the id taken over claims again at once, on a
                    // session of its own.
                    if self.state.lost {
                        self.next_contact = now;
                    }
                    if !self.state.keeps_session() {
                        server.end_session();
                    }
                    round.contact = Some(contact);
                }
                Err(failure) => {
                    server.end_session();
                    self.next_contact = now.saturating_add(RETRY_MS.min(interval));
                    round.failure = Some(failure);
                }
            }
        }
        if let Some(contact) = &round.contact {
            server.shown(contact);
        }
        if self.state.pin_due() && server.pin() {
            self.state.pinned();
        }
        let now = server.monotonic();
        self.publish(server, settings.fenced, now);
        round.sleep_ms = if self.state.pin_due() {
            PIN_RETRY_MS
        } else {
            self.next_contact
                .saturating_sub(now)
                .clamp(PIN_RETRY_MS, RETRY_MS)
        };
        round
    }
}

#[cfg(test)]
mod tests;
