//! The seeded fault simulation: the fleet of [`run_fleet`] (the claim, heartbeat and release
//! procedures that ship, over the in-memory registry) driven by a plain random generator from a
//! seed, so that a failure is one number to replay. Each seed first draws which faults it runs
//! and how often (swarm testing: a run with no crashes reaches states a run full of them never
//! does), then its acts, steered where the mutations of the rules would show: waits that end
//! right at a lease's end, calls in the same millisecond on every member, clock steps either
//! way, copies (same label or not), servers stopped and started again, cold copies of a stopped
//! one (started before or after it), failovers to a standby (with or without a fresh id), the
//! registry's failover to a host with another clock (at once, or after it was down a while), a
//! server of another layout, disks that stall a claim under the registry table's lock (one seed
//! in four under the lease that ships) and crashes between any two steps.
//!
//! `cargo test -p snowflake-core --lib seeded_fault_simulation` runs seeds 0 to 99,999 on two
//! threads; `PGSF_SIM_SEEDS=N` runs N of them and `PGSF_SIM_FIRST=S` starts at seed S (a
//! failure names its seed: `PGSF_SIM_FIRST=S PGSF_SIM_SEEDS=1` replays it alone, with its acts).

use super::{run_fleet_leased, Act, Commit, LEASE, MARGIN, MAX_NODE, SERVERS};

/// splitmix64 (small, fast, and the same numbers on every machine), and how many of the
/// servers the seed's acts fall on.
struct Rng(u64, usize);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    fn server(&mut self) -> usize {
        self.below(self.1 as u64) as usize
    }
}

/// The kinds of act a seed may run, each drawn by its own arm of [`act`]. The order is the
/// seeds': a seed's swarm draws a weight for each kind in this order and picks its acts by the
/// weights in this order. So a kind added (the swarm draws one more weight) or moved changes
/// the acts of every seed: the catching seeds `scripts/test/mutants` prints move with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Wait,
    Call,
    Round,
    Crash,
    Release,
    Link,
    Registry,
    Notice,
    Retire,
    Stray,
    Clock,
    Copy,
    Foreign,
    Failover,
    RegistryFailover,
    Mode,
    Stall,
    Join,
    Stop,
    Start,
    ColdCopy,
}

impl Kind {
    /// Every kind, in the seed's order.
    const ALL: [Kind; 21] = [
        Kind::Wait,
        Kind::Call,
        Kind::Round,
        Kind::Crash,
        Kind::Release,
        Kind::Link,
        Kind::Registry,
        Kind::Notice,
        Kind::Retire,
        Kind::Stray,
        Kind::Clock,
        Kind::Copy,
        Kind::Foreign,
        Kind::Failover,
        Kind::RegistryFailover,
        Kind::Mode,
        Kind::Stall,
        Kind::Join,
        Kind::Stop,
        Kind::Start,
        Kind::ColdCopy,
    ];

    /// Calls, rounds and waits are in every seed's swarm.
    fn always(self) -> bool {
        matches!(self, Kind::Wait | Kind::Call | Kind::Round)
    }
}

/// How often a seed draws each kind of act, against the others.
#[derive(Clone, Copy, Debug, Default)]
struct Weights([u64; Kind::ALL.len()]);

impl Weights {
    /// These kinds with these weights, and no other kind.
    fn only(weights: &[(Kind, u64)]) -> Weights {
        let mut only = Weights::default();
        for &(kind, weight) in weights {
            only[kind] = weight;
        }
        only
    }

    /// A kind, drawn by weight.
    fn draw(&self, rng: &mut Rng) -> Kind {
        let mut pick = rng.below(self.0.iter().sum());
        Kind::ALL
            .into_iter()
            .find(|&kind| {
                let here = pick < self[kind];
                pick = pick.saturating_sub(self[kind]);
                here
            })
            .expect("a pick below the total weight")
    }
}

impl std::ops::Index<Kind> for Weights {
    type Output = u64;

    fn index(&self, kind: Kind) -> &u64 {
        &self.0[kind as usize]
    }
}

impl std::ops::IndexMut<Kind> for Weights {
    fn index_mut(&mut self, kind: Kind) -> &mut u64 {
        &mut self.0[kind as usize]
    }
}

/// The lease that ships (`pg_snowflake.registry_lease_ms`'s default), which one seed in four
/// runs under: exchange deadlines and idle limits reach their caps only past 15 s.
const SHIPPED_LEASE: i64 = 30_000;

/// One seed's run: the members' settings, the mode, the lease and the acts.
pub(super) struct Scenario {
    pub configured: Vec<Option<u32>>,
    pub fenced: bool,
    pub lease: i64,
    pub acts: Vec<Act>,
}

