//! What a decision reports, and why a permit can be refused.

use std::fmt;
use std::time::Duration;

/// The full result of a check: everything a service needs for rate-limit response headers.
///
/// The fields follow redis-cell's `CL.THROTTLE` (with `limit` = the burst, which redis-cell
/// reports as `max_burst + 1`).
///
/// ```
/// use tollgate::{Quota, RateLimiter, ManualClock};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder(Quota::per_second(2).unwrap()).clock(clock.clone()).build();
/// let d = limiter.check();
/// assert!(d.allowed);
/// assert_eq!((d.limit, d.remaining), (2, 1));
/// assert_eq!(d.retry_after, None);
/// assert_eq!(d.reset_after.as_millis(), 500);
///
/// let _ = limiter.check();
/// let d = limiter.check();
/// assert!(!d.allowed);
/// assert_eq!(d.retry_after.unwrap().as_millis(), 500);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the permits were granted (and recorded).
    pub allowed: bool,
    /// The burst: the most permits available at once.
    pub limit: u64,
    /// Permits that could still be taken right now, after this decision.
    pub remaining: u64,
    /// When denied, how long until the same request would be allowed. `None` when allowed, and
    /// when the request asks for more than the burst (it can never be allowed as one request).
    pub retry_after: Option<Duration>,
    /// How long until the limiter is back to full capacity.
    pub reset_after: Duration,
    /// What refused it: `None` when allowed; [`RefusedBy::Quota`] for a refusal by the rate
    /// (a request over the limit, over the burst, or past the limiter's time);
    /// [`RefusedBy::KeyCap`] for a new key that a keyed limiter's full key table refused
    /// ([`max_keys`](crate::KeyedRateLimiterBuilder::max_keys) with
    /// [`WhenFull::Deny`](crate::WhenFull::Deny)): the server's capacity, not the client's
    /// traffic.
    pub refused_by: Option<RefusedBy>,
}

/// Why a [`Decision`] refused: by the quota, or because a keyed limiter's key table is full.
///
/// ```
/// use std::num::NonZeroUsize;
/// use tollgate::{KeyedRateLimiter, ManualClock, Quota, RefusedBy};
///
/// let limiter = KeyedRateLimiter::<u32>::builder(Quota::per_second(1)?)
///     .clock(ManualClock::new())
///     .max_keys(NonZeroUsize::MIN) // the default `WhenFull::Deny`
///     .build();
/// assert_eq!(limiter.check(&1).refused_by, None); // allowed: key 1 takes the one slot
/// assert_eq!(limiter.check(&1).refused_by, Some(RefusedBy::Quota)); // key 1 sent too much
/// assert_eq!(limiter.check(&2).refused_by, Some(RefusedBy::KeyCap)); // no room for key 2
/// # Ok::<(), tollgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusedBy {
    /// The quota: the key (or the limiter) used its permits, or asked for more than the burst
    /// or for a grant past the limiter's time. The client's traffic decides it.
    Quota,
    /// The key cap: the key is new, the key table is full
    /// ([`max_keys`](crate::KeyedRateLimiterBuilder::max_keys) reached, no cold key to
    /// evict) and [`WhenFull::Deny`](crate::WhenFull::Deny) refuses it. The server's
    /// capacity decides it, not the client's traffic: `retry_after` is when a slot may free.
    KeyCap,
}

impl Decision {
    /// A grant: the permits were taken, `remaining` are left of `limit`, and the limiter is
    /// back to full capacity after `reset_after`. For backends outside the crate (the fields
    /// are public, but `Decision` is `#[non_exhaustive]`, so it is built with these).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Decision;
    ///
    /// let d = Decision::allowed(10, 9, Duration::from_millis(100));
    /// assert!(d.allowed && d.retry_after.is_none());
    /// assert_eq!((d.limit, d.remaining, d.reset_after), (10, 9, Duration::from_millis(100)));
    /// ```
    #[must_use]
    pub const fn allowed(limit: u64, remaining: u64, reset_after: Duration) -> Decision {
        Decision {
            allowed: true,
            limit,
            remaining,
            retry_after: None,
            reset_after,
            refused_by: None,
        }
    }

    /// A refusal that retrying can cure: the same request would be allowed after
    /// `retry_after`; nothing was taken.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Decision;
    ///
    /// let wait = Duration::from_secs(2);
    /// let d = Decision::denied(10, 0, wait, wait);
    /// assert!(!d.allowed && !d.exceeds_burst());
    /// assert_eq!(d.retry_after, Some(wait));
    /// ```
    #[must_use]
    pub const fn denied(
        limit: u64,
        remaining: u64,
        retry_after: Duration,
        reset_after: Duration,
    ) -> Decision {
        Decision {
            allowed: false,
            limit,
            remaining,
            retry_after: Some(retry_after),
            reset_after,
            refused_by: Some(RefusedBy::Quota),
        }
    }

