//! A deterministic fuzz of the core's parsers of outside text and bytes: `base32::decode` (the
//! SQL decoders), `calendar::parse_epoch` (the epoch setting), `state_file::parse` (the file a
//! server starts from) and `wal_record::decode` (what a standby replays); in a test of their own,
//! the backfill's file (`backfill::Ceilings::parse`) and WAL record (`backfill::decode`).
//!
//!     PGSF_FUZZ_CASES=10000000 cargo test -p snowflake-core --test fuzz -- --nocapture
//!
//! A small seeded PRNG (xorshift64*) mixes purely random input with mutations of valid input
//! (a digit changed, characters inserted or deleted, a first digit past 7, lower case, hyphens,
//! non-ASCII), so the same seed always tries the same inputs. Every input must be parsed or
//! refused without a panic, and what is accepted must keep the parser's promise: base 32
//! re-encodes to the text's canonical form, an epoch lies within the four-digit years and
//! parses back from its formatted form, a state file or WAL record is what the writer would
//! have written for what was read. `PGSF_FUZZ_CASES` sets the number of inputs (the default
//! takes a few seconds in a debug build); `PGSF_FUZZ_SEED` another seed.
//!
//! Unlike the property tests in `src/*/tests.rs`, this knows nothing of the parsers' insides:
//! it goes through the public API only, as the extension does.

use snowflake_core::base32;
use snowflake_core::calendar::{format_rfc3339, format_unix_ms, parse_epoch};
use snowflake_core::error::Error;
use snowflake_core::layout::{Layout, LATEST_END_UNIX_MS};
use snowflake_core::state_file::{self, History, Reservation, State};
use snowflake_core::wal_record;
use std::panic::catch_unwind;
use std::time::Instant;

const DEFAULT_CASES: u64 = 500_000;
const DEFAULT_SEED: u64 = 0x5eed_f00d_5a0f_1a6e;

const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// 0000-01-01 00:00:00 UTC: the first instant a four-digit year names.
const YEAR_0_UNIX_MS: i64 = -62_167_219_200_000;
/// Characters that are not base-32 digits but look or fold like them, or are not ASCII at all.
const STRANGERS: &[char] = &[
    'U', 'u', ' ', '\t', '\0', '+', '.', ':', 'é', 'ı', 'İ', 'ſ', 'Ｚ', '０', '٣', '𝟘', '€',
    '\u{200b}',
];

