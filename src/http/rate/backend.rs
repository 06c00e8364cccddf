//! [`Backend`]: what the HTTP layer needs from a keyed limiter, and its implementation for
//! [`KeyedRateLimiter`] (every algorithm); [`RefundBackend`]: permits taken before the handler
//! and given back after it, for the backends with reservations (GCRA).
//!
//! Kept small on purpose, so that any keyed limiter of the crate (in process or remote) can
//! sit behind the layer: decide a key with a cost, and wait for one with a bound (shaping).
//! In-process limiters decide at once ([`Answer::Now`]); a remote store answers later
//! ([`Answer::Later`]) and may fail ([`Backend::Error`]), which the layer answers with
//! `503 Service Unavailable`.

use std::convert::Infallible;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::{AcquireError, Algorithm, Decision, Gcra, KeyedRateLimiter, Quota, Reservation};

/// A result available now, or a future that will produce it.
///
/// ```
/// use tollgate::http::Answer;
/// let now: Answer<u8, std::future::Ready<u8>> = Answer::Now(7);
/// assert!(matches!(now, Answer::Now(7)));
/// ```
#[derive(Debug)]
pub enum Answer<T, F> {
    /// Decided synchronously (in-process limiters): no allocation, no extra poll.
    Now(T),
    /// Decided by a future (a remote store).
    Later(F),
}

