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

mod cases;
pub mod lease;
pub mod table;

/// What a server wants to claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Want {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Claimant {
    pub identity: Option<Identity>,
    pub wanted: Want,
    /// The end of its durable reservation (Unix ms; `i64::MIN`: none): its own IDs reach
    /// that far already.
    pub reserved: i64,
    /// Its state file was damaged and moved aside: the node ids it made IDs under, and how
    /// far, are unknown ([`vouched`]).
    pub history_lost: bool,
    /// It still waits for a registry session under its own label to end, rather than take that
    /// session for a running copy's ([`Refusal::OpenSession`], [`OWN_SESSION_PATIENCE_LEASES`]).
    pub patient: bool,
    /// The value its shared memory drew when the server started (never written to disk): a
    /// row whose holder wrote the same one names this very running server ([`Row::boot`]).
    pub boot: u64,
    /// It started after a clean stop of its data directory (its control file said so), as a
    /// planned restart does: a copy of a running server (pg_basebackup, a snapshot, a cloned
    /// VM) or a promoted standby does not. Such a claimant takes its own released row at once.
    pub after_clean_stop: bool,
    /// A claim of its was refused since it started because the holder of the id it wants,
    /// under its own token, was connected or seen lately: it met a running server that carries
    /// its token, and takes no released row at once (the release may be that server's renewer
    /// restarting).
    pub met_holder: bool,
    /// The registry's mark as its claim last wrote it, while no one else has raised it
    /// (`node::Node::mark`); `None`: not known.
    pub mark: Option<i64>,
    /// Where its data directory lies, as its start measured it (`node::Boot::place`; on no
    /// disk): the same for every start of the data directory where it lies, another for a copy
    /// made elsewhere. A released claim is taken at once only from the place that held it
    /// ([`Row::place`]): a copy of a cleanly stopped data directory carries its files, its
    /// token and its clean stop, and would otherwise pass for its planned restart.
    pub place: u64,
}

/// Who holds a node id: the owner token and the generation of its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub token: u128,
    pub generation: i64,
}

/// An owner token as text: 32 lowercase hex digits, the one form the registry's rows, the state
/// file and the WAL record's description write it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token(pub u128);

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// The one reader of that form: exactly 32 hex digits (no sign, no spaces, either case).
impl std::str::FromStr for Token {
    type Err = ();

    fn from_str(text: &str) -> Result<Token, ()> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(());
        }
        u128::from_str_radix(text, 16).map(Token).map_err(|_| ())
    }
}

/// A node id's row in the registry, as the claim reads it (row locked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    pub node: u32,
    pub identity: Identity,
    pub retired: bool,
    /// The end of the last reservation the registry knows under this id (Unix ms, the holder's
    /// clock; `i64::MIN`: none).
    pub high_water: i64,
    /// The end of the holder's lease (Unix ms, the registry's clock).
    pub lease_until: i64,
    /// A session holds the id's advisory lock: its holder is connected to the registry now.
    pub connected: bool,
    /// The holder's label (cluster name, host and port) is the claimant's. A hint, never a
    /// proof: a clone of a VM carries all three, so a session is never ended for it, and a
    /// claimant only waits a while for the session to end ([`Refusal::OpenSession`]).
    pub same_label: bool,
    /// The row records another layout than the claimant's (a stray: another fleet's server,
    /// a hand edit): it blocks its own id, and is never the claimant's own claim nor a holder
    /// it waits for.
    pub stray: bool,
    /// The boot value of the server that last claimed or heartbeated under the row's claim
    /// ([`Claimant::boot`]; `None`: written by a server that keeps none). The one proof that a
    /// claimant is the running holder itself (its renewer restarted), which a copy of its data
    /// directory or a restart from disk cannot give: neither has the holder's shared memory.
    pub boot: Option<u64>,
    /// The holder's last claim or heartbeat (Unix ms, the registry's clock).
    pub last_seen: i64,
    /// Since when a running holder could have reached the registry and did not: its last
    /// contact, or when the registry last became writable, if later (its server's start, or
    /// its standby's promotion: no holder reaches a registry that is down, restarting or
    /// failing over). Set by the claim (`table::Table::writable_since`). Unix ms, the
    /// registry's clock.
    pub absent_since: i64,
    /// Its holder released the claim when its renewer stopped (`table::release`), and has not
    /// claimed or heartbeated since: the holder's next start from its files takes it at once,
    /// where the holder ran ([`Row::place`]).
    pub released: bool,
    /// The place ([`Claimant::place`]) of the server that last claimed or heartbeated under
    /// the row's claim (`None`: written by a server that keeps none).
    pub place: Option<u64>,
}

