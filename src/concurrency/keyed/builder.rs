//! [`KeyedConcurrencyLimiterBuilder`]: a keyed concurrency limiter's configuration (hasher,
//! shards, background sweeping, key cap), in the keyed rate limiter's vocabulary.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use super::KeyedConcurrencyLimiter;
use crate::concurrency::error::{check_limit, ConcurrencyError};
use crate::concurrency::sem_store::SemStore;
use crate::keyed::{DefaultKeyHasher, DEFAULT_SHARDS};
use crate::meter::Meter;
use crate::store::sweeper::Sweeper;
use crate::store::table::shard_count;
use crate::store::when_full::WhenFull;

/// Configures a [`KeyedConcurrencyLimiter`]: hasher, shards, background sweeping, key cap.
/// The same vocabulary as [`KeyedRateLimiterBuilder`](crate::KeyedRateLimiterBuilder).
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use tollgate::{KeyedConcurrencyLimiter, WhenFull};
///
/// let limiter = KeyedConcurrencyLimiter::<String>::builder(10)?
///     .sweep_interval(Duration::from_secs(30))       // evict idle keys in the background
///     .max_keys(NonZeroUsize::new(100_000).unwrap()) // hard cap on tracked keys
///     .when_full(WhenFull::Deny)
///     .build();
/// assert!(limiter.try_acquire("alice").is_some());
/// # Ok::<(), tollgate::ConcurrencyError>(())
/// ```
#[must_use = "call .build() to get a limiter"]
pub struct KeyedConcurrencyLimiterBuilder<K, S = DefaultKeyHasher> {
    limit: u32,
    hasher: S,
    shards: usize,
    sweep_interval: Option<Duration>,
    #[cfg(feature = "tokio")]
    sweep_on_tokio: bool,
    max_keys: Option<NonZeroUsize>,
    when_full: WhenFull,
    name: Option<Arc<str>>,
    _keys: PhantomData<fn() -> K>,
}

impl<K> KeyedConcurrencyLimiterBuilder<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    pub(super) fn new(limit: u64) -> Result<Self, ConcurrencyError> {
        Ok(KeyedConcurrencyLimiterBuilder {
            limit: check_limit(limit)?,
            hasher: DefaultKeyHasher::default(),
            shards: DEFAULT_SHARDS,
            sweep_interval: None,
            #[cfg(feature = "tokio")]
            sweep_on_tokio: false,
            max_keys: None,
            when_full: WhenFull::default(),
            name: None,
            _keys: PhantomData,
        })
    }
}

