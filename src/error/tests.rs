use super::catalogue::Row;
use super::report::{quoted, quoted_cause, CAUSE_CHARS, SHOWN_CHARS};
use super::*;
use snowflake_core::layout::DEFAULT_LAYOUT;
use snowflake_core::registry::Refusal;

#[test]
fn short_input_is_shown_whole_and_long_input_as_a_counted_prefix() {
    assert_eq!(quoted("0123"), "\"0123\"");
    let exact = "x".repeat(SHOWN_CHARS);
    assert_eq!(quoted(&exact), format!("\"{exact}\""));
    let long = "0".repeat(1_048_576);
    let shown = quoted(&long);
    assert_eq!(
        shown,
        format!("\"{}...\" (1048576 characters)", "0".repeat(SHOWN_CHARS))
    );
    // Multi-byte characters are counted as characters and never cut in half.
    let wide = "é".repeat(100);
    assert_eq!(
        quoted(&wide),
        format!("\"{}...\" (100 characters)", "é".repeat(SHOWN_CHARS))
    );
}

/// libpq's own prefix takes about 60 characters; the cause after it must reach the log.
#[test]
fn a_registry_cause_is_shown_on_one_line_with_what_failed() {
    let libpq = "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password \
                 authentication failed for user \"snowflake\"\n";
    let message = RegistryError::Unreachable {
        cause: libpq.into(),
        not_logged: 0,
    };
    let text = SnowflakeError::from(message).message().text;
    assert_eq!(
        text,
        "could not reach the pg_snowflake registry: \"connection to server at \"127.0.0.1\", port \
         5432 failed: FATAL: password authentication failed for user \"snowflake\"\""
    );
    let long = "x".repeat(CAUSE_CHARS + 1);
    assert!(quoted_cause(&long).ends_with(&format!("({} characters)", CAUSE_CHARS + 1)));
}

#[test]
fn a_message_echoing_a_megabyte_of_input_stays_small() {
    let huge = "0".repeat(1_048_576);
    let core = SnowflakeError::from(CoreError::InvalidBase32 {
        text: huge.clone(),
        reason: "it has more than 13 digits".into(),
    });
    let adopt = SnowflakeError::from(AdoptError::NoSuchColumn {
        table: "t".into(),
        column: huge,
    });
    for error in [core, adopt] {
        let m = error.message();
        let size = m.text.len() + m.detail.map_or(0, |d| d.len()) + m.hint.len();
        assert!(size < 400, "{size} bytes");
    }
}

