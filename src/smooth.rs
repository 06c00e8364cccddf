//! [`SmoothRateLimiter`]: Guava's `RateLimiter` (`SmoothBursty` and `SmoothWarmingUp`), exact to
//! the microsecond, lock-free.
//!
//! `rules` is the pure Guava math, `cell` the lock-free state that runs it, `error` the
//! configuration error; this file is the public API (clock, blocking and async waits).

mod cell;
mod error;
#[cfg(loom)]
pub(crate) mod loom_api;
mod rules;

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use self::cell::{SmoothCell, Ticket};
pub use self::error::SmoothConfigError;
use self::rules::{Micros, Shape};
use crate::clock::{AnyClock, Clock};
use crate::decision::AcquireError;
use crate::meter::{Meter, Outcome};
use crate::Nanos;

/// Guava's `RateLimiter`: a stable rate of permits per second, paid for *later*, optionally
/// warming up after idle time. Lock-free (one 128-bit CAS word), except that right after a
/// [`set_quota`](SmoothRateLimiter::set_quota) made while the limiter is in debt, or a refund,
/// grants go through a mutex until the schedule moves on (usually the next grant). Shared by
/// reference or `Arc`.
///
/// - **Pay later.** A request is granted as soon as the previous ones are paid for; its own cost
///   is paid by the *next* request. A large request on an idle limiter goes through at once
///   (GCRA's [`RateLimiter`](crate::RateLimiter) would refuse it, or make it wait first).
/// - **Bursty** ([`bursty`](SmoothRateLimiter::bursty)): unused rate is saved, up to one second
///   of permits by default, and spent for free.
/// - **Warming up** ([`warming_up`](SmoothRateLimiter::warming_up)): a limiter that was idle is
///   *cold*: permits start `cold_factor` (3) times slower and speed up to the stable rate over the
///   warm-up period, to protect a cold cache or connection pool.
///
/// Times are Guava's: microseconds since the limiter was built (the clock's nanoseconds,
/// truncated), so waits match Guava's to the microsecond. See the guide's [Guava
/// compatibility](crate::guide::guava) for the rules and the few deliberate differences.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, SmoothRateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = SmoothRateLimiter::builder(5.0).clock(clock.clone()).build().unwrap();
/// assert_eq!(limiter.acquire(), Ok(Duration::ZERO));          // Guava: RateLimiter.create(5.0)
/// assert_eq!(limiter.acquire(), Ok(Duration::from_millis(200)));
/// assert_eq!(limiter.acquire_n(10), Ok(Duration::from_millis(200))); // pays later...
/// assert_eq!(limiter.acquire(), Ok(Duration::from_secs(2)));  // ...so the next caller waits
/// ```
pub struct SmoothRateLimiter {
    cell: SmoothCell,
    clock: AnyClock,
    /// The clock's reading when the limiter was built: Guava's stopwatch starts at creation.
    origin: Nanos,
    meter: Meter,
}

/// Configures a [`SmoothRateLimiter`]: bursty (default, with an optional maximum burst) or
/// warming up (with a warm-up period and an optional cold factor), and a clock.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, SmoothRateLimiter};
///
/// // Up to 2 seconds of unused rate saved (Guava's public API fixes it at 1 second).
/// let bursty = SmoothRateLimiter::builder(10.0).max_burst_seconds(2.0).build().unwrap();
/// // Cold permits 5x slower than warm ones, warming over 30 s.
/// let warming = SmoothRateLimiter::builder(100.0)
///     .warmup(Duration::from_secs(30))
///     .cold_factor(5.0)
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// # let _ = (bursty, warming);
/// ```
#[derive(Debug)]
#[must_use = "call .build() to get a limiter"]
pub struct SmoothRateLimiterBuilder {
    permits_per_second: f64,
    max_burst_seconds: Option<f64>,
    warmup: Option<Duration>,
    cold_factor: Option<f64>,
    clock: AnyClock,
    name: Option<Arc<str>>,
}