/// Why a claim of one node id is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Another server holds it and is live: `connected` (its session holds the id's lock; a
    /// holder behind a hung proxy too, until the registry ends its idle session), or its
    /// lease has not run out.
    HeldByAnother { connected: bool },
    /// This data directory is a copy of the live server holding it (same token, and that
    /// server is connected).
    CopyOfLiveHolder,
    /// A session under the claimant's own label and token holds the id: the claimant's own,
    /// from before a restart after its host went down (the registry ends it once TCP keepalives
    /// find the host gone, within about a lease), or a running copy's that carries the whole
    /// label (a cloned VM). Never told apart by the label, never ended by a claim: the claimant
    /// waits ([`Claimant::patient`]), then a configured id is refused as
    /// [`Refusal::CopyOfLiveHolder`] and a pinned one gives way to a fresh id.
    OpenSession,
    /// This data directory is an older copy: its holder has claimed it again since.
    StaleCopy,
    /// The row names the claimant's own claim, but the claimant cannot prove it is the server
    /// that holds it (a restart from disk, a copy, a promoted standby: none has the holder's
    /// shared memory), and the holder was seen within a heartbeat interval and the clock
    /// margin: a running holder between two sessions comes back by then. Taken over after
    /// `until` (Unix ms, the registry's clock), under a token of the claimant's own.
    HolderMayReturn { until: i64 },
    /// Retired; handed out again once the registry's clock passes `until` (Unix ms).
    RetiredUntil { until: i64 },
    /// Its high-water mark (Unix ms) is further ahead of the registry's clock (`now`) than any
    /// holder's IDs can be: a clock that ran far ahead, or a damaged row. Taking it would stamp
    /// every ID that far in the future.
    MarkAhead { mark: i64, now: i64 },
    /// The registry's fleet makes IDs of another layout (epoch, unit, bits) than the
    /// claimant's ([`check_layout`]), this node id's row the oldest of it: a fleet has one
    /// layout, since the same 64 bits read in two layouts are two other times and node ids,
    /// and IDs of the two can collide. Refused whatever id the claimant wants.
    OtherLayout,
    /// The claimant's state file was damaged (its history lost) and the registry has never
    /// seen this cluster: the node ids it made IDs under are unknown, and any free id could be
    /// one of them ([`vouched`]). Refused whatever id the claimant wants.
    HistoryLost,
}

/// The rows of one layout in the registry's table (`table::Table::layouts`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayoutRows {
    /// The layout, as `Layout::describe` writes it.
    pub layout: String,
    /// How many rows record it.
    pub rows: u64,
    /// The oldest of them (by `claimed_at`, then node id): its node id and when (Unix ms).
    pub first_node: u32,
    pub first_claimed_at: i64,
}

