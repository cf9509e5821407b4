//! The registry's SQL: its table, a claim (one transaction under a table lock), a heartbeat
//! (one UPDATE), the listing and retiring of ids. Plain SQL any PostgreSQL runs: the registry
//! database needs no extension. What a claim decides is the core's (`snowflake_core::registry`).
//!
//! A holder keeps its registry session open and, in it, a session advisory lock on its node id
//! (`pg_try_advisory_lock(KEY, node_id)`): the registry's own sign that the holder is connected,
//! released by the registry's server the moment the session ends (a crash, a kill -9, a
//! network reset), with nothing to clean up. No claim ends another session, whatever its label:
//! a clone carries its origin's (audit 3, H1); keepalives end a vanished holder's.

use super::libpq::{Conn, Failure, Record, Rows};
use snowflake_core::node::{Released, Taken};
use snowflake_core::registry::{
    self, Beat, Claimant, Decision, Identity, Judged, Lease, Refusal, Row, Token, Unretirable,
    Wanted,
};

/// The first key of the advisory locks (`'snow'` in ASCII); the second is the node id.
const KEY: &str = "1936617335";
/// How long one exchange with the registry may take (ms), at most: a holder's exchanges take
/// at most a third of its lease (`holder.rs`).
pub const TIMEOUT_MS: i64 = 5_000;
/// How many free ids a claim of any id tries, lowest first, before it says none is free.
const FRESH_CANDIDATES: i64 = 64;

/// The table, made by `snowflake_registry_create()`.
pub const CREATE: &str = "
CREATE TABLE IF NOT EXISTS snowflake_nodes (
    node_id integer PRIMARY KEY CHECK (node_id >= 0),
    state text NOT NULL CHECK (state IN ('live', 'retired')),
    owner_token text NOT NULL,
    generation bigint NOT NULL,
    holder_label text NOT NULL,
    system_identifier text,
    layout text NOT NULL,
    claimed_at timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    lease_until timestamptz NOT NULL,
    high_water_ms bigint,
    clock_offset_ms bigint,
    retired_at timestamptz
);
COMMENT ON TABLE snowflake_nodes IS
'pg_snowflake node-id registry: one row per node id ever claimed. Read it with snowflake_registry() on a server that uses it.'";

/// Unix ms of a timestamptz expression, in SQL.
macro_rules! ms {
    ($e:literal) => {
        concat!("(extract(epoch from ", $e, ") * 1000)::bigint")
    };
}

/// What this server tells the registry about itself.
pub struct Me {
    pub label: String,
    pub system: u64,
    pub layout: String,
    pub max_node: u32,
    pub lease_ms: i64,
    /// The high-water mark to record with the claim (Unix ms), for a claim that owes nothing.
    pub high_water: i64,
    /// How far past a takeover's floor the mark reaches: the lease (fenced mode), or 0.
    pub ahead_of_floor_ms: i64,
    pub clock_offset_ms: i64,
    pub margin_ms: i64,
    /// The node id of this server's state file, with whose claim a token may be kept.
    pub recorded_node: Option<u32>,
    /// A token for a claim that needs a new one.
    pub new_token: u128,
    /// The node ids this server made IDs under before (`registry::used_before`), up to
    /// `used_until` (Unix ms): recorded before the claim.
    pub used_before: Vec<u32>,
    pub used_until: i64,
}

/// A claim the registry decided to grant (committed once [`claim`] returns it).
pub struct Decided {
    pub node: u32,
    pub identity: Identity,
    pub floor: i64,
    /// The high-water mark recorded (Unix ms): the lease's ceiling in fenced mode.
    pub mark: i64,
    pub how: &'static str,
}

impl Decided {
    /// The claim as the server's identity takes it, with the lease a claim sent at monotonic
    /// `sent_mono` gets.
    pub fn taken(&self, sent_mono: i64, lease_ms: i64) -> Taken {
        Taken {
            node: self.node,
            identity: self.identity,
            floor: self.floor,
            lease: Lease::granted(sent_mono, self.mark, lease_ms),
        }
    }
}

/// How a claim ended.
pub enum Claimed {
    Taken(Decided),
    Refused {
        node: u32,
        why: Refusal,
        holder: String,
        last_seen: i64,
    },
    NoFreeId,
}

