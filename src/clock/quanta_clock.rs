//! [`QuantaClock`]: the TSC through quanta, and the bound on how early its readings can be.

use std::sync::OnceLock;

use super::Clock;
use crate::Nanos;

/// The most a TSC reading can be earlier than a reading that happened-before it on another
/// core, as this crate assumes it: 10 µs. It is [`Clock::max_skew`] of [`QuantaClock`], and of
/// [`DefaultClock`](crate::DefaultClock) when that reads the TSC.
///
/// Measured with `benches/clocks.rs` (two threads pinned to two cores; each reading taken right
/// after observing, by an acquire load or by a locked read-modify-write as a lock acquisition
/// does, the other core's previous reading): some plain `rdtsc` readings were earlier than the
/// reading they had just observed, by well under a microsecond. Fenced reads (`lfence; rdtsc`,
/// `rdtscp`) and `Instant` never were, and their forward steps were tens of ns: the cores' TSCs
/// agree, and the backwards steps are the unfenced `rdtsc` executing before the load that
/// observed the other core's write had completed. So the step is bounded by how long one load
/// can be outstanding (a cache miss, a cross-socket transfer: well under a microsecond) plus
/// the TSC offset the kernel tolerates between cores. 10 µs is many times the worst step
/// measured (figures in `benches/BENCHMARKS.md`, "Clocks"). Nothing depends on it being tight:
/// it only delays the eviction of a cold key by that long.
pub const TSC_MAX_SKEW: Nanos = 10_000;

/// A TSC clock from the `quanta` crate, several times cheaper to read than
/// [`StdClock`](crate::StdClock).
///
/// `rdtsc` is not ordered with the loads before it, so a reading can be slightly earlier than
/// one that happened-before it on another core (by at most [`TSC_MAX_SKEW`], its
/// [`max_skew`](Clock::max_skew)). A decision made with such a reading is made as of a
/// slightly older instant, as if its thread had been preempted between reading the clock and
/// storing its result: at most `skew / T` permits of extra room for that one decision, no
/// lasting error. This is the clock governor uses by default.
///
/// Unlike [`DefaultClock`](crate::DefaultClock), choosing it explicitly skips the check of the
/// kernel's clocksource: quanta reads the TSC wherever the CPU reports an invariant TSC (and
/// `rdtscp`), and falls back to the OS monotonic clock otherwise. The first `QuantaClock` (or
/// `DefaultClock`) of a process calibrates the TSC against the OS clock, once (typically under a
/// millisecond; quanta caps it at 200 ms); later ones copy that calibration.
///
/// ```
/// use tollgate::{Clock, QuantaClock, Quota, RateLimiter, TSC_MAX_SKEW};
///
/// let c = QuantaClock::new();
/// let a = c.now();
/// assert!(c.now() >= a);
/// assert_eq!(c.max_skew(), TSC_MAX_SKEW);
/// let limiter = RateLimiter::builder(Quota::per_second(5).unwrap()).clock(c).build();
/// assert!(limiter.try_acquire());
/// ```
#[derive(Clone, Debug)]
pub struct QuantaClock {
    clock: quanta::Clock,
    origin: u64,
}

impl QuantaClock {
    /// A TSC clock whose origin is now.
    ///
    /// Each clock counts from its own creation:
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, QuantaClock};
    ///
    /// let older = QuantaClock::new();
    /// std::thread::sleep(Duration::from_millis(2));
    /// let newer = QuantaClock::new();
    /// let (n, o) = (newer.now(), older.now());
    /// assert!(o >= n + 1_000_000, "older {o} ns, newer {n} ns");
    /// ```
    pub fn new() -> QuantaClock {
        let clock = calibrated().clone();
        let origin = clock.raw();
        QuantaClock { clock, origin }
    }
}

/// The process's calibrated quanta clock, made on first use. `quanta::Clock::new` runs CPUID
/// several times (each a VM exit in a guest: 18-28 us measured here) and calibrates on the
/// first call; a limiter's construction should not pay that, so clocks copy this one.
pub(super) fn calibrated() -> &'static quanta::Clock {
    static CALIBRATED: OnceLock<quanta::Clock> = OnceLock::new();
    CALIBRATED.get_or_init(quanta::Clock::new)
}

impl Default for QuantaClock {
    fn default() -> Self {
        QuantaClock::new()
    }
}

impl Clock for QuantaClock {
    #[inline]
    fn now(&self) -> Nanos {
        // A reading before the origin (another core, just after creation) counts as 0.
        self.clock
            .delta_as_nanos(self.origin, self.clock.raw().max(self.origin))
    }

    #[inline]
    fn max_skew(&self) -> Nanos {
        TSC_MAX_SKEW
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::tests::assert_counts_a_sleep;

    #[test]
    fn counts_nanoseconds_from_its_origin() {
        // The calibration is against the OS clock: 5 ms of sleep is at least ~5 ms here.
        let a = assert_counts_a_sleep(&QuantaClock::new(), 5, 4);
        assert!(a < 1_000_000_000, "origin is creation: {a}");
    }
}
