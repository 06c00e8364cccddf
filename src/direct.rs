//! [`RateLimiter`]: one cell shared by every caller (a global or per-resource limit).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::algorithm::gcra::Ticket;
use crate::algorithm::{Booking, Gcra};
use crate::cell::Algorithm;
use crate::clock::{duration_to_nanos, AnyClock, Clock};
use crate::decision::{AcquireError, Decision, ThrottleReply};
use crate::engine::{Direct, Engine};
use crate::meter::Meter;
use crate::quota::{Quota, QuotaError};
use crate::reservation::Reservation;
use crate::Nanos;

/// A direct (unkeyed) rate limiter: one cell, lock-free, shared by reference or `Arc`.
///
/// The algorithm is GCRA unless another is chosen with
/// [`RateLimiterBuilder::algorithm`].
///
/// ```
/// use tollgate::{Quota, RateLimiter};
///
/// let limiter = RateLimiter::new(Quota::per_second(100).unwrap());
/// if limiter.try_acquire() {
///     // handle the request
/// }
/// // Guava style: block until a permit is available; returns the time waited.
/// let waited = limiter.acquire().unwrap();
/// # let _ = waited;
/// ```
pub struct RateLimiter<A: Algorithm = Gcra> {
    // The hot word on its own cache line: writers to it must not invalidate the parameters.
    cell: CachePadded<A::Cell>,
    engine: Engine<A>,
}

/// Configures a [`RateLimiter`]: the quota, and optionally a clock, an algorithm, and (GCRA)
/// an empty start.
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
pub struct RateLimiterBuilder<A: Algorithm = Gcra> {
    quota: Quota,
    clock: AnyClock,
    alg: A,
    start_empty: bool,
    name: Option<Arc<str>>,
}

impl<A: Algorithm> RateLimiterBuilder<A> {
    /// Uses `clock` instead of the default [`DefaultClock`](crate::DefaultClock) (the TSC on
    /// most x86_64 machines, whose readings are not ordered across cores: see
    /// [`Clock::max_skew`](crate::Clock::max_skew); [`StdClock`](crate::StdClock) reads
    /// `Instant`, ordered across threads, at a few times the cost).
    ///
    /// ```
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Quota::per_second(1).unwrap()).clock(ManualClock::new()).build();
    /// assert!(l.try_acquire());
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = AnyClock::custom(clock);
        self
    }

    /// Runs `alg` instead of the current algorithm (GCRA unless chosen), checking at once that
    /// it can run the builder's quota: the refusal comes from the call that causes it, and
    /// `build` stays infallible.
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] if `alg` cannot run the builder's quota.
    ///
    /// ```
    /// use tollgate::{Gcra, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Quota::per_second(5).unwrap()).algorithm(Gcra)?.build();
    /// assert!(l.try_acquire());
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn algorithm<B: Algorithm>(self, alg: B) -> Result<RateLimiterBuilder<B>, QuotaError> {
        alg.params(&self.quota, 0)?;
        Ok(RateLimiterBuilder {
            quota: self.quota,
            clock: self.clock,
            alg,
            start_empty: self.start_empty,
            name: self.name,
        })
    }

    /// Starts used up instead of full, as Guava's `RateLimiter` and many token-bucket recipes
    /// do: with GCRA the first permit comes one interval after `build()`, and the whole burst
    /// only after a tolerance of idleness; window algorithms start with the current window's
    /// limit taken. (Keyed limiters have no such option: a key that is swept must decide like a
    /// new one, and a swept key is a full one.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let l = RateLimiter::builder(Quota::per_second(10).unwrap())
    ///     .clock(clock.clone())
    ///     .start_empty()
    ///     .build();
    /// assert!(!l.try_acquire());
    /// clock.advance(Duration::from_millis(100));
    /// assert!(l.try_acquire());
    /// ```
    pub fn start_empty(mut self) -> Self {
        self.start_empty = true;
        self
    }

    /// Names the limiter: the `limiter` label of its metrics (feature `metrics`; unnamed
    /// limiters are labelled `unnamed`) and its name in logs.
    ///
    /// ```
    /// use tollgate::{Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(1).unwrap()).name("api").build();
    /// assert_eq!(limiter.name(), Some("api"));
    /// ```
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Builds the limiter.
    ///
    /// It starts full (unless [`start_empty`](Self::start_empty)): the quota's whole burst is
    /// available at once.
    ///
    /// ```
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(3).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!((0..3).all(|_| limiter.try_acquire()));
    /// assert!(!limiter.try_acquire());
    /// ```
    pub fn build(self) -> RateLimiter<A> {
        let engine = Engine::new(self.alg, self.quota, self.clock)
            .expect("the algorithm accepted this quota when it was chosen")
            .with_meter(Meter::new(self.name));
        let limiter = RateLimiter {
            cell: CachePadded::new(A::Cell::default()),
            engine,
        };
        if self.start_empty {
            // Take the whole limit now: the bucket (or window) starts used up.
            let limit = A::limit(&limiter.engine.params.load());
            let _ = limiter.engine.attempt(&limiter.slot(), limit, None);
        }
        limiter
    }
}

