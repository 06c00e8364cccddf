//! [`Quota`]: how many permits per period, with what burst, validated once at construction.

use std::fmt;
use std::time::Duration;

use crate::nanos::MAX_NANOS;
use crate::Nanos;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A rate: `count` permits per `period`, with a burst capacity.
///
/// For GCRA (the default algorithm) a quota is the pair: emission interval
/// `T = ceil(period / count)` in integer nanoseconds, and burst `b`, from which the tolerance
/// `tau = T * b` follows. `T` is rounded **up**, so a limiter never admits more than asked:
/// `per_second(3)` is one permit every 333,333,334 ns. Window algorithms use `count` and
/// `period` exactly (`per_minute(100)`: at most 100 in a 60 s window).
///
/// Every constructor validates its input, so a `Quota` that exists is always usable:
/// `T >= 1 ns`, `b >= 1`, and `period` and `T * b` are at most [`MAX_NANOS`] (about 146 years).
///
/// ```
/// use std::time::Duration;
/// use tollgate::Quota;
///
/// # fn main() -> Result<(), tollgate::QuotaError> {
/// let q = Quota::per_second(10)?;                  // 10/s, burst 10
/// assert_eq!(q.interval(), Duration::from_millis(100));
/// assert_eq!(q.burst(), 10);
/// assert_eq!(q.to_string(), "10 per 1s, burst 10");
///
/// let q = Quota::per_minute(60)?.with_burst(5)?;  // 1/s on average, at most 5 at once
/// assert_eq!(q.interval(), Duration::from_secs(1));
/// assert_eq!(q.burst(), 5);
///
/// let q = Quota::new(3, Duration::from_secs(1))?;  // T rounds up to 333_333_334 ns
/// assert_eq!(q.interval(), Duration::from_nanos(333_333_334));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// Permits per period, `>= 1`.
    count: u64,
    /// The period in ns, `1..=MAX_NANOS`.
    period: Nanos,
    /// Emission interval `T = ceil(period / count)`, `>= 1`.
    interval: Nanos,
    /// Burst `b`, `>= 1`, with `interval * burst <= MAX_NANOS`.
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
/// assert_eq!(Quota::new(1, Duration::from_secs(200 * 365 * 86_400)), Err(QuotaError::PeriodTooLong));
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
    /// More than one permit per nanosecond (`count` above the period in ns): the clock's
    /// resolution cannot pace it.
    IntervalTooShort,
    /// The period is longer than [`MAX_NANOS`] (about 146 years).
    PeriodTooLong,
    /// `interval * burst` (the tolerance) is longer than [`MAX_NANOS`].
    ToleranceOverflow,
    /// The algorithm cannot run this quota (for example a window that its sub-windows do not
    /// divide exactly); the algorithm's documentation says what it accepts.
    Unsupported(&'static str),
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuotaError::ZeroCount => "quota count must be at least 1",
            QuotaError::ZeroPeriod => "quota period must be longer than zero",
            QuotaError::ZeroBurst => "quota burst must be at least 1",
            QuotaError::IntervalTooShort => "more than one permit per nanosecond",
            QuotaError::PeriodTooLong => "quota period exceeds 2^62 ns (~146 years)",
            QuotaError::ToleranceOverflow => "interval * burst exceeds 2^62 ns (~146 years)",
            QuotaError::Unsupported(why) => why,
        })
    }
}

impl std::error::Error for QuotaError {}

impl Quota {
    /// `count` permits per `period`, burst `count`.
    ///
    /// # Errors
    /// [`QuotaError::ZeroCount`], [`QuotaError::ZeroPeriod`], [`QuotaError::PeriodTooLong`],
    /// [`QuotaError::IntervalTooShort`] (more than one permit per nanosecond).
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = tollgate::Quota::new(5, Duration::from_secs(10)).unwrap();
    /// assert_eq!(q.interval(), Duration::from_secs(2));
    /// assert_eq!(q.burst(), 5);
    /// ```
    pub const fn new(count: u64, period: Duration) -> Result<Quota, QuotaError> {
        if count == 0 {
            return Err(QuotaError::ZeroCount);
        }
        let period = match duration_nanos(period) {
            Ok(p) => p,
            Err(e) => return Err(e),
        };
        if count > period {
            return Err(QuotaError::IntervalTooShort);
        }
        // Round up: never admit more than `count` per `period`.
        let interval = period.div_ceil(count);
        Quota::checked(count, period, interval, count)
    }