pub(super) fn scenario(seed: u64) -> Scenario {
    let mut rng = Rng(seed, SERVERS);
    let mut configured: Vec<Option<u32>> = (0..SERVERS)
        .map(|_| (rng.chance(3)).then(|| rng.below(2) as u32))
        .collect();
    let mut fenced = rng.chance(2);
    let mut lease = if rng.chance(4) { SHIPPED_LEASE } else { LEASE };
    // The swarm: calls, rounds and waits always; every other kind on in two seeds of three,
    // with a weight of its own.
    let mut weights = Weights::default();
    for kind in Kind::ALL {
        weights[kind] = if kind.always() || !rng.chance(3) {
            1 + rng.below(8)
        } else {
            0
        };
    }
    // How often a commit loses its answer, and how often it fails (each in 200): now and then,
    // or often.
    let mut failing = [(20, 20), (60, 60)][rng.below(2) as usize];
    // One seed in four: an origin and its copy (of it running, or of it stopped cleanly), in
    // fenced mode, with node ids assigned, the renewer restarting, commits failing and sessions
    // ending often: the claim's identity (one token, the next generation) is then met from both
    // sides.
    if rng.chance(4) {
        rng.1 = 2;
        fenced = true;
        configured.iter_mut().for_each(|c| *c = None);
        weights = Weights::only(&[
            (Kind::Wait, 3),
            (Kind::Call, 4),
            (Kind::Round, 8),
            (Kind::Crash, 1),
            (Kind::Release, 4),
            (Kind::Link, 1),
            (Kind::Registry, 2),
            (Kind::Notice, 2),
            (Kind::Copy, 3),
            (Kind::Failover, 2),
            (Kind::RegistryFailover, 1),
            (Kind::Stop, 2),
            (Kind::Start, 3),
            (Kind::ColdCopy, 2),
        ]);
        failing = (60, 60);
    } else if rng.chance(8) {
        // One seed in eight of the rest: joiners and clean stops among calls and rounds, where
        // the mark a joiner's IDs raised meets a holder's release.
        weights = Weights::only(&[
            (Kind::Wait, 4),
            (Kind::Call, 6),
            (Kind::Round, 8),
            (Kind::Release, 4),
            (Kind::Notice, 1),
            (Kind::Clock, 1),
            (Kind::Join, 3),
        ]);
    } else if rng.chance(16) {
        // One seed in sixteen of the rest: a link that drops the registry's answers again and
        // again (the registry commits, the reply never comes), under the lease that ships: a
        // claim asked again after a lost answer, the row as it left it, is granted from where it
        // was granted, so answers lost in a row never move the IDs ahead.
        weights = Weights::only(&[(Kind::Wait, 1), (Kind::Call, 3), (Kind::Round, 8)]);
        failing = (180, 0);
        lease = SHIPPED_LEASE;
    }
    let len = 1 + rng.below(200);
    let mut acts = Vec::with_capacity(len as usize);
    for _ in 0..len {
        let kind = weights.draw(&mut rng);
        acts.push(act(&mut rng, kind, failing, lease));
    }
    Scenario {
        configured,
        fenced,
        lease,
        acts,
    }
}

/// An act of `kind`, its server drawn first (whether it has one or not).
fn act(rng: &mut Rng, kind: Kind, failing: (u64, u64), lease: i64) -> Act {
    let s = rng.server();
    match kind {
        Kind::Wait => Act::Wait {
            ms: match rng.below(6) {
                // The same millisecond.
                0 => 0,
                // Right at a lease's end, either side.
                1 => lease - 1 + rng.below(3) as i64,
                2 => lease / 3,
                // A quiet spell: the next call is a wake.
                3 => 61_000 + rng.below(30_000) as i64,
                _ => rng.below(2_500) as i64,
            },
        },
        Kind::Call => {
            // Sometimes every member at once: the same millisecond on each.
            if rng.chance(4) {
                Act::Call { s, want: 1 }
            } else {
                Act::Call {
                    s,
                    want: 1 + rng.below(99),
                }
            }
        }
        Kind::Round => Act::Round {
            s,
            commit: commit(rng, failing),
        },
        Kind::Crash => Act::Crash { s },
        Kind::Release => Act::Release {
            s,
            restart: rng.chance(2),
        },
        Kind::Link => Act::Link {
            s,
            up: rng.chance(2),
        },
        Kind::Registry => Act::Registry { up: !rng.chance(3) },
        Kind::Notice => Act::Notice,
        Kind::Retire => Act::Retire {
            node: rng.below(u64::from(MAX_NODE) + 1) as u32,
        },
        Kind::Stray => Act::Stray {
            node: rng.below(u64::from(MAX_NODE) + 3) as u32,
        },
        Kind::Clock => Act::Clock {
            s,
            offset: match rng.below(6) {
                0 => 0,
                1 => MARGIN / 2,
                2 => -MARGIN / 2,
                3 => 3 * MARGIN,
                4 => -3 * MARGIN,
                _ => rng.below(2 * MARGIN as u64) as i64 - MARGIN,
            },
        },
        Kind::Copy => Act::Copy {
            s,
            from: rng.server(),
            same_label: rng.chance(2),
        },
        Kind::Foreign => Act::Foreign { s },
        Kind::Failover => Act::Failover {
            s,
            from: rng.server(),
            fresh: rng.chance(2),
        },
        Kind::RegistryFailover => Act::RegistryFailover {
            skew: match rng.below(4) {
                0 => 0,
                1 => MARGIN / 2,
                2 => -MARGIN / 2,
                _ => 3 * MARGIN,
            },
        },
        Kind::Mode => Act::Mode {
            s,
            fenced: rng.chance(2),
        },
        Kind::Stall => Act::Stall {
            s,
            slow: !rng.chance(3),
        },
        Kind::Join => Act::Join {
            s,
            node: rng.below(u64::from(MAX_NODE) + 1) as u32,
            // Within the margin, past a lease and the margin, or far ahead.
            lead: [MARGIN / 2, lease + 2 * MARGIN, 40_000][rng.below(3) as usize],
            span: 1 + rng.below(20) as i64,
        },
        Kind::Stop => Act::Stop { s },
        Kind::Start => Act::Start { s },
        Kind::ColdCopy => Act::ColdCopy {
            s,
            from: rng.server(),
            same_label: rng.chance(2),
        },
    }
}