impl SmoothRateLimiterBuilder {
    /// Names the limiter: the `limiter` label of its metrics (feature `metrics`; unnamed
    /// limiters are labelled `unnamed`) and its name in logs.
    ///
    /// ```
    /// let limiter = tollgate::SmoothRateLimiter::builder(5.0).name("export").build().unwrap();
    /// assert_eq!(limiter.name(), Some("export"));
    /// ```
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Bursty only: how many seconds of unused rate can be saved up (default 1.0, Guava's).
    /// Must be finite and `> 0`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = SmoothRateLimiter::builder(1.0)
    ///     .max_burst_seconds(3.0)
    ///     .clock(clock.clone())
    ///     .build()
    ///     .unwrap();
    /// clock.advance(Duration::from_secs(10)); // idle: 3 permits saved, not 10
    /// assert!(limiter.acquire_n(3).unwrap().is_zero()); // saved permits are free
    /// assert!(limiter.acquire().unwrap().is_zero());
    /// assert_eq!(limiter.acquire(), Ok(Duration::from_secs(1)));
    /// ```
    pub fn max_burst_seconds(mut self, seconds: f64) -> Self {
        self.max_burst_seconds = Some(seconds);
        self
    }

    /// Makes the limiter warm up: after idle time, permits start slow and reach the stable rate
    /// over `warmup` (Guava's `SmoothWarmingUp`). Kept to whole microseconds (truncated), as
    /// Guava's `TimeUnit.toMicros`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// let limiter = SmoothRateLimiter::builder(10.0)
    ///     .warmup(Duration::from_secs(1))
    ///     .clock(ManualClock::new())
    ///     .build()
    ///     .unwrap();
    /// limiter.acquire().unwrap();
    /// assert!(limiter.acquire().unwrap() > Duration::from_millis(100)); // cold: slower than 10/s
    /// ```
    pub fn warmup(mut self, warmup: Duration) -> Self {
        self.warmup = Some(warmup);
        self
    }

    /// Warming up only: how much slower a cold permit is than a warm one (default 3.0, Guava's).
    /// Must be finite and `>= 1`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// // A cold factor of 1: cold permits cost the stable interval, no ramp at all.
    /// let limiter = SmoothRateLimiter::builder(2.0)
    ///     .warmup(Duration::from_secs(4))
    ///     .cold_factor(1.0)
    ///     .clock(ManualClock::new())
    ///     .build()
    ///     .unwrap();
    /// limiter.acquire().unwrap();
    /// assert_eq!(limiter.acquire(), Ok(Duration::from_millis(500)));
    /// ```
    pub fn cold_factor(mut self, cold_factor: f64) -> Self {
        self.cold_factor = Some(cold_factor);
        self
    }

    /// Uses `clock` instead of the default [`DefaultClock`](crate::DefaultClock) (the TSC on
    /// most x86_64 machines, whose readings are not ordered across cores: see
    /// [`Clock::max_skew`](crate::Clock::max_skew); [`StdClock`](crate::StdClock) reads
    /// `Instant`, ordered across threads, at a few times the cost).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = SmoothRateLimiter::builder(1.0).clock(clock.clone()).build().unwrap();
    /// limiter.acquire().unwrap();
    /// assert_eq!(limiter.acquire(), Ok(Duration::from_secs(1)));
    /// assert_eq!(clock.sleeps(), [Duration::ZERO, Duration::from_secs(1)]); // Guava's R0.00, R1.00
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = AnyClock::custom(clock);
        self
    }

