//! Why a smooth limiter could not be configured (a refusal of permits is the crate's
//! [`AcquireError`](crate::AcquireError), as on every limiter).

use std::fmt;

/// Invalid configuration of a [`SmoothRateLimiter`](crate::SmoothRateLimiter), from its
/// constructors, its builder, or [`set_quota`](crate::SmoothRateLimiter::set_quota).
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
