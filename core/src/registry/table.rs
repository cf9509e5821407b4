//! The registry's procedures, written once: a claim, a heartbeat, a release and a retirement,
//! each the order of the steps over the registry's table ([`Table`]) and the rules of the parent
//! module that decide at each step ([`decide`], [`is_free`], [`vouched`], [`beat`],
//! [`may_retire`]). The extension's `src/registry/client.rs` implements [`Table`] in SQL against
//! the registry database; the fleet model (`node/tests/model/registry.rs`) implements it in
//! memory, with commits that fail or lose their answer. Both run these functions: the model runs
//! the procedure that ships.

use super::{
    beat, check_layout, decide, exchange_deadline_ms, is_free, may_retire, vouched, Beat, Bounds,
    Claimant, Decision, Identity, LayoutRows, Refusal, Row, Unretirable, Want,
};

/// How many free ids a claim of any id tries, lowest first, before it says none is free.
pub const FRESH_CANDIDATES: usize = 64;

/// How long a claim's transaction may stay idle on the registry (ms) under a lease of
/// `lease_ms`: half a heartbeat's exchange deadline ([`exchange_deadline_ms`]), at least 250 ms.
/// The claim holds the table's lock, which every heartbeat waits for; a claimant's intent is
/// written between its statements (a state file and its directory fsynced: milliseconds on a
/// healthy disk), so a disk that stalls, or a link that froze, would hold every member's
/// heartbeats until their leases ran out (15 s fsyncs on one member's disk refused IDs
/// fleet-wide for 27 s; for good if the disk hangs). Ended past this, the claim is not
/// committed; its intent, once written, is accepted by the next claim (`judge`: the generation
/// it recorded or the row's). A heartbeat waits at most this long behind one stalled claim,
/// half its own deadline, so it never times out behind one (a quarter of the lease did, past
/// 5 s, for leases over 20 s); and a holder heartbeats three times a lease: no lease runs out
/// for it. Members of one fleet share the lease.
pub fn idle_limit_ms(lease_ms: i64) -> i64 {
    (exchange_deadline_ms(lease_ms) / 2).max(250)
}

/// The same for a retirement, whose transaction does nothing between its statements but wait
/// for the registry's answers: half the shortest exchange deadline, so that a frozen link under
/// a retirement never makes a heartbeat behind it time out.
const RETIRE_IDLE_LIMIT_MS: i64 = 250;

/// The same for a release, whose transaction reads the row and writes it back.
const RELEASE_IDLE_LIMIT_MS: i64 = 250;

/// What a server tells the registry with a claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// How it is named (`cluster_name`, host and port).
    pub label: String,
    /// Its cluster's system identifier.
    pub system: u64,
    /// Its layout, described (one per fleet).
    pub layout: String,
    /// The highest node id its layout has.
    pub max_node: u32,
    pub lease_ms: i64,
    /// The high-water mark to record with the claim (Unix ms), for a claim that owes nothing:
    /// a lease past the claimant's clock, or room past where its IDs reach if later
    /// (`Lease::ceiling_for`).
    pub high_water: i64,
    /// How far past a takeover's floor the mark reaches at least: the room past a lead
    /// (`registry::lead_room_ms`), never a lease.
    pub ahead_of_floor_ms: i64,
    pub clock_offset_ms: i64,
    /// The clock margin (`pg_snowflake.max_clock_skew_ms`).
    pub margin_ms: i64,
    /// The node id of its state file, with whose claim its token may be kept.
    pub recorded_node: Option<u32>,
    /// A token for a claim that needs a new one.
    pub new_token: u128,
    /// Its boot value (`registry::Claimant::boot`), written into the row it claims.
    pub boot: u64,
    /// Its place (`registry::Claimant::place`), written into the row it claims.
    pub place: u64,
    /// The node ids it made IDs under before (`registry::used_before`), up to `used_until`
    /// (Unix ms): recorded before the claim.
    pub used_before: Vec<u32>,
    pub used_until: i64,
}