/// A keyed limiter the HTTP layer can run: implemented for [`KeyedRateLimiter`] with every
/// algorithm, and (feature `redis`) for `RedisRateLimiter` with every algorithm it runs.
///
/// Every method decides `cost` permits for `key` under the backend's own quota. The names
/// follow the crate's method grid ([`check_n`](Backend::check_n) now,
/// [`check_n_for_async`](Backend::check_n_for_async) waiting up to a timeout,
/// [`RefundBackend::try_reserve_n`] reserving what is available now), and the in-process and
/// Redis limiters implement them with their own methods of the same names.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::http::{Answer, Backend};
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// let limiter = KeyedRateLimiter::<String>::new(Quota::per_second(2).unwrap());
/// match Backend::check_n(&limiter, &"client".to_string(), 1) {
///     Answer::Now(Ok(d)) => assert!(d.allowed && d.remaining == 1),
///     _ => unreachable!("in-process limiters decide at once"),
/// }
/// ```
pub trait Backend: Send + Sync + 'static {
    /// The key type.
    type Key: Send + Sync + 'static;
    /// Why a decision could not be made ([`Infallible`] in process).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The quota in force. The `RateLimit-Policy` header states its burst and configured rate
    /// (see [`HeaderStyle`](super::super::HeaderStyle)).
    ///
    /// ```
    /// use tollgate::http::Backend;
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u8>::new(Quota::per_minute(60).unwrap());
    /// assert_eq!(Backend::quota(&limiter).count(), 60);
    /// limiter.set_quota(Quota::per_minute(120).unwrap()).unwrap();
    /// assert_eq!(Backend::quota(&limiter).count(), 120); // the quota in force, changed live
    /// ```
    fn quota(&self) -> Quota;

    /// The time the quota's limit refers to: how long a full limit takes to come back. GCRA:
    /// the tolerance (`burst * T`, the time a full burst takes to come back); a window
    /// algorithm: its window `W`. (The `RateLimit-Policy` header's `w` derives from
    /// [`quota`](Backend::quota) alone.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::Backend;
    /// use tollgate::{KeyedRateLimiter, Quota, SlidingLog};
    ///
    /// let q = Quota::per_minute(60).unwrap().with_burst(10).unwrap();
    /// let gcra = KeyedRateLimiter::<u8>::new(q);
    /// assert_eq!(gcra.window(), Duration::from_secs(10)); // 10 permits, one a second
    /// let log = KeyedRateLimiter::<u8>::builder(Quota::per_minute(60).unwrap())
    ///     .algorithm(SlidingLog)
    ///     .unwrap()
    ///     .build();
    /// assert_eq!(log.window(), Duration::from_secs(60));
    /// ```
    fn window(&self) -> Duration;

    /// Whether the memory this backend keeps for keys stays bounded however many distinct
    /// keys arrive. [`build`](super::super::RateLimitLayerBuilder::build) refuses a backend that
    /// says no ([`BuildError::UnboundedKeys`](super::super::BuildError::UnboundedKeys)) unless
    /// [`allow_unbounded_keys`](super::super::RateLimitLayerBuilder::allow_unbounded_keys) is set:
    /// clients choose keys (addresses, /64s, header values), so an uncapped table is memory a
    /// client can grow at will.
    ///
    /// A [`KeyedRateLimiter`]: bounded with a
    /// [`max_keys`](crate::KeyedRateLimiterBuilder::max_keys) cap, or when its key type has a
    /// single value (`()`, as with `GlobalKey`); a sweeper alone does not bound it (a flood
    /// inside one sweep interval stays). `RedisRateLimiter`: bounded (its state is in Redis,
    /// where each key expires once it holds nothing; Redis's `maxmemory` bounds the rest).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tollgate::http::Backend;
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// let q = Quota::per_second(5).unwrap();
    /// assert!(!KeyedRateLimiter::<String>::new(q).keys_bounded());
    /// let capped = KeyedRateLimiter::<String>::builder(q)
    ///     .max_keys(NonZeroUsize::new(100_000).unwrap())
    ///     .build();
    /// assert!(capped.keys_bounded());
    /// assert!(KeyedRateLimiter::<()>::new(q).keys_bounded());
    /// ```
    fn keys_bounded(&self) -> bool;

    /// Decides `cost` permits for `key` now, taking them if allowed. `cost` above the burst
    /// is denied with no retry-after ([`Decision::exceeds_burst`]).
    ///
    /// ```
    /// use tollgate::http::{Answer, Backend};
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<&str>::builder(Quota::per_second(5).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let decide = |cost| match Backend::check_n(&limiter, &"client", cost) {
    ///     Answer::Now(Ok(d)) => d,
    ///     _ => unreachable!("in-process limiters decide at once"),
    /// };
    /// let d = decide(3); // a request that costs 3 permits
    /// assert!(d.allowed && d.remaining == 2);
    /// let d = decide(3);
    /// assert!(!d.allowed && d.retry_after.is_some()); // 2 left: not now
    /// assert!(decide(6).exceeds_burst()); // more than the burst: never
    /// ```
    fn check_n(
        &self,
        key: &Self::Key,
        cost: u64,
    ) -> Answer<
        Result<Decision, Self::Error>,
        impl Future<Output = Result<Decision, Self::Error>> + Send + 'static,
    >;

    /// Takes `cost` permits for `key`, waiting up to `max_wait` for them; if the wait would be
    /// longer, takes nothing and returns a denied decision with the wait needed as its
    /// retry-after, or with none if even a fresh key could not serve `cost` within
    /// `max_wait`. With reservations (GCRA) waiters are served first come, first served, each
    /// woken once; the window algorithms sleep until the permits would fit and decide again
    /// (a newcomer may take them first; the wait still never exceeds `max_wait`).
    ///
    /// Cancel safety: dropping the future before it completes takes nothing (a reservation
    /// is given back).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tollgate::http::Backend;
    /// use tollgate::{KeyedRateLimiter, Quota, TokioClock};
    ///
    /// let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    /// let limiter = KeyedRateLimiter::<u8>::builder(quota).clock(TokioClock::new()).build();
    /// let start = tokio::time::Instant::now();
    /// let wait = |max_wait| Backend::check_n_for_async(&limiter, &1, 1, max_wait);
    /// assert!(wait(Duration::ZERO).await.unwrap().allowed);
    /// // The next permit is 100 ms away: within the 200 ms allowed, so it waits for it.
    /// assert!(wait(Duration::from_millis(200)).await.unwrap().allowed);
    /// assert_eq!(start.elapsed(), Duration::from_millis(100));
    /// // Not within 50 ms: nothing taken, the wait needed as the retry-after.
    /// let d = wait(Duration::from_millis(50)).await.unwrap();
    /// assert_eq!((d.allowed, d.retry_after), (false, Some(Duration::from_millis(100))));
    /// # }
    /// ```
    fn check_n_for_async<'a>(
        &'a self,
        key: &'a Self::Key,
        cost: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Decision, Self::Error>> + Send + 'a;
}

/// A [`Backend`] whose permits can be taken before the handler runs and given back after it
/// (response-aware limits, [`refund_if`](super::super::RateLimitLayerBuilder::refund_if)): the
/// backends with reservations, [`KeyedRateLimiter`] and `RedisRateLimiter` running
/// [`Gcra`]. The window algorithms only count what was admitted, so a permit given back could
/// not be told apart from one still in use: they do not implement it, and `refund_if` does not
/// compile with them.
///
/// ```
/// use tollgate::http::RefundBackend;
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let limiter = KeyedRateLimiter::<u8>::new(Quota::per_second(1).unwrap());
/// let (d, taken) = RefundBackend::try_reserve_n(&limiter, &7, 1).await.unwrap();
/// assert!(d.allowed && d.remaining == 0);
/// limiter.refund(taken.unwrap()).await;
/// assert_eq!(limiter.peek(&7).remaining, 1);
/// # }
/// ```
pub trait RefundBackend: Backend {
    /// Permits taken by [`try_reserve_n`](RefundBackend::try_reserve_n), which
    /// [`refund`](RefundBackend::refund) can give back.
    type Reservation<'a>: Send
    where
        Self: 'a;

    /// Takes `cost` permits for `key` if they are available now, in a form
    /// [`refund`](RefundBackend::refund) can give back. Denied: nothing is kept.
    ///
    /// ```
    /// use tollgate::http::RefundBackend;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = KeyedRateLimiter::<u8>::builder(Quota::per_second(2).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let (d, taken) = RefundBackend::try_reserve_n(&limiter, &7, 2).await.unwrap();
    /// assert!(d.allowed && taken.is_some());
    /// let (d, taken) = RefundBackend::try_reserve_n(&limiter, &7, 1).await.unwrap();
    /// assert!(!d.allowed && taken.is_none()); // denied: nothing to give back
    /// # }
    /// ```
    fn try_reserve_n<'a>(
        &'a self,
        key: &'a Self::Key,
        cost: u64,
    ) -> impl Future<Output = Result<(Decision, Option<Self::Reservation<'a>>), Self::Error>> + Send + 'a;

    /// Gives back the permits of a reservation.
    ///
    /// ```
    /// use tollgate::http::RefundBackend;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = KeyedRateLimiter::<u8>::builder(Quota::per_second(2).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let (_, first) = RefundBackend::try_reserve_n(&limiter, &7, 1).await.unwrap();
    /// let (_, second) = RefundBackend::try_reserve_n(&limiter, &7, 1).await.unwrap();
    /// assert_eq!(limiter.peek(&7).remaining, 0);
    /// // The handler answered `304 Not Modified`: the second request does not count.
    /// limiter.refund(second.unwrap()).await;
    /// assert_eq!(limiter.peek(&7).remaining, 1);
    /// # let _ = first;
    /// # }
    /// ```
    fn refund<'a>(
        &'a self,
        reservation: Self::Reservation<'a>,
    ) -> impl Future<Output = ()> + Send + 'a;
}

