//! The fleet's checks: those after every act ([`Fleet::checked`]: one row per member, locks that
//! name their holders), those of the end ([`healed`]: every fault heals and the fleet settles as
//! the docs promise), and the property over random runs of acts ([`run_fleet`]).

use super::*;

fn fleet_settings() -> impl Strategy<Value = Vec<Option<u32>>> {
    proptest::collection::vec(prop_oneof![Just(None), (0..2u32).prop_map(Some)], SERVERS)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// The registry's actors: whatever crashes, partitions, outages, lost answers,
    /// retirements, copies and clock steps do, no ID is issued twice (in available mode: none
    /// by a member that reached the registry since its lease ran out), no member's tokens name
    /// two rows, and once every fault has healed each member makes IDs — or is refused a
    /// configured id another live member holds, or finds no id free.
    #[test]
    fn no_fleet_fault_makes_a_duplicate_or_strands_a_server(
        configured in fleet_settings(),
        fenced in any::<bool>(),
        acts in proptest::collection::vec(act(), 1..160),
    ) {
        run_fleet(&configured, fenced, acts)?;
    }
}

/// One run of the fleet: `acts`, then every fault healed and a few leases of rounds, then the
/// end's check (see `no_fleet_fault_makes_a_duplicate_or_strands_a_server`).
pub(super) fn run_fleet(
    configured: &[Option<u32>],
    fenced: bool,
    acts: Vec<Act>,
) -> Result<(), TestCaseError> {
    run_fleet_leased(configured, fenced, LEASE, acts)
}

/// [`run_fleet`] with every member's lease `lease` ms.
pub(super) fn run_fleet_leased(
    configured: &[Option<u32>],
    fenced: bool,
    lease: i64,
    acts: Vec<Act>,
) -> Result<(), TestCaseError> {
    let mut fleet = Fleet::new(configured, fenced);
    fleet.lease = lease;
    for act in acts {
        fleet.checked(act)?;
    }
    healed(&mut fleet)
}

impl Fleet {
    /// One act, and the checks that hold after every act.
    pub(super) fn checked(&mut self, act: Act) -> Result<(), TestCaseError> {
        self.act(act)?;
        self.keepalives();
        self.rows_per_member()?;
        self.locks_name_their_holders()
    }

    /// A connected holder keeps its id: where a member's open session holds a node id's
    /// advisory lock, the id's live row names that member's claim (no claim takes an id whose
    /// lock another session holds: the lock is how the registry knows its holder is there).
    pub(super) fn locks_name_their_holders(&self) -> Result<(), TestCaseError> {
        for (&node, &session) in &self.registry.locks {
            let Some((s, m)) = self
                .members
                .iter()
                .enumerate()
                .find(|(_, m)| m.session == Some(session))
            else {
                continue;
            };
            if let Some(row) = self.registry.rows.get(&node).filter(|r| !r.retired) {
                prop_assert!(
                    m.issuer.node().identity == Some(row.identity),
                    "node id {node} taken from member {s}, whose session holds its lock: \
                     the row names {:?}, the member {:?}",
                    row.identity,
                    m.issuer.node().identity
                );
            }
        }
        Ok(())
    }

    /// One row per server: no member's claims wrote more than one live row (a copy's are its
    /// own, whatever token it carried).
    pub(super) fn rows_per_member(&self) -> Result<(), TestCaseError> {
        for (s, m) in self.members.iter().enumerate() {
            let rows = self
                .registry
                .rows
                .values()
                .filter(|r| r.by == m.range && !r.retired)
                .count();
            prop_assert!(rows <= 1, "member {s} holds {rows} rows");
        }
        Ok(())
    }
}