fn text(value: impl ToString) -> Option<String> {
    Some(value.to_string())
}

fn unexpected_result() -> Failure {
    Failure {
        message: "the registry answered with an unexpected result".into(),
        sqlstate: None,
    }
}

/// The first row of `rows`: the one a query of one row answers.
fn first(rows: &Rows) -> Result<Record<'_>, Failure> {
    rows.row(0).ok_or_else(unexpected_result)
}

/// The text of `record`'s column `column`, which must not be NULL.
fn field<'a>(record: Record<'a>, column: &str) -> Result<&'a str, Failure> {
    record.get(column).ok_or_else(unexpected_result)
}

fn number<T: std::str::FromStr>(record: Record<'_>, column: &str) -> Result<T, Failure> {
    field(record, column)?.parse().map_err(|_| Failure {
        message: "the registry answered with an unexpected value".into(),
        sqlstate: None,
    })
}

/// Asks the registry's server to probe this session's connection (`registry::keepalives`), so
/// that it ends it, and releases the id's advisory lock, within about a lease of this server
/// vanishing. Ignored on a Unix-domain socket, which has no such failure.
pub fn keep_alive(conn: &Conn, lease_ms: i64) -> Result<(), Failure> {
    let k = registry::keepalives(lease_ms);
    conn.query(
        &format!(
            "SET tcp_keepalives_idle = {}; SET tcp_keepalives_interval = {}; \
             SET tcp_keepalives_count = {}; SET tcp_user_timeout = {}",
            k.idle_s, k.interval_s, k.probes, k.user_timeout_ms
        ),
        &[],
    )?;
    Ok(())
}

/// The registry's clock (Unix ms).
pub fn clock(conn: &Conn) -> Result<i64, Failure> {
    let rows = conn.query(
        concat!("SELECT ", ms!("clock_timestamp()"), " AS now_ms"),
        &[],
    )?;
    number(first(&rows)?, "now_ms")
}

/// Claims a node id for `claimant`, in one transaction under the table's lock. A claim the
/// registry grants is handed to `intent` before the COMMIT (the server records it durably
/// there); if `intent` fails, the transaction is rolled back.
pub fn claim(
    conn: &Conn,
    claimant: &Claimant,
    me: &Me,
    intent: impl FnOnce(&Decided) -> Result<(), Failure>,
) -> Result<Claimed, Failure> {
    conn.query("BEGIN", &[])?;
    let claimed = claim_in_transaction(conn, claimant, me).and_then(|claimed| {
        if let Claimed::Taken(decided) = &claimed {
            intent(decided)?;
        }
        Ok(claimed)
    });
    match claimed {
        // A failed COMMIT leaves the claim undecided: the caller tries again with the intent
        // it recorded, which the registry accepts whether or not it committed.
        Ok(claimed) => conn.query("COMMIT", &[]).map(|_| claimed),
        Err(failure) => {
            // The failure is what the caller is told: a ROLLBACK on a connection that timed out
            // fails too, with nothing to say about the cause.
            let _ = conn.query("ROLLBACK", &[]);
            Err(failure)
        }
    }
}