    /// Builds the limiter; its microsecond clock starts now.
    ///
    /// # Errors
    /// A [`SmoothConfigError`] for a rate that is not `> 0`, a maximum burst or cold factor out
    /// of range, or options of the other shape (a maximum burst with a warm-up, a cold factor
    /// without one).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{SmoothConfigError, SmoothRateLimiter};
    /// let e = SmoothRateLimiter::builder(5.0).cold_factor(2.0).build().unwrap_err();
    /// assert_eq!(e, SmoothConfigError::ColdFactorWithoutWarmup);
    /// let e = SmoothRateLimiter::builder(5.0)
    ///     .warmup(Duration::from_secs(1))
    ///     .max_burst_seconds(2.0)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(e, SmoothConfigError::MaxBurstWithWarmup);
    /// ```
    pub fn build(self) -> Result<SmoothRateLimiter, SmoothConfigError> {
        check_rate(self.permits_per_second)?;
        let shape = match self.warmup {
            Some(warmup) => {
                if self.max_burst_seconds.is_some() {
                    return Err(SmoothConfigError::MaxBurstWithWarmup);
                }
                let cold_factor = self.cold_factor.unwrap_or(3.0);
                if !(cold_factor.is_finite() && cold_factor >= 1.0) {
                    return Err(SmoothConfigError::InvalidColdFactor);
                }
                Shape::WarmingUp {
                    warmup: micros_of(warmup),
                    cold_factor,
                }
            }
            None => {
                if self.cold_factor.is_some() {
                    return Err(SmoothConfigError::ColdFactorWithoutWarmup);
                }
                let max_burst_seconds = self.max_burst_seconds.unwrap_or(1.0);
                // Finite and > 0: `0 * inf` would make the capacity NaN at rate +Inf.
                if !(max_burst_seconds.is_finite() && max_burst_seconds > 0.0) {
                    return Err(SmoothConfigError::InvalidMaxBurst);
                }
                Shape::Bursty { max_burst_seconds }
            }
        };
        Ok(SmoothRateLimiter {
            cell: SmoothCell::new(shape, self.permits_per_second),
            origin: self.clock.now(),
            clock: self.clock,
            meter: Meter::new(self.name),
        })
    }
}

fn check_rate(permits_per_second: f64) -> Result<(), SmoothConfigError> {
    if rules::valid_rate(permits_per_second) {
        Ok(())
    } else {
        Err(SmoothConfigError::InvalidRate)
    }
}

fn micros(us: Micros) -> Duration {
    Duration::from_micros(us.max(0) as u64)
}

impl SmoothRateLimiter {
    /// Guava's `RateLimiter.create(permitsPerSecond)`: bursty, up to one second of unused rate
    /// saved, starting empty, on the default clock.
    ///
    /// # Errors
    /// [`SmoothConfigError::InvalidRate`] unless `permits_per_second > 0` (`+Inf` is allowed).
    ///
    /// ```
    /// let limiter = tollgate::SmoothRateLimiter::bursty(1000.0).unwrap();
    /// assert_eq!(limiter.quota(), 1000.0);
    /// ```
    pub fn bursty(permits_per_second: f64) -> Result<SmoothRateLimiter, SmoothConfigError> {
        SmoothRateLimiter::builder(permits_per_second).build()
    }

    /// Guava's `RateLimiter.create(permitsPerSecond, warmupPeriod)`: warming up with cold factor
    /// 3, starting cold, on the default clock.
    ///
    /// # Errors
    /// [`SmoothConfigError::InvalidRate`] unless `permits_per_second > 0`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    ///
    /// // Rate 2/s, warm-up 4 s: from cold, permits cost 1.375 s, 1.125 s, 0.875 s, 0.625 s,
    /// // then 0.5 s each (each one paid by the next caller).
    /// let limiter = SmoothRateLimiter::builder(2.0)
    ///     .warmup(Duration::from_secs(4))
    ///     .clock(ManualClock::new())
    ///     .build()
    ///     .unwrap();
    /// let waits: Vec<u128> = (0..6).map(|_| limiter.acquire().unwrap().as_micros()).collect();
    /// assert_eq!(waits, [0, 1_375_000, 1_125_000, 875_000, 625_000, 500_000]);
    /// # let _ = SmoothRateLimiter::warming_up(2.0, Duration::from_secs(4)).unwrap();
    /// ```
    pub fn warming_up(
        permits_per_second: f64,
        warmup: Duration,
    ) -> Result<SmoothRateLimiter, SmoothConfigError> {
        SmoothRateLimiter::builder(permits_per_second)
            .warmup(warmup)
            .build()
    }