    /// `count` permits per second, burst `count`.
    ///
    /// # Errors
    /// As [`Quota::new`].
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(100).unwrap();
    /// assert_eq!(q.interval(), std::time::Duration::from_millis(10));
    /// ```
    pub const fn per_second(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(1))
    }

    /// `count` permits per minute, burst `count`.
    ///
    /// # Errors
    /// As [`Quota::new`].
    ///
    /// ```
    /// let q = tollgate::Quota::per_minute(30).unwrap();
    /// assert_eq!(q.interval(), std::time::Duration::from_secs(2));
    /// ```
    pub const fn per_minute(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(60))
    }

    /// `count` permits per hour, burst `count`.
    ///
    /// # Errors
    /// As [`Quota::new`].
    ///
    /// ```
    /// let q = tollgate::Quota::per_hour(3600).unwrap();
    /// assert_eq!(q.interval(), std::time::Duration::from_secs(1));
    /// ```
    pub const fn per_hour(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(3600))
    }

    /// `count` permits per day (86,400 s), burst `count`: a daily cap, for example with a
    /// fixed window aligned to the Unix epoch.
    ///
    /// # Errors
    /// As [`Quota::new`].
    ///
    /// ```
    /// let q = tollgate::Quota::per_day(10_000).unwrap();
    /// assert_eq!(q.period().as_secs(), 86_400);
    /// ```
    pub const fn per_day(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(86_400))
    }

    /// One permit every `interval`, burst 1 (strict pacing, like Guava's `RateLimiter`).
    /// Combine with [`with_burst`](Quota::with_burst) to allow bursts.
    ///
    /// # Errors
    /// [`QuotaError::ZeroPeriod`], [`QuotaError::PeriodTooLong`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let q = tollgate::Quota::from_interval(Duration::from_millis(100)).unwrap();
    /// assert_eq!(q.burst(), 1);
    /// assert!(tollgate::Quota::from_interval(Duration::ZERO).is_err());
    /// ```
    pub const fn from_interval(interval: Duration) -> Result<Quota, QuotaError> {
        match duration_nanos(interval) {
            Ok(t) => Quota::checked(1, t, t, 1),
            Err(e) => Err(e),
        }
    }

    /// The same rate with burst capacity `burst` (how many permits may be taken at once from a
    /// full bucket).
    ///
    /// # Errors
    /// [`QuotaError::ZeroBurst`], [`QuotaError::ToleranceOverflow`].
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(10).unwrap().with_burst(1).unwrap();
    /// assert_eq!(q.burst(), 1);
    /// assert_eq!(q.tolerance(), std::time::Duration::from_millis(100));
    /// ```
    pub const fn with_burst(self, burst: u64) -> Result<Quota, QuotaError> {
        Quota::checked(self.count, self.period, self.interval, burst)
    }

    const fn checked(
        count: u64,
        period: Nanos,
        interval: Nanos,
        burst: u64,
    ) -> Result<Quota, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        match interval.checked_mul(burst) {
            Some(tau) if tau <= MAX_NANOS => Ok(Quota {
                count,
                period,
                interval,
                burst,
            }),
            _ => Err(QuotaError::ToleranceOverflow),
        }
    }

    /// The emission interval `T`: the average time between two permits (`period / count`,
    /// rounded up to whole nanoseconds).
    ///
    /// ```
    /// let q = tollgate::Quota::per_minute(1).unwrap();
    /// assert_eq!(q.interval().as_secs(), 60);
    /// ```
    pub const fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The burst capacity `b`: permits available at once from a full bucket. Also the `limit`
    /// reported in every [`Decision`](crate::Decision) of GCRA.
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_hour(7).unwrap().burst(), 7);
    /// ```
    pub const fn burst(&self) -> u64 {
        self.burst
    }

    /// The permits per period this quota was built with (the `L` of window algorithms).
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_minute(100).unwrap().count(), 100);
    /// ```
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// The period this quota was built with (the window `W` of window algorithms).
    ///
    /// ```
    /// assert_eq!(tollgate::Quota::per_minute(100).unwrap().period().as_secs(), 60);
    /// ```
    pub const fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The tolerance `tau = T * b`: how long an idle limiter takes to refill completely. It
    /// is GCRA's parameter, and the *window* a GCRA limit refers to (what the HTTP layer's
    /// `Backend::window` reports for GCRA; a window algorithm's window is `period`).
    ///
    /// ```
    /// let q = tollgate::Quota::per_second(4).unwrap();
    /// assert_eq!(q.tolerance(), std::time::Duration::from_secs(1));
    /// ```
    pub const fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.tau())
    }

    /// redis-cell's `CL.THROTTLE` arguments as a quota: a burst of `max_burst + 1` (redis-cell
    /// counts the burst beyond the first permit), and `count_per_period` permits per
    /// `period_secs` seconds. What [`RateLimiter::throttle`](crate::RateLimiter::throttle)
    /// decides under.
    ///
    /// # Errors
    /// As [`Quota::new`] and [`Quota::with_burst`]; `max_burst = u64::MAX` is
    /// [`QuotaError::ToleranceOverflow`], a period past [`MAX_NANOS`] is
    /// [`QuotaError::PeriodTooLong`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Quota;
    ///
    /// // CL.THROTTLE key 15 30 60: burst 16, 30 per minute.
    /// let q = Quota::from_throttle(15, 30, 60).unwrap();
    /// assert_eq!((q.burst(), q.count(), q.period()), (16, 30, Duration::from_secs(60)));
    /// assert!(Quota::from_throttle(u64::MAX, 1, 1).is_err());
    /// ```
    pub fn from_throttle(
        max_burst: u64,
        count_per_period: u64,
        period_secs: u64,
    ) -> Result<Quota, QuotaError> {
        let burst = max_burst
            .checked_add(1)
            .ok_or(QuotaError::ToleranceOverflow)?;
        Quota::new(count_per_period, secs(period_secs)?)?.with_burst(burst)
    }

    /// The limit `L` a window algorithm ([`FixedWindow`](crate::FixedWindow),
    /// [`SlidingWindow`](crate::SlidingWindow), [`WeightedWindow`](crate::WeightedWindow),
    /// [`SlidingLog`](crate::SlidingLog)) admits per [`period`](Quota::period): the
    /// [`count`](Quota::count). They admit `count` per `period` and nothing else, so a quota
    /// whose burst differs from its count is refused, as their builders refuse it; a backend
    /// running a window algorithm elsewhere refuses the same quotas with this.
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] when `burst != count`.
    ///
    /// ```
    /// use tollgate::Quota;
    /// assert_eq!(Quota::per_minute(100).unwrap().window_limit(), Ok(100));
    /// assert!(Quota::per_minute(100).unwrap().with_burst(5).unwrap().window_limit().is_err());
    /// ```
    pub const fn window_limit(&self) -> Result<u64, QuotaError> {
        if self.burst != self.count {
            return Err(QuotaError::Unsupported(
                "window algorithms admit `count` per `period`: a quota whose burst differs from \
                 its count has no meaning for them",
            ));
        }
        Ok(self.count)
    }

    #[inline]
    pub(crate) const fn t(&self) -> Nanos {
        self.interval
    }

    #[inline]
    pub(crate) const fn period_nanos(&self) -> Nanos {
        self.period
    }

    #[inline]
    pub(crate) const fn tau(&self) -> Nanos {
        // Validated at construction: at most MAX_NANOS.
        self.interval * self.burst
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("count", &self.count)
            .field("period", &self.period())
            .field("interval", &self.interval())
            .field("burst", &self.burst)
            .finish()
    }
}