/// xorshift64* (Vigna): small, fast and enough to spread inputs; not for anything secret.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// 0 to `n - 1` (`n` > 0); the slight bias of a modulo does not matter here.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// An `i64` drawn mostly from `range`, sometimes from its edges and from anywhere.
    fn in_range(&mut self, range: std::ops::RangeInclusive<i64>) -> i64 {
        let (low, high) = (*range.start(), *range.end());
        match self.below(8) {
            0 => *self.pick(&[low, high, low.saturating_sub(1), high.saturating_add(1)]),
            1 => self.next() as i64,
            _ => match u64::try_from(i128::from(high) - i128::from(low) + 1) {
                Ok(span) => (i128::from(low) + i128::from(self.below(span))) as i64,
                // The whole of `i64`.
                Err(_) => self.next() as i64,
            },
        }
    }

    fn any_char(&mut self) -> char {
        match self.below(4) {
            0 => char::from(self.below(128) as u8),
            1 => *self.pick(STRANGERS),
            _ => char::from_u32(self.below(0x11_0000) as u32).unwrap_or('\u{fffd}'),
        }
    }

    fn any_bytes(&mut self, max_len: u64) -> Vec<u8> {
        let len = self.below(max_len + 1);
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// One to a few random edits of a text: change a character (to a digit, a Crockford reading or
/// a stranger), insert or delete one, upper or lower the case, add hyphens, or cut it.
fn mutate_text(rng: &mut Rng, text: &str, digits: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..=rng.below(3) {
        let at = rng.below(chars.len() as u64 + 1) as usize;
        let new = match rng.below(4) {
            0 => rng.any_char(),
            1 => *rng.pick(&['I', 'i', 'L', 'l', 'O', 'o', '-']),
            _ => char::from(*rng.pick(digits.as_bytes())),
        };
        match rng.below(7) {
            0 | 1 if at < chars.len() => chars[at] = new,
            2 if at < chars.len() => {
                chars.remove(at);
            }
            3 => chars = chars.iter().flat_map(|c| c.to_lowercase()).collect(),
            4 => chars = chars.iter().flat_map(|c| c.to_uppercase()).collect(),
            5 => chars.truncate(at),
            _ => chars.insert(at, new),
        }
    }
    chars.into_iter().collect()
}

/// Crockford's readings, independently of `base32::decode`: the 13-digit text a text stands
/// for, if it is made of 1 to 13 base-32 digits (hyphens dropped, I and L as 1, O as 0).
fn normalised(text: &str) -> Option<String> {
    let mut digits = String::new();
    for c in text.chars().filter(|&c| c != '-') {
        digits.push(match c.to_ascii_uppercase() {
            'I' | 'L' => '1',
            'O' => '0',
            c if c.is_ascii() && ALPHABET.contains(c) => c,
            _ => return None,
        });
    }
    (1..=base32::WIDTH)
        .contains(&digits.len())
        .then(|| format!("{digits:0>13}"))
}

/// A text for the base-32 decoder: random characters, or a valid ID's text edited, often with
/// a first digit past 7 (the digit whose top bits a 64-bit accumulator loses).
fn base32_input(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 => (0..rng.below(20)).map(|_| rng.any_char()).collect(),
        1 => (0..rng.below(16))
            .map(|_| char::from(*rng.pick(ALPHABET.as_bytes())))
            .collect(),
        2 | 3 => {
            let text = base32::encode(rng.next() as i64 & i64::MAX).unwrap();
            let first = char::from(*rng.pick(&ALPHABET.as_bytes()[8..]));
            let text = format!("{first}{}", &text[1..]);
            if rng.chance(2) {
                text
            } else {
                mutate_text(rng, &text, ALPHABET)
            }
        }
        _ => {
            let id = rng.in_range(0..=i64::MAX).max(0);
            mutate_text(rng, &base32::encode(id).unwrap(), ALPHABET)
        }
    }
}

/// `base32::decode`'s promise: it accepts exactly the texts whose canonical form starts with 0
/// to 7, and an accepted text re-encodes to that form.
fn check_base32(text: &str) -> Result<bool, String> {
    let canonical = normalised(text).filter(|n| n.as_bytes()[0] <= b'7');
    match (base32::decode(text), canonical) {
        (Ok(id), Some(canonical)) => {
            let re_encoded = base32::encode(id).map_err(|e| format!("{e:?}"))?;
            (re_encoded == canonical).then_some(true).ok_or(format!(
                "decoded to {id}, which encodes as {re_encoded}, not {canonical}"
            ))
        }
        (Ok(id), None) => Err(format!(
            "accepted as {id}; no positive bigint has this text"
        )),
        (Err(Error::InvalidBase32 { text: echoed, .. }), None) if echoed == text => Ok(false),
        (Err(e), _) => Err(format!("refused: {e:?}")),
    }
}

/// A text for the epoch parser: an instant in one of the calendar's formats or in a shorter
/// form the setting accepts, often edited; or random characters.
fn epoch_input(rng: &mut Rng) -> String {
    if rng.chance(8) {
        return (0..rng.below(32)).map(|_| rng.any_char()).collect();
    }
    let unix_ms = rng.in_range(YEAR_0_UNIX_MS..=LATEST_END_UNIX_MS);
    let text = if (YEAR_0_UNIX_MS..=LATEST_END_UNIX_MS).contains(&unix_ms) {
        let full = format_unix_ms(unix_ms);
        match rng.below(5) {
            0 => format_rfc3339(unix_ms),
            1 => full[..10].to_string(),
            2 => format!("{}T{}", &full[..10], &full[11..16]),
            3 => format!(
                "{}{}",
                &full[..19],
                rng.pick(&["", "Z", "+00", "+00:00", " UTC"])
            ),
            _ => full,
        }
    } else {
        format_unix_ms(unix_ms)
    };
    if rng.chance(3) {
        text
    } else {
        mutate_text(rng, &text, "0123456789-: .TZ+")
    }
}

