//! The exhaustive search beside the seeded simulation: every sequence of acts, up to a depth,
//! over a few small scopes (one node id; an origin, a server beside it and a slot where its
//! same-label copy, a joiner or a rival runs; the registry; both modes), each act followed by
//! the checks every act of the simulation is followed by (`Fleet::checked`: the promise, not
//! the code). States are fingerprinted, so that a state reached again, no deeper than before,
//! is not searched again; the depth grows one act at a time (iterative deepening), so that a
//! failure is found at the fewest acts that make it.
//!
//! `cargo test -p snowflake-core --lib exhaustive_search` searches to a depth of 8;
//! `PGSF_SEARCH_DEPTH=N` searches deeper (or less deep), and `PGSF_SEARCH_SCOPE=NAME` one scope.

use super::{Act, Commit, Fleet, LEASE};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One small scope: the members (their configured node ids; the third is the slot a copy or a
/// joiner takes), the mode they start in, the lease, and the acts tried at every step.
struct Scope {
    name: &'static str,
    configured: [Option<u32>; 3],
    fenced: bool,
    lease: i64,
    acts: Vec<Act>,
}

const DONE: Commit = Commit::Done;

/// The scopes, each in both modes: where copies meet restarts (a renewer restart, a clean
/// restart, a crash, a registry restart), where a switch of mode meets a cut link, where a
/// registry that fails over slowly meets a rival and a clone, where a server stopped cleanly
/// meets a cold copy of its data directory, where a joiner's history meets a clean stop, and
/// where a slow disk meets the shipped lease.
fn scopes() -> Vec<Scope> {
    use Act::*;
    let mut scopes = vec![];
    // The largest first, so that two threads finish together.
    for fenced in [true, false] {
        scopes.push(Scope {
            name: "a copy with its origin's label, a clean restart or a crash",
            configured: [Some(0), Some(0), Some(0)],
            fenced,
            lease: LEASE,
            acts: vec![
                Round { s: 0, commit: DONE },
                Round { s: 2, commit: DONE },
                Call { s: 0, want: 1 },
                Wait { ms: LEASE / 3 },
                Release {
                    s: 0,
                    restart: true,
                },
                Crash { s: 0 },
                Copy {
                    s: 2,
                    from: 0,
                    same_label: true,
                },
            ],
        });
        scopes.push(Scope {
            name: "a copy with its origin's label, a renewer or registry restart",
            configured: [Some(0), Some(0), Some(0)],
            fenced,
            lease: LEASE,
            acts: vec![
                Round { s: 0, commit: DONE },
                Round { s: 2, commit: DONE },
                Call { s: 0, want: 1 },
                Wait { ms: LEASE / 3 },
                Release {
                    s: 0,
                    restart: false,
                },
                Copy {
                    s: 2,
                    from: 0,
                    same_label: true,
                },
                Registry { up: false },
                Registry { up: true },
            ],
        });
        scopes.push(Scope {
            name: "a switch of mode, a cut link, a rival",
            configured: [Some(0), Some(0), Some(0)],
            fenced,
            lease: LEASE,
            acts: vec![
                Round { s: 0, commit: DONE },
                Round { s: 1, commit: DONE },
                Call { s: 0, want: 1 },
                Call { s: 1, want: 1 },
                Wait { ms: LEASE / 3 },
                Wait { ms: LEASE + 1 },
                Link { s: 0, up: false },
                Mode {
                    s: 0,
                    fenced: !fenced,
                },
            ],
        });
        scopes.push(Scope {
            name: "a slow registry failover, a rival and a clone",
            configured: [Some(0), Some(0), Some(0)],
            fenced,
            lease: LEASE,
            acts: vec![
                Round { s: 0, commit: DONE },
                Round { s: 1, commit: DONE },
                Round { s: 2, commit: DONE },
                Registry { up: false },
                // Past a heartbeat interval and the margin, and past the lease.
                Wait { ms: LEASE },
                RegistryFailover { skew: 0 },
                Copy {
                    s: 2,
                    from: 0,
                    same_label: false,
                },
            ],
        });
        scopes.push(Scope {
            name: "a cold copy of a stopped server, started before or after it",
            configured: [Some(0), Some(0), Some(0)],
            fenced,
            lease: LEASE,
            acts: vec![
                Round { s: 0, commit: DONE },
                Round { s: 2, commit: DONE },
                Call { s: 0, want: 1 },
                Wait { ms: LEASE / 3 },
                // A heartbeat interval and the margin: an origin away that long is taken over.
                Wait { ms: LEASE },
                Stop { s: 0 },
                ColdCopy {
                    s: 2,
                    from: 0,
                    same_label: true,
                },
                Start { s: 0 },
                Start { s: 2 },
            ],
        });
        scopes.push(Scope {
            name: "a joiner's history, a clean stop",
            configured: [Some(0), Some(0), None],
            fenced,
            lease: LEASE,
            acts: vec![
                Round { s: 0, commit: DONE },
                Round { s: 2, commit: DONE },
                Call { s: 0, want: 1 },
                Wait { ms: LEASE / 3 },
                // IDs a heartbeat interval ahead: reached after one wait.
                Join {
                    s: 2,
                    node: 0,
                    lead: LEASE / 3,
                    span: 2,
                },
                Release {
                    s: 0,
                    restart: true,
                },
            ],
        });
    }
    scopes.push(Scope {
        name: "a slow disk under the shipped lease",
        configured: [Some(0), Some(1), None],
        fenced: true,
        lease: 30_000,
        acts: vec![
            Round { s: 0, commit: DONE },
            Round { s: 1, commit: DONE },
            Wait { ms: 1_000 },
            Stall { s: 1, slow: true },
            Release {
                s: 1,
                restart: false,
            },
            Crash { s: 1 },
        ],
    });
    scopes
}

/// What a search found wrong: after which acts, and why.
struct Found {
    acts: Vec<Act>,
    why: String,
}

/// A state's fingerprint: everything the fleet's future depends on, not the count of contacts
/// that led to it.
fn fingerprint(fleet: &mut Fleet) -> u64 {
    let contacts = std::mem::take(&mut fleet.contacts);
    let mut hasher = DefaultHasher::new();
    fleet.hash(&mut hasher);
    fleet.contacts = contacts;
    hasher.finish()
}

/// The depth-first search below `fleet`, `left` acts more at most: `seen` holds the
/// fingerprint of every state searched and how many acts were left below it then.
fn below(
    scope: &Scope,
    fleet: &Fleet,
    left: usize,
    path: &mut Vec<usize>,
    seen: &mut HashMap<u64, usize>,
) -> Result<(), Found> {
    for (i, act) in scope.acts.iter().enumerate() {
        let mut next = fleet.clone();
        path.push(i);
        // A panic (an overflow, a broken assertion of the core) is a finding too.
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            next.checked(act.clone()).map(|()| next)
        }));
        let next = match stepped {
            Ok(Ok(next)) => next,
            Ok(Err(why)) => return Err(found(scope, path, why.to_string())),
            Err(_) => return Err(found(scope, path, "a panic, above".to_string())),
        };
        let mut next = next;
        if left > 1 {
            let print = fingerprint(&mut next);
            if seen.get(&print).is_none_or(|&deeper| deeper < left - 1) {
                seen.insert(print, left - 1);
                below(scope, &next, left - 1, path, seen)?;
            }
        }
        path.pop();
    }
    Ok(())
}

