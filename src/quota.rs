//! [`Quota`]: how many permits per period, with what burst, validated once at construction.

use std::fmt;
use std::time::Duration;

use crate::Nanos;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A rate: `count` permits per `period`, with a burst capacity.
///
/// Internally a quota is the GCRA pair: the emission interval `T = period / count` (integer
/// nanoseconds, truncating) and the burst `b`, from which the tolerance `tau = T * b` follows.
/// Every constructor validates its input, so a `Quota` that exists is always usable: `T >= 1 ns`,
/// `b >= 1` and `T * b` fits in a `u64`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::Quota;
///
/// # fn main() -> Result<(), tollgate::QuotaError> {
/// let q = Quota::per_second(10)?;                  // 10/s, burst 10
/// assert_eq!(q.interval(), Duration::from_millis(100));
/// assert_eq!(q.burst(), 10);
///
/// let q = Quota::per_minute(60)?.with_burst(5)?;  // 1/s on average, at most 5 at once
/// assert_eq!(q.interval(), Duration::from_secs(1));
/// assert_eq!(q.burst(), 5);
///
/// let q = Quota::new(3, Duration::from_secs(1))?;  // T truncates to 333_333_333 ns
/// assert_eq!(q.interval(), Duration::from_nanos(333_333_333));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// Emission interval `T` in nanoseconds, `>= 1`.
    interval: Nanos,
    /// Burst `b`, `>= 1`, with `interval * burst <= u64::MAX`.
    burst: u64,
}

/// Why a [`Quota`] could not be built.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Quota, QuotaError};
///
/// assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroCount));
/// assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
/// assert_eq!(Quota::per_second(2).unwrap().with_burst(0), Err(QuotaError::ZeroBurst));
/// assert_eq!(Quota::new(2_000_000_000, Duration::from_secs(1)), Err(QuotaError::IntervalTooShort));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotaError {
    /// The permit count was zero: a rate of zero permits admits nothing, ever.
    ZeroCount,
    /// The period (or interval) was zero.
    ZeroPeriod,
    /// The burst was zero: not even one permit could ever be granted.
    ZeroBurst,
    /// `period / count` is under one nanosecond, the clock's resolution.
    IntervalTooShort,
    /// The period does not fit in `u64` nanoseconds (about 584 years).
    PeriodTooLong,
    /// `interval * burst` (the tolerance) does not fit in `u64` nanoseconds.
    ToleranceOverflow,
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuotaError::ZeroCount => "quota count must be at least 1",
            QuotaError::ZeroPeriod => "quota period must be longer than zero",
            QuotaError::ZeroBurst => "quota burst must be at least 1",
            QuotaError::IntervalTooShort => "emission interval (period / count) is under 1 ns",
            QuotaError::PeriodTooLong => "quota period exceeds u64 nanoseconds (~584 years)",
            QuotaError::ToleranceOverflow => {
                "interval * burst exceeds u64 nanoseconds (~584 years)"
            }
        })
    }
}

impl std::error::Error for QuotaError {}

impl Quota {
    /// `count` permits per `period`, burst `count`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = tollgate::Quota::new(5, Duration::from_secs(10)).unwrap();
    /// assert_eq!(q.interval(), Duration::from_secs(2));
    /// assert_eq!(q.burst(), 5);
    /// ```
    pub fn new(count: u64, period: Duration) -> Result<Quota, QuotaError> {
        if count == 0 {
            return Err(QuotaError::ZeroCount);
        }
        let period = duration_nanos(period)?;
        let interval = period / count;
        if interval == 0 {
            return Err(QuotaError::IntervalTooShort);
        }
        Quota::checked(interval, count)
    }

