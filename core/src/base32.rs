//! The compact text form of an ID: 13 characters of Crockford's base 32, fixed width, so that
//! the text sorts exactly as the numbers do and survives JSON, URLs and JavaScript untouched.
//!
//! Pure Rust, tested by `cargo test`.

use crate::error::Error;

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// 13 × 5 = 65 bits hold the 63 bits of a positive `i64`.
pub const WIDTH: usize = 13;

/// The 13-character form of a non-negative ID.
pub fn encode(id: i64) -> Result<String, Error> {
    if id < 0 {
        return Err(Error::NegativeId(id));
    }
    let id = id as u64;
    Ok((0..WIDTH)
        .rev()
        .map(|digit| ALPHABET[((id >> (5 * digit)) & 31) as usize] as char)
        .collect())
}

/// Reads the text form back: case-insensitive, with Crockford's readings of I and L as 1 and
/// O as 0, hyphens ignored; 1 to 13 digits whose value fits a positive `i64`.
///
/// 13 digits carry 65 bits, so a first digit past 7 is refused rather than shifted out: the
/// value is built with checked arithmetic, which release builds keep (a plain shift would wrap
/// and read `G000000000000` as 0, another ID's text).
pub fn decode(text: &str) -> Result<i64, Error> {
    let invalid = |reason: &str| Error::InvalidBase32 {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    // `None` once the value no longer fits; the text is still read to its end, so that a bad
    // character or a 14th digit is the reason given when there is one.
    let mut value: Option<i64> = Some(0);
    let mut digits = 0;
    for c in text.chars().filter(|&c| c != '-') {
        let digit = match c.to_ascii_uppercase() {
            'I' | 'L' => 1,
            'O' => 0,
            c => ALPHABET
                .iter()
                .position(|&a| a as char == c)
                .ok_or_else(|| invalid(&format!("'{c}' is not a base-32 digit")))?
                as i64,
        };
        digits += 1;
        if digits > WIDTH {
            return Err(invalid("it has more than 13 digits"));
        }
        // A multiple of 32 that fits leaves room for any digit in its low 5 bits.
        value = value.and_then(|v| v.checked_mul(32)).map(|v| v | digit);
    }
    if digits == 0 {
        return Err(invalid("it has no digits"));
    }
    value.ok_or_else(|| invalid("its value does not fit a positive bigint"))
}

#[cfg(test)]
mod tests;