/// Whether a claimant of layout `mine` may claim in a table whose rows record `layouts`. The
/// fleet's layout is the one of the most rows: the first claim sets it, and claims write rows
/// of the claimant's layout only once this check has passed, so a row of another layout comes
/// only from outside (another fleet's server pointed at this registry by hand, a hand edit,
/// junk), and one such row never outweighs a fleet (it used to block every claim). In a tie
/// both layouts may claim, and the first to claim once more outweighs the other: a registry
/// serves one fleet (FLEETS says so).
/// Yes in an empty table, or when no layout has more rows than `mine`, with the oldest row
/// of another layout, if any, to warn of (a stray: it blocks its own node id only). No when
/// another layout has more rows: that layout's oldest row, to name.
pub fn check_layout<'a>(
    layouts: &'a [LayoutRows],
    mine: &str,
) -> Result<Option<&'a LayoutRows>, &'a LayoutRows> {
    let of_mine = layouts
        .iter()
        .find(|l| l.layout == mine)
        .map_or(0, |l| l.rows);
    let others = || layouts.iter().filter(|l| l.layout != mine);
    let fleet = others()
        .filter(|l| l.rows > of_mine)
        .min_by_key(|l| (std::cmp::Reverse(l.rows), l.first_claimed_at, l.first_node));
    match fleet {
        Some(fleet) => Err(fleet),
        None => Ok(others().min_by_key(|l| (l.first_claimed_at, l.first_node))),
    }
}

impl Refusal {
    /// Whether the refusal found the claimant to be a copy of the data directory of its
    /// claim's holder (the same owner token): a live one's, or an older one's. Its claim is
    /// then not its own ([`crate::node::Node::disown`]).
    pub fn found_a_copy(self) -> bool {
        matches!(self, Refusal::CopyOfLiveHolder | Refusal::StaleCopy)
    }

    /// Whether the refusal met the holder of the claimant's own claim live (connected, or seen
    /// lately): [`Claimant::met_holder`] from then on.
    pub fn met_holder(self) -> bool {
        matches!(
            self,
            Refusal::CopyOfLiveHolder | Refusal::OpenSession | Refusal::HolderMayReturn { .. }
        )
    }
}

/// Whether a registry may give `claimant` a node id: one whose history was lost (a damaged
/// state file, moved aside) only if the registry has recorded its cluster before (`known`: a
/// row of its system identifier). Such a cluster has claimed here, and its claims recorded the
/// node ids it used before joining ([`used_before`]) and every one it was given since, as
/// rows: none is handed out below its IDs. A registry that has never seen it knows none of
/// them, and its lowest free id may be the very one the server made IDs under, ahead of its
/// clock.
pub fn vouched(claimant: &Claimant, known: bool) -> Result<(), Refusal> {
    if claimant.history_lost && !known {
        Err(Refusal::HistoryLost)
    } else {
        Ok(())
    }
}

/// Of the node ids a claimant's history names (`named`: IDs were made under them here, up to
/// the history's end; before it joined the registry, or before its node id changed), those the
/// registry must record before its claim, so that no other server is handed one of them below
/// those IDs: every one but the id it claims by name (`wanted`), whose row the claim writes.
/// The registry records each as retired at the history's end: handed out again only once its
/// clock is past that, and above it. A history that counts every node id (a 0.3.0 file, or one
/// that named more than it holds) can only give the ids it names.
pub fn used_before(named: &[u32], wanted: Want) -> Vec<u32> {
    let claimed = match wanted {
        Want::Configured(node) | Want::Pinned(node) => Some(node),
        Want::Any => None,
    };
    named
        .iter()
        .copied()
        .filter(|&node| Some(node) != claimed)
        .collect()
}

/// How far a high-water mark may lead the registry's clock before a claim refuses it as a
/// clock fault, beyond the lease and the clock margin: a holder's reservations lead its clock
/// by at most a few seconds (its reservation, borrowing), and its clock is within the margin of
/// the registry's.
pub const MARK_AHEAD_SLACK_MS: i64 = 60_000;

/// How many leases a claimant waits for a session under its own label to end
/// ([`Refusal::OpenSession`]): TCP keepalives end a vanished holder's session within about two
/// thirds of a lease (`keepalives`: a third idle, three probes a ninth apart), or a lease when
/// data was in flight (the user timeout); two leases leave room for the registry to notice.
pub const OWN_SESSION_PATIENCE_LEASES: i64 = 2;

