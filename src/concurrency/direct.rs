//! [`ConcurrencyLimiter`]: one concurrency limit, at most `limit` permits in flight.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::cell::semaphore::{SemCell, MAX_LIMIT};
use crate::concurrency::error::{check_limit, ConcurrencyError};
use crate::concurrency::permit::{Held, OwnedPermit, Permit};
use crate::concurrency::report;
use crate::concurrency::wait::{self, at_capacity, begin, take_now, Step};
use crate::decision::AcquireError;
use crate::meter::Meter;

mod builder;

pub use builder::ConcurrencyLimiterBuilder;

/// At most `limit` permits in flight at once: a semaphore on the crate's
/// [method grid](crate#the-method-grid), whose permits are guards given back when dropped.
///
/// Waiters are served in arrival order (FIFO), each woken once, when its permits are its: a
/// request at the head of the queue that does not fit yet holds back the smaller ones behind
/// it, so a large request is never starved. Non-waiting calls never pass a waiter either.
/// Every wait is cancel-safe: a dropped future (or a timed-out wait) gives its place up, and
/// if it had been served meanwhile its permits pass to the next waiter. The uncontended
/// acquire and release are one CAS each on one atomic word; waiting takes a mutex.
///
/// ```
/// use tollgate::{AcquireError, ConcurrencyLimiter};
///
/// let limiter = ConcurrencyLimiter::new(2).unwrap();
/// let a = limiter.try_acquire().unwrap();
/// let b = limiter.try_acquire().unwrap();
/// assert!(limiter.try_acquire().is_none()); // two in flight
/// drop(a);                                  // one back
/// assert!(limiter.try_acquire().is_some());
/// assert_eq!(
///     limiter.try_acquire_n(3).unwrap_err(),
///     AcquireError::ExceedsBurst { requested: 3, burst: 2 }
/// );
/// # drop(b);
/// ```
pub struct ConcurrencyLimiter {
    cell: SemCell,
    meter: Meter,
}

impl ConcurrencyLimiter {
    /// The largest limit: `2^31 - 1` (the count in flight and the limit share one atomic
    /// word). Limits are `u64`, as every count in the crate; a larger one is
    /// [`ConcurrencyError::TooLarge`].
    pub const MAX_LIMIT: u64 = MAX_LIMIT as u64;

    /// A limiter granting at most `limit` permits at once.
    ///
    /// # Errors
    /// [`ConcurrencyError::Zero`] for a limit of zero, [`ConcurrencyError::TooLarge`] above
    /// [`MAX_LIMIT`](Self::MAX_LIMIT).
    ///
    /// ```
    /// use tollgate::ConcurrencyLimiter;
    /// let limiter = ConcurrencyLimiter::new(10)?;
    /// assert_eq!(limiter.limit(), 10);
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn new(limit: u64) -> Result<ConcurrencyLimiter, ConcurrencyError> {
        Ok(Self::builder(limit)?.build())
    }

    /// Configures a limiter of `limit` permits (its [`name`](ConcurrencyLimiterBuilder::name)),
    /// then `build()`.
    ///
    /// # Errors
    /// As [`new`](Self::new): the limit is checked here, so `build` cannot fail.
    ///
    /// ```
    /// let db = tollgate::ConcurrencyLimiter::builder(10)?.name("db").build();
    /// assert_eq!((db.limit(), db.name()), (10, Some("db")));
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn builder(limit: u64) -> Result<ConcurrencyLimiterBuilder, ConcurrencyError> {
        ConcurrencyLimiterBuilder::new(limit)
    }

    fn with(limit: u32, meter: Meter) -> ConcurrencyLimiter {
        ConcurrencyLimiter {
            cell: SemCell::new(limit),
            meter,
        }
    }

