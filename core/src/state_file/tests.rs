use super::*;
use crate::layout::DEFAULT_LAYOUT;

fn formatted(layout: &Layout, until: i64) -> Vec<u8> {
    let mut buffer = [0u8; MAX_LEN];
    format(layout, until, &mut buffer).to_vec()
}

/// A line with a correct check value, whatever its body says.
fn with_check(body: &str) -> Vec<u8> {
    format!("{body} check={:016x}\n", checksum(body.as_bytes())).into_bytes()
}

#[test]
fn state_round_trips_over_the_whole_range() {
    let seconds = Layout::from_parts(1_700_000_000_000, 1000, 22, 9).unwrap();
    for layout in [DEFAULT_LAYOUT, seconds] {
        for until in [
            i64::MIN,
            -1,
            0,
            1,
            1_704_067_200_000,
            3_903_090_455_552,
            i64::MAX,
        ] {
            assert_eq!(
                parse(&formatted(&layout, until)),
                Ok(State::Reservation { until, layout })
            );
        }
    }
}

#[test]
fn state_line_is_readable() {
    let line = String::from_utf8(formatted(&DEFAULT_LAYOUT, 1_704_067_201_000)).unwrap();
    assert!(line.starts_with(
        "pg_snowflake reservation v1 until=1704067201000 layout=1704067200000/1/10/12 check="
    ));
    assert!(line.ends_with('\n'));
}

#[test]
fn the_upgrade_marker_is_recognised_and_nothing_else_is_taken_for_it() {
    assert_eq!(parse(UPGRADE_MARKER), Ok(State::AwaitingCarry));
    let mut changed = UPGRADE_MARKER.to_vec();
    changed[0] = b'P';
    assert!(parse(&changed).is_err());
    assert!(parse(&UPGRADE_MARKER[..UPGRADE_MARKER.len() - 1]).is_err());
}

#[test]
fn a_reservation_of_another_layout_is_refused() {
    let other = Layout::from_parts(DEFAULT_LAYOUT.epoch_unix_ms, 10, 10, 12).unwrap();
    assert_eq!(
        check_layout(&other, &DEFAULT_LAYOUT),
        Err(Error::LayoutChanged {
            recorded: other.describe(),
            configured: DEFAULT_LAYOUT.describe()
        })
    );
    assert_eq!(check_layout(&DEFAULT_LAYOUT, &DEFAULT_LAYOUT), Ok(()));
}

#[test]
fn damaged_state_is_refused_with_a_reason() {
    let good = formatted(&DEFAULT_LAYOUT, 1_704_067_201_000);
    let changed = String::from_utf8(good.clone())
        .unwrap()
        .replace("until=1704067201000", "until=1704067209000");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "does not end with a newline"),
        (
            good[..good.len() - 1].to_vec(),
            "does not end with a newline",
        ),
        (good[..20].to_vec(), "does not end with a newline"),
        (b"hello\n".to_vec(), "no check field"),
        (vec![0xff, 0xfe, b'\n'], "not text"),
        (changed.into_bytes(), "check value does not match"),
        (with_check("hello"), "does not start with"),
        (
            with_check("pg_snowflake reservation v1 until=5"),
            "no layout field",
        ),
        (
            with_check("pg_snowflake reservation v1 until=x layout=0/1/10/12"),
            "is not a time",
        ),
        (
            with_check("pg_snowflake reservation v1 until=5 layout=0/1/10"),
            "is not a layout",
        ),
        (
            with_check("pg_snowflake reservation v1 until=5 layout=0/0/10/12"),
            "its layout is invalid: the time unit is 0 ms",
        ),
    ];
    for (bytes, reason) in cases {
        let err = parse(&bytes).unwrap_err();
        assert!(err.contains(reason), "{bytes:?}: {err}");
    }
}
