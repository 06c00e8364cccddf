//! [`KeyedRateLimiter`]: one cell per key, in a sharded concurrent map.
//!
//! The public face only: every method is one call into the method family (`crate::engine`)
//! on the key's slot in the store (`crate::store::keyed`).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::algorithm::gcra::Ticket;
use crate::algorithm::{Algorithm, Booking, Gcra};
use crate::clock::{duration_to_nanos, AnyClock, Clock};
use crate::direct::throttle_quota;
use crate::engine::{Engine, Placed};
use crate::outcome::{AcquireError, Decision, ThrottleReply};
use crate::quota::{Quota, QuotaError};
use crate::store::keyed::{KeySlot, KeyedStore, WhenFull};
use crate::store::sweep::SweepStats;
use crate::sweeper::{Sweep, Sweeper};
use crate::wait::Reservation;
use crate::Nanos;

/// The default hasher of a [`KeyedRateLimiter`]: [foldhash]'s fast `RandomState`.
///
/// Chosen by measurement on this project's machine (`BuildHasher::hash_one`, best of 5):
///
/// | hasher | `u64` | `"user:1234"` | 30-byte string |
/// |---|---|---|---|
/// | std `RandomState` (SipHash-1-3) | 19.6 ns | 23.0 ns | 32.4 ns |
/// | foldhash `fast::RandomState` | 1.6 ns | 3.5 ns | 6.3 ns |
/// | ahash `RandomState` | 2.2 ns | 5.7 ns | 7.0 ns |
///
/// **HashDoS.** Each limiter gets its own random seed, so no fixed list of keys collides in
/// every process, and attacker-chosen keys cannot be precomputed offline. foldhash does *not*
/// claim resistance against an attacker who can observe hash behaviour (timing) over a long
/// time and adapt. If untrusted clients choose your keys freely (raw header values, arbitrary
/// strings) and that matters to you, pass std's SipHash with
/// [`KeyedRateLimiterBuilder::hasher`]; collisions only cost time within one shard, never
/// correctness.
///
/// ```
/// use std::collections::hash_map::RandomState;
/// use tollgate::{Gcra, KeyedRateLimiter, Quota};
///
/// // Default: foldhash.
/// let fast: KeyedRateLimiter<String> = KeyedRateLimiter::new(Quota::per_second(5).unwrap());
/// // SipHash, for keys an adversary controls.
/// let sip: KeyedRateLimiter<String, Gcra, RandomState> =
///     KeyedRateLimiter::builder(Quota::per_second(5).unwrap())
///         .hasher(RandomState::new())
///         .build();
/// assert!(fast.try_acquire("a") && sip.try_acquire("a"));
/// ```
///
/// [foldhash]: https://docs.rs/foldhash
pub type DefaultKeyHasher = foldhash::fast::RandomState;