/// What a claim of one node id comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Take it (again): issue only above `floor` (Unix ms; `i64::MIN`: nothing owed), with
    /// the next generation. `recycled`: a retired id handed out again. `own`: the running
    /// holder itself, which keeps its token; any other claimant takes the id under a token of
    /// its own, so that a server that still carries the old one is told the truth (the id was
    /// taken over), never that it is a copy.
    Take {
        node: u32,
        floor: i64,
        generation: i64,
        recycled: bool,
        own: bool,
    },
    /// Take the lowest free id instead, under a new token (this server is not `node`'s holder,
    /// and its node id is the registry's to assign).
    Fresh { not: Option<(u32, Refusal)> },
    /// Refused: the configured id is not this server's to take.
    Refuse { node: u32, refusal: Refusal },
}

/// The registry's clock and the bounds a claim is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bounds {
    /// The registry's time (Unix ms).
    pub now: i64,
    /// The clock margin (`pg_snowflake.max_clock_skew_ms`): a retired id is handed out again
    /// once `now` is past its high-water mark by this.
    pub margin_ms: i64,
    /// The lease (`pg_snowflake.registry_lease_ms`): a fenced holder's mark leads its clock by
    /// up to this.
    pub lease_ms: i64,
}

impl Bounds {
    /// The furthest a high-water mark may lead the registry's clock (Unix ms), or, for the
    /// holder's own restart, its own reservation (`own_reserved`): a mark that leads by its
    /// own lead (a floor its IDs resumed from, or a mark left by a build whose crash restarts
    /// each resumed a lease past the last) is its own, not a clock fault to refuse.
    fn mark_limit(&self, own_reserved: i64) -> i64 {
        self.now
            .max(own_reserved)
            .saturating_add(self.lease_ms)
            .saturating_add(self.margin_ms)
            .saturating_add(MARK_AHEAD_SLACK_MS)
    }
}

/// Decides a claim of `row`'s node id (or of an id without a row, `row == None`, numbered
/// `node`), at the registry's time `at.now`.
pub fn decide(claimant: &Claimant, node: u32, row: Option<&Row>, at: &Bounds) -> Decision {
    let outcome = match row {
        None => Ok(Taken {
            floor: i64::MIN,
            generation: 1,
            recycled: false,
            own: false,
        }),
        Some(row) => judge(claimant, row, at),
    };
    let own_label = row.is_some_and(|row| row.same_label);
    let stray = row.is_some_and(|row| row.stray);
    match (outcome, claimant.wanted) {
        (
            Ok(Taken {
                floor,
                generation,
                recycled,
                own,
            }),
            _,
        ) => Decision::Take {
            node,
            floor,
            generation,
            recycled,
            own,
        },
        // A row of another layout blocks its own id only: a server the state file pins there
        // (its claim's intent, which did not commit before the stray row appeared) takes a
        // fresh id, as for any id held by another; a configured one stays refused.
        (Err(refusal), Want::Pinned(_)) if stray => Decision::Fresh {
            not: Some((node, refusal)),
        },
        (Err(Refusal::CopyOfLiveHolder), _) if own_label && claimant.patient => Decision::Refuse {
            node,
            refusal: Refusal::OpenSession,
        },
        // It may be the holder (or is: its own session from before its renewer restarted,
        // not ended yet): it waits, whatever it wants, and keeps its id. So does a
        // server whose id another claimed and left (no session, its lease running): its own
        // takeover's intent that did not commit (under a token of its own) leaves it so.
        (
            Err(
                refusal @ (Refusal::HolderMayReturn { .. }
                | Refusal::HeldByAnother { connected: false }),
            ),
            Want::Pinned(_),
        )
        | (Err(refusal @ (Refusal::HolderMayReturn { .. } | Refusal::OpenSession)), _) => {
            Decision::Refuse { node, refusal }
        }
        (Err(refusal), Want::Configured(_)) => Decision::Refuse { node, refusal },
        (Err(refusal), _) => Decision::Fresh {
            not: Some((node, refusal)),
        },
    }
}

