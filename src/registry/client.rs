//! The registry's SQL: its table, the statements of a claim, a heartbeat, a release and a
//! retirement ([`Sql`], the core's `registry::table::Table`: the procedures that run them, and
//! what they decide, are the core's), the listing of ids. Plain SQL any PostgreSQL runs: the
//! registry database needs no extension.
//!
//! A holder keeps its registry session open and, in it, a session advisory lock on its node id
//! (`pg_try_advisory_lock(KEY, node_id)`): the registry's own sign that the holder is connected,
//! released by the registry's server the moment the session ends (a crash, a kill -9, a
//! network reset), with nothing to clean up. No claim ends another session, whatever its label:
//! a clone carries its origin's; keepalives end a vanished holder's.

use super::libpq::{Conn, Failure, Record, Rows};
use snowflake_core::registry::lease::{Applications, APPLICATION_SYSTEM};
use snowflake_core::registry::table::{HeartbeatRequest, Request, RowRead, Table};
use snowflake_core::registry::{self, Identity, LayoutRows, Row, Token};

/// The first key of the advisory locks (`'snow'` in ASCII); the second is the node id.
const KEY: &str = "1936617335";
/// How long one exchange with the registry may take (ms), at most (a holder's take less:
/// `registry::exchange_deadline_ms`).
pub const TIMEOUT_MS: i64 = registry::EXCHANGE_TIMEOUT_MS;

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
    retired_at timestamptz,
    holder_boot text,
    released_at timestamptz,
    holder_place text
);
ALTER TABLE snowflake_nodes ADD COLUMN IF NOT EXISTS holder_boot text,
    ADD COLUMN IF NOT EXISTS released_at timestamptz,
    ADD COLUMN IF NOT EXISTS holder_place text;
COMMENT ON TABLE snowflake_nodes IS
'pg_snowflake node-id registry: one row per node id ever claimed. Read it with snowflake_registry() on a server that uses it.';
CREATE TABLE IF NOT EXISTS snowflake_registry_terms (
    started timestamptz NOT NULL,
    timeline bigint NOT NULL,
    since timestamptz NOT NULL,
    PRIMARY KEY (started, timeline)
);
COMMENT ON TABLE snowflake_registry_terms IS
'pg_snowflake node-id registry: since when the registry''s server took writes, one row per start or promotion, recorded by the first claim of each.'";

/// What a registry made before this release lacks (the columns `holder_boot` and
/// `released_at` before 0.6.0, `holder_place` and the table `snowflake_registry_terms` before
/// 0.7.0), added by the first holder to connect: a cheap look at the catalog first, so that the
/// `ALTER TABLE` (and its lock) is taken once. One the registry's role may not alter is left as
/// it is: the claim then fails, naming what does not exist, until
/// `snowflake_registry_create()` adds it.
pub const UPGRADE: &str = "
DO $upgrade$ BEGIN
    IF to_regclass('snowflake_nodes') IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('snowflake_nodes')
        AND attname = 'holder_place' AND NOT attisdropped
    ) THEN
        ALTER TABLE snowflake_nodes ADD COLUMN IF NOT EXISTS holder_boot text,
            ADD COLUMN IF NOT EXISTS released_at timestamptz,
            ADD COLUMN IF NOT EXISTS holder_place text;
    END IF;
    IF to_regclass('snowflake_nodes') IS NOT NULL
        AND to_regclass('snowflake_registry_terms') IS NULL THEN
        CREATE TABLE IF NOT EXISTS snowflake_registry_terms (
            started timestamptz NOT NULL,
            timeline bigint NOT NULL,
            since timestamptz NOT NULL,
            PRIMARY KEY (started, timeline)
        );
    END IF;
EXCEPTION WHEN insufficient_privilege THEN NULL;
END $upgrade$";