/// At least one example of every row of the catalogue (both forms of those whose wording
/// branches).
fn one_of_every_variant() -> Vec<SnowflakeError> {
    let field = || DEFAULT_LAYOUT.time_field();
    let (t, c) = (|| "t".to_string(), || "id".to_string());
    let core = [
        CoreError::InvalidLayout { reason: "x".into() },
        CoreError::LayoutChanged {
            recorded: "a".into(),
            configured: "b".into(),
        },
        CoreError::IdBeyondTimeField {
            id: 1,
            field: field(),
        },
        CoreError::NodeOutOfRange {
            node: 2000,
            max: 1023,
        },
        CoreError::SequenceOutOfRange {
            seq: 5000,
            max: 4095,
        },
        CoreError::InvalidBase32 {
            text: "!".into(),
            reason: "it has a character outside the alphabet".into(),
        },
        CoreError::BatchSizeOutOfRange { n: 0, max: 100 },
        CoreError::NegativeId(-1),
        CoreError::TimeExhausted { end_unix_ms: 0 },
        CoreError::ClockBeforeEpoch { now_unix_ms: 0 },
        CoreError::TimestampBeforeEpoch {
            unix_ms: 0,
            field: field(),
        },
        CoreError::TimestampAfterEnd {
            unix_ms: i64::MAX,
            field: field(),
        },
    ];
    let adopt = [
        AdoptError::NullArgument {
            function: "snowflake_adopt",
            argument: "tbl",
        },
        AdoptError::NullArgument {
            function: "snowflake_adopt_exclude",
            argument: "tbl",
        },
        AdoptError::NullArgument {
            function: "snowflake_adopt_online_check",
            argument: "col",
        },
        AdoptError::NoSuchRelation { oid: 999_999 },
        AdoptError::NotATable {
            relation: "v".into(),
            kind: "view",
        },
        AdoptError::GeneratedColumn {
            table: t(),
            column: c(),
        },
        AdoptError::NoSequence {
            table: t(),
            column: c(),
            default: Some("0".into()),
        },
        AdoptError::NoSequence {
            table: t(),
            column: c(),
            default: None,
        },
        AdoptError::AlreadyAdopted {
            table: t(),
            column: c(),
        },
        AdoptError::NoSuchColumn {
            table: t(),
            column: c(),
        },
        AdoptError::NotInteger {
            table: t(),
            column: c(),
            type_name: "text".into(),
        },
        AdoptError::WouldCollide {
            table: t(),
            column: c(),
            max: 1 << 62,
        },
        AdoptError::IdentitySequenceDropped {
            sequence: "t_id_seq".into(),
            column: c(),
            last_value: None,
        },
        AdoptError::SequenceKept {
            sequences: "t_id_seq".into(),
            column: c(),
        },
        AdoptError::NarrowReferences {
            column: c(),
            columns: "u.t_id (integer)".into(),
        },
        AdoptError::NewKeyAdopted {
            table: t(),
            column: c(),
            was: "serial (integer)".into(),
            sequence: "t_id_seq".into(),
        },
        AdoptError::NewKeyNotAllowed {
            table: t(),
            column: c(),
            role: "app".into(),
            missing: "EXECUTE ON FUNCTION public.snowflake_nextval()".into(),
        },
        AdoptError::ExcludeNoSuchTable {
            name: "nosuch".into(),
        },
        AdoptError::ExcludeNotATable {
            relation: "v".into(),
            kind: "view",
        },
        AdoptError::AlreadyExcluded { table: t() },
        AdoptError::OnlinePartitioned { table: t() },
        AdoptError::OnlineNoPrimaryKey { table: t() },
        AdoptError::OnlineNotPrimaryKey {
            table: t(),
            column: c(),
            key: "PRIMARY KEY (a, b)".into(),
        },
        AdoptError::OnlineAlreadyBigint {
            table: t(),
            column: c(),
        },
        AdoptError::OnlineCompositeReference {
            constraint: "u_fk".into(),
            table: "u".into(),
        },
    ];
    let server = [
        SnowflakeError::NotPreloaded,
        SnowflakeError::NodeUnset { max: 1023 },
        SnowflakeError::InvalidSetting {
            name: "pg_snowflake.epoch",
            value: "x".into(),
            reason: "It is not a date.".into(),
        },
        SnowflakeError::InRecovery,
        SnowflakeError::WatermarkInRecovery,
        SnowflakeError::RenewerNotRunning,
        SnowflakeError::ClockSteppedBack { ms: 5 },
        SnowflakeError::ClockJumpHeld {
            ms: 5,
            confirm_s: 30,
        },
        SnowflakeError::ClockJumpFollowed { ms: 5 },
        SnowflakeError::NodeSwitched {
            from: Some(1),
            to: 2,
            lead_dropped: true,
        },
        SnowflakeError::NodeSwitched {
            from: None,
            to: 2,
            lead_dropped: false,
        },
        SnowflakeError::ReservationsFailing {
            cause: "No space left on device (os error 28)".into(),
            not_logged: 7,
        },
        SnowflakeError::OwnReservationMovedAside {
            path: STATE_FILE,
            aside: "pg_snowflake.state.before-upgrade",
        },
        SnowflakeError::StateFileDamaged {
            path: STATE_FILE,
            reason: "its checksum does not match".into(),
        },
        SnowflakeError::state_file_write(28),
        SnowflakeError::state_file_write(0),
        SnowflakeError::StateFileNotCopied { path: STATE_FILE },
        SnowflakeError::NotPreloadedForUpgrade,
        SnowflakeError::UnknownWalRecord,
        SnowflakeError::Internal {
            context: "snowflake_adopt",
            cause: "x".into(),
        },
    ];
    let refusal = |why| RegistryError::ClaimRefused {
        node: 3,
        why,
        label: "db-2 (10.0.0.2:5432)".into(),
        last_seen: 1_800_000_000_000,
    };
    let registry = [
        RegistryError::AwaitingClaim { waited_ms: 10_000 },
        refusal(Refusal::HeldByAnother { connected: false }),
        refusal(Refusal::HeldByAnother { connected: true }),
        refusal(Refusal::CopyOfLiveHolder),
        refusal(Refusal::OpenSession),
        refusal(Refusal::StaleCopy),
        refusal(Refusal::HolderMayReturn {
            until: 1_800_000_015_000,
        }),
        refusal(Refusal::HistoryLost),
        refusal(Refusal::RetiredUntil {
            until: 1_800_000_000_000,
        }),
        refusal(Refusal::MarkAhead {
            mark: 1_831_536_000_000,
            now: 1_800_000_000_000,
        }),
        RegistryError::ClaimLost {
            node: 3,
            label: Some("db-2 (10.0.0.2:5432)".into()),
        },
        RegistryError::ClaimLost {
            node: 3,
            label: None,
        },
        RegistryError::LeaseExpired {
            node: 3,
            ago_ms: 1_500,
        },
        RegistryError::AwaitingLease {
            node: 3,
            waited_ms: 5_000,
        },
        RegistryError::ClockSkew {
            offset_ms: 3_600_000,
            max_ms: 5_000,
        },
        RegistryError::ClockSkew {
            offset_ms: -6_000,
            max_ms: 5_000,
        },
        RegistryError::CeilingReached {
            ceiling: 1_800_000_000_000,
        },
        RegistryError::NoFreeNodeId { max: 1023 },
        RegistryError::Unreachable {
            cause: "connection refused".into(),
            not_logged: 3,
        },
        RegistryError::Failed {
            action: "list the node ids of the pg_snowflake registry",
            cause: "permission denied".into(),
        },
        RegistryError::NotConfigured,
        RegistryError::ClaimOutcome {
            node: 3,
            generation: 2,
            floor: Some(1_800_000_000_000),
            how: "restart",
        },
        RegistryError::ClaimOutcome {
            node: 3,
            generation: 1,
            floor: None,
            how: "assigned",
        },
        RegistryError::RetireLive {
            node: 3,
            label: "db-2".into(),
        },
        RegistryError::NoSuchNode { node: 3 },
        RegistryError::RetireLeaseRuns {
            node: 3,
            label: "db-2 (10.0.0.2:5432)".into(),
            until: 1_800_000_000_000,
        },
        RegistryError::Retired {
            node: 3,
            high_water: Some(1_800_000_000_000),
        },
        RegistryError::OtherLayout {
            node: 0,
            fleet: "41 bits of 1 ms since 2024-01-01 00:00:00+00 | 10 bits node | 12 bits sequence"
                .into(),
            mine: "41 bits of 1 ms since 2024-01-01 00:00:00+00 | 12 bits node | 10 bits sequence"
                .into(),
        },
        RegistryError::Release {
            node: 3,
            lowered_to: Some(1_800_000_000_000),
        },
        RegistryError::Release {
            node: 3,
            lowered_to: None,
        },
        RegistryError::LeaseNotGranted {
            role: "orders_app".into(),
        },
        RegistryError::LeaseArgument {
            what: "the token is not 32 hex digits",
        },
        RegistryError::LeaseLost {
            node: 3,
            label: Some("orders (application via db-1 (10.0.0.1:5432))".into()),
        },
        RegistryError::LeaseLost {
            node: 3,
            label: None,
        },
        RegistryError::LeaseRegistryFailed {
            action: "acquire a node-id lease",
        },
        RegistryError::StrayLayout {
            node: 900,
            stray: "41 bits of 1 ms since 2024-01-01 00:00:00+00 | 12 bits node | 10 bits sequence"
                .into(),
            fleet: "41 bits of 1 ms since 2024-01-01 00:00:00+00 | 10 bits node | 12 bits sequence"
                .into(),
        },
    ];
    core.into_iter()
        .map(SnowflakeError::from)
        .chain(adopt.into_iter().map(SnowflakeError::from))
        .chain(registry.into_iter().map(SnowflakeError::from))
        .chain(backfill().into_iter().map(SnowflakeError::from))
        .chain(server)
        .chain([SnowflakeError::DamagedStateFileMovedAside {
            path: STATE_FILE,
            aside: "pg_snowflake.state.damaged",
            reason: "its check value does not match its contents".into(),
        }])
        .collect()
}