/// How long a claimant that cannot prove it holds a row's claim waits, after the holder was
/// last seen (or the registry became writable, if later: [`Row::absent_since`]), for a running
/// holder to come back (ms): a heartbeat interval and the clock margin. A running holder
/// heartbeats every interval and reconnects within a second when it finds its session gone (a
/// registry restart or failover, a link that came back), so one seen that recently is not taken
/// for gone.
pub fn holder_may_return_ms(lease_ms: i64, margin_ms: i64) -> i64 {
    heartbeat_interval_ms(lease_ms).saturating_add(margin_ms)
}

/// How far past IDs that already lead the clock by about a lease (a floor ahead of the clock, a
/// clock set back) a mark reaches ([`Lease::ceiling_for`], and a claim past its floor): what
/// a crash restart waits for before its claim ([`holder_may_return_ms`]: a heartbeat interval
/// and the clock margin). Enough for the holder to go on making IDs until its next heartbeat
/// (its IDs advance at most an interval meanwhile, at nine tenths of real time while ahead, and
/// its reservation a second or so past them), and no more than a crash restart waits: a restart
/// then finds the mark no further ahead of its clock than the IDs were when the mark was
/// recorded, and crashes in a row never pile up the lead.
pub fn lead_room_ms(lease_ms: i64, margin_ms: i64) -> i64 {
    holder_may_return_ms(lease_ms, margin_ms)
}

/// A claim [`judge`] lets through.
struct Taken {
    floor: i64,
    generation: i64,
    recycled: bool,
    /// The running holder itself ([`Decision::Take`]).
    own: bool,
}

/// Whether `claimant` may take `row`'s id: its floor, generation, whether it is a recycled
/// one and whether the claimant is its running holder, or why not. Decided by the first case
/// of the table ([`cases::CASES`]) whose guard holds on what the claim reads ([`cases::Facts`]).
fn judge(claimant: &Claimant, row: &Row, at: &Bounds) -> Result<Taken, Refusal> {
    let facts = cases::Facts::of(claimant, row, at);
    cases::deciding(&facts).outcome.ruling(claimant, row, at)
}

/// Why an id may not be retired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unretirable {
    /// No live row: never claimed, or retired already.
    NoLiveRow,
    /// Its holder is connected to the registry.
    Connected,
    /// Its holder's lease runs until then (Unix ms, the registry's clock): a holder cut off
    /// from the registry, or one the registry restarted under, may still be making IDs.
    LeaseRuns { until: i64 },
}

/// Whether `row`'s id may be retired at the registry's time `now`: only once its holder is
/// gone, neither connected nor within its lease. Retiring a holder that still makes IDs would
/// hand its id out again below them (in available mode the mark does not bound them).
pub fn may_retire(row: Option<&Row>, now: i64) -> Result<(), Unretirable> {
    match row {
        None => Err(Unretirable::NoLiveRow),
        Some(row) if row.retired => Err(Unretirable::NoLiveRow),
        Some(row) if row.connected => Err(Unretirable::Connected),
        Some(row) if now < row.lease_until => Err(Unretirable::LeaseRuns {
            until: row.lease_until,
        }),
        Some(_) => Ok(()),
    }
}

/// What one heartbeat found, from whether the registry's row still names this holder (`ours`:
/// its token and generation) and whether the session now holds the id's advisory lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Beat {
    /// The lease is extended. Without the lock (`locked: false`: this server's previous session,
    /// cut off, still holds it until the registry notices, or a rival's claim is reading the
    /// row this instant) it is tried again at the next heartbeat.
    Extended { locked: bool },
    /// Another server took the id over: this one's claim is lost, whatever its lock says.
    Lost,
}