    /// A refusal that retrying cannot cure (more than the burst at once, or a grant past the
    /// end of the limiter's time): no `retry_after` ([`exceeds_burst`](Decision::exceeds_burst)
    /// is true); nothing was taken.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Decision;
    ///
    /// let d = Decision::never(10, 10, Duration::ZERO);
    /// assert!(!d.allowed && d.exceeds_burst());
    /// ```
    #[must_use]
    pub const fn never(limit: u64, remaining: u64, reset_after: Duration) -> Decision {
        Decision {
            allowed: false,
            limit,
            remaining,
            retry_after: None,
            reset_after,
            refused_by: Some(RefusedBy::Quota),
        }
    }

    /// A refusal by a full key table ([`RefusedBy::KeyCap`]): the key is new and there is no
    /// room to track it; a slot may free after `retry_after`. Nothing was taken; `remaining`
    /// is 0 and `reset_after` is `retry_after`. For backends outside the crate with a key cap
    /// of their own.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Decision, RefusedBy};
    ///
    /// let d = Decision::key_cap_reached(10, Duration::from_secs(1));
    /// assert!(!d.allowed && d.is_key_cap_reached() && !d.exceeds_burst());
    /// assert_eq!(d.refused_by, Some(RefusedBy::KeyCap));
    /// assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
    /// ```
    #[must_use]
    pub const fn key_cap_reached(limit: u64, retry_after: Duration) -> Decision {
        Decision {
            allowed: false,
            limit,
            remaining: 0,
            retry_after: Some(retry_after),
            reset_after: retry_after,
            refused_by: Some(RefusedBy::KeyCap),
        }
    }

    /// Refused because the key table is full ([`RefusedBy::KeyCap`]), not by the rate.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Decision;
    /// assert!(Decision::key_cap_reached(5, Duration::from_secs(1)).is_key_cap_reached());
    /// assert!(!Decision::denied(5, 0, Duration::from_secs(1), Duration::ZERO).is_key_cap_reached());
    /// ```
    pub fn is_key_cap_reached(&self) -> bool {
        self.refused_by == Some(RefusedBy::KeyCap)
    }

    /// Denied because more permits were asked for than the burst holds.
    ///
    /// ```
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::new(Quota::per_second(5).unwrap());
    /// assert!(limiter.check_n(6).exceeds_burst());
    /// assert!(!limiter.check_n(5).exceeds_burst());
    /// ```
    pub fn exceeds_burst(&self) -> bool {
        !self.allowed && self.retry_after.is_none()
    }
}

/// Why permits were not granted: the one refusal type of every limiter's acquire methods
/// ([`RateLimiter`](crate::RateLimiter), [`KeyedRateLimiter`](crate::KeyedRateLimiter),
/// [`SmoothRateLimiter`](crate::SmoothRateLimiter), the concurrency limiters
/// [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) and
/// [`KeyedConcurrencyLimiter`](crate::KeyedConcurrencyLimiter); a `RedisRateLimiter` wraps it
/// in `RedisLimitError::Limited`). A count of zero is never refused.
///
/// ```
/// use tollgate::{AcquireError, Quota, RateLimiter};
///
/// let limiter = RateLimiter::new(Quota::per_second(2).unwrap());
/// assert_eq!(
///     limiter.try_acquire_n(3),
///     Err(AcquireError::ExceedsBurst { requested: 3, burst: 2 })
/// );
/// limiter.try_acquire_n(2).unwrap();
/// assert!(matches!(limiter.try_acquire_n(1), Err(AcquireError::RateLimited { .. })));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// Not now: the request would conform after `retry_after` (for the timeout variants: the
    /// wait it would need, which exceeded the timeout).
    RateLimited {
        /// How long until the same request would be granted.
        retry_after: Duration,
    },
    /// More permits than the burst, asked of a call that does not wait: it can never succeed.
    ExceedsBurst {
        /// Permits asked for.
        requested: u64,
        /// The burst of the quota in force.
        burst: u64,
    },
    /// The permits would be granted only after the last time the limiter can represent, so
    /// never: nothing was reserved. In process that time is [`MAX_NANOS`](crate::MAX_NANOS)
    /// (`2^62 - 1` ns from the clock's origin, about 146 years); for a `RedisRateLimiter`, the
    /// range of its scripts.
    Unrepresentable {
        /// Permits asked for.
        requested: u64,
    },
    /// Not now, from a concurrency limit: the permits are held by others (`in_flight` of
    /// `limit`), or waiters queued earlier come first. No time is given: permits come back
    /// when their holders finish, not on a schedule. A non-waiting call returns it at once; a
    /// call with a timeout, when the timeout passed first. (A new key that a keyed concurrency
    /// limiter's full key cap refuses gets [`KeyCapReached`](AcquireError::KeyCapReached)
    /// instead: the table has no room for it, whatever the key's own limit.)
    ///
    /// ```
    /// use tollgate::{AcquireError, ConcurrencyLimiter};
    ///
    /// let limiter = ConcurrencyLimiter::new(1).unwrap();
    /// let held = limiter.try_acquire().unwrap();
    /// assert_eq!(
    ///     limiter.try_acquire_n(1).unwrap_err(),
    ///     AcquireError::AtCapacity { in_flight: 1, limit: 1 }
    /// );
    /// drop(held);
    /// assert!(limiter.try_acquire().is_some());
    /// ```
    AtCapacity {
        /// Permits in flight when refused.
        in_flight: u64,
        /// The concurrency limit in force.
        limit: u64,
    },
    /// Not now, from a full key table: the key is new, the keyed limiter's key cap
    /// ([`max_keys`](crate::KeyedRateLimiterBuilder::max_keys)) is reached with no cold or
    /// idle key to evict, and [`WhenFull::Deny`](crate::WhenFull::Deny) refuses it. It is the
    /// server's capacity, not the client's traffic (an HTTP layer answers `503`, not `429`).
    /// Nothing was taken.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tollgate::{AcquireError, KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u32>::builder(Quota::per_second(1)?)
    ///     .clock(ManualClock::new())
    ///     .max_keys(NonZeroUsize::MIN)
    ///     .build();
    /// limiter.try_acquire_n(&1, 1).unwrap();
    /// let e = limiter.try_acquire_n(&2, 1).unwrap_err();
    /// assert!(matches!(e, AcquireError::KeyCapReached { retry_after: Some(_) }));
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    KeyCapReached {
        /// When a slot may free, for a rate limiter: the wait a refused check reports (for the
        /// timeout variants: the wait the new key's grant would need, which exceeded the
        /// timeout). `None` for a concurrency limiter: its keys free their slots when their
        /// permits are released, not on a schedule.
        retry_after: Option<Duration>,
    },
}

