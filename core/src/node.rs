//! The server's identity, as plain data with one method per transition: which node id its IDs
//! carry ([`Node::id`]), the node ids it used before ([`Node::history`]), the registry claim it
//! holds the id under ([`Node::claim`]), how far a fenced lease lets it reserve
//! ([`Node::ceiling`]) and why it refuses IDs now ([`Node::refusing`]). The extension keeps one
//! `Node` beside the generator in shared memory and changes it only through these methods;
//! what it must write to the state file after a change, a method returns ([`Durable`]).
//!
//! The one rule of durability, for every transition: a change that a restart, a standby or a
//! promotion must remember is written (the state file; the WAL where a standby needs it) before
//! it takes effect. So:
//! - [`Node::start`]: the data directory's state file is the authority at start-up;
//! - [`Node::replay`]: a replayed reservation that raises the floor, hands a claim on, or adds a
//!   node id to the history is written to the standby's state file before the next record;
//! - [`Node::intend`]: a registry claim is written to the state file *before* the registry
//!   commits it (its intent: so a restart in between finds the generation it claimed, and the
//!   next claim accepts it, `registry::judge`), and pinned (state file and WAL) before the
//!   first ID under it ([`Refusing::AwaitingClaim`] until then);
//! - a node id left, whichever transition leaves it, joins the history up to the durable
//!   reservation ([`Node::switch_to`]: written once, for the standby's replay and the
//!   registry's claim alike).

use crate::generator::Generator;
use crate::registry::table::{Grant, Lowering};
use crate::registry::{self, Claimant, Identity, Lease, Refusal, Want};
use crate::state_file::{self, History, Reservation};
use crate::wal_record::Record;

/// Why no ID may be made now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum Refusing {
    Nothing,
    /// Neither `pg_snowflake.node_id` nor a registry gives a node id.
    NodeUnset,
    /// pg_upgrade made the data directory and its old state file has not been copied in.
    AwaitingOldStateFile,
    /// A registry is set and the node id has not been claimed (and pinned) yet.
    AwaitingClaim,
    /// The registry refused the claim (the registry status says why).
    ClaimRefused,
    /// Another server took the node id over; found at a contact, until the next claim decides.
    ClaimLost,
    /// Fenced mode: the lease ran out without a heartbeat.
    LeaseExpired,
    /// Fenced mode, and the claim held has no fenced ceiling yet: the server was switched from
    /// available mode (or its ceiling lifted there) since its last heartbeat. A fenced server
    /// makes IDs only below a ceiling a committed heartbeat of its claim granted; the next
    /// heartbeat grants one.
    AwaitingLease,
    /// The clock is further from the registry's than `pg_snowflake.max_clock_skew_ms`.
    ClockSkew,
}

/// The server's identity: kept in shared memory beside the generator, under the same lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Node {
    /// Why no ID may be made now; IDs are made only at [`Refusing::Nothing`]. First, so that
    /// the hot path reads it and `id` together.
    pub refusing: Refusing,
    /// The node id IDs are made under (meaningful at [`Refusing::Nothing`]): the setting, or
    /// the registry's claim.
    pub id: u32,
    /// The node ids used here before this one, written with every reservation.
    pub history: History,
    /// The registry claim the node id is held under (`None`: no registry, or not claimed yet),
    /// written with every reservation.
    pub identity: Option<Identity>,
    /// No reservation may reach past this (Unix ms): the ceiling the registry recorded with the
    /// claim's last committed heartbeat (in either mode: the mark covers every ID made below
    /// it); `i64::MAX`: none (no claim yet, or given way: [`Node::gives_way_at`]).
    pub ceiling: i64,
    /// Available mode: the ceiling gives way to a reservation that reaches it (the holder's
    /// heartbeats failed for about a lease, its clock stepped forward past it), and the IDs
    /// made from then on, which may lie past the mark, are counted (`Issuer::ids_past_mark`)
    /// until a heartbeat records a mark above them. Fenced mode refuses instead.
    pub gives_way: bool,
    /// The server started as a standby and has not claimed a node id since (with
    /// `pg_snowflake.fresh_node_id_on_promotion`, its first claim takes a fresh one).
    pub started_as_standby: bool,
    /// The state file was damaged and moved aside ([`Found::Damaged`]), and no claim has been
    /// made since: the node ids used here before are unknown (`registry::vouched`).
    pub history_lost: bool,
    /// The registry's mark as this server's claim last wrote it, while no one else has raised
    /// it (`registry::own_mark`); `None`: not known to be its own (no claim yet, another's
    /// raise seen, a heartbeat's answer lost), and its release leaves the mark where it is.
    pub mark: Option<i64>,
    /// Drawn at random when the server starts, kept in shared memory only, and written into
    /// the registry's row with each claim and heartbeat: the proof that a claimant is the
    /// running holder (its renewer restarted), which no copy of the data directory and no
    /// restart from disk carries (`registry::Claimant::boot`).
    pub boot: u64,
    /// This start followed a clean stop of the server (its control file said so): no copy of
    /// a running server starts so (`registry::Claimant::after_clean_stop`).
    pub after_clean_stop: bool,
    /// A claim of this server was refused since it started because the holder of the id it wanted,
    /// under its own token, was connected or seen lately (`registry::Claimant::met_holder`).
    pub met_holder: bool,
    /// Where its data directory lies, as this start measured it (`Boot::place`), written into
    /// the registry's row with each claim and heartbeat: no copy made elsewhere shares it
    /// (`registry::Claimant::place`).
    pub place: u64,
}

