//! A server of the fleet ([`Member`]): its settings, state file, issuing state and renewer; as
//! its renewer's round sees it ([`InRound`], a `renewer::Server`, which hands the round its
//! registry session) and as a contact sees it ([`MemberView`], a `contact::Member`).

use super::*;
use crate::issuer::Turn;

/// The renewer's process id, and a backend's, as the writer's turn records them.
const RENEWER_PID: i32 = 1;
const BACKEND_PID: i32 = 2;

#[derive(Clone, Debug, Hash)]
pub(super) struct Member {
    pub(super) settings: Settings,
    /// `pg_snowflake.registry_mode = fenced` ([`Act::Mode`] switches it).
    pub(super) fenced: bool,
    pub(super) issuer: Issuer,
    pub(super) file: Option<Reservation>,
    pub(super) session: Option<u64>,
    /// Its renewer: what it remembers of its claim, its clock's last reading, its next contact.
    pub(super) renewer: Renewer,
    pub(super) link: bool,
    /// When a contact last reached the registry (whatever it found).
    pub(super) reached_at: i64,
    /// The lease of the claim a renewer that exited held: until its successor claims, the
    /// server goes on under it (in available mode, past it).
    pub(super) orphaned: Option<Lease>,
    /// The mark a released claim left in the registry: until the next claim, no reservation
    /// reaches past it.
    pub(super) released: Option<i64>,
    tokens: u128,
    /// Its label and system identifier in the registry: a member's own, kept across restarts;
    /// a copy's are its origin's ([`Act::Copy`]).
    pub(super) label: String,
    pub(super) system: u64,
    /// The first of its tokens: 2^64 of them, a server's own.
    pub(super) range: u128,
    /// Its wall clock less the registry's (ms): kept across restarts ([`Act::Clock`]).
    pub(super) offset: i64,
    /// Crashes of its data directory so far (a copy's include its origin's): which run of the
    /// server this is (each resumes at the registry's mark, FLEETS, *a crash resumes at the
    /// registry's mark*; crashes in a row add nothing to how far ahead its IDs may be stamped).
    pub(super) crashes: i64,
    /// The layout of its IDs: the fleet's ([`L`]), or another ([`Act::Foreign`]).
    pub(super) layout: Layout,
    /// Its last claim was refused for its layout (`Refusal::OtherLayout`).
    pub(super) refused_for_layout: bool,
    /// `pg_snowflake.fresh_node_id_on_promotion` ([`Act::Failover`]).
    pub(super) fresh_on_promotion: bool,
    /// The claim a promoted standby started under, its primary's ([`Act::Failover`]): the
    /// only claim its contacts may retire.
    pub(super) inherited: Option<Identity>,
    /// The data directory it is a copy of ([`Act::Copy`], [`Act::Failover`]: its origin's
    /// [`Member::range`], or its origin's origin).
    pub(super) origin: Option<u128>,
    /// Its last claim was refused as a copy of its claim's holder (`Refusal::found_a_copy`).
    pub(super) refused_as_copy: bool,
    /// When (the model's clock) a claim or heartbeat of its claim last recorded its mark, in a
    /// mode that has granted it a ceiling since (`None`: none since its start, its last loss,
    /// release, switch to fenced mode or step of its clock ahead).
    pub(super) marked_at: Option<i64>,
    /// Its state file cannot be written (a directory in the way of its temporary file, a
    /// read-only disk): every claim's intent fails, and the registry's transaction with it.
    pub(super) unwritable: bool,
    /// Its disk is slow ([`Act::Stall`]): kept across restarts (the same disk).
    pub(super) slow_disk: bool,
    /// The IDs a joiner made without a registry ([`Act::Join`]), until a claim of its records
    /// them as used: their node id, the last one's stamp, and the IDs.
    pub(super) unjoined: Option<(u32, i64, Vec<i64>)>,
    /// Stopped cleanly ([`Act::Stop`]), or a copy of a stopped server not started yet
    /// ([`Act::ColdCopy`]): no process, no session, no ID, until [`Act::Start`].
    pub(super) stopped: bool,
    /// A backend standing in for the renewer waits for the writer's turn to write a due
    /// renewal: it takes the turn the moment the renewer gives it back.
    pub(super) stand_in_waits: bool,
    /// The renewal a backend standing in is writing, its turn held ([`Member::end_stand_in`]).
    pub(super) stand_in: Option<Turn>,
}

impl Member {
    pub(super) fn start(
        settings: Settings,
        file: Option<Reservation>,
        id: usize,
        tokens: u128,
    ) -> Member {
        Member::start_in(L, settings, file, id, tokens, false)
    }

    pub(super) fn start_in(
        layout: Layout,
        settings: Settings,
        file: Option<Reservation>,
        id: usize,
        tokens: u128,
        standby: bool,
    ) -> Member {
        Member::started(layout, settings, file, id, tokens, standby, false)
    }

