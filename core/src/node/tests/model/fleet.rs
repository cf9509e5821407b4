//! A fleet on one registry: configured and assigned node ids, fenced or available, with crashes
//! between any two durable writes, partitions that heal, registry outages, commits that fail or
//! whose answer is lost, retirements. This room holds the fleet ([`Fleet`]: the registry, the
//! members, every ID issued) and its steps: contacts, releases, rounds and calls, and the sessions
//! and marks noted beside them.

use super::*;

pub(super) const LEASE: i64 = 3_000;
pub(super) const MARGIN: i64 = 2_000;
/// The node ids the model's layout has (a small fleet runs out of them quickly).
pub(super) const MAX_NODE: u32 = 3;
pub(super) const SERVERS: usize = 4;

#[derive(Clone, Debug, Hash)]
pub(super) struct Fleet {
    pub(super) now: i64,
    pub(super) registry: Registry,
    pub(super) members: Vec<Member>,
    /// Every ID issued: by which member, and whether it was made cut off from the registry
    /// past its lease (available mode).
    pub(super) issued: BTreeMap<i64, (usize, bool)>,
    /// Registry sessions whose server process is gone (a crash, an exit that could not reach
    /// the registry), and since when: the registry ends each within two leases
    /// ([`Fleet::keepalives`]).
    gone: Vec<(u64, i64)>,
    /// Copies made so far, each with tokens of its own.
    pub(super) copies: u128,
    /// The node ids promoted standbys gave up for fresh ones, to be retired: by which data
    /// directory ([`Member::range`]), after how many of its restarts, and the claim given up.
    pub(super) given_up: BTreeMap<u32, (u128, i64, Identity)>,
    /// The mark each claim's row held when last seen naming it: what the registry knows of
    /// that claim's IDs after another has taken its id.
    marks: BTreeMap<(u128, i64), i64>,
    /// Every member's `pg_snowflake.registry_lease_ms` ([`LEASE`] unless a run sets another).
    pub(super) lease: i64,
    /// The contacts made so far: the order of claims and records below.
    pub(super) contacts: i64,
    /// After how many contacts each claim was first seen, noted as [`Fleet::marks`] is.
    claimed_at: BTreeMap<(u128, i64), i64>,
    /// The IDs joiners made before they joined, once a claim recorded their node id as used:
    /// after how many contacts.
    recorded: BTreeMap<i64, i64>,
}

/// What the registry held before a contact ([`Fleet::open`]), for the checks of what the contact
/// came to ([`Fleet::contacted`]).
pub(super) struct Before {
    /// Each row's claim.
    holders: BTreeMap<u32, Identity>,
    /// Each live row's holder.
    seen: BTreeMap<u32, Seen>,
    /// The member may take a released claim of its token at once (its planned restart).
    restarted_clean: bool,
    /// Its token.
    token: Option<u128>,
    /// Its data directory ([`Member::range`]).
    dir: u128,
}

/// A live row's holder as a claim finds it ([`Fleet::open`]).
#[derive(Clone, Copy)]
struct Seen {
    /// The claim the row names.
    identity: Identity,
    /// The member whose run wrote it, if that run still runs or was stopped cleanly since.
    holder: Option<usize>,
    /// That member is stopped cleanly: its planned restart may come at any moment.
    stopped: bool,
    /// That member's data directory (`Member::range`: the model's own, not what the code
    /// measured).
    dir: Option<u128>,
    /// The registry's time up since the row's last claim or heartbeat (ms).
    absent: i64,
    /// Its holder released it.
    released: bool,
}

impl Fleet {
    /// A fleet of servers with these configured node ids, none of which has claimed yet.
    pub(super) fn new(configured: &[Option<u32>], fenced: bool) -> Fleet {
        let members = configured
            .iter()
            .enumerate()
            .map(|(i, &configured)| {
                let settings = Settings {
                    configured,
                    registry: true,
                };
                let mut m = Member::start(settings, None, i, 0);
                m.fenced = fenced;
                m
            })
            .collect();
        Fleet {
            now: T0,
            registry: Registry {
                up: true,
                ..Registry::default()
            },
            members,
            issued: BTreeMap::new(),
            gone: vec![],
            copies: 0,
            given_up: BTreeMap::new(),
            marks: BTreeMap::new(),
            lease: LEASE,
            contacts: 0,
            claimed_at: BTreeMap::new(),
            recorded: BTreeMap::new(),
        }
    }