/// `"10 per 1s, burst 10"`: the count, the period as `Duration`'s `Debug` prints it, and the
/// burst.
impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} per {:?}, burst {}",
            self.count,
            self.period(),
            self.burst
        )
    }
}

/// A duration as whole nanoseconds, rejecting zero and anything beyond [`MAX_NANOS`].
const fn duration_nanos(d: Duration) -> Result<Nanos, QuotaError> {
    if d.is_zero() {
        return Err(QuotaError::ZeroPeriod);
    }
    let ns = d.as_nanos();
    if ns > MAX_NANOS as u128 {
        return Err(QuotaError::PeriodTooLong);
    }
    Ok(ns as Nanos)
}

/// Whole seconds as a period for redis-cell's `throttle`: beyond [`MAX_NANOS`] it is the same
/// [`QuotaError::PeriodTooLong`] that [`Quota::new`] gives.
pub(crate) fn secs(s: u64) -> Result<Duration, QuotaError> {
    match s.checked_mul(NANOS_PER_SEC) {
        Some(ns) if ns <= MAX_NANOS => Ok(Duration::from_nanos(ns)),
        _ => Err(QuotaError::PeriodTooLong),
    }
}

#[cfg(feature = "serde")]
mod serde_impl {
    //! `Quota` as `{ count, period, burst }` (`period` as serde's `Duration`: seconds and
    //! nanoseconds), validated on the way in like every constructor.
    use super::*;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Repr {
        count: u64,
        period: Duration,
        burst: u64,
    }

