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
        // 13 digits carry 65 bits: a first digit past 7 must be refused, not shifted out.
        ("G000000000000", "its value does not fit a positive bigint"),
        ("H000000000001", "its value does not fit a positive bigint"),
        ("QZZZZZZZZZZZZ", "its value does not fit a positive bigint"),
        ("ZZZZZZZZZZZZZ", "its value does not fit a positive bigint"),
        (
            "z-zzz-zzz-zzz-zzz",
            "its value does not fit a positive bigint",
        ),
        // Read to the end: a 14th digit or a bad character is the reason, even past a value
        // that no longer fits.
        ("G0000000000000", "it has more than 13 digits"),
        ("G00000000000U", "'U' is not a base-32 digit"),
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

/// What the text form promises, spelt out independently of `decode`: Crockford's readings
/// (case, I and L as 1, O as 0, hyphens dropped), then 1 to 13 digits left-padded to the
/// 13-digit text; `None` if the text is not made of base-32 digits, has none, or too many.
fn normalised(text: &str) -> Option<String> {
    let mut digits = String::new();
    for c in text.chars().filter(|&c| c != '-') {
        let c = match c.to_ascii_uppercase() {
            'I' | 'L' => '1',
            'O' => '0',
            c if c.is_ascii() && ALPHABET.contains(&(c as u8)) => c,
            _ => return None,
        };
        digits.push(c);
    }
    (1..=WIDTH)
        .contains(&digits.len())
        .then(|| format!("{digits:0>WIDTH$}"))
}

/// The canonical text of a decodable text: its normalised form, if the first of its 13 digits
/// leaves the value within 63 bits (0 to 7).
fn canonical(text: &str) -> Option<String> {
    normalised(text).filter(|n| n.as_bytes()[0] <= b'7')
}

/// Texts near the form: digits of either case, Crockford's extra readings, hyphens, a digit
/// outside the alphabet (U), a space and a few non-ASCII characters; 0 to 16 of them, or
/// exactly 13 digit-like ones, so that too long texts and 13-digit texts with a first digit
/// past 7 are frequent.
fn near_texts() -> impl Strategy<Value = String> {
    let digit = prop_oneof![
        8 => proptest::sample::select(ALPHABET.to_vec()).prop_map(char::from),
        4 => proptest::sample::select(ALPHABET.to_vec())
            .prop_map(|c| char::from(c).to_ascii_lowercase()),
        1 => proptest::sample::select(vec!['I', 'i', 'L', 'l', 'O', 'o']),
    ];
    let other = proptest::sample::select(vec!['-', 'U', 'u', ' ', 'ı', 'Ｚ', 'é', '٣', '\0']);
    prop_oneof![
        proptest::collection::vec(prop_oneof![12 => digit.clone(), 2 => other], 0..=16),
        proptest::collection::vec(digit, WIDTH),
    ]
    .prop_map(|chars| chars.into_iter().collect())
}

/// A 13-digit canonical text with any first digit (0..=Z) and the other 12 digits given.
fn thirteen_digits(first: u8, rest: &[u8]) -> String {
    std::iter::once(first)
        .chain(rest.iter().copied())
        .map(|i| char::from(ALPHABET[i as usize]))
        .collect()
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

    /// Every accepted text re-encodes to its canonical form, and every text with a canonical
    /// form is accepted: `decode` keeps exactly the promise written in `canonical`.
    #[test]
    fn accepted_text_re_encodes_to_its_canonical_form(text in near_texts()) {
        let re_encoded = decode(&text).ok().map(|id| encode(id).unwrap());
        prop_assert_eq!(re_encoded, canonical(&text), "{:?}", text);
    }

    /// Canonical texts with a first digit of 0 to 7 and the IDs are in one-to-one
    /// correspondence; any other first digit is refused, never read as another ID.
    #[test]
    fn canonical_texts_and_ids_correspond_one_to_one(
        first in 0u8..32,
        rest in proptest::collection::vec(0u8..32, WIDTH - 1),
    ) {
        let text = thirteen_digits(first, &rest);
        match decode(&text) {
            Ok(id) => {
                prop_assert!(first < 8, "{} decoded to {}", text, id);
                prop_assert_eq!(encode(id).unwrap(), text);
            }
            Err(e) => {
                prop_assert!(first >= 8, "{}: {:?}", text, e);
                prop_assert_eq!(
                    e,
                    Error::InvalidBase32 {
                        text: text.clone(),
                        reason: "its value does not fit a positive bigint".into()
                    }
                );
            }
        }
    }

    /// No two texts decode to one ID unless they normalise alike: pairs that differ only in
    /// their first digit (the digit whose top bits could be lost), and arbitrary pairs.
    #[test]
    fn texts_that_decode_alike_normalise_alike(
        a_first in 0u8..32,
        b_first in 0u8..32,
        rest in proptest::collection::vec(0u8..32, WIDTH - 1),
        c in near_texts(),
        d in near_texts(),
    ) {
        let (a, b) = (thirteen_digits(a_first, &rest), thirteen_digits(b_first, &rest));
        for (x, y) in [(&a, &b), (&c, &d), (&a, &c)] {
            if let (Ok(u), Ok(v)) = (decode(x), decode(y)) {
                prop_assert!(
                    u != v || normalised(x) == normalised(y),
                    "{:?} and {:?} both decode to {}", x, y, u
                );
            }
        }
    }
}