/// Unix ms of a timestamptz expression, in SQL.
macro_rules! ms {
    ($e:literal) => {
        concat!("(extract(epoch from ", $e, ") * 1000)::bigint")
    };
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
    // PostgreSQL 14 and later; a registry on an older server goes without.
    conn.query(
        "SELECT set_config('idle_session_timeout', $1, false) \
         WHERE current_setting('server_version_num')::int >= 140000",
        &[text(k.idle_session_ms)],
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

/// The registry's table in SQL, through one connection: the statements the core's procedures
/// (`snowflake_core::registry::table`: claim, heartbeat, release, retire) run, each deciding
/// nothing.
pub struct Sql<'a>(pub &'a Conn);

impl Table for Sql<'_> {
    type Failure = Failure;

    fn begin(&mut self, idle_limit_ms: i64) -> Result<(), Failure> {
        self.0.query("BEGIN", &[])?;
        let started = self
            .0
            .query(
                "SELECT set_config('idle_in_transaction_session_timeout', $1, true)",
                &[text(idle_limit_ms)],
            )
            .and_then(|_| {
                self.0.query(
                    "LOCK TABLE snowflake_nodes IN SHARE ROW EXCLUSIVE MODE",
                    &[],
                )
            });
        if let Err(failure) = started {
            self.rollback();
            return Err(failure);
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), Failure> {
        self.0.query("COMMIT", &[]).map(|_| ())
    }

    fn rollback(&mut self) {
        let _ = self.0.query("ROLLBACK", &[]);
    }

    fn clock(&mut self) -> Result<i64, Failure> {
        clock(self.0)
    }

    fn layouts(&mut self) -> Result<Vec<LayoutRows>, Failure> {
        layouts(self.0)
    }

    fn cluster_known(&mut self, system: u64) -> Result<bool, Failure> {
        let rows = self.0.query(
            "SELECT EXISTS (SELECT 1 FROM snowflake_nodes WHERE system_identifier = $1) AS known",
            &[text(system)],
        )?;
        Ok(field(first(&rows)?, "known")? == "t")
    }

    fn record_used(&mut self, node: u32, request: &Request) -> Result<(), Failure> {
        self.0.query(
            "INSERT INTO snowflake_nodes AS r (node_id, state, owner_token, generation, \
             holder_label, system_identifier, layout, claimed_at, last_seen, lease_until, \
             high_water_ms, retired_at) VALUES ($1, 'retired', $2, 0, $3, $4, $5, \
             clock_timestamp(), clock_timestamp(), clock_timestamp(), $6, clock_timestamp()) \
             ON CONFLICT (node_id) DO UPDATE SET high_water_ms = CASE WHEN r.state = 'live' \
             THEN greatest(r.high_water_ms + 1, EXCLUDED.high_water_ms) \
             ELSE greatest(r.high_water_ms, EXCLUDED.high_water_ms) END",
            &[
                text(node),
                text(Token(0)),
                text(&request.label),
                text(request.system),
                text(&request.layout),
                text(request.used_until),
            ],
        )?;
        Ok(())
    }

    fn try_lock(&mut self, node: u32) -> Result<bool, Failure> {
        let rows = self.0.query(
            &format!("SELECT pg_try_advisory_lock({KEY}, $1) AS locked"),
            &[text(node)],
        )?;
        Ok(field(first(&rows)?, "locked")? == "t")
    }

    fn unlock(&mut self, node: u32) -> Result<(), Failure> {
        // Only a lock this session took in read_row is released: a holder's own is never tried
        // twice in one transaction.
        self.0.query(
            &format!(
                "SELECT pg_advisory_unlock({KEY}, $1) FROM pg_locks WHERE locktype = 'advisory' \
                 AND pid = pg_backend_pid() AND classid = {KEY}::oid AND objid = $1::oid \
                 AND objsubid = 2 AND granted"
            ),
            &[text(node)],
        )?;
        Ok(())
    }

    fn read_row(&mut self, node: u32) -> Result<Option<RowRead>, Failure> {
        let rows = self.0.query(
            concat!(
                "SELECT owner_token, generation, state = 'retired' AS retired, \
                 coalesce(high_water_ms, -9223372036854775808) AS high_water_ms, ",
                ms!("lease_until"),
                " AS lease_until_ms, holder_label, layout, holder_boot, holder_place, \
                 released_at IS NOT NULL AS released, ",
                ms!("last_seen"),
                " AS last_seen_ms FROM snowflake_nodes WHERE node_id = $1"
            ),
            &[text(node)],
        )?;
        let Some(found) = rows.row(0) else {
            return Ok(None);
        };
        // A token that is not one (the table edited by hand) reads as 0, no server's: a
        // stranger's.
        let token = field(found, "owner_token")?
            .parse::<Token>()
            .map_or(0, |t| t.0);
        let row = Row {
            node,
            identity: Identity {
                token,
                generation: number(found, "generation")?,
            },
            retired: field(found, "retired")? == "t",
            high_water: number(found, "high_water_ms")?,
            lease_until: number(found, "lease_until_ms")?,
            connected: false,
            same_label: false,
            stray: false,
            // NULL (an older server's row), or not a value: proves no one.
            boot: found
                .get("holder_boot")
                .and_then(|b| u64::from_str_radix(b, 16).ok()),
            last_seen: number(found, "last_seen_ms")?,
            // The claim counts the absence from when the registry became writable, if later.
            absent_since: number(found, "last_seen_ms")?,
            released: field(found, "released")? == "t",
            // NULL (an older server's row), or not a value: the place of no server.
            place: found
                .get("holder_place")
                .and_then(|p| u64::from_str_radix(p, 16).ok()),
        };
        Ok(Some(RowRead {
            row,
            label: field(found, "holder_label")?.to_string(),
            layout: field(found, "layout")?.to_string(),
        }))
    }

    fn writable_since(&mut self) -> Result<i64, Failure> {
        // This server's term: its start, and the timeline it writes (a promotion begins a new
        // one; pg_walfile_name names the insert timeline, as soon as the promotion ends). The
        // first claim of a term records when it ran, a time at or after the term began; the
        // claims after it read the same.
        let rows = self.0.query(
            concat!(
                "WITH term AS (SELECT pg_postmaster_start_time() AS started, \
                 ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint \
                 AS timeline), \
                 recorded AS (INSERT INTO snowflake_registry_terms (started, timeline, since) \
                 SELECT started, timeline, clock_timestamp() FROM term \
                 ON CONFLICT (started, timeline) DO NOTHING RETURNING since) \
                 SELECT ",
                ms!(
                    "coalesce((SELECT since FROM recorded), (SELECT t.since FROM \
                 snowflake_registry_terms t JOIN term USING (started, timeline)))"
                ),
                " AS since_ms"
            ),
            &[],
        )?;
        number(first(&rows)?, "since_ms")
    }

    fn candidates(&mut self, request: &Request, limit: usize) -> Result<Vec<u32>, Failure> {
        // The lowest ids that have no row, or a retired one past its mark and the margin.
        let rows = self.0.query(
            concat!(
                "SELECT DISTINCT c.n FROM (SELECT 0 AS n UNION ALL SELECT node_id + 1 FROM \
                 snowflake_nodes UNION ALL SELECT node_id FROM snowflake_nodes WHERE state = 'retired') c \
                 WHERE c.n <= $1 AND NOT EXISTS (SELECT 1 FROM snowflake_nodes r WHERE r.node_id = c.n \
                 AND NOT (r.state = 'retired' AND coalesce(r.high_water_ms, -9223372036854775808) < ",
                ms!("clock_timestamp()"),
                " - $2)) ORDER BY c.n LIMIT $3"
            ),
            &[text(request.max_node), text(request.margin_ms), text(limit)],
        )?;
        rows.iter()
            .map(|candidate| number(candidate, "n"))
            .collect()
    }

    fn write_claim(
        &mut self,
        node: u32,
        identity: Identity,
        mark: i64,
        request: &Request,
    ) -> Result<(), Failure> {
        self.0.query(
            "INSERT INTO snowflake_nodes AS r (node_id, state, owner_token, generation, \
             holder_label, system_identifier, layout, claimed_at, last_seen, lease_until, \
             high_water_ms, clock_offset_ms, holder_boot, holder_place) VALUES ($1, 'live', $2, \
             $3, $4, $5, $6, clock_timestamp(), clock_timestamp(), \
             clock_timestamp() + $7 * interval '1 ms', $8, $9, $10, $11) ON CONFLICT (node_id) DO UPDATE SET state = 'live', \
             owner_token = EXCLUDED.owner_token, generation = EXCLUDED.generation, \
             holder_label = EXCLUDED.holder_label, system_identifier = EXCLUDED.system_identifier, \
             layout = EXCLUDED.layout, claimed_at = EXCLUDED.claimed_at, \
             last_seen = EXCLUDED.last_seen, lease_until = EXCLUDED.lease_until, \
             high_water_ms = greatest(r.high_water_ms, EXCLUDED.high_water_ms), \
             clock_offset_ms = EXCLUDED.clock_offset_ms, retired_at = NULL, \
             holder_boot = EXCLUDED.holder_boot, released_at = NULL, \
             holder_place = EXCLUDED.holder_place",
            &[
                text(node),
                text(Token(identity.token)),
                text(identity.generation),
                text(&request.label),
                text(request.system),
                text(&request.layout),
                text(request.lease_ms),
                // Nothing reserved yet: no mark (NULL), not the smallest bigint.
                (mark > i64::MIN).then(|| mark.to_string()),
                text(request.clock_offset_ms),
                text(format!("{:016x}", request.boot)),
                text(format!("{:016x}", request.place)),
            ],
        )?;
        Ok(())
    }

    fn heartbeat_row(
        &mut self,
        node: u32,
        identity: Identity,
        request: &HeartbeatRequest,
    ) -> Result<Option<i64>, Failure> {
        // The mark before the raise, from the row this statement locks and updates.
        let rows = self.0.query(
            "WITH before AS (SELECT high_water_ms FROM snowflake_nodes WHERE node_id = $1 \
             FOR UPDATE) \
             UPDATE snowflake_nodes SET last_seen = clock_timestamp(), \
             lease_until = clock_timestamp() + $5 * interval '1 ms', \
             high_water_ms = greatest(snowflake_nodes.high_water_ms, $6), clock_offset_ms = $7, \
             holder_boot = $8, released_at = NULL, holder_place = $9 FROM before \
             WHERE node_id = $1 AND owner_token = $2 AND generation = $3 AND state = $4 \
             RETURNING coalesce(before.high_water_ms, -9223372036854775808) AS before_ms",
            &[
                text(node),
                text(Token(identity.token)),
                text(identity.generation),
                text("live"),
                text(request.lease_ms),
                (request.high_water > i64::MIN).then(|| request.high_water.to_string()),
                text(request.clock_offset_ms),
                text(format!("{:016x}", request.boot)),
                text(format!("{:016x}", request.place)),
            ],
        )?;
        rows.row(0).map(|r| number(r, "before_ms")).transpose()
    }

    fn live_label(&mut self, node: u32) -> Result<Option<String>, Failure> {
        let rows = self.0.query(
            "SELECT holder_label FROM snowflake_nodes WHERE node_id = $1 AND state = 'live'",
            &[text(node)],
        )?;
        Ok(rows
            .row(0)
            .and_then(|r| r.get("holder_label"))
            .map(str::to_string))
    }

    fn claims_mark(&mut self, node: u32, identity: Identity) -> Result<Option<i64>, Failure> {
        let rows = self.0.query(
            "SELECT coalesce(high_water_ms, -9223372036854775808) AS high_water_ms \
             FROM snowflake_nodes WHERE node_id = $1 AND owner_token = $2 AND generation = $3 \
             AND state = 'live' FOR UPDATE",
            &[
                text(node),
                text(Token(identity.token)),
                text(identity.generation),
            ],
        )?;
        rows.row(0).map(|r| number(r, "high_water_ms")).transpose()
    }

    fn write_release(&mut self, node: u32, mark: i64) -> Result<(), Failure> {
        self.0.query(
            "UPDATE snowflake_nodes SET released_at = clock_timestamp(), high_water_ms = $2 \
             WHERE node_id = $1",
            &[text(node), (mark > i64::MIN).then(|| mark.to_string())],
        )?;
        Ok(())
    }

    fn retire_row(&mut self, node: u32) -> Result<(), Failure> {
        self.0.query(
            "UPDATE snowflake_nodes SET state = 'retired', retired_at = clock_timestamp() \
             WHERE node_id = $1",
            &[text(node)],
        )?;
        Ok(())
    }
}

impl Applications for Sql<'_> {
    fn lapsed(&mut self) -> Result<Vec<u32>, Failure> {
        // A few at a time: each acquisition retires what it finds, the next the rest.
        let rows = self.0.query(
            "SELECT node_id FROM snowflake_nodes WHERE system_identifier = $1 \
             AND state = 'live' AND lease_until < clock_timestamp() ORDER BY node_id LIMIT 16",
            &[text(APPLICATION_SYSTEM)],
        )?;
        rows.iter().map(|row| number(row, "node_id")).collect()
    }
}