    impl Serialize for Quota {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            Repr {
                count: self.count,
                period: self.period(),
                burst: self.burst,
            }
            .serialize(s)
        }
    }

    impl<'de> Deserialize<'de> for Quota {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Quota, D::Error> {
            let r = Repr::deserialize(d)?;
            Quota::new(r.count, r.period)
                .and_then(|q| q.with_burst(r.burst))
                .map_err(serde::de::Error::custom)
        }
    }
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
        assert_eq!(q.t(), 15); // 14.28 rounds up
        let q = Quota::new(1, Duration::from_nanos(1)).unwrap();
        assert_eq!((q.t(), q.burst()), (1, 1));
        assert_eq!((q.count(), q.period_nanos()), (1, 1));
    }

    #[test]
    fn the_interval_rounds_up_so_the_rate_is_never_above_the_one_asked() {
        // 600M/s would truncate to 1 ns (10^9/s, +67%); rounded up it is 2 ns (5*10^8/s).
        let q = Quota::per_second(600_000_000).unwrap();
        assert_eq!(q.t(), 2);
        for count in [1u64, 3, 7, 999_999_937, 1_000_000_000] {
            let q = Quota::per_second(count).unwrap();
            assert!(
                u128::from(q.t()) * u128::from(count) >= 1_000_000_000,
                "{count}"
            );
            assert!(
                u128::from(q.t() - 1) * u128::from(count) < 1_000_000_000,
                "{count}"
            );
        }
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
            Quota::from_interval(Duration::from_nanos(MAX_NANOS + 1)),
            Err(QuotaError::PeriodTooLong)
        );
        assert_eq!(
            Quota::from_interval(Duration::from_nanos(u64::MAX)),
            Err(QuotaError::PeriodTooLong)
        );
        assert_eq!(
            Quota::per_second(1).unwrap().with_burst(u64::MAX),
            Err(QuotaError::ToleranceOverflow)
        );
        // The largest representable pairs are fine.
        let q = Quota::from_interval(Duration::from_nanos(MAX_NANOS)).unwrap();
        assert_eq!(q.tau(), MAX_NANOS);
        let q = Quota::from_interval(Duration::from_nanos(1))
            .unwrap()
            .with_burst(MAX_NANOS)
            .unwrap();
        assert_eq!(q.tau(), MAX_NANOS);
    }

    #[test]
    fn display_reads_the_way_it_was_built() {
        assert_eq!(
            Quota::per_second(10).unwrap().to_string(),
            "10 per 1s, burst 10"
        );
        assert_eq!(
            Quota::per_minute(100)
                .unwrap()
                .with_burst(5)
                .unwrap()
                .to_string(),
            "100 per 60s, burst 5"
        );
        assert_eq!(
            Quota::from_interval(Duration::from_millis(250))
                .unwrap()
                .to_string(),
            "1 per 250ms, burst 1"
        );
    }

    #[test]
    fn constructors_are_const() {
        const Q: Result<Quota, QuotaError> = Quota::per_second(5);
        assert_eq!(Q.unwrap().burst(), 5);
    }

    #[test]
    fn throttle_periods_agree_with_quota_new() {
        assert_eq!(secs(2), Ok(Duration::from_secs(2)));
        assert_eq!(secs(u64::MAX), Err(QuotaError::PeriodTooLong));
        let too_long = MAX_NANOS / NANOS_PER_SEC + 1;
        assert_eq!(secs(too_long), Err(QuotaError::PeriodTooLong));
        assert_eq!(
            Quota::new(1, Duration::from_secs(too_long)),
            Err(QuotaError::PeriodTooLong)
        );
    }
}
