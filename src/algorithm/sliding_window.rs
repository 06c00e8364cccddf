//! The sliding window split into `k` sub-windows: the rule is the shared sliding one
//! (`super::sliding`), with grants stamped by the start of their sub-window.

use super::sliding::Stamping;
use super::window::limit_and_window;
use crate::quota::{Quota, QuotaError};
use crate::Nanos;
use std::time::Duration;

/// The sliding window with `k` sub-windows: the window `W` is split into `k` sub-windows of
/// `W / k`, and a request is admitted iff the permits of the current sub-window and the
/// `k - 1` before it, plus `n`, are at most `L` (a quota of `count` per `period` gives
/// `L = count`, `W = period`).
///
/// So every window of length `W` that starts on a sub-window boundary holds at most `L`, and so
/// does every span of `W - W/k` wherever it starts; a span of `W` starting inside a sub-window
/// can hold that sub-window's permits more (up to `2L`: `L` at the very end of one sub-window
/// and `L` at the start of the one `k` later), the price of keeping `k` counts instead of a log.
/// `k = 1` would be the fixed window; larger `k` tends to the exact
/// [`SlidingLog`](crate::SlidingLog).
///
/// `remaining = L - sum`; a denial's `retry_after` is exactly when enough of the oldest
/// sub-windows have left for `n` to fit; `reset_after` is when the newest counted sub-window
/// leaves (everything is free again). State: up to `k` `(start, count)` pairs per key, under a
/// per-key lock held only for the decision.
///
/// `k` must be in `2..=64` and divide `W` in nanoseconds exactly, else the limiter refuses the
/// quota with [`QuotaError::Unsupported`] (at [`algorithm`](crate::RateLimiterBuilder::algorithm)
/// and at `set_quota`).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, Quota, RateLimiter, SlidingWindow};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder(Quota::per_minute(100)?)
///     .clock(clock.clone())
///     .algorithm(SlidingWindow::new(6))? // six 10-second sub-windows
///     .build();
/// clock.advance(Duration::from_secs(55));
/// assert!(limiter.try_acquire_n(100).is_ok()); // in sub-window [50 s, 60 s)
/// clock.advance(Duration::from_secs(5));
/// // A new fixed window would be empty; the sliding one still counts them...
/// let d = limiter.check();
/// assert!(!d.allowed);
/// // ...until their sub-window leaves, at 110 s.
/// assert_eq!(d.retry_after, Some(Duration::from_secs(50)));
///
/// assert!(RateLimiter::builder(Quota::per_minute(100)?).algorithm(SlidingWindow::new(7)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Waiting sleeps until the permits would fit and decides again; waiters are not served in
/// arrival order. `check_with` takes the call's count as the limit, on the limiter's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlidingWindow {
    sub_windows: u32,
}

impl SlidingWindow {
    /// A sliding window of `sub_windows` sub-windows (checked when a limiter is built with it:
    /// `2..=64`, dividing the window exactly).
    ///
    /// ```
    /// use tollgate::{Quota, RateLimiter, SlidingWindow};
    /// let l = RateLimiter::builder(Quota::per_second(10)?).algorithm(SlidingWindow::new(10))?.build();
    /// assert!(l.try_acquire());
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub const fn new(sub_windows: u32) -> SlidingWindow {
        SlidingWindow { sub_windows }
    }

    /// The number of sub-windows.
    ///
    /// ```
    /// assert_eq!(tollgate::SlidingWindow::new(4).sub_windows(), 4);
    /// ```
    pub const fn sub_windows(&self) -> u32 {
        self.sub_windows
    }

    /// The length of each sub-window under `quota` (its window `W` over the number of
    /// sub-windows), or why this sliding window cannot run `quota`: what the builders refuse,
    /// for a backend running it elsewhere to refuse the same way.
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] when the number of sub-windows is outside `2..=64`, when it
    /// does not divide `W` exactly in nanoseconds, or when the quota's burst differs from its
    /// count ([`Quota::window_limit`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Quota, SlidingWindow};
    ///
    /// let q = Quota::per_second(10).unwrap();
    /// assert_eq!(SlidingWindow::new(4).sub_window(&q), Ok(Duration::from_millis(250)));
    /// assert!(SlidingWindow::new(3).sub_window(&q).is_err()); // 1 s is not 3 whole-ns thirds
    /// assert!(SlidingWindow::new(1).sub_window(&q).is_err());
    /// ```
    pub fn sub_window(&self, quota: &Quota) -> Result<Duration, QuotaError> {
        let (_, window) = limit_and_window(quota)?;
        Ok(Duration::from_nanos(self.granularity(window)?))
    }
}

impl Stamping for SlidingWindow {
    fn granularity(&self, window: Nanos) -> Result<Nanos, QuotaError> {
        let k = u64::from(self.sub_windows);
        if !(2..=64).contains(&k) {
            return Err(QuotaError::Unsupported(
                "sliding window: the number of sub-windows must be in 2..=64",
            ));
        }
        if window % k != 0 {
            return Err(QuotaError::Unsupported(
                "sliding window: the sub-windows must divide the window exactly (in ns)",
            ));
        }
        Ok(window / k)
    }
}
