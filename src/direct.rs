//! [`RateLimiter`]: one GCRA cell shared by every caller (a global or per-resource limit).

use std::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::cell::{QuotaCell, TatCell};
use crate::clock::{duration_to_nanos, AnyClock, Clock};
use crate::outcome::{AcquireError, Decision, ThrottleReply};
use crate::quota::{secs, Quota, QuotaError};
use crate::wait::{block_until_ready, Reservation, Target};

/// A direct (unkeyed) rate limiter: one GCRA cell, lock-free, shared by reference or `Arc`.
///
/// ```
/// use tollgate::{Quota, RateLimiter};
///
/// let limiter = RateLimiter::new(Quota::per_second(100).unwrap());
/// if limiter.try_acquire() {
///     // handle the request
/// }
/// // Guava style: block until a permit is available; returns the time waited.
/// let waited = limiter.acquire();
/// # let _ = waited;
/// ```
pub struct RateLimiter {
    // The hot word on its own cache line: writers to it must not invalidate the quota readers.
    cell: CachePadded<TatCell>,
    quota: QuotaCell,
    clock: AnyClock,
}

/// Configures a [`RateLimiter`]: the quota, and optionally a clock.
///
/// ```
/// use tollgate::{ManualClock, Quota, RateLimiter};
/// let limiter = RateLimiter::builder(Quota::per_minute(10).unwrap())
///     .clock(ManualClock::new())
///     .build();
/// assert_eq!(limiter.quota().burst(), 10);
/// ```
#[derive(Debug)]
#[must_use = "call .build() to get a limiter"]
pub struct RateLimiterBuilder {
    quota: Quota,
    clock: AnyClock,
}

impl RateLimiterBuilder {
    /// Uses `clock` instead of the default [`StdClock`](crate::StdClock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = AnyClock::custom(clock);
        self
    }

    /// Builds the limiter, starting with a full bucket.
    pub fn build(self) -> RateLimiter {
        RateLimiter {
            cell: CachePadded::new(TatCell::new()),
            quota: QuotaCell::new(self.quota),
            clock: self.clock,
        }
    }
}

impl RateLimiter {
    /// A limiter for `quota` on the default clock, starting full.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(1).unwrap());
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// ```
    pub fn new(quota: Quota) -> RateLimiter {
        RateLimiter::builder(quota).build()
    }

    /// A builder, to choose a clock.
    pub fn builder(quota: Quota) -> RateLimiterBuilder {
        RateLimiterBuilder {
            quota,
            clock: AnyClock::default(),
        }
    }

    /// The quota in force.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_hour(5).unwrap());
    /// assert_eq!(limiter.quota().burst(), 5);
    /// ```
    pub fn quota(&self) -> Quota {
        self.quota.load()
    }

