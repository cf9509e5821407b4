//! What befalls the fleet: the acts ([`Act`], [`Commit`]), the strategy that draws them
//! ([`act`]), and what each act does ([`Fleet::act`]).

use super::*;

#[derive(Clone, Debug)]
pub(super) enum Act {
    /// Time passes.
    Wait { ms: i64 },
    /// Server `s` makes IDs.
    Call { s: usize, want: u64 },
    /// Server `s`'s renewer turns: a contact (claim or heartbeat), the pin, the publication.
    Round { s: usize, commit: Commit },
    /// Server `s` is killed and restarted from its state file.
    Crash { s: usize },
    /// Server `s`'s renewer exits and releases its claim (`Node::release`); `restart`: with
    /// the server, a clean shutdown and start.
    Release { s: usize, restart: bool },
    /// Server `s`'s link to the registry is cut, or healed.
    Link { s: usize, up: bool },
    /// The registry stops (every session ends) or starts.
    Registry { up: bool },
    /// The registry's server notices sessions whose client is gone, and ends them.
    Notice,
    /// An operator retires node id `node`.
    Retire { node: u32 },
    /// A row of another layout appears in the table under node id `node` if it has no row
    /// (another fleet's server pointed at this registry, a hand edit): under an id above the
    /// fleet's or among its own, it blocks its own id only (FLEETS, the failure table).
    Stray { node: u32 },
    /// Server `s`'s wall clock is set `offset` ms off the registry's (a step either way; its
    /// monotonic clock does not move).
    Clock { s: usize, offset: i64 },
    /// Server `s` is gone for good and a copy of server `from`'s data directory runs in its
    /// place (pg_basebackup, a restored snapshot, a cloned VM): `from`'s state file, settings
    /// and system identifier, tokens of its own; `same_label`: `from`'s label too (a cloned
    /// VM keeps cluster name, host name and port), else `s`'s.
    Copy {
        s: usize,
        from: usize,
        same_label: bool,
    },
    /// Server `s` is gone for good and a new server of another layout ([`other_layout`]: the
    /// node and sequence fields split otherwise) runs in its place, node id unset, pointed at
    /// this registry (another fleet's, a mistyped setting).
    Foreign { s: usize },
    /// Server `from` fails over to its synchronous standby, which runs in place of server
    /// `s` (gone for good) from `from`'s state as it is (every record reached it), started as
    /// a standby and promoted; `fresh`: with `fresh_node_id_on_promotion`. The old primary is
    /// killed: in fenced mode it comes back at once (the registry's mark fences it); in
    /// available mode the operator fences it as FLEETS asks, and a new server with its settings
    /// runs in its place.
    Failover { s: usize, from: usize, fresh: bool },
    /// The registry fails over to its synchronous standby on a host whose clock is `skew` ms
    /// off real time: every session (and advisory lock) ends; the rows are as committed. With
    /// the registry up, its primary dies and the standby is promoted at once; with the registry
    /// down (its primary died at a [`Act::Registry`]), the standby is promoted now, after as
    /// long as the registry was down: a slow failover, which no holder could reach meanwhile.
    /// Either way the registry's server started when the standby did, long before
    /// (`pg_postmaster_start_time()` does not move), and is up from now on.
    RegistryFailover { skew: i64 },
    /// Server `s` is gone for good and a server that made IDs without a registry under node
    /// id `node` (a few in each of `span` milliseconds), its clock `lead` ms ahead, joins in
    /// its place with its node id unset and its clock set right (FLEETS, *Servers that already
    /// make IDs*): its state file names `node`, which its first claim records as used.
    Join {
        s: usize,
        node: u32,
        lead: i64,
        span: i64,
    },
    /// Server `s` is switched to `fenced` mode, or to available (`ALTER SYSTEM` and a reload):
    /// its renewer's next turn publishes what the new mode lets it do (before its contact,
    /// which may not reach the registry).
    Mode { s: usize, fenced: bool },
    /// Server `s`'s disk turns slow (every fsync outlasts the time a claim may stay idle on the
    /// registry), or fast again: each claim it makes stalls on writing its intent while its
    /// transaction holds the registry table's lock, until the registry ends the transaction;
    /// the intent is written once the fsync returns, after the claim failed.
    Stall { s: usize, slow: bool },
    /// Server `s` is stopped cleanly (`pg_ctl stop`): its renewer releases its claim, and the
    /// server stays down, its data directory as it left it, until [`Act::Start`].
    Stop { s: usize },
    /// Server `s`, stopped cleanly, is started again: a planned restart, after however long.
    Start { s: usize },
    /// Server `s` is gone for good and a copy of server `from`'s data directory, made while
    /// `from` was stopped cleanly (`cp -a`, a file-level backup, a snapshot of its volume),
    /// sits in its place, stopped, to be started by [`Act::Start`] before or after its origin:
    /// `from`'s state file (its token and generation), settings and control file (stopped
    /// cleanly), another place; `same_label`: `from`'s label too (cluster name, host name and
    /// port), else `s`'s.
    ColdCopy {
        s: usize,
        from: usize,
        same_label: bool,
    },
}

