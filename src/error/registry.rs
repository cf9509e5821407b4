//! The wording of the node-id registry's refusals, warnings and log lines (`src/registry/`).

use super::catalogue::catalogue;
use super::report::{quoted, quoted_cause};
use snowflake_core::calendar::format_unix_ms as when;
use snowflake_core::registry::Refusal;

catalogue! {
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum RegistryError {
        AwaitingClaim { waited_ms: i64 } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "this server has not claimed its node id from the registry yet"
            detail "The call waited {waited_ms} ms for the pg_snowflake renewer to claim it."
            hint "Check that the registry named by pg_snowflake.registry is reachable; the \
                  server log says what the renewer met." },
        /// The registry refused the claim of `node` (`last_seen`: Unix ms): a row each, below.
        ClaimRefused { node: u32, why: Refusal, label: String, last_seen: i64 } =>
            [refused(why, node, label, last_seen), refusal_rows()],
        ClaimLost { node: u32, label: Option<String> } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("this server lost node id {node}: {}", match label {
                Some(label) => format!("another server, {}, took it over in the registry",
                                       quoted(label)),
                None => "it was retired in the registry".into() })
            detail "Its lease ran out while it could not reach the registry (or its data \
                    directory was copied), and another server claimed the id since. This server \
                    makes no IDs under it any more and claims again: with pg_snowflake.node_id \
                    set it is refused while the other server holds the id; without, it is given \
                    a fresh one."
            hint "Find out which server holds the id now (snowflake_registry()). Give this server \
                  another pg_snowflake.node_id, or leave it unset so that the registry assigns \
                  one." },
        LeaseExpired { node: u32, ago_ms: i64 } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "the lease on node id {node} ran out {ago_ms} ms ago: the registry could not \
                     be reached"
            detail "In fenced mode (pg_snowflake.registry_mode) a server makes no IDs without a \
                    lease, so that no two servers make IDs under one node id. {LEASE_DETAIL}"
            hint "Make the registry reachable again: IDs resume at the next heartbeat. Or set \
                  pg_snowflake.registry_mode = 'available' to keep making IDs while it is not." },
        AwaitingLease { node: u32, waited_ms: i64 } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "this server was switched to fenced mode and has no fenced lease on node id \
                     {node} yet"
            detail "The call waited {waited_ms} ms. In fenced mode (pg_snowflake.registry_mode) a \
                    server makes IDs only below the ceiling its last heartbeat recorded in the \
                    registry; in available mode its IDs ran ahead of the registry's mark, so \
                    after the switch it makes none until its next heartbeat grants a ceiling \
                    above them. {LEASE_DETAIL}"
            hint "Make the registry reachable: IDs resume at the next heartbeat, which the switch \
                  makes at once. Or set pg_snowflake.registry_mode = 'available' again." },
        ClockSkew { offset_ms: i64, max_ms: i64 } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("this server's clock is {} ms {} the registry's, more than \
                      pg_snowflake.max_clock_skew_ms ({max_ms} ms)", offset_ms.unsigned_abs(),
                     if *offset_ms > 0 { "ahead of" } else { "behind" })
            detail "IDs carry their time: made with a clock that far off, they would be \
                    misplaced by every reader and by the time-to-ID bounds."
            hint "Fix the system clock (NTP); IDs resume at the next heartbeat within the \
                  limit." },
        CeilingReached { ceiling: i64 } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("the generator has reached the end of its lease in the registry ({})",
                     when(*ceiling))
            detail "In fenced mode no reservation reaches past the time the registry recorded \
                    for the lease. {LEASE_DETAIL}"
            hint "Make the registry reachable again, or lower the load: IDs resume at the next \
                  heartbeat." },
        NoFreeNodeId { max: u32 } => { ERROR ERRCODE_CONFIGURATION_LIMIT_EXCEEDED
            message "the registry has no free node id: every id from 0 to {max} is held or \
                     retired"
            hint "Retire the ids of servers gone for good with snowflake_registry_retire(), or \
                  use a layout with more node bits." },
        Unreachable { cause: String, not_logged: u64 } => { WARNING ERRCODE_CONNECTION_FAILURE
            message ("could not reach the pg_snowflake registry: {}", quoted_cause(cause))
            detail "The renewer tries again at every heartbeat. {not_logged} more failures were \
                    not logged since the last message."
            hint "Check pg_snowflake.registry and that the registry's server is up." },
        Failed { action: &'static str, cause: String } => { ERROR ERRCODE_CONNECTION_FAILURE
            message ("could not {action}: {}", quoted_cause(cause))
            hint "Check pg_snowflake.registry, that the registry's server is up, and that its \
                  user may use the table snowflake_nodes (snowflake_registry_create() makes \
                  it)." },
        NotConfigured => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "pg_snowflake.registry is not set"
            hint "Set pg_snowflake.registry in postgresql.conf to a connection string of the \
                  registry database and restart the server." },
        ClaimOutcome { node: u32, generation: i64, floor: Option<i64>, how: &'static str } => {
            LOG ERRCODE_SUCCESSFUL_COMPLETION
            message "pg_snowflake claimed node id {node} from the registry ({how}, generation \
                     {generation})"
            detail { floor.map(|floor| {
                format!("IDs continue above the id's high-water mark, {}.", when(floor))
            }) }
            hint "snowflake_stats() shows this server's claim; snowflake_registry() lists every \
                  node id." },
        Retired { node: u32, high_water: Option<i64> } => { LOG ERRCODE_SUCCESSFUL_COMPLETION
            message "pg_snowflake retired node id {node}, its primary's, for a fresh one"
            detail { high_water.map(|mark| {
                format!("It is handed out again once the registry's clock is past {}.", when(mark))
            }) }
            hint "Nothing to do: pg_snowflake.fresh_node_id_on_promotion is on." },
        OtherLayout { node: u32, fleet: String, mine: String } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "the pg_snowflake registry's fleet makes IDs of another layout than this \
                     server: {fleet} (node id {node}'s), here {mine}"
            detail "The registry refused this server's claim: it makes no IDs. A fleet has one \
                    layout: the same 64 bits read in two layouts are two other times and node \
                    ids, so IDs of the two can collide."
            hint "Give this server the fleet's pg_snowflake.epoch, time_unit_ms, node_bits and \
                  sequence_bits (a server that never made IDs may change them), or a registry of \
                  its own (one per layout)." },
        StrayLayout { node: u32, stray: String, fleet: String } => { WARNING ERRCODE_DATA_EXCEPTION
            message "the pg_snowflake registry has a row of another layout than the fleet's: \
                     node id {node}'s, {stray}"
            detail "This server's layout, the fleet's, is {fleet}. The row blocks its own node id \
                    only: no claim of the fleet takes it, and snowflake_registry() shows it as \
                    'stray'."
            hint "If no server of that layout uses this registry (a hand edit, another fleet's \
                  server pointed here by mistake), delete the row from snowflake_nodes on the \
                  registry; otherwise give that server a registry of its own." },
        Release { node: u32, lowered_to: Option<i64> } => { LOG ERRCODE_SUCCESSFUL_COMPLETION
            message "pg_snowflake released its claim of node id {node}"
            detail { Some(match lowered_to {
                Some(mark) => format!("The registry's high-water mark for it is now {}, the end \
                                      of this server's durable reservation, instead of a lease \
                                      ahead: the next claim resumes there, and this server's \
                                      next start takes the id back at once.", when(*mark)),
                None => "The registry's high-water mark for it stays above every ID made under \
                         it, and this server's next start takes the id back at once.".into() }) }
            hint "Nothing to do: a server whose renewer exits (a shutdown, or the renewer's \
                  restart) makes no ID past its reservation until it claims again." },
        RetireLive { node: u32, label: String } => { ERROR ERRCODE_OBJECT_IN_USE
            message ("node id {node} is held by {}, which is connected to the registry",
                     quoted(label))
            hint "Stop that server first: only an id whose holder is gone can be retired." },
        RetireLeaseRuns { node: u32, label: String, until: i64 } => { ERROR ERRCODE_OBJECT_IN_USE
            message ("node id {node} is leased to {} until {}: it may still be making IDs",
                     quoted(label), when(*until))
            detail "A holder cut off from the registry, or one the registry restarted under, goes \
                    on making IDs until its lease runs out; retiring its id before would hand \
                    the id out again below them."
            hint "Retire it once the lease has run out (pg_snowflake.registry_lease_ms)." },
        NoSuchNode { node: i64 } => { ERROR ERRCODE_UNDEFINED_OBJECT
            message "the registry holds no live node id {node}"
            hint "snowflake_registry() lists the ids the registry knows." },
        LeaseNotGranted { role: String } => { ERROR ERRCODE_INSUFFICIENT_PRIVILEGE
            message ("role {} may not take a node-id lease from the pg_snowflake registry",
                     quoted(role))
            detail "A node-id lease lets its holder make IDs under one of the fleet's node ids: \
                    only members of the role snowflake_lease may take, renew or release one."
            hint "A superuser may grant it: GRANT snowflake_lease TO the application's role." },
        LeaseArgument { what: &'static str } => { ERROR ERRCODE_INVALID_PARAMETER_VALUE
            message "invalid node-id lease argument: {what}"
            hint "Name the application by 1 to 100 printable characters; renew or release a \
                  lease with the node id, token and generation snowflake_lease_acquire() \
                  returned." },
        LeaseLost { node: u32, label: Option<String> } => {
            ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("the lease on node id {node} is lost: {}", match label {
                Some(label) => format!("the registry's row is another lease's, {}", quoted(label)),
                None => "the registry holds no live lease on it under this token and generation"
                    .into() })
            detail "A lease not renewed before it runs out is retired and its node id handed out \
                    again, above every ID made under it; a token or generation not the lease's \
                    own is no lease."
            hint "Stop making IDs under this node id and acquire a new lease with \
                  snowflake_lease_acquire()." },
        LeaseRegistryFailed { action: &'static str } => { ERROR ERRCODE_CONNECTION_FAILURE
            message "could not {action}: the pg_snowflake registry did not answer"
            detail "The cause is in this server's log: the registry's address is not shown to \
                    lease holders."
            hint "Try again (an application keeps its lease until its ceiling); if it persists, \
                  an operator checks pg_snowflake.registry and the registry's server." },
    }
}

