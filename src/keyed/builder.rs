//! [`KeyedRateLimiterBuilder`]: a keyed limiter's configuration (clock, algorithm, hasher,
//! shards, background sweeping, key cap), and `build`, which starts the sweeper.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::Arc;

use super::KeyedRateLimiter;
use crate::algorithm::Gcra;
use crate::cell::Algorithm;
use crate::clock::{AnyClock, Clock};
use crate::engine::keyed::KeyedEngine;
use crate::engine::Engine;
use crate::meter::Meter;
use crate::quota::{Quota, QuotaError};
use crate::store::settings::{table_setters, DefaultKeyHasher, TableSettings};

/// Configures a [`KeyedRateLimiter`]: clock, algorithm, hasher, shards, background sweeping,
/// key cap.
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use tollgate::{KeyedRateLimiter, Quota, WhenFull};
///
/// let limiter = KeyedRateLimiter::<String>::builder(Quota::per_second(10).unwrap())
///     .sweep_interval(Duration::from_secs(30))            // evict idle keys in the background
///     .max_keys(NonZeroUsize::new(100_000).unwrap())      // hard cap on tracked keys
///     .when_full(WhenFull::Deny)
///     .build();
/// assert!(limiter.try_acquire("alice"));
/// ```
#[must_use = "call .build() to get a limiter"]
pub struct KeyedRateLimiterBuilder<K, A = Gcra, S = DefaultKeyHasher> {
    quota: Quota,
    alg: A,
    clock: AnyClock,
    settings: TableSettings<S>,
    _keys: PhantomData<fn() -> K>,
}

