//! The sliding log: the shared sliding rule (`super::sliding`) with every grant stamped by its
//! exact `now`.

use super::sliding::Stamping;
use crate::quota::QuotaError;
use crate::Nanos;

/// The sliding log, exact: a request is admitted iff the permits granted with timestamps in
/// `(now - W, now]`, plus `n`, are at most `L` (the Redis sorted-set recipe, in process).
/// Every window of length `W`, wherever it starts, holds at most `L` permits.
///
/// `remaining = L - counted`; a denial's `retry_after` is exactly when the oldest grants that
/// must leave for `n` to fit have left; `reset_after` is when the newest grant leaves.
///
/// Memory is `O(L)` per key by nature: each grant is one `(timestamp, permits)` entry (grants
/// at the same nanosecond share one). Up to four are held in the key's own state, 8 bytes each
/// while they lie within 73 minutes of one another and count fewer than 2^22 permits; more, or
/// larger, go to a ring on the heap (16 bytes an entry) that grows to the live entries and
/// shrinks back; a key with at most four entries that fit holds no allocation. The state sits behind a
/// per-key lock held only for the decision. For large `L`, prefer [`SlidingWindow`] (at most
/// `k` entries) or [`WeightedWindow`](crate::WeightedWindow) (one word).
///
/// [`SlidingWindow`]: crate::SlidingWindow
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, Quota, RateLimiter, SlidingLog};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder(Quota::per_second(3)?)
///     .clock(clock.clone())
///     .algorithm(SlidingLog)?
///     .build();
/// assert!(limiter.try_acquire()); // at 0 ms
/// clock.advance(Duration::from_millis(400));
/// assert!(limiter.try_acquire_n(2).is_ok()); // at 400 ms
/// let d = limiter.check();
/// assert!(!d.allowed);
/// assert_eq!(d.retry_after, Some(Duration::from_millis(600))); // the grant at 0 leaves at 1 s
/// clock.advance(Duration::from_millis(600));
/// assert!(limiter.try_acquire());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Waiting sleeps until the permits would fit and decides again; waiters are not served in
/// arrival order. `check_with` takes the call's count as the limit, on the limiter's window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlidingLog;

impl Stamping for SlidingLog {
    fn granularity(&self, _window: Nanos) -> Result<Nanos, QuotaError> {
        Ok(1)
    }
}