/// This start of the server, as the registry's proofs of identity see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Boot {
    /// Drawn at random for this start of shared memory ([`Node::boot`]).
    pub value: u64,
    /// The data directory was stopped cleanly before this start ([`Node::after_clean_stop`]):
    /// not a crash, not a copy of a running server, not a standby.
    pub after_clean_stop: bool,
    /// Where the data directory lies ([`Node::place`]): a value the server derives at each
    /// start from its host and the directory itself (the host's identity, the directory's
    /// device and inode), and writes to no disk. Every start of the data directory where it
    /// lies measures the same; a copy of it made elsewhere (`cp -a`, a file-level backup
    /// restored, a volume snapshot mounted on another host) measures another, though it
    /// carries every file, label included.
    pub place: u64,
}

impl Boot {
    /// The place ([`Boot::place`]) of a data directory on the host named `host` (its host name
    /// and machine id, as the extension reads them), from the directory's `device` and `inode`.
    /// A copy differs in one of the three at least: another directory (`cp -a`, a restored
    /// backup), another file system (a snapshot of its volume mounted beside it), another host.
    pub fn place_of(host: &str, device: u64, inode: u64) -> u64 {
        let mut bytes = Vec::with_capacity(host.len() + 17);
        bytes.extend_from_slice(host.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&device.to_le_bytes());
        bytes.extend_from_slice(&inode.to_le_bytes());
        crate::state_file::checksum(&bytes)
    }
}

/// What the data directory holds at start-up (the extension reads and checks the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Found {
    /// No state file: a server that never issued an ID with this extension.
    Nothing,
    /// A reservation of this server's layout.
    Reservation(Reservation),
    /// pg_upgrade made this directory and the old one's file was not copied in.
    AwaitingOldStateFile,
    /// A damaged state file, moved aside (with a registry to assign the node id), and nothing
    /// written since but `state_file::HISTORY_LOST_MARKER`: what it said, the node ids used
    /// here and how far, is lost.
    Damaged,
}

/// How the server is configured, as far as its identity goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Settings {
    /// `pg_snowflake.node_id` (`None`: unset).
    pub configured: Option<u32>,
    /// `pg_snowflake.registry` is set.
    pub registry: bool,
}

/// Where a server starts: its identity and the generator's floor (Unix ms; `i64::MIN`: nothing
/// owed), and the change of node id to log, if any. A change of node id changes the history:
/// `rewrite` is then what the state file must say before the server goes on (a standby that
/// replays a record of the new node id later must find the old one in its file, or a restart
/// would forget that record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Start {
    pub node: Node,
    pub floor: i64,
    pub switched: Option<Switch>,
    pub rewrite: Option<Durable>,
}

/// The node id changed since the state file was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Switch {
    pub from: Option<u32>,
    pub to: u32,
    /// The new node id never issued IDs here, so the old one's lead (a clock that ran ahead)
    /// is dropped.
    pub lead_dropped: bool,
}