    /// Notes the mark each live row holds for its claim.
    fn note_marks(&mut self) {
        for row in self.registry.rows.values() {
            let claim = (row.identity.token, row.identity.generation);
            self.marks.insert(claim, row.high_water);
            self.claimed_at.entry(claim).or_insert(self.contacts);
        }
    }

    /// What [`Fleet::call`] needs to tell, of an ID member `s` makes again, whether a joiner
    /// made it before it joined while `s`'s claim already held the id, before the registry
    /// knew of the joiner's IDs: two servers made IDs under one id, one of them outside the
    /// fleet, which no registry can keep apart (FLEETS, *Servers that already make IDs*: "IDs
    /// two servers made under one node id before either joined … are beyond it"). When
    /// `s`'s claim was taken, and the IDs joiners made that no claim has recorded yet.
    fn joiners_before(&self, s: usize) -> (Option<i64>, BTreeSet<i64>) {
        let claim = self.members[s].issuer.node().identity;
        let claimed = claim.and_then(|c| self.claimed_at.get(&(c.token, c.generation)).copied());
        let unrecorded = self
            .members
            .iter()
            .filter_map(|m| m.unjoined.as_ref())
            .flat_map(|(_, _, ids)| ids.iter().copied())
            .collect();
        (claimed, unrecorded)
    }

    /// The mark the registry holds for `claim` of node id `node`: its row's, while the row
    /// names it; the last one seen for it, once another claim has taken the id.
    fn mark_of(&self, node: u32, claim: Identity) -> Option<i64> {
        match self.registry.rows.get(&node) {
            Some(row) if row.identity == claim => Some(row.high_water),
            _ => self.marks.get(&(claim.token, claim.generation)).copied(),
        }
    }

    /// Time passes, `ms` of it: the registry's time up too, while it is up.
    pub(super) fn pass(&mut self, ms: i64) {
        self.now += ms;
        if self.registry.up {
            self.registry.served += ms;
        }
    }

    /// Server `s`'s process is gone: its registry session, if any, lives on until the registry
    /// notices (an `Act::Notice`, or keepalives a lease later).
    pub(super) fn session_gone(&mut self, s: usize) {
        if let Some(session) = self.members[s].session.take() {
            self.gone.push((session, self.now));
        }
    }

    /// Server `s` is gone for good, another runs in its place: its session is left to the
    /// registry to notice, and the IDs it made without a registry and never told one of leave
    /// the count once no copy of its data carries them (made outside the fleet by a server
    /// that never claimed: FLEETS, *Servers that already make IDs*: "those of a server that
    /// never claims (it was replaced before its first claim reached the registry), are beyond
    /// it").
    pub(super) fn gone_for_good(&mut self, s: usize) {
        self.session_gone(s);
        if let Some((_, _, ids)) = self.members[s].unjoined.take() {
            let carried: BTreeSet<i64> = self
                .members
                .iter()
                .filter_map(|m| m.unjoined.as_ref())
                .flat_map(|(_, _, ids)| ids.iter().copied())
                .collect();
            for id in ids.into_iter().filter(|id| !carried.contains(id)) {
                self.issued.remove(&id);
            }
        }
    }

    /// The registry ends the sessions whose process is gone, each at its own time over the
    /// real range (`registry::keepalives`): at once when the server's host answered with a
    /// reset ([`Act::Notice`] ends them all then), within two thirds of a lease by the TCP
    /// keepalives, within a lease by the user timeout when data was in flight, within two
    /// leases by the idle limit when a hung proxy answered the probes. Which one a session
    /// meets is drawn from its number: eight steps from a quarter of a lease to two leases.
    pub(super) fn keepalives(&mut self) {
        let (now, lease, registry) = (self.now, self.lease, &mut self.registry);
        self.gone.retain(|&(session, since)| {
            let after = lease / 4 * (1 + (session.wrapping_mul(7_919) % 8) as i64);
            let ended = now - since >= after;
            if ended {
                registry.end_session(session);
            }
            !ended
        });
    }