    /// Replaces the quota at runtime. The stored debt (`tat - now`) is kept: permits already
    /// taken are not forgiven; the new rate and burst apply from the next decision on.
    /// Concurrent decisions see either the old or the new quota, never a mix (a decision already
    /// in flight may still use the previous one).
    ///
    /// ```
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::new(Quota::per_second(1).unwrap());
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// limiter.set_quota(Quota::per_second(1).unwrap().with_burst(2).unwrap());
    /// assert!(limiter.try_acquire()); // the larger burst has room beside the old debt
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        self.quota.store(quota);
    }

    /// Takes one permit if available now. Never waits.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(2).unwrap());
    /// assert!(limiter.try_acquire());
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// ```
    #[inline]
    #[must_use = "a permit may have been denied"]
    pub fn try_acquire(&self) -> bool {
        let q = self.quota.load();
        self.cell.check(self.clock.now(), 1, q).allowed()
    }

    /// Takes `n` permits at once if available now. Never waits.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait after which it would succeed;
    /// [`AcquireError::ExceedsBurst`] if `n` is larger than the burst (it never could).
    /// `n = 0` always succeeds and takes nothing.
    ///
    /// ```
    /// use tollgate::{AcquireError, Quota, RateLimiter};
    /// let limiter = RateLimiter::new(Quota::per_second(10).unwrap());
    /// assert!(limiter.try_acquire_n(10).is_ok());
    /// assert!(matches!(limiter.try_acquire_n(1), Err(AcquireError::RateLimited { .. })));
    /// assert!(matches!(limiter.try_acquire_n(11), Err(AcquireError::ExceedsBurst { .. })));
    /// ```
    #[inline]
    pub fn try_acquire_n(&self, n: u64) -> Result<(), AcquireError> {
        let q = self.quota.load();
        self.cell.check(self.clock.now(), n, q).into_result(n, q)
    }

    /// Tries one permit and reports everything about the decision (for response headers).
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(3).unwrap());
    /// let d = limiter.check();
    /// assert!(d.allowed);
    /// assert_eq!((d.limit, d.remaining), (3, 2));
    /// ```
    #[must_use = "the decision says whether the permit was granted"]
    pub fn check(&self) -> Decision {
        self.check_n(1)
    }

    /// Tries `n` permits and reports everything about the decision. `n` larger than the burst
    /// is denied with [`Decision::exceeds_burst`]; `n = 0` is [`peek`](RateLimiter::peek).
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(3).unwrap());
    /// assert_eq!(limiter.check_n(3).remaining, 0);
    /// assert!(!limiter.check_n(1).allowed);
    /// ```
    #[must_use = "the decision says whether the permits were granted"]
    pub fn check_n(&self, n: u64) -> Decision {
        self.check_with(n, self.quota.load())
    }

    /// Like [`check_n`](RateLimiter::check_n) but under `quota` for this call only (the
    /// redis-cell style: the limit travels with the request). The state is shared with every
    /// other call.
    ///
    /// ```
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::new(Quota::per_second(1).unwrap());
    /// let premium = Quota::per_second(100).unwrap();
    /// assert!(limiter.check_with(50, premium).allowed);
    /// ```
    #[must_use = "the decision says whether the permits were granted"]
    pub fn check_with(&self, n: u64, quota: Quota) -> Decision {
        let now = self.clock.now();
        self.cell.check(now, n, quota).decision(now, quota)
    }

    /// The state right now, taking nothing (a check with `n = 0`).
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(4).unwrap());
    /// assert_eq!(limiter.peek().remaining, 4);
    /// assert_eq!(limiter.peek().remaining, 4);
    /// ```
    #[must_use]
    pub fn peek(&self) -> Decision {
        self.check_n(0)
    }

    /// redis-cell's `CL.THROTTLE <key> max_burst count period quantity` against this limiter's
    /// state: burst `max_burst + 1`, `count` per `period_secs` seconds, cost `quantity`.
    ///
    /// # Errors
    /// The [`QuotaError`] for an invalid quota (zero count or period, an overflowing burst).
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(1).unwrap());
    /// let reply = limiter.throttle(0, 1, 10, 1).unwrap();
    /// assert_eq!(reply.limited, 0);
    /// assert_eq!(limiter.throttle(0, 1, 10, 1).unwrap().limited, 1);
    /// ```
    pub fn throttle(
        &self,
        max_burst: u64,
        count: u64,
        period_secs: u64,
        quantity: u64,
    ) -> Result<ThrottleReply, QuotaError> {
        let quota = throttle_quota(max_burst, count, period_secs)?;
        Ok(ThrottleReply::from_decision(
            &self.check_with(quantity, quota),
        ))
    }

    /// Takes one permit, blocking the thread until it is available (Guava's `acquire()`).
    /// Returns the time waited.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(clock.clone())
    ///     .build();
    /// assert_eq!(limiter.acquire(), Duration::ZERO);
    /// assert_eq!(limiter.acquire(), Duration::from_millis(100)); // ManualClock "sleeps" instantly
    /// ```
    pub fn acquire(&self) -> Duration {
        // One permit at most one interval: never unrepresentable short of the end of u64 time.
        self.acquire_n(1).unwrap_or(Duration::MAX)
    }

    /// Takes `n` permits, blocking until they are available; returns the time waited. `n`
    /// larger than the burst is allowed: it waits `(n - burst) * T` from a full bucket (for
    /// bandwidth shaping).
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] if the wait does not fit in `u64` nanoseconds.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap())
    ///     .clock(clock.clone())
    ///     .build();
    /// assert_eq!(limiter.acquire_n(15).unwrap(), Duration::from_millis(500));
    /// ```
    pub fn acquire_n(&self, n: u64) -> Result<Duration, AcquireError> {
        self.reserve_then_block(n, None)
    }

    /// Takes `n` permits if they are available within `timeout`, blocking for at most that
    /// long. If the wait would be longer, nothing is reserved and it returns at once.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed;
    /// [`AcquireError::Unrepresentable`] as for [`acquire_n`](RateLimiter::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(clock.clone())
    ///     .build();
    /// limiter.acquire();
    /// assert!(limiter.try_acquire_for(1, Duration::from_millis(50)).is_err()); // needs 100 ms
    /// assert_eq!(limiter.try_acquire_for(1, Duration::from_millis(100)).unwrap(), Duration::from_millis(100));
    /// ```
    pub fn try_acquire_for(&self, n: u64, timeout: Duration) -> Result<Duration, AcquireError> {
        self.reserve_then_block(n, Some(duration_to_nanos(timeout)))
    }

    fn reserve_then_block(&self, n: u64, max_wait: Option<u64>) -> Result<Duration, AcquireError> {
        let now = self.clock.now();
        let ticket = self.cell.reserve(now, n, self.quota.load(), max_wait)?;
        Ok(block_until_ready(&self.clock, now, &ticket))
    }

    /// Reserves `n` permits now, in arrival order, without waiting: the reservation says when
    /// they may be used and can be cancelled before then.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] as for [`acquire_n`](RateLimiter::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(2).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let r = limiter.reserve(4).unwrap();
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// r.cancel();
    /// assert!(limiter.try_acquire_n(2).is_ok());
    /// ```
    pub fn reserve(&self, n: u64) -> Result<Reservation<'_>, AcquireError> {
        let now = self.clock.now();
        let ticket = self.cell.reserve(now, n, self.quota.load(), None)?;
        Ok(Reservation::new(
            ticket,
            now,
            &self.clock,
            Target::Cell(&self.cell),
        ))
    }
}