fn claim_in_transaction(conn: &Conn, claimant: &Claimant, me: &Me) -> Result<Claimed, Failure> {
    conn.query(
        "LOCK TABLE snowflake_nodes IN SHARE ROW EXCLUSIVE MODE",
        &[],
    )?;
    let at = Judged {
        now: clock(conn)?,
        margin_ms: me.margin_ms,
        lease_ms: me.lease_ms,
    };
    // One layout per fleet: the first claim sets it, every later one must share it.
    let others = conn.query(
        "SELECT node_id, layout FROM snowflake_nodes WHERE layout <> $1 \
         ORDER BY claimed_at, node_id LIMIT 1",
        &[text(&me.layout)],
    )?;
    if let Some(other) = others.row(0) {
        return Ok(Claimed::Refused {
            node: number(other, "node_id")?,
            why: Refusal::OtherLayout,
            holder: field(other, "layout")?.to_string(),
            last_seen: i64::MIN,
        });
    }
    if claimant.history_lost {
        if let Err(why) = registry::vouched(claimant, cluster_known(conn, me.system)?) {
            return Ok(Claimed::Refused {
                // No id was judged: the refusal names none.
                node: 0,
                why,
                holder: String::new(),
                last_seen: i64::MIN,
            });
        }
    }
    record_used_before(conn, me)?;
    let mut fresh = false;
    if let Wanted::Configured(node) | Wanted::Pinned(node) = claimant.wanted {
        let found = read_row(conn, node)?;
        let row = found.as_ref().map(|f| Row {
            same_label: f.label == me.label,
            ..f.row
        });
        match registry::decide(claimant, node, row.as_ref(), &at) {
            Decision::Take {
                generation,
                floor,
                recycled,
                ..
            } => {
                let keep = claimant.identity.filter(|_| me.recorded_node == Some(node));
                let how = match (row, recycled) {
                    (None, _) => "new",
                    (_, true) => "recycled",
                    (Some(r), _) if keep.is_some_and(|k| k.token == r.holder.token) => "restart",
                    _ => "takeover",
                };
                let token = keep.map_or(me.new_token, |k| k.token);
                return take(conn, me, node, token, generation, floor, how);
            }
            Decision::Refuse { node, refusal } => {
                unlock(conn, node)?;
                let (holder, last_seen) = found.map(|f| (f.label, f.last_seen)).unwrap_or_default();
                return Ok(Claimed::Refused {
                    node,
                    why: refusal,
                    holder,
                    last_seen,
                });
            }
            Decision::Fresh { .. } => {
                unlock(conn, node)?;
                fresh = true;
            }
        }
    }
    // The lowest id that has no row, or a retired one past its mark and the margin, whose
    // advisory lock no session holds: a retired id's old holder may still be connected (it
    // lost its claim and has not noticed yet), so the next candidate is tried.
    let rows = conn.query(
        concat!(
            "SELECT DISTINCT c.n FROM (SELECT 0 AS n UNION ALL SELECT node_id + 1 FROM \
             snowflake_nodes UNION ALL SELECT node_id FROM snowflake_nodes WHERE state = 'retired') c \
             WHERE c.n <= $1 AND NOT EXISTS (SELECT 1 FROM snowflake_nodes r WHERE r.node_id = c.n \
             AND NOT (r.state = 'retired' AND coalesce(r.high_water_ms, -9223372036854775808) < ",
            ms!("clock_timestamp()"),
            " - $2)) ORDER BY c.n LIMIT $3"
        ),
        &[
            text(me.max_node),
            text(me.margin_ms),
            text(FRESH_CANDIDATES),
        ],
    )?;
    let how = if fresh { "fresh id" } else { "assigned" };
    for candidate in rows.iter() {
        let node = number::<u32>(candidate, "n")?;
        match read_row(conn, node)?.map(|f| f.row) {
            Some(row) if row.connected || !registry::is_free(Some(&row), &at) => {
                unlock(conn, node)?;
            }
            Some(row) => {
                return take(
                    conn,
                    me,
                    node,
                    me.new_token,
                    row.holder.generation + 1,
                    row.high_water,
                    "recycled",
                )
            }
            None => return take(conn, me, node, me.new_token, 1, i64::MIN, how),
        }
    }
    Ok(Claimed::NoFreeId)
}

/// Records the node ids `me` made IDs under before (a server that made IDs without the
/// registry, or under another id), each as a retired row whose mark is `me.used_until`: handed
/// out again only once the registry's clock is past it, and above it. A retired row's mark is
/// raised to it; a live row (another holder's, or this server's own earlier claim) is left as
/// it is.
fn record_used_before(conn: &Conn, me: &Me) -> Result<(), Failure> {
    if me.used_until == i64::MIN {
        return Ok(());
    }
    for &node in me.used_before.iter().filter(|&&node| node <= me.max_node) {
        conn.query(
            "INSERT INTO snowflake_nodes AS r (node_id, state, owner_token, generation, \
             holder_label, system_identifier, layout, claimed_at, last_seen, lease_until, \
             high_water_ms, retired_at) VALUES ($1, 'retired', $2, 0, $3, $4, $5, \
             clock_timestamp(), clock_timestamp(), clock_timestamp(), $6, clock_timestamp()) \
             ON CONFLICT (node_id) DO UPDATE SET \
             high_water_ms = greatest(r.high_water_ms, EXCLUDED.high_water_ms) \
             WHERE r.state = 'retired'",
            &[
                text(node),
                text(Token(0)),
                text(&me.label),
                text(me.system),
                text(&me.layout),
                text(me.used_until),
            ],
        )?;
    }
    Ok(())
}