    /// [`Member::start_in`], `after_clean_stop` or not (a clean restart, or a crash).
    fn started(
        layout: Layout,
        settings: Settings,
        file: Option<Reservation>,
        id: usize,
        tokens: u128,
        standby: bool,
        after_clean_stop: bool,
    ) -> Member {
        // Each start draws a boot value none other has: its shared memory's.
        static BOOTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let boot = BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Where its data directory lies: one place per data directory (its tokens' range), kept
        // across its restarts; a copy's is its own.
        let tokens = tokens.max((id as u128 + 1) << 64);
        let boot = Boot {
            value: boot,
            after_clean_stop,
            place: (tokens >> 64) as u64,
        };
        let start = Node::start(&found(file), settings, standby, boot);
        Member {
            settings,
            fenced: true,
            issuer: Issuer::start(&start),
            file: start.rewrite.as_ref().map(|d| file_in(d, layout)).or(file),
            session: None,
            renewer: Renewer::default(),
            link: true,
            reached_at: i64::MIN,
            orphaned: None,
            released: None,
            tokens,
            label: format!("member {id}"),
            system: id as u64 + 1,
            range: (id as u128 + 1) << 64,
            offset: 0,
            crashes: 0,
            layout,
            refused_for_layout: false,
            fresh_on_promotion: false,
            inherited: None,
            origin: None,
            refused_as_copy: false,
            marked_at: None,
            unwritable: false,
            slow_disk: false,
            unjoined: None,
            stopped: false,
            stand_in_waits: false,
            stand_in: None,
        }
    }

    /// The same server started again from its state file (a crash's or a clean restart's),
    /// its registry session left to the caller.
    pub(super) fn restarted(&self, s: usize, after_clean_stop: bool) -> Member {
        let (layout, settings, file, tokens) = (self.layout, self.settings, self.file, self.tokens);
        let mut m = Member::started(layout, settings, file, s, tokens, false, after_clean_stop);
        m.fenced = self.fenced;
        m.fresh_on_promotion = self.fresh_on_promotion;
        m.link = self.link;
        m.system = self.system;
        m.range = self.range;
        m.offset = self.offset;
        m.label = self.label.clone();
        m.crashes = self.crashes;
        m.inherited = self.inherited;
        m.origin = self.origin;
        m.slow_disk = self.slow_disk;
        m.unjoined = self.unjoined.clone();
        m
    }

    fn new_token(&mut self) -> u128 {
        self.tokens += 1;
        self.tokens
    }

    fn write(&mut self, durable: &Durable) {
        self.file = Some(file_in(durable, self.layout));
    }

    /// Writes `turn`'s reservation into the state file (the WAL record with it), as the one
    /// writer, and ends the turn: `false` if the state file cannot be written.
    fn write_turn(&mut self, turn: &Turn) -> bool {
        if self.unwritable {
            // EACCES: a directory in the way of its temporary file, a read-only disk.
            self.issuer.turn_ended(Renewal::Failed { errno: 13 });
            return false;
        }
        self.write(&Durable {
            until: turn.until,
            node: Some(turn.node),
            history: turn.history,
            identity: turn.identity,
        });
        self.issuer.turn_ended(Renewal::Done {
            until: turn.until,
            took_ms: 0,
        });
        true
    }

    /// A backend standing in for the renewer finishes writing its renewal, if it is writing
    /// one, and gives the writer's turn back.
    pub(super) fn end_stand_in(&mut self) {
        if let Some(turn) = self.stand_in.take() {
            self.write_turn(&turn);
        }
    }
}

/// A member as its renewer turns it ([`renewer::Server`]): the fleet's registry, the member's
/// session, state file and issuing state.
pub(super) struct InRound<'f> {
    pub(super) fleet: &'f mut Fleet,
    pub(super) s: usize,
    /// How a claim's COMMIT ends in this round.
    pub(super) commit: Commit,
    /// A check of the model that failed during the round.
    pub(super) checked: Result<(), TestCaseError>,
    /// What the registry held before the round's contact, once its session was open
    /// ([`Fleet::open`]): the contact's outcome is checked against it after the round.
    pub(super) before: Option<Before>,
    /// Set when its intent's write stalls ([`Act::Stall`]), for the claim's [`Session`].
    stalled: Cell<bool>,
}

impl<'f> InRound<'f> {
    pub(super) fn new(fleet: &'f mut Fleet, s: usize, commit: Commit) -> InRound<'f> {
        InRound {
            fleet,
            s,
            commit,
            checked: Ok(()),
            before: None,
            stalled: Cell::new(false),
        }
    }
}

impl renewer::Server for InRound<'_> {
    type Failure = Failed;
    type Session<'s>
        = contact::Parties<Session<'s>, MemberView<'s>>
    where
        Self: 's;

    fn monotonic(&mut self) -> i64 {
        self.fleet.now
    }

    fn session_lost(&mut self) -> bool {
        let fleet = &self.fleet;
        let m = &fleet.members[self.s];
        // Seen only where the registry's end of it reaches the server.
        fleet.registry.up
            && m.link
            && m.session
                .is_some_and(|session| !fleet.registry.open.contains(&session))
    }

