use super::*;
use snowflake_core::layout::DEFAULT_LAYOUT;

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

#[test]
fn a_message_echoing_a_megabyte_of_input_stays_small() {
    let huge = "0".repeat(1_048_576);
    let core = SnowflakeError::from(CoreError::InvalidBase32 {
        text: huge.clone(),
        reason: "it has more than 13 digits".into(),
    });
    let adopt = SnowflakeError::AdoptNoSuchColumn {
        table: "t".into(),
        column: huge,
    };
    for error in [core, adopt] {
        let m = error.message();
        let size = m.text.len() + m.detail.map_or(0, |d| d.len()) + m.hint.len();
        assert!(size < 400, "{size} bytes");
    }
}

/// Postgres' style: messages start in lower case and end without a period; hints and details
/// are sentences.
#[test]
fn every_message_follows_the_postgres_style() {
    let layout = DEFAULT_LAYOUT;
    let errors = vec![
        SnowflakeError::NotPreloaded,
        SnowflakeError::NodeUnset { max: 1023 },
        SnowflakeError::InRecovery,
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
            path: "pg_snowflake.state",
            aside: "pg_snowflake.state.before-upgrade",
        },
        SnowflakeError::RenewerNotRunning,
        SnowflakeError::StateFileNotCarried {
            path: "pg_snowflake.state",
        },
        SnowflakeError::NotPreloadedForUpgrade,
        SnowflakeError::UnknownWalRecord,
        CoreError::TimeExhausted { end_unix_ms: 0 }.into(),
        CoreError::NegativeId(-1).into(),
        CoreError::TimestampAfterEnd {
            unix_ms: i64::MAX,
            field: layout.time_field(),
        }
        .into(),
        CoreError::InvalidLayout { reason: "x".into() }.into(),
    ];
    for error in errors {
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
