use super::*;
use proptest::prelude::*;

const L: Layout = DEFAULT_LAYOUT;

#[test]
fn default_layout_is_twitters_and_fills_63_bits() {
    assert_eq!((L.time_bits, L.node_bits, L.seq_bits), (41, 10, 12));
    assert_eq!(L.time_bits + L.node_bits + L.seq_bits, 63);
    assert_eq!(L.max_node(), 1023);
    assert_eq!(L.max_seq(), 4095);
}

#[test]
fn field_positions_match_the_documented_decoding() {
    let id = L
        .compose(Parts {
            time: 5,
            node: 7,
            seq: 9,
        })
        .unwrap();
    assert_eq!(id >> 22, 5);
    assert_eq!((id >> 12) & 1023, 7);
    assert_eq!(id & 4095, 9);
}

#[test]
fn largest_id_is_i64_max_and_positive() {
    let id = L
        .compose(Parts {
            time: L.max_time(),
            node: L.max_node(),
            seq: L.max_seq(),
        })
        .unwrap();
    assert_eq!(id, i64::MAX);
}

#[test]
fn time_past_the_field_is_refused_not_wrapped() {
    let err = L
        .compose(Parts {
            time: L.max_time() + 1,
            node: 0,
            seq: 0,
        })
        .unwrap_err();
    assert_eq!(
        err,
        Error::TimeExhausted {
            end_unix_ms: L.end_unix_ms()
        }
    );
}

#[test]
fn node_out_of_range_is_refused() {
    let err = L
        .compose(Parts {
            time: 0,
            node: 1024,
            seq: 0,
        })
        .unwrap_err();
    assert_eq!(
        err,
        Error::NodeOutOfRange {
            node: 1024,
            max: 1023
        }
    );
}

#[test]
fn sequence_out_of_range_is_refused() {
    let err = L
        .compose(Parts {
            time: 0,
            node: 0,
            seq: 4096,
        })
        .unwrap_err();
    assert_eq!(
        err,
        Error::SequenceOutOfRange {
            seq: 4096,
            max: 4095
        }
    );
}

#[test]
fn negative_ids_do_not_decode() {
    assert_eq!(L.decompose(-1), Err(Error::NegativeId(-1)));
    assert_eq!(L.decompose(i64::MIN), Err(Error::NegativeId(i64::MIN)));
}

#[test]
fn end_of_the_time_field_is_in_september_2093() {
    assert_eq!(
        format_unix_ms(L.end_unix_ms()),
        "2093-09-06 15:47:35.551 UTC"
    );
}

#[test]
fn bounds_at_the_epoch_and_at_the_end_of_the_time_field() {
    assert_eq!(L.first_id_at(DEFAULT_EPOCH_UNIX_MS), Ok(0));
    assert_eq!(L.last_id_at(DEFAULT_EPOCH_UNIX_MS), Ok((1 << 22) - 1));
    assert_eq!(
        L.first_id_at(L.end_unix_ms()),
        Ok(i64::MAX - ((1 << 22) - 1))
    );
    assert_eq!(L.last_id_at(L.end_unix_ms()), Ok(i64::MAX));
}

#[test]
fn bounds_outside_the_time_field_are_refused() {
    let before = DEFAULT_EPOCH_UNIX_MS - 1;
    let after = L.end_unix_ms() + 1;
    for bound in [Layout::first_id_at, Layout::last_id_at] {
        assert_eq!(
            bound(&L, before),
            Err(Error::TimestampBeforeEpoch {
                unix_ms: before,
                field: L.time_field()
            })
        );
        assert_eq!(
            bound(&L, after),
            Err(Error::TimestampAfterEnd {
                unix_ms: after,
                field: L.time_field()
            })
        );
        assert_eq!(
            bound(&L, i64::MIN),
            Err(Error::TimestampBeforeEpoch {
                unix_ms: i64::MIN,
                field: L.time_field()
            })
        );
        assert_eq!(
            bound(&L, i64::MAX),
            Err(Error::TimestampAfterEnd {
                unix_ms: i64::MAX,
                field: L.time_field()
            })
        );
    }
}

