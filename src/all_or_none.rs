//! Taking permits from several limits together, or from none.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::decision::AcquireError;
use crate::reservation::Reservation;

/// Permits one limit set aside for a request, which [`all_or_none_async`] keeps or gives back:
/// the reservation abstraction every backend implements ([`Reservation`] in process,
/// `RedisReservation` on Redis, or your own), so that one call can take from limits of
/// different backends together.
///
/// `cancel` returns a future because giving back may need a round trip (Redis); a backend that
/// gives back at once does it inside `cancel` and returns a ready future. A cancel that fails
/// (a store that does not answer) keeps the permits taken: it can only under-admit.
///
/// ```
/// use std::time::Duration;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tollgate::{CancelFuture, Hold};
///
/// /// A counter of free slots; a hold is one slot taken.
/// struct Slot<'a>(&'a AtomicU64);
///
/// impl Hold for Slot<'_> {
///     fn delay(&self) -> Duration {
///         Duration::ZERO // only ever made when a slot is free
///     }
///     fn cancel(self: Box<Self>) -> CancelFuture {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         Box::pin(std::future::ready(()))
///     }
/// }
///
/// let free = AtomicU64::new(0);
/// let hold = Slot(&free).boxed();
/// drop(hold.cancel()); // given back before the future is even polled
/// assert_eq!(free.load(Ordering::Relaxed), 1);
/// ```
pub trait Hold: Send {
    /// The wait until the permits are ready; zero when ready now. [`all_or_none_async`]
    /// keeps only holds that are ready now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Hold, ManualClock, Quota, RateLimiter};
    ///
    /// let quota = Quota::per_second(2).unwrap().with_burst(1).unwrap();
    /// let limiter = RateLimiter::builder(quota).clock(ManualClock::new()).build();
    /// let first = limiter.reserve().unwrap().boxed();
    /// let second = limiter.reserve().unwrap().boxed();
    /// assert_eq!(first.delay(), Duration::ZERO);
    /// assert_eq!(second.delay(), Duration::from_millis(500));
    /// ```
    fn delay(&self) -> Duration;

    /// Gives the permits back; the future completes once they are back (ready at once for a
    /// backend that gives back synchronously, as the in-process limiters do).
    ///
    /// ```
    /// use tollgate::{Hold, ManualClock, Quota, RateLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = RateLimiter::builder(Quota::per_second(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let hold = limiter.reserve().unwrap().boxed();
    /// assert!(!limiter.try_acquire()); // the one permit is held
    /// hold.cancel().await;
    /// assert!(limiter.try_acquire()); // and given back
    /// # }
    /// ```
    fn cancel(self: Box<Self>) -> CancelFuture;

    /// `Box::new(self)` as a trait object, for
    /// `limiter.try_reserve_for(..).map(Hold::boxed)`.
    ///
    /// Holds of different limiters (and backends) then go in one collection:
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{AcquireError, Hold, KeyedRateLimiter, ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let global = RateLimiter::builder(Quota::per_second(10).unwrap()).clock(clock.clone()).build();
    /// let per_user = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
    ///     .clock(clock)
    ///     .build();
    /// let holds: Vec<Result<Box<dyn Hold + '_>, AcquireError>> = vec![
    ///     global.try_reserve_for(Duration::ZERO).map(Hold::boxed),
    ///     per_user.try_reserve_for(&7, Duration::ZERO).map(Hold::boxed),
    /// ];
    /// assert!(holds.iter().all(|h| h.as_ref().is_ok_and(|h| h.delay().is_zero())));
    /// ```
    fn boxed<'a>(self) -> Box<dyn Hold + 'a>
    where
        Self: Sized + 'a,
    {
        Box::new(self)
    }
}

/// What [`Hold::cancel`] returns: the rest of the giving back, if any, to await.
///
/// A backend whose giving back is a round trip does it in the future (here, a counter stands
/// for the remote store):
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::{CancelFuture, Hold};
///
/// struct Remote(Arc<AtomicU64>);
///
/// impl Hold for Remote {
///     fn delay(&self) -> Duration {
///         Duration::ZERO
///     }
///     fn cancel(self: Box<Self>) -> CancelFuture {
///         let free = Arc::clone(&self.0);
///         Box::pin(async move {
///             free.fetch_add(1, Ordering::Relaxed); // the round trip would be here
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let free = Arc::new(AtomicU64::new(0));
/// let cancel: CancelFuture = Remote(Arc::clone(&free)).boxed().cancel();
/// assert_eq!(free.load(Ordering::Relaxed), 0); // nothing given back until it runs
/// cancel.await;
/// assert_eq!(free.load(Ordering::Relaxed), 1);
/// # }
/// ```
pub type CancelFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

impl Hold for Reservation<'_> {
    fn delay(&self) -> Duration {
        Reservation::delay(self)
    }