    /// A builder: maximum burst or warm-up, cold factor, clock.
    ///
    /// ```
    /// let limiter = tollgate::SmoothRateLimiter::builder(3.0).build().unwrap();
    /// assert_eq!(limiter.quota(), 3.0);
    /// ```
    pub fn builder(permits_per_second: f64) -> SmoothRateLimiterBuilder {
        SmoothRateLimiterBuilder {
            permits_per_second,
            max_burst_seconds: None,
            warmup: None,
            cold_factor: None,
            name: None,
            clock: AnyClock::default(),
        }
    }

    /// The name given with the builder's [`name`](SmoothRateLimiterBuilder::name), if any.
    ///
    /// ```
    /// let limiter = tollgate::SmoothRateLimiter::bursty(5.0).unwrap();
    /// assert_eq!(limiter.name(), None);
    /// ```
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.meter.name()
    }

    /// The limit in force, as a rate in permits per second (Guava's `getRate()`:
    /// `1e6 / stableIntervalMicros`). A rate so small that its interval is infinite (such as
    /// `f64::MIN_POSITIVE`) reads back as `0.0`, as in Guava.
    ///
    /// ```
    /// let limiter = tollgate::SmoothRateLimiter::bursty(f64::INFINITY).unwrap();
    /// assert_eq!(limiter.quota(), f64::INFINITY);
    /// ```
    #[must_use]
    pub fn quota(&self) -> f64 {
        self.cell.rate()
    }

    /// Changes the limit at runtime to `permits_per_second` (Guava's `setRate`): resyncs at
    /// the old rate, then rescales the saved permits to the new capacity. Debt already booked
    /// (waits owed by earlier requests) is kept. Decisions made concurrently see either the
    /// old rate and state or the new ones, never a mix.
    ///
    /// # Errors
    /// [`SmoothConfigError::InvalidRate`] unless `permits_per_second > 0`; nothing changes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// let limiter = SmoothRateLimiter::builder(1.0).clock(ManualClock::new()).build().unwrap();
    /// limiter.acquire().unwrap();
    /// limiter.set_quota(2.0).unwrap();
    /// assert_eq!(limiter.acquire(), Ok(Duration::from_secs(1))); // the old rate's debt
    /// assert_eq!(limiter.acquire(), Ok(Duration::from_millis(500)));
    /// assert!(limiter.set_quota(-1.0).is_err());
    /// ```
    pub fn set_quota(&self, permits_per_second: f64) -> Result<(), SmoothConfigError> {
        check_rate(permits_per_second)?;
        self.cell.set_rate(|| self.now(), permits_per_second);
        Ok(())
    }

    /// Takes one permit, blocking until it may be used (Guava's `acquire()`); returns the time
    /// waited.
    ///
    /// Like every blocking method here, it calls [`Clock::sleep`] exactly once per grant, even
    /// for a zero wait, as Guava's `SleepingStopwatch` does (a [`ManualClock`](crate::ManualClock)
    /// therefore records Guava's `R0.00` events).
    ///
    /// # Errors
    /// None: a smooth limiter grants any request (its cost is paid by the next one). The
    /// `Result` is the method grid's, the same as every limiter's `acquire`.
    ///
    /// ```
    /// let limiter = tollgate::SmoothRateLimiter::bursty(100.0).unwrap();
    /// assert!(limiter.acquire().unwrap().is_zero());
    /// ```
    pub fn acquire(&self) -> Result<Duration, AcquireError> {
        // The wait is measured from the reservation's own reading: an earlier one would
        // charge a ready ticket the microseconds between the two reads.
        let (now, ticket) = self.reserve_now(1);
        Ok(self.block(now, ticket, 1))
    }

    /// Takes `n` permits at once, blocking until the earlier requests are paid for (not this
    /// one: the next caller pays for it); returns the time waited.
    ///
    /// Any count is accepted; counts above 2^53 are rounded to the nearest `f64`, the type
    /// Guava computes permits in. `n = 0` returns `Ok(Duration::ZERO)` at once, taking nothing
    /// and not touching the clock (Guava throws for `permits <= 0`; every limiter here treats
    /// a count of zero alike).
    ///
    /// # Errors
    /// None, as for [`acquire`](SmoothRateLimiter::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// let limiter = SmoothRateLimiter::builder(1.0).clock(ManualClock::new()).build().unwrap();
    /// assert_eq!(limiter.acquire_n(8), Ok(Duration::ZERO));
    /// assert_eq!(limiter.acquire_n(0), Ok(Duration::ZERO)); // nothing taken, no wait
    /// assert_eq!(limiter.acquire_n(1), Ok(Duration::from_secs(8)));
    /// ```
    pub fn acquire_n(&self, n: u64) -> Result<Duration, AcquireError> {
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let (now, ticket) = self.reserve_now(n);
        Ok(self.block(now, ticket, n))
    }

    /// Takes one permit if it is available now (Guava's `tryAcquire()`). Never waits.
    ///
    /// ```
    /// let limiter = tollgate::SmoothRateLimiter::bursty(1.0).unwrap();
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire()); // the first one is being paid for
    /// ```
    #[must_use = "a permit may have been denied"]
    pub fn try_acquire(&self) -> bool {
        // try_acquire_n(1) without building the wait it would report.
        let now = self.now();
        let admit = |next_free| {
            rules::can_acquire(next_free, now, 0)
                .then_some(())
                .ok_or(())
        };
        let allowed = self.cell.reserve(now, 1, admit).is_ok();
        self.meter.decided_one(allowed);
        allowed
    }

    /// Takes `n` permits if they are available now (Guava's `tryAcquire(permits)`): they are
    /// whenever the earlier requests are paid for, whatever `n` is. Never waits. `n = 0`
    /// always succeeds and takes nothing.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait until they are.
    ///
    /// ```
    /// use tollgate::{AcquireError, SmoothRateLimiter};
    /// let limiter = SmoothRateLimiter::bursty(10.0).unwrap();
    /// assert!(limiter.try_acquire_n(100).is_ok()); // pay later: 10 s of permits at once
    /// let e = limiter.try_acquire_n(1).unwrap_err(); // ...and the next caller pays
    /// assert!(matches!(e, AcquireError::RateLimited { .. }));
    /// assert!(e.retry_after().unwrap().as_secs_f64() > 9.9);
    /// assert_eq!(limiter.try_acquire_n(0), Ok(()));
    /// ```
    pub fn try_acquire_n(&self, n: u64) -> Result<(), AcquireError> {
        if n == 0 {
            return Ok(());
        }
        self.try_reserve(n, 0)
            .map(|_| self.meter.decided(Outcome::Allowed, n))
    }

    /// Takes one permit if it can be had within `timeout`, blocking at most that long; see
    /// [`try_acquire_n_for`](SmoothRateLimiter::try_acquire_n_for).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](SmoothRateLimiter::try_acquire_n_for).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// let limiter = SmoothRateLimiter::builder(5.0).clock(ManualClock::new()).build().unwrap();
    /// assert_eq!(limiter.try_acquire_for(Duration::ZERO), Ok(Duration::ZERO));
    /// assert!(limiter.try_acquire_for(Duration::from_millis(100)).is_err()); // needs 200 ms
    /// ```
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Duration, AcquireError> {
        self.try_acquire_n_for(1, timeout)
    }

    /// Takes `n` permits if they can be had within `timeout`, blocking at most that long
    /// (Guava's `tryAcquire(permits, timeout, unit)`). If the wait would be longer, it returns
    /// at once and changes nothing. Returns the time waited. `n = 0` returns
    /// `Ok(Duration::ZERO)` at once.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, SmoothRateLimiter};
    /// let limiter = SmoothRateLimiter::builder(5.0).clock(ManualClock::new()).build().unwrap();
    /// limiter.acquire().unwrap();
    /// assert!(limiter.try_acquire_n_for(1, Duration::from_millis(100)).is_err()); // needs 200 ms
    /// let waited = limiter.try_acquire_n_for(1, Duration::from_millis(200)).unwrap();
    /// assert_eq!(waited, Duration::from_millis(200));
    /// ```
    pub fn try_acquire_n_for(&self, n: u64, timeout: Duration) -> Result<Duration, AcquireError> {
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let (now, ticket) = self.try_reserve(n, micros_of(timeout))?;
        Ok(self.block(now, ticket, n))
    }

    /// Guava's `readMicros()`: microseconds since the limiter was built.
    #[inline]
    fn now(&self) -> Micros {
        // u64 nanoseconds / 1000 always fits in an i64.
        (self.clock.now().saturating_sub(self.origin) / 1_000) as Micros
    }

    /// Reserves unconditionally (what `acquire` does).
    fn reserve_now(&self, permits: u64) -> (Micros, Ticket) {
        let now = self.now();
        match self
            .cell
            .reserve(now, permits, |_| Ok::<(), Infallible>(()))
        {
            Ok(ticket) => (now, ticket),
            Err(never) => match never {},
        }
    }

    /// Reserves `permits >= 1` if the wait is at most `timeout` (Guava's `canAcquire`);
    /// otherwise stores nothing.
    #[inline]
    fn try_reserve(&self, permits: u64, timeout: Micros) -> Result<(Micros, Ticket), AcquireError> {
        let now = self.now();
        let admit = |next_free| {
            if rules::can_acquire(next_free, now, timeout) {
                Ok(())
            } else {
                Err(AcquireError::RateLimited {
                    retry_after: micros(rules::wait_micros(next_free, now)),
                })
            }
        };
        match self.cell.reserve(now, permits, admit) {
            Ok(ticket) => Ok((now, ticket)),
            Err(e) => {
                self.meter.decided(Outcome::of_error(&e), permits);
                Err(e)
            }
        }
    }

    /// Sleeps (through the clock, always, as Guava does) until the ticket's moment: a grant
    /// of `n` permits, counted as a wait if it slept.
    fn block(&self, now: Micros, ticket: Ticket, n: u64) -> Duration {
        let wait = micros(rules::wait_micros(ticket.moment, now));
        let mut meter = self.meter.waiting(n);
        if !wait.is_zero() {
            meter.sleeping();
        }
        self.clock.sleep(wait);
        meter.record_end(&Ok(wait));
        wait
    }
}

