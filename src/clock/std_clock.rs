//! [`StdClock`]: `std::time::Instant`, ordered across threads.

use std::time::Instant;

use super::{duration_to_nanos, Clock};
use crate::Nanos;

/// `std::time::Instant`: readings ordered across threads, at several times the cost of a TSC
/// read.
///
/// On Linux `Instant` is `CLOCK_MONOTONIC` through the vDSO, which reads the TSC with an
/// ordered instruction (`rdtscp`, or `lfence; rdtsc`) and converts with the kernel's own
/// calibration (figures in `benches/BENCHMARKS.md`, "Clocks"), and the ordered read also waits
/// for earlier loads, so it overlaps less with the work around it.
///
/// What choosing it over the default [`DefaultClock`](crate::DefaultClock) buys: a reading on
/// one thread is never earlier than a reading that happened-before it on another
/// (`max_skew` 0), so every `now` a limiter sees is ordered with its other `now`s, and cold
/// keys are evicted the moment they are cold rather than [`TSC_MAX_SKEW`](crate::TSC_MAX_SKEW)
/// later. What it costs: an OS clock read per decision, which is most of the direct path's
/// time. It is what the default falls back to where the TSC is not usable.
///
/// ```
/// use tollgate::{Clock, Quota, RateLimiter, StdClock};
///
/// let c = StdClock::new();
/// let a = c.now();
/// assert!(c.now() >= a);
/// assert_eq!(c.max_skew(), 0);
/// let limiter = RateLimiter::builder(Quota::per_second(5).unwrap()).clock(c).build();
/// assert!(limiter.try_acquire());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StdClock {
    origin: Instant,
}

impl StdClock {
    /// A clock whose origin is now.
    ///
    /// Each clock counts from its own creation:
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, StdClock};
    ///
    /// let older = StdClock::new();
    /// std::thread::sleep(Duration::from_millis(2));
    /// let newer = StdClock::new();
    /// let (n, o) = (newer.now(), older.now());
    /// assert!(o >= n + 1_000_000, "older {o} ns, newer {n} ns");
    /// ```
    pub fn new() -> StdClock {
        StdClock {
            origin: Instant::now(),
        }
    }
}

impl Default for StdClock {
    fn default() -> Self {
        StdClock::new()
    }
}

impl Clock for StdClock {
    #[inline]
    fn now(&self) -> Nanos {
        duration_to_nanos(self.origin.elapsed())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::tests::assert_counts_a_sleep;

    #[test]
    fn starts_near_zero_and_moves_forward() {
        assert_counts_a_sleep(&StdClock::new(), 2, 2);
    }
}