/// One of every `snowflake_nextval_at` refusal (each form of the exhausted instant's detail).
fn backfill() -> Vec<BackfillError> {
    use BackfillError::*;
    let exhausted = |first| Exhausted {
        unix_ms: 1_704_067_200_000,
        node: 1000,
        first,
        max: 4095,
    };
    vec![
        NodeUnset { max: 1023 },
        NodeIsLive { node: 1 },
        NodeUsedBefore { node: 2 },
        NodeOutOfRange {
            node: 1000,
            max: 15,
        },
        Future { unix_ms: i64::MAX },
        BeforeEpoch {
            unix_ms: 0,
            epoch_unix_ms: 1_704_067_200_000,
        },
        BelowCursor {
            unix_ms: 1_704_067_200_000,
            cursor_unix_ms: 1_704_067_200_001,
        },
        exhausted(0),
        exhausted(16),
        exhausted(4096),
        InRecovery,
        FileIo {
            action: "read",
            cause: "Permission denied".into(),
        },
        AwaitingOldFile,
        WriteInterrupted,
    ]
}

/// Every row of the catalogue has an example above, so that every wording is tested.
#[test]
fn the_examples_cover_every_row() {
    let named: Vec<(&str, &str)> = one_of_every_variant()
        .iter()
        .map(|e| e.message().row)
        .collect();
    let missing: Vec<(&str, &str)> = SnowflakeError::rows()
        .iter()
        .map(|row| (row.family, row.variant))
        .filter(|name| !named.contains(name) && !NOT_SHOWN.contains(name))
        .collect();
    assert!(missing.is_empty(), "rows without an example: {missing:?}");
}