    /// Member `s`'s registry session for a round's contact ([`renewer::Server::session`]),
    /// made anew when it has none (`true`), and what the registry holds before the contact, for
    /// [`Fleet::contacted`]'s checks; `Err(Failed)` if the exchange failed already; the outer
    /// `Err` is a check that failed.
    pub(super) fn open(
        &mut self,
        s: usize,
    ) -> Result<Result<(Before, bool), Failed>, TestCaseError> {
        self.contacts += 1;
        let (now, lease) = (self.now, self.lease);
        if !self.registry.up || !self.members[s].link {
            // The exchange times out and the server drops its session; the registry's end of
            // it lives on until its keepalives find the server gone.
            self.session_gone(s);
            return Ok(Err(Failed));
        }
        // A claim stalled on its intent holds the table's lock, which every exchange waits
        // for, until the registry ends it: behind one member's stalled claim no exchange waits
        // past its own deadline (FLEETS, *a member's disk stalls in the middle of its claim*).
        // Behind the claims of several, stalled at once, it may, as FLEETS says: it times out.
        // (The model does not move the clock for the wait.)
        let registry_now = now + self.registry.skew;
        self.registry
            .locked
            .retain(|&(_, until)| until > registry_now);
        if let Some(&(_, until)) = self.registry.locked.last() {
            let (waited, deadline) = (until - registry_now, exchange_deadline_ms(lease));
            let stalled: BTreeSet<u128> = self.registry.locked.iter().map(|l| l.0).collect();
            if waited > deadline {
                prop_assert!(
                    stalled.len() > 1,
                    "member {s}'s exchange waited {waited} ms behind a stalled claim, past its \
                     deadline of {deadline} ms (lease {lease} ms)"
                );
                self.session_gone(s);
                return Ok(Err(Failed));
            }
        }
        let registry = &mut self.registry;
        let holders: BTreeMap<u32, Identity> = registry
            .rows
            .iter()
            .map(|(&n, r)| (n, r.identity))
            .collect();
        // Each live row's holder, the server that wrote it if it still runs (the same data
        // directory and shared memory) or was stopped cleanly since (its planned restart may
        // come at any moment: whether it is stopped), and how long it has been absent before
        // this contact: the registry's time up since its last claim or heartbeat (no holder
        // reaches a registry that is down, whether it restarts or fails over).
        let seen: BTreeMap<u32, Seen> = registry
            .rows
            .iter()
            .filter(|(_, r)| !r.retired)
            .map(|(&n, r)| {
                let holder = self
                    .members
                    .iter()
                    .position(|o| o.range == r.by && Some(o.issuer.node().boot) == r.boot);
                let seen = Seen {
                    identity: r.identity,
                    holder,
                    stopped: holder.is_some_and(|o| self.members[o].stopped),
                    dir: holder.map(|o| self.members[o].range),
                    absent: registry.served - r.served_at,
                    released: r.released,
                };
                (n, seen)
            })
            .collect();
        // Whether this member may take a released claim of its token at once, as the holder's
        // planned restart does (FLEETS, *The rules that keep IDs unique*, its one exemption: a
        // copy in its origin's very place, which the model never makes).
        let (restarted_clean, token, dir) = {
            let node = self.members[s].issuer.node();
            (
                node.after_clean_stop && !node.met_holder,
                node.identity.map(|c| c.token),
                self.members[s].range,
            )
        };
        let m = &mut self.members[s];
        m.reached_at = now;
        let new = match m.session {
            // Ended by the registry (it noticed the client gone, or restarted): the exchange
            // fails, and the next round connects anew.
            Some(session) if !registry.open.contains(&session) => {
                m.session = None;
                return Ok(Err(Failed));
            }
            Some(_) => false,
            None => {
                m.session = Some(registry.new_session());
                true
            }
        };
        let before = Before {
            holders,
            seen,
            restarted_clean,
            token,
            dir,
        };
        Ok(Ok((before, new)))
    }