#[test]
fn a_utc_day_of_ids_is_a_fixed_width_range() {
    // The epoch is a UTC midnight, so day boundaries are multiples of one day's width.
    let day_ms = 86_400_000;
    let width = day_ms << 22;
    for day in [0, 1, 365, 1000] {
        let start = DEFAULT_EPOCH_UNIX_MS + day * day_ms;
        assert_eq!(L.first_id_at(start), Ok(day * width));
        assert_eq!(L.last_id_at(start + day_ms - 1), Ok((day + 1) * width - 1));
    }
}

/// The presets the README lists.
fn presets() -> Vec<(&'static str, Layout)> {
    let layout = |unit, node, seq| Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, unit, node, seq);
    vec![
        ("twitter", DEFAULT_LAYOUT),
        ("seconds, 22 node bits", layout(1000, 22, 9).unwrap()),
        ("bursty, 16 sequence bits", layout(1, 8, 16).unwrap()),
        ("sonyflake, 10 ms", layout(10, 16, 8).unwrap()),
    ]
}

#[test]
fn presets_have_the_documented_shapes_and_ends() {
    let ends: Vec<(u32, String)> = presets()
        .iter()
        .map(|(_, l)| (l.time_bits, format_unix_ms(l.end_unix_ms())))
        .collect();
    assert_eq!(
        ends,
        vec![
            (41, "2093-09-06 15:47:35.551 UTC".to_string()),
            (32, "2160-02-07 06:28:15.000 UTC".to_string()),
            (39, "2041-06-02 21:56:53.887 UTC".to_string()),
            (39, "2198-03-18 03:28:58.870 UTC".to_string()),
        ]
    );
}

#[test]
fn layouts_that_cannot_work_are_refused_with_the_reason() {
    let now = DEFAULT_EPOCH_UNIX_MS + 86_400_000;
    let reason = |r: Result<Layout, Error>| match r {
        Err(Error::InvalidLayout { reason }) => reason,
        other => panic!("{other:?}"),
    };
    let e = DEFAULT_EPOCH_UNIX_MS;
    assert_eq!(
        reason(Layout::new(e, 1, 40, 30, now)),
        "40 node bits and 30 sequence bits: node bits run from 0 to 31, sequence bits from 1 to 31"
    );

    assert_eq!(
        reason(Layout::new(e, 0, 10, 12, now)),
        "the time unit is 0 ms; it must be at least 1 ms"
    );
    assert_eq!(
        reason(Layout::new(now + 1, 1, 10, 12, now)),
        "the epoch 2024-01-02 00:00:00.001 UTC is in the future"
    );
    // A time field that has run out starts (nextval then says it is exhausted).
    let short = Layout::new(e, 1, 21, 22, now).unwrap();
    assert_eq!(short.time_bits, 20);
    assert_eq!(
        format_unix_ms(short.end_unix_ms()),
        "2024-01-01 00:17:28.575 UTC"
    );
    assert_eq!(
        reason(Layout::new(-1, 1, 10, 12, now)),
        "the epoch 1969-12-31 23:59:59.999 UTC is not between 1970-01-01 and 9999-12-31"
    );
    assert_eq!(Layout::new(e, 1, 10, 12, now), Ok(DEFAULT_LAYOUT));
    // What the settings refuse, the decoders' layout arguments refuse too: the same function.
    assert_eq!(
        reason(Layout::new(e, 86_400_001, 10, 12, now)),
        "the time unit is 86400001 ms; it must be at most 86400000 ms (a day)"
    );
    assert_eq!(
        reason(Layout::new(e, 1, 31, 31, now)),
        "31 node bits and 31 sequence bits leave 1 bits of time; the time field needs at least 16"
    );
    assert_eq!(
        Layout::new(e, 1, 24, 23, now).map(|l| l.time_bits),
        Ok(MIN_TIME_BITS)
    );
    assert_eq!(
        reason(Layout::new(32_503_680_000_000, 1, 10, 12, now)),
        "the epoch 3000-01-01 00:00:00.000 UTC is in the future"
    );
}

