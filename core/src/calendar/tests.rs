use super::*;
use crate::layout::DEFAULT_EPOCH_UNIX_MS;

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