/// What the state file must say after a transition: a reservation until `until` (Unix ms)
/// under `node` (`None`: none), with this history and claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Durable {
    pub until: i64,
    pub node: Option<u32>,
    pub history: History,
    pub identity: Option<Identity>,
}

/// A claim the registry decided for this server (not committed there yet when
/// [`Node::intend`] is first applied to a copy, to write its intent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    pub node: u32,
    pub identity: Identity,
    /// Issue only above this (Unix ms; `i64::MIN`: nothing owed).
    pub floor: i64,
    /// The lease it came with: its ceiling is the high-water mark the registry recorded.
    pub lease: Lease,
}

impl Claim {
    /// The claim `grant` as the server's identity takes it, with the lease a claim sent at
    /// monotonic `sent_mono` gets.
    pub fn of(grant: &Grant, sent_mono: i64, lease_ms: i64) -> Claim {
        Claim {
            node: grant.node,
            identity: grant.identity,
            floor: grant.floor,
            lease: Lease::granted(sent_mono, grant.mark, lease_ms),
        }
    }
}

/// What a holder that stops leaves in the registry ([`Node::release`]): its claim, released
/// (the server's next start from its files takes it without waiting), and in fenced mode the
/// mark that now bounds every ID made under the id, to replace the mark as the claim wrote it
/// last (and only that: `registry::own_mark`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    pub node: u32,
    pub identity: Identity,
    pub lower: Option<Lowering>,
    /// Every ID made under the claim lies below this (Unix ms): the mark is raised to it if it
    /// is lower (available mode's mark lags the IDs by up to a heartbeat), so that whoever
    /// takes the released id starts above them.
    pub covers: i64,
}

/// A claim the renewer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    pub node: u32,
    pub identity: Identity,
    pub lease: Lease,
    /// The claim is written in the state file and the WAL: IDs may be made under it.
    pub pinned: bool,
}

/// The renewer's view of its registry claim, from which [`Node::publish`] decides whether IDs
/// may be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Holding {
    /// No claim yet (or given up after a loss); `refused`: the last claim was refused.
    None { refused: bool },
    /// The registry found another server holding the id at the last contact.
    Lost,
    /// Claimed; IDs only once `pinned` (state file and WAL) and, in fenced mode, while the
    /// lease runs.
    Held { pinned: bool, lease: Lease },
}

impl Node {
    /// The identity a server starts with, from what its data directory holds (`found`), its
    /// settings, and whether it starts as a standby (`standby.signal`). With a registry and no
    /// node id set, the node id the registry assigned is the one the file pins (if its
    /// reservation was made under a claim). A file written for another node id gives the floor
    /// `state_file::resume` says (a node id never used here owes nothing to the others).
    pub fn start(found: &Found, settings: Settings, standby: bool, boot: Boot) -> Start {
        let Settings {
            configured,
            registry,
        } = settings;
        let (floor, history, id, identity, switched) = match found {
            Found::Nothing | Found::AwaitingOldStateFile | Found::Damaged => {
                (i64::MIN, History::EMPTY, configured, None, None)
            }
            Found::Reservation(recorded) => {
                let pinned = (registry && recorded.identity.is_some())
                    .then_some(recorded.node)
                    .flatten();
                match configured.or(pinned) {
                    // No IDs without a node id; whatever it is set to later resumes above
                    // everything here.
                    None => {
                        // Every node id owes the file's reservation; the one it was made under
                        // is also named, for a registry to record (`registry::used_before`).
                        let mut history = recorded.history;
                        history.add(recorded.node, recorded.until);
                        history.add(None, recorded.until);
                        (history.until, history, None, None, None)
                    }
                    Some(node) => {
                        let (floor, history) = state_file::resume(recorded, node);
                        let switched = (recorded.node != Some(node)).then_some(Switch {
                            from: recorded.node,
                            to: node,
                            lead_dropped: floor < recorded.until,
                        });
                        let identity = recorded.identity.filter(|_| recorded.node == Some(node));
                        (floor, history, Some(node), identity, switched)
                    }
                }
            }
        };
        let refusing = if *found == Found::AwaitingOldStateFile {
            Refusing::AwaitingOldStateFile
        } else if registry {
            Refusing::AwaitingClaim
        } else if id.is_none() {
            Refusing::NodeUnset
        } else {
            Refusing::Nothing
        };
        let node = Node {
            refusing,
            id: id.unwrap_or(0),
            history,
            identity,
            ceiling: i64::MAX,
            gives_way: false,
            started_as_standby: standby,
            history_lost: *found == Found::Damaged,
            mark: None,
            boot: boot.value,
            after_clean_stop: boot.after_clean_stop,
            met_holder: false,
            place: boot.place,
        };
        Start {
            node,
            floor,
            switched,
            rewrite: switched.map(|switch| Durable {
                until: floor,
                node: Some(switch.to),
                history,
                identity,
            }),
        }
    }

