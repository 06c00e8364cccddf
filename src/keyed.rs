//! [`KeyedRateLimiter`]: one cell per key, in a sharded concurrent map.
//!
//! The public face only: every method is one call into the method family (`crate::engine`)
//! on the key's slot of the keyed engine (`crate::engine::keyed`, which holds the table). Its
//! builder is in `builder.rs`; its table settings and their measured defaults (hasher, shard
//! count) are the table's (`crate::store::settings`).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::gcra::Ticket;
use crate::algorithm::{Booking, Gcra};
use crate::cell::Algorithm;
use crate::clock::duration_to_nanos;
use crate::decision::{AcquireError, Decision, ThrottleReply};
use crate::engine::keyed::{KeySlot, KeyedEngine};
use crate::engine::{Engine, Placed};
use crate::quota::{Quota, QuotaError};
// The methods' docs link to it (the builder is where it is used).
use crate::reservation::Reservation;
use crate::store::evict::SweepStats;
#[allow(unused_imports)]
use crate::store::keyed::WhenFull;
use crate::store::settings::DefaultKeyHasher;
use crate::store::sweeper::Sweeper;
use crate::Nanos;

mod builder;
mod penalties;

pub use builder::KeyedRateLimiterBuilder;

/// Rate limits per key: one cell (for GCRA, one `u64`) per key in a sharded concurrent map.
///
/// Keys are anything `Hash + Eq`; methods take a borrowed form (`&str` for `String` keys).
/// To limit per user, per action, or per user *and* action, choose the key: a composite key
/// such as `(user_id, action)` gives each pair its own bucket. The algorithm is GCRA unless
/// the builder chooses another ([`KeyedRateLimiterBuilder::algorithm`]).
///
/// ```
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// // 2 requests per second per (user, action) pair.
/// let limiter: KeyedRateLimiter<(u64, &'static str)> =
///     KeyedRateLimiter::new(Quota::per_second(2).unwrap());
/// assert!(limiter.try_acquire(&(7, "upload")));
/// assert!(limiter.try_acquire(&(7, "upload")));
/// assert!(!limiter.try_acquire(&(7, "upload"))); // user 7's uploads are used up
/// assert!(limiter.try_acquire(&(7, "search")));  // other actions have their own bucket
/// assert!(limiter.try_acquire(&(8, "upload")));  // and so do other users
///
/// // String keys, looked up by &str.
/// let per_ip: KeyedRateLimiter<String> = KeyedRateLimiter::new(Quota::per_minute(60).unwrap());
/// assert!(per_ip.try_acquire("192.0.2.1"));
/// ```
///
/// Memory: without a [`sweep_interval`](KeyedRateLimiterBuilder::sweep_interval) or a
/// [`max_keys`](KeyedRateLimiterBuilder::max_keys) cap, keys are only removed by
/// [`sweep_now`](KeyedRateLimiter::sweep_now). A key idle long enough to decide like a new
/// one (for GCRA: back at a full bucket) carries no information, so removing it is lossless.
pub struct KeyedRateLimiter<K, A = Gcra, S = DefaultKeyHasher>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    // Dropped first: stops the background sweeper before the store goes.
    sweeper: Option<Sweeper>,
    inner: Arc<KeyedEngine<K, A, S>>,
}

impl<K> KeyedRateLimiter<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    /// A GCRA keyed limiter for `quota` per key, with the default clock, hasher and shard
    /// count, no background sweeper and no key cap.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let limiter = KeyedRateLimiter::<u64>::new(Quota::per_second(1).unwrap());
    /// assert!(limiter.try_acquire(&1));
    /// assert!(!limiter.try_acquire(&1));
    /// assert!(limiter.try_acquire(&2));
    /// ```
    pub fn new(quota: Quota) -> Self {
        Self::builder(quota).build()
    }

    /// A builder: clock, algorithm, hasher, shards, sweeper, key cap.
    ///
    /// ```
    /// let b = tollgate::KeyedRateLimiter::<u8>::builder(tollgate::Quota::per_second(1).unwrap());
    /// assert!(b.build().try_acquire(&0));
    /// ```
    pub fn builder(quota: Quota) -> KeyedRateLimiterBuilder<K> {
        KeyedRateLimiterBuilder::new(quota)
    }
}