/// The checks of the end: every fault heals, and the fleet settles as the docs promise.
fn healed(fleet: &mut Fleet) -> Result<(), TestCaseError> {
    // Every fault heals (clocks set right); the registry notices the dead sessions; time
    // passes lease by lease with every renewer doing its rounds.
    if !fleet.registry.up {
        fleet.registry.started = fleet.now + fleet.registry.skew;
    }
    fleet.registry.up = true;
    fleet.registry.set_skew(0);
    for m in &mut fleet.members {
        m.link = true;
        m.offset = 0;
        m.slow_disk = false;
    }
    // Every server stopped is started again, in turn.
    for s in 0..SERVERS {
        fleet.act(Act::Start { s })?;
    }
    for _ in 0..12 {
        let live: Vec<u64> = fleet.members.iter().filter_map(|m| m.session).collect();
        fleet.registry.end_sessions_but(&live);
        fleet.pass(fleet.lease / 2);
        for s in 0..SERVERS {
            fleet.round(s, Commit::Done)?;
            fleet.call(s, 10)?;
        }
    }
    let at = Bounds {
        now: fleet.now + fleet.registry.skew,
        margin_ms: MARGIN,
        lease_ms: fleet.lease,
    };
    let none_free =
        (0..=MAX_NODE).all(|node| {
            fleet.registry.rows.get(&node).is_some_and(|r| {
                !r.retired || !crate::registry::is_free(Some(&row_of(node, r)), &at)
            })
        });
    // An id given up on a promotion is retired at a heartbeat of the server that gave it up
    // once its old holder is gone, whatever the renewer's restarts meanwhile,
    // unless it was claimed again (the row names another claim: its new holder's, whom the
    // retirement leaves alone) or a member holds it. (A restart of that server forgets it,
    // with shared memory, and one that holds no claim any more has no heartbeat: the id then
    // stays `lost` until an operator retires it, as FLEETS says.)
    for (&node, &(range, crashes, claim)) in &fleet.given_up {
        let heartbeating = fleet
            .members
            .iter()
            .any(|m| m.range == range && m.crashes == crashes && m.issuer.issuing());
        if !heartbeating {
            continue;
        }
        let retired = fleet
            .registry
            .rows
            .get(&node)
            .is_none_or(|r| r.retired || r.identity != claim);
        let held = fleet
            .members
            .iter()
            .any(|m| m.issuer.issuing() && m.issuer.node().id == node);
        prop_assert!(
            retired || held,
            "node id {node}, given up on a promotion, never retired"
        );
    }
    for (s, m) in fleet.members.iter().enumerate() {
        match m.issuer.node().refusing {
            Refusing::Nothing => {}
            // One layout per fleet: a member of another is refused (or, its claim first, the
            // fleet's members are) for as long as the other stays.
            Refusing::ClaimRefused if m.refused_for_layout => {}
            Refusing::ClaimRefused => {
                let configured = m.settings.configured;
                prop_assert!(
                    configured.is_some() || none_free,
                    "member {s}, assigned, refused"
                );
                let held_by_other = fleet.members.iter().enumerate().any(|(o, other)| {
                    o != s && other.issuer.issuing() && Some(other.issuer.node().id) == configured
                });
                // An id a joiner recorded as used, retired at the end of its IDs: refused until
                // the registry's clock is past them (FLEETS, *What each failure does*: "a server
                // configured with one is refused until the registry's clock is past it"; a server
                // that made IDs before it joined).
                let retired_ahead = configured
                    .and_then(|node| fleet.registry.rows.get(&node))
                    .is_some_and(|r| r.retired && at.now <= r.high_water + MARGIN);
                // A row of another layout under its id (FLEETS, *What each failure does*: it
                // "blocks its own node id only").
                let stray = configured
                    .and_then(|node| fleet.registry.rows.get(&node))
                    .is_some_and(|r| r.layout != L.describe());
                prop_assert!(
                    held_by_other || retired_ahead || stray || configured.is_none(),
                    "member {s} refused {configured:?}, held by no one"
                );
                // The refusal is true: a server told it is a copy is one, never the origin
                // while a copy of it makes IDs under its id.
                let copy_of_it_issues = fleet.members.iter().enumerate().find(|(_, other)| {
                    other.origin == Some(m.range)
                        && other.issuer.issuing()
                        && Some(other.issuer.node().id) == configured
                });
                if let (true, Some((o, _))) = (m.refused_as_copy, copy_of_it_issues) {
                    prop_assert!(
                        false,
                        "member {s} refused {configured:?} as a copy, while its copy, member \
                         {o}, makes IDs under it"
                    );
                }
            }
            refusing => prop_assert!(false, "member {s} stranded: {refusing:?}"),
        }
    }
    Ok(())
}