/// `parse_epoch`'s promise: an accepted text is an instant of the four-digit years, and the
/// calendar's own formats of it parse back to it; a refusal names the text.
fn check_epoch(text: &str) -> Result<bool, String> {
    match parse_epoch(text) {
        Ok(unix_ms) if !(YEAR_0_UNIX_MS..=LATEST_END_UNIX_MS).contains(&unix_ms) => Err(format!(
            "accepted as {unix_ms}, outside the years 0000 to 9999"
        )),
        Ok(unix_ms) => {
            for formatted in [format_unix_ms(unix_ms), format_rfc3339(unix_ms)] {
                if parse_epoch(&formatted) != Ok(unix_ms) {
                    return Err(format!(
                        "accepted as {unix_ms}, but its form {formatted:?} parses to {:?}",
                        parse_epoch(&formatted)
                    ));
                }
            }
            Ok(true)
        }
        Err(message) if message.starts_with(&format!("\"{text}\" is not a UTC timestamp")) => {
            Ok(false)
        }
        Err(message) => Err(format!("refused with {message:?}")),
    }
}

/// A valid layout, from parts drawn across (and just past) their ranges.
fn layout(rng: &mut Rng) -> Layout {
    loop {
        let parts = (
            rng.in_range(0..=LATEST_END_UNIX_MS),
            rng.in_range(1..=86_400_000),
            rng.below(33) as u32,
            rng.below(33) as u32,
        );
        if let Ok(layout) = Layout::from_parts(parts.0, parts.1, parts.2, parts.3) {
            return layout;
        }
    }
}

/// FNV-1a, the state file's documented check value, so that edited lines can be given a
/// correct one and reach the parsing of their fields.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn formatted_state(reservation: &Reservation) -> Vec<u8> {
    let mut buffer = [0u8; state_file::MAX_LEN];
    state_file::format(reservation, &mut buffer).to_vec()
}

/// A reservation as a server may write it: any time, layout, node id, history, system and
/// registry claim.
fn reservation(rng: &mut Rng) -> Reservation {
    let mut history = History::EMPTY;
    for _ in 0..rng.below(20) {
        let node = (!rng.chance(10)).then(|| rng.next() as u32 % 4096);
        history.add(node, rng.in_range(i64::MIN..=i64::MAX));
    }
    Reservation {
        until: rng.in_range(i64::MIN..=i64::MAX),
        layout: layout(rng),
        node: (!rng.chance(5)).then(|| rng.next() as u32 % 4096),
        history,
        system: (!rng.chance(5)).then(|| rng.next()),
        identity: (!rng.chance(3)).then(|| snowflake_core::registry::Identity {
            token: u128::from(rng.next()) << 64 | u128::from(rng.next()),
            generation: rng.in_range(i64::MIN..=i64::MAX),
        }),
    }
}

/// Bytes for the state file parser: random bytes, or a written line (or one of the markers)
/// edited, its check value then often made right again.
fn state_input(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(6) {
        return rng.any_bytes(200);
    }
    let line = if rng.chance(10) {
        state_file::UPGRADE_MARKER.to_vec()
    } else if rng.chance(10) {
        state_file::HISTORY_LOST_MARKER.to_vec()
    } else {
        formatted_state(&reservation(rng))
    };
    if rng.chance(4) {
        return line;
    }
    if rng.chance(8) {
        let mut bytes = line;
        let at = rng.below(bytes.len() as u64) as usize;
        bytes[at] = rng.next() as u8;
        return bytes;
    }
    let edited = mutate_text(rng, &String::from_utf8_lossy(&line), "0123456789-/+ =");
    match edited.rsplit_once(" check=") {
        Some((body, _)) if rng.below(4) != 0 => {
            format!("{body} check={:016x}\n", fnv1a(body.as_bytes())).into_bytes()
        }
        _ => edited.into_bytes(),
    }
}

/// A layout read back must be one the layout's own validation accepts.
fn valid(layout: &Layout) -> Result<(), String> {
    let rebuilt = Layout::from_parts(
        layout.epoch_unix_ms,
        layout.unit_ms,
        layout.node_bits,
        layout.seq_bits,
    );
    if rebuilt == Ok(*layout) {
        Ok(())
    } else {
        Err(format!("read with an invalid layout {layout:?}"))
    }
}