/// A node id's row as a claim or a retirement reads it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowRead {
    /// The row as the rules judge it (`connected` and `same_label` are the procedure's to set).
    pub row: Row,
    /// Its holder's label.
    pub label: String,
    /// The layout its holder described.
    pub layout: String,
}

/// How a release brings its row's mark down: from `from`, the value its claim wrote last (and
/// only from that: `registry::own_mark`), to `mark` (Unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lowering {
    pub from: i64,
    pub mark: i64,
}

/// What one heartbeat writes into its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeartbeatRequest {
    /// The lease, from now (ms).
    pub lease_ms: i64,
    /// The mark to raise the row's to (Unix ms).
    pub high_water: i64,
    /// This server's clock less the registry's (ms).
    pub clock_offset_ms: i64,
    /// This server's boot value (`registry::Claimant::boot`): the row's holder is running.
    pub boot: u64,
    /// This server's place (`registry::Claimant::place`): where the row's holder runs.
    pub place: u64,
}

/// A claim the registry decided to grant (committed once [`claim`] returns it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    pub node: u32,
    pub identity: Identity,
    pub floor: i64,
    /// The high-water mark recorded (Unix ms): the lease's ceiling in fenced mode.
    pub mark: i64,
    pub how: &'static str,
    /// The oldest row of another layout than the fleet's, if any (its node id and layout):
    /// a stray the claimant warns of (`registry::check_layout`).
    pub stray: Option<(u32, String)>,
}

/// How a claim ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClaimOutcome {
    Granted(Grant),
    Refused {
        node: u32,
        why: Refusal,
        label: String,
        last_seen: i64,
    },
    NoFreeId,
}

/// What one heartbeat found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Heartbeat {
    /// The lease is extended; `locked`: the session holds the id's advisory lock; `before`: the
    /// mark it found (Unix ms; `i64::MIN`: none), before raising it (`registry::own_mark`).
    Extended { locked: bool, before: i64 },
    /// The row no longer names this holder: another server took the id over (`label`), or
    /// (`None`) the id was retired.
    Lost { label: Option<String> },
}

/// How an attempt to retire an id ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Retirement {
    /// Retired: it keeps this high-water mark (Unix ms), or none.
    Retired { high_water: Option<i64> },
    /// Not retired: no live row (never claimed, or retired already).
    NoLiveRow,
    /// Not retired: its holder (this label) is connected to the registry.
    Connected { label: String },
    /// Not retired: its holder's (this label) lease runs until then (Unix ms), it may still
    /// make IDs.
    LeaseRuns { label: String, until: i64 },
    /// Not retired: the claim to retire ([`retire_claim`]) is over, the id claimed again since
    /// by this label's server, whose id it now is.
    ClaimedAgain { label: String },
}

/// The registry's table as seen from one session of the registry's server: each method one
/// statement (or one exchange), none of them deciding anything.
///
/// A session may hold each node id's advisory lock ([`Table::try_lock`]): the registry's own
/// sign that the holder is connected, released by the registry's server the moment the
/// session ends, with nothing to clean up.
pub trait Table {
    /// Why an exchange with the registry failed.
    type Failure;