impl<K, A, S> KeyedRateLimiterBuilder<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Uses `clock` instead of the default [`DefaultClock`](crate::DefaultClock) (the TSC on
    /// most x86_64 machines, whose readings are not ordered across cores: see
    /// [`Clock::max_skew`](crate::Clock::max_skew); [`StdClock`](crate::StdClock) reads
    /// `Instant`, ordered across threads, at a few times the cost). The sweeper judges coldness with this clock, allowing
    /// for its `max_skew`; its interval is real time (tokio time for the tokio variant).
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let limiter = KeyedRateLimiter::<u32>::builder(Quota::per_second(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(limiter.try_acquire(&1));
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = AnyClock::custom(clock);
        self
    }

    /// Runs `alg` instead of the current algorithm (GCRA unless chosen), checking at once that
    /// it can run the builder's quota: the refusal comes from the call that causes it, and
    /// `build` stays infallible. Every key runs it.
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] if `alg` cannot run the builder's quota.
    ///
    /// ```
    /// use tollgate::{Gcra, KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(5).unwrap()).algorithm(Gcra)?.build();
    /// assert!(l.try_acquire(&1));
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn algorithm<B: Algorithm>(
        self,
        alg: B,
    ) -> Result<KeyedRateLimiterBuilder<K, B, S>, QuotaError> {
        alg.params(&self.quota, 0)?;
        let hasher = self.settings.hasher.clone();
        Ok(self.with(alg, hasher))
    }

    /// The same configuration with another algorithm and hasher.
    fn with<B, S2>(self, alg: B, hasher: S2) -> KeyedRateLimiterBuilder<K, B, S2> {
        KeyedRateLimiterBuilder {
            quota: self.quota,
            alg,
            clock: self.clock,
            settings: self.settings.with_key_hasher(hasher),
            _keys: PhantomData,
        }
    }

    /// Uses another hasher for keys (see [`DefaultKeyHasher`] for the trade-off).
    ///
    /// ```
    /// use std::collections::hash_map::RandomState;
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let limiter = KeyedRateLimiter::<String>::builder(Quota::per_second(1).unwrap())
    ///     .hasher(RandomState::new())
    ///     .build();
    /// assert!(limiter.try_acquire("k"));
    /// ```
    pub fn hasher<S2>(self, hasher: S2) -> KeyedRateLimiterBuilder<K, A, S2>
    where
        S2: BuildHasher + Clone + Send + Sync + 'static,
    {
        let alg = self.alg.clone();
        self.with(alg, hasher)
    }

    table_setters! {
        /// Number of map shards (default [`DEFAULT_SHARDS`](crate::DEFAULT_SHARDS)). Rounded
        /// up to a power of two and kept within `2..=65536`. More shards: less lock contention,
        /// at one cache line each and some memory per key (see
        /// [`DEFAULT_SHARDS`](crate::DEFAULT_SHARDS)).
        ///
        /// ```
        /// use tollgate::{KeyedRateLimiter, Quota};
        /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        ///     .shards(1000) // becomes 1024
        ///     .build();
        /// assert!(limiter.try_acquire(&1));
        /// ```
        shards;
        /// Evicts cold keys in the background every `interval` (at least 1 ms). Default here: no
        /// sweeper; [`no_sweeper`](Self::no_sweeper) turns background sweeping off. The sweeper
        /// runs on its own thread (or a tokio task, see `sweep_on_tokio`), holds only a weak
        /// reference to the limiter and stops when the limiter is dropped.
        ///
        /// A sweep locks one part of one shard at a time (a few thousand keys, tens of
        /// microseconds); decisions on other shards go on meanwhile. Every
        /// cold key it evicts is one a decision would treat exactly as a new key, so the interval
        /// trades memory for CPU only: a few times the quota's period is a good start.
        ///
        /// ```
        /// use std::time::Duration;
        /// use tollgate::{KeyedRateLimiter, Quota};
        /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        ///     .sweep_interval(Duration::from_secs(60))
        ///     .build();
        /// drop(limiter); // the sweeper thread exits
        /// ```
        sweep_interval;
        /// No background sweeper: cold keys are evicted only by
        /// [`sweep_now`](KeyedRateLimiter::sweep_now) and by a new key at the
        /// [`max_keys`](Self::max_keys) cap. Default here: no sweeper (this undoes a
        /// [`sweep_interval`](Self::sweep_interval)).
        ///
        /// ```
        /// use std::time::Duration;
        /// use tollgate::{KeyedRateLimiter, Quota};
        /// let interval: Option<Duration> = None; // say, from configuration
        /// let b = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap());
        /// let b = match interval {
        ///     Some(interval) => b.sweep_interval(interval),
        ///     None => b.no_sweeper(),
        /// };
        /// let limiter = b.build();
        /// assert!(limiter.try_acquire(&1));
        /// ```
        no_sweeper;
        /// Runs the sweeper as a task on the current tokio runtime instead of a thread (each sweep
        /// itself runs on tokio's blocking pool, so it never stalls async workers). Without a
        /// runtime at `build()`, falls back to a thread. Only meaningful with `sweep_interval`.
        ///
        /// ```
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// use std::time::Duration;
        /// use tollgate::{KeyedRateLimiter, Quota};
        /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        ///     .sweep_interval(Duration::from_secs(60))
        ///     .sweep_on_tokio(true)
        ///     .build();
        /// assert!(limiter.try_acquire(&1));
        /// # }
        /// ```
        sweep_on_tokio;
        /// Caps the number of tracked keys at `max_keys` (exactly: [`len`](KeyedRateLimiter::len)
        /// never exceeds it, even under concurrency). Default here: no cap. A new key at the cap
        /// first triggers a sweep of cold keys (skipped while none can be cold yet); if still
        /// full, the [`when_full`](Self::when_full) policy decides. Zero is not a cap (it would
        /// track nothing and so limit nothing): the type rules it out, and
        /// [`no_key_cap`](Self::no_key_cap) says "no cap".
        ///
        /// ```
        /// use std::num::NonZeroUsize;
        /// use tollgate::{KeyedRateLimiter, Quota};
        /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        ///     .max_keys(NonZeroUsize::new(2).unwrap())
        ///     .build();
        /// for k in 0..10 { let _ = limiter.try_acquire(&k); }
        /// assert!(limiter.len() <= 2);
        /// ```
        ///
        /// A cap of zero does not compile, nor does a count read from configuration that could
        /// be zero (`NonZeroUsize::new` gives an `Option`, which `max_keys` does not take):
        ///
        /// ```compile_fail
        /// let b = tollgate::KeyedRateLimiter::<u64>::builder(tollgate::Quota::per_second(1).unwrap());
        /// let _ = b.max_keys(0);
        /// ```
        ///
        /// ```compile_fail
        /// let configured: usize = 0;
        /// let b = tollgate::KeyedRateLimiter::<u64>::builder(tollgate::Quota::per_second(1).unwrap());
        /// let _ = b.max_keys(std::num::NonZeroUsize::new(configured));
        /// ```
        max_keys;
        /// No cap on the number of tracked keys: memory grows with the distinct keys seen between
        /// sweeps. Default here: no cap (this undoes a [`max_keys`](Self::max_keys)). For keys
        /// a client cannot invent; the HTTP layer refuses such a limiter unless told otherwise.
        ///
        /// ```
        /// use std::num::NonZeroUsize;
        /// use tollgate::{KeyedRateLimiter, Quota};
        /// let configured: usize = 0; // say, 0 meaning "no cap" in your configuration
        /// let b = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap());
        /// let b = match NonZeroUsize::new(configured) {
        ///     Some(cap) => b.max_keys(cap),
        ///     None => b.no_key_cap(), // said, not implied
        /// };
        /// let limiter = b.build();
        /// for k in 0..10 { let _ = limiter.try_acquire(&k); }
        /// assert_eq!(limiter.len(), 10);
        /// ```
        no_key_cap;
        /// The policy for new keys when the [`max_keys`](Self::max_keys) cap is reached. Default:
        /// [`WhenFull::Deny`](crate::WhenFull::Deny).
        ///
        /// ```
        /// use std::num::NonZeroUsize;
        /// use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};
        /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        ///     .clock(ManualClock::new())
        ///     .max_keys(NonZeroUsize::MIN)
        ///     .when_full(WhenFull::AllowUntracked)
        ///     .build();
        /// assert!(limiter.try_acquire(&1));
        /// assert!(limiter.try_acquire(&2)); // decided as a fresh key, not stored
        /// assert_eq!(limiter.len(), 1);
        /// ```
        when_full;
        /// Names the limiter: the `limiter` label of its metrics (feature `metrics`; unnamed
        /// limiters are labelled `unnamed`) and its name in logs.
        ///
        /// ```
        /// use tollgate::{KeyedRateLimiter, Quota};
        /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        ///     .name("login")
        ///     .build();
        /// assert_eq!(limiter.name(), Some("login"));
        /// ```
        name;
    }

    /// Builds the limiter (every key starts fresh: a full bucket) and starts the sweeper if
    /// configured. If the OS refuses a sweeper thread, the limiter works without background
    /// sweeping; `sweep_now` and the key cap's reclaim still evict.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let limiter = KeyedRateLimiter::<&str>::builder(Quota::per_second(2).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(limiter.try_acquire(&"alice") && limiter.try_acquire(&"alice"));
    /// assert!(!limiter.try_acquire(&"alice"));
    /// assert!(limiter.try_acquire(&"bob")); // another key: its own full bucket
    /// ```
    pub fn build(self) -> KeyedRateLimiter<K, A, S> {
        let mut s = self.settings;
        let engine = Engine::new(self.alg, self.quota, self.clock)
            .expect("the algorithm accepted this quota when it was chosen")
            .with_meter(Meter::keyed(s.name.take()));
        let store = s.store();
        let inner = Arc::new(KeyedEngine::new(engine, store));
        let sweeper = s.start_sweeper(&inner);
        KeyedRateLimiter { sweeper, inner }
    }
}

impl<K> KeyedRateLimiterBuilder<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    /// The defaults: GCRA, the default clock, hasher and shard count, no sweeper, no key cap
    /// ([`KeyedRateLimiter::builder`]).
    pub(super) fn new(quota: Quota) -> KeyedRateLimiterBuilder<K> {
        KeyedRateLimiterBuilder {
            quota,
            alg: Gcra,
            clock: AnyClock::default(),
            settings: TableSettings::default(),
            _keys: PhantomData,
        }
    }
}

impl<K, A: fmt::Debug, S> fmt::Debug for KeyedRateLimiterBuilder<K, A, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("KeyedRateLimiterBuilder");
        d.field("quota", &self.quota)
            .field("algorithm", &self.alg)
            .field("clock", &self.clock);
        self.settings.debug_fields(&mut d);
        d.finish()
    }
}
