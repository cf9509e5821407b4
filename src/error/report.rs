//! How a message reaches Postgres: [`Message`], the bounded echo of user text ([`quoted`]),
//! the report levels, and [`OrReport`] for the one-line SQL functions.

use super::SnowflakeError;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// A message as Postgres shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub sqlstate: PgSqlErrorCode,
    pub text: String,
    pub detail: Option<String>,
    pub hint: String,
    /// The enum and variant of the row that worded it: the unit tests check every row is shown.
    #[cfg(test)]
    pub row: (&'static str, &'static str),
}

/// How many characters of a user's text a message shows.
pub const SHOWN_CHARS: usize = 64;

/// How many characters of a cause another program worded (libpq's message of a failed
/// connection: its own prefix alone takes about 60) a message shows.
pub const CAUSE_CHARS: usize = 400;

/// User-typed text for a message: in double quotes, whole when short; otherwise its first
/// [`SHOWN_CHARS`] characters, an ellipsis, and its length.
pub fn quoted(text: &str) -> String {
    quoted_up_to(text, SHOWN_CHARS)
}

/// A cause worded by another program (libpq), on one line, in double quotes: whole up to
/// [`CAUSE_CHARS`] characters, so that what failed ("password authentication failed",
/// "Connection refused") reaches the log. libpq never puts a password in its messages.
pub fn quoted_cause(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    quoted_up_to(&line, CAUSE_CHARS)
}

fn quoted_up_to(text: &str, shown: usize) -> String {
    match text.char_indices().nth(shown) {
        None => format!("\"{text}\""),
        Some((end, _)) => format!(
            "\"{}...\" ({} characters)",
            &text[..end],
            text.chars().count()
        ),
    }
}

impl SnowflakeError {
    /// Raises this error as a Postgres ERROR: the statement fails. Never returns.
    pub fn report(self) -> ! {
        self.raise_at(PgLogLevel::ERROR);
        unreachable!("an ERROR report does not return")
    }

    /// Reports this as a WARNING (to the server log and the client) and carries on.
    pub fn report_warning(self) {
        self.raise_at(PgLogLevel::WARNING);
    }

    /// Reports this to the server log only (LOG) and carries on.
    pub fn report_log(self) {
        self.raise_at(PgLogLevel::LOG);
    }

    /// Reports this to the server log only, never to the client whatever its
    /// `client_min_messages` (LOG_SERVER_ONLY), and carries on.
    pub fn report_server_only(self) {
        self.raise_at(PgLogLevel::LOG_SERVER_ONLY);
    }

    /// Reports this as a NOTICE (to the client) and carries on.
    pub fn report_notice(self) {
        self.raise_at(PgLogLevel::NOTICE);
    }

    /// Raises this error as FATAL: the process exits (at start-up, the server does not start).
    pub fn report_fatal(self) -> ! {
        self.raise_at(PgLogLevel::FATAL);
        unreachable!("a FATAL report does not return")
    }

    fn raise_at(self, level: PgLogLevel) {
        let m = self.message();
        let report = ErrorReport::new(m.sqlstate, m.text, "pg_snowflake").set_hint(m.hint);
        match m.detail {
            Some(detail) => report.set_detail(detail),
            None => report,
        }
        .report(level);
    }
}

/// Turns a `Result` into its value or a Postgres ERROR, for the one-line SQL functions.
pub trait OrReport<T> {
    fn or_report(self) -> T;
}

impl<T, E: Into<SnowflakeError>> OrReport<T> for Result<T, E> {
    fn or_report(self) -> T {
        self.unwrap_or_else(|e| e.into().report())
    }
}