/// The layout of [`Act::Foreign`]'s server: 9 bits of node id and 13 of sequence, so that its
/// node id 1's first ID of a millisecond is the fleet's node id 2's.
fn other_layout() -> Layout {
    Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, 1, 9, 13).expect("a valid layout")
}

/// How a claim's COMMIT ends.
#[derive(Clone, Copy, Debug)]
pub(super) enum Commit {
    Done,
    /// Committed, but the answer never reached the server (a time-out): its session is gone.
    AnswerLost,
    /// Not committed: the session failed first.
    Failed,
}

pub(super) fn act() -> impl Strategy<Value = Act> {
    let s = 0..SERVERS;
    let commit = prop_oneof![
        8 => Just(Commit::Done),
        1 => Just(Commit::AnswerLost),
        1 => Just(Commit::Failed),
    ];
    prop_oneof![
        4 => (0i64..2_500).prop_map(|ms| Act::Wait { ms }),
        // A quiet spell: the next call is a wake (issued before its reservation is written).
        1 => (61_000i64..90_000).prop_map(|ms| Act::Wait { ms }),
        6 => (s.clone(), 1u64..100).prop_map(|(s, want)| Act::Call { s, want }),
        6 => (s.clone(), commit).prop_map(|(s, commit)| Act::Round { s, commit }),
        1 => s.clone().prop_map(|s| Act::Crash { s }),
        1 => (s.clone(), any::<bool>()).prop_map(|(s, restart)| Act::Release { s, restart }),
        2 => (s, any::<bool>()).prop_map(|(s, up)| Act::Link { s, up }),
        1 => any::<bool>().prop_map(|up| Act::Registry { up }),
        2 => Just(Act::Notice),
        1 => (0..=MAX_NODE).prop_map(|node| Act::Retire { node }),
        1 => (0..=MAX_NODE + 2).prop_map(|node| Act::Stray { node }),
        // A step within the clock check's margin (either way), past it, or back to right.
        1 => (0..SERVERS, prop_oneof![
            Just(0i64),
            Just(MARGIN / 2),
            Just(-MARGIN / 2),
            Just(3 * MARGIN),
            Just(-3 * MARGIN),
        ])
            .prop_map(|(s, offset)| Act::Clock { s, offset }),
        1 => (0..SERVERS, 0..SERVERS, any::<bool>())
            .prop_map(|(s, from, same_label)| Act::Copy { s, from, same_label }),
        1 => (0..SERVERS).prop_map(|s| Act::Foreign { s }),
        1 => (0..SERVERS, 0..SERVERS, any::<bool>())
            .prop_map(|(s, from, fresh)| Act::Failover { s, from, fresh }),
        1 => prop_oneof![Just(0i64), Just(MARGIN / 2), Just(-MARGIN / 2), Just(3 * MARGIN)]
            .prop_map(|skew| Act::RegistryFailover { skew }),
        1 => (0..SERVERS, any::<bool>()).prop_map(|(s, fenced)| Act::Mode { s, fenced }),
        1 => (0..SERVERS, any::<bool>()).prop_map(|(s, slow)| Act::Stall { s, slow }),
        1 => (0..SERVERS).prop_map(|s| Act::Stop { s }),
        1 => (0..SERVERS).prop_map(|s| Act::Start { s }),
        1 => (0..SERVERS, 0..SERVERS, any::<bool>())
            .prop_map(|(s, from, same_label)| Act::ColdCopy { s, from, same_label }),
    ]
}