impl<K, A, S> KeyedRateLimiter<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    #[inline(always)]
    fn slot<'a, Q>(&'a self, key: &'a Q) -> KeySlot<'a, K, Q, A, S>
    where
        Q: ?Sized,
    {
        KeySlot {
            keyed: &self.inner,
            key,
        }
    }

    fn engine(&self) -> &Engine<A> {
        &self.inner.engine
    }

    /// The name given with the builder's [`name`](KeyedRateLimiterBuilder::name), if any.
    ///
    /// ```
    /// let limiter = tollgate::KeyedRateLimiter::<u64>::new(tollgate::Quota::per_second(1).unwrap());
    /// assert_eq!(limiter.name(), None);
    /// ```
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.engine().meter.name()
    }

    /// The quota in force for every key (per-call quotas aside).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_hour(5).unwrap());
    /// assert_eq!(l.quota().burst(), 5);
    /// ```
    pub fn quota(&self) -> Quota {
        self.engine().quota()
    }

    /// Replaces the quota for every key at runtime. As for
    /// [`RateLimiter::set_quota`](crate::RateLimiter::set_quota), permits already taken count
    /// against the new quota (GCRA keeps each key's debt in permits). Every tracked key is
    /// brought up to the new quota before this returns (one shard at a time under its read
    /// lock; decisions go on meanwhile), so it costs a walk over the table.
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] if the algorithm cannot run `quota`; nothing changes then.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(l.try_acquire_n(&0, 10).is_ok());
    /// l.set_quota(Quota::per_hour(10).unwrap()).unwrap();
    /// assert!(!l.try_acquire(&0));                   // 10 permits of debt: an hour now
    /// assert!(l.try_acquire(&1));                    // a new key has the new burst
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaError> {
        // The new parameters can turn keys cold earlier than the key cap's lower bound on cold
        // times says: forget it before they are in force, not only after the migration, so no
        // new key at the cap is refused meanwhile with a cold key left unswept.
        self.inner.store.forget_cold_bound();
        self.engine()
            .set_quota(quota, |migrate| self.inner.store.for_each_cell(migrate))
    }

    /// Takes one permit for `key` if available now. Never waits.
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(1).unwrap());
    /// assert!(l.try_acquire("alice"));
    /// assert!(!l.try_acquire("alice"));
    /// assert!(l.try_acquire("bob"));
    /// ```
    #[inline]
    #[must_use = "a permit may have been denied"]
    pub fn try_acquire<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().try_acquire(&self.slot(key))
    }

    /// Takes `n` permits for `key` at once if available now. Never waits.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait after which it would succeed;
    /// [`AcquireError::KeyCapReached`] with the cap's suggested wait for a new key at a full
    /// key cap with [`WhenFull::Deny`] (the table's capacity, not the key's rate);
    /// [`AcquireError::ExceedsBurst`] if `n` is larger than the burst. `n = 0` always succeeds.
    ///
    /// ```
    /// use tollgate::{AcquireError, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<&str>::new(Quota::per_second(10).unwrap());
    /// assert!(l.try_acquire_n(&"k", 10).is_ok());
    /// assert!(matches!(l.try_acquire_n(&"k", 1), Err(AcquireError::RateLimited { .. })));
    /// assert!(matches!(l.try_acquire_n(&"k", 11), Err(AcquireError::ExceedsBurst { .. })));
    /// ```
    #[inline]
    pub fn try_acquire_n<Q>(&self, key: &Q, n: u64) -> Result<(), AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().try_acquire_n(&self.slot(key), n)
    }

    /// Tries one permit for `key` and reports everything about the decision.
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(3).unwrap());
    /// let d = l.check(&1);
    /// assert!(d.allowed);
    /// assert_eq!((d.limit, d.remaining), (3, 2));
    /// ```
    #[inline]
    #[must_use = "the decision says whether the permit was granted"]
    pub fn check<Q>(&self, key: &Q) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().check(&self.slot(key))
    }

    /// Tries `n` permits for `key` and reports everything about the decision; `n = 0` is
    /// [`peek`](KeyedRateLimiter::peek).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(3).unwrap());
    /// assert_eq!(l.check_n(&1, 3).remaining, 0);
    /// assert!(!l.check_n(&1, 1).allowed);
    /// ```
    #[inline]
    #[must_use = "the decision says whether the permits were granted"]
    pub fn check_n<Q>(&self, key: &Q, n: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().check_n(&self.slot(key), n)
    }

    /// Like [`check`](KeyedRateLimiter::check) under `quota` for this call only: one permit;
    /// see [`check_n_with`](KeyedRateLimiter::check_n_with).
    ///
    /// # Errors
    /// As [`check_n_with`](KeyedRateLimiter::check_n_with).
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota, QuotaError};
    /// let l = KeyedRateLimiter::<&str>::new(Quota::per_second(1)?);
    /// let pro = Quota::per_second(10)?;
    /// assert!(l.check_with(&"pro-user", pro)?.allowed);
    /// # Ok::<(), QuotaError>(())
    /// ```
    #[inline]
    pub fn check_with<Q>(&self, key: &Q, quota: Quota) -> Result<Decision, QuotaError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n_with(key, 1, quota)
    }

    /// Like [`check_n`](KeyedRateLimiter::check_n) under `quota` for this call only, the
    /// redis-cell style where the limit travels with the request (say, per customer plan).
    /// The key's state is shared with every other call on it. GCRA takes the call's interval
    /// and burst; the window algorithms take its count as the limit, on the limiter's windows.
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
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota, QuotaError, SlidingLog};
    /// let l = KeyedRateLimiter::<&str>::builder(Quota::per_second(1)?)
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let free = Quota::per_second(1)?;
    /// let pro = Quota::per_second(10)?;
    /// assert!(l.check_n_with(&"free-user", 1, free)?.allowed);
    /// assert!(!l.check_n_with(&"free-user", 1, free)?.allowed);
    /// assert!(l.check_n_with(&"pro-user", 10, pro)?.allowed);
    ///
    /// // A burst means nothing to a window: refused, not read as the count.
    /// let log = KeyedRateLimiter::<&str>::builder(Quota::per_second(10)?)
    ///     .algorithm(SlidingLog)?
    ///     .build();
    /// let bursty = Quota::per_second(10)?.with_burst(3)?;
    /// assert!(matches!(log.check_n_with(&"k", 1, bursty), Err(QuotaError::Unsupported(_))));
    /// # Ok::<(), QuotaError>(())
    /// ```
    #[inline]
    pub fn check_n_with<Q>(&self, key: &Q, n: u64, quota: Quota) -> Result<Decision, QuotaError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().check_n_with(&self.slot(key), n, &quota)
    }

    /// The key's state right now, taking nothing and storing nothing (an unknown key reports
    /// a fresh one; at a full key cap that would refuse it, the refusal a check would get).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(4).unwrap());
    /// assert_eq!(l.peek("new").remaining, 4);
    /// assert!(l.is_empty());
    /// ```
    #[must_use]
    pub fn peek<Q>(&self, key: &Q) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().peek(&self.slot(key))
    }

    /// Whether `key` is tracked (it has state a fresh key would not, and was not swept yet).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(4).unwrap());
    /// assert!(!l.contains_key("a"));
    /// assert!(l.try_acquire("a"));
    /// assert!(l.contains_key("a"));
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.store.map.contains_key(key)
    }

    /// Takes one permit for `key`, blocking until it is available; returns the time waited.
    ///
    /// # Errors
    /// As [`acquire_n`](KeyedRateLimiter::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert_eq!(l.acquire(&1), Ok(Duration::ZERO));
    /// assert_eq!(l.acquire(&1), Ok(Duration::from_millis(100)));
    /// ```
    pub fn acquire<Q>(&self, key: &Q) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.acquire_n(key, 1)
    }

    /// Takes `n` permits for `key`, blocking until they are available; returns the time
    /// waited (`n = 0`: `Ok(Duration::ZERO)` at once). With GCRA, `n` above the burst waits
    /// `(n - burst) * T` from a full bucket. At a full key cap with [`WhenFull::Deny`] a new
    /// key waits until the earliest tracked key turns cold (one sleep, judged from the keys as
    /// they are) and tries again; what a fresh key would refuse is refused at once, before any
    /// sleep (the guide's [Per-key limits](crate::guide::keyed), "Key cap").
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] if the wait does not fit in the limiter's time;
    /// [`AcquireError::ExceedsBurst`] for window algorithms when `n` exceeds their limit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert_eq!(l.acquire_n(&1, 15).unwrap(), Duration::from_millis(500));
    /// ```
    pub fn acquire_n<Q>(&self, key: &Q, n: u64) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().acquire(&self.slot(key), n, None)
    }

    /// Takes one permit for `key` if it is available within `timeout`, blocking at most that
    /// long; see [`try_acquire_n_for`](KeyedRateLimiter::try_acquire_n_for).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](KeyedRateLimiter::try_acquire_n_for).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert_eq!(l.try_acquire_for(&1, Duration::ZERO), Ok(Duration::ZERO));
    /// assert!(l.try_acquire_for(&1, Duration::from_millis(50)).is_err()); // needs 100 ms
    /// ```
    pub fn try_acquire_for<Q>(&self, key: &Q, timeout: Duration) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_n_for(key, 1, timeout)
    }

    /// Takes `n` permits for `key` if they are available within `timeout`, blocking at most
    /// that long; otherwise takes nothing and returns at once. `n = 0` succeeds at once.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed;
    /// [`AcquireError::KeyCapReached`] for a new key at a full key cap with
    /// [`WhenFull::Deny`] whose wait passes the timeout: until the earliest key turns cold
    /// (judged from the keys as they are now) plus the new key's own wait from a fresh state.
    /// Others as for [`acquire_n`](KeyedRateLimiter::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// l.acquire(&1).unwrap();
    /// assert!(l.try_acquire_n_for(&1, 1, Duration::from_millis(50)).is_err());
    /// assert_eq!(l.try_acquire_n_for(&1, 1, Duration::from_millis(100)).unwrap(), Duration::from_millis(100));
    /// ```
    pub fn try_acquire_n_for<Q>(
        &self,
        key: &Q,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine().acquire(&self.slot(key), n, Some(timeout))
    }

    /// Evicts every cold key now, one part of one shard at a time; returns how many.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(1).unwrap())
    ///     .clock(clock.clone())
    ///     .build();
    /// assert!(l.try_acquire(&1));
    /// assert_eq!(l.sweep_now(), 0); // still owes 1 s
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(l.sweep_now(), 1);
    /// assert!(l.is_empty());
    /// ```
    pub fn sweep_now(&self) -> usize {
        self.inner.sweep_all(&|| false)
    }

    /// Number of tracked keys (O(1); exact when no insert or sweep is in flight).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(1).unwrap());
    /// assert!(l.try_acquire(&1) && l.try_acquire(&2));
    /// assert_eq!(l.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.inner.store.len()
    }

    /// Whether no key is tracked.
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(1).unwrap());
    /// assert!(l.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on tracked keys set with
    /// [`max_keys`](KeyedRateLimiterBuilder::max_keys), or `None` without one.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let q = Quota::per_second(1).unwrap();
    /// assert_eq!(KeyedRateLimiter::<u8>::new(q).max_keys(), None);
    /// let cap = NonZeroUsize::new(100).unwrap();
    /// assert_eq!(KeyedRateLimiter::<u8>::builder(q).max_keys(cap).build().max_keys(), Some(cap));
    /// ```
    #[must_use]
    pub fn max_keys(&self) -> Option<NonZeroUsize> {
        self.inner.store.key_cap()
    }

    /// Releases table memory left over from evicted keys (tables do not shrink by themselves).
    /// Locks each shard in turn.
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(1).unwrap());
    /// l.shrink_to_fit();
    /// ```
    pub fn shrink_to_fit(&self) {
        self.inner.store.map.shrink_to_fit();
    }

    /// Sweeper statistics: keys tracked, sweeps run, keys evicted, last sweep duration.
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(1).unwrap());
    /// l.sweep_now();
    /// let s = l.stats();
    /// assert_eq!((s.keys, s.sweeps, s.evicted), (0, 1, 0));
    /// ```
    pub fn stats(&self) -> SweepStats {
        self.inner.store.stats()
    }
}