    /// Checks what member `s`'s contact came to (`contacted`: `Err` if it failed), against
    /// what the registry held `before` it, and notes what it recorded.
    pub(super) fn contacted(
        &mut self,
        s: usize,
        before: Before,
        memory: &Memory,
        contacted: Result<&contact::Contact<Failed>, Failed>,
    ) -> Result<(), TestCaseError> {
        let (now, lease) = (self.now, self.lease);
        let Before {
            holders,
            seen,
            restarted_clean,
            token,
            dir,
        } = before;
        let registry = &mut self.registry;
        let m = &mut self.members[s];
        // A contact retires only the claim its server gave up on a promotion, never a claim
        // made of the id since.
        if let Ok(
            contact::Contact::Granted { retired, .. } | contact::Contact::Heartbeat { retired, .. },
        ) = &contacted
        {
            if let Some((node, Ok(Retirement::Retired { .. }))) = retired {
                let under = holders.get(node).copied();
                prop_assert!(
                    under == m.inherited,
                    "member {} retired node id {} under a claim it did not give up ({:?}, not \
                     {:?})",
                    s,
                    node,
                    under,
                    m.inherited
                );
            }
        }
        match &contacted {
            Ok(contact::Contact::Refused { why, .. }) => {
                m.refused_for_layout = *why == Refusal::OtherLayout;
                m.refused_as_copy = why.found_a_copy();
            }
            Ok(contact::Contact::Granted { .. }) => {
                m.refused_for_layout = false;
                m.refused_as_copy = false;
                m.marked_at = Some(now);
            }
            Ok(contact::Contact::Heartbeat { .. }) => m.marked_at = Some(now),
            Ok(contact::Contact::Lost { .. }) => m.marked_at = None,
            _ => {}
        }
        if let Ok(contact::Contact::Granted { claim, .. }) = &contacted {
            // A running holder keeps its id: no other server's claim takes it before its
            // holder has been silent a heartbeat interval and the clock margin (FLEETS, *The
            // rules that keep IDs unique*), counting only the time the registry was up: "a
            // holder cannot reach a registry that is down".
            let may_return = crate::registry::holder_may_return_ms(lease, MARGIN);
            if let Some(&Seen {
                identity,
                holder: Some(o),
                stopped,
                dir: holder_dir,
                absent,
                released,
            }) = seen.get(&claim.node)
            {
                let exempt = released
                    && restarted_clean
                    && token == Some(identity.token)
                    && holder_dir == Some(dir);
                prop_assert!(
                    identity == claim.identity
                        || o == s
                        || absent >= may_return
                        || exempt
                        || stopped,
                    "member {s} took node id {} from member {o}, which runs and has been absent \
                     for {absent} ms of the registry's time up (a running holder comes back \
                     within {may_return} ms)",
                    claim.node
                );
                // A holder stopped cleanly keeps its id for its planned restart as a running
                // one does: the planned restart takes its released claim at once, and no copy
                // of its data directory, however exact its files and label, passes for it
                // (FLEETS, rule 4). A copy takes its id over only as any claimant from disk
                // does, once the holder has been silent a heartbeat interval and the margin:
                // then it is a restored backup whose origin is down (FLEETS, *What each failure
                // does*).
                prop_assert!(
                    identity == claim.identity || absent >= may_return || !stopped,
                    "member {s} took node id {} from member {o}, stopped cleanly and absent for \
                     {absent} ms of the registry's time up, whose planned restart takes it back \
                     at once (a copy of a stopped server passed for its planned restart)",
                    claim.node
                );
            }
        }
        if let Some(old) = memory.retire_pending {
            self.given_up
                .insert(old.node, (m.range, m.crashes, old.identity));
        }
        if let Some((node, last, ids)) = m.unjoined.clone() {
            // Its claim recorded them (committed, whether or not its answer came back).
            let recorded = registry
                .rows
                .get(&node)
                .is_some_and(|r| r.recorded_by.contains(&m.range) && r.high_water > last);
            if recorded {
                // The registry knows of them: for every copy of the data that carries them.
                for o in &mut self.members {
                    if o.unjoined.as_ref().is_some_and(|u| u.2 == ids) {
                        o.unjoined = None;
                    }
                }
                for id in ids {
                    self.recorded.insert(id, self.contacts);
                }
            }
        }
        self.note_marks();
        Ok(())
    }

