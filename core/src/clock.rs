//! The clocks the generator is given. The generator never reads a clock itself: callers pass a
//! [`Clock`], so tests can move time at will, and the server's [`SystemClock`] is read only as
//! far as the generator asks: the wall clock once per call, the monotonic clock only off the
//! normal path (the wall clock behind the generator after a backward step, or more than a
//! second past its last reading) and when the renewer re-anchors between calls, so the normal
//! path costs one clock read.

/// A source of clock readings, in milliseconds.
pub trait Clock {
    /// Unix time from the wall clock (CLOCK_REALTIME). Read once per allocation.
    fn wall(&mut self) -> i64;
    /// The monotonic clock (CLOCK_MONOTONIC): any origin, never steps. Read only off the
    /// steady clock's normal path (see the module's header).
    fn monotonic(&mut self) -> i64;
}

/// One fixed reading of both clocks: what tests pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

impl Clock for Clocks {
    fn wall(&mut self) -> i64 {
        self.wall
    }

    fn monotonic(&mut self) -> i64 {
        self.monotonic
    }
}

/// The server's clocks, read when asked.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn wall(&mut self) -> i64 {
        read_ms(libc::CLOCK_REALTIME)
    }

    #[inline]
    fn monotonic(&mut self) -> i64 {
        read_ms(libc::CLOCK_MONOTONIC)
    }
}

/// The wall clock alone (Unix ms).
pub fn wall_now() -> i64 {
    read_ms(libc::CLOCK_REALTIME)
}

#[inline]
fn read_ms(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}