/// `state_file::parse`'s promise: a reservation read back has a valid layout and is what
/// `format` writes for it again.
fn check_state(bytes: &[u8]) -> Result<bool, String> {
    match state_file::parse(bytes) {
        Ok(State::AwaitingOldStateFile) if bytes == state_file::UPGRADE_MARKER => Ok(true),
        Ok(State::AwaitingOldStateFile) => Err("read as the upgrade marker".into()),
        Ok(State::HistoryLost) if bytes == state_file::HISTORY_LOST_MARKER => Ok(true),
        Ok(State::HistoryLost) => Err("read as the history-lost marker".into()),
        Ok(State::Reservation(read)) => {
            let layout = read.layout;
            valid(&layout)?;
            let again = state_file::parse(&formatted_state(&read));
            (again == Ok(State::Reservation(read)))
                .then_some(true)
                .ok_or(format!(
                    "read as {read:?}, which does not round-trip: {again:?}"
                ))
        }
        Err(_) => Ok(false),
    }
}

/// Bytes for the WAL record decoder: random bytes of about a record's length, or a record
/// with some bytes changed.
fn wal_input(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(4) {
        return rng.any_bytes(wal_record::LEN as u64 + 4);
    }
    let layout = layout(rng);
    let claim = (!rng.chance(3)).then(|| snowflake_core::registry::Identity {
        token: u128::from(rng.next()) << 64 | u128::from(rng.next()),
        generation: rng.in_range(i64::MIN..=i64::MAX),
    });
    let (bytes, len) = wal_record::encode(
        rng.in_range(i64::MIN..=i64::MAX),
        &layout,
        rng.next() as u32,
        claim,
    );
    let mut record = bytes[..len].to_vec();
    if rng.chance(4) {
        record.truncate(32); // a record of 0.3.0, without the node id
    }
    for _ in 0..rng.below(3) {
        let at = rng.below(record.len() as u64) as usize;
        record[at] = rng.next() as u8;
    }
    record
}

/// `wal_record::decode`'s promise: a reservation read back has a valid layout, and encodes to
/// the very bytes it was read from.
fn check_wal(bytes: &[u8]) -> Result<bool, String> {
    match wal_record::decode(bytes) {
        Some(wal_record::Record {
            until,
            layout,
            node,
            identity,
        }) => {
            valid(&layout)?;
            let (encoded, len) = wal_record::encode(until, &layout, node.unwrap_or(0), identity);
            let written = if node.is_some() {
                &encoded[..len]
            } else {
                &encoded[..32]
            };
            (written == bytes).then_some(true).ok_or(format!(
                "read as until={until} {layout:?}, which encodes otherwise"
            ))
        }
        None => Ok(false),
    }
}

/// One input, for one parser.
enum Input {
    Base32(String),
    Epoch(String),
    State(Vec<u8>),
    Wal(Vec<u8>),
}

impl Input {
    fn kind(&self) -> usize {
        match self {
            Input::Base32(_) => 0,
            Input::Epoch(_) => 1,
            Input::State(_) => 2,
            Input::Wal(_) => 3,
        }
    }

    /// Whether the parser accepted the input, or how it broke its promise.
    fn check(&self) -> Result<bool, String> {
        match self {
            Input::Base32(text) => check_base32(text),
            Input::Epoch(text) => check_epoch(text),
            Input::State(bytes) => check_state(bytes),
            Input::Wal(bytes) => check_wal(bytes),
        }
    }

    fn describe(&self) -> String {
        match self {
            Input::Base32(text) => format!("base32::decode({text:?})"),
            Input::Epoch(text) => format!("parse_epoch({text:?})"),
            Input::State(bytes) => {
                format!("state_file::parse({:?})", String::from_utf8_lossy(bytes))
            }
            Input::Wal(bytes) => format!("wal_record::decode(&{bytes:?})"),
        }
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => {
            let value = value.trim().replace('_', "");
            let parsed = match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => value.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name}={value:?} is not a number"))
        }
        Err(_) => default,
    }
}

