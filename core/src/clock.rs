//! The clocks the generator is given. The generator never reads a clock itself: callers read
//! one [`Clocks`] value and pass it in, so tests can move time at will.

/// One reading of the server's clocks, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Clocks {
    /// Unix time from the wall clock (CLOCK_REALTIME).
    pub wall: i64,
    /// The monotonic clock (CLOCK_MONOTONIC): any origin, never steps.
    pub monotonic: i64,
}

impl Clocks {
    /// Both clocks reading the same value: for callers that only move time forwards.
    pub const fn at(ms: i64) -> Self {
        Clocks {
            wall: ms,
            monotonic: ms,
        }
    }

    /// Reads the system's wall and monotonic clocks.
    pub fn read() -> Self {
        Clocks {
            wall: read_ms(libc::CLOCK_REALTIME),
            monotonic: read_ms(libc::CLOCK_MONOTONIC),
        }
    }
}

/// The wall clock alone (Unix ms).
pub fn wall_now() -> i64 {
    read_ms(libc::CLOCK_REALTIME)
}

fn read_ms(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}
