//! The registry in memory: its rows, sessions and locks ([`Registry`]), and its table as one
//! session sees it ([`Session`], the model's `registry::table::Table`), whose commit ends as the
//! act says.

use super::*;

/// One row of the registry's table.
#[derive(Clone, Debug, Hash)]
pub(super) struct RegRow {
    pub(super) identity: Identity,
    pub(super) high_water: i64,
    pub(super) lease_until: i64,
    pub(super) retired: bool,
    pub(super) label: String,
    pub(super) system: u64,
    pub(super) layout: String,
    pub(super) claimed_at: i64,
    pub(super) last_seen: i64,
    /// The data directory whose claim wrote it ([`Member::range`]; 0: none of the fleet's).
    pub(super) by: u128,
    /// The boot value its holder wrote with its claim and heartbeats (`None`: none).
    pub(super) boot: Option<u64>,
    /// Released by its holder's renewer on its way out, not claimed or extended by a heartbeat
    /// since.
    pub(super) released: bool,
    /// The place its holder wrote with its claim and heartbeats (`None`: none).
    pub(super) place: Option<u64>,
    /// The data directories ([`Member::range`]) whose claims recorded this id as used here
    /// since the row was last written by a claim (`Table::record_used`).
    pub(super) recorded_by: Vec<u128>,
    /// [`Registry::served`] when its holder last claimed or heartbeated: the registry's time
    /// up since is how long the holder has been absent, as the promise counts it (the model's
    /// own measure, which no rule reads: they read `last_seen`).
    pub(super) served_at: i64,
}

#[derive(Clone, Debug, Default, Hash)]
pub(super) struct Registry {
    pub(super) up: bool,
    pub(super) rows: BTreeMap<u32, RegRow>,
    /// The session holding each id's advisory lock.
    pub(super) locks: BTreeMap<u32, u64>,
    /// The sessions open now: one the registry ended fails its client's next exchange.
    pub(super) open: BTreeSet<u64>,
    /// Its clock less real time (ms): another host's after a failover ([`Act::RegistryFailover`]).
    pub(super) skew: i64,
    pub(super) next_session: u64,
    /// When its server last started (its clock): `pg_postmaster_start_time()`. A failover's
    /// standby started long before, as far as the model knows.
    pub(super) started: i64,
    /// When its standby was last promoted (its clock; 0: never): with [`Registry::started`],
    /// when it last became writable (`Table::writable_since`).
    pub(super) promoted: i64,
    /// How long it has been up, serving, on its clock (ms): real time while it is up
    /// ([`Fleet::pass`]) and each step of its clock ahead ([`Registry::set_skew`]: what the
    /// clock margin is for), never its time down (no holder reaches a registry that is down).
    /// What a holder's absence is measured in ([`RegRow::served_at`]).
    pub(super) served: i64,
    /// The stalled claims that hold or wait for the table's lock ([`Act::Stall`]), in the
    /// lock's queue: whose (its data directory, [`Member::range`]), and until when (the
    /// registry's clock) it holds the lock before the registry ends it for being idle.
    pub(super) locked: Vec<(u128, i64)>,
}

impl Registry {
    pub(super) fn new_session(&mut self) -> u64 {
        self.next_session += 1;
        self.open.insert(self.next_session);
        self.next_session
    }

    pub(super) fn end_session(&mut self, session: u64) {
        self.locks.retain(|_, held| *held != session);
        self.open.remove(&session);
    }

    /// Its clock is set `skew` ms off real time (another host's after a failover, or set
    /// right): a step ahead counts as time served, a step back takes none away.
    pub(super) fn set_skew(&mut self, skew: i64) {
        self.served += (skew - self.skew).max(0);
        self.skew = skew;
    }

    /// Ends every session but `kept` (the registry's server noticed their clients gone).
    pub(super) fn end_sessions_but(&mut self, kept: &[u64]) {
        self.locks.retain(|_, session| kept.contains(session));
        self.open.retain(|session| kept.contains(session));
        // A stalled claim's session is never one kept (its server waits on its disk).
        self.locked.clear();
    }
}

/// The exchange that failed (the session is gone, or the commit's answer with it).
#[derive(Debug)]
pub(super) struct Failed;