/// Postgres' style, for every variant: messages start in lower case and end without a period;
/// hints and details are sentences.
#[test]
fn every_message_follows_the_postgres_style() {
    for error in one_of_every_variant() {
        let m = error.message();
        let first = m.text.chars().next().unwrap();
        assert!(!first.is_uppercase(), "{}", m.text);
        assert!(!m.text.ends_with('.'), "{}", m.text);
        assert!(m.hint.ends_with('.'), "{}", m.hint);
        if let Some(detail) = m.detail {
            assert!(detail.ends_with('.'), "{detail}");
        }
    }
}

/// Whether `text` is `template` with something (maybe nothing) in place of each `{…}`.
fn fits(template: &str, text: &str) -> bool {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        pieces.push(&rest[..open]);
        rest = rest[open..].split_once('}').map_or("", |(_, after)| after);
    }
    pieces.push(rest);
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return text == first;
    }
    let Some(mut text) = text.strip_prefix(first) else {
        return false;
    };
    for piece in &pieces[1..pieces.len() - 1] {
        match text.find(piece) {
            Some(at) => text = &text[at + piece.len()..],
            None => return false,
        }
    }
    text.len() >= last.len() && text.ends_with(last)
}

/// The five characters of a SQLSTATE (Postgres' PGUNSIXBIT, five times).
fn sqlstate(code: pgrx::PgSqlErrorCode) -> String {
    let packed = code as isize;
    (0..5)
        .map(|i| char::from(((packed >> (6 * i)) & 0x3F) as u8 + b'0'))
        .collect()
}

