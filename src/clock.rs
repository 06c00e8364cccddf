//! Time sources. Decisions only ever see [`Nanos`] since the clock's origin.
//!
//! **The default, [`DefaultClock`], reads the TSC (an inline `rdtsc`, converted with quanta's
//! calibration) where the kernel itself keeps time with it, and `Instant` ([`StdClock`])
//! everywhere else.** The choice is argued from the algorithm, not from clock folklore:
//!
//! - A TSC read (`rdtsc`) is not ordered with the loads before it, so a reading can be
//!   slightly *earlier* than a reading that happened-before it on another core. `Instant`
//!   (the vDSO's ordered read) never is. That is the whole difference in guarantees.
//! - But every decision reads the clock *before* its CAS, so with any clock a decision's
//!   `now` is older than the moment its CAS lands by the whole read-to-CAS window, and by
//!   milliseconds if the thread is preempted in between. A reading early by `e` gives that one
//!   decision at most `e / T` permits of extra room, never a lasting error, exactly as a
//!   preemption of `e` does. An early reading inside that window changes nothing the algorithm
//!   does not already tolerate.
//! - So the question is how large the worst early reading is. Measured on the development
//!   machine (`benches/clocks.rs`): see [`TSC_MAX_SKEW`]. The rules that must hold exactly
//!   under an early reading widen by [`Clock::max_skew`]: a key is evicted only when
//!   `tat + max_skew <= now` (`store::evict::is_cold`), the key cap's reclaim and suggested
//!   wait allow for it the same way, and a cancel gives back nothing below `now + max_skew`
//!   (`engine::Engine::cancel`).
//!
//! `Instant` costs about 3x a TSC read here (36 vs 12 ns on a quiet machine), which is most of
//! a direct decision. [`StdClock`] stays available for anyone who wants readings ordered across threads
//! (see its docs for what that buys and costs).
//!
//! One file per clock: [`StdClock`] (`std_clock.rs`), [`QuantaClock`] (`quanta_clock.rs`),
//! the inline TSC read the default uses (`tsc.rs`), [`DefaultClock`] (`default_clock.rs`) and
//! the runtime detection it is chosen by (`probe.rs`), [`ManualClock`] (`manual.rs`),
//! `TokioClock` (`tokio_clock.rs`), [`CoarseClock`] (`coarse.rs`: a cached reading refreshed
//! by a thread, for limiters that can take bursts at the scale of its tick), and the dispatch a limiter holds (`any.rs`).

use std::time::Duration;

use crate::Nanos;

mod any;
mod coarse;
mod default_clock;
mod manual;
mod probe;
mod quanta_clock;
mod std_clock;
#[cfg(feature = "tokio")]
mod tokio_clock;
#[cfg(target_arch = "x86_64")]
mod tsc;

pub(crate) use any::AnyClock;
pub use coarse::{CoarseClock, CoarseClockError};
pub use default_clock::DefaultClock;
pub use manual::ManualClock;
pub use quanta_clock::{QuantaClock, TSC_MAX_SKEW};
pub use std_clock::StdClock;
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;

/// A source of time for a limiter.
///
/// `now` returns nanoseconds since an origin fixed when the clock was created. It never
/// decreases on one thread; across threads a reading may be earlier than one that
/// happened-before it on another thread by at most [`max_skew`](Clock::max_skew) (0 unless
/// the clock says otherwise). `sleep` is what blocking waits call; test clocks advance
/// themselves instead of sleeping.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, Nanos};
///
/// /// A clock that is always at the same instant: a toy, but a valid `Clock`.
/// struct Frozen(Nanos);
/// impl Clock for Frozen {
///     fn now(&self) -> Nanos { self.0 }
///     fn sleep(&self, _: Duration) {}
/// }
/// assert_eq!(Frozen(7).now(), 7);
/// assert_eq!(Frozen(7).max_skew(), 0);
/// ```
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since this clock's origin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// assert_eq!(clock.now(), 0);
    /// clock.advance(Duration::from_micros(3));
    /// assert_eq!(clock.now(), 3_000);
    /// ```
    fn now(&self) -> Nanos;

    /// Blocks the calling thread for `d` (blocking acquires call this).
    ///
    /// A blocking acquire sleeps on its limiter's clock, so a test clock sees the wait:
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    /// let limiter = RateLimiter::builder(quota).clock(clock.clone()).build();
    /// assert_eq!(limiter.acquire(), Ok(Duration::ZERO));
    /// // The second permit is 100 ms away: the limiter calls `sleep` on its clock.
    /// assert_eq!(limiter.acquire(), Ok(Duration::from_millis(100)));
    /// assert_eq!(clock.sleeps(), [Duration::from_millis(100)]);
    /// assert_eq!(clock.now(), 100_000_000);
    /// ```
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }

    /// The most, in ns, that a reading can be earlier than a reading that happened-before it
    /// on another thread: 0 (the default) for a clock ordered across threads.
    ///
    /// Decisions need no allowance for it (an early reading is like a thread preempted
    /// between its clock read and its CAS: the decision is made as of a slightly older
    /// instant). The keyed limiter's sweeper uses it: a key is evicted only when
    /// `tat + max_skew <= now`, so that a decision that recreates the key, with a reading up
    /// to `max_skew` earlier than the sweeper's, decides exactly as on the evicted state (the
    /// key cap's reclaim and its suggested wait use the same rule). A cancelled reservation
    /// gives back only what lies after `now + max_skew`.
    ///
    /// ```
    /// use tollgate::{Clock, QuantaClock, StdClock, TSC_MAX_SKEW};
    /// assert_eq!(StdClock::new().max_skew(), 0);
    /// assert_eq!(QuantaClock::new().max_skew(), TSC_MAX_SKEW);
    /// ```
    fn max_skew(&self) -> Nanos {
        0
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX`.
#[inline]
pub(crate) fn duration_to_nanos(d: Duration) -> Nanos {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Reads `clock` before and after a sleep of `sleep_ms` milliseconds and checks that it
    /// counted at least `at_least_ms` of it; returns the first reading.
    pub(super) fn assert_counts_a_sleep(
        clock: &impl Clock,
        sleep_ms: u64,
        at_least_ms: u64,
    ) -> Nanos {
        let a = clock.now();
        std::thread::sleep(Duration::from_millis(sleep_ms));
        let b = clock.now();
        assert!(b >= a + at_least_ms * 1_000_000, "{a} {b}");
        a
    }

    #[test]
    fn duration_to_nanos_saturates() {
        assert_eq!(duration_to_nanos(Duration::from_nanos(5)), 5);
        assert_eq!(duration_to_nanos(Duration::MAX), u64::MAX);
    }
}