/// The registry's table in memory, as one session sees it at `now` (`client::Sql` in SQL): a
/// transaction's writes are kept apart until its commit, which ends as `commit` says.
pub(super) struct Session<'a> {
    registry: &'a mut Registry,
    session: u64,
    now: i64,
    commit: Commit,
    /// The data directory it serves ([`Member::range`]; 0: an operator's).
    pub(super) by: u128,
    /// The rows as the open transaction wrote them (`None`: no transaction open).
    pending: Option<BTreeMap<u32, RegRow>>,
    /// How long the open transaction may stay idle on the registry (`Table::begin`).
    idle_limit_ms: i64,
    /// The claimant's disk stalled on its intent ([`Act::Stall`]): the registry ends the
    /// transaction once it has been idle its idle limit, and its COMMIT fails.
    stalled: &'a Cell<bool>,
}

impl<'a> Session<'a> {
    /// A session at real time `now` (its clock is the registry's: `now` and its skew).
    pub(super) fn new(
        registry: &'a mut Registry,
        session: u64,
        now: i64,
        commit: Commit,
        stalled: &'a Cell<bool>,
    ) -> Session<'a> {
        Session {
            now: now + registry.skew,
            registry,
            session,
            commit,
            by: 0,
            pending: None,
            idle_limit_ms: 0,
            stalled,
        }
    }

    fn rows(&mut self) -> &mut BTreeMap<u32, RegRow> {
        self.pending.as_mut().unwrap_or(&mut self.registry.rows)
    }

    fn live(&mut self, node: u32, identity: Identity) -> Option<&mut RegRow> {
        self.rows()
            .get_mut(&node)
            .filter(|r| !r.retired && r.identity == identity)
    }
}