    /// The node id this server's IDs carry, if it has one: configured, or claimed.
    fn known_id(&self, configured: Option<u32>) -> Option<u32> {
        configured.or(self.identity.map(|_| self.id))
    }

    /// Leaves the node id for `node`: the one left joins the history up to the durable
    /// reservation `used_until` (Unix ms), which bounds every ID issued under it.
    fn switch_to(&mut self, node: u32, used_until: i64) {
        if self.identity.is_some() && node != self.id {
            self.history.add(Some(self.id), used_until);
        }
        self.id = node;
    }

    /// The redo of one reservation record on a standby (or in crash recovery): the floor rises
    /// to it; a reservation of another node id than this server's joins the history; one made
    /// under a registry claim of this server's node id (or, with the node id the registry's
    /// to assign, of any) hands the claim on, so that once promoted this server continues it.
    /// Returns what the state file must say, whenever any of that changed it: the file is
    /// what a restarted standby resumes from, and a node id it forgot could be issued again
    /// below its primary's IDs after a promotion.
    pub fn replay(
        &mut self,
        generator: &mut Generator,
        record: &Record,
        configured: Option<u32>,
    ) -> Option<Durable> {
        let before = (self.history, self.identity, self.id);
        let raised = generator.observe_reservation(record.until);
        let inherits =
            record.identity.is_some() && (configured.is_none() || record.node == configured);
        let own = if inherits {
            if let Some(node) = record.node {
                self.switch_to(node, generator.reserved_until());
            }
            self.identity = record.identity;
            record.node
        } else {
            let own = self.known_id(configured);
            if record.node.is_none() || record.node != own {
                self.history.add(record.node, record.until);
            }
            own
        };
        let changed = (self.history, self.identity, self.id) != before;
        (raised || changed).then_some(Durable {
            until: generator.reserved_until(),
            node: own,
            history: self.history,
            identity: self.identity,
        })
    }

    /// What this server asks the registry for: the id configured, or the one its state file
    /// pins (with the claim's identity), or any. A promoted standby told to take a fresh id
    /// (`fresh_on_promotion`, no node id configured) gives up its primary's. Also returns the
    /// node id the state file recorded, with whose claim a token may be kept. `reserved`: the
    /// generator's durable reservation; `patient`: whether it still waits for a session under
    /// its own label to end (`Memory::patient`).
    pub fn claimant(
        &self,
        configured: Option<u32>,
        fresh_on_promotion: bool,
        reserved: i64,
        patient: bool,
    ) -> (Claimant, Option<u32>) {
        let inherited = self.identity.map(|_| self.id);
        let fresh = self.started_as_standby && fresh_on_promotion && configured.is_none();
        let recorded = if fresh { None } else { inherited };
        let wanted = match (configured, recorded) {
            (Some(node), _) => Want::Configured(node),
            (None, Some(node)) => Want::Pinned(node),
            (None, None) => Want::Any,
        };
        let claimant = Claimant {
            identity: self.identity.filter(|_| !fresh),
            wanted,
            reserved,
            history_lost: self.history_lost,
            patient,
            boot: self.boot,
            after_clean_stop: self.after_clean_stop,
            met_holder: self.met_holder,
            mark: self.mark,
            place: self.place,
        };
        (claimant, recorded)
    }

    /// Whether a registry claim may be made now: not while pg_upgrade's marker waits for the
    /// old state file (a claim's pin would replace the marker, and the old reservation would
    /// be forgotten at the next restart).
    pub fn may_claim(&self) -> bool {
        self.refusing != Refusing::AwaitingOldStateFile
    }