    /// `count` permits per second, burst `count`.
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(100).unwrap();
    /// assert_eq!(q.interval(), std::time::Duration::from_millis(10));
    /// ```
    pub fn per_second(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(1))
    }

    /// `count` permits per minute, burst `count`.
    ///
    /// ```
    /// let q = tollgate::Quota::per_minute(30).unwrap();
    /// assert_eq!(q.interval(), std::time::Duration::from_secs(2));
    /// ```
    pub fn per_minute(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(60))
    }

    /// `count` permits per hour, burst `count`.
    ///
    /// ```
    /// let q = tollgate::Quota::per_hour(3600).unwrap();
    /// assert_eq!(q.interval(), std::time::Duration::from_secs(1));
    /// ```
    pub fn per_hour(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(3600))
    }

    /// One permit every `interval`, burst 1 (strict pacing, like Guava's `RateLimiter`).
    /// Combine with [`with_burst`](Quota::with_burst) to allow bursts.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = tollgate::Quota::from_interval(Duration::from_millis(100)).unwrap();
    /// assert_eq!(q.burst(), 1);
    /// assert!(tollgate::Quota::from_interval(Duration::ZERO).is_err());
    /// ```
    pub fn from_interval(interval: Duration) -> Result<Quota, QuotaError> {
        let interval = duration_nanos(interval)?;
        Quota::checked(interval, 1)
    }

    /// The same rate with burst capacity `burst` (how many permits may be taken at once from a
    /// full bucket).
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(10).unwrap().with_burst(1).unwrap();
    /// assert_eq!(q.burst(), 1);
    /// assert_eq!(q.tolerance(), std::time::Duration::from_millis(100));
    /// ```
    pub fn with_burst(self, burst: u64) -> Result<Quota, QuotaError> {
        Quota::checked(self.interval, burst)
    }

    fn checked(interval: Nanos, burst: u64) -> Result<Quota, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        interval
            .checked_mul(burst)
            .ok_or(QuotaError::ToleranceOverflow)?;
        Ok(Quota { interval, burst })
    }

    /// Builds a quota from raw parts already known valid (they came out of a `Quota`).
    pub(crate) fn from_parts(interval: Nanos, burst: u64) -> Quota {
        debug_assert!(Quota::checked(interval, burst).is_ok());
        Quota { interval, burst }
    }

    /// The emission interval `T`: the average time between two permits.
    ///
    /// ```
    /// let q = tollgate::Quota::per_minute(1).unwrap();
    /// assert_eq!(q.interval().as_secs(), 60);
    /// ```
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The burst capacity `b`: permits available at once from a full bucket. Also the `limit`
    /// reported in every [`Decision`](crate::Decision).
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_hour(7).unwrap().burst(), 7);
    /// ```
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The tolerance `tau = T * b`: how long an idle limiter takes to refill completely.
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(4).unwrap();
    /// assert_eq!(q.tolerance(), std::time::Duration::from_secs(1));
    /// ```
    pub fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.tau())
    }

    #[inline]
    pub(crate) fn t(&self) -> Nanos {
        self.interval
    }

    #[inline]
    pub(crate) fn tau(&self) -> Nanos {
        // Validated at construction: cannot overflow.
        self.interval * self.burst
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("interval", &self.interval())
            .field("burst", &self.burst)
            .finish()
    }
}

/// A duration as whole nanoseconds, rejecting zero and anything beyond `u64`.
fn duration_nanos(d: Duration) -> Result<Nanos, QuotaError> {
    if d.is_zero() {
        return Err(QuotaError::ZeroPeriod);
    }
    u64::try_from(d.as_nanos()).map_err(|_| QuotaError::PeriodTooLong)
}

/// Whole seconds to nanoseconds, saturating (used by the redis-cell compatible `throttle`).
pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_nanos(s.saturating_mul(NANOS_PER_SEC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_compute_interval_and_burst() {
        let q = Quota::per_second(1000).unwrap();
        assert_eq!(
            (q.t(), q.burst(), q.tau()),
            (1_000_000, 1000, 1_000_000_000)
        );
        let q = Quota::per_hour(1).unwrap();
        assert_eq!(q.t(), 3_600_000_000_000);
        let q = Quota::new(7, Duration::from_nanos(100)).unwrap();
        assert_eq!(q.t(), 14); // truncates
        let q = Quota::new(1, Duration::from_nanos(1)).unwrap();
        assert_eq!((q.t(), q.burst()), (1, 1));
    }

    #[test]
    fn every_invalid_input_has_its_error() {
        assert_eq!(Quota::per_minute(0), Err(QuotaError::ZeroCount));
        assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
        assert_eq!(
            Quota::from_interval(Duration::ZERO),
            Err(QuotaError::ZeroPeriod)
        );
        assert_eq!(
            Quota::per_second(1).unwrap().with_burst(0),
            Err(QuotaError::ZeroBurst)
        );
        assert_eq!(
            Quota::new(101, Duration::from_nanos(100)),
            Err(QuotaError::IntervalTooShort)
        );
        assert_eq!(
            Quota::new(u64::MAX, Duration::from_secs(1)),
            Err(QuotaError::IntervalTooShort)
        );
        assert_eq!(Quota::new(1, Duration::MAX), Err(QuotaError::PeriodTooLong));
        assert_eq!(
            Quota::from_interval(Duration::from_nanos(u64::MAX) + Duration::from_nanos(1)),
            Err(QuotaError::PeriodTooLong)
        );
        assert_eq!(
            Quota::per_second(1).unwrap().with_burst(u64::MAX),
            Err(QuotaError::ToleranceOverflow)
        );
        // The largest representable pair is fine.
        let q = Quota::from_interval(Duration::from_nanos(u64::MAX)).unwrap();
        assert_eq!(q.tau(), u64::MAX);
        let q = Quota::from_interval(Duration::from_nanos(1))
            .unwrap()
            .with_burst(u64::MAX)
            .unwrap();
        assert_eq!(q.tau(), u64::MAX);
    }

    #[test]
    fn secs_saturates() {
        assert_eq!(secs(2), Duration::from_secs(2));
        assert_eq!(secs(u64::MAX), Duration::from_nanos(u64::MAX));
    }
}