/// Whether the registry has a row of the cluster `system` (its system identifier): it claimed
/// here before, or recorded the node ids it used before joining (`registry::vouched`).
fn cluster_known(conn: &Conn, system: u64) -> Result<bool, Failure> {
    let rows = conn.query(
        "SELECT EXISTS (SELECT 1 FROM snowflake_nodes WHERE system_identifier = $1) AS known",
        &[text(system)],
    )?;
    Ok(field(first(&rows)?, "known")? == "t")
}

/// Tries `node`'s advisory lock in this session: whether it got it (or has it already).
fn try_lock(conn: &Conn, node: u32) -> Result<bool, Failure> {
    let rows = conn.query(
        &format!("SELECT pg_try_advisory_lock({KEY}, $1) AS locked"),
        &[text(node)],
    )?;
    Ok(field(first(&rows)?, "locked")? == "t")
}

/// A node id's row as a claim or a retirement reads it.
struct Found {
    /// The row as the core judges it.
    row: Row,
    /// Its holder's label.
    label: String,
    /// Its holder's last heartbeat (Unix ms, the registry's clock).
    last_seen: i64,
}

/// Reads `node`'s row (locked by the table lock), if it has one, and tries its advisory lock
/// (`same_label` is left to the claim, which knows this server's label).
fn read_row(conn: &Conn, node: u32) -> Result<Option<Found>, Failure> {
    let connected = !try_lock(conn, node)?;
    let rows = conn.query(
        concat!(
            "SELECT owner_token, generation, state = 'retired' AS retired, \
             coalesce(high_water_ms, -9223372036854775808) AS high_water_ms, ",
            ms!("lease_until"),
            " AS lease_until_ms, holder_label, ",
            ms!("last_seen"),
            " AS last_seen_ms FROM snowflake_nodes WHERE node_id = $1"
        ),
        &[text(node)],
    )?;
    let Some(found) = rows.row(0) else {
        return Ok(None);
    };
    // A token that is not one (the table edited by hand) reads as 0, no server's: a stranger's.
    let token = field(found, "owner_token")?
        .parse::<Token>()
        .map_or(0, |t| t.0);
    let row = Row {
        node,
        holder: Identity {
            token,
            generation: number(found, "generation")?,
        },
        retired: field(found, "retired")? == "t",
        high_water: number(found, "high_water_ms")?,
        lease_until: number(found, "lease_until_ms")?,
        connected,
        same_label: false,
    };
    Ok(Some(Found {
        row,
        label: field(found, "holder_label")?.to_string(),
        last_seen: number(found, "last_seen_ms")?,
    }))
}

fn unlock(conn: &Conn, node: u32) -> Result<(), Failure> {
    // Only a lock this session took in read_row is released: a holder's own is never tried
    // twice in one transaction.
    conn.query(
        &format!(
            "SELECT pg_advisory_unlock({KEY}, $1) FROM pg_locks WHERE locktype = 'advisory' \
             AND pid = pg_backend_pid() AND classid = {KEY}::oid AND objid = $1::oid \
             AND objsubid = 2 AND granted"
        ),
        &[text(node)],
    )?;
    Ok(())
}

fn take(
    conn: &Conn,
    me: &Me,
    node: u32,
    token: u128,
    generation: i64,
    floor: i64,
    how: &'static str,
) -> Result<Claimed, Failure> {
    let mark = me
        .high_water
        .max(floor.saturating_add(me.ahead_of_floor_ms));
    conn.query(
        "INSERT INTO snowflake_nodes AS r (node_id, state, owner_token, generation, \
             holder_label, system_identifier, layout, claimed_at, last_seen, lease_until, \
             high_water_ms, clock_offset_ms) VALUES ($1, 'live', $2, $3, $4, $5, $6, \
             clock_timestamp(), clock_timestamp(), clock_timestamp() + $7 * interval '1 ms', \
             $8, $9) ON CONFLICT (node_id) DO UPDATE SET state = 'live', \
             owner_token = EXCLUDED.owner_token, generation = EXCLUDED.generation, \
             holder_label = EXCLUDED.holder_label, system_identifier = EXCLUDED.system_identifier, \
             layout = EXCLUDED.layout, claimed_at = EXCLUDED.claimed_at, \
             last_seen = EXCLUDED.last_seen, lease_until = EXCLUDED.lease_until, \
             high_water_ms = greatest(r.high_water_ms, EXCLUDED.high_water_ms), \
             clock_offset_ms = EXCLUDED.clock_offset_ms, retired_at = NULL",
        &[
            text(node),
            text(Token(token)),
            text(generation),
            text(&me.label),
            text(me.system),
            text(&me.layout),
            text(me.lease_ms),
            // Nothing reserved yet: no mark (NULL), not the smallest bigint.
            (mark > i64::MIN).then(|| mark.to_string()),
            text(me.clock_offset_ms),
        ],
    )?;
    Ok(Claimed::Taken(Decided {
        node,
        identity: Identity { token, generation },
        floor,
        mark,
        how,
    }))
}