#[test]
fn fuzz_the_parsers() {
    let cases = env_number("PGSF_FUZZ_CASES", DEFAULT_CASES);
    let seed = env_number("PGSF_FUZZ_SEED", DEFAULT_SEED);
    // xorshift never leaves 0.
    let mut rng = Rng(seed.max(1));
    let started = Instant::now();
    let mut tried = [0u64; 4];
    let mut accepted_count = [0u64; 4];
    let mut failures: Vec<String> = Vec::new();
    let mut failed = 0u64;
    // A panic is reported with its input below, not by the hook for every input.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for _ in 0..cases {
        let input = match rng.below(10) {
            0..=3 => Input::Base32(base32_input(&mut rng)),
            4..=6 => Input::Epoch(epoch_input(&mut rng)),
            7 | 8 => Input::State(state_input(&mut rng)),
            _ => Input::Wal(wal_input(&mut rng)),
        };
        let kind = input.kind();
        tried[kind] += 1;
        let failure = match catch_unwind(|| input.check()) {
            Ok(Ok(accepted)) => {
                accepted_count[kind] += u64::from(accepted);
                continue;
            }
            Ok(Err(broken)) => broken,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|m| m.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                format!("panicked: {message}")
            }
        };
        failed += 1;
        if failures.len() < 10 {
            failures.push(format!("{}: {failure}", input.describe()));
        }
    }
    std::panic::set_hook(hook);
    let share = |kind: usize| {
        format!(
            "{} ({}% accepted)",
            tried[kind],
            accepted_count[kind] * 100 / tried[kind].max(1)
        )
    };
    println!(
        "fuzz: {cases} inputs tried (base32 {}, epoch {}, state file {}, wal record {}), \
         {failed} failures, seed {seed:#x}, {:.1} s",
        share(0),
        share(1),
        share(2),
        share(3),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{failed} of {cases} inputs broke a parser's promise (seed {seed:#x}); the first:\n{}",
        failures.join("\n")
    );
}

/// The backfill's parsers (`backfill::Ceilings::parse`, the ceiling's file, and
/// `backfill::decode`, its WAL record), fuzzed the same way: mutations of valid input and random
/// input. Promises: no panic; a file read back formats to text that reads back the same; a
/// record read back encodes to the very bytes it was read from.
#[test]
fn fuzz_the_backfill_parsers() {
    use snowflake_core::backfill::{decode, encode, Ceilings, Record};
    let cases = env_number("PGSF_FUZZ_CASES", DEFAULT_CASES) / 4;
    let seed = env_number("PGSF_FUZZ_SEED", DEFAULT_SEED);
    let mut rng = Rng(seed.max(1));
    let mut accepted = [0u64; 2];
    for case in 0..cases {
        let layout = layout(&mut rng);
        if case % 2 == 0 {
            let mut ceilings = Ceilings::new(layout);
            for _ in 0..rng.below(4) {
                ceilings.raise(rng.next() as u32, rng.next() >> rng.below(64));
            }
            let text = if rng.chance(8) {
                (0..rng.below(40)).map(|_| rng.any_char()).collect()
            } else {
                mutate_text(&mut rng, &ceilings.format(), "0123456789 -+\n")
            };
            let read = catch_unwind(|| Ceilings::parse(&text))
                .unwrap_or_else(|_| panic!("Ceilings::parse({text:?}) panicked"));
            if let Ok(read) = read {
                accepted[0] += 1;
                assert_eq!(
                    Ceilings::parse(&read.format()).as_ref(),
                    Ok(&read),
                    "{text:?} read back otherwise after formatting"
                );
            }
        } else {
            let record = Record {
                layout,
                node: rng.next() as u32,
                ceiling: rng.next(),
            };
            let mut bytes = encode(&record).to_vec();
            if rng.chance(8) {
                bytes = rng.any_bytes(40);
            }
            for _ in 0..rng.below(3) {
                let at = rng.below(bytes.len().max(1) as u64) as usize;
                if let Some(byte) = bytes.get_mut(at) {
                    *byte = rng.next() as u8;
                }
            }
            let read = catch_unwind(|| decode(&bytes))
                .unwrap_or_else(|_| panic!("backfill::decode({bytes:?}) panicked"));
            if let Some(read) = read {
                accepted[1] += 1;
                valid(&read.layout).unwrap();
                assert_eq!(encode(&read).as_slice(), bytes.as_slice());
            }
        }
    }
    println!("fuzz of the backfill's parsers: {cases} inputs, {accepted:?} accepted");
    assert!(
        accepted.iter().all(|&n| n > 0),
        "nothing was accepted: {accepted:?}"
    );
}
