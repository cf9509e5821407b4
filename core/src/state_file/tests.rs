use super::*;
use crate::layout::DEFAULT_LAYOUT;

fn reservation(layout: Layout, until: i64) -> Reservation {
    Reservation {
        until,
        layout,
        node: Some(5),
        history: History::EMPTY,
        system: Some(7_123_456_789_012_345_678),
        identity: Some(crate::registry::Identity {
            token: 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
            generation: 42,
        }),
    }
}

fn formatted(layout: &Layout, until: i64) -> Vec<u8> {
    write(&reservation(*layout, until))
}

fn write(reservation: &Reservation) -> Vec<u8> {
    let mut buffer = [0u8; MAX_LEN];
    format(reservation, &mut buffer).to_vec()
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
                Ok(State::Reservation(reservation(layout, until)))
            );
        }
    }
}

#[test]
fn state_line_is_readable() {
    let line = String::from_utf8(formatted(&DEFAULT_LAYOUT, 1_704_067_201_000)).unwrap();
    assert!(
        line.starts_with(
            "pg_snowflake reservation v3 until=1704067201000 node=5 used=- \
             system=7123456789012345678 claim=0123456789abcdef0123456789abcdef/42 \
             layout=1704067200000/1/10/12 check="
        ),
        "{line}"
    );
    assert!(line.ends_with('\n'));
}

#[test]
fn the_markers_are_recognised_and_nothing_else_is_taken_for_them() {
    for (marker, state) in [
        (UPGRADE_MARKER, State::AwaitingOldStateFile),
        (HISTORY_LOST_MARKER, State::HistoryLost),
    ] {
        assert_eq!(parse(marker), Ok(state));
        let mut changed = marker.to_vec();
        changed[0] = b'P';
        assert!(parse(&changed).is_err());
        assert!(parse(&marker[..marker.len() - 1]).is_err());
    }
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
            with_check("pg_snowflake reservation v2 until=5 layout=0/1/10/12"),
            "no node= field",
        ),
        (
            with_check(
                "pg_snowflake reservation v2 until=5 node=x used=- system=- layout=0/1/10/12",
            ),
            "\"x\" is not a node id",
        ),
        (
            with_check(
                "pg_snowflake reservation v2 until=5 node=1 used=2,3 system=- layout=0/1/10/12",
            ),
            "is not a history",
        ),
        (
            with_check("pg_snowflake reservation v1 until=5 node=1 layout=0/1/10/12"),
            "fields this version does not know",
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

#[test]
fn a_file_of_0_3_0_is_still_read_with_its_node_unknown() {
    let v1 =
        with_check("pg_snowflake reservation v1 until=1704067201000 layout=1704067200000/1/10/12");
    assert_eq!(
        parse(&v1),
        Ok(State::Reservation(Reservation {
            until: 1_704_067_201_000,
            layout: DEFAULT_LAYOUT,
            node: None,
            history: History::EMPTY,
            system: None,
            identity: None,
        }))
    );
}

#[test]
fn a_file_of_0_4_0_is_still_read_with_no_claim() {
    let v2 = with_check(
        "pg_snowflake reservation v2 until=1704067201000 node=3 used=- system=99 \
         layout=1704067200000/1/10/12",
    );
    assert_eq!(
        parse(&v2),
        Ok(State::Reservation(Reservation {
            until: 1_704_067_201_000,
            layout: DEFAULT_LAYOUT,
            node: Some(3),
            history: History::EMPTY,
            system: Some(99),
            identity: None,
        }))
    );
}

#[test]
fn claims_round_trip_and_bad_ones_are_refused() {
    let none = Reservation {
        identity: None,
        ..reservation(DEFAULT_LAYOUT, 99)
    };
    assert_eq!(parse(&write(&none)), Ok(State::Reservation(none)));
    let text = String::from_utf8(write(&reservation(DEFAULT_LAYOUT, 99))).unwrap();
    assert!(
        text.contains(" claim=0123456789abcdef0123456789abcdef/42 "),
        "{text}"
    );
    for bad in [
        "claim=12/1",
        "claim=0123456789abcdef0123456789abcdef/x",
        "claim=?",
    ] {
        let body = format!(
            "pg_snowflake reservation v3 until=1 node=3 used=- system=9 {bad} \
             layout=1704067200000/1/10/12"
        );
        let err = parse(&with_check(&body)).unwrap_err();
        assert!(err.contains("is not a registry claim"), "{bad}: {err}");
    }
}

#[test]
fn histories_round_trip_up_to_their_size_and_then_stand_for_every_node() {
    let mut history = History::EMPTY;
    for node in 0..HISTORY_NODES as u32 {
        history.add(Some(node * 1000), 10 + i64::from(node));
        let written = Reservation {
            history,
            ..reservation(DEFAULT_LAYOUT, 99)
        };
        assert_eq!(parse(&write(&written)), Ok(State::Reservation(written)));
    }
    assert!(!history.covers(1));
    history.add(Some(1), 5);
    assert!(history.covers(1) && history.covers(123_456));
    assert_eq!(history.until, 10 + HISTORY_NODES as i64 - 1);
    let written = Reservation {
        history,
        ..reservation(DEFAULT_LAYOUT, 99)
    };
    assert_eq!(parse(&write(&written)), Ok(State::Reservation(written)));
}

#[test]
fn a_fresh_node_id_owes_nothing_and_an_old_one_resumes_above_its_ids() {
    let lead = 1_704_067_201_000 + 10 * 365 * 86_400_000; // ten years ahead
    let on_5 = reservation(DEFAULT_LAYOUT, lead);
    // The same node id: above its reservation.
    assert_eq!(resume(&on_5, 5), (lead, History::EMPTY));
    // A node id never used here: no floor; node 5 goes into the history.
    let (floor, history) = resume(&on_5, 6);
    assert_eq!(floor, i64::MIN);
    assert!(history.covers(5) && !history.covers(6) && history.until == lead);
    // Node 6 issues IDs now (its reservation far below 5's)...
    let on_6 = Reservation {
        node: Some(6),
        until: 1_704_067_300_000,
        history,
        ..on_5
    };
    // ...and switched back to 5: above 5's old reservation, not only 6's.
    assert_eq!(resume(&on_6, 5).0, lead);
    // A third, fresh one owes nothing to either.
    assert_eq!(resume(&on_6, 7).0, i64::MIN);
    // Switched back to 6 after 5 ran again: above both (the history keeps one highest mark).
    let (floor, history) = resume(&on_6, 5);
    let on_5_again = Reservation {
        node: Some(5),
        until: floor + 1_000,
        history,
        ..on_5
    };
    assert_eq!(resume(&on_5_again, 6).0, floor + 1_000);
    // A file of 0.3.0 names no node: every node id resumes above it.
    let v1 = Reservation {
        node: None,
        system: None,
        ..on_5
    };
    assert_eq!(resume(&v1, 6).0, lead);
    assert_eq!(resume(&v1, 5).0, lead);
}