fn found(scope: &Scope, path: &[usize], why: String) -> Found {
    Found {
        acts: path.iter().map(|&i| scope.acts[i].clone()).collect(),
        why,
    }
}

/// Searches `scope` to `depth` acts, one more at a time: the first failure, at the fewest
/// acts, or how many states the deepest search went through.
fn search(scope: &Scope, depth: usize) -> Result<usize, Found> {
    let mut start = Fleet::new(&scope.configured, scope.fenced);
    start.lease = scope.lease;
    let mut states = 0;
    for deepest in 1..=depth {
        let mut seen = HashMap::new();
        below(scope, &start, deepest, &mut vec![], &mut seen)?;
        states = seen.len();
    }
    Ok(states)
}

fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[test]
fn exhaustive_search() {
    let depth: usize = setting("PGSF_SEARCH_DEPTH").map_or(8, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("PGSF_SEARCH_DEPTH={v}: not a number"))
    });
    let only = setting("PGSF_SEARCH_SCOPE");
    let scopes: Vec<Scope> = scopes()
        .into_iter()
        .filter(|s| only.as_deref().is_none_or(|o| s.name.contains(o)))
        .collect();
    assert!(!scopes.is_empty(), "no scope is named {only:?}");
    // Two threads, each taking the next scope not yet searched (the largest come first).
    let next = AtomicUsize::new(0);
    let results: Vec<(String, Result<usize, Found>)> = std::thread::scope(|threads| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (scopes, next) = (&scopes, &next);
                threads.spawn(move || {
                    let mut done = vec![];
                    while let Some(s) = scopes.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let mode = if s.fenced { "fenced" } else { "available" };
                        done.push((format!("{} ({mode})", s.name), search(s, depth)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a search thread"))
            .collect()
    });
    let mut failures = vec![];
    for (name, result) in results {
        match result {
            Ok(states) => println!("searched {name} to depth {depth}: {states} states"),
            Err(found) => failures.push(format!(
                "{name}: found at depth {}: {} ({:?})",
                found.acts.len(),
                found.why,
                found.acts
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