    /// `renewer.rs`'s exit: a fenced claim's mark comes down to the durable reservation where
    /// the row still names the claim (`table::release`), and the session ends; then its
    /// successor's start.
    pub(super) fn release(&mut self, s: usize) {
        let fenced = self.members[s].fenced;
        let reachable = self.registry.up && self.members[s].link;
        let m = &mut self.members[s];
        if let Some(released) = m.issuer.release() {
            if let Some(lower) = released.lower {
                m.released = Some(lower.mark);
            }
            if reachable {
                // On a connection of its own (`link.rs`'s `release_on_exit`).
                let session = self.registry.new_session();
                let stalled = Cell::new(false);
                let mut table = Session::new(
                    &mut self.registry,
                    session,
                    self.now,
                    Commit::Done,
                    &stalled,
                );
                let (node, claim) = (released.node, released.identity);
                table::release(&mut table, node, claim, released.lower, released.covers)
                    .expect("the registry is up");
                self.registry.end_session(session);
            }
        }
        if let Some(session) = m.session.take() {
            if reachable {
                self.registry.end_session(session);
            } else {
                self.gone.push((session, self.now));
            }
        }
        let lease = m.renewer.state.held.map(|h| h.lease);
        m.orphaned = lease.or(m.orphaned);
        m.marked_at = None;
        // Its successor goes on under the claim in available mode, and claims again in fenced
        // mode; either way it retires what was left pending.
        m.renewer = Renewer::new(m.issuer.renewer_restarted(!fenced));
        self.note_marks();
    }

    /// The settings member `s`'s renewer turns under.
    fn settings_of(&self, s: usize) -> contact::Settings {
        let m = &self.members[s];
        contact::Settings {
            fenced: m.fenced,
            lease_ms: self.lease,
            max_clock_skew_ms: MARGIN,
            configured: m.settings.configured,
            fresh_on_promotion: m.fresh_on_promotion,
        }
    }

    /// Member `s`'s renewer turns (`Renewer::turn`) with its contact due now: the model turns
    /// a renewer at any moment, sooner than its heartbeat interval as readily as on time.
    pub(super) fn round(&mut self, s: usize, commit: Commit) -> Result<(), TestCaseError> {
        // A renewer whose claim stalled on its disk is stuck in that write until the registry
        // ends the claim (and after, as far as the model knows).
        let registry_now = self.now + self.registry.skew;
        let range = self.members[s].range;
        if self
            .registry
            .locked
            .iter()
            .any(|&(by, until)| by == range && until > registry_now)
        {
            return Ok(());
        }
        let settings = self.settings_of(s);
        let mut renewer = std::mem::take(&mut self.members[s].renewer);
        let mut in_round = InRound::new(self, s, commit);
        let round = renewer.round(&mut in_round, &settings);
        let (checked, before) = (in_round.checked, in_round.before);
        // Kept due: the next round contacts whenever it comes (and states that differ only in
        // when a contact falls due are one state to the search).
        renewer.contact_now();
        let memory = renewer.state;
        self.members[s].renewer = renewer;
        checked?;
        match (before, round.contact) {
            (Some(before), Some(contact)) => self.contacted(s, before, &memory, Ok(&contact)),
            (Some(before), None) => self.contacted(s, before, &memory, Err(Failed)),
            (None, _) => Ok(()),
        }
    }

