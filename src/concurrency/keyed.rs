//! [`KeyedConcurrencyLimiter`]: one concurrency limit per key.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use crate::concurrency::error::{check_limit, ConcurrencyError};
use crate::concurrency::permit::{Held, OwnedPermit, Permit};
use crate::concurrency::report;
use crate::concurrency::sem_store::SemStore;
use crate::concurrency::wait;
use crate::decision::AcquireError;
use crate::store::evict::SweepStats;
use crate::store::settings::DefaultKeyHasher;
use crate::store::sweeper::{Sweep, Sweeper};

mod builder;

pub use builder::KeyedConcurrencyLimiterBuilder;

/// At most `limit` permits in flight per key (user, tenant, `(user, action)`): a
/// [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) for every key, in a sharded map, with
/// the same methods taking the key first and the same guarantees per key (FIFO waiters, one
/// wake-up each, no starvation of large requests, cancel-safe waits, a lock-free
/// uncontended path: a shard read lock and one CAS to acquire, one CAS to release).
///
/// A key with nothing in flight and nobody waiting carries no information: the background
/// sweeper ([`sweep_interval`](KeyedConcurrencyLimiterBuilder::sweep_interval)),
/// [`sweep_now`](Self::sweep_now) and a new key at the exact
/// [`max_keys`](KeyedConcurrencyLimiterBuilder::max_keys) cap evict it, exactly as the
/// keyed rate limiter evicts cold keys. Keys holding permits or waited on are never evicted.
///
/// ```
/// use tollgate::KeyedConcurrencyLimiter;
///
/// let exports = KeyedConcurrencyLimiter::<String>::new(2).unwrap(); // 2 exports per user
/// let a = exports.try_acquire("alice").unwrap();
/// let b = exports.try_acquire("alice").unwrap();
/// assert!(exports.try_acquire("alice").is_none());
/// assert!(exports.try_acquire("bob").is_some()); // another key, its own limit
/// drop(a);
/// assert_eq!(exports.in_flight("alice"), 1);
/// # drop(b);
/// ```
pub struct KeyedConcurrencyLimiter<K, S = DefaultKeyHasher>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    // Dropped first: stops the background sweeper before the store goes.
    sweeper: Option<Sweeper>,
    store: Arc<SemStore<K, S>>,
}

impl<K> KeyedConcurrencyLimiter<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    /// A limiter granting at most `limit` permits at once per key, with the builder's
    /// defaults (no sweeper, no key cap).
    ///
    /// # Errors
    /// As [`ConcurrencyLimiter::new`](crate::ConcurrencyLimiter::new).
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::new(3)?;
    /// assert_eq!(l.limit(), 3);
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn new(limit: u64) -> Result<Self, ConcurrencyError> {
        Ok(Self::builder(limit)?.build())
    }

    /// Configures a limiter of `limit` permits per key: the keyed rate limiter's vocabulary
    /// (`max_keys` / `no_key_cap`, `when_full`, `sweep_interval` / `no_sweeper`, `hasher`,
    /// `shards`), then `build()`.
    ///
    /// # Errors
    /// As [`ConcurrencyLimiter::new`](crate::ConcurrencyLimiter::new): the limit is checked
    /// here, so `build` cannot fail.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use std::time::Duration;
    /// let l = tollgate::KeyedConcurrencyLimiter::<String>::builder(2)?
    ///     .max_keys(NonZeroUsize::new(100_000).unwrap())
    ///     .sweep_interval(Duration::from_secs(30))
    ///     .build();
    /// assert!(l.try_acquire("tenant-1").is_some());
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn builder(limit: u64) -> Result<KeyedConcurrencyLimiterBuilder<K>, ConcurrencyError> {
        KeyedConcurrencyLimiterBuilder::new(limit)
    }
}