/// A denial for a backend that only reports a wait: no permit left, the wait as retry-after
/// (and as reset, the next instant anything changes for this request).
pub(crate) fn denied(quota: Quota, retry_after: Duration) -> Decision {
    Decision::denied(quota.burst(), 0, retry_after, retry_after)
}

/// A request that can never be granted (over the burst, or past the end of time).
pub(crate) fn never(quota: Quota, state: Decision) -> Decision {
    Decision::never(quota.burst(), state.remaining, state.reset_after)
}

/// The in-process limiter, any algorithm. Everything is decided at once; `Error` is
/// [`Infallible`]. The trait's `check_n` and `check_n_for_async` are the limiter's methods of
/// the same names ([`check_n_for_async`](KeyedRateLimiter::check_n_for_async)): with GCRA the slot is
/// reserved at the future's first poll, waiters are served in that order with one wake-up
/// each, and dropping the future cancels the reservation (its slot goes to the next arrival);
/// with a window algorithm it sleeps until the permits would fit and decides again, and a
/// dropped wait holds nothing.
impl<K, A, S> Backend for KeyedRateLimiter<K, A, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    type Key = K;
    type Error = Infallible;

    fn quota(&self) -> Quota {
        KeyedRateLimiter::quota(self)
    }

    fn window(&self) -> Duration {
        <A as Algorithm>::window(&KeyedRateLimiter::quota(self))
    }

    fn keys_bounded(&self) -> bool {
        // A zero-sized key type has one value: one key at most.
        std::mem::size_of::<K>() == 0 || self.max_keys().is_some()
    }

    // Always: folded into the rate step, so that the decision is not copied out of a call
    // (there is one call site per service type).
    #[inline(always)]
    fn check_n(
        &self,
        key: &K,
        cost: u64,
    ) -> Answer<
        Result<Decision, Infallible>,
        impl Future<Output = Result<Decision, Infallible>> + Send + 'static,
    > {
        Answer::<_, std::future::Ready<_>>::Now(Ok(self.check_n(key, cost)))
    }

    async fn check_n_for_async<'a>(
        &'a self,
        key: &'a K,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, Infallible> {
        Ok(self.check_n_for_async(key, cost, max_wait).await)
    }
}

/// `try_reserve_n` is [`try_reserve_n_for`](KeyedRateLimiter::try_reserve_n_for) with no wait: the permits
/// are taken only if available now. `refund` is [`Reservation::cancel`], which gives a
/// reservation's capacity back even when it was ready at once and others followed it.
impl<K, S> RefundBackend for KeyedRateLimiter<K, Gcra, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    type Reservation<'a> = Reservation<'a>;

    fn try_reserve_n<'a>(
        &'a self,
        key: &'a K,
        cost: u64,
    ) -> impl Future<Output = Result<(Decision, Option<Reservation<'a>>), Infallible>> + Send + 'a
    {
        let quota = KeyedRateLimiter::quota(self);
        let decided = if cost > quota.burst() {
            (never(quota, self.peek(key)), None)
        } else {
            match self.try_reserve_n_for(key, cost, Duration::ZERO) {
                Ok(r) => (self.peek(key), Some(r)),
                Err(AcquireError::RateLimited { retry_after }) => {
                    (denied(quota, retry_after), None)
                }
                Err(AcquireError::KeyCapReached {
                    retry_after: Some(wait),
                }) => (Decision::key_cap_reached(quota.burst(), wait), None),
                Err(_) => (never(quota, self.peek(key)), None),
            }
        };
        std::future::ready(Ok(decided))
    }

    fn refund<'a>(&'a self, reservation: Reservation<'a>) -> impl Future<Output = ()> + Send + 'a {
        reservation.cancel();
        std::future::ready(())
    }
}