impl AcquireError {
    /// The wait after which retrying could succeed, if there is one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::AcquireError;
    /// let e = AcquireError::RateLimited { retry_after: Duration::from_secs(1) };
    /// assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AcquireError::RateLimited { retry_after } => Some(*retry_after),
            AcquireError::KeyCapReached { retry_after } => *retry_after,
            _ => None,
        }
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::RateLimited { retry_after } => {
                write!(f, "rate limited; retry after {retry_after:?}")
            }
            AcquireError::ExceedsBurst { requested, burst } => write!(
                f,
                "{requested} permits requested but the burst is {burst}: never grantable at once"
            ),
            AcquireError::Unrepresentable { requested } => write!(
                f,
                "waiting for {requested} permits would end past the limiter's time range (in \
                 process MAX_NANOS: 2^62 - 1 ns from the clock's origin, about 146 years)"
            ),
            AcquireError::AtCapacity { in_flight, limit } => write!(
                f,
                "at capacity: {in_flight} of {limit} permits in flight (or waiters ahead); \
                 retry after a release"
            ),
            AcquireError::KeyCapReached {
                retry_after: Some(wait),
            } => write!(
                f,
                "the key is new and the limiter's key table is full (key cap reached); a slot \
                 may free in {wait:?}"
            ),
            AcquireError::KeyCapReached { retry_after: None } => write!(
                f,
                "the key is new and the limiter's key table is full (key cap reached); retry \
                 after a key's permits are released"
            ),
        }
    }
}

impl std::error::Error for AcquireError {}

/// Why a keyed limiter did not record a [`block`](crate::KeyedRateLimiter::block) or a
/// [`penalize`](crate::KeyedRateLimiter::penalize): the key is not tracked, the key cap
/// ([`max_keys`](crate::KeyedRateLimiterBuilder::max_keys)) is reached, and reclaiming cold
/// keys freed no slot. Nothing was recorded, under either [`WhenFull`](crate::WhenFull): a
/// new key that `WhenFull::AllowUntracked` lets through is decided untracked, which a block
/// or a penalty cannot be (it would be forgotten at once).
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use tollgate::{AdjustError, KeyedRateLimiter, ManualClock, Quota};
///
/// let limiter = KeyedRateLimiter::<u32>::builder(Quota::per_second(1)?)
///     .clock(ManualClock::new())
///     .max_keys(NonZeroUsize::MIN)
///     .build();
/// assert!(limiter.block(&1, Duration::from_secs(60)).is_ok());
/// let err = limiter.penalize(&2, 1).unwrap_err();
/// assert!(matches!(err, AdjustError::KeyCapReached { .. }));
/// # Ok::<(), tollgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdjustError {
    /// The key cap is reached: nothing was recorded. `retry_after` is when a slot may free,
    /// judged as a new key's refused check judges it (at least 1 ns).
    KeyCapReached {
        /// When a slot may free.
        retry_after: Duration,
    },
}