    /// The name given to [`ConcurrencyLimiterBuilder::name`], if any.
    ///
    /// ```
    /// assert_eq!(tollgate::ConcurrencyLimiter::new(1).unwrap().name(), None);
    /// ```
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.meter.name()
    }

    /// One permit now, or `None` if none is free (or waiters queued first).
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(1).unwrap();
    /// let permit = limiter.try_acquire();
    /// assert!(permit.is_some() && limiter.try_acquire().is_none());
    /// ```
    #[inline]
    #[must_use = "the permit is given back as soon as it is dropped"]
    pub fn try_acquire(&self) -> Option<Permit<'_>> {
        self.try_acquire_n(1).ok()
    }

    /// `n` permits now, or the refusal. `n = 0` is an empty permit.
    ///
    /// # Errors
    /// [`AcquireError::ExceedsBurst`] if `n` is above the limit;
    /// [`AcquireError::AtCapacity`] if they are not free now (or waiters queued first).
    ///
    /// ```
    /// use tollgate::{AcquireError, ConcurrencyLimiter};
    /// let limiter = ConcurrencyLimiter::new(3).unwrap();
    /// let held = limiter.try_acquire_n(2)?;
    /// assert!(matches!(limiter.try_acquire_n(2), Err(AcquireError::AtCapacity { .. })));
    /// assert_eq!(limiter.try_acquire_n(0)?.n(), 0);
    /// # drop(held);
    /// # Ok::<(), AcquireError>(())
    /// ```
    #[inline]
    pub fn try_acquire_n(&self, n: u64) -> Result<Permit<'_>, AcquireError> {
        self.now(n).map(Permit::new)
    }

    /// One permit, blocking the thread until it is granted.
    ///
    /// # Errors
    /// None in practice (a limit is at least 1); the grid's `Result` shape, as
    /// [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(1).unwrap();
    /// let permit = limiter.acquire().unwrap();
    /// # drop(permit);
    /// ```
    pub fn acquire(&self) -> Result<Permit<'_>, AcquireError> {
        self.acquire_n(1)
    }

    /// `n` permits, blocking the thread until they are granted (in FIFO order).
    ///
    /// # Errors
    /// [`AcquireError::ExceedsBurst`] at once if `n` is above the limit, or later if
    /// [`set_limit`](Self::set_limit) lowers the limit below `n` while it waits: it never
    /// waits for what can never be granted.
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(4).unwrap();
    /// std::thread::scope(|s| {
    ///     let held = limiter.acquire_n(4).unwrap();
    ///     s.spawn(|| limiter.acquire_n(2).map(drop)); // waits for `held`
    ///     drop(held);
    /// });
    /// assert!(limiter.acquire_n(5).is_err());
    /// ```
    pub fn acquire_n(&self, n: u64) -> Result<Permit<'_>, AcquireError> {
        self.start_wait(n, None).block().map(Permit::new)
    }

    /// One permit, blocking at most `timeout`.
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](Self::try_acquire_n_for).
    ///
    /// ```
    /// use std::time::Duration;
    /// let limiter = tollgate::ConcurrencyLimiter::new(1).unwrap();
    /// let held = limiter.try_acquire_for(Duration::from_millis(10)).unwrap();
    /// assert!(limiter.try_acquire_for(Duration::from_millis(1)).is_err());
    /// # drop(held);
    /// ```
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Permit<'_>, AcquireError> {
        self.try_acquire_n_for(1, timeout)
    }

    /// `n` permits, blocking at most `timeout` (in FIFO order). If the permits are granted
    /// at the deadline, they are returned rather than dropped.
    ///
    /// # Errors
    /// [`AcquireError::AtCapacity`] when the timeout passed first (its place in the queue is
    /// given up); [`AcquireError::ExceedsBurst`] as for [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{AcquireError, ConcurrencyLimiter};
    /// let limiter = ConcurrencyLimiter::new(2).unwrap();
    /// let held = limiter.try_acquire_n(2).unwrap();
    /// let e = limiter.try_acquire_n_for(1, Duration::from_millis(1)).unwrap_err();
    /// assert_eq!(e, AcquireError::AtCapacity { in_flight: 2, limit: 2 });
    /// # drop(held);
    /// ```
    pub fn try_acquire_n_for(&self, n: u64, timeout: Duration) -> Result<Permit<'_>, AcquireError> {
        self.start_wait(n, Some(timeout)).block().map(Permit::new)
    }

    /// One permit, awaited (FIFO, cancel-safe).
    ///
    /// # Errors
    /// As [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = tollgate::ConcurrencyLimiter::new(1).unwrap();
    /// let permit = limiter.acquire_async().await.unwrap();
    /// # drop(permit);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_async(&self) -> Result<Permit<'_>, AcquireError> {
        self.acquire_n_async(1).await
    }

    /// `n` permits, awaited in FIFO order. Cancel-safe: dropping the future gives its place
    /// up, or, if it was served meanwhile, passes the permits on.
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = tollgate::ConcurrencyLimiter::new(2).unwrap();
    /// let permit = limiter.acquire_n_async(2).await.unwrap();
    /// assert_eq!(limiter.available(), 0);
    /// # drop(permit);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_n_async(&self, n: u64) -> Result<Permit<'_>, AcquireError> {
        self.start_wait(n, None).wait_async().await.map(Permit::new)
    }

    /// One permit, awaited at most `timeout` (tokio's timer).
    ///
    /// # Errors
    /// As [`try_acquire_n_for_async`](Self::try_acquire_n_for_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::ConcurrencyLimiter::new(1).unwrap();
    /// let held = limiter.try_acquire().unwrap();
    /// assert!(limiter.try_acquire_for_async(Duration::from_millis(1)).await.is_err());
    /// # drop(held);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn try_acquire_for_async(
        &self,
        timeout: Duration,
    ) -> Result<Permit<'_>, AcquireError> {
        self.try_acquire_n_for_async(1, timeout).await
    }

    /// `n` permits, awaited at most `timeout` (tokio's timer), FIFO and cancel-safe.
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](Self::try_acquire_n_for).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let limiter = tollgate::ConcurrencyLimiter::new(2).unwrap();
    /// let p = limiter.try_acquire_n_for_async(2, Duration::from_secs(1)).await.unwrap();
    /// assert_eq!(p.n(), 2);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn try_acquire_n_for_async(
        &self,
        n: u64,
        timeout: Duration,
    ) -> Result<Permit<'_>, AcquireError> {
        self.start_wait(n, Some(timeout))
            .wait_async()
            .await
            .map(Permit::new)
    }

    /// [`try_acquire`](Self::try_acquire), as an [`OwnedPermit`] (`'static`: for
    /// `tokio::spawn` or a thread) that keeps the limiter alive.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::ConcurrencyLimiter::new(1).unwrap());
    /// let permit = limiter.try_acquire_owned().unwrap();
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// ```
    #[must_use = "the permit is given back as soon as it is dropped"]
    pub fn try_acquire_owned(self: &Arc<Self>) -> Option<OwnedPermit> {
        self.try_acquire_n_owned(1).ok()
    }

    /// [`try_acquire_n`](Self::try_acquire_n), as an [`OwnedPermit`].
    ///
    /// # Errors
    /// As [`try_acquire_n`](Self::try_acquire_n).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::ConcurrencyLimiter::new(3).unwrap());
    /// assert_eq!(limiter.try_acquire_n_owned(3).unwrap().n(), 3);
    /// ```
    pub fn try_acquire_n_owned(self: &Arc<Self>, n: u64) -> Result<OwnedPermit, AcquireError> {
        self.now(n).map(|h| self.own(h))
    }

    /// [`acquire_async`](Self::acquire_async), as an [`OwnedPermit`].
    ///
    /// # Errors
    /// As [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::ConcurrencyLimiter::new(1).unwrap());
    /// let permit = limiter.acquire_owned_async().await.unwrap();
    /// tokio::spawn(async move { drop(permit) }).await.unwrap();
    /// assert_eq!(limiter.in_flight(), 0);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_owned_async(self: &Arc<Self>) -> Result<OwnedPermit, AcquireError> {
        self.acquire_n_owned_async(1).await
    }

    /// [`acquire_n_async`](Self::acquire_n_async), as an [`OwnedPermit`].
    ///
    /// # Errors
    /// As [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::ConcurrencyLimiter::new(2).unwrap());
    /// assert_eq!(limiter.acquire_n_owned_async(2).await.unwrap().n(), 2);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_n_owned_async(
        self: &Arc<Self>,
        n: u64,
    ) -> Result<OwnedPermit, AcquireError> {
        let held = self.start_wait(n, None).wait_async().await?;
        Ok(self.own(held))
    }

    /// Changes the limit live. Permits held stay held (lowering never revokes): new ones are
    /// granted only once in flight is below the new limit. Raising it serves waiters at once;
    /// lowering it below a waiter's request refuses that waiter
    /// ([`AcquireError::ExceedsBurst`]) rather than leaving it waiting forever.
    ///
    /// # Errors
    /// As [`new`](Self::new); the limit in force is then unchanged.
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(3).unwrap();
    /// let held = limiter.try_acquire_n(3).unwrap();
    /// limiter.set_limit(1).unwrap();
    /// assert_eq!((limiter.in_flight(), limiter.available()), (3, 0)); // kept
    /// drop(held);
    /// assert_eq!(limiter.available(), 1);
    /// assert!(limiter.set_limit(0).is_err());
    /// ```
    pub fn set_limit(&self, limit: u64) -> Result<(), ConcurrencyError> {
        self.cell.set_limit(check_limit(limit)?);
        Ok(())
    }

    /// The limit in force.
    ///
    /// ```
    /// assert_eq!(tollgate::ConcurrencyLimiter::new(7).unwrap().limit(), 7);
    /// ```
    pub fn limit(&self) -> u64 {
        u64::from(self.cell.state().limit)
    }

    /// Permits held now (above the limit for a while after it was lowered).
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(7).unwrap();
    /// let _p = limiter.try_acquire_n(3).unwrap();
    /// assert_eq!(limiter.in_flight(), 3);
    /// ```
    pub fn in_flight(&self) -> u64 {
        u64::from(self.cell.state().in_flight)
    }

    /// Permits free now: the limit less in flight, zero while over the limit. (With waiters
    /// queued, free permits go to them first: see the type's docs.)
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(7).unwrap();
    /// let _p = limiter.try_acquire_n(3).unwrap();
    /// assert_eq!(limiter.available(), 4);
    /// ```
    pub fn available(&self) -> u64 {
        u64::from(self.cell.state().available())
    }

    fn own(self: &Arc<Self>, held: Held) -> OwnedPermit {
        OwnedPermit::new(held, self.clone())
    }

    #[inline(always)]
    fn now(&self, n: u64) -> Result<Held, AcquireError> {
        report::decided(&self.meter, self.now_uncounted(n), n)
    }

    #[inline(always)]
    fn now_uncounted(&self, n: u64) -> Result<Held, AcquireError> {
        if n > 0 {
            if let Some(r) = take_now(&self.cell, n) {
                return r;
            }
        }
        self.now_slow(n)
    }

    /// An empty permit (`n = 0`), more than the limit, or (not reached: only keyed stores
    /// close their cells) a closed cell.
    #[cold]
    #[inline(never)]
    fn now_slow(&self, n: u64) -> Result<Held, AcquireError> {
        match begin(&self.cell, n, false) {
            Step::Done(r) => r,
            // Not reached: nothing queues without being asked to.
            Step::Wait(w) => w.give_up(),
            Step::Closed => Err(at_capacity(&self.cell)),
        }
    }

    /// A waiting acquire, up to its wait.
    fn start_wait(&self, n: u64, timeout: Option<Duration>) -> wait::Acquire<'_, '_> {
        let begin = |queue| begin(&self.cell, n, queue);
        wait::start(&self.meter, n, timeout, begin, || {
            Err(at_capacity(&self.cell))
        })
    }
}