    /// Starts a transaction that holds the table's lock against every other claim, retirement
    /// and heartbeat (readers go on), and that the registry ends, with the session, once this
    /// server leaves it idle for `idle_limit_ms`: a claimant stuck between two statements (in
    /// its intent's fsync on a slow disk, behind a frozen link) holds the fleet's heartbeats
    /// for that long at most ([`idle_limit_ms`]).
    fn begin(&mut self, idle_limit_ms: i64) -> Result<(), Self::Failure>;
    /// Commits the transaction. A failure leaves it undecided: committed or not.
    fn commit(&mut self) -> Result<(), Self::Failure>;
    /// Rolls the transaction back, if it can (a failed session has nothing to roll back).
    fn rollback(&mut self);
    /// The registry's clock (Unix ms).
    fn clock(&mut self) -> Result<i64, Self::Failure>;
    /// Each layout the rows record, with how many and the oldest of them.
    fn layouts(&mut self) -> Result<Vec<LayoutRows>, Self::Failure>;
    /// Whether a row records the cluster `system` (its system identifier).
    fn cluster_known(&mut self, system: u64) -> Result<bool, Self::Failure>;
    /// Records `node` as used before by `request`'s server, up to `request.used_until`: a
    /// retired row with that mark and no holder (token 0), or the row's mark raised to it,
    /// a live row's too (its holder is not touched: its next claimant starts above the IDs
    /// made under the id here, which may lie ahead of the registry's clock). A live row's
    /// mark is moved by at least a millisecond even when it is past `used_until` already, so
    /// that its holder's compare-and-set sees another's raise and its release never brings
    /// the mark back below those IDs (`registry::own_mark`).
    fn record_used(&mut self, node: u32, request: &Request) -> Result<(), Self::Failure>;
    /// Tries `node`'s advisory lock in this session: whether it got it (or had it already).
    fn try_lock(&mut self, node: u32) -> Result<bool, Self::Failure>;
    /// Releases `node`'s advisory lock if this session took it in this transaction.
    fn unlock(&mut self, node: u32) -> Result<(), Self::Failure>;
    /// `node`'s row, if it has one (`connected`, `same_label` and `stray` false, and
    /// `absent_since` its `last_seen`: the caller's to set).
    fn read_row(&mut self, node: u32) -> Result<Option<RowRead>, Self::Failure>;
    /// When the registry's server last began to take writes (Unix ms, its clock): its start,
    /// or the promotion of the standby it was, whichever is later. No holder reaches the
    /// registry before (it was down, restarting or failing over), so a holder's absence counts
    /// from then at the earliest ([`Row::absent_since`]). A time at or after that is safe (a
    /// takeover waits the longer); an earlier one is not: the outage before a promotion would
    /// count as every holder's absence, and a failover slower than a heartbeat interval and
    /// the clock margin would hand running holders' ids to whoever claims first.
    fn writable_since(&mut self) -> Result<i64, Self::Failure>;
    /// Up to `limit` node ids, lowest first, from 0 to `request.max_node`, among which are the
    /// lowest that may be free: no row, or retired with the registry's clock past its mark by
    /// `request.margin_ms`. A table may leave out ids it knows are not free; [`claim`] checks
    /// each it is given.
    fn candidates(&mut self, request: &Request, limit: usize) -> Result<Vec<u32>, Self::Failure>;
    /// Writes `node`'s row live for `identity`, claimed now by `request`'s server (its label,
    /// boot value and place), its lease running `request.lease_ms` from now, its mark raised to
    /// `mark` (`i64::MIN`: none).
    fn write_claim(
        &mut self,
        node: u32,
        identity: Identity,
        mark: i64,
        request: &Request,
    ) -> Result<(), Self::Failure>;
    /// Extends `node`'s lease by `request.lease_ms`, raises its mark to `request.high_water`
    /// and writes the holder's boot value and place, if its row is live and names `identity`: the mark
    /// it found before raising it (Unix ms; `i64::MIN`: none), or `None` if the row is not
    /// this claim's.
    fn heartbeat_row(
        &mut self,
        node: u32,
        identity: Identity,
        request: &HeartbeatRequest,
    ) -> Result<Option<i64>, Self::Failure>;
    /// The label of `node`'s live row's holder, if it has a live row.
    fn live_label(&mut self, node: u32) -> Result<Option<String>, Self::Failure>;
    /// `node`'s mark (Unix ms; `i64::MIN`: none), its row locked until the transaction ends, if
    /// the row is live and names `identity`; `None` if it is not that claim's any more.
    fn claims_mark(&mut self, node: u32, identity: Identity) -> Result<Option<i64>, Self::Failure>;
    /// Marks `node`'s row released by its holder, now, its mark set to `mark` (Unix ms;
    /// `i64::MIN`: none).
    fn write_release(&mut self, node: u32, mark: i64) -> Result<(), Self::Failure>;
    /// Marks `node`'s row retired, now.
    fn retire_row(&mut self, node: u32) -> Result<(), Self::Failure>;
}