/// The message, detail and hint of every example come from a row of the catalogue: its
/// template and SQLSTATE are those the docs check reads.
#[test]
fn every_message_fits_a_row_of_the_catalogue() {
    let rows = SnowflakeError::rows();
    for error in one_of_every_variant() {
        let m = error.message();
        assert!(
            rows.iter()
                .any(|row| row.sqlstate == m.sqlstate && fits(row.message, &m.text)),
            "no row for {}",
            m.text
        );
    }
    assert_eq!(
        sqlstate(pgrx::PgSqlErrorCode::ERRCODE_DATA_CORRUPTED),
        "XX001"
    );
    assert!(fits(
        "node id {node} is out of range 0..{max}",
        "node id 9 is out of range 0..7"
    ));
    assert!(!fits(
        "node id {node} is out of range",
        "node id 9 is out of range 0..7"
    ));
}

/// Reported: never shown (`RegistryError::refused` words this refusal as `OtherLayout`).
const NOT_SHOWN: &[(&str, &str)] = &[("Refusal", "OtherLayout")];

/// The rows of docs/ERRORS.md's first table (pg_snowflake's own errors): its SQLSTATE cell
/// (the code and, for what is not an error, the level) and its message (the cell's first code
/// span).
fn documented() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ERRORS.md");
    let text = std::fs::read_to_string(path).expect("docs/ERRORS.md");
    let table = text
        .split("\n## ")
        .find(|section| section.starts_with("pg_snowflake's own"))
        .expect("a section \"pg_snowflake's own\" in docs/ERRORS.md");
    table
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| SQLSTATE"))
        .map(|line| {
            let line = line.replace("\\|", "\u{1}");
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let message = cells[3]
                .split('`')
                .nth(1)
                .unwrap_or("")
                .replace('\u{1}', "|");
            (cells[1].to_string(), message)
        })
        .collect()
}

fn documents(row: &Row, (state, message): &(String, String)) -> bool {
    let level_fits = match row.level {
        "ERROR" => state.len() == 5,
        level => state[5..].trim_start().starts_with(&format!("({level}")),
    };
    state.starts_with(&sqlstate(row.sqlstate)) && level_fits && fits(row.message, message)
}

/// What a template says for certain: its length without its `{…}`s.
fn literal_len(template: &str) -> usize {
    template
        .split('{')
        .enumerate()
        .map(|(i, piece)| {
            if i == 0 {
                piece.len()
            } else {
                piece.split_once('}').map_or(0, |(_, after)| after.len())
            }
        })
        .sum()
}

/// docs/ERRORS.md lists every error of the catalogue with its SQLSTATE, level and message, and
/// no error the catalogue lacks. A documented message is counted for the most specific template
/// that fits it, so that a loose one (`could not {action}: {}`) is not documented by another's
/// row.
#[test]
fn docs_errors_md_lists_the_catalogue() {
    let rows: Vec<Row> = SnowflakeError::rows()
        .into_iter()
        .filter(|row| !NOT_SHOWN.contains(&(row.family, row.variant)))
        .collect();
    let documented = documented();
    let mut owned = vec![false; rows.len()];
    let mut unknown = Vec::new();
    for doc in &documented {
        let fitting: Vec<usize> = (0..rows.len())
            .filter(|&i| documents(&rows[i], doc))
            .collect();
        let best = fitting.iter().map(|&i| literal_len(rows[i].message)).max();
        match best {
            None => unknown.push(doc),
            Some(best) => fitting
                .iter()
                .filter(|&&i| literal_len(rows[i].message) == best)
                .for_each(|&i| owned[i] = true),
        }
    }
    let undocumented: Vec<String> = (0..rows.len())
        .filter(|&i| !owned[i])
        .map(|i| {
            format!(
                "{}::{} \"{}\"",
                rows[i].family, rows[i].variant, rows[i].message
            )
        })
        .collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "not in docs/ERRORS.md (SQLSTATE, level and message): {undocumented:#?}\n\
         in docs/ERRORS.md but not in the catalogue: {unknown:#?}"
    );
}