#[test]
fn long_time_fields_end_in_year_9999() {
    let days = Layout::from_parts(0, 86_400_000, 0, 1).unwrap();
    assert_eq!(days.time_bits, 62);
    assert_eq!(
        format_unix_ms(days.end_unix_ms()),
        "9999-12-31 00:00:00.000 UTC"
    );
    let beyond = days.pack(Parts {
        time: days.end_tick() + 1,
        node: 0,
        seq: 0,
    });
    assert_eq!(
        days.id_unix_ms(beyond),
        Err(Error::IdBeyondTimeField {
            id: beyond,
            field: days.time_field()
        })
    );
}

proptest! {
    #[test]
    fn decompose_inverts_compose(
        time in 0..=L.max_time(),
        node in 0..=L.max_node(),
        seq in 0..=L.max_seq(),
    ) {
        let parts = Parts { time, node, seq };
        let id = L.compose(parts).unwrap();
        prop_assert!(id >= 0);
        prop_assert_eq!(L.decompose(id).unwrap(), parts);
    }

    #[test]
    fn every_id_of_a_millisecond_lies_within_its_bounds(
        time in 0..=L.max_time(),
        node in 0..=L.max_node(),
        seq in 0..=L.max_seq(),
    ) {
        let unix_ms = L.unix_ms(time);
        let id = L.compose(Parts { time, node, seq }).unwrap();
        prop_assert!(L.first_id_at(unix_ms).unwrap() <= id);
        prop_assert!(id <= L.last_id_at(unix_ms).unwrap());
        if time < L.max_time() {
            prop_assert!(id < L.first_id_at(unix_ms + 1).unwrap());
        }
    }

    #[test]
    fn any_valid_layout_round_trips(
        node_bits in 0u32..=20, seq_bits in 1u32..=20, unit in 1i64..=1000, id in 0..=i64::MAX
    ) {
        let layout = Layout::from_parts(DEFAULT_EPOCH_UNIX_MS, unit, node_bits, seq_bits).unwrap();
        prop_assert_eq!(layout.time_bits + node_bits + seq_bits, 63);
        let parts = layout.decompose(id).unwrap();
        prop_assert_eq!(layout.pack(parts), id);
    }

    #[test]
    fn compose_inverts_decompose(id in 0..=i64::MAX) {
        prop_assert_eq!(L.compose(L.decompose(id).unwrap()).unwrap(), id);
    }

    #[test]
    fn ids_order_by_time_first(a in 0..L.max_time(), node_a in 0..=L.max_node(),
                               node_b in 0..=L.max_node(), seq_a in 0..=L.max_seq(),
                               seq_b in 0..=L.max_seq()) {
        let earlier = L.compose(Parts { time: a, node: node_a, seq: seq_a }).unwrap();
        let later = L.compose(Parts { time: a + 1, node: node_b, seq: seq_b }).unwrap();
        prop_assert!(earlier < later);
    }
}

#[test]
fn a_reservation_of_another_layout_is_refused() {
    let other = Layout::from_parts(DEFAULT_LAYOUT.epoch_unix_ms, 10, 10, 12).unwrap();
    assert_eq!(
        other.check_same(&DEFAULT_LAYOUT),
        Err(Error::LayoutChanged {
            recorded: other.describe(),
            configured: DEFAULT_LAYOUT.describe()
        })
    );
    assert_eq!(DEFAULT_LAYOUT.check_same(&DEFAULT_LAYOUT), Ok(()));
}
