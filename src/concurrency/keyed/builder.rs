//! [`KeyedConcurrencyLimiterBuilder`]: a keyed concurrency limiter's configuration (hasher,
//! shards, background sweeping, key cap), in the keyed rate limiter's vocabulary.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::Arc;

use super::KeyedConcurrencyLimiter;
use crate::concurrency::error::{check_limit, ConcurrencyError};
use crate::concurrency::sem_store::SemStore;
use crate::meter::Meter;
use crate::store::settings::{table_setters, DefaultKeyHasher, TableSettings};

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
    settings: TableSettings<S>,
    _keys: PhantomData<fn() -> K>,
}

impl<K> KeyedConcurrencyLimiterBuilder<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    pub(super) fn new(limit: u64) -> Result<Self, ConcurrencyError> {
        Ok(KeyedConcurrencyLimiterBuilder {
            limit: check_limit(limit)?,
            settings: TableSettings::default(),
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
            settings: self.settings.with_key_hasher(hasher),
            _keys: PhantomData,
        }
    }

    table_setters! {
        /// Number of map shards (default [`DEFAULT_SHARDS`](crate::DEFAULT_SHARDS)), rounded
        /// up to a power of two and kept within `2..=65536`.
        ///
        /// ```
        /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?.shards(1000).build();
        /// assert!(l.try_acquire(&1).is_some());
        /// # Ok::<(), tollgate::ConcurrencyError>(())
        /// ```
        shards;
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
        sweep_interval;
        /// No background sweeper (the default; undoes a `sweep_interval`): idle keys are evicted
        /// only by [`sweep_now`](KeyedConcurrencyLimiter::sweep_now) and by a new key at the
        /// [`max_keys`](Self::max_keys) cap.
        ///
        /// ```
        /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?.no_sweeper().build();
        /// assert!(l.try_acquire(&1).is_some());
        /// # Ok::<(), tollgate::ConcurrencyError>(())
        /// ```
        no_sweeper;
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
        sweep_on_tokio;
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
        max_keys;
        /// No cap on the number of tracked keys (the default; undoes a `max_keys`).
        ///
        /// ```
        /// let l = tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)?.no_key_cap().build();
        /// let held: Vec<_> = (0..10).filter_map(|k| l.try_acquire(&k)).collect();
        /// assert_eq!(l.len(), 10);
        /// # Ok::<(), tollgate::ConcurrencyError>(())
        /// ```
        no_key_cap;
        /// The policy for a new key at the [`max_keys`](Self::max_keys) cap when no idle key
        /// could be evicted. Default [`WhenFull::Deny`](crate::WhenFull::Deny): refused with
        /// [`AcquireError::KeyCapReached`](crate::AcquireError::KeyCapReached)
        /// (`retry_after: None`: slots free on release, not on a schedule), also by the
        /// waiting forms, at once.
        /// [`WhenFull::AllowUntracked`](crate::WhenFull::AllowUntracked): granted an
        /// untracked permit (limited only by `n <= limit`; nothing counts it).
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
        when_full;
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
        name;
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
        let mut s = self.settings;
        let store = Arc::new(SemStore::new(
            self.limit,
            s.store(),
            Meter::keyed_concurrency(s.name.take()),
        ));
        let sweeper = s.start_sweeper(&store);
        KeyedConcurrencyLimiter { sweeper, store }
    }
}

impl<K, S> fmt::Debug for KeyedConcurrencyLimiterBuilder<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("KeyedConcurrencyLimiterBuilder");
        d.field("limit", &self.limit);
        self.settings.debug_fields(&mut d);
        d.finish()
    }
}