/// Claims a node id for `claimant`, in one transaction under the table's lock. A claim the
/// registry grants is handed to `intent` before the COMMIT (the server records it durably
/// there); if `intent` fails, the transaction is rolled back.
pub fn claim<T: Table>(
    table: &mut T,
    claimant: &Claimant,
    request: &Request,
    intent: impl FnOnce(&Grant) -> Result<(), T::Failure>,
) -> Result<ClaimOutcome, T::Failure> {
    table.begin(idle_limit_ms(request.lease_ms))?;
    let claimed = decide_claim(table, claimant, request).and_then(|claimed| {
        if let ClaimOutcome::Granted(grant) = &claimed {
            intent(grant)?;
        }
        Ok(claimed)
    });
    match claimed {
        // A failed COMMIT leaves the claim undecided: the caller tries again with the intent
        // it recorded, which the registry accepts whether or not it committed.
        Ok(claimed) => table.commit().map(|_| claimed),
        Err(failure) => {
            // The failure is what the caller is told: a rollback on a session that failed has
            // nothing to say about the cause.
            table.rollback();
            Err(failure)
        }
    }
}

/// The claim's steps, inside its transaction: the fleet's one layout (a stray row of another
/// named with a claim taken), then [`decide_id`].
fn decide_claim<T: Table>(
    table: &mut T,
    claimant: &Claimant,
    request: &Request,
) -> Result<ClaimOutcome, T::Failure> {
    let at = Bounds {
        now: table.clock()?,
        margin_ms: request.margin_ms,
        lease_ms: request.lease_ms,
    };
    // One layout per fleet: the first claim sets it, every later one must share it; a row of
    // another layout is a stray, warned of with the claim.
    let layouts = table.layouts()?;
    let stray = match check_layout(&layouts, &request.layout) {
        Ok(stray) => stray.map(|s| (s.first_node, s.layout.clone())),
        Err(fleet) => {
            return Ok(ClaimOutcome::Refused {
                node: fleet.first_node,
                why: Refusal::OtherLayout,
                label: fleet.layout.clone(),
                last_seen: i64::MIN,
            })
        }
    };
    let mut claimed = decide_id(table, claimant, request, &at)?;
    if let ClaimOutcome::Granted(grant) = &mut claimed {
        grant.stray = stray;
    }
    Ok(claimed)
}

/// The claim's steps past the layout: a lost history vouched for; the node ids used before
/// recorded; the id wanted by name judged (taken, refused, or given way to a fresh one); else
/// the lowest free id.
fn decide_id<T: Table>(
    table: &mut T,
    claimant: &Claimant,
    request: &Request,
    at: &Bounds,
) -> Result<ClaimOutcome, T::Failure> {
    if claimant.history_lost {
        if let Err(why) = vouched(claimant, table.cluster_known(request.system)?) {
            return Ok(ClaimOutcome::Refused {
                // No id was judged: the refusal names none.
                node: 0,
                why,
                label: String::new(),
                last_seen: i64::MIN,
            });
        }
    }
    if request.used_until != i64::MIN {
        for &node in request
            .used_before
            .iter()
            .filter(|&&node| node <= request.max_node)
        {
            table.record_used(node, request)?;
        }
    }
    let given_way = match wanted_id(table, claimant, request, at)? {
        WantedId::Decided(outcome) => return Ok(outcome),
        WantedId::Fresh { given_way } => given_way,
    };
    let how = given_way.map_or("assigned", |_| "fresh id");
    lowest_free_id(table, request, at, given_way, how)
}