impl<A: Algorithm> RateLimiter<A> {
    /// The one cell (the loom models inspect it).
    #[cfg(loom)]
    pub(crate) fn cell(&self) -> &A::Cell {
        &self.cell
    }

    fn slot(&self) -> Direct<'_, A> {
        Direct(&*self.cell)
    }
}

impl RateLimiter<Gcra> {
    /// A GCRA limiter for `quota` on the default clock, starting full.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(1).unwrap());
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// ```
    pub fn new(quota: Quota) -> RateLimiter {
        RateLimiter::builder(quota).build()
    }

    /// A builder, to choose a clock, an algorithm, or an empty start.
    ///
    /// ```
    /// let b = tollgate::RateLimiter::builder(tollgate::Quota::per_second(1).unwrap());
    /// assert!(b.build().try_acquire());
    /// ```
    pub fn builder(quota: Quota) -> RateLimiterBuilder {
        RateLimiterBuilder {
            quota,
            clock: AnyClock::default(),
            alg: Gcra,
            start_empty: false,
            name: None,
        }
    }
}

impl<A: Algorithm> RateLimiter<A> {
    /// The name given with the builder's [`name`](RateLimiterBuilder::name), if any.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(1).unwrap());
    /// assert_eq!(limiter.name(), None);
    /// ```
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.engine.meter.name()
    }

    /// The quota in force.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_hour(5).unwrap());
    /// assert_eq!(limiter.quota().burst(), 5);
    /// ```
    pub fn quota(&self) -> Quota {
        self.engine.quota()
    }

    /// Replaces the quota at runtime. Permits already taken count against the new quota: with
    /// GCRA the debt is kept *in permits* (`tat - now` re-scaled by `T_new / T_old`, rounded
    /// up), so tightening a limit never hands out a fresh burst and loosening it lets the
    /// debt drain at the new rate. Concurrent decisions see the old or the new quota, never a
    /// mix (one already in flight may still finish under the old one).
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] if the algorithm cannot run `quota`; nothing changes then.
    ///
    /// ```
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Quota::per_second(10).unwrap()).clock(ManualClock::new()).build();
    /// assert!(l.try_acquire_n(10).is_ok());      // the whole burst: 10 permits of debt
    /// l.set_quota(Quota::per_minute(10).unwrap()).unwrap();
    /// assert!(!l.try_acquire());                  // still 10 permits of debt: a minute now
    /// assert_eq!(l.peek().reset_after.as_secs(), 60);
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaError> {
        self.engine.set_quota(quota, |migrate| migrate(&self.cell))
    }

    /// Takes one permit if available now. Never waits.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(2).unwrap());
    /// assert!(limiter.try_acquire());
    /// assert!(limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// ```
    // Always inlined: the decision is a few dozen instructions around a clock read and a
    // CAS, and a call would add a prologue and an epilogue as long as the rule itself (the
    // rare paths, another clock, a spilled cell, a quota change, are calls of their own).
    #[inline(always)]
    #[must_use = "a permit may have been denied"]
    pub fn try_acquire(&self) -> bool {
        self.engine.try_acquire(&self.slot())
    }

    /// Takes `n` permits at once if available now. Never waits.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait after which it would succeed;
    /// [`AcquireError::ExceedsBurst`] if `n` is larger than the burst (it never could);
    /// [`AcquireError::Unrepresentable`] if granting would pass the end of the limiter's time.
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
        self.engine.try_acquire_n(&self.slot(), n)
    }

    /// Tries one permit and reports everything about the decision (for response headers).
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(3).unwrap());
    /// let d = limiter.check();
    /// assert!(d.allowed);
    /// assert_eq!((d.limit, d.remaining), (3, 2));
    /// ```
    #[inline]
    #[must_use = "the decision says whether the permit was granted"]
    pub fn check(&self) -> Decision {
        self.engine.check(&self.slot())
    }

    /// Tries `n` permits and reports everything about the decision. `n` larger than the burst
    /// is denied with [`Decision::exceeds_burst`]; `n = 0` is [`peek`](RateLimiter::peek).
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(3).unwrap());
    /// assert_eq!(limiter.check_n(3).remaining, 0);
    /// assert!(!limiter.check_n(1).allowed);
    /// ```
    #[inline]
    #[must_use = "the decision says whether the permits were granted"]
    pub fn check_n(&self, n: u64) -> Decision {
        self.engine.check_n(&self.slot(), n)
    }

    /// Like [`check`](RateLimiter::check) but under `quota` for this call only: one permit;
    /// see [`check_n_with`](RateLimiter::check_n_with).
    ///
    /// # Errors
    /// As [`check_n_with`](RateLimiter::check_n_with).
    ///
    /// ```
    /// use tollgate::{Quota, QuotaError, RateLimiter};
    /// let limiter = RateLimiter::new(Quota::per_second(1)?);
    /// let premium = Quota::per_second(100)?;
    /// assert!(limiter.check_with(premium)?.allowed);
    /// # Ok::<(), QuotaError>(())
    /// ```
    #[inline]
    pub fn check_with(&self, quota: Quota) -> Result<Decision, QuotaError> {
        self.check_n_with(1, quota)
    }

    /// Like [`check_n`](RateLimiter::check_n) but under `quota` for this call only (the
    /// redis-cell style: the limit travels with the request). The state is shared with every
    /// other call. GCRA takes the call's interval and burst; the window algorithms take its
    /// count as the limit, on the limiter's windows. `n = 0` is a peek under `quota`.
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] if the algorithm cannot decide under `quota` on this
    /// limiter; nothing is taken then, and no other limit is applied instead. GCRA runs every
    /// quota. The window algorithms refuse a quota whose burst differs from its count;
    /// [`WeightedWindow`](crate::WeightedWindow) a count above `u32::MAX`;
    /// [`FixedWindow`](crate::FixedWindow) a count above what a key's word holds beside the
    /// limiter's window index (at least `2^floor(log2 W) - 1` for the limiter's window of
    /// `W` ns: only windows of a few µs or less are concerned).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{FixedWindow, Quota, QuotaError, RateLimiter};
    /// let limiter = RateLimiter::new(Quota::per_second(1)?);
    /// let premium = Quota::per_second(100)?;
    /// assert!(limiter.check_n_with(50, premium)?.allowed);
    ///
    /// // 1000 per µs counts in words that hold 1023; a call cannot count to 5000 there.
    /// let tiny = RateLimiter::builder(Quota::new(1000, Duration::from_micros(1))?)
    ///     .algorithm(FixedWindow::new())?
    ///     .build();
    /// let big = Quota::new(5000, Duration::from_micros(5))?;
    /// assert!(matches!(tiny.check_n_with(1, big), Err(QuotaError::Unsupported(_))));
    /// # Ok::<(), QuotaError>(())
    /// ```
    #[inline]
    pub fn check_n_with(&self, n: u64, quota: Quota) -> Result<Decision, QuotaError> {
        self.engine.check_n_with(&self.slot(), n, &quota)
    }

    /// The state right now, taking nothing.
    ///
    /// ```
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(4).unwrap());
    /// assert_eq!(limiter.peek().remaining, 4);
    /// assert_eq!(limiter.peek().remaining, 4);
    /// ```
    #[must_use]
    pub fn peek(&self) -> Decision {
        self.engine.peek(&self.slot())
    }

    /// Takes one permit, blocking the thread until it is available (Guava's `acquire()`).
    /// Returns the time waited.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] if the wait does not fit in the limiter's time
    /// (about 146 years from its clock's origin): it returns at once, with no permit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(clock.clone())
    ///     .build();
    /// assert_eq!(limiter.acquire(), Ok(Duration::ZERO));
    /// assert_eq!(limiter.acquire(), Ok(Duration::from_millis(100))); // ManualClock "sleeps" instantly
    /// ```
    pub fn acquire(&self) -> Result<Duration, AcquireError> {
        self.acquire_n(1)
    }

    /// Takes `n` permits, blocking until they are available; returns the time waited. With
    /// GCRA, `n` larger than the burst is allowed: it waits `(n - burst) * T` from a full
    /// bucket (for bandwidth shaping). `n = 0` returns `Ok(Duration::ZERO)` at once.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] as for [`acquire`](RateLimiter::acquire);
    /// [`AcquireError::ExceedsBurst`] for algorithms that cannot book ahead (window
    /// algorithms) when `n` exceeds their limit.
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
        self.engine.acquire(&self.slot(), n, None)
    }

    /// Takes one permit if it is available within `timeout`, blocking for at most that long;
    /// see [`try_acquire_n_for`](RateLimiter::try_acquire_n_for).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](RateLimiter::try_acquire_n_for).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert_eq!(limiter.try_acquire_for(Duration::ZERO), Ok(Duration::ZERO));
    /// assert!(limiter.try_acquire_for(Duration::from_millis(50)).is_err()); // needs 100 ms
    /// ```
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Duration, AcquireError> {
        self.try_acquire_n_for(1, timeout)
    }

    /// Takes `n` permits if they are available within `timeout`, blocking for at most that
    /// long. If the wait would be longer, nothing is taken and it returns at once. `n = 0`
    /// succeeds at once.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed;
    /// others as for [`acquire_n`](RateLimiter::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(clock.clone())
    ///     .build();
    /// limiter.acquire().unwrap();
    /// assert!(limiter.try_acquire_n_for(1, Duration::from_millis(50)).is_err()); // needs 100 ms
    /// assert_eq!(limiter.try_acquire_n_for(1, Duration::from_millis(100)).unwrap(), Duration::from_millis(100));
    /// ```
    pub fn try_acquire_n_for(&self, n: u64, timeout: Duration) -> Result<Duration, AcquireError> {
        self.engine.acquire(&self.slot(), n, Some(timeout))
    }
}