const LEASE_DETAIL: &str = "A node id is held under a lease in the registry \
                            (pg_snowflake.registry), renewed by the pg_snowflake renewer.";

const REFUSED: &str = "The registry refused this server's claim: it makes no IDs.";

catalogue! {
    /// The registry's refusal `why` of this server's claim of `node`, whose holder is labelled
    /// `label` and was last seen at `last_seen`.
    fn refused(why: &Refusal, node: &u32, label: &str, last_seen: &i64), rows refusal_rows {
        HeldByAnother { connected } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("node id {node} is held by another server, {}, last seen at {}{}",
                     quoted(label), when(*last_seen),
                     if *connected { ", and still connected to the registry" } else { "" })
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "Give this server another pg_snowflake.node_id, or leave it unset so that the \
                  registry assigns one. If that server is gone for good, retire the id with \
                  snowflake_registry_retire() (a session the registry still holds for it, as \
                  behind a hung proxy, ends two leases after its last heartbeat)." },
        CopyOfLiveHolder => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("this data directory is a copy of the server holding node id {node}, {}, \
                      which is running (last seen at {})", quoted(label), when(*last_seen))
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "A clone, snapshot or restored backup must not make IDs under its origin's \
                  node id. Leave pg_snowflake.node_id unset so that the registry gives it a \
                  fresh one, or set another." },
        OpenSession => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("node id {node} is held by a registry session under this server's own \
                      name, {}, last seen at {}: this server's own from before a restart, or \
                      a running copy's", quoted(label), when(*last_seen))
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "Wait: the registry ends the session of a server that went down within \
                  about a lease (TCP keepalives), and this server then takes its node id \
                  back. If the session lives on, this server is a copy: it is refused (node \
                  id set) or given a fresh node id (unset) after two leases. A copy needs a \
                  cluster_name, host name or port of its own." },
        HolderMayReturn { until } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("node id {node} is held under this server's own claim by {}, last seen at \
                      {}, which may still be running: this server started from its files (a \
                      restart, a copy, a promoted standby) and waits until {} for it to come \
                      back", quoted(label), when(*last_seen), when(*until))
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "Wait: a running holder between two registry sessions comes back within a \
                  heartbeat interval and the clock margin, and this server is then refused as \
                  its copy. If none comes back, this server takes the id over, above every ID \
                  made under it, under a token of its own." },
        StaleCopy => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("this data directory is an older copy of the server holding node id \
                      {node}, {} (last seen at {})", quoted(label), when(*last_seen))
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "Leave pg_snowflake.node_id unset so that the registry gives this copy a fresh \
                  node id, or set another." },
        MarkAhead { mark, now } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("node id {node}'s high-water mark in the registry, {}, is {} s ahead of \
                      the registry's clock, {}", when(*mark), mark.saturating_sub(*now) / 1_000,
                     when(*now))
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "A server's clock ran far ahead, or the row was damaged: taking the id would \
                  stamp every ID that far in the future. Leave pg_snowflake.node_id unset so \
                  that the registry assigns another id, or set another; once the clocks are \
                  right, retire this id with snowflake_registry_retire()." },
        // Never shown: `RegistryError::refused` words it whole as `OtherLayout`.
        OtherLayout => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "node id {node}'s IDs are of another layout: {label}"
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "Give this server the fleet's layout, or a registry of its own." },
        HistoryLost => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message "this server's state file was damaged, and the registry has never seen this \
                     server: the node ids it made IDs under are unknown"
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "Restore pg_snowflake.state from a backup of this data directory (or \
                  pg_snowflake.state.damaged, repaired). If there is none and this server's \
                  clock is past every ID it ever made, remove pg_snowflake.state.damaged and \
                  restart the server: it is then given a node id as a new server." },
        RetiredUntil { until } => { ERROR ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            message ("node id {node} is retired and is handed out again only after {}",
                     when(*until))
            detail "{REFUSED} {LEASE_DETAIL}"
            hint "Wait until then, or give this server another pg_snowflake.node_id, or leave \
                  it unset so that the registry assigns a free one." },
    }
}