    /// The registry decided a claim for this server: the node id (the one left joins the
    /// history), its floor, the claim and, in `fenced` mode, the lease's ceiling. No ID under
    /// it until it is pinned: [`Refusing::AwaitingClaim`] until [`Node::publish`] says
    /// otherwise. Returns what the state file must say: written before the registry commits
    /// the claim (its intent), and again with the WAL record before the first ID (the pin).
    pub fn intend(&mut self, generator: &mut Generator, claim: &Claim, fenced: bool) -> Durable {
        self.switch_to(claim.node, generator.reserved_until());
        generator.observe_reservation(claim.floor);
        self.identity = Some(claim.identity);
        self.mark = Some(claim.lease.ceiling);
        self.bound_by(&claim.lease, fenced);
        self.started_as_standby = false;
        self.history_lost = false;
        if self.refusing != Refusing::AwaitingOldStateFile {
            self.refusing = Refusing::AwaitingClaim;
        }
        // The intent makes the claim's floor durable before the registry commits the claim: a
        // restart in between resumes above it, never below IDs another holder made under the id.
        assert!(
            generator.reserved_until() >= claim.floor,
            "the intent of a claim from {} would write the reservation {}",
            claim.floor,
            generator.reserved_until()
        );
        // Its mark leaves room above what is durable (`registry::lead_room_ms` at least, however
        // far ahead of the clock the floor is): at or below it, a fenced holder could make no ID
        // under its claim, and an available one would count every ID as past the mark. (Checked
        // in the tests and the simulation: a renewal a backend wrote since the contact read the
        // reservation would only make the holder wait for its next heartbeat.)
        debug_assert!(
            claim.lease.ceiling > generator.reserved_until(),
            "a claim from {} with the mark {} leaves no room above the reservation {}",
            claim.floor,
            claim.lease.ceiling,
            generator.reserved_until()
        );
        Durable {
            until: generator.reserved_until(),
            node: Some(self.id),
            history: self.history,
            identity: self.identity,
        }
    }

    /// The registry found this server a copy of its claim's holder (`Refusal::found_a_copy`):
    /// the claim is not its own. It forgets the claim's identity, so that no later claim of
    /// the id passes for the holder's restart (the holder's session gone for the second its
    /// renewer restarts, the copy would take the id and lock the holder out): it
    /// can only take the id over once the holder's lease has run out and its session is gone,
    /// under a token of its own. Returns what the state file must say, when that changed.
    pub fn disown(&mut self, generator: &Generator) -> Option<Durable> {
        self.identity.take()?;
        self.mark = None;
        Some(Durable {
            until: generator.reserved_until(),
            node: Some(self.id),
            history: self.history,
            identity: None,
        })
    }

    /// A heartbeat extended the lease, finding the registry's mark at `before` and raising it
    /// to the lease's ceiling: in fenced mode that ceiling bounds the reservations; the mark
    /// stays this claim's own only if `before` was (`registry::own_mark`).
    pub fn lease_extended(&mut self, lease: &Lease, fenced: bool, before: i64) {
        self.bound_by(lease, fenced);
        let mark = registry::own_mark(self.mark, before, lease.ceiling);
        // A heartbeat only raises the mark: kept as this claim's own, it is at least the mark
        // the heartbeat found and the one the claim wrote last, or a release would bring the
        // registry's mark down below a raise it never saw.
        assert!(
            mark.is_none_or(|mark| mark >= before && self.mark.is_some_and(|own| mark >= own)),
            "a heartbeat lowered its claim's own mark {:?} to {mark:?} (the registry's: {before})",
            self.mark
        );
        self.mark = mark;
    }

    /// The lease's ceiling, which the registry recorded as the id's mark, bounds the
    /// reservations in both modes; in available mode it gives way when one reaches it.
    fn bound_by(&mut self, lease: &Lease, fenced: bool) {
        self.ceiling = lease.ceiling;
        self.gives_way = !fenced;
    }