impl RateLimiter<Gcra> {
    /// redis-cell's `CL.THROTTLE <key> max_burst count period quantity` against this limiter's
    /// state: burst `max_burst + 1`, `count` per `period_secs` seconds, cost `quantity`.
    ///
    /// # Errors
    /// The [`QuotaError`] for an invalid quota (zero count or period, a period or burst
    /// beyond the limiter's time range), the same errors [`Quota::new`] gives.
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
        let quota = Quota::from_throttle(max_burst, count, period_secs)?;
        Ok(ThrottleReply::from_decision(
            &self.check_n_with(quantity, quota)?,
        ))
    }

    /// Reserves one permit now; see [`reserve_n`](RateLimiter::reserve_n).
    ///
    /// # Errors
    /// As [`reserve_n`](RateLimiter::reserve_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(2).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(limiter.reserve().unwrap().delay().is_zero());
    /// assert_eq!(limiter.reserve().unwrap().delay(), Duration::from_millis(500));
    /// ```
    pub fn reserve(&self) -> Result<Reservation<'_>, AcquireError> {
        self.reserve_n(1)
    }

    /// Reserves `n` permits now, in arrival order, without waiting: the reservation says when
    /// they may be used and can be cancelled if they will not be. `n = 0` reserves nothing and
    /// is ready at once.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] as for [`acquire`](RateLimiter::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(2).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let r = limiter.reserve_n(4).unwrap();
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// r.cancel();
    /// assert!(limiter.try_acquire_n(2).is_ok());
    /// ```
    pub fn reserve_n(&self, n: u64) -> Result<Reservation<'_>, AcquireError> {
        self.reserve_upto(n, None)
    }

    /// Reserves one permit only if it is ready within `max_wait`; see
    /// [`try_reserve_n_for`](RateLimiter::try_reserve_n_for).
    ///
    /// # Errors
    /// As [`try_reserve_n_for`](RateLimiter::try_reserve_n_for).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(limiter.try_reserve_for(Duration::ZERO).is_ok());
    /// assert!(limiter.try_reserve_for(Duration::ZERO).is_err());
    /// ```
    pub fn try_reserve_for(&self, max_wait: Duration) -> Result<Reservation<'_>, AcquireError> {
        self.try_reserve_n_for(1, max_wait)
    }

    /// Reserves `n` permits only if they are ready within `max_wait`, without sleeping (for
    /// callers that schedule work themselves; golang.org/x/time/rate's `ReserveN` with a
    /// maximum delay). `Duration::ZERO` reserves only what is available now: the building
    /// block of [`all_or_none`](crate::all_or_none).
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed (nothing is
    /// reserved); [`AcquireError::Unrepresentable`] as for [`acquire`](RateLimiter::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let now = limiter.try_reserve_n_for(1, Duration::ZERO).unwrap();
    /// assert!(now.delay().is_zero());
    /// assert!(limiter.try_reserve_n_for(1, Duration::from_millis(50)).is_err()); // needs 100 ms
    /// assert!(limiter.try_reserve_n_for(1, Duration::from_millis(100)).is_ok());
    /// ```
    pub fn try_reserve_n_for(
        &self,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'_>, AcquireError> {
        self.reserve_upto(n, Some(duration_to_nanos(max_wait)))
    }

    fn reserve_upto(
        &self,
        n: u64,
        max_wait: Option<Nanos>,
    ) -> Result<Reservation<'_>, AcquireError> {
        let r = self.book_upto(n, max_wait);
        self.engine.meter.decided_result(&r, n);
        r
    }

    fn book_upto(&self, n: u64, max_wait: Option<Nanos>) -> Result<Reservation<'_>, AcquireError> {
        let now = self.engine.clock.now();
        let src = self.engine.src();
        let ticket = match self.cell.reserve(now, n, &src, max_wait)? {
            Booking::Booked { ticket, .. } => ticket,
            Booking::Now | Booking::Retry(_) => Ticket::nothing(now),
        };
        let cancel = Box::new(move |t: &Ticket| self.cancel_ticket(t));
        Ok(Reservation::new(ticket, now, &self.engine.clock, cancel))
    }

    fn cancel_ticket(&self, ticket: &Ticket) {
        self.engine.cancel(&self.slot(), ticket);
    }
}