/// The quota redis-cell derives from `max_burst count period`.
pub(crate) fn throttle_quota(
    max_burst: u64,
    count: u64,
    period_secs: u64,
) -> Result<Quota, QuotaError> {
    let burst = max_burst
        .checked_add(1)
        .ok_or(QuotaError::ToleranceOverflow)?;
    Quota::new(count, secs(period_secs))?.with_burst(burst)
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("quota", &self.quota())
            .field("clock", &self.clock)
            .finish()
    }
}

#[cfg(feature = "tokio")]
impl RateLimiter {
    /// Takes `n` permits, waiting asynchronously on tokio's timer; returns the time waited.
    ///
    /// The slot is reserved at the first poll, so concurrent waiters are granted in the order
    /// they first polled, each woken exactly once at its ready time.
    ///
    /// # Cancel safety
    /// This method is cancel-safe. Dropping the future before it completes (a `select!` branch
    /// that lost, a `tokio::time::timeout` that fired) cancels the reservation with the refund
    /// rule, so no capacity is lost.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] as for [`acquire_n`](RateLimiter::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(100).unwrap());
    /// let waited = limiter.acquire_async(1).await.unwrap();
    /// assert!(waited.is_zero());
    /// # }
    /// ```
    pub async fn acquire_async(&self, n: u64) -> Result<Duration, AcquireError> {
        self.reserve_then_sleep(n, None).await
    }

    /// Takes `n` permits if they are available within `timeout`, waiting asynchronously. If
    /// the wait would be longer it returns at once with nothing reserved.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_async`](RateLimiter::acquire_async).
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed;
    /// [`AcquireError::Unrepresentable`] as for [`acquire_n`](RateLimiter::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_minute(1).unwrap());
    /// limiter.acquire_async(1).await.unwrap();
    /// let e = limiter.try_acquire_for_async(1, Duration::from_millis(10)).await;
    /// assert!(e.is_err());
    /// # }
    /// ```
    pub async fn try_acquire_for_async(
        &self,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError> {
        self.reserve_then_sleep(n, Some(duration_to_nanos(timeout)))
            .await
    }

    /// [`acquire_async`](RateLimiter::acquire_async) on an `Arc`: the future owns its limiter,
    /// so it is `'static` and can be moved into `tokio::spawn`.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_async`](RateLimiter::acquire_async).
    ///
    /// # Errors
    /// As [`acquire_async`](RateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::RateLimiter::new(tollgate::Quota::per_second(10).unwrap()));
    /// let task = tokio::spawn(limiter.clone().acquire_owned(1));
    /// assert!(task.await.unwrap().is_ok());
    /// # }
    /// ```
    pub async fn acquire_owned(
        self: std::sync::Arc<Self>,
        n: u64,
    ) -> Result<Duration, AcquireError> {
        self.acquire_async(n).await
    }

    async fn reserve_then_sleep(
        &self,
        n: u64,
        max_wait: Option<u64>,
    ) -> Result<Duration, AcquireError> {
        let now = self.clock.now();
        let ticket = self.cell.reserve(now, n, self.quota.load(), max_wait)?;
        let cancel = |t: &crate::gcra::Ticket| self.cell.cancel(self.clock.now(), t);
        Ok(crate::wait::sleep_until_ready(now, ticket, cancel).await)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
