use super::*;
use proptest::prelude::*;

#[test]
fn known_values() {
    assert_eq!(encode(0).unwrap(), "0000000000000");
    assert_eq!(encode(31).unwrap(), "000000000000Z");
    assert_eq!(encode(i64::MAX).unwrap(), "7ZZZZZZZZZZZZ");
    assert_eq!(decode("7ZZZZZZZZZZZZ"), Ok(i64::MAX));
    assert_eq!(decode("z"), Ok(31));
    assert_eq!(decode("1o-il"), decode("1011"));
}

#[test]
fn bad_text_is_refused_with_the_reason() {
    for (text, reason) in [
        ("", "it has no digits"),
        ("---", "it has no digits"),
        ("8000000000000", "its value does not fit a positive bigint"),
        ("00000000000000", "it has more than 13 digits"),
        ("12U4", "'U' is not a base-32 digit"),
        ("12 4", "' ' is not a base-32 digit"),
    ] {
        assert_eq!(
            decode(text),
            Err(Error::InvalidBase32 {
                text: text.into(),
                reason: reason.into()
            })
        );
    }
    assert_eq!(encode(-1), Err(Error::NegativeId(-1)));
}

proptest! {
    #[test]
    fn round_trips(id in 0..=i64::MAX) {
        let text = encode(id).unwrap();
        prop_assert_eq!(text.len(), WIDTH);
        prop_assert_eq!(decode(&text), Ok(id));
        prop_assert_eq!(decode(&text.to_lowercase()), Ok(id));
    }

    #[test]
    fn text_sorts_as_the_numbers_do(a in 0..=i64::MAX, b in 0..=i64::MAX) {
        prop_assert_eq!(encode(a).unwrap().cmp(&encode(b).unwrap()), a.cmp(&b));
    }
}