impl Table for Session<'_> {
    type Failure = Failed;

    fn begin(&mut self, idle_limit_ms: i64) -> Result<(), Failed> {
        self.pending = Some(self.registry.rows.clone());
        self.idle_limit_ms = idle_limit_ms;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), Failed> {
        let written = self.pending.take().expect("a transaction");
        if self.stalled.get() {
            // The table stays locked until the registry ends the idle transaction (which took
            // the lock once the claims ahead of it in the queue were ended).
            let start = self
                .registry
                .locked
                .last()
                .map_or(self.now, |&(_, until)| until);
            let until = start.max(self.now) + self.idle_limit_ms;
            self.registry.locked.push((self.by, until));
            return Err(Failed);
        }
        match self.commit {
            Commit::Done => {
                self.registry.rows = written;
                Ok(())
            }
            Commit::AnswerLost => {
                self.registry.rows = written;
                Err(Failed)
            }
            Commit::Failed => Err(Failed),
        }
    }

    fn rollback(&mut self) {
        self.pending = None;
    }

    fn clock(&mut self) -> Result<i64, Failed> {
        Ok(self.now)
    }

    fn layouts(&mut self) -> Result<Vec<LayoutRows>, Failed> {
        let mut layouts: Vec<LayoutRows> = vec![];
        for (&node, r) in self.rows().iter() {
            let oldest = (r.claimed_at, node);
            match layouts.iter_mut().find(|l| l.layout == r.layout) {
                Some(l) => {
                    l.rows += 1;
                    if oldest < (l.first_claimed_at, l.first_node) {
                        (l.first_claimed_at, l.first_node) = oldest;
                    }
                }
                None => layouts.push(LayoutRows {
                    layout: r.layout.clone(),
                    rows: 1,
                    first_node: node,
                    first_claimed_at: r.claimed_at,
                }),
            }
        }
        Ok(layouts)
    }

    fn cluster_known(&mut self, system: u64) -> Result<bool, Failed> {
        Ok(self.rows().values().any(|r| r.system == system))
    }

    fn record_used(&mut self, node: u32, request: &Request) -> Result<(), Failed> {
        let (now, by, served_at) = (self.now, self.by, self.registry.served);
        let until = request.used_until;
        let row = self.rows().entry(node).or_insert(RegRow {
            identity: Identity {
                token: 0,
                generation: 0,
            },
            high_water: until,
            lease_until: now,
            retired: true,
            label: request.label.clone(),
            system: request.system,
            layout: request.layout.clone(),
            claimed_at: now,
            last_seen: now,
            by: 0,
            boot: None,
            released: false,
            place: None,
            recorded_by: vec![],
            served_at,
        });
        row.recorded_by.push(by);
        // A live row's mark moves by a millisecond at least, as `client::Sql` moves it.
        let moved = if row.retired {
            row.high_water
        } else {
            row.high_water.saturating_add(1)
        };
        row.high_water = moved.max(until);
        Ok(())
    }

    /// `pg_try_advisory_lock` in this session: taken if free or already this session's.
    fn try_lock(&mut self, node: u32) -> Result<bool, Failed> {
        Ok(*self.registry.locks.entry(node).or_insert(self.session) == self.session)
    }

    fn unlock(&mut self, node: u32) -> Result<(), Failed> {
        if self.registry.locks.get(&node) == Some(&self.session) {
            self.registry.locks.remove(&node);
        }
        Ok(())
    }

    fn read_row(&mut self, node: u32) -> Result<Option<RowRead>, Failed> {
        Ok(self.rows().get(&node).map(|r| RowRead {
            row: row_of(node, r),
            label: r.label.clone(),
            layout: r.layout.clone(),
        }))
    }

    fn writable_since(&mut self) -> Result<i64, Failed> {
        Ok(self.registry.started.max(self.registry.promoted))
    }

    fn candidates(&mut self, request: &Request, limit: usize) -> Result<Vec<u32>, Failed> {
        Ok((0..=request.max_node).take(limit).collect())
    }

    fn write_claim(
        &mut self,
        node: u32,
        identity: Identity,
        mark: i64,
        request: &Request,
    ) -> Result<(), Failed> {
        let (now, by, served_at) = (self.now, self.by, self.registry.served);
        let rows = self.rows();
        let high_water = rows.get(&node).map_or(i64::MIN, |r| r.high_water);
        rows.insert(
            node,
            RegRow {
                identity,
                high_water: high_water.max(mark),
                lease_until: now + request.lease_ms,
                retired: false,
                label: request.label.clone(),
                system: request.system,
                layout: request.layout.clone(),
                claimed_at: now,
                last_seen: now,
                by,
                boot: Some(request.boot),
                released: false,
                place: Some(request.place),
                recorded_by: vec![],
                served_at,
            },
        );
        Ok(())
    }

    fn heartbeat_row(
        &mut self,
        node: u32,
        identity: Identity,
        request: &HeartbeatRequest,
    ) -> Result<Option<i64>, Failed> {
        let (now, served) = (self.now, self.registry.served);
        Ok(self.live(node, identity).map(|r| {
            let before = r.high_water;
            r.lease_until = now + request.lease_ms;
            r.last_seen = now;
            r.served_at = served;
            r.high_water = r.high_water.max(request.high_water);
            r.boot = Some(request.boot);
            r.place = Some(request.place);
            r.released = false;
            before
        }))
    }

    fn live_label(&mut self, node: u32) -> Result<Option<String>, Failed> {
        Ok(self
            .rows()
            .get(&node)
            .filter(|r| !r.retired)
            .map(|r| r.label.clone()))
    }

    fn claims_mark(&mut self, node: u32, claim: Identity) -> Result<Option<i64>, Failed> {
        Ok(self.live(node, claim).map(|r| r.high_water))
    }

    fn write_release(&mut self, node: u32, mark: i64) -> Result<(), Failed> {
        if let Some(r) = self.rows().get_mut(&node) {
            r.released = true;
            r.high_water = mark;
        }
        Ok(())
    }

    fn retire_row(&mut self, node: u32) -> Result<(), Failed> {
        if let Some(r) = self.rows().get_mut(&node) {
            r.retired = true;
        }
        Ok(())
    }
}

/// The applications whose lease ran out, as `client::Sql` lists them: live rows of no cluster's
/// system identifier, the registry's clock past their lease.
impl crate::registry::lease::Applications for Session<'_> {
    fn lapsed(&mut self) -> Result<Vec<u32>, Failed> {
        let now = self.now;
        Ok(self
            .rows()
            .iter()
            .filter(|(_, r)| {
                r.system == crate::registry::lease::APPLICATION_SYSTEM
                    && !r.retired
                    && r.lease_until < now
            })
            .map(|(&node, _)| node)
            .collect())
    }
}

/// A row of the in-memory table as the rules read it (connected and same label: the caller's
/// to set).
pub(super) fn row_of(node: u32, r: &RegRow) -> Row {
    Row {
        node,
        identity: r.identity,
        retired: r.retired,
        high_water: r.high_water,
        lease_until: r.lease_until,
        connected: false,
        same_label: false,
        stray: false,
        boot: r.boot,
        last_seen: r.last_seen,
        absent_since: r.last_seen,
        released: r.released,
        place: r.place,
    }
}
