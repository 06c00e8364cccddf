//! Time sources. Decisions only ever see [`Nanos`] since the clock's origin.
//!
//! The default, [`StdClock`], reads `std::time::Instant` (`CLOCK_MONOTONIC` through the vDSO on
//! Linux, about 25 ns here). It was chosen over a raw TSC read (quanta, about 10 ns) by
//! measurement: in a cross-thread ping-pong on this machine, 193,902 of 10,000,000 quanta readings
//! were *earlier* than a reading that happened-before them on the other core (`rdtsc` is not
//! ordered with the preceding load), while `Instant` never went backwards. A limiter whose time
//! can run backwards between threads is harder to reason about, so the faster clock is opt-in:
//! [`QuantaClock`] behind the `quanta` feature, or any [`Clock`] of your own.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::{AtomicU64, Mutex, Ordering};
use crate::Nanos;

/// A source of monotonic time for a limiter.
///
/// `now` returns nanoseconds since an origin fixed when the clock was created. It must never
/// decrease as observed by any thread. `sleep` is what blocking waits call; test clocks advance
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
/// ```
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since this clock's origin.
    fn now(&self) -> Nanos;

    /// Blocks the calling thread for `d` (blocking acquires call this).
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// The default clock: `std::time::Instant`, monotonic across threads.
///
/// ```
/// use tollgate::{Clock, StdClock};
/// let c = StdClock::new();
/// let a = c.now();
/// assert!(c.now() >= a);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StdClock {
    origin: Instant,
}

impl StdClock {
    /// A clock whose origin is now.
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

/// A duration in whole nanoseconds, saturating at `u64::MAX`.
#[inline]
pub(crate) fn duration_to_nanos(d: Duration) -> Nanos {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// A clock moved only by hand, for deterministic tests.
///
/// Clones share the same time. `sleep` advances the time instead of blocking and records the
/// duration, so blocking acquires run instantly and their waits can be asserted exactly.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now(), 5_000_000);
/// clock.sleep(Duration::from_nanos(3));
/// assert_eq!(clock.now(), 5_000_003);
/// assert_eq!(clock.sleeps(), vec![Duration::from_nanos(3)]);
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Default)]
struct ManualInner {
    now: AtomicU64,
    sleeps: Mutex<Vec<Duration>>,
}

impl ManualClock {
    /// A manual clock at time 0.
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves time forward by `d` (saturating at `u64::MAX` ns).
    pub fn advance(&self, d: Duration) {
        self.advance_nanos(duration_to_nanos(d));
    }

    /// Moves time forward by `ns` nanoseconds (saturating).
    ///
    /// ```
    /// let c = tollgate::ManualClock::new();
    /// c.advance_nanos(u64::MAX);
    /// c.advance_nanos(1);
    /// assert_eq!(tollgate::Clock::now(&c), u64::MAX);
    /// ```
    pub fn advance_nanos(&self, ns: Nanos) {
        let _ = self
            .inner
            .now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(ns))
            });
    }

    /// Sets the time to `ns`; refuses (returns `false`) to move backwards, since a clock must be
    /// monotonic.
    ///
    /// ```
    /// let c = tollgate::ManualClock::new();
    /// assert!(c.set(10));
    /// assert!(!c.set(9));
    /// assert_eq!(tollgate::Clock::now(&c), 10);
    /// ```
    pub fn set(&self, ns: Nanos) -> bool {
        self.inner.now.fetch_max(ns, Ordering::AcqRel) <= ns
    }

    /// Every duration passed to [`Clock::sleep`] so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.inner
            .sleeps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        self.inner.now.load(Ordering::Acquire)
    }

    fn sleep(&self, d: Duration) {
        self.inner
            .sleeps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(d);
        self.advance(d);
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

/// A clock that reads tokio's time, so `tokio::time::pause()` drives the limiter too.
///
/// With it, async waits under paused time are deterministic: a test can assert that waiters are
/// granted at exact instants.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tollgate::{Clock, TokioClock};
///
/// let clock = TokioClock::new();
/// tokio::time::sleep(Duration::from_millis(10)).await; // paused: returns at once
/// assert_eq!(clock.now(), 10_000_000);
/// # }
/// ```
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

#[cfg(feature = "tokio")]
impl TokioClock {
    /// A clock whose origin is tokio's now.
    pub fn new() -> TokioClock {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

#[cfg(feature = "tokio")]
impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

#[cfg(feature = "tokio")]
impl Clock for TokioClock {
    fn now(&self) -> Nanos {
        duration_to_nanos(self.origin.elapsed())
    }
}

/// A TSC clock from the `quanta` crate: about 2.5x cheaper to read than [`StdClock`] here, but
/// `rdtsc` is not ordered with surrounding memory operations, so a reading can be slightly
/// earlier than one that happened-before it on another core. GCRA stays safe with that (a late
/// `now` only makes a decision stricter), but choose it knowingly.
///
/// ```
/// use tollgate::{Clock, QuantaClock};
/// let c = QuantaClock::new();
/// let a = c.now();
/// assert!(c.now() >= a);
/// ```
#[cfg(feature = "quanta")]
#[derive(Clone, Debug)]
pub struct QuantaClock {
    clock: quanta::Clock,
    origin: u64,
}

#[cfg(feature = "quanta")]
impl QuantaClock {
    /// A TSC clock whose origin is now.
    pub fn new() -> QuantaClock {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        QuantaClock { clock, origin }
    }
}

#[cfg(feature = "quanta")]
impl Default for QuantaClock {
    fn default() -> Self {
        QuantaClock::new()
    }
}

#[cfg(feature = "quanta")]
impl Clock for QuantaClock {
    #[inline]
    fn now(&self) -> Nanos {
        self.clock
            .delta_as_nanos(self.origin, self.clock.raw().max(self.origin))
    }
}

/// The clock a limiter holds: the default inline (no virtual call on the hot path), anything
/// else behind one `Arc<dyn Clock>`. This keeps limiter types free of a clock parameter.
#[derive(Clone)]
pub(crate) enum AnyClock {
    Std(StdClock),
    Custom(Arc<dyn Clock>),
}

impl AnyClock {
    pub(crate) fn custom<C: Clock>(clock: C) -> AnyClock {
        AnyClock::Custom(Arc::new(clock))
    }

    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        match self {
            AnyClock::Std(c) => c.now(),
            AnyClock::Custom(c) => c.now(),
        }
    }

    pub(crate) fn sleep(&self, d: Duration) {
        match self {
            AnyClock::Std(c) => c.sleep(d),
            AnyClock::Custom(c) => c.sleep(d),
        }
    }
}

impl Default for AnyClock {
    fn default() -> Self {
        AnyClock::Std(StdClock::new())
    }
}

impl fmt::Debug for AnyClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AnyClock::Std(_) => "StdClock",
            AnyClock::Custom(_) => "custom clock",
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_shared_and_saturates() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(1));
        assert_eq!(b.now(), 1_000_000_000);
        b.advance(Duration::MAX);
        assert_eq!(a.now(), u64::MAX);
    }

    #[test]
    fn duration_to_nanos_saturates() {
        assert_eq!(duration_to_nanos(Duration::from_nanos(5)), 5);
        assert_eq!(duration_to_nanos(Duration::MAX), u64::MAX);
    }

    #[test]
    fn std_clock_starts_near_zero_and_moves_forward() {
        let c = StdClock::new();
        let a = c.now();
        std::thread::sleep(Duration::from_millis(2));
        let b = c.now();
        assert!(b >= a + 2_000_000, "{a} {b}");
    }
}