impl<K, S> KeyedConcurrencyLimiter<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// One permit for `key` now, or `None` if none is free (or waiters queued first).
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap();
    /// let p = l.try_acquire(&7);
    /// assert!(p.is_some() && l.try_acquire(&7).is_none());
    /// ```
    #[inline]
    #[must_use = "the permit is given back as soon as it is dropped"]
    pub fn try_acquire<Q>(&self, key: &Q) -> Option<Permit<'_>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_n(key, 1).ok()
    }

    /// `n` permits for `key` now, or the refusal. `n = 0` is an empty permit (and tracks
    /// nothing).
    ///
    /// # Errors
    /// [`AcquireError::ExceedsBurst`] if `n` is above the limit; [`AcquireError::AtCapacity`]
    /// if they are not free now; [`AcquireError::KeyCapReached`] (`retry_after: None`) if the
    /// key is new and the full key cap refuses it ([`WhenFull::Deny`](crate::WhenFull::Deny)).
    ///
    /// ```
    /// use tollgate::{AcquireError, KeyedConcurrencyLimiter};
    /// let l = KeyedConcurrencyLimiter::<u32>::new(2).unwrap();
    /// let held = l.try_acquire_n(&1, 2)?;
    /// assert!(matches!(l.try_acquire_n(&1, 1), Err(AcquireError::AtCapacity { .. })));
    /// # drop(held);
    /// # Ok::<(), AcquireError>(())
    /// ```
    #[inline]
    pub fn try_acquire_n<Q>(&self, key: &Q, n: u64) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.now(key, n).map(Permit::new)
    }

    /// One permit for `key`, blocking the thread until it is granted.
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap();
    /// let p = l.acquire(&1).unwrap();
    /// # drop(p);
    /// ```
    pub fn acquire<Q>(&self, key: &Q) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.acquire_n(key, 1)
    }

    /// `n` permits for `key`, blocking the thread until granted (FIFO per key).
    ///
    /// # Errors
    /// [`AcquireError::ExceedsBurst`] at once if `n` is above the limit (it never waits for
    /// what can never be granted); [`AcquireError::KeyCapReached`] at once for a new key the
    /// key cap refuses ([`WhenFull::Deny`](crate::WhenFull::Deny)): a table full of busy keys
    /// has no wake-up to wait for.
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(2).unwrap();
    /// std::thread::scope(|s| {
    ///     let held = l.acquire_n(&1, 2).unwrap();
    ///     s.spawn(|| l.acquire_n(&1, 1).map(drop)); // waits for `held`
    ///     drop(held);
    /// });
    /// ```
    pub fn acquire_n<Q>(&self, key: &Q, n: u64) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.start_wait(key, n, None).block().map(Permit::new)
    }

    /// One permit for `key`, blocking at most `timeout`.
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](Self::try_acquire_n_for).
    ///
    /// ```
    /// use std::time::Duration;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap();
    /// let held = l.try_acquire_for(&1, Duration::from_millis(10)).unwrap();
    /// assert!(l.try_acquire_for(&1, Duration::from_millis(1)).is_err());
    /// # drop(held);
    /// ```
    pub fn try_acquire_for<Q>(&self, key: &Q, timeout: Duration) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_n_for(key, 1, timeout)
    }

    /// `n` permits for `key`, blocking at most `timeout` (FIFO per key).
    ///
    /// # Errors
    /// [`AcquireError::AtCapacity`] when the timeout passed first; otherwise as
    /// [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(2).unwrap();
    /// assert_eq!(l.try_acquire_n_for(&1, 2, Duration::from_millis(1)).unwrap().n(), 2);
    /// ```
    pub fn try_acquire_n_for<Q>(
        &self,
        key: &Q,
        n: u64,
        timeout: Duration,
    ) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.start_wait(key, n, Some(timeout))
            .block()
            .map(Permit::new)
    }

    /// One permit for `key`, awaited (FIFO, cancel-safe).
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap();
    /// let p = l.acquire_async(&1).await.unwrap();
    /// # drop(p);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_async<Q>(&self, key: &Q) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.acquire_n_async(key, 1).await
    }

    /// `n` permits for `key`, awaited in FIFO order. Cancel-safe: dropping the future gives
    /// its place up, or, if it was served meanwhile, passes the permits on.
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(2).unwrap();
    /// assert_eq!(l.acquire_n_async(&1, 2).await.unwrap().n(), 2);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_n_async<Q>(&self, key: &Q, n: u64) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.start_wait(key, n, None)
            .wait_async()
            .await
            .map(Permit::new)
    }

    /// One permit for `key`, awaited at most `timeout` (tokio's timer).
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](Self::try_acquire_n_for).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap();
    /// let held = l.try_acquire(&1).unwrap();
    /// assert!(l.try_acquire_for_async(&1, Duration::from_millis(1)).await.is_err());
    /// # drop(held);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn try_acquire_for_async<Q>(
        &self,
        key: &Q,
        timeout: Duration,
    ) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_n_for_async(key, 1, timeout).await
    }

    /// `n` permits for `key`, awaited at most `timeout` (tokio's timer), FIFO, cancel-safe.
    ///
    /// # Errors
    /// As [`try_acquire_n_for`](Self::try_acquire_n_for).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(2).unwrap();
    /// let p = l.try_acquire_n_for_async(&1, 2, Duration::from_secs(1)).await.unwrap();
    /// assert_eq!(p.n(), 2);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn try_acquire_n_for_async<Q>(
        &self,
        key: &Q,
        n: u64,
        timeout: Duration,
    ) -> Result<Permit<'_>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.start_wait(key, n, Some(timeout))
            .wait_async()
            .await
            .map(Permit::new)
    }

    /// [`try_acquire`](Self::try_acquire), as an [`OwnedPermit`] (`'static`) that keeps the
    /// limiter alive.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let l = Arc::new(tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap());
    /// let p = l.try_acquire_owned(&1).unwrap();
    /// std::thread::spawn(move || drop(p)).join().unwrap();
    /// assert_eq!(l.in_flight(&1), 0);
    /// ```
    #[must_use = "the permit is given back as soon as it is dropped"]
    pub fn try_acquire_owned<Q>(self: &Arc<Self>, key: &Q) -> Option<OwnedPermit>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.try_acquire_n_owned(key, 1).ok()
    }

    /// [`try_acquire_n`](Self::try_acquire_n), as an [`OwnedPermit`].
    ///
    /// # Errors
    /// As [`try_acquire_n`](Self::try_acquire_n).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let l = Arc::new(tollgate::KeyedConcurrencyLimiter::<u32>::new(3).unwrap());
    /// assert_eq!(l.try_acquire_n_owned(&1, 3).unwrap().n(), 3);
    /// ```
    pub fn try_acquire_n_owned<Q>(
        self: &Arc<Self>,
        key: &Q,
        n: u64,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.now(key, n).map(|h| self.own(h))
    }

    /// [`acquire_async`](Self::acquire_async), as an [`OwnedPermit`].
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let l = Arc::new(tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap());
    /// let p = l.acquire_owned_async(&1).await.unwrap();
    /// tokio::spawn(async move { drop(p) }).await.unwrap();
    /// assert_eq!(l.in_flight(&1), 0);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_owned_async<Q>(
        self: &Arc<Self>,
        key: &Q,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.acquire_n_owned_async(key, 1).await
    }

    /// [`acquire_n_async`](Self::acquire_n_async), as an [`OwnedPermit`].
    ///
    /// # Errors
    /// As [`acquire_n`](Self::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let l = Arc::new(tollgate::KeyedConcurrencyLimiter::<u32>::new(2).unwrap());
    /// assert_eq!(l.acquire_n_owned_async(&1, 2).await.unwrap().n(), 2);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn acquire_n_owned_async<Q>(
        self: &Arc<Self>,
        key: &Q,
        n: u64,
    ) -> Result<OwnedPermit, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let held = self.start_wait(key, n, None).wait_async().await?;
        Ok(self.own(held))
    }

    /// Permits held for `key` now (0 for a key not tracked).
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(3).unwrap();
    /// let _p = l.try_acquire_n(&1, 2).unwrap();
    /// assert_eq!((l.in_flight(&1), l.in_flight(&2)), (2, 0));
    /// ```
    pub fn in_flight<Q>(&self, key: &Q) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        u64::from(self.store.in_flight(key))
    }

    /// The name given to [`KeyedConcurrencyLimiterBuilder::name`], if any.
    ///
    /// ```
    /// assert_eq!(tollgate::KeyedConcurrencyLimiter::<u32>::new(1).unwrap().name(), None);
    /// ```
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.store.meter.name()
    }

    /// The limit per key.
    ///
    /// ```
    /// assert_eq!(tollgate::KeyedConcurrencyLimiter::<u32>::new(3).unwrap().limit(), 3);
    /// ```
    pub fn limit(&self) -> u64 {
        u64::from(self.store.limit())
    }

    /// Changes the limit of every key live, as
    /// [`ConcurrencyLimiter::set_limit`](crate::ConcurrencyLimiter::set_limit) does for one:
    /// permits held stay held (lowering never revokes), raising it serves waiters at once, and
    /// a waiter asking for more than a lowered limit is refused with
    /// [`AcquireError::ExceedsBurst`]. Every tracked key has the new limit before this returns
    /// (one shard at a time under its read lock; acquires go on meanwhile), so it costs a walk
    /// over the table; a key tracked later starts with it.
    ///
    /// # Errors
    /// As [`new`](KeyedConcurrencyLimiter::new); the limit in force is then unchanged.
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<String>::new(3).unwrap();
    /// let held = l.try_acquire_n("alice", 3).unwrap();
    /// l.set_limit(1).unwrap();
    /// assert_eq!(l.in_flight("alice"), 3); // kept
    /// assert!(l.try_acquire("alice").is_none());
    /// drop(held);
    /// assert!(l.try_acquire("alice").is_some());
    /// assert!(l.try_acquire_n("bob", 2).is_err()); // a new key: the new limit
    /// assert!(l.set_limit(0).is_err());
    /// assert_eq!(l.limit(), 1);
    /// ```
    pub fn set_limit(&self, limit: u64) -> Result<(), ConcurrencyError> {
        self.store.set_limit(check_limit(limit)?);
        Ok(())
    }

    /// Number of tracked keys (O(1)): keys with permits in flight or waiters, and idle keys
    /// not yet swept.
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(3).unwrap();
    /// let _p = l.try_acquire(&1).unwrap();
    /// assert_eq!(l.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// The key cap set with the builder's
    /// [`max_keys`](crate::KeyedConcurrencyLimiterBuilder::max_keys), if any.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tollgate::KeyedConcurrencyLimiter;
    /// let l = KeyedConcurrencyLimiter::<u32>::builder(3).unwrap()
    ///     .max_keys(NonZeroUsize::new(1000).unwrap())
    ///     .build();
    /// assert_eq!(l.max_keys(), NonZeroUsize::new(1000));
    /// assert_eq!(KeyedConcurrencyLimiter::<u32>::new(3).unwrap().max_keys(), None);
    /// ```
    #[must_use]
    pub fn max_keys(&self) -> Option<NonZeroUsize> {
        self.store.max_keys()
    }

    /// Whether no key is tracked.
    ///
    /// ```
    /// assert!(tollgate::KeyedConcurrencyLimiter::<u32>::new(3).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Evicts every idle key now (nothing in flight, nobody waiting); returns how many.
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(3).unwrap();
    /// let kept = l.try_acquire(&1).unwrap();
    /// drop(l.try_acquire(&2).unwrap());
    /// assert_eq!((l.sweep_now(), l.len()), (1, 1));
    /// # drop(kept);
    /// ```
    pub fn sweep_now(&self) -> usize {
        self.store.sweep(&|| false)
    }

    /// What sweeping has done so far.
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u32>::new(3).unwrap();
    /// drop(l.try_acquire(&1));
    /// l.sweep_now();
    /// assert_eq!((l.stats().sweeps, l.stats().evicted), (1, 1));
    /// ```
    pub fn stats(&self) -> SweepStats {
        self.store.stats()
    }

    fn own(self: &Arc<Self>, held: Held) -> OwnedPermit {
        OwnedPermit::new(held, self.clone())
    }

    #[inline(always)]
    fn now<Q>(&self, key: &Q, n: u64) -> Result<Held, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        report::decided(&self.store.meter, self.store.try_now(key, n), n)
    }

    /// A waiting acquire on `key`, up to its wait; a cell evicted under it is decided again
    /// without waiting.
    fn start_wait<Q>(&self, key: &Q, n: u64, timeout: Option<Duration>) -> wait::Acquire<'_, '_>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let begin = |queue| self.store.begin(key, n, queue);
        wait::start(&self.store.meter, n, timeout, begin, || {
            self.store.try_now(key, n)
        })
    }
}

impl<K, S> fmt::Debug for KeyedConcurrencyLimiter<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedConcurrencyLimiter")
            .field("name", &self.name())
            .field("limit", &self.limit())
            .field("keys", &self.len())
            .field("sweeper", &self.sweeper.is_some())
            .finish()
    }
}