/// What became of the id a claimant wanted by name, if it wanted one.
enum WantedId {
    /// Taken or refused: the claim's outcome.
    Decided(ClaimOutcome),
    /// A fresh id is to be taken: none was wanted by name (`None`), or the claimant gave way on
    /// the id it wanted, its last choice as a fresh one (its own retired id, free again: the
    /// operator retired it, so any other free id comes first).
    Fresh { given_way: Option<u32> },
}

/// Decides the id `claimant` wants by name (`pg_snowflake.node_id`, or the one its state file
/// pins), if any: taken, refused, or given way on for a fresh one.
fn wanted_id<T: Table>(
    table: &mut T,
    claimant: &Claimant,
    request: &Request,
    at: &Bounds,
) -> Result<WantedId, T::Failure> {
    let (Want::Configured(node) | Want::Pinned(node)) = claimant.wanted else {
        return Ok(WantedId::Fresh { given_way: None });
    };
    let found = read_locked(table, node)?;
    let writable_since = match found {
        Some(_) => table.writable_since()?,
        None => i64::MIN,
    };
    let row = found.as_ref().map(|f| Row {
        same_label: f.label == request.label,
        stray: f.layout != request.layout,
        // A holder cannot reach a registry that is down: its absence counts from its last
        // contact, or from when the registry last became writable, if later.
        absent_since: f.row.last_seen.max(writable_since),
        ..f.row
    });
    Ok(match decide(claimant, node, row.as_ref(), at) {
        Decision::Take {
            generation,
            floor,
            recycled,
            own,
            ..
        } => {
            // The row's token is kept only by its running holder: a restart from disk, a copy
            // or a promoted standby that takes it over does so under a new one, and whoever
            // else still carries the old token finds the id taken over.
            let keep = claimant.identity.filter(|k| {
                request.recorded_node == Some(node)
                    && (own || row.is_none_or(|r| r.identity.token != k.token))
            });
            let how = match (row, recycled) {
                (None, _) => "new",
                (_, true) => "recycled",
                (Some(r), _) if keep.is_some_and(|k| k.token == r.identity.token) => "restart",
                _ => "takeover",
            };
            let token = keep.map_or(request.new_token, |k| k.token);
            // Every claim of an id held before starts above its mark, but the running holder's
            // own: the IDs between its floor and the mark are its own.
            assert!(
                own || row.is_none_or(|r| floor >= r.high_water),
                "a claim of node id {node} starts at {floor}, below its mark {:?}",
                row.map(|r| r.high_water)
            );
            let identity = Identity { token, generation };
            WantedId::Decided(take(
                table,
                request,
                node,
                row.as_ref(),
                identity,
                floor,
                how,
            )?)
        }
        Decision::Refuse { node, refusal } => {
            table.unlock(node)?;
            let (label, last_seen) = found
                .map(|f| (f.label, f.row.last_seen))
                .unwrap_or_default();
            WantedId::Decided(ClaimOutcome::Refused {
                node,
                why: refusal,
                label,
                last_seen,
            })
        }
        Decision::Fresh { .. } => {
            table.unlock(node)?;
            WantedId::Fresh {
                given_way: Some(node),
            }
        }
    })
}

