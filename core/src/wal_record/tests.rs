use super::*;
use crate::layout::DEFAULT_LAYOUT;

#[test]
fn reservations_round_trip() {
    let seconds = Layout::from_parts(1_700_000_000_000, 1000, 22, 9).unwrap();
    for layout in [DEFAULT_LAYOUT, seconds] {
        for until in [i64::MIN, 0, 1_704_067_201_000, i64::MAX] {
            assert_eq!(
                decode(&encode(until, &layout, 1023)),
                Some((until, layout, Some(1023)))
            );
            // 0.3.0's record: the first 32 bytes, no node id.
            assert_eq!(
                decode(&encode(until, &layout, 1023)[..32]),
                Some((until, layout, None))
            );
        }
    }
}

#[test]
fn other_payloads_are_not_reservations() {
    let good = encode(1_704_067_201_000, &DEFAULT_LAYOUT, 1);
    assert_eq!(decode(&good[..LEN - 1]), None);
    assert_eq!(decode(&good[..31]), None);
    assert_eq!(decode(&[0u8; LEN + 1]), None);
    let mut zero_unit = good;
    zero_unit[16..24].copy_from_slice(&0i64.to_le_bytes());
    assert_eq!(decode(&zero_unit), None);
}
