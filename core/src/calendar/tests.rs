use super::*;
use crate::layout::DEFAULT_EPOCH_UNIX_MS;
use proptest::prelude::*;

#[test]
fn formats_known_dates() {
    assert_eq!(format_unix_ms(0), "1970-01-01 00:00:00.000 UTC");
    assert_eq!(
        format_unix_ms(DEFAULT_EPOCH_UNIX_MS),
        "2024-01-01 00:00:00.000 UTC"
    );
    assert_eq!(
        format_unix_ms(951_782_400_123),
        "2000-02-29 00:00:00.123 UTC"
    );
    assert_eq!(format_unix_ms(-1), "1969-12-31 23:59:59.999 UTC");
}

#[test]
fn epochs_parse_in_the_documented_forms() {
    for (text, expected) in [
        ("2024-01-01", DEFAULT_EPOCH_UNIX_MS),
        ("2024-01-01 00:00:00+00", DEFAULT_EPOCH_UNIX_MS),
        ("2024-01-01T00:00Z", DEFAULT_EPOCH_UNIX_MS),
        (" 2024-01-01 00:00:00 UTC ", DEFAULT_EPOCH_UNIX_MS),
        ("2024-01-01 00:00:00.5+00:00", DEFAULT_EPOCH_UNIX_MS + 500),
        ("2010-11-04 01:42:54.657", 1_288_834_974_657),
        ("2000-02-29", 951_782_400_000),
        ("1970-01-01", 0),
    ] {
        assert_eq!(parse_epoch(text), Ok(expected), "{text}");
    }
    for text in [
        "",
        "2024",
        "2024-13-01",
        "2023-02-29",
        "2024-01-01 24:00",
        "2024-01-01 00:00:00+01",
        "2024-01-01 00:00:00.1234",
        "yesterday",
    ] {
        assert_eq!(
            parse_epoch(text),
            Err(format!(
                "\"{text}\" is not a UTC timestamp like \"2024-01-01 00:00:00+00\" or \"2024-01-01\""
            )),
            "{text}"
        );
    }
}

#[test]
fn rfc3339_for_json() {
    assert_eq!(
        format_rfc3339(DEFAULT_EPOCH_UNIX_MS + 1),
        "2024-01-01T00:00:00.001Z"
    );
}

#[test]
fn infinities_are_named() {
    assert_eq!(format_instant(i64::MAX), "infinity");
    assert_eq!(format_instant(i64::MIN), "-infinity");
    assert_eq!(format_instant(0), "1970-01-01 00:00:00.000 UTC");
}

/// 0000-01-01 00:00:00 UTC: the first instant a four-digit year names.
const YEAR_0_UNIX_MS: i64 = -62_167_219_200_000;

#[test]
fn the_four_digit_years_run_from_year_0_to_9999() {
    assert_eq!(parse_epoch("0000-01-01"), Ok(YEAR_0_UNIX_MS));
    assert_eq!(
        parse_epoch("9999-12-31 23:59:59.999"),
        Ok(crate::layout::LATEST_END_UNIX_MS)
    );
}

/// An epoch text from its fields, as a user might write it: date, optional time with optional
/// seconds and fraction, `T` or a space, and a marker (`+01` is not UTC).
fn epoch_text(
    (year, month, day): (i64, i64, i64),
    time: Option<(i64, i64, Option<i64>, Option<String>)>,
    separator: char,
    marker: &str,
) -> String {
    let mut text = format!("{year:04}-{month:02}-{day:02}");
    if let Some((hour, minute, second, fraction)) = time {
        text += &format!("{separator}{hour:02}:{minute:02}");
        if let Some(second) = second {
            text += &format!(":{second:02}");
        }
        if let Some(fraction) = fraction {
            text += &format!(".{fraction}");
        }
    }
    text + marker
}

/// Characters of epoch texts, to build texts that are often nearly right.
fn near_epoch_texts() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        proptest::sample::select(
            "0123456789--::. TZUC+0"
                .chars()
                .chain(['é', '٣'])
                .collect::<Vec<_>>(),
        ),
        0..=32,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// What `parse_epoch` must hold of any text it accepts: the instant lies within the four-digit
/// years, and the calendar's own formats of it parse back to it.
fn check_accepted(text: &str) -> Result<(), TestCaseError> {
    if let Ok(unix_ms) = parse_epoch(text) {
        prop_assert!(
            (YEAR_0_UNIX_MS..=crate::layout::LATEST_END_UNIX_MS).contains(&unix_ms),
            "{:?} parsed to {}",
            text,
            unix_ms
        );
        prop_assert_eq!(
            parse_epoch(&format_unix_ms(unix_ms)),
            Ok(unix_ms),
            "{:?}",
            text
        );
        prop_assert_eq!(
            parse_epoch(&format_rfc3339(unix_ms)),
            Ok(unix_ms),
            "{:?}",
            text
        );
    }
    Ok(())
}

proptest! {
    /// Every instant of the four-digit years, formatted by the calendar, parses back to itself.
    #[test]
    fn formatted_instants_parse_back(
        unix_ms in YEAR_0_UNIX_MS..=crate::layout::LATEST_END_UNIX_MS,
    ) {
        prop_assert_eq!(parse_epoch(&format_unix_ms(unix_ms)), Ok(unix_ms));
        prop_assert_eq!(parse_epoch(&format_rfc3339(unix_ms)), Ok(unix_ms));
    }

    /// An accepted text names the instant it parses to (its fields are what the calendar
    /// formats that instant as: no day or hour rolls over into the next), and every text whose
    /// fields are plainly in range is accepted.
    #[test]
    fn accepted_epoch_names_its_fields(
        date in (0i64..=9999, 0i64..=13, 0i64..=32),
        time in proptest::option::of((
            0i64..=24,
            0i64..=60,
            proptest::option::of(0i64..=60),
            proptest::option::of("[0-9]{1,4}"),
        )),
        separator in proptest::sample::select(vec![' ', 'T']),
        marker in proptest::sample::select(vec!["", "Z", " UTC", "+00", "+00:00", "+01"]),
    ) {
        let text = epoch_text(date, time.clone(), separator, marker);
        let (year, month, day) = date;
        let (hour, minute, second, fraction) = time.unwrap_or((0, 0, Some(0), None));
        let fraction = fraction.unwrap_or_default();
        match parse_epoch(&text) {
            Ok(unix_ms) => prop_assert_eq!(
                format_unix_ms(unix_ms),
                format!(
                    "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{:02}.{fraction:0<3} UTC",
                    second.unwrap_or(0)
                ),
                "{:?}",
                text
            ),
            Err(message) => prop_assert!(
                marker == "+01"
                    || !(1..=12).contains(&month)
                    || !(1..=28).contains(&day)
                    || hour > 23
                    || minute > 59
                    || second.unwrap_or(0) > 59
                    || fraction.len() > 3,
                "{:?}: {}",
                text,
                message
            ),
        }
    }

    /// Near-miss texts: never a panic, and whatever is accepted keeps `check_accepted`.
    #[test]
    fn near_epoch_texts_are_parsed_or_refused(text in near_epoch_texts()) {
        check_accepted(&text)?;
    }

    /// Any text at all: never a panic, and whatever is accepted keeps `check_accepted`.
    #[test]
    fn any_text_is_parsed_or_refused(text in "\\PC{0,40}") {
        check_accepted(&text)?;
    }
}
