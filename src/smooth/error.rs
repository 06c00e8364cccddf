//! Why a smooth limiter could not be configured, and why permits were not granted.

use std::fmt;
use std::time::Duration;

/// Invalid configuration of a [`SmoothRateLimiter`](crate::SmoothRateLimiter), from its
/// constructors, its builder, or [`set_rate`](crate::SmoothRateLimiter::set_rate).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{SmoothConfigError, SmoothRateLimiter};
///
/// assert_eq!(SmoothRateLimiter::bursty(0.0).unwrap_err(), SmoothConfigError::InvalidRate);
/// assert_eq!(SmoothRateLimiter::bursty(f64::NAN).unwrap_err(), SmoothConfigError::InvalidRate);
/// let e = SmoothRateLimiter::builder(1.0).max_burst_seconds(-1.0).build();
/// assert_eq!(e.unwrap_err(), SmoothConfigError::InvalidMaxBurst);
/// let e = SmoothRateLimiter::builder(1.0).warmup(Duration::from_secs(1)).cold_factor(0.5).build();
/// assert_eq!(e.unwrap_err(), SmoothConfigError::InvalidColdFactor);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SmoothConfigError {
    /// The rate was not `> 0` (zero, negative or NaN). `f64::INFINITY` is allowed: no limit.
    InvalidRate,
    /// The maximum burst was not a finite number of seconds `> 0`.
    InvalidMaxBurst,
    /// The cold factor was not a finite number `>= 1` (a cold limiter is never faster).
    InvalidColdFactor,
    /// A maximum burst was set on a warming-up limiter (it has none: its capacity follows from
    /// the warm-up period).
    MaxBurstWithWarmup,
    /// A cold factor was set without a warm-up period.
    ColdFactorWithoutWarmup,
}

impl fmt::Display for SmoothConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SmoothConfigError::InvalidRate => "rate must be > 0 permits per second (not NaN)",
            SmoothConfigError::InvalidMaxBurst => "max burst must be finite seconds > 0",
            SmoothConfigError::InvalidColdFactor => "cold factor must be finite and >= 1",
            SmoothConfigError::MaxBurstWithWarmup => {
                "max burst applies to bursty limiters, not to warming-up ones"
            }
            SmoothConfigError::ColdFactorWithoutWarmup => "cold factor needs a warm-up period",
        })
    }
}

impl std::error::Error for SmoothConfigError {}

/// Why a [`SmoothRateLimiter`](crate::SmoothRateLimiter) did not grant permits.
///
/// ```
/// use tollgate::{SmoothAcquireError, SmoothRateLimiter};
///
/// let limiter = SmoothRateLimiter::bursty(1.0).unwrap();
/// assert_eq!(limiter.try_acquire_n(0), Err(SmoothAcquireError::ZeroPermits));
/// assert!(limiter.try_acquire_n(5).is_ok()); // pay later: granted now...
/// let e = limiter.try_acquire_n(1).unwrap_err(); // ...and the next caller pays
/// assert!(e.retry_after().unwrap().as_secs_f64() > 4.9);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SmoothAcquireError {
    /// Zero permits were asked for (Guava throws for `permits <= 0`).
    ZeroPermits,
    /// Not within the timeout: the wait a reservation made now would have (retrying after it,
    /// or with a timeout at least this long, succeeds unless others take the slot first).
    RateLimited {
        /// The wait that was needed.
        retry_after: Duration,
    },
}

impl SmoothAcquireError {
    /// The wait after which retrying could succeed, if there is one.
    ///
    /// ```
    /// use tollgate::SmoothAcquireError;
    /// assert_eq!(SmoothAcquireError::ZeroPermits.retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SmoothAcquireError::RateLimited { retry_after } => Some(*retry_after),
            SmoothAcquireError::ZeroPermits => None,
        }
    }
}

impl fmt::Display for SmoothAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmoothAcquireError::ZeroPermits => f.write_str("permits must be at least 1"),
            SmoothAcquireError::RateLimited { retry_after } => {
                write!(f, "rate limited; retry after {retry_after:?}")
            }
        }
    }
}

impl std::error::Error for SmoothAcquireError {}