impl<K, S> KeyedRateLimiter<K, Gcra, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// redis-cell's `CL.THROTTLE key max_burst count period quantity` on `key`'s state: burst
    /// `max_burst + 1`, `count` per `period_secs` seconds, cost `quantity`, for this call only.
    ///
    /// # Errors
    /// The [`QuotaError`] for an invalid quota, the same errors [`Quota::new`] gives.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<&str>::builder(Quota::per_second(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// // CL.THROTTLE user123 15 30 60 1
    /// assert_eq!(l.throttle(&"user123", 15, 30, 60, 1).unwrap().to_array(), [0, 16, 15, -1, 2]);
    /// ```
    pub fn throttle<Q>(
        &self,
        key: &Q,
        max_burst: u64,
        count: u64,
        period_secs: u64,
        quantity: u64,
    ) -> Result<ThrottleReply, QuotaError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let quota = Quota::from_throttle(max_burst, count, period_secs)?;
        Ok(ThrottleReply::from_decision(
            &self.check_n_with(key, quantity, quota)?,
        ))
    }

    /// Reserves one permit for `key` now; see [`reserve_n`](KeyedRateLimiter::reserve_n).
    ///
    /// # Errors
    /// As [`reserve_n`](KeyedRateLimiter::reserve_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(2).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(l.reserve(&1).unwrap().delay().is_zero());
    /// assert_eq!(l.reserve(&1).unwrap().delay(), Duration::from_millis(500));
    /// ```
    pub fn reserve<Q>(&self, key: &Q) -> Result<Reservation<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.reserve_n(key, 1)
    }

    /// Reserves `n` permits for `key` now, in arrival order, without waiting. The reservation
    /// owns a copy of the key (so `reserve_n(&format!("user:{id}"), 1)` works and the
    /// reservation can outlive the key it was made with); cancelling looks the key up again.
    /// `n = 0` reserves nothing and is ready at once.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] as for [`acquire_n`](KeyedRateLimiter::acquire_n);
    /// [`AcquireError::KeyCapReached`] only for a new key at a full key cap with
    /// [`WhenFull::Deny`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<String>::builder(Quota::per_second(2).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let r = l.reserve_n(&format!("user:{}", 7), 4).unwrap();
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// r.cancel();
    /// assert!(l.try_acquire_n("user:7", 2).is_ok());
    /// ```
    pub fn reserve_n<Q>(&self, key: &Q, n: u64) -> Result<Reservation<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.reserve_upto(key, n, None)
    }

    /// Reserves one permit for `key` only if it is ready within `max_wait`; see
    /// [`try_reserve_n_for`](KeyedRateLimiter::try_reserve_n_for).
    ///
    /// # Errors
    /// As [`try_reserve_n_for`](KeyedRateLimiter::try_reserve_n_for).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(l.try_reserve_for(&1, Duration::ZERO).is_ok());
    /// assert!(l.try_reserve_for(&1, Duration::ZERO).is_err());
    /// ```
    pub fn try_reserve_for<Q>(
        &self,
        key: &Q,
        max_wait: Duration,
    ) -> Result<Reservation<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_reserve_n_for(key, 1, max_wait)
    }

    /// Reserves `n` permits for `key` only if they are ready within `max_wait`, without
    /// sleeping; `Duration::ZERO` reserves only what is available now (see
    /// [`all_or_none`](crate::all_or_none)).
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed (nothing is
    /// reserved); others as for [`reserve_n`](KeyedRateLimiter::reserve_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(l.try_reserve_n_for(&1, 1, Duration::ZERO).is_ok());
    /// assert!(l.try_reserve_n_for(&1, 1, Duration::ZERO).is_err());
    /// ```
    pub fn try_reserve_n_for<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.reserve_upto(key, n, Some(duration_to_nanos(max_wait)))
    }

    fn reserve_upto<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Option<Nanos>,
    ) -> Result<Reservation<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let r = self.book_upto(key, n, max_wait);
        self.engine().meter.decided_result(&r, n);
        r
    }

    fn book_upto<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Option<Nanos>,
    ) -> Result<Reservation<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let engine = self.engine();
        let src = engine.src();
        let placed = engine.decide(&self.slot(key), |cell, now| {
            (cell.reserve(now, n, &src, max_wait), now)
        });
        let (booking, now, tracked) = match placed {
            Placed::Tracked((b, now)) => (b?, now, true),
            Placed::Untracked((b, now)) => (b?, now, false),
            Placed::Full(wait) => return Err(crate::engine::full_error(wait)),
        };
        let ticket = match booking {
            Booking::Booked { ticket, .. } => ticket,
            Booking::Now | Booking::Retry(_) => Ticket::nothing(now),
        };
        // An untracked booking stored nothing: a refund would land on whatever state the key
        // has later, so it gives back nothing.
        let owned: Option<K> = tracked.then(|| key.to_owned());
        let cancel = Box::new(move |t: &Ticket| {
            if let Some(key) = &owned {
                self.engine().cancel(&self.slot(key), t);
            }
        });
        Ok(Reservation::new(ticket, now, &engine.clock, cancel))
    }
}