/// A row of the registry as [`list`] reads it (times as Unix ms; `None`: NULL, or a value that
/// is not a number).
pub struct Listed {
    pub node_id: Option<i64>,
    /// live (lease running), lost (lease run out, not retired), retired (not yet handed out
    /// again), free, or stray (of another layout than the fleet's: it blocks its own id).
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

/// Each layout the table's rows record, with how many and the oldest of them.
fn layouts(conn: &Conn) -> Result<Vec<LayoutRows>, Failure> {
    let rows = conn.query(
        concat!(
            "SELECT layout, count(*) AS rows, (array_agg(node_id ORDER BY claimed_at, node_id))[1] AS first_node, ",
            ms!("min(claimed_at)"),
            " AS first_claimed_at_ms FROM snowflake_nodes GROUP BY layout"
        ),
        &[],
    )?;
    rows.iter()
        .map(|r| {
            Ok(LayoutRows {
                layout: field(r, "layout")?.to_string(),
                rows: number(r, "rows")?,
                first_node: number(r, "first_node")?,
                first_claimed_at: number(r, "first_claimed_at_ms")?,
            })
        })
        .collect()
}

/// Every row, with its state as the registry's clock and `margin_ms` make it; a row of another
/// layout than `layout` (this server's, the fleet's) is a stray.
pub fn list(conn: &Conn, margin_ms: i64, layout: &str) -> Result<Vec<Listed>, Failure> {
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
            " AS retired_at_ms, layout FROM snowflake_nodes ORDER BY node_id"
        ),
        &[text(margin_ms)],
    )?;
    let number = |r: Record<'_>, column| r.get(column).and_then(|v| v.parse::<i64>().ok());
    let text = |r: Record<'_>, column| r.get(column).map(str::to_string);
    Ok(rows
        .iter()
        .map(|r| Listed {
            node_id: number(r, "node_id"),
            state: if r.get("layout").is_some_and(|l| l != layout) {
                Some("stray".into())
            } else {
                text(r, "state")
            },
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