/// A heartbeat's outcome. The row decides, never the lock alone: a lock held by another
/// session says nothing about whose the id is now, and a holder that took it for "unreachable"
/// would never find a takeover made while it was cut off.
pub fn beat(ours: bool, locked: bool) -> Beat {
    if ours {
        Beat::Extended { locked }
    } else {
        Beat::Lost
    }
}

/// The mark only rises: a node id's high-water mark is brought down only by the release of
/// the claim that wrote it, and only from the very value that claim wrote last (a
/// compare-and-set, [`table::released_mark`]). A raise by anyone else is never undone: a
/// server that joins with IDs made under the id before (`table::Table::record_used`, which
/// always moves a live row's mark), a heartbeat of this claim whose answer was lost. What the
/// holder keeps between heartbeats is `own`, the mark as its claim last wrote it (`None`: not
/// known to be its own any more); a heartbeat that found the mark at `before` and raised it to
/// `sent` keeps it only if `before` was its own.
pub fn own_mark(own: Option<i64>, before: i64, sent: i64) -> Option<i64> {
    own.filter(|&own| own == before).map(|own| own.max(sent))
}

/// Whether an id without a row, or with `row`, is free to hand out as a fresh id at `at.now`.
pub fn is_free(row: Option<&Row>, at: &Bounds) -> bool {
    row.is_none_or(|row| row.retired && at.now > row.high_water.saturating_add(at.margin_ms))
}

/// How far the local wall clock is ahead of the registry's (ms; negative: behind): the
/// registry read `registry_ms` between the local readings `sent` and `received`, so at their
/// midpoint, within half the round trip.
pub fn clock_offset(sent: i64, received: i64, registry_ms: i64) -> i64 {
    sent + (received - sent) / 2 - registry_ms
}

/// The registry's lease as the holder sees it, on its monotonic clock: a heartbeat sent at
/// `sent` extends it by `lease_ms` from then (the registry counts from when it received it,
/// later, so the holder's end is never after the registry's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    /// generator whose IDs may already reach `position` (its durable reservation, or the time
    /// a call would issue at; Unix ms): a lease past the clock, or, for IDs that already lead
    /// the clock by more than a lease less `room_ms` ([`lead_room_ms`]), `room_ms` past them.
    /// Never a lease past a lead: a crash restart resumes at the mark its crashed run left, a
    /// lease past that run's last contact, and a mark a lease past the restart's lead would be
    /// the next restart's floor, so that each crash in a row stamped the first IDs a lease
    /// further ahead of the clock. The room past a lead is at most what a crash restart waits
    /// for before its claim, so a restart never finds the mark further ahead of its clock than
    /// the IDs were when it was recorded: crashes in a row never add to the lead.
    pub fn ceiling_for(sent_wall: i64, position: i64, lease_ms: i64, room_ms: i64) -> i64 {
        sent_wall
            .saturating_add(lease_ms)
            .max(position.saturating_add(room_ms))
    }

    /// Whether the lease still runs at monotonic `now`.
    pub fn runs_at(&self, now: i64) -> bool {
        now < self.ends_at
    }
}

/// How a holder's registry session finds its holder gone: TCP keepalives and a user timeout,
/// so that the registry ends the session of a holder whose host vanished (power loss, a frozen
/// link: no FIN, no reset) within about a lease, not the two hours the system's defaults take;
/// and an idle limit, for a holder behind a hung proxy, whose kernel answers the probes. Until
/// it does, the id's advisory lock says "connected" and no rival can take the id. Set in the
/// session (`SET tcp_keepalives_*`, `SET tcp_user_timeout`, `SET idle_session_timeout`), so
/// nothing needs configuring on the registry's server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Keepalives {
    /// Seconds of silence before the first probe.
    pub idle_s: i64,
    /// Seconds between probes.
    pub interval_s: i64,
    /// Unanswered probes before the session is given up.
    pub probes: i64,
    /// How long data the registry sent may stay unacknowledged (ms): a link that froze while an
    /// answer was on its way is retransmitted to, not probed, and without this the system's
    /// retransmissions take a quarter of an hour.
    pub user_timeout_ms: i64,
    /// How long the session may send nothing at all (ms; `idle_session_timeout`): two leases,
    /// six heartbeats' time. A hung proxy or pooler between the holder and the registry (its
    /// kernel still acknowledging) answers every probe for a holder long dead, and its session
    /// would hold the id's lock for as long as it hangs; a live holder heartbeats three
    /// times a lease.
    pub idle_session_ms: i64,
}