impl<K, A, S> fmt::Debug for KeyedRateLimiter<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("algorithm", &self.engine().alg)
            .field("quota", &self.quota())
            .field("keys", &self.len())
            .field("clock", &self.engine().clock)
            .field("sweeper", &self.sweeper.is_some())
            .finish()
    }
}

#[cfg(feature = "tokio")]
impl<K, A, S> KeyedRateLimiter<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Takes one permit for `key`, waiting asynchronously; see
    /// [`acquire_n_async`](KeyedRateLimiter::acquire_n_async).
    ///
    /// The future borrows the limiter and the key. For a `'static` future (to move into
    /// `tokio::spawn`), await it inside an `async move` block that owns an `Arc` of the
    /// limiter and the key:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let l = Arc::new(tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(10).unwrap()));
    /// let (limiter, key) = (l.clone(), "k".to_string());
    /// let task = tokio::spawn(async move { limiter.acquire_async(&key).await });
    /// assert!(task.await.unwrap().is_ok());
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](KeyedRateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// As [`acquire_n`](KeyedRateLimiter::acquire_n).
    ///
    /// # Panics
    /// If it must wait outside a tokio runtime or on one built without the timer: tokio's own
    /// `sleep` panics there.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(100).unwrap());
    /// assert!(l.acquire_async("k").await.unwrap().is_zero());
    /// # }
    /// ```
    pub async fn acquire_async<Q>(&self, key: &Q) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        self.acquire_n_async(key, 1).await
    }

    /// Takes `n` permits for `key`, waiting asynchronously on tokio's timer; returns the time
    /// waited. With GCRA slots are booked at the first poll, so waiters are granted in that
    /// order, each woken once. At a full key cap with [`WhenFull::Deny`] a new key waits as
    /// [`acquire_n`](KeyedRateLimiter::acquire_n) does: until the earliest tracked key turns
    /// cold (one wake-up), refusing at once what a fresh key would refuse.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future before it completes cancels its booking, in any
    /// order relative to other waiters, so no capacity is lost.
    ///
    /// # Errors
    /// As [`acquire_n`](KeyedRateLimiter::acquire_n).
    ///
    /// # Panics
    /// As [`acquire_async`](KeyedRateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(100).unwrap());
    /// assert!(l.acquire_n_async("k", 5).await.unwrap().is_zero());
    /// # }
    /// ```
    pub async fn acquire_n_async<Q>(&self, key: &Q, n: u64) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        self.engine().acquire_async(&self.slot(key), n, None).await
    }

    /// Takes one permit for `key` if available within `timeout`, waiting asynchronously; see
    /// [`try_acquire_n_for_async`](KeyedRateLimiter::try_acquire_n_for_async).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](KeyedRateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](KeyedRateLimiter::try_acquire_n_for).
    ///
    /// # Panics
    /// As [`acquire_async`](KeyedRateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_minute(1).unwrap());
    /// assert!(l.try_acquire_for_async(&1, Duration::ZERO).await.is_ok());
    /// assert!(l.try_acquire_for_async(&1, Duration::from_millis(10)).await.is_err());
    /// # }
    /// ```
    pub async fn try_acquire_for_async<Q>(
        &self,
        key: &Q,
        timeout: Duration,
    ) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        self.try_acquire_n_for_async(key, 1, timeout).await
    }

    /// Takes `n` permits for `key` if available within `timeout`, waiting asynchronously;
    /// otherwise returns at once with nothing taken.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](KeyedRateLimiter::acquire_n_async).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](KeyedRateLimiter::try_acquire_n_for).
    ///
    /// # Panics
    /// As [`acquire_async`](KeyedRateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_minute(1).unwrap());
    /// l.acquire_async(&1).await.unwrap();
    /// assert!(l.try_acquire_n_for_async(&1, 1, Duration::from_millis(10)).await.is_err());
    /// # }
    /// ```
    pub async fn try_acquire_n_for_async<Q>(
        &self,
        key: &Q,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        self.engine()
            .acquire_async(&self.slot(key), n, Some(timeout))
            .await
    }

    /// One permit; see [`check_n_for_async`](KeyedRateLimiter::check_n_for_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_minute(1).unwrap());
    /// assert!(l.check_for_async(&1, Duration::ZERO).await.allowed);
    /// assert!(!l.check_for_async(&1, Duration::from_millis(10)).await.allowed);
    /// # }
    /// ```
    pub async fn check_for_async<Q>(&self, key: &Q, timeout: Duration) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        self.check_n_for_async(key, 1, timeout).await
    }

    /// A check that may wait up to `timeout`: takes `n` permits for `key` as
    /// [`try_acquire_n_for_async`](KeyedRateLimiter::try_acquire_n_for_async) does, and
    /// reports the outcome as a [`Decision`] (what rate-limit headers need, without a second
    /// look): granted, `allowed` with the key's state as the grant left it; not grantable
    /// within `timeout`, denied with the wait needed as `retry_after` (nothing taken); never
    /// grantable within `timeout` (more than the burst, or past the end of the limiter's
    /// time), denied with no `retry_after`. `n = 0` is granted at once. What the HTTP layer's
    /// shaping (`Backend::check_n_for_async`) runs.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](KeyedRateLimiter::acquire_n_async).
    ///
    /// # Panics
    /// As [`acquire_async`](KeyedRateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_minute(2).unwrap());
    /// let d = l.check_n_for_async(&1, 2, Duration::ZERO).await;
    /// assert!(d.allowed && d.remaining == 0);
    /// let d = l.check_n_for_async(&1, 1, Duration::from_millis(10)).await;
    /// assert!(!d.allowed && d.retry_after.unwrap() > Duration::from_secs(29));
    /// assert!(l.check_n_for_async(&1, 3, Duration::from_millis(10)).await.exceeds_burst());
    /// # }
    /// ```
    pub async fn check_n_for_async<Q>(&self, key: &Q, n: u64, timeout: Duration) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        self.engine()
            .check_n_for_async(&self.slot(key), n, timeout)
            .await
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