/// A commit that loses its answer `lost` times in 200, and fails `failed` times in 200.
fn commit(rng: &mut Rng, (lost, failed): (u64, u64)) -> Commit {
    match rng.below(200) {
        n if n < lost => Commit::AnswerLost,
        n if n < lost + failed => Commit::Failed,
        _ => Commit::Done,
    }
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
        })
        .unwrap_or(default)
}

/// The first seed of `seeds` that fails, with why and its acts; `None`: none did.
pub(super) fn first_failure(seeds: impl Iterator<Item = u64>) -> Option<(u64, String)> {
    for seed in seeds {
        let Scenario {
            configured,
            fenced,
            lease,
            acts,
        } = scenario(seed);
        let shown = format!(
            "{configured:?}, fenced {fenced}, lease {lease} ms, {} acts",
            acts.len()
        );
        // A panic (an overflow, a broken assertion of the core) fails its seed too.
        let run =
            std::panic::catch_unwind(move || run_fleet_leased(&configured, fenced, lease, acts));
        match run {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return Some((seed, format!("{why} ({shown})"))),
            Err(_) => return Some((seed, format!("a panic, above ({shown})"))),
        }
    }
    None
}

/// `acts` less every act the run still fails without (one at a time, until none can go); a
/// panic (an assertion of the core) is a failure too.
fn shrink(configured: &[Option<u32>], fenced: bool, lease: i64, mut acts: Vec<Act>) -> Vec<Act> {
    let fails = |acts: Vec<Act>| {
        let run =
            std::panic::AssertUnwindSafe(|| run_fleet_leased(configured, fenced, lease, acts));
        !matches!(std::panic::catch_unwind(run), Ok(Ok(())))
    };
    let mut i = 0;
    while i < acts.len() {
        let mut fewer = acts.clone();
        fewer.remove(i);
        if fails(fewer.clone()) {
            acts = fewer;
            i = 0;
        } else {
            i += 1;
        }
    }
    acts
}

#[test]
fn seeded_fault_simulation() {
    let first = setting("PGSF_SIM_FIRST", 0);
    let count = setting("PGSF_SIM_SEEDS", 100_000);
    let failures: Vec<(u64, String)> = std::thread::scope(|scope| {
        let halves: Vec<_> = (0..2)
            .map(|half| {
                scope.spawn(move || {
                    first_failure((first..first + count).filter(move |seed| seed % 2 == half))
                })
            })
            .collect();
        halves
            .into_iter()
            .filter_map(|h| h.join().expect("a simulation thread"))
            .collect()
    });
    if let Some((seed, why)) = failures.into_iter().min_by_key(|(seed, _)| *seed) {
        if count == 1 {
            let Scenario {
                configured,
                fenced,
                lease,
                acts,
            } = scenario(seed);
            eprintln!(
                "its acts, shortened to those it fails without: {:#?}",
                shrink(&configured, fenced, lease, acts)
            );
        }
        panic!(
            "seed {seed} fails: {why}; replay it with \
             PGSF_SIM_FIRST={seed} PGSF_SIM_SEEDS=1 (its acts are printed)"
        );
    }
}

/// The weights are kept in the kinds' order ([`Weights`] is indexed by `kind as usize`): every
/// kind is listed once, in the order it is declared.
#[test]
fn every_kind_of_act_is_drawn_in_the_order_it_is_declared() {
    for (place, kind) in Kind::ALL.into_iter().enumerate() {
        assert_eq!(kind as usize, place, "{kind:?}");
    }
}
