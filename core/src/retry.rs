//! Pacing a process that keeps failing at the same thing: how long to wait before trying again
//! ([`Backoff`]) and when to say so in the log ([`LogThrottle`]). The renewer uses both for
//! reservations it cannot write (a full or unwritable disk): without them it would retry at
//! once, again and again, and log every failure — over 100,000 lines a second on a full disk,
//! exactly when a flooded log hurts most.
//!
//! Pure Rust: the caller passes the time (monotonic ms).

/// Waits between retries that double from `first_ms` up to `max_ms`, and start again from
/// `first_ms` after a success. Bounded, so that recovery is quick once the cause is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    first_ms: i64,
    max_ms: i64,
    next_ms: i64,
}

impl Backoff {
    pub const fn new(first_ms: i64, max_ms: i64) -> Self {
        Backoff {
            first_ms,
            max_ms,
            next_ms: first_ms,
        }
    }

    /// Another failure: how long to wait before the next try.
    pub fn failed(&mut self) -> i64 {
        let wait = self.next_ms;
        self.next_ms = self.next_ms.saturating_mul(2).min(self.max_ms);
        wait
    }

    /// A success: the next failure waits `first_ms` again.
    pub fn succeeded(&mut self) {
        self.next_ms = self.first_ms;
    }
}

/// Lets the same message through at most once every `interval_ms`, counting what it held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogThrottle {
    interval_ms: i64,
    last_logged: Option<i64>,
    held_back: u64,
}

impl LogThrottle {
    pub const fn new(interval_ms: i64) -> Self {
        LogThrottle {
            interval_ms,
            last_logged: None,
            held_back: 0,
        }
    }

    /// The message is due at `now`: returns `Some(n)` if it is to be logged, `n` being how many
    /// were held back since the last one logged, or `None` if it is to be held back.
    pub fn due(&mut self, now: i64) -> Option<u64> {
        if self
            .last_logged
            .is_some_and(|at| now.saturating_sub(at) < self.interval_ms)
        {
            self.held_back += 1;
            return None;
        }
        self.last_logged = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }

    /// The trouble is over: the next message is logged at once.
    pub fn reset(&mut self) {
        self.last_logged = None;
        self.held_back = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_bound_and_starts_again_after_a_success() {
        let mut b = Backoff::new(10, 500);
        let waits: Vec<i64> = (0..8).map(|_| b.failed()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 500, 500]);
        b.succeeded();
        assert_eq!(b.failed(), 10);
    }

    #[test]
    fn a_failure_every_millisecond_for_30_s_is_logged_three_times_with_counts() {
        let mut t = LogThrottle::new(10_000);
        let logged: Vec<(i64, u64)> = (0..30_000)
            .filter_map(|now| t.due(now).map(|held| (now, held)))
            .collect();
        assert_eq!(logged, [(0, 0), (10_000, 9_999), (20_000, 9_999)]);
        t.reset();
        assert_eq!(t.due(30_001), Some(0));
    }
}