impl<A: Algorithm> fmt::Debug for RateLimiter<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("algorithm", &self.engine.alg)
            .field("quota", &self.quota())
            .field("clock", &self.engine.clock)
            .finish()
    }
}

#[cfg(feature = "tokio")]
impl<A: Algorithm> RateLimiter<A> {
    /// Takes one permit, waiting asynchronously on tokio's timer; returns the time waited.
    /// See [`acquire_n_async`](RateLimiter::acquire_n_async).
    ///
    /// The future borrows the limiter. For a `'static` future (to move into `tokio::spawn`),
    /// await it inside an `async move` block that owns an `Arc` of the limiter:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::RateLimiter::new(tollgate::Quota::per_second(10).unwrap()));
    /// let l = limiter.clone();
    /// let task = tokio::spawn(async move { l.acquire_async().await });
    /// assert!(task.await.unwrap().is_ok());
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](RateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// As [`acquire`](RateLimiter::acquire).
    ///
    /// # Panics
    /// If it must wait outside a tokio runtime, or on a runtime built without the timer
    /// (`enable_time`): tokio's own `sleep` panics there. A permit available at once never
    /// touches the timer.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(100).unwrap());
    /// let waited = limiter.acquire_async().await.unwrap();
    /// assert!(waited.is_zero());
    /// # }
    /// ```
    pub async fn acquire_async(&self) -> Result<Duration, AcquireError> {
        self.acquire_n_async(1).await
    }

    /// Takes `n` permits, waiting asynchronously on tokio's timer; returns the time waited.
    ///
    /// With GCRA the slot is booked at the first poll, so concurrent waiters are granted in
    /// the order they first polled, each woken exactly once at its ready time. Window
    /// algorithms sleep until the permits would fit and decide again.
    ///
    /// # Cancel safety
    /// This method is cancel-safe. Dropping the future before it completes (a `select!` branch
    /// that lost, a `tokio::time::timeout` that fired) cancels its booking, whatever other
    /// waiters did meanwhile: the booked stretch goes to later arrivals, so no capacity is lost.
    ///
    /// # Errors
    /// As [`acquire_n`](RateLimiter::acquire_n).
    ///
    /// # Panics
    /// As [`acquire_async`](RateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_second(100).unwrap());
    /// assert!(limiter.acquire_n_async(5).await.unwrap().is_zero());
    /// # }
    /// ```
    pub async fn acquire_n_async(&self, n: u64) -> Result<Duration, AcquireError> {
        self.engine.acquire_async(&self.slot(), n, None).await
    }

    /// Takes one permit if it is available within `timeout`, waiting asynchronously; see
    /// [`try_acquire_n_for_async`](RateLimiter::try_acquire_n_for_async).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](RateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](RateLimiter::try_acquire_n_for).
    ///
    /// # Panics
    /// As [`acquire_async`](RateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_minute(1).unwrap());
    /// assert!(limiter.try_acquire_for_async(Duration::ZERO).await.is_ok());
    /// assert!(limiter.try_acquire_for_async(Duration::from_millis(10)).await.is_err());
    /// # }
    /// ```
    pub async fn try_acquire_for_async(&self, timeout: Duration) -> Result<Duration, AcquireError> {
        self.try_acquire_n_for_async(1, timeout).await
    }

    /// Takes `n` permits if they are available within `timeout`, waiting asynchronously. If
    /// the wait would be longer it returns at once with nothing taken.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](RateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](RateLimiter::try_acquire_n_for).
    ///
    /// # Panics
    /// As [`acquire_async`](RateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_minute(1).unwrap());
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
        self.engine
            .acquire_async(&self.slot(), n, Some(timeout))
            .await
    }

    /// One permit; see [`check_n_for_async`](RateLimiter::check_n_for_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_minute(1).unwrap());
    /// assert!(limiter.check_for_async(Duration::ZERO).await.allowed);
    /// assert!(!limiter.check_for_async(Duration::from_millis(10)).await.allowed);
    /// # }
    /// ```
    pub async fn check_for_async(&self, timeout: Duration) -> Decision {
        self.check_n_for_async(1, timeout).await
    }

    /// A check that may wait up to `timeout`: takes `n` permits as
    /// [`try_acquire_n_for_async`](RateLimiter::try_acquire_n_for_async) does, and reports the
    /// outcome as a [`Decision`] (what rate-limit headers need, without a second look):
    /// granted, `allowed` with the limiter's state as the grant left it; not grantable within
    /// `timeout`, denied with the wait needed as `retry_after` (nothing taken); never
    /// grantable within `timeout` (more than the burst, or past the end of the limiter's
    /// time), denied with no `retry_after`. `n = 0` is granted at once.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](RateLimiter::acquire_n_async).
    ///
    /// # Panics
    /// As [`acquire_async`](RateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::RateLimiter::new(tollgate::Quota::per_minute(2).unwrap());
    /// let d = limiter.check_n_for_async(2, Duration::ZERO).await;
    /// assert!(d.allowed && d.remaining == 0);
    /// let d = limiter.check_n_for_async(1, Duration::from_millis(10)).await;
    /// assert!(!d.allowed && d.retry_after.unwrap() > Duration::from_secs(29));
    /// assert!(limiter.check_n_for_async(3, Duration::from_millis(10)).await.exceeds_burst());
    /// # }
    /// ```
    pub async fn check_n_for_async(&self, n: u64, timeout: Duration) -> Decision {
        self.engine
            .check_n_for_async(&self.slot(), n, timeout)
            .await
    }
}

mod penalties;

#[cfg(all(test, not(loom)))]
mod tests;