    /// The claim a restarted renewer may resume without claiming again: one this server made and
    /// pinned since it started (IDs were made under it, or refused only because its fenced lease
    /// ran out), with the lease its predecessor last had (`lease`). In available mode a renewer
    /// that restarts while the registry is out of reach goes on under it, as its predecessor would
    /// have, and its first contact is a heartbeat: the lease extended, or the claim found lost.
    /// `None` after a start, a loss, a refusal or a promotion: then it claims.
    pub fn resumable(&self, lease: Lease) -> Option<Held> {
        let identity = self.identity?;
        (self.seen_to_hold() && !self.started_as_standby).then_some(Held {
            node: self.id,
            identity,
            lease,
            pinned: true,
        })
    }

    /// The claim was published as held (committed and pinned): IDs are made under it, or were
    /// until its fenced lease ran out or a switch to fenced mode left it without a ceiling. Not
    /// after an intent alone, a loss or a refusal.
    fn seen_to_hold(&self) -> bool {
        matches!(
            self.refusing,
            Refusing::Nothing | Refusing::LeaseExpired | Refusing::AwaitingLease
        )
    }

    /// The renewer stops (the server shuts down, or the renewer restarts) while holding a
    /// claim: the claim is released, so that the server's next start (from its files, which
    /// cannot prove it is this running server) takes it without waiting for it to come back.
    ///
    /// The registry's mark comes down from the lease's ceiling to the IDs made
    /// (`Generator::issued_below`: the durable reservation, or a wake's end), so that the next
    /// claim of the id (this server's restart, or anyone's takeover) starts there instead of a
    /// lease ahead of the clock (restarts that each added a lease to the IDs' lead). In fenced
    /// mode no reservation reaches past it from now on (the ceiling comes down to it); in
    /// available mode the server goes on under its ceiling until its next claim (a renewer's
    /// restart) and counts those IDs as past the mark (`Issuer::release`). Only from the mark
    /// as this claim wrote it last (`Lowering::from`): a raise by anyone else since stays. The
    /// mark stays where it is (no [`Lowering`]) while a renewal is being written (it may end
    /// past the durable reservation read now), when the mark is not known to be its own (raised
    /// by another: the IDs a server made under the id before it joined lie below it), or when
    /// there is nothing to lower.
    ///
    /// `None`, nothing released: no claim of its own, or a claim not seen to hold (an intent
    /// whose commit failed, a loss, a refusal): a copy carrying this server's token may hold
    /// that very claim, the registry having committed it for the copy (the same token, the
    /// row's next generation), and its mark is the copy's (found by the seeded simulation: the
    /// mark lowered under the copy's IDs, then taken above it).
    pub fn release(&mut self, generator: &Generator) -> Option<Release> {
        let identity = self.identity?;
        if !self.seen_to_hold() {
            return None;
        }
        // Above the IDs of a wake too, issued ahead of their reservation (the renewer's own
        // write of it, abandoned on its way out, is no renewal being written).
        let mark = generator.issued_below();
        let lower = self
            .mark
            .filter(|&from| {
                self.ceiling != i64::MAX && !generator.renewing() && mark != i64::MIN && mark < from
            })
            .map(|from| Lowering { from, mark });
        // The one way down for a mark: this claim's own release, from the value the claim
        // wrote last, down, and never below an ID made under it (the next holder starts there).
        if let Some(lower) = lower {
            assert!(
                self.mark == Some(lower.from)
                    && lower.mark < lower.from
                    && lower.mark >= generator.issued_below(),
                "a release lowers the mark {:?} to {lower:?}, IDs made below {}",
                self.mark,
                generator.issued_below()
            );
        }
        // Fenced mode makes no ID past the mark it leaves; available mode goes on under its
        // ceiling until the next claim (a renewer's restart takes a second), and counts what
        // it makes from now on as past the mark (`Issuer::release`).
        if lower.is_some() && !self.gives_way {
            self.ceiling = self.ceiling.min(mark);
        }
        // The mark as this claim wrote it last is now the lowered one (if the registry's
        // compare-and-set found its own; if not, the next heartbeat finds another value and
        // forgets it). In available mode the server goes on under the claim after a renewer's
        // restart, and its next release must lower the mark again: kept as the old value, it
        // was taken for another's raise, and a clean restart after any renewer restart
        // started a lease ahead of the clock.
        if lower.is_some() {
            self.mark = Some(mark);
        }
        Some(Release {
            node: self.id,
            identity,
            lower,
            covers: generator.issued_below().max(generator.reserved_until()),
        })
    }