impl<K, S> KeyedConcurrencyLimiterBuilder<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Uses another hasher for keys (see [`DefaultKeyHasher`]).
    ///
    /// ```
    /// use std::collections::hash_map::RandomState;
    /// let l = tollgate::KeyedConcurrencyLimiter::<String>::builder(1)?
    ///     .hasher(RandomState::new())
    ///     .build();
    /// assert!(l.try_acquire("k").is_some());
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn hasher<S2>(self, hasher: S2) -> KeyedConcurrencyLimiterBuilder<K, S2>
    where
        S2: BuildHasher + Clone + Send + Sync + 'static,
    {
        KeyedConcurrencyLimiterBuilder {
            limit: self.limit,
            hasher,
            shards: self.shards,
            sweep_interval: self.sweep_interval,
            #[cfg(feature = "tokio")]
            sweep_on_tokio: self.sweep_on_tokio,
            max_keys: self.max_keys,
            when_full: self.when_full,
            name: self.name,
            _keys: PhantomData,
        }
    }

    /// Number of map shards (default [`DEFAULT_SHARDS`]), rounded up to a power of two and
    /// kept within `2..=65536`.
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?.shards(1000).build();
    /// assert!(l.try_acquire(&1).is_some());
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shard_count(shards);
        self
    }

    /// Evicts idle keys (nothing in flight, nobody waiting) in the background every
    /// `interval` (at least 1 ms). Default: no sweeper. The sweeper runs on its own thread
    /// (or a tokio task, see `sweep_on_tokio`), holds only a weak reference to the limiter
    /// and stops when the limiter is dropped.
    ///
    /// ```
    /// use std::time::Duration;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?
    ///     .sweep_interval(Duration::from_secs(60))
    ///     .build();
    /// drop(l); // the sweeper thread exits
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = Some(interval);
        self
    }

    /// No background sweeper (the default; undoes a `sweep_interval`): idle keys are evicted
    /// only by [`sweep_now`](KeyedConcurrencyLimiter::sweep_now) and by a new key at the
    /// [`max_keys`](Self::max_keys) cap.
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?.no_sweeper().build();
    /// assert!(l.try_acquire(&1).is_some());
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn no_sweeper(mut self) -> Self {
        self.sweep_interval = None;
        self
    }

    /// Runs the sweeper as a task on the current tokio runtime instead of a thread (each
    /// sweep on tokio's blocking pool). Without a runtime at `build()`, falls back to a thread.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)
    ///     .unwrap()
    ///     .sweep_interval(Duration::from_secs(60))
    ///     .sweep_on_tokio(true)
    ///     .build();
    /// assert!(l.try_acquire(&1).is_some());
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub fn sweep_on_tokio(mut self, on_tokio: bool) -> Self {
        self.sweep_on_tokio = on_tokio;
        self
    }

    /// Caps the number of tracked keys at `max_keys`, exactly ([`len`] never exceeds it).
    /// Default: no cap. A new key at the cap first triggers a sweep of idle keys; if still
    /// full, [`when_full`](Self::when_full) decides.
    ///
    /// [`len`]: KeyedConcurrencyLimiter::len
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?
    ///     .max_keys(NonZeroUsize::new(2).unwrap())
    ///     .build();
    /// let held: Vec<_> = (0..10).filter_map(|k| l.try_acquire(&k)).collect();
    /// assert_eq!((held.len(), l.len()), (2, 2));
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn max_keys(mut self, max_keys: NonZeroUsize) -> Self {
        self.max_keys = Some(max_keys);
        self
    }

    /// No cap on the number of tracked keys (the default; undoes a `max_keys`).
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?.no_key_cap().build();
    /// let held: Vec<_> = (0..10).filter_map(|k| l.try_acquire(&k)).collect();
    /// assert_eq!(l.len(), 10);
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn no_key_cap(mut self) -> Self {
        self.max_keys = None;
        self
    }

    /// The policy for a new key at the [`max_keys`](Self::max_keys) cap when no idle key
    /// could be evicted. Default [`WhenFull::Deny`]: refused with
    /// [`AcquireError::AtCapacity`](crate::AcquireError::AtCapacity) (`in_flight: 0`), also
    /// by the waiting forms, at once. [`WhenFull::AllowUntracked`]: granted an untracked
    /// permit (limited only by `n <= limit`; nothing counts it).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tollgate::WhenFull;
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?
    ///     .max_keys(NonZeroUsize::MIN)
    ///     .when_full(WhenFull::AllowUntracked)
    ///     .build();
    /// let a = l.try_acquire(&1).unwrap();
    /// let b = l.try_acquire(&2).unwrap(); // untracked
    /// assert_eq!((l.len(), l.in_flight(&2)), (1, 0));
    /// # drop((a, b));
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn when_full(mut self, policy: WhenFull) -> Self {
        self.when_full = policy;
        self
    }

    /// Names the limiter: the `limiter` label of its metrics (feature `metrics`: acquires by
    /// outcome, waits, the `tollgate_in_flight` gauge summed over its keys, keys tracked and
    /// evicted by sweeps; unnamed limiters are labelled `unnamed`) and its name in logs
    /// (feature `tracing`, which never logs its keys).
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<String>::builder(2)?
    ///     .name("exports")
    ///     .build();
    /// assert_eq!(l.name(), Some("exports"));
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Builds the limiter and starts the sweeper if configured (if the OS refuses a thread,
    /// the limiter works without background sweeping).
    ///
    /// ```
    /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?.build();
    /// assert_eq!(l.limit(), 1);
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn build(self) -> KeyedConcurrencyLimiter<K, S> {
        let max_keys = self.max_keys.map_or(usize::MAX, NonZeroUsize::get);
        let store = Arc::new(SemStore::new(
            self.limit,
            self.hasher,
            self.shards,
            max_keys,
            self.when_full,
            Meter::concurrency(self.name),
        ));
        #[cfg(feature = "tokio")]
        let on_tokio = self.sweep_on_tokio;
        #[cfg(not(feature = "tokio"))]
        let on_tokio = false;
        let sweeper = Sweeper::for_store(&store, self.sweep_interval, on_tokio);
        KeyedConcurrencyLimiter { sweeper, store }
    }
}

impl<K, S> fmt::Debug for KeyedConcurrencyLimiterBuilder<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedConcurrencyLimiterBuilder")
            .field("limit", &self.limit)
            .field("shards", &self.shards)
            .field("sweep_interval", &self.sweep_interval)
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
            .field("name", &self.name)
            .finish()
    }
}
