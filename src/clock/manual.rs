//! [`ManualClock`]: time moved by hand, for deterministic tests.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{duration_to_nanos, Clock};
use crate::sync::{AtomicU64, Mutex, Ordering};
use crate::Nanos;

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
    ///
    /// ```
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// assert_eq!(clock.now(), 0);
    /// assert!(clock.sleeps().is_empty());
    /// ```
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves time forward by `d` (saturating at `u64::MAX` ns).
    ///
    /// Clones share the time, so a test can keep one and hand another to a limiter:
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Quota::per_second(1).unwrap())
    ///     .clock(clock.clone())
    ///     .build();
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(clock.now(), 1_000_000_000);
    /// assert!(limiter.try_acquire());
    /// ```
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
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.sleep(Duration::from_millis(2));
    /// clock.advance(Duration::from_millis(5)); // not a sleep: not recorded
    /// clock.sleep(Duration::from_millis(1));
    /// assert_eq!(clock.sleeps(), [Duration::from_millis(2), Duration::from_millis(1)]);
    /// ```
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn shared_and_saturates() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(1));
        assert_eq!(b.now(), 1_000_000_000);
        b.advance(Duration::MAX);
        assert_eq!(a.now(), u64::MAX);
    }
}