    /// Says whether IDs may be made, from the renewer's `holding` at monotonic `now`; returns
    /// whether that changed, or the ceiling was lifted (the callers waiting for it are then
    /// woken). A skewed clock refuses whatever is held; in `fenced` mode a lease that ran out
    /// refuses too, while in available mode the ceiling gives way to a reservation that
    /// reaches it instead (`Issuer::renewal_turn`). The pg_upgrade marker is never overridden.
    pub fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, now: i64) -> bool {
        // A switch of mode. To fenced: an available lease's ceiling is no grant (it gives way),
        // so none is left. To available: the fenced ceiling gives way when a reservation
        // reaches it; a server switched while the registry is out of reach hears no heartbeat
        // to lift it, and must not be refused for good.
        let switched = self.gives_way == fenced;
        if fenced && self.gives_way {
            self.ceiling = i64::MAX;
        }
        self.gives_way = !fenced;
        let refusing = match holding {
            Holding::Lost => Refusing::ClaimLost,
            _ if skewed => Refusing::ClockSkew,
            Holding::None { refused: true } => Refusing::ClaimRefused,
            Holding::None { refused: false } | Holding::Held { pinned: false, .. } => {
                Refusing::AwaitingClaim
            }
            Holding::Held { lease, .. } if fenced && !lease.runs_at(now) => Refusing::LeaseExpired,
            // Switched from available mode since the last heartbeat: its ceiling may have given
            // way, its reservations past the mark that heartbeat recorded, where a takeover may
            // start; nothing bounds them until a fenced heartbeat grants a ceiling (which
            // covers them).
            Holding::Held { .. } if fenced && self.ceiling == i64::MAX => Refusing::AwaitingLease,
            Holding::Held { .. } => Refusing::Nothing,
        };
        if self.refusing == Refusing::AwaitingOldStateFile {
            return false;
        }
        // A fenced server makes IDs only below the ceiling its running lease granted: never
        // under none, never under one above it.
        if let Holding::Held { lease, .. } = holding {
            assert!(
                !fenced || refusing != Refusing::Nothing || self.ceiling <= lease.ceiling,
                "a fenced server would make IDs up to {} under a lease that granted {}",
                self.ceiling,
                lease.ceiling
            );
        }
        if self.refusing == refusing {
            return switched;
        }
        self.refusing = refusing;
        true
    }
}

/// How many bytes of a holder's label (or a layout's description) shared memory keeps, with
/// its NUL.
const LABEL_BYTES: usize = 128;

/// The registry's view of this server, as last seen: for reporting (`snowflake_stats()`, the
/// errors a refused call meets), never for deciding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct RegistryStatus {
    /// The last successful contact (Unix ms; `i64::MIN`: none).
    pub last_contact: i64,
    /// The lease's end on this server's monotonic clock (`i64::MIN`: none).
    pub lease_ends_at: i64,
    /// This clock minus the registry's at the last contact (ms).
    pub clock_offset_ms: i64,
    /// The last refusal, with the refused node id and its holder's last heartbeat (Unix ms).
    pub refusal: Option<(u32, Refusal, i64)>,
    /// The holder's label, NUL-padded: of a refused claim, or of the server that took this
    /// one's node id over; for [`Refusal::OtherLayout`], the fleet's layout.
    pub holder_label: [u8; LABEL_BYTES],
}

impl RegistryStatus {
    pub const NONE: RegistryStatus = RegistryStatus {
        last_contact: i64::MIN,
        lease_ends_at: i64::MIN,
        clock_offset_ms: 0,
        refusal: None,
        holder_label: [0; LABEL_BYTES],
    };

    /// The holder's label as text.
    pub fn label(&self) -> String {
        let end = self
            .holder_label
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(LABEL_BYTES);
        String::from_utf8_lossy(&self.holder_label[..end]).into_owned()
    }

    /// Keeps `label` (cut at `LABEL_BYTES - 1` bytes, at a character boundary).
    pub fn set_label(&mut self, label: &str) {
        let mut end = label.len().min(LABEL_BYTES - 1);
        while !label.is_char_boundary(end) {
            end -= 1;
        }
        self.holder_label = [0; LABEL_BYTES];
        self.holder_label[..end].copy_from_slice(&label.as_bytes()[..end]);
    }
}

#[cfg(test)]
mod tests;