/// Takes the lowest free id whose advisory lock no session holds (`how`: how the log names
/// the claim), the id `given_way` on last: a retired id's old holder may still be connected (it
/// lost its claim and has not noticed yet), so the next candidate is tried.
fn lowest_free_id<T: Table>(
    table: &mut T,
    request: &Request,
    at: &Bounds,
    given_way: Option<u32>,
    how: &'static str,
) -> Result<ClaimOutcome, T::Failure> {
    let mut candidates = table.candidates(request, FRESH_CANDIDATES)?;
    if let Some(last) = given_way {
        candidates.retain(|&node| node != last);
        candidates.push(last);
    }
    for node in candidates {
        match read_locked(table, node)?.map(|f| f.row) {
            Some(row) if row.connected || !is_free(Some(&row), at) => table.unlock(node)?,
            Some(row) => {
                let identity = Identity {
                    token: request.new_token,
                    generation: row.identity.generation + 1,
                };
                let floor = row.high_water;
                return take(
                    table,
                    request,
                    node,
                    Some(&row),
                    identity,
                    floor,
                    "recycled",
                );
            }
            None => {
                let identity = Identity {
                    token: request.new_token,
                    generation: 1,
                };
                return take(table, request, node, None, identity, i64::MIN, how);
            }
        }
    }
    Ok(ClaimOutcome::NoFreeId)
}

/// `node`'s row with its advisory lock tried first (`connected`: another session holds it).
fn read_locked<T: Table>(table: &mut T, node: u32) -> Result<Option<RowRead>, T::Failure> {
    let connected = !table.try_lock(node)?;
    Ok(table.read_row(node)?.map(|mut found| {
        found.row.connected = connected;
        found
    }))
}

/// Takes `node` (its row `before`, if it has one) under `identity` above `floor`: the mark
/// recorded is the claimant's (a lease past its clock), or `request.ahead_of_floor_ms` past the
/// floor if that is higher, never a lease past the floor. A crash restart resumes at the mark
/// its crashed run left, already up to a lease ahead of the clock; a mark a lease past that
/// would be the floor of the next crash restart, and a crash loop would stamp its IDs a lease
/// further ahead of the clock at every crash.
fn take<T: Table>(
    table: &mut T,
    request: &Request,
    node: u32,
    before: Option<&Row>,
    identity: Identity,
    floor: i64,
    how: &'static str,
) -> Result<ClaimOutcome, T::Failure> {
    // Every claim raises the id's generation: a server that still carries the claim before
    // (a copy, the holder taken over) finds the id claimed since, never its own claim.
    assert!(
        before.is_none_or(|row| identity.generation > row.identity.generation),
        "a claim of node id {node} at generation {}, its row's {:?}",
        identity.generation,
        before.map(|row| row.identity.generation)
    );
    let mark = request
        .high_water
        .max(floor.saturating_add(request.ahead_of_floor_ms));
    table.write_claim(node, identity, mark, request)?;
    Ok(ClaimOutcome::Granted(Grant {
        node,
        identity,
        floor,
        mark,
        how,
        stray: None,
    }))
}

/// One heartbeat of the holder of `node` under `identity`: extends the lease and raises the
/// high-water mark ([`HeartbeatRequest`]), if the row still names this holder. With `take_lock` (a
/// new session, or the lock not had yet), the id's advisory lock is tried first; whether the
/// session got it or not, the row decides ([`beat`]).
pub fn heartbeat<T: Table>(
    table: &mut T,
    take_lock: bool,
    node: u32,
    identity: Identity,
    request: &HeartbeatRequest,
) -> Result<Heartbeat, T::Failure> {
    let locked = !take_lock || table.try_lock(node)?;
    let before = table.heartbeat_row(node, identity, request)?;
    Ok(match (beat(before.is_some(), locked), before) {
        (Beat::Extended { locked }, Some(before)) => Heartbeat::Extended { locked, before },
        _ => Heartbeat::Lost {
            label: table.live_label(node)?,
        },
    })
}