/// Default shard count: 64.
///
/// Chosen by measurement (release build, 1,000,000 keys, this project's 2-core machine). Memory
/// per key: many small tables each growing by doubling leave more allocator memory resident
/// than a few large ones. The sweeper's pause does not depend on it: a sweep holds a shard's
/// write lock for at most 2048 buckets at a time, whatever the shard's size.
///
/// | shards | RSS per key, `String` / `u64` (governor: 101.4 / 36.1) |
/// |---|---|
/// | 32 | - / 36.0 |
/// | 64 | 101.5 / 36.2-37.4 |
/// | 128 | 101.8 / 37.9-38.6 |
/// | 256 | 107.1-108.2 / 39.6 |
///
/// 64 is the most shards at which memory per key matches governor's (dashmap's own default
/// here is 8). With 2 cores, two writers (only new keys write-lock) rarely meet on one of 64
/// shards, and two threads' decisions rarely take the same shard's read lock (a shared cache
/// line). Each shard costs one cache line when empty. With many more cores, pass more with
/// [`KeyedRateLimiterBuilder::shards`].
pub const DEFAULT_SHARDS: usize = 64;

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
    store: Arc<KeyedStore<K, A, S>>,
}

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
    hasher: S,
    shards: usize,
    sweep_interval: Option<Duration>,
    #[cfg(feature = "tokio")]
    sweep_on_tokio: bool,
    max_keys: Option<NonZeroUsize>,
    when_full: WhenFull,
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
    /// [`Clock::max_skew`]; [`StdClock`](crate::StdClock) reads `Instant`, ordered across
    /// threads, at a few times the cost). The sweeper judges coldness with this clock, allowing
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

    /// Runs `alg` for every key instead of the current algorithm, checking that it can run the
    /// quota.
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
        let hasher = self.hasher.clone();
        Ok(self.with(alg, hasher))
    }

    /// The same configuration with another algorithm and hasher.
    fn with<B, S2>(self, alg: B, hasher: S2) -> KeyedRateLimiterBuilder<K, B, S2> {
        KeyedRateLimiterBuilder {
            quota: self.quota,
            alg,
            clock: self.clock,
            hasher,
            shards: self.shards,
            sweep_interval: self.sweep_interval,
            #[cfg(feature = "tokio")]
            sweep_on_tokio: self.sweep_on_tokio,
            max_keys: self.max_keys,
            when_full: self.when_full,
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

    /// Number of map shards (default [`DEFAULT_SHARDS`]). Rounded up to a power of two and
    /// kept within `2..=65536`. More shards: less lock contention, at one cache line each and
    /// some memory per key (see [`DEFAULT_SHARDS`]).
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
    ///     .shards(1000) // becomes 1024
    ///     .build();
    /// assert!(limiter.try_acquire(&1));
    /// ```
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.clamp(2, 1 << 16).next_power_of_two();
        self
    }

    /// Starts a background sweeper that evicts cold keys every `interval` (at least 1 ms). It
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
    pub fn sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = Some(interval);
        self
    }

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
    #[cfg(feature = "tokio")]
    pub fn sweep_on_tokio(mut self, on_tokio: bool) -> Self {
        self.sweep_on_tokio = on_tokio;
        self
    }

    /// Caps the number of tracked keys at `max_keys` (exactly: [`len`](KeyedRateLimiter::len)
    /// never exceeds it, even under concurrency). A new key at the cap first triggers a sweep
    /// of cold keys (skipped while none can be cold yet); if still full, the
    /// [`when_full`](KeyedRateLimiterBuilder::when_full) policy decides. A cap of zero would
    /// track nothing and so limit nothing; the type rules it out.
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
    /// A cap of zero does not compile:
    ///
    /// ```compile_fail
    /// let b = tollgate::KeyedRateLimiter::<u64>::builder(tollgate::Quota::per_second(1).unwrap());
    /// let _ = b.max_keys(0);
    /// ```
    pub fn max_keys(mut self, max_keys: NonZeroUsize) -> Self {
        self.max_keys = Some(max_keys);
        self
    }

    /// The policy for new keys when the [`max_keys`](KeyedRateLimiterBuilder::max_keys) cap is
    /// reached (default [`WhenFull::Deny`]).
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
    pub fn when_full(mut self, policy: WhenFull) -> Self {
        self.when_full = policy;
        self
    }

    /// Builds the limiter (every key starts fresh: a full bucket) and starts the sweeper if
    /// configured. If the OS refuses a sweeper thread, the limiter works without background
    /// sweeping; `sweep_now` and the key cap's reclaim still evict.
    pub fn build(self) -> KeyedRateLimiter<K, A, S> {
        let engine = Engine::new(self.alg, self.quota, self.clock)
            .expect("the algorithm accepted this quota when it was chosen");
        let max_keys = self.max_keys.map_or(usize::MAX, NonZeroUsize::get);
        let store = Arc::new(KeyedStore::new(
            engine,
            self.hasher,
            self.shards,
            max_keys,
            self.when_full,
        ));
        #[cfg(feature = "tokio")]
        let on_tokio = self.sweep_on_tokio;
        #[cfg(not(feature = "tokio"))]
        let on_tokio = false;
        let sweeper = self.sweep_interval.and_then(|interval| {
            let weak: Weak<dyn Sweep> = Arc::downgrade(&store) as Weak<dyn Sweep>;
            Sweeper::start(weak, interval, on_tokio)
        });
        KeyedRateLimiter { sweeper, store }
    }
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
        KeyedRateLimiterBuilder {
            quota,
            alg: Gcra,
            clock: AnyClock::default(),
            hasher: DefaultKeyHasher::default(),
            shards: DEFAULT_SHARDS,
            sweep_interval: None,
            #[cfg(feature = "tokio")]
            sweep_on_tokio: false,
            max_keys: None,
            when_full: WhenFull::default(),
            _keys: PhantomData,
        }
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
            store: &self.store,
            key,
        }
    }

    fn engine(&self) -> &Engine<A> {
        &self.store.engine
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
        self.store.forget_cold_bound();
        self.engine()
            .set_quota(quota, |migrate| self.store.for_each_cell(migrate))
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
    /// [`AcquireError::RateLimited`] with the wait after which it would succeed (or, at a
    /// full key cap with [`WhenFull::Deny`], the cap's suggested wait);
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
        self.store.map.contains_key(key)
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
    /// `(n - burst) * T` from a full bucket. At a full key cap with [`WhenFull::Deny`] it
    /// waits for the cap's suggested time and tries again.
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
    /// [`AcquireError::RateLimited`] with the wait that would have been needed: at a full
    /// key cap with [`WhenFull::Deny`], until the earliest key turns cold (judged from the
    /// keys as they are now) plus the new key's own wait from a fresh state. Others as for
    /// [`acquire_n`](KeyedRateLimiter::acquire_n).
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
        self.store.sweep_all(&|| false)
    }

    /// Number of tracked keys (O(1); exact when no insert or sweep is in flight).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(1).unwrap());
    /// assert!(l.try_acquire(&1) && l.try_acquire(&2));
    /// assert_eq!(l.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.store.len()
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
        // The store keeps "no cap" as usize::MAX, which no cap can exceed anyway.
        NonZeroUsize::new(self.store.max_keys).filter(|n| n.get() != usize::MAX)
    }

    /// Releases table memory left over from evicted keys (tables do not shrink by themselves).
    /// Locks each shard in turn.
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(1).unwrap());
    /// l.shrink_to_fit();
    /// ```
    pub fn shrink_to_fit(&self) {
        self.store.map.shrink_to_fit();
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
        self.store.stats()
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
        let quota = throttle_quota(max_burst, count, period_secs)?;
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
    /// [`AcquireError::RateLimited`] only at a full key cap with [`WhenFull::Deny`].
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
        let engine = self.engine();
        let src = engine.src();
        let placed = self
            .store
            .decide(key, |cell, now| (cell.reserve(now, n, &src, max_wait), now));
        let (booking, now, tracked) = match placed {
            Placed::Tracked((b, now)) => (b?, now, true),
            Placed::Untracked((b, now)) => (b?, now, false),
            Placed::Full(wait) => {
                return Err(AcquireError::RateLimited {
                    retry_after: Duration::from_nanos(wait),
                })
            }
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

impl<K, A: fmt::Debug, S> fmt::Debug for KeyedRateLimiterBuilder<K, A, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiterBuilder")
            .field("quota", &self.quota)
            .field("algorithm", &self.alg)
            .field("clock", &self.clock)
            .field("shards", &self.shards)
            .field("sweep_interval", &self.sweep_interval)
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
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
    /// order, each woken once. At a full key cap with [`WhenFull::Deny`] it waits the cap's
    /// suggested time and tries again.
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
}

#[cfg(all(test, not(loom)))]
mod tests;
