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

/// Which variant `error` is, as a number from 0 to `VARIANTS - 1`. The match is exhaustive: a
/// new variant does not compile until it has a number here (the next one; raise `VARIANTS`) and
/// an example in [`one_of_every_variant`].
fn variant(error: &SnowflakeError) -> usize {
    use AdoptError as A;
    use CoreError as C;
    use RegistryError as R;
    use SnowflakeError as S;
    match error {
        S::Core(core) => match core {
            C::InvalidLayout { .. } => 0,
            C::LayoutChanged { .. } => 1,
            C::IdBeyondTimeField { .. } => 2,
            C::NodeOutOfRange { .. } => 3,
            C::SequenceOutOfRange { .. } => 4,
            C::InvalidBase32 { .. } => 5,
            C::BatchSizeOutOfRange { .. } => 6,
            C::NegativeId(_) => 7,
            C::TimeExhausted { .. } => 8,
            C::ClockBeforeEpoch { .. } => 9,
            C::TimestampBeforeEpoch { .. } => 10,
            C::TimestampAfterEnd { .. } => 11,
        },
        S::NotPreloaded => 12,
        S::NodeUnset { .. } => 13,
        S::InvalidSetting { .. } => 14,
        S::InRecovery => 15,
        S::RenewerNotRunning => 16,
        S::ClockSteppedBack { .. } => 17,
        S::ClockJumpHeld { .. } => 18,
        S::ClockJumpFollowed { .. } => 19,
        S::NodeSwitched { .. } => 20,
        S::ReservationsFailing { .. } => 21,
        S::OwnReservationMovedAside { .. } => 22,
        S::StateFileDamaged { .. } => 23,
        S::StateFileIo { .. } => 24,
        S::StateFileNotCopied { .. } => 25,
        S::NotPreloadedForUpgrade => 26,
        S::UnknownWalRecord => 27,
        S::Internal { .. } => 28,
        S::Adopt(adopt) => match adopt {
            A::NullArgument { .. } => 29,
            A::NoSuchRelation { .. } => 30,
            A::NotATable { .. } => 31,
            A::GeneratedColumn { .. } => 32,
            A::NoSequence { .. } => 33,
            A::AlreadyAdopted { .. } => 34,
            A::NoSuchColumn { .. } => 35,
            A::NotInteger { .. } => 36,
            A::WouldCollide { .. } => 37,
            A::IdentitySequenceDropped { .. } => 38,
            A::SequenceKept { .. } => 39,
            A::NarrowReferences { .. } => 40,
            A::NewKeyAdopted { .. } => 61,
            A::NewKeyNotAllowed { .. } => 62,
            A::ExcludeNoSuchTable { .. } => 63,
            A::ExcludeNotATable { .. } => 64,
            A::AlreadyExcluded { .. } => 65,
            A::OnlinePartitioned { .. } => 71,
            A::OnlineNoPrimaryKey { .. } => 72,
            A::OnlineNotPrimaryKey { .. } => 73,
            A::OnlineAlreadyBigint { .. } => 74,
            A::OnlineCompositeReference { .. } => 75,
        },
        S::Registry(registry) => match registry {
            R::AwaitingClaim { .. } => 41,
            R::ClaimRefused { .. } => 42,
            R::ClaimLost { .. } => 43,
            R::LeaseExpired { .. } => 44,
            R::ClockSkew { .. } => 45,
            R::CeilingReached { .. } => 46,
            R::NoFreeNodeId { .. } => 47,
            R::Unreachable { .. } => 48,
            R::Failed { .. } => 49,
            R::NotConfigured => 50,
            R::ClaimOutcome { .. } => 51,
            R::RetireLive { .. } => 52,
            R::NoSuchNode { .. } => 53,
            R::RetireLeaseRuns { .. } => 56,
            R::Retired { .. } => 55,
            R::Release { .. } => 57,
            R::OtherLayout { .. } => 58,
            R::StrayLayout { .. } => 59,
            R::AwaitingLease { .. } => 60,
            R::LeaseNotGranted { .. } => 66,
            R::LeaseArgument { .. } => 67,
            R::LeaseLost { .. } => 68,
            R::LeaseRegistryFailed { .. } => 69,
        },
        S::DamagedStateFileMovedAside { .. } => 54,
        S::WatermarkInRecovery => 70,
        S::Backfill(backfill) => 76 + backfill::number(backfill),
    }
}

const VARIANTS: usize = 76 + backfill::VARIANTS;

/// At least one example of every variant (both forms of those whose wording branches).
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
        .chain(server)
        .chain(backfill::examples().into_iter().map(SnowflakeError::from))
        .chain([SnowflakeError::DamagedStateFileMovedAside {
            path: STATE_FILE,
            aside: "pg_snowflake.state.damaged",
            reason: "its check value does not match its contents".into(),
        }])
        .collect()
}

#[test]
fn the_examples_cover_every_variant() {
    let mut seen = [false; VARIANTS];
    for error in one_of_every_variant() {
        seen[variant(&error)] = true;
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|&i| !seen[i]).collect();
    assert!(
        missing.is_empty(),
        "variants without an example: {missing:?}"
    );
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