/// Releases the claim of `node` under `identity`, if the row still names it (a takeover since keeps
/// its own): the row says so, and the next claim of its token from disk (the holder's own restart)
/// need not wait for it to come back ([`registry::decide`]). With `lower`, the mark comes down from
/// `lower.from`, the value that claim wrote last, to `lower.mark`, if it is still `from` (anyone
/// else's raise since stays: `registry::own_mark`): `node::Node::release` says why that is safe;
/// else it rises to `covers`, above every ID made under the claim, if it is lower. `None` if the
/// row is not the claim's any more, else whether the mark came down.
pub fn release<T: Table>(
    table: &mut T,
    node: u32,
    identity: Identity,
    lower: Option<Lowering>,
    covers: i64,
) -> Result<Option<bool>, T::Failure> {
    table.begin(RELEASE_IDLE_LIMIT_MS)?;
    let released = table.claims_mark(node, identity).and_then(|found| {
        let Some(found) = found else {
            return Ok(None);
        };
        let (mark, lowered) = released_mark(found, lower, covers);
        table.write_release(node, mark).map(|()| Some(lowered))
    });
    match released {
        Ok(Some(lowered)) => table.commit().map(|()| Some(lowered)),
        Ok(None) => {
            table.rollback();
            Ok(None)
        }
        Err(failure) => {
            table.rollback();
            Err(failure)
        }
    }
}

/// The mark a release leaves where the row holds `found`, and whether it came down: `lower.mark`
/// only if the mark is still the value the claim wrote last, `lower.from` (a compare-and-set:
/// a raise by anyone else since, a joiner recording the IDs it made under this id before, must
/// stay, `registry::own_mark`); else `covers`, above every ID made under the claim, if the mark
/// is lower. A mark never falls otherwise.
pub fn released_mark(found: i64, lower: Option<Lowering>, covers: i64) -> (i64, bool) {
    match lower {
        Some(l) if found == l.from && l.from != i64::MIN => (l.mark, true),
        _ => (found.max(covers), false),
    }
}

/// Retires `node` once its holder is gone ([`may_retire`]), in one transaction under the
/// table's lock.
pub fn retire<T: Table>(table: &mut T, node: u32) -> Result<Retirement, T::Failure> {
    retire_in_transaction(table, node, None)
}

/// Retires `node` as [`retire`] does, if its row still names `identity`: a promoted standby's
/// retirement of the claim it gave up (`renewer::contact`), which ends once the id is claimed
/// again ([`Retirement::ClaimedAgain`]).
pub fn retire_claim<T: Table>(
    table: &mut T,
    node: u32,
    identity: Identity,
) -> Result<Retirement, T::Failure> {
    retire_in_transaction(table, node, Some(identity))
}

fn retire_in_transaction<T: Table>(
    table: &mut T,
    node: u32,
    identity: Option<Identity>,
) -> Result<Retirement, T::Failure> {
    table.begin(RETIRE_IDLE_LIMIT_MS)?;
    match retire_decided(table, node, identity) {
        Ok(retired @ Retirement::Retired { .. }) => table.commit().map(|_| retired),
        Ok(other) => {
            table.rollback();
            Ok(other)
        }
        Err(failure) => {
            table.rollback();
            Err(failure)
        }
    }
}

fn retire_decided<T: Table>(
    table: &mut T,
    node: u32,
    identity: Option<Identity>,
) -> Result<Retirement, T::Failure> {
    let now = table.clock()?;
    let found = read_locked(table, node)?;
    table.unlock(node)?;
    let row = found.as_ref().map(|f| f.row);
    let label = found.map(|f| f.label).unwrap_or_default();
    if let (Some(identity), Some(row)) = (identity, row) {
        if !row.retired && row.identity != identity {
            return Ok(Retirement::ClaimedAgain { label });
        }
    }
    match may_retire(row.as_ref(), now) {
        Err(Unretirable::NoLiveRow) => Ok(Retirement::NoLiveRow),
        Err(Unretirable::Connected) => Ok(Retirement::Connected { label }),
        Err(Unretirable::LeaseRuns { until }) => Ok(Retirement::LeaseRuns { label, until }),
        Ok(()) => {
            table.retire_row(node)?;
            let high_water = row.map_or(i64::MIN, |row| row.high_water);
            Ok(Retirement::Retired {
                high_water: (high_water > i64::MIN).then_some(high_water),
            })
        }
    }
}