    fn session(&mut self, _lease_ms: i64) -> Result<(Self::Session<'_>, bool), Failed> {
        let new = match self.fleet.open(self.s) {
            Ok(Ok((before, new))) => {
                self.before = Some(before);
                new
            }
            Ok(Err(failed)) => return Err(failed),
            Err(check) => {
                self.checked = Err(check);
                return Err(Failed);
            }
        };
        let fleet = &mut *self.fleet;
        let m = &mut fleet.members[self.s];
        let session = m.session.expect("a session just opened");
        let mut table = Session::new(
            &mut fleet.registry,
            session,
            fleet.now,
            self.commit,
            &self.stalled,
        );
        table.by = m.range;
        let member = MemberView {
            fenced: m.fenced,
            m,
            now: fleet.now,
            stalled: &self.stalled,
            role: None,
        };
        Ok((contact::Parties { table, member }, new))
    }

    fn end_session(&mut self) {
        let m = &mut self.fleet.members[self.s];
        if let Some(session) = m.session.take() {
            self.fleet.registry.end_session(session);
        }
    }

    fn pin(&mut self) -> bool {
        // The pin: the state file (and the WAL) with the claim, before any ID, written as the
        // one writer (refused while a backend standing in writes a renewal), as the extension's.
        let m = &mut self.fleet.members[self.s];
        let Some(turn) = m.issuer.rewrite_turn(RENEWER_PID) else {
            return false;
        };
        m.write_turn(&turn)
    }

    fn publish(&mut self, holding: Holding, skewed: bool, fenced: bool, now: i64) {
        self.fleet.members[self.s]
            .issuer
            .publish(holding, skewed, fenced, now);
    }

    // The registry's status is what a refused caller reads; the model checks the IDs made.
    fn shown(&mut self, _: &contact::Contact<Failed>) {}
}

/// A member as a contact sees it (`renewer::contact::Member`; shared memory and the state file in
/// the extension).
pub(super) struct MemberView<'a> {
    pub(super) m: &'a mut Member,
    pub(super) now: i64,
    pub(super) fenced: bool,
    /// Set when its intent's write stalls ([`Act::Stall`]), for the claim's [`Session`].
    pub(super) stalled: &'a Cell<bool>,
    /// The writer's turn, held while a claim is asked.
    pub(super) role: Option<Turn>,
}

impl contact::Member for MemberView<'_> {
    type Failure = Failed;

    fn wall(&mut self) -> i64 {
        self.now + self.m.offset
    }

    fn monotonic(&mut self) -> i64 {
        self.now
    }

    fn state(&mut self) -> (Node, i64) {
        self.m
            .issuer
            .reaches(&mut Clocks::at(self.now + self.m.offset))
    }

    fn clock_read(&mut self, _offset: i64, _sent: i64) {}

    fn start_writing(&mut self) -> bool {
        self.role = self.m.issuer.rewrite_turn(RENEWER_PID);
        self.role.is_some()
    }

    fn stop_writing(&mut self) {
        if self.role.take().is_some() {
            self.m.issuer.turn_ended(Renewal::GivenBack);
        }
        // A backend waiting to stand in takes the turn the moment it is free, before the pin.
        if std::mem::take(&mut self.m.stand_in_waits) {
            self.m.stand_in = self.m.issuer.renewal_turn(false, BACKEND_PID);
        }
    }

    fn intend(&mut self, taken: &Claim, fenced: bool) -> Result<(), Failed> {
        // A claim's floor may raise the reservation past a released mark: the new claim's
        // mark covers it, whether or not it commits.
        let (intent, before) = self.m.issuer.intend(taken, fenced);
        if self.m.unwritable {
            self.m.issuer.intent_unwritten(before);
            return Err(Failed);
        }
        self.m.released = None;
        self.m.write(&intent);
        self.stalled.set(self.m.slow_disk);
        Ok(())
    }

    fn lease_extended(&mut self, lease: &Lease, fenced: bool, before: i64) {
        debug_assert_eq!(fenced, self.fenced);
        self.m.issuer.lease_extended(lease, fenced, before);
        // The heartbeat recorded a mark above the reservation: the release's is behind it.
        self.m.released = None;
    }

    fn disown(&mut self) {
        if let Some(durable) = self.m.issuer.disown() {
            self.m.write(&durable);
        }
    }

    fn retirement_pending(&mut self, given_up: Option<GivenUp>) {
        self.m.issuer.retirement_pending(given_up);
    }

    fn met_holder(&mut self) {
        self.m.issuer.met_holder();
    }

    fn names(&mut self) -> contact::Names {
        contact::Names {
            label: self.m.label.clone(),
            system: self.m.system,
            layout: self.m.layout.describe(),
            max_node: MAX_NODE,
        }
    }

    fn new_token(&mut self) -> u128 {
        self.m.new_token()
    }
}