/// What one heartbeat found.
pub enum Heartbeat {
    /// The lease is renewed; `locked`: the session holds the id's advisory lock.
    Renewed { locked: bool },
    /// The row no longer names this holder: another server took the id over (its label), or
    /// (`None`) the id was retired.
    Lost { holder: Option<String> },
}

/// One heartbeat of the holder of `node` under `identity`: renews the lease for `lease_ms` and
/// raises the high-water mark to `high_water`, if the row still names this holder. With
/// `take_lock` (a new session, or the lock not had yet), the id's advisory lock is tried first;
/// whether the session got it or not, the row decides (`registry::beat`).
pub fn heartbeat(
    conn: &Conn,
    take_lock: bool,
    node: u32,
    identity: Identity,
    lease_ms: i64,
    high_water: i64,
    clock_offset_ms: i64,
) -> Result<Heartbeat, Failure> {
    let locked = !take_lock || try_lock(conn, node)?;
    let rows = conn.query(
        "UPDATE snowflake_nodes SET last_seen = clock_timestamp(), \
         lease_until = clock_timestamp() + $5 * interval '1 ms', \
         high_water_ms = greatest(high_water_ms, $6), clock_offset_ms = $7 \
         WHERE node_id = $1 AND owner_token = $2 AND generation = $3 AND state = $4 \
         RETURNING 1",
        &[
            text(node),
            text(Token(identity.token)),
            text(identity.generation),
            text("live"),
            text(lease_ms),
            (high_water > i64::MIN).then(|| high_water.to_string()),
            text(clock_offset_ms),
        ],
    )?;
    match registry::beat(!rows.is_empty(), locked) {
        Beat::Renewed { locked } => Ok(Heartbeat::Renewed { locked }),
        Beat::Lost => {
            let rows = conn.query(
                "SELECT holder_label FROM snowflake_nodes WHERE node_id = $1 AND state = 'live'",
                &[text(node)],
            )?;
            let holder = rows
                .row(0)
                .and_then(|r| r.get("holder_label"))
                .map(str::to_string);
            Ok(Heartbeat::Lost { holder })
        }
    }
}

/// Brings `released`'s mark down to its durable reservation, if the row still names its claim
/// (a takeover since keeps its own): `Node::release` says why that is safe. Returns whether
/// it did.
pub fn release(conn: &Conn, released: &Released) -> Result<bool, Failure> {
    let rows = conn.query(
        "UPDATE snowflake_nodes SET high_water_ms = least(high_water_ms, $4) \
         WHERE node_id = $1 AND owner_token = $2 AND generation = $3 AND state = 'live' \
         RETURNING 1",
        &[
            text(released.node),
            text(Token(released.claim.token)),
            text(released.claim.generation),
            text(released.mark),
        ],
    )?;
    Ok(!rows.is_empty())
}

/// A row of the registry as [`list`] reads it (times as Unix ms; `None`: NULL, or a value that
/// is not a number).
pub struct Listed {
    pub node_id: Option<i64>,
    /// live (lease running), lost (lease run out, not retired), retired (not yet handed out
    /// again) or free.
    pub state: Option<String>,
    pub holder_label: Option<String>,
    pub system_identifier: Option<String>,
    pub generation: Option<i64>,
    pub owner_token: Option<String>,
    pub claimed_at: Option<i64>,
    pub last_seen: Option<i64>,
    pub lease_until: Option<i64>,
    pub high_water: Option<i64>,
    pub clock_offset_ms: Option<i64>,
    pub retired_at: Option<i64>,
}

