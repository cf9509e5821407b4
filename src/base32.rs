//! The compact text form of an ID: 13 characters of Crockford's base 32, fixed width, so that
//! the text sorts exactly as the numbers do and survives JSON, URLs and JavaScript untouched.
//!
//! Pure Rust, tested by `cargo test`.

use crate::error::SnowflakeError;

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// 13 × 5 = 65 bits hold the 63 bits of a positive `i64`.
pub const WIDTH: usize = 13;

/// The 13-character form of a non-negative ID.
pub fn encode(id: i64) -> Result<String, SnowflakeError> {
    if id < 0 {
        return Err(SnowflakeError::NegativeId(id));
    }
    let id = id as u64;
    Ok((0..WIDTH)
        .rev()
        .map(|digit| ALPHABET[((id >> (5 * digit)) & 31) as usize] as char)
        .collect())
}

/// Reads the text form back: case-insensitive, with Crockford's readings of I and L as 1 and
/// O as 0, hyphens ignored; 1 to 13 digits whose value fits a positive `i64`.
pub fn decode(text: &str) -> Result<i64, SnowflakeError> {
    let invalid = |reason: &str| SnowflakeError::InvalidBase32 {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    let mut value: u64 = 0;
    let mut digits = 0;
    for c in text.chars().filter(|&c| c != '-') {
        let digit = match c.to_ascii_uppercase() {
            'I' | 'L' => 1,
            'O' => 0,
            c => ALPHABET
                .iter()
                .position(|&a| a as char == c)
                .ok_or_else(|| invalid(&format!("'{c}' is not a base-32 digit")))?
                as u64,
        };
        digits += 1;
        if digits > WIDTH {
            return Err(invalid("it has more than 13 digits"));
        }
        value = (value << 5) | digit;
    }
    if digits == 0 {
        return Err(invalid("it has no digits"));
    }
    i64::try_from(value).map_err(|_| invalid("its value does not fit a positive bigint"))
}

#[cfg(test)]
mod tests {
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
                Err(SnowflakeError::InvalidBase32 {
                    text: text.into(),
                    reason: reason.into()
                })
            );
        }
        assert_eq!(encode(-1), Err(SnowflakeError::NegativeId(-1)));
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
}