/// The [`Keepalives`] for a lease of `lease_ms`.
pub fn keepalives(lease_ms: i64) -> Keepalives {
    Keepalives {
        idle_s: (lease_ms / 3_000).max(1),
        interval_s: (lease_ms / 9_000).max(1),
        probes: 3,
        user_timeout_ms: lease_ms.max(1_000),
        idle_session_ms: lease_ms.saturating_mul(2).max(2_000),
    }
}

/// One host of a registry's connection string, as the keywords that restrict a connection to
/// it (`None`: not given).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Host {
    pub host: Option<String>,
    pub hostaddr: Option<String>,
    pub port: Option<String>,
}

/// The hosts of a connection string whose `host`, `hostaddr` and `port` are these (libpq's
/// comma-separated lists: a registry primary and its standbys), one at a time, or `None` for
/// a string of one host (or of lists libpq would refuse: it says why). A holder tries them in
/// turn, each within its share of the exchange's deadline: libpq's own walk through the list
/// waits on the first host for the whole deadline when that host hangs (powered off, cut off,
/// frozen), and would never reach a standby promoted meanwhile.
pub fn hosts(host: Option<&str>, hostaddr: Option<&str>, port: Option<&str>) -> Option<Vec<Host>> {
    let list = |value: Option<&str>| -> Vec<String> {
        value
            .filter(|v| !v.is_empty())
            .map(|v| v.split(',').map(|part| part.trim().to_string()).collect())
            .unwrap_or_default()
    };
    let (hosts, addrs, ports) = (list(host), list(hostaddr), list(port));
    let n = hosts.len().max(addrs.len());
    let fits = |items: &[String]| items.is_empty() || items.len() == n;
    if n < 2 || !fits(&hosts) || !fits(&addrs) || !(fits(&ports) || ports.len() == 1) {
        return None;
    }
    let nth = |items: &[String], i: usize| match items.len() {
        0 => None,
        1 => Some(items[0].clone()),
        _ => Some(items[i].clone()),
    };
    Some(
        (0..n)
            .map(|i| Host {
                host: nth(&hosts, i),
                hostaddr: nth(&addrs, i),
                port: nth(&ports, i),
            })
            .collect(),
    )
}

/// How long one exchange with the registry may take at most (ms), whatever the lease.
pub const EXCHANGE_TIMEOUT_MS: i64 = 5_000;

/// How long a holder of a lease of `lease_ms` gives one exchange with the registry (a
/// heartbeat, a claim, a connection) before it gives up on it (ms): a third of the lease, from
/// half a second to [`EXCHANGE_TIMEOUT_MS`], so that a registry that hangs (stopped, not down)
/// is given up in time to extend the lease on the next try.
pub fn exchange_deadline_ms(lease_ms: i64) -> i64 {
    (lease_ms / 3).clamp(500, EXCHANGE_TIMEOUT_MS)
}

/// How often the holder sends a heartbeat under a lease of `lease_ms`: three times per lease, so
/// two heartbeats in a row may fail before it runs out.
pub fn heartbeat_interval_ms(lease_ms: i64) -> i64 {
    (lease_ms / 3).max(100)
}

#[cfg(test)]
mod tests;