impl fmt::Display for AdjustError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdjustError::KeyCapReached { retry_after } => write!(
                f,
                "the key is new and the key cap is reached: nothing recorded; a slot may free \
                 in {retry_after:?}"
            ),
        }
    }
}

impl std::error::Error for AdjustError {}

/// redis-cell's `CL.THROTTLE` reply, value for value.
///
/// Durations are whole seconds (truncated, plus one if the sub-second part is at least 1 ms), and
/// `-1` stands for "none".
///
/// ```
/// use tollgate::{ManualClock, Quota, RateLimiter};
///
/// let limiter = RateLimiter::builder(Quota::per_second(1).unwrap())
///     .clock(ManualClock::new())
///     .build();
/// // CL.THROTTLE key 15 30 60 1: burst 16, 30 per 60 s, cost 1.
/// let r = limiter.throttle(15, 30, 60, 1).unwrap();
/// assert_eq!(r.to_array(), [0, 16, 15, -1, 2]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ThrottleReply {
    /// `0` allowed, `1` limited.
    pub limited: i64,
    /// `max_burst + 1`.
    pub limit: i64,
    /// Remaining permits.
    pub remaining: i64,
    /// Seconds until a retry could succeed; `-1` when allowed (or never grantable).
    pub retry_after: i64,
    /// Seconds until the bucket is full again.
    pub reset_after: i64,
}

impl ThrottleReply {
    /// The five values in `CL.THROTTLE`'s order.
    ///
    /// ```
    /// use tollgate::ThrottleReply;
    ///
    /// // Refused: 5 permits at most, none left, retry in 2 s, full again in 10 s.
    /// let reply = ThrottleReply { limited: 1, limit: 5, remaining: 0, retry_after: 2, reset_after: 10 };
    /// assert_eq!(reply.to_array(), [1, 5, 0, 2, 10]);
    /// ```
    pub fn to_array(&self) -> [i64; 5] {
        [
            self.limited,
            self.limit,
            self.remaining,
            self.retry_after,
            self.reset_after,
        ]
    }

    /// The reply for a decision, redis-cell's way: `limit`, `remaining` and the durations
    /// saturate at `i64::MAX`; durations in whole seconds as above; `retry_after` `-1` when
    /// there is none. (Here `limit` is the decision's, the burst: redis-cell's
    /// `max_burst + 1`.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Decision, ThrottleReply};
    ///
    /// let d = Decision::denied(16, 0, Duration::from_millis(1500), Duration::from_secs(30));
    /// assert_eq!(ThrottleReply::from_decision(&d).to_array(), [1, 16, 0, 2, 30]);
    /// ```
    #[must_use]
    pub fn from_decision(d: &Decision) -> ThrottleReply {
        ThrottleReply {
            limited: i64::from(!d.allowed),
            limit: clamp_i64(d.limit),
            remaining: clamp_i64(d.remaining),
            retry_after: d.retry_after.map_or(-1, whole_seconds),
            reset_after: whole_seconds(d.reset_after),
        }
    }
}

pub(crate) fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// redis-cell's rounding: truncate to seconds, then add one if the rest is at least 1 ms.
fn whole_seconds(d: Duration) -> i64 {
    let s = clamp_i64(d.as_secs());
    if d.subsec_millis() >= 1 {
        s.saturating_add(1)
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_rounds_like_redis_cell() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_micros(999)), 0);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1999)), 2);
        assert_eq!(whole_seconds(Duration::from_nanos(2_000_999_999)), 2);
        assert_eq!(whole_seconds(Duration::from_nanos(2_001_000_000)), 3);
        assert_eq!(whole_seconds(Duration::MAX), i64::MAX);
    }

    /// The message states the limit the refusal comes from: `MAX_NANOS` and its span in
    /// (Julian) years, computed here from the constant rather than written down.
    #[test]
    fn unrepresentable_names_the_time_range_it_exceeds() {
        let clock = crate::ManualClock::new();
        let t = Duration::from_nanos(crate::MAX_NANOS);
        let limiter = crate::RateLimiter::builder(crate::Quota::from_interval(t).unwrap())
            .clock(clock)
            .build();
        // Two permits at T = MAX_NANOS would end at 2 * MAX_NANOS: past the range.
        let e = limiter.acquire_n(2).unwrap_err();
        assert_eq!(e, AcquireError::Unrepresentable { requested: 2 });
        let years = crate::MAX_NANOS / 31_557_600_000_000_000;
        let msg = e.to_string();
        assert!(msg.contains("MAX_NANOS"), "{msg}");
        assert!(msg.contains(&format!("about {years} years")), "{msg}");
    }
}
