use super::*;
use crate::layout::DEFAULT_LAYOUT;

#[test]
fn reservations_round_trip() {
    let seconds = Layout::from_parts(1_700_000_000_000, 1000, 22, 9).unwrap();
    for layout in [DEFAULT_LAYOUT, seconds] {
        for until in [i64::MIN, 0, 1_704_067_201_000, i64::MAX] {
            let identity = Identity {
                token: u128::MAX - 7,
                generation: 12,
            };
            let record = Record {
                until,
                layout,
                node: Some(1023),
                identity: Some(identity),
            };
            let (bytes, len) = encode(until, &layout, 1023, Some(identity));
            assert_eq!(len, LEN);
            assert_eq!(decode(&bytes[..len]), Some(record));
            // Without a claim, and 0.4.0's record: 36 bytes.
            let (bytes, len) = encode(until, &layout, 1023, None);
            assert_eq!(len, LEN_NO_CLAIM);
            let unclaimed = Record {
                identity: None,
                ..record
            };
            assert_eq!(decode(&bytes[..len]), Some(unclaimed));
            // 0.3.0's record: the first 32 bytes, no node id.
            assert_eq!(
                decode(&bytes[..32]),
                Some(Record {
                    node: None,
                    ..unclaimed
                })
            );
        }
    }
}

#[test]
fn other_payloads_are_not_reservations() {
    let (good, _) = encode(1_704_067_201_000, &DEFAULT_LAYOUT, 1, None);
    assert_eq!(decode(&good[..LEN - 1]), None);
    assert_eq!(decode(&good[..LEN_NO_CLAIM + 1]), None);
    assert_eq!(decode(&good[..31]), None);
    assert_eq!(decode(&[0u8; LEN + 1]), None);
    let mut zero_unit = good;
    zero_unit[16..24].copy_from_slice(&0i64.to_le_bytes());
    assert_eq!(decode(&zero_unit), None);
}