    fn cancel(self: Box<Self>) -> CancelFuture {
        Reservation::cancel(*self);
        Box::pin(std::future::ready(()))
    }
}

/// A backend's refusal as [`all_or_none_async`] compares it: how long until retrying could
/// succeed, or `None` when waiting would not help (a request that can never be admitted, a
/// store that did not answer). Implemented by [`AcquireError`] and by the Redis backend's
/// `RedisLimitError`; a refusal of your own backend implements it (or converts into one of
/// those).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{AcquireError, Refusal};
/// let e = AcquireError::RateLimited { retry_after: Duration::from_secs(1) };
/// assert_eq!(Refusal::retry_after(&e), Some(Duration::from_secs(1)));
/// ```
pub trait Refusal {
    /// The wait after which retrying could succeed; `None` if waiting would not help.
    ///
    /// A backend's own refusal, for [`all_or_none_async`]:
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Refusal;
    ///
    /// enum QuotaServiceError {
    ///     Throttled { seconds: u64 },
    ///     Unreachable,
    /// }
    ///
    /// impl Refusal for QuotaServiceError {
    ///     fn retry_after(&self) -> Option<Duration> {
    ///         match self {
    ///             QuotaServiceError::Throttled { seconds } => Some(Duration::from_secs(*seconds)),
    ///             QuotaServiceError::Unreachable => None, // waiting would not help
    ///         }
    ///     }
    /// }
    ///
    /// let e = QuotaServiceError::Throttled { seconds: 2 };
    /// assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
    /// assert_eq!(QuotaServiceError::Unreachable.retry_after(), None);
    /// ```
    fn retry_after(&self) -> Option<Duration>;
}

impl Refusal for AcquireError {
    fn retry_after(&self) -> Option<Duration> {
        AcquireError::retry_after(self)
    }
}

/// [`all_or_none`] for limits of any backends together (an in-process per-user limit and a
/// Redis global limit, say): passes only if every hold is ready now, and otherwise gives
/// every hold back, awaiting each cancel (latest first: on Redis only the latest reservation
/// on a key can be undone exactly) before returning the refusal.
///
/// Give it one `Result<Box<dyn Hold>, E>` per limit, made as for [`all_or_none`] and boxed
/// with [`Hold::boxed`]; the errors must share one type (for Redis,
/// `RedisLimitError`, into which an [`AcquireError`] converts).
///
/// # Errors
/// The refusal that says most: one after which waiting would not help (never admissible,
/// store unavailable) before any wait, else the longest wait.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{all_or_none_async, AcquireError, Hold, KeyedRateLimiter, ManualClock, Quota, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = ManualClock::new();
/// let global = RateLimiter::builder(Quota::per_second(100).unwrap()).clock(clock.clone()).build();
/// let per_user = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
///     .clock(clock.clone())
///     .build();
/// let take = |user| all_or_none_async::<AcquireError, _>([
///     per_user.try_reserve_for(&user, Duration::ZERO).map(Hold::boxed),
///     global.try_reserve_for(Duration::ZERO).map(Hold::boxed),
/// ]);
/// assert!(take(7).await.is_ok());
/// assert!(take(7).await.is_err());         // user 7 is limited...
/// assert_eq!(global.peek().remaining, 99); // ...and the global limit was not charged
/// # }
/// ```
pub async fn all_or_none_async<'a, E, I>(holds: I) -> Result<(), E>
where
    E: Refusal + From<AcquireError>,
    I: IntoIterator<Item = Result<Box<dyn Hold + 'a>, E>>,
{
    let mut tally = Tally::new();
    for h in holds {
        if let Some(later) = tally.count(h, |h| h.delay()) {
            later.cancel().await;
        }
    }
    if let Err((e, kept)) = tally.end() {
        for h in kept {
            h.cancel().await;
        }
        return Err(e);
    }
    Ok(())
}