/// Guava's `unit.toMicros(d)` (for a timeout, `max(.., 0)`, which a `Duration` always is):
/// truncated, saturating.
fn micros_of(d: Duration) -> Micros {
    Micros::try_from(d.as_micros()).unwrap_or(Micros::MAX)
}

impl fmt::Debug for SmoothRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmoothRateLimiter")
            .field("rate", &self.quota())
            .field("clock", &self.clock)
            .finish()
    }
}

#[cfg(feature = "tokio")]
impl SmoothRateLimiter {
    /// Takes one permit, waiting asynchronously on tokio's timer; returns the time waited.
    /// See [`acquire_n_async`](SmoothRateLimiter::acquire_n_async).
    ///
    /// The future borrows the limiter. For a `'static` future (to move into `tokio::spawn`),
    /// await it inside an `async move` block that owns an `Arc` of the limiter:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::SmoothRateLimiter::bursty(100.0).unwrap());
    /// let l = limiter.clone();
    /// let task = tokio::spawn(async move { l.acquire_async().await });
    /// assert!(task.await.unwrap().unwrap().is_zero());
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](SmoothRateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// None, as for [`acquire`](SmoothRateLimiter::acquire).
    pub async fn acquire_async(&self) -> Result<Duration, AcquireError> {
        self.acquire_n_async(1).await
    }

    /// Takes `n` permits, waiting asynchronously on tokio's timer; returns the time waited.
    /// `n = 0` returns `Ok(Duration::ZERO)` at once.
    ///
    /// The permits are reserved at the first poll, so concurrent waiters are served in the
    /// order they first polled, each woken once.
    ///
    /// # Cancel safety
    /// This method is cancel-safe. If the future is dropped while it waits (a `select!` branch
    /// that lost, a `tokio::time::timeout` that fired), its permits were never handed out; they
    /// are given back if no [`set_quota`](SmoothRateLimiter::set_quota) happened since and no
    /// later request has been booked behind them, restoring the limiter exactly as it was before
    /// the reservation. Otherwise they stay spent: a later request's wait was computed from
    /// them, so taking them back would hand its slot out twice.
    ///
    /// # Errors
    /// None, as for [`acquire`](SmoothRateLimiter::acquire).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = tollgate::SmoothRateLimiter::bursty(100.0).unwrap();
    /// assert!(limiter.acquire_n_async(1).await.unwrap().is_zero());
    /// # }
    /// ```
    pub async fn acquire_n_async(&self, n: u64) -> Result<Duration, AcquireError> {
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let (now, ticket) = self.reserve_now(n);
        Ok(self.sleep_async(now, ticket, n).await)
    }

    /// Takes one permit if it can be had within `timeout`, waiting asynchronously; see
    /// [`try_acquire_n_for_async`](SmoothRateLimiter::try_acquire_n_for_async).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](SmoothRateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](SmoothRateLimiter::try_acquire_n_for).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::SmoothRateLimiter::bursty(1.0).unwrap();
    /// assert!(limiter.try_acquire_for_async(Duration::ZERO).await.is_ok());
    /// assert!(limiter.try_acquire_for_async(Duration::from_millis(10)).await.is_err());
    /// # }
    /// ```
    pub async fn try_acquire_for_async(&self, timeout: Duration) -> Result<Duration, AcquireError> {
        self.try_acquire_n_for_async(1, timeout).await
    }

    /// Takes `n` permits if they can be had within `timeout`, waiting asynchronously. If the
    /// wait would be longer it returns at once and changes nothing. `n = 0` returns
    /// `Ok(Duration::ZERO)` at once.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](SmoothRateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::SmoothRateLimiter::bursty(1.0).unwrap();
    /// limiter.acquire_async().await.unwrap();
    /// let e = limiter.try_acquire_n_for_async(1, Duration::from_millis(10)).await;
    /// assert!(e.is_err());
    /// # }
    /// ```
    pub async fn try_acquire_n_for_async(
        &self,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError> {
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let (now, ticket) = self.try_reserve(n, micros_of(timeout))?;
        Ok(self.sleep_async(now, ticket, n).await)
    }

    async fn sleep_async(&self, now: Micros, ticket: Ticket, n: u64) -> Duration {
        let wait = micros(rules::wait_micros(ticket.moment, now));
        // Dropped while sleeping, the meter counts a cancelled wait.
        let mut meter = self.meter.waiting(n);
        if !wait.is_zero() {
            meter.sleeping();
            let guard = crate::reservation::CancelOnDrop::new(|| self.cell.cancel(&ticket));
            tokio::time::sleep(wait).await;
            guard.disarm();
        }
        meter.record_end(&Ok(wait));
        wait
    }
}