impl Fleet {
    /// One act of the run.
    pub(super) fn act(&mut self, act: Act) -> Result<(), TestCaseError> {
        match act {
            Act::Wait { ms } => self.pass(ms),
            // A stopped server makes no ID, turns no renewer, neither crashes nor releases.
            Act::Call { s, .. }
            | Act::Round { s, .. }
            | Act::Crash { s }
            | Act::Release { s, .. }
                if self.members[s].stopped => {}
            Act::Call { s, want } => self.call(s, want)?,
            Act::Round { s, commit } => self.round(s, commit)?,
            Act::Crash { s } => {
                // Its registry session lives on until the registry notices.
                self.session_gone(s);
                self.members[s] = self.members[s].restarted(s, false);
                self.members[s].crashes += 1;
            }
            Act::Release { s, restart } => {
                self.release(s);
                if restart {
                    // A release that could not reach the registry leaves the mark a lease
                    // ahead, as a crash does.
                    self.members[s] = self.members[s].restarted(s, true);
                    self.members[s].crashes += 1;
                }
            }
            Act::Link { s, up } => self.members[s].link = up,
            Act::Registry { up } => {
                if !up {
                    // Every session ends with the registry's server.
                    self.registry.end_sessions_but(&[]);
                } else if !self.registry.up {
                    self.registry.started = self.now + self.registry.skew;
                }
                self.registry.up = up;
            }
            Act::Notice => {
                let live: Vec<u64> = self
                    .members
                    .iter()
                    .filter(|m| m.link)
                    .filter_map(|m| m.session)
                    .collect();
                self.registry.end_sessions_but(&live);
            }
            Act::Retire { node } if self.registry.up => {
                // `snowflake_registry_retire`, on a connection of its own.
                let registry = &mut self.registry;
                let session = registry.new_session();
                let stalled = Cell::new(false);
                let mut table = Session::new(registry, session, self.now, Commit::Done, &stalled);
                table::retire(&mut table, node).expect("an operator's retirement commits");
                registry.end_session(session);
            }
            Act::Retire { .. } => {}
            // Once the fleet has a row: a stray in an empty table would be the first claim of
            // another fleet, whose layout is the registry's from then on.
            Act::Stray { node } if !self.registry.rows.is_empty() => {
                let now = self.now;
                self.registry.rows.entry(node).or_insert(RegRow {
                    identity: Identity {
                        token: 0xfeed,
                        generation: 1,
                    },
                    high_water: i64::MIN,
                    lease_until: i64::MAX,
                    retired: false,
                    label: "another fleet's".into(),
                    system: 0,
                    layout: "another layout".into(),
                    claimed_at: now,
                    last_seen: now,
                    by: 0,
                    boot: None,
                    released: false,
                    place: None,
                    recorded_by: vec![],
                    served_at: self.registry.served,
                });
            }
            Act::Stray { .. } => {}
            Act::Clock { s, offset } => {
                let m = &mut self.members[s];
                if offset > m.offset {
                    // Stepped ahead: its IDs may pass the mark until a contact records one
                    // above them (FLEETS, rule 3).
                    m.marked_at = None;
                }
                m.offset = offset;
            }
            // A copy never passes for its running origin (it cannot prove it is that server),
            // and waits for an origin seen lately to come back; in either mode.
            // A copy never passes for its running origin (it cannot prove it is that server),
            // and waits for an origin seen lately to come back; in either mode. (A copy of a
            // stopped server is a cold one.)
            Act::Copy {
                s,
                from,
                same_label,
            } if s != from && !self.members[from].stopped => {
                self.members[s] = self.copy_of(from, s, same_label);
            }
            Act::Copy { .. } => {}
            Act::Stop { s } if !self.members[s].stopped => {
                self.release(s);
                self.members[s].stopped = true;
            }
            Act::Stop { .. } => {}
            Act::Start { s } if self.members[s].stopped => {
                // Its last reservation is its release's, or a lease ahead if the release could
                // not reach the registry, as after a crash.
                self.members[s] = self.members[s].restarted(s, true);
                self.members[s].crashes += 1;
            }
            Act::Start { .. } => {}
            Act::ColdCopy {
                s,
                from,
                same_label,
            } if s != from && self.members[from].stopped => {
                let mut copy = self.copy_of(from, s, same_label);
                copy.stopped = true;
                self.members[s] = copy;
            }
            Act::ColdCopy { .. } => {}
            Act::Foreign { s } => {
                self.gone_for_good(s);
                self.copies += 1;
                let range = (SERVERS as u128 + self.copies) << 64;
                let settings = Settings {
                    configured: None,
                    registry: true,
                };
                let mut foreign = Member::start_in(other_layout(), settings, None, s, range, false);
                foreign.fenced = self.members[s].fenced;
                foreign.range = range;
                foreign.system = 1_000 + self.copies as u64;
                foreign.label = format!("foreign {}", self.copies);
                foreign.offset = self.members[s].offset;
                self.members[s] = foreign;
            }
            Act::Failover { s, from, fresh } if s != from && !self.members[from].stopped => {
                self.gone_for_good(s);
                self.session_gone(from);
                let primary = &self.members[from];
                self.copies += 1;
                let range = (SERVERS as u128 + self.copies) << 64;
                let (layout, settings, file) = (primary.layout, primary.settings, primary.file);
                let fenced = primary.fenced;
                let mut standby = Member::start_in(layout, settings, file, s, range, true);
                standby.fenced = fenced;
                standby.range = range;
                standby.origin = primary.origin.or(Some(primary.range));
                standby.system = primary.system;
                standby.crashes = primary.crashes;
                standby.offset = self.members[s].offset;
                standby.fresh_on_promotion = fresh;
                standby.inherited = standby.issuer.node().identity;
                standby.unjoined = primary.unjoined.clone();
                self.members[s] = standby;
                if fenced {
                    self.members[from] = self.members[from].restarted(from, false);
                    self.members[from].crashes += 1;
                } else {
                    self.gone_for_good(from);
                    self.copies += 1;
                    let range = (SERVERS as u128 + self.copies) << 64;
                    let mut new = Member::start_in(L, settings, None, from, range, false);
                    new.fenced = fenced;
                    new.range = range;
                    new.system = 1_000 + self.copies as u64;
                    new.offset = self.members[from].offset;
                    self.members[from] = new;
                }
            }
            Act::Failover { .. } => {}
            Act::RegistryFailover { skew } => {
                self.registry.end_sessions_but(&[]);
                self.registry.set_skew(skew);
                self.registry.up = true;
                self.registry.promoted = self.now + skew;
            }
            Act::Stall { s, slow } => self.members[s].slow_disk = slow,
            Act::Mode { s, fenced } if self.members[s].stopped => self.members[s].fenced = fenced,
            Act::Mode { s, fenced } => {
                self.members[s].fenced = fenced;
                if fenced {
                    // An available lease's ceiling is no grant in fenced mode.
                    self.members[s].marked_at = None;
                }
                // The renewer publishes a switch at once, before any contact
                // (`Renewer::turn`): the contact may wait for the registry.
                let (now, renewer) = (self.now, self.members[s].renewer);
                let mut in_round = InRound::new(self, s, Commit::Done);
                renewer.publish(&mut in_round, fenced, now);
            }
            Act::Join {
                s,
                node,
                lead,
                span,
            } => {
                self.gone_for_good(s);
                self.copies += 1;
                let range = (SERVERS as u128 + self.copies) << 64;
                let alone = Settings {
                    configured: Some(node),
                    registry: false,
                };
                let mut before = Member::start(alone, None, s, range);
                let mut file = None;
                let mut ids = vec![];
                for ms in 0..span {
                    let at = self.now + lead + ms;
                    ids.extend(issue(&mut before.issuer, at, 8, |durable| {
                        file = Some(file_of(durable));
                    }));
                }
                // An ID some member made already was made twice before the join, by two
                // servers under one id, one of them outside the fleet: no registry can undo
                // that (FLEETS, *Servers that already make IDs*). Every other one must stay
                // unique.
                let mut made = vec![];
                for id in ids {
                    if let Entry::Vacant(v) = self.issued.entry(id) {
                        v.insert((s, false));
                        made.push(id);
                    }
                }
                let last = self.now + lead + span - 1;
                let joined = Settings {
                    configured: None,
                    registry: true,
                };
                let mut joiner = Member::start(joined, file, s, range);
                joiner.fenced = self.members[s].fenced;
                joiner.range = range;
                joiner.system = 1_000 + self.copies as u64;
                joiner.label = format!("joiner {}", self.copies);
                joiner.offset = self.members[s].offset;
                joiner.unjoined = Some((node, last, made));
                self.members[s] = joiner;
            }
        }
        Ok(())
    }

    /// Server `s` is gone for good: a copy of server `from`'s data directory, to run in its
    /// place (pg_basebackup, a restored snapshot, a cloned VM, `cp -a`): `from`'s state file,
    /// settings and system identifier, tokens and a place of its own; `same_label`: `from`'s
    /// label too (a cloned VM keeps cluster name, host name and port), else `s`'s.
    fn copy_of(&mut self, from: usize, s: usize, same_label: bool) -> Member {
        self.gone_for_good(s);
        let origin = &self.members[from];
        self.copies += 1;
        let range = (SERVERS as u128 + self.copies) << 64;
        let mut copy = Member::start(origin.settings, origin.file, s, range);
        copy.fenced = origin.fenced;
        copy.system = origin.system;
        copy.range = range;
        copy.origin = origin.origin.or(Some(origin.range));
        copy.crashes = origin.crashes;
        copy.offset = self.members[s].offset;
        copy.unjoined = origin.unjoined.clone();
        if same_label {
            copy.label = origin.label.clone();
        }
        copy
    }
}