impl fmt::Debug for ConcurrencyLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.cell.state();
        f.debug_struct("ConcurrencyLimiter")
            .field("name", &self.name())
            .field("limit", &s.limit)
            .field("in_flight", &s.in_flight)
            .field("queued", &s.queued)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::cell::semaphore::test_takes;

    /// A grant and the refusal at capacity (the hot outcomes) are decided from one take of
    /// the cell's word: the refusal is not taken a second time (a second load on the hot
    /// refusal path, which could also report other counts than the ones that refused it).
    #[test]
    fn a_grant_or_a_refusal_at_capacity_takes_the_word_once() {
        let limiter = ConcurrencyLimiter::new(2).unwrap();
        let mut held = None;
        assert_eq!(
            test_takes::during(|| held = limiter.try_acquire_n(2).ok()),
            1
        );
        assert!(held.is_some());
        let mut r = None;
        assert_eq!(
            test_takes::during(|| r = Some(limiter.try_acquire_n(1).map(drop))),
            1
        );
        assert_eq!(
            r,
            Some(Err(AcquireError::AtCapacity {
                in_flight: 2,
                limit: 2
            }))
        );
        let mut none = Some(());
        assert_eq!(
            test_takes::during(|| none = limiter.try_acquire().map(drop)),
            1
        );
        assert_eq!(none, None);
        // Still refused the same way, out of line.
        assert_eq!(
            limiter.try_acquire_n(3).unwrap_err(),
            AcquireError::ExceedsBurst {
                requested: 3,
                burst: 2
            }
        );
    }
}
