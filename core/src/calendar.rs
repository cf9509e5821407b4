//! A proleptic Gregorian UTC calendar, just enough for the layout: the epoch setting's text in,
//! instants out for messages and JSON. Pure arithmetic (Howard Hinnant's civil-day algorithms),
//! so that the core needs neither a date library nor Postgres to name a time.

/// Parses an epoch setting: `YYYY-MM-DD`, optionally followed by ` HH:MM[:SS[.fff]]` (or with
/// `T`), optionally followed by a UTC marker (`Z`, `UTC`, `+00`, `+00:00`). Times are UTC.
pub fn parse_epoch(text: &str) -> Result<i64, String> {
    let bad = || {
        format!(
            "\"{text}\" is not a UTC timestamp like \"2024-01-01 00:00:00+00\" or \"2024-01-01\""
        )
    };
    let mut rest = text.trim();
    for marker in ["+00:00", "+00", "UTC", "Z"] {
        if let Some(stripped) = rest.strip_suffix(marker) {
            rest = stripped.trim_end();
            break;
        }
    }
    let (date, time) = match rest.split_once([' ', 'T']) {
        Some((date, time)) => (date, Some(time.trim())),
        None => (rest, None),
    };
    let number = |s: &str, len: std::ops::RangeInclusive<usize>| -> Result<i64, String> {
        if len.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let mut d = date.split('-');
    let (Some(y), Some(m), Some(dd), None) = (d.next(), d.next(), d.next(), d.next()) else {
        return Err(bad());
    };
    let (year, month, day) = (number(y, 4..=4)?, number(m, 2..=2)?, number(dd, 2..=2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad());
    }
    let mut ms_of_day = 0;
    if let Some(time) = time {
        let (hms, fraction) = match time.split_once('.') {
            Some((hms, fraction)) => (hms, Some(fraction)),
            None => (time, None),
        };
        let mut t = hms.split(':');
        let (Some(h), Some(mi), s, None) = (t.next(), t.next(), t.next(), t.next()) else {
            return Err(bad());
        };
        let (h, mi, s) = (
            number(h, 2..=2)?,
            number(mi, 2..=2)?,
            s.map_or(Ok(0), |s| number(s, 2..=2))?,
        );
        let fraction_ms = match fraction {
            Some(f) => number(f, 1..=3)? * 10i64.pow(3 - f.len() as u32),
            None => 0,
        };
        if h > 23 || mi > 59 || s > 59 {
            return Err(bad());
        }
        ms_of_day = ((h * 60 + mi) * 60 + s) * 1000 + fraction_ms;
    }
    Ok(days_from_civil(year, month, day) * 86_400_000 + ms_of_day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats Unix milliseconds as `YYYY-MM-DD HH:MM:SS.mmm UTC`, for error messages.
pub fn format_unix_ms(unix_ms: i64) -> String {
    let days = unix_ms.div_euclid(86_400_000);
    let ms_of_day = unix_ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03} UTC",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

/// Formats Unix milliseconds as RFC 3339 in UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`, for JSON.
pub fn format_rfc3339(unix_ms: i64) -> String {
    let text = format_unix_ms(unix_ms);
    format!("{}T{}Z", &text[..10], &text[11..23])
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Formats an instant for a message; the `i64` extremes stand for Postgres' infinities.
pub fn format_instant(unix_ms: i64) -> String {
    match unix_ms {
        i64::MAX => "infinity".into(),
        i64::MIN => "-infinity".into(),
        _ => format_unix_ms(unix_ms),
    }
}

#[cfg(test)]
mod tests;