    pub(super) fn call(&mut self, s: usize, want: u64) -> Result<(), TestCaseError> {
        let now = self.now;
        let node = *self.members[s].issuer.node();
        // Every ID lies below the mark the registry holds for the claim it was made under, so
        // that whoever takes the id next starts above it (FLEETS, *The rules that keep IDs
        // unique*): in fenced mode always (no ID without a grant), in available mode unless it
        // was made while its ceiling had given way, counted (`Issuer::ids_past_mark`): the one
        // exemption the rules grant, and the only IDs a later holder may repeat.
        let granted = node.identity.and_then(|claim| self.mark_of(node.id, claim));
        let (claimed, unrecorded) = self.joiners_before(s);
        let m = &mut self.members[s];
        let counted_before = m.issuer.ids_past_mark();
        let mut file = m.file;
        let layout = m.layout;
        let ids = issue_in(&mut m.issuer, layout, now + m.offset, want, |durable| {
            file = Some(file_in(durable, layout));
        });
        m.file = file;
        // Past its release's mark only in available mode, counted (FLEETS, *The rules that
        // keep IDs unique*: the IDs made between a release and the next claim).
        let counted = m.issuer.past_the_mark();
        if let Some(mark) = m.released.filter(|_| !counted && !ids.is_empty()) {
            let until = m.issuer.generator().reserved_until();
            prop_assert!(
                until <= mark,
                "member {s} reserved to {until}, past its release {mark}"
            );
        }
        // How far ahead of the registry's clock an ID may be stamped: the mark a claim may
        // take (`registry::MARK_AHEAD_SLACK_MS`: the lease, the clock margin and a minute),
        // however many crashes came before (FLEETS, *What remains the operator's*: crashes in
        // a row do not add up, a mark is never a lease past where the IDs already reach).
        let bound = self.lease + MARGIN + crate::registry::MARK_AHEAD_SLACK_MS;
        let made = ids.len() as u64;
        for id in ids {
            let stamped = layout.id_unix_ms(id).expect("an ID of the layout");
            let mode = if m.fenced { "fenced" } else { "available" };
            prop_assert!(
                counted || granted.is_some_and(|mark| stamped < mark),
                "ID {id} of member {s}, {mode}, stamped {stamped}: not below the mark the \
                 registry holds for its claim ({granted:?}), and not counted as past it"
            );
            prop_assert!(
                stamped - now <= bound,
                "ID {id} of member {s} stamped {} ms ahead of the registry's clock, past {bound}",
                stamped - now
            );
            if let Some(&(other, other_counted)) = self.issued.get(&id) {
                prop_assert!(
                    counted || other_counted || {
                        let known_at = self
                            .recorded
                            .get(&id)
                            .copied()
                            .or(unrecorded.contains(&id).then_some(i64::MAX));
                        claimed.zip(known_at).is_some_and(|(c, k)| c < k)
                    },
                    "ID {id} (node {}) issued by member {s} and member {other}, neither counted \
                     as past the mark",
                    node.id
                );
            }
            self.issued.insert(id, (s, counted));
        }
        if counted && made > 0 {
            prop_assert!(
                m.issuer.ids_past_mark() > counted_before,
                "member {s} made {made} IDs past the mark, uncounted"
            );
            // Available mode's one risk comes only without heartbeats: the ceiling gives way
            // "only when no heartbeat has recorded a higher mark for about a lease (the
            // registry out of reach, the renewer stuck), when the server's clock is stepped
            // ahead past it, or between a renewer's release of its claim and its next claim"
            // (FLEETS, *The rules that keep IDs unique*, rule 3).
            let interval = crate::registry::heartbeat_interval_ms(self.lease);
            if let Some(at) = m.marked_at.filter(|&at| now - at < interval) {
                prop_assert!(
                    false,
                    "member {s} counted {made} IDs past the mark {} ms after a contact recorded \
                     its mark (within a heartbeat interval, {interval} ms): ceiling {}, \
                     reserved to {}, the registry's clock {now}",
                    now - at,
                    m.issuer.node().ceiling,
                    m.issuer.generator().reserved_until()
                );
            }
        }
        Ok(())
    }
}