/// Every row, with its state as the registry's clock and `margin_ms` make it.
pub fn list(conn: &Conn, margin_ms: i64) -> Result<Vec<Listed>, Failure> {
    let rows = conn.query(
        concat!(
            "SELECT node_id, CASE WHEN state = 'retired' THEN CASE WHEN \
             coalesce(high_water_ms, -9223372036854775808) < ",
            ms!("clock_timestamp()"),
            " - $1 THEN 'free' ELSE 'retired' END WHEN lease_until > clock_timestamp() \
             THEN 'live' ELSE 'lost' END AS state, holder_label, system_identifier, generation, \
             owner_token, ",
            ms!("claimed_at"),
            " AS claimed_at_ms, ",
            ms!("last_seen"),
            " AS last_seen_ms, ",
            ms!("lease_until"),
            " AS lease_until_ms, high_water_ms, clock_offset_ms, ",
            ms!("retired_at"),
            " AS retired_at_ms FROM snowflake_nodes ORDER BY node_id"
        ),
        &[text(margin_ms)],
    )?;
    let number = |r: Record<'_>, column| r.get(column).and_then(|v| v.parse::<i64>().ok());
    let text = |r: Record<'_>, column| r.get(column).map(str::to_string);
    Ok(rows
        .iter()
        .map(|r| Listed {
            node_id: number(r, "node_id"),
            state: text(r, "state"),
            holder_label: text(r, "holder_label"),
            system_identifier: text(r, "system_identifier"),
            generation: number(r, "generation"),
            owner_token: text(r, "owner_token"),
            claimed_at: number(r, "claimed_at_ms"),
            last_seen: number(r, "last_seen_ms"),
            lease_until: number(r, "lease_until_ms"),
            high_water: number(r, "high_water_ms"),
            clock_offset_ms: number(r, "clock_offset_ms"),
            retired_at: number(r, "retired_at_ms"),
        })
        .collect())
}

/// How an attempt to retire an id ended.
pub enum Retirement {
    /// Retired: it keeps this high-water mark (Unix ms), or none.
    Retired { high_water: Option<i64> },
    /// Not retired: no live row (never claimed, or retired already).
    NoLiveRow,
    /// Not retired: its holder (this label) is connected to the registry.
    Connected { holder: String },
    /// Not retired: its holder's (this label) lease runs until then (Unix ms), it may still
    /// make IDs.
    LeaseRuns { holder: String, until: i64 },
}

/// Retires `node` once its holder is gone (`registry::may_retire`).
pub fn retire(conn: &Conn, node: u32) -> Result<Retirement, Failure> {
    conn.query("BEGIN", &[])?;
    let retired = retire_in_transaction(conn, node);
    conn.query(
        if matches!(retired, Ok(Retirement::Retired { .. })) {
            "COMMIT"
        } else {
            "ROLLBACK"
        },
        &[],
    )?;
    retired
}

fn retire_in_transaction(conn: &Conn, node: u32) -> Result<Retirement, Failure> {
    conn.query(
        "LOCK TABLE snowflake_nodes IN SHARE ROW EXCLUSIVE MODE",
        &[],
    )?;
    let now = clock(conn)?;
    let found = read_row(conn, node)?;
    unlock(conn, node)?;
    let row = found.as_ref().map(|f| f.row);
    let holder = found.map(|f| f.label).unwrap_or_default();
    match registry::may_retire(row.as_ref(), now) {
        Err(Unretirable::NoLiveRow) => Ok(Retirement::NoLiveRow),
        Err(Unretirable::Connected) => Ok(Retirement::Connected { holder }),
        Err(Unretirable::LeaseRuns { until }) => Ok(Retirement::LeaseRuns { holder, until }),
        Ok(()) => {
            conn.query(
                "UPDATE snowflake_nodes SET state = 'retired', retired_at = clock_timestamp() \
                 WHERE node_id = $1",
                &[text(node)],
            )?;
            let high_water = row.map_or(i64::MIN, |row| row.high_water);
            Ok(Retirement::Retired {
                high_water: (high_water > i64::MIN).then_some(high_water),
            })
        }
    }
}