/// Passes a request only if *every* limit admits it now, and charges none of them otherwise:
/// "one from this user's limit and one from the global limit, or neither".
///
/// For limits of other backends (Redis, your own) in the same call, see [`all_or_none_async`].
///
/// Give it one reservation per limit, made with `try_reserve_for(Duration::ZERO)` or
/// `try_reserve_n_for(n, Duration::ZERO)` (only what is available now) or plain `reserve` /
/// `reserve_n` (then any that is not ready at once counts as a refusal). If all are ready now,
/// they are kept and `Ok(())` is returned; otherwise every reservation taken is cancelled (any
/// cancel order gives everything back) and the error says how long until the most constrained
/// limit could admit it.
///
/// # Errors
/// [`AcquireError::RateLimited`] (or [`AcquireError::KeyCapReached`], from a keyed limiter's
/// full key cap) with the longest wait among the limits that refused;
/// [`AcquireError::ExceedsBurst`] or [`AcquireError::Unrepresentable`] if a limit can never
/// admit the request (those take precedence: waiting would not help).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{all_or_none, KeyedRateLimiter, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let global = RateLimiter::builder(Quota::per_second(100).unwrap()).clock(clock.clone()).build();
/// let per_user = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
///     .clock(clock.clone())
///     .build();
/// let take = |user| all_or_none([
///     per_user.try_reserve_for(&user, Duration::ZERO),
///     global.try_reserve_for(Duration::ZERO),
/// ]);
/// assert!(take(7).is_ok());
/// assert!(take(7).is_err());            // user 7 is limited...
/// assert_eq!(global.peek().remaining, 99); // ...and the global limit was not charged for it
/// assert!(take(8).is_ok());
/// ```
pub fn all_or_none<'a, I>(reservations: I) -> Result<(), AcquireError>
where
    I: IntoIterator<Item = Result<Reservation<'a>, AcquireError>>,
{
    let mut tally = Tally::new();
    for r in reservations {
        if let Some(later) = tally.count(r, Reservation::delay) {
            later.cancel();
        }
    }
    tally.end().map_err(|(e, kept)| {
        kept.into_iter().for_each(Reservation::cancel);
        e
    })
}

/// What the holds given to [`all_or_none`] or [`all_or_none_async`] came to so far: those
/// ready now, and the refusal that says most.
struct Tally<H, E> {
    kept: Vec<H>,
    refusal: Option<E>,
}

impl<H, E: Refusal + From<AcquireError>> Tally<H, E> {
    fn new() -> Self {
        Tally {
            kept: Vec::new(),
            refusal: None,
        }
    }

    /// Counts one hold, whose wait `delay` reads: kept if ready now; else its refusal is
    /// counted, and a hold that is ready only later is handed back to be cancelled.
    fn count(&mut self, hold: Result<H, E>, delay: impl Fn(&H) -> Duration) -> Option<H> {
        let (e, later) = match hold {
            Ok(h) if delay(&h).is_zero() => {
                self.kept.push(h);
                return None;
            }
            Ok(h) => {
                let retry_after = delay(&h);
                (E::from(AcquireError::RateLimited { retry_after }), Some(h))
            }
            Err(e) => (e, None),
        };
        self.refusal = Some(match self.refusal.take() {
            None => e,
            Some(prev) => worse(prev, e),
        });
        later
    }

    /// `Ok` if every hold was ready now; else the refusal, with the kept holds to give back,
    /// latest first.
    fn end(mut self) -> Result<(), (E, Vec<H>)> {
        let Some(e) = self.refusal else {
            return Ok(());
        };
        self.kept.reverse();
        Err((e, self.kept))
    }
}

/// Of two refusals, the one that says more: a permanent one, else the longer wait.
fn worse<E: Refusal>(a: E, b: E) -> E {
    let wait = |e: &E| e.retry_after().unwrap_or(Duration::MAX);
    if wait(&b) > wait(&a) {
        b
    } else {
        a
    }
}
