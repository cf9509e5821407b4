//! Directed cases of the fleet: runs written act by act (most of them a defect the rules once
//! had), by what they guard: the registry's mark ([`marks`]), claims ([`claims`]), copies of a
//! data directory ([`copies`]) and restarts ([`restarts`]). This file holds the runs they share.

mod claims;
mod copies;
mod marks;
mod restarts;

use super::*;

/// Runs `acts` on a fleet of these settings, each act checked as the seeded simulation checks
/// it, and panics with the act that failed.
fn directed(configured: &[Option<u32>], fenced: bool, acts: &[Act]) -> Fleet {
    let mut fleet = Fleet::new(configured, fenced);
    for act in acts {
        fleet
            .act(act.clone())
            .unwrap_or_else(|e| panic!("at {act:?}: {e}"));
        fleet.keepalives();
        fleet.rows_per_member().expect("one row per member");
        fleet
            .locks_name_their_holders()
            .expect("locks name holders");
    }
    fleet
}

/// [`directed`] under the lease that ships (30 s): a heartbeat's exchange deadline and a
/// claim's idle limit reach their caps.
fn directed_shipped(configured: &[Option<u32>], fenced: bool, acts: &[Act]) -> Fleet {
    let mut fleet = directed(configured, fenced, &[]);
    fleet.lease = 30_000;
    for act in acts {
        fleet
            .act(act.clone())
            .unwrap_or_else(|e| panic!("at {act:?}: {e}"));
        fleet.keepalives();
    }
    fleet
}

impl Fleet {
    /// One act of a directed case, and the keepalives after it: panics with the act the run's
    /// checks refused.
    fn step(&mut self, act: Act) {
        self.act(act.clone())
            .unwrap_or_else(|e| panic!("at {act:?}: {e}"));
        self.keepalives();
    }
}
