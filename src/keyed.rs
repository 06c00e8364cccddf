//! [`KeyedRateLimiter`]: one GCRA cell per key, in a sharded concurrent map.
//!
//! Every key-taking method goes through one lookup ([`Store::decide`]) that hands the key's
//! [`TatCell`] to the same cell methods the direct limiter uses, so the rules are written once.
//!
//! Concurrency contract with the sweeper (see `sweeper.rs`): a decision holds the key's shard
//! *read* guard while it CASes; the sweeper removes a key only under that shard's *write* guard,
//! and only if `tat <= now`. A decision that finds the key missing reads `now` after its lookup,
//! so no earlier than the sweeper's (the lock orders them and the clock is monotonic), and sees
//! a fresh key exactly where it would have seen the cold one: `max(tat, now) = now` either way.
//! A decision that finds the key may use a `now` read before the lookup: on a stored cell an
//! earlier `now` only makes a decision stricter ([`decide_on_shard`]).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;

use crate::cell::{QuotaCell, TatCell};
use crate::clock::{duration_to_nanos, AnyClock, Clock};
use crate::direct::throttle_quota;
use crate::gcra::Ticket;
use crate::outcome::{AcquireError, Decision, ThrottleReply};
use crate::quota::{Quota, QuotaError};
use crate::sweeper::{SweepCounters, SweepStats, Sweeper};
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::wait::{block_until_ready, Reservation, Target};
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
/// use tollgate::{KeyedRateLimiter, Quota};
///
/// // Default: foldhash.
/// let fast: KeyedRateLimiter<String> = KeyedRateLimiter::new(Quota::per_second(5).unwrap());
/// // SipHash, for keys an adversary controls.
/// let sip: KeyedRateLimiter<String, RandomState> =
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
/// Chosen by measurement (release build, 1,000,000 keys, this project's 2-core machine), with
/// two constraints: the sweeper's pause, which is one shard's walk under its write lock, and
/// memory per key, where many small tables each growing by doubling leave more allocator
/// memory resident than a few large ones:
///
/// | shards | longest shard lock hold, sweeping 1M cold `String` / `u64` keys | RSS per key, `String` / `u64` (governor: 101.4 / 36.1) |
/// |---|---|---|
/// | 32 | - / 0.36 ms | - / 36.0 |
/// | 64 | 0.43-0.66 ms / 0.21 ms | 101.5 / 36.2-37.4 |
/// | 128 | 0.20-0.26 ms / 0.13-0.16 ms | 101.8 / 37.9-38.6 |
/// | 256 | 0.10-0.13 ms / 0.11 ms | 107.1-108.2 / 39.6 |
///
/// 64 is the most shards at which memory per key matches governor's (dashmap's own default
/// here is 8) while the pause stays under a millisecond at a million keys (about 15,600 keys
/// per shard; evicted keys are dropped after the lock is released). With 2 cores, two
/// writers (only new keys write-lock) rarely meet on one of 64 shards. Each shard costs one
/// cache line when empty. Above a few million keys, or with more cores, pass more with
/// [`KeyedRateLimiterBuilder::shards`].
pub const DEFAULT_SHARDS: usize = 64;

/// What a [`KeyedRateLimiter`] with a [`max_keys`](KeyedRateLimiterBuilder::max_keys) cap does
/// with a *new* key when the cap is reached and reclaiming cold keys freed nothing.
///
/// Keys already tracked are never affected by the cap.
///
/// ```
/// use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};
///
/// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
///     .clock(ManualClock::new())
///     .max_keys(1)
///     .when_full(WhenFull::Deny)
///     .build();
/// assert!(limiter.try_acquire(&1));
/// assert!(!limiter.try_acquire(&2)); // table full, key 1 still hot
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhenFull {
    /// Refuse the new key. Checks report `allowed: false`, `remaining: 0` and a `retry_after`
    /// (also used as `reset_after`) equal to the time until the earliest tracked key turns cold
    /// and can be reclaimed, at least 1 ns and at most the quota's tolerance (by then every key
    /// that only took permits under the limiter's own quota is cold). `try_*` and `reserve`
    /// return [`AcquireError::RateLimited`] with that wait; blocking and async `acquire` wait
    /// that long and try again. The safe default: the cap is never a way around the limit.
    #[default]
    Deny,
    /// Decide for the new key as for a fresh key (a full bucket) and store nothing: the request
    /// is limited only by its own cost against the burst. Availability over strictness: under
    /// a flood of distinct keys each one gets its burst.
    AllowUntracked,
}

/// Rate limits per key: one GCRA cell (a `u64`) per key in a sharded concurrent map.
///
/// Keys are anything `Hash + Eq`; methods take a borrowed form (`&str` for `String` keys).
/// To limit per user, per action, or per user *and* action, choose the key: a composite key
/// such as `(user_id, action)` gives each pair its own bucket.
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
/// [`sweep_now`](KeyedRateLimiter::sweep_now). A key idle long enough to be back at a full
/// bucket (its `tat <= now`) carries no information, so removing it is lossless.
pub struct KeyedRateLimiter<K, S = DefaultKeyHasher>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    // Dropped first: stops the background sweeper before the store goes.
    sweeper: Option<Sweeper>,
    store: Arc<Store<K, S>>,
}

/// Configures a [`KeyedRateLimiter`]: clock, hasher, shards, background sweeping, key cap.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{KeyedRateLimiter, Quota, WhenFull};
///
/// let limiter = KeyedRateLimiter::<String>::builder(Quota::per_second(10).unwrap())
///     .sweep_interval(Duration::from_secs(30)) // evict idle keys in the background
///     .max_keys(100_000)                       // hard cap on tracked keys
///     .when_full(WhenFull::Deny)
///     .build();
/// assert!(limiter.try_acquire("alice"));
/// ```
#[must_use = "call .build() to get a limiter"]
pub struct KeyedRateLimiterBuilder<K, S = DefaultKeyHasher> {
    quota: Quota,
    clock: AnyClock,
    hasher: S,
    shards: usize,
    sweep_interval: Option<Duration>,
    #[cfg(feature = "tokio")]
    sweep_on_tokio: bool,
    max_keys: Option<usize>,
    when_full: WhenFull,
    _keys: PhantomData<fn() -> K>,
}

impl<K, S> KeyedRateLimiterBuilder<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Uses `clock` instead of the default [`StdClock`](crate::StdClock). The sweeper judges
    /// coldness with this clock; its interval is real time (tokio time for the tokio variant).
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
    pub fn hasher<S2>(self, hasher: S2) -> KeyedRateLimiterBuilder<K, S2>
    where
        S2: BuildHasher + Clone + Send + Sync + 'static,
    {
        KeyedRateLimiterBuilder {
            quota: self.quota,
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

    /// Number of map shards (default [`DEFAULT_SHARDS`]). Rounded up to a power of two and
    /// kept within `2..=65536`. More shards: less lock contention and a shorter sweeper pause
    /// per shard, at one cache line each.
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
    /// A sweep locks one shard at a time; decisions on other shards go on meanwhile. Every
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
    /// [`when_full`](KeyedRateLimiterBuilder::when_full) policy decides.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
    ///     .max_keys(2)
    ///     .build();
    /// for k in 0..10 { let _ = limiter.try_acquire(&k); }
    /// assert!(limiter.len() <= 2);
    /// ```
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = Some(max_keys);
        self
    }

    /// The policy for new keys when the [`max_keys`](KeyedRateLimiterBuilder::max_keys) cap is
    /// reached (default [`WhenFull::Deny`]).
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};
    /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .max_keys(1)
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

    /// Builds the limiter (every key starts with a full bucket) and starts the sweeper if
    /// configured. If the OS refuses a sweeper thread, the limiter works without background
    /// sweeping; `sweep_now` and the key cap's reclaim still evict.
    pub fn build(self) -> KeyedRateLimiter<K, S> {
        let store = Arc::new(Store {
            map: DashMap::with_capacity_and_hasher_and_shard_amount(0, self.hasher, self.shards),
            quota: QuotaCell::new(self.quota),
            clock: self.clock,
            max_keys: self.max_keys.unwrap_or(usize::MAX),
            when_full: self.when_full,
            slots: AtomicUsize::new(0),
            earliest: AtomicU64::new(u64::MAX),
            sweep_lock: Mutex::new(()),
            counters: SweepCounters::default(),
        });
        #[cfg(feature = "tokio")]
        let on_tokio = self.sweep_on_tokio;
        #[cfg(not(feature = "tokio"))]
        let on_tokio = false;
        let sweeper = self
            .sweep_interval
            .and_then(|interval| Sweeper::start(&store, interval, on_tokio));
        KeyedRateLimiter { sweeper, store }
    }
}

/// The shared state; the sweeper holds a `Weak` to it.
pub(crate) struct Store<K, S> {
    pub(crate) map: DashMap<K, TatCell, S>,
    quota: QuotaCell,
    pub(crate) clock: AnyClock,
    max_keys: usize,
    when_full: WhenFull,
    /// Keys tracked, counted *before* an insert and *after* a removal, so it bounds the map's
    /// length from above at every instant; an insert happens only if it can take a slot below
    /// `max_keys`. That makes the cap exact.
    pub(crate) slots: AtomicUsize,
    /// A lower bound on the TAT of every tracked key (`u64::MAX` when empty): while
    /// `now < earliest` no key can be cold, so a reclaim at the cap can skip its sweep. Lowered
    /// by every insert and cancel, recomputed by every sweep (protocol in `sweeper.rs`).
    pub(crate) earliest: AtomicU64,
    /// Serialises whole sweeps (background, `sweep_now`, reclaim at the cap).
    pub(crate) sweep_lock: Mutex<()>,
    pub(crate) counters: SweepCounters,
}

/// Where a decision was made.
enum Outcome<R> {
    /// On the key's stored state (or as a fresh key, with nothing to store).
    Tracked(R),
    /// As a fresh key that could not be stored (cap reached, [`WhenFull::AllowUntracked`]).
    Untracked(R),
    /// Not made: cap reached, [`WhenFull::Deny`]; the suggested wait in ns.
    Full(Nanos),
}

impl<K, S> Store<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Runs `op` on the key's cell (with `now` read as [`decide_on_shard`] explains), inserting
    /// the key only when `op` stores something. `op` may run more than once (it must be a pure CAS
    /// step on the cell it is given).
    fn decide<Q, R>(&self, key: &Q, op: impl Fn(&TatCell, Nanos) -> R) -> Outcome<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let fresh = match decide_on_shard(|| self.map.get(key), || self.clock.now(), &op) {
            Found::Decided(r) => return Outcome::Tracked(r),
            Found::MustInsert(fresh) => fresh,
        };
        // Insert under the write guard and decide again there with a fresh `now` (the loom
        // model in `loom-tests/tests/sweeper.rs` transcribes this step).
        for attempt in 0..2 {
            match self.map.entry(key.to_owned()) {
                // Someone inserted it meanwhile: decide on theirs, under the write guard.
                Entry::Occupied(e) => return Outcome::Tracked(op(e.get(), self.clock.now())),
                Entry::Vacant(e) => {
                    if self.take_slot() {
                        let cell = TatCell::new();
                        let r = op(&cell, self.clock.now());
                        self.lower_earliest(cell.tat());
                        e.insert(cell);
                        return Outcome::Tracked(r);
                    }
                }
            }
            // Full (the entry guard is dropped by now, so sweeping cannot deadlock on it).
            if attempt == 0 {
                self.reclaim();
            }
        }
        match self.when_full {
            WhenFull::AllowUntracked => Outcome::Untracked(fresh),
            WhenFull::Deny => Outcome::Full(self.full_retry_after()),
        }
    }

    /// The key's state without creating it (a peek: `n = 0` stores nothing).
    fn peek<Q>(&self, key: &Q, q: Quota) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let tracked = self.map.get(key);
        let fresh = TatCell::new();
        let cell = tracked.as_deref().unwrap_or(&fresh);
        let now = self.clock.now(); // after the lookup: a miss needs it (see decide_on_shard)
        cell.check(now, 0, q).decision(now, q)
    }

    fn take_slot(&self) -> bool {
        self.slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_keys).then(|| n + 1)
            })
            .is_ok()
    }

    pub(crate) fn lower_earliest(&self, tat: Nanos) {
        self.earliest.fetch_min(tat, Ordering::AcqRel);
    }

    /// At the cap: sweep, unless a sweep is running right now (it is reclaiming already) or
    /// no key can be cold yet (then a sweep would walk every key for nothing, which under a
    /// flood of new keys would make each one cost a full scan).
    fn reclaim(&self) {
        let _guard = match self.sweep_lock.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        if self.clock.now() >= self.earliest.load(Ordering::Acquire) {
            self.sweep_locked(&|| false);
        }
    }

    /// [`WhenFull::Deny`]'s suggested wait: until the earliest tracked key turns cold.
    fn full_retry_after(&self) -> Nanos {
        let now = self.clock.now();
        let tau = self.quota.load().tau();
        self.earliest
            .load(Ordering::Acquire)
            .saturating_sub(now)
            .clamp(1, tau.max(1))
    }

    /// Cancel through a fresh lookup. A missing key was evicted as cold, which means the
    /// ticket was ready by then (a cell's TAT is never below a pending reservation's), so
    /// there is nothing to refund. `now` is read under the guard: if the
    /// key was evicted and created again since, this `now` is past the ticket's ready time and
    /// the new state cannot receive a refund it never owed.
    fn cancel<Q>(&self, key: &Q, ticket: &Ticket)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(cell) = self.map.get(key) {
            cell.cancel(self.clock.now(), ticket);
            self.lower_earliest(cell.tat());
        }
    }
}

/// What [`decide_on_shard`] did.
pub(crate) enum Found<R> {
    /// Decided: on the stored cell, or as a fresh key that stores nothing.
    Decided(R),
    /// The key is absent and the decision (this one, made on a scratch fresh cell) stores
    /// something: insert the key under the shard's write guard and decide again there.
    MustInsert(R),
}

/// The read side of a decision's protocol with the sweeper (module docs). Shared with the loom
/// model of the sweeper (through `loom_api`), which runs it over its own lock-guarded map.
///
/// `now` is read before the lookup, so the clock read overlaps the lookup's cache misses
/// instead of waiting for them (the vDSO clock read is ordered after all earlier loads). On a
/// stored cell an early `now` is safe: it can only make the decision stricter, since
/// `max(tat, now) - now` only grows as `now` shrinks. On a miss it is not: the key may have
/// been evicted after `now` was read, with a TAT above it. So a miss reads `now` again, after
/// `lookup` took (and released) the shard's read guard, which orders it after any sweeper that
/// removed the key under the write guard: that `now` is at least the sweeper's, where the
/// evicted key and a fresh one decide alike.
///
/// Absent is the same state as a fresh cell (tat 0), so a miss decides on a scratch one: if it
/// stores nothing (a peek, a request over the burst, a wait past the timeout) the answer is
/// already exact and nothing needs inserting, so denials of unknown keys never grow the map.
/// A stored TAT is never 0 (at least one T >= 1 ns is added).
#[inline]
pub(crate) fn decide_on_shard<G, R>(
    lookup: impl FnOnce() -> Option<G>,
    now: impl Fn() -> Nanos,
    op: &impl Fn(&TatCell, Nanos) -> R,
) -> Found<R>
where
    G: Deref<Target = TatCell>,
{
    let early = now();
    if let Some(cell) = lookup() {
        // The guard is held until the CAS is done.
        return Found::Decided(op(&cell, early));
    }
    let scratch = TatCell::new();
    let fresh = op(&scratch, now());
    if scratch.tat() == 0 {
        Found::Decided(fresh)
    } else {
        Found::MustInsert(fresh)
    }
}

fn full_decision(q: Quota, retry_after: Nanos) -> Decision {
    let wait = Duration::from_nanos(retry_after);
    Decision {
        allowed: false,
        limit: q.burst(),
        remaining: 0,
        retry_after: Some(wait),
        reset_after: wait,
    }
}

impl<K> KeyedRateLimiter<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    /// A keyed limiter for `quota` per key, with the default clock, hasher and shard count, no
    /// background sweeper and no key cap.
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

    /// A builder: clock, hasher, shards, sweeper, key cap.
    pub fn builder(quota: Quota) -> KeyedRateLimiterBuilder<K> {
        KeyedRateLimiterBuilder {
            quota,
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

impl<K, S> KeyedRateLimiter<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// The quota in force for every key (per-call quotas aside).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_hour(5).unwrap());
    /// assert_eq!(l.quota().burst(), 5);
    /// ```
    pub fn quota(&self) -> Quota {
        self.store.quota.load()
    }

    /// Replaces the quota for every key at runtime. Each key keeps its debt (`tat - now`);
    /// the new rate and burst apply from the next decision on, never torn.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    /// let l = KeyedRateLimiter::<u8>::new(Quota::per_second(1).unwrap());
    /// assert!(l.try_acquire(&0));
    /// assert!(!l.try_acquire(&0));
    /// l.set_quota(Quota::per_second(1).unwrap().with_burst(2).unwrap());
    /// assert!(l.try_acquire(&0));
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        self.store.quota.store(quota);
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
        let q = self.store.quota.load();
        match self.store.decide(key, |cell, now| cell.check(now, 1, q)) {
            Outcome::Tracked(v) | Outcome::Untracked(v) => v.allowed(),
            Outcome::Full(_) => false,
        }
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
        let q = self.store.quota.load();
        match self.store.decide(key, |cell, now| cell.check(now, n, q)) {
            Outcome::Tracked(v) | Outcome::Untracked(v) => v.into_result(n, q),
            Outcome::Full(wait) => Err(NotReserved::Full(wait).into()),
        }
    }

    /// Tries one permit for `key` and reports everything about the decision.
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(3).unwrap());
    /// let d = l.check(&1);
    /// assert!(d.allowed);
    /// assert_eq!((d.limit, d.remaining), (3, 2));
    /// ```
    #[must_use = "the decision says whether the permit was granted"]
    pub fn check<Q>(&self, key: &Q) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_n(key, 1)
    }

    /// Tries `n` permits for `key` and reports everything about the decision; `n = 0` is
    /// [`peek`](KeyedRateLimiter::peek).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(3).unwrap());
    /// assert_eq!(l.check_n(&1, 3).remaining, 0);
    /// assert!(!l.check_n(&1, 1).allowed);
    /// ```
    #[must_use = "the decision says whether the permits were granted"]
    pub fn check_n<Q>(&self, key: &Q, n: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_with(key, n, self.store.quota.load())
    }

    /// Like [`check_n`](KeyedRateLimiter::check_n) under `quota` for this call only, the
    /// redis-cell style where the limit travels with the request (say, per customer plan).
    /// The key's state is shared with every other call on it.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<&str>::builder(Quota::per_second(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let free = Quota::per_second(1).unwrap();
    /// let pro = Quota::per_second(10).unwrap();
    /// assert!(l.check_with(&"free-user", 1, free).allowed);
    /// assert!(!l.check_with(&"free-user", 1, free).allowed);
    /// assert!(l.check_with(&"pro-user", 10, pro).allowed);
    /// ```
    #[must_use = "the decision says whether the permits were granted"]
    pub fn check_with<Q>(&self, key: &Q, n: u64, quota: Quota) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self
            .store
            .decide(key, |cell, now| (cell.check(now, n, quota), now))
        {
            Outcome::Tracked((v, now)) | Outcome::Untracked((v, now)) => v.decision(now, quota),
            Outcome::Full(wait) => full_decision(quota, wait),
        }
    }

    /// The key's state right now, taking nothing and storing nothing (an unknown key reports
    /// a full bucket).
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
        Q: Hash + Eq + ?Sized,
    {
        self.store.peek(key, self.store.quota.load())
    }

    /// redis-cell's `CL.THROTTLE key max_burst count period quantity` on `key`'s state: burst
    /// `max_burst + 1`, `count` per `period_secs` seconds, cost `quantity`, for this call only.
    ///
    /// # Errors
    /// The [`QuotaError`] for an invalid quota.
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
            &self.check_with(key, quantity, quota),
        ))
    }

    /// Takes one permit for `key`, blocking until it is available; returns the time waited.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert_eq!(l.acquire(&1), Duration::ZERO);
    /// assert_eq!(l.acquire(&1), Duration::from_millis(100));
    /// ```
    pub fn acquire<Q>(&self, key: &Q) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        // One permit waits at most one interval: unrepresentable only at the end of u64 time.
        self.acquire_n(key, 1).unwrap_or(Duration::MAX)
    }

    /// Takes `n` permits for `key`, blocking until they are available; returns the time
    /// waited. `n` above the burst waits `(n - burst) * T` from a full bucket. At a full key
    /// cap with [`WhenFull::Deny`] it waits for the cap's suggested time and tries again.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] if the wait does not fit in `u64` nanoseconds.
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
        let mut waited = Duration::ZERO;
        loop {
            match self.reserve_ticket(key, n, None) {
                Ok(r) => {
                    let slept = block_until_ready(&self.store.clock, r.now, &r.ticket);
                    return Ok(waited.saturating_add(slept));
                }
                Err(NotReserved::Full(wait)) => {
                    let wait = Duration::from_nanos(wait);
                    self.store.clock.sleep(wait);
                    waited = waited.saturating_add(wait);
                }
                Err(NotReserved::Error(e)) => return Err(e),
            }
        }
    }

    /// Takes `n` permits for `key` if they are available within `timeout`, blocking at most
    /// that long; otherwise reserves nothing and returns at once.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed (or the key
    /// cap's suggested wait); [`AcquireError::Unrepresentable`] as for
    /// [`acquire_n`](KeyedRateLimiter::acquire_n).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    /// let l = KeyedRateLimiter::<u8>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// l.acquire(&1);
    /// assert!(l.try_acquire_for(&1, 1, Duration::from_millis(50)).is_err());
    /// assert_eq!(l.try_acquire_for(&1, 1, Duration::from_millis(100)).unwrap(), Duration::from_millis(100));
    /// ```
    pub fn try_acquire_for<Q>(
        &self,
        key: &Q,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let r = self.reserve_ticket(key, n, Some(duration_to_nanos(timeout)))?;
        Ok(block_until_ready(&self.store.clock, r.now, &r.ticket))
    }

    /// Reserves `n` permits for `key` now, in arrival order, without waiting. Cancelling looks
    /// the key up again (if it was evicted meanwhile it was cold, and there is nothing to give
    /// back).
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
    /// let r = l.reserve("k", 4).unwrap();
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// r.cancel();
    /// assert!(l.try_acquire_n("k", 2).is_ok());
    /// ```
    pub fn reserve<'a, Q>(&'a self, key: &'a Q, n: u64) -> Result<Reservation<'a>, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        let r = self.reserve_ticket(key, n, None)?;
        Ok(Reservation::new(
            r.ticket,
            r.now,
            &self.store.clock,
            Target::Lookup(Box::new(self.canceller(key, r.tracked))),
        ))
    }

    /// The reservation every waiting method (blocking, async, `reserve`) starts from.
    fn reserve_ticket<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Option<Nanos>,
    ) -> Result<Reserved, NotReserved>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let q = self.store.quota.load();
        let reserve = |cell: &TatCell, now| cell.reserve(now, n, q, max_wait).map(|t| (t, now));
        let (r, tracked) = match self.store.decide(key, reserve) {
            Outcome::Tracked(r) => (r, true),
            Outcome::Untracked(r) => (r, false),
            Outcome::Full(wait) => return Err(NotReserved::Full(wait)),
        };
        let (ticket, now) = r.map_err(NotReserved::Error)?;
        Ok(Reserved {
            ticket,
            now,
            tracked,
        })
    }

    /// What cancelling a reservation on `key` does: refund through a fresh lookup, or nothing
    /// for an untracked reservation (nothing was stored, so a refund would land on whatever
    /// state the key has later).
    fn canceller<'a, Q>(&'a self, key: &'a Q, tracked: bool) -> impl Fn(&Ticket) + 'a
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        move |t: &Ticket| {
            if tracked {
                self.store.cancel(key, t);
            }
        }
    }

    /// Evicts every cold key (`tat <= now`) now, one shard at a time; returns how many.
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
        self.store.sweep(&|| false)
    }

    /// Number of tracked keys (O(1); exact when no insert or sweep is in flight).
    ///
    /// ```
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_second(1).unwrap());
    /// assert!(l.try_acquire(&1) && l.try_acquire(&2));
    /// assert_eq!(l.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.store.slots.load(Ordering::Acquire)
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
        self.store.counters.snapshot(self.len())
    }
}

impl<K, S> fmt::Debug for KeyedRateLimiter<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("quota", &self.quota())
            .field("keys", &self.len())
            .field("clock", &self.store.clock)
            .field("sweeper", &self.sweeper.is_some())
            .finish()
    }
}

impl<K, S> fmt::Debug for KeyedRateLimiterBuilder<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiterBuilder")
            .field("quota", &self.quota)
            .field("clock", &self.clock)
            .field("shards", &self.shards)
            .field("sweep_interval", &self.sweep_interval)
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
            .finish()
    }
}

#[cfg(feature = "tokio")]
impl<K, S> KeyedRateLimiter<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Takes `n` permits for `key`, waiting asynchronously on tokio's timer; returns the time
    /// waited. Slots are reserved at the first poll, so waiters are granted in that order,
    /// each woken once. At a full key cap with [`WhenFull::Deny`] it waits the cap's suggested
    /// time and tries again.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future before it completes cancels the reservation with the
    /// refund rule, so no capacity is lost.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] as for [`acquire_n`](KeyedRateLimiter::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(100).unwrap());
    /// assert!(l.acquire_async("k", 1).await.unwrap().is_zero());
    /// # }
    /// ```
    pub async fn acquire_async<Q>(&self, key: &Q, n: u64) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut waited = Duration::ZERO;
        loop {
            match self.reserve_then_sleep(key, n, None).await {
                Err(NotReserved::Full(wait)) => {
                    let wait = Duration::from_nanos(wait);
                    tokio::time::sleep(wait).await;
                    waited = waited.saturating_add(wait);
                }
                Err(NotReserved::Error(e)) => return Err(e),
                Ok(slept) => return Ok(waited.saturating_add(slept)),
            }
        }
    }

    /// Takes `n` permits for `key` if available within `timeout`, waiting asynchronously;
    /// otherwise returns at once with nothing reserved.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_async`](KeyedRateLimiter::acquire_async).
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] with the wait that would have been needed (or the key
    /// cap's suggested wait); [`AcquireError::Unrepresentable`] as for
    /// [`acquire_n`](KeyedRateLimiter::acquire_n).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// let l = tollgate::KeyedRateLimiter::<u8>::new(tollgate::Quota::per_minute(1).unwrap());
    /// l.acquire_async(&1, 1).await.unwrap();
    /// assert!(l.try_acquire_for_async(&1, 1, Duration::from_millis(10)).await.is_err());
    /// # }
    /// ```
    pub async fn try_acquire_for_async<Q>(
        &self,
        key: &Q,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        Ok(self
            .reserve_then_sleep(key, n, Some(duration_to_nanos(timeout)))
            .await?)
    }

    /// [`acquire_async`](KeyedRateLimiter::acquire_async) on an `Arc` with an owned key: the
    /// future is `'static`, for `tokio::spawn`.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_async`](KeyedRateLimiter::acquire_async).
    ///
    /// # Errors
    /// As [`acquire_async`](KeyedRateLimiter::acquire_async).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let l = Arc::new(tollgate::KeyedRateLimiter::<String>::new(tollgate::Quota::per_second(10).unwrap()));
    /// let task = tokio::spawn(l.clone().acquire_owned("k".to_string(), 1));
    /// assert!(task.await.unwrap().is_ok());
    /// # }
    /// ```
    pub async fn acquire_owned(self: Arc<Self>, key: K, n: u64) -> Result<Duration, AcquireError>
    where
        K: ToOwned<Owned = K>,
    {
        self.acquire_async(&key, n).await
    }

    async fn reserve_then_sleep<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Option<Nanos>,
    ) -> Result<Duration, NotReserved>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let r = self.reserve_ticket(key, n, max_wait)?;
        let cancel = self.canceller(key, r.tracked);
        Ok(crate::wait::sleep_until_ready(r.now, r.ticket, cancel).await)
    }
}

/// A reservation taken on a key: the ticket, the `now` it was taken at, and whether the key's
/// state holds it (false under [`WhenFull::AllowUntracked`]).
struct Reserved {
    ticket: Ticket,
    now: Nanos,
    tracked: bool,
}

/// Why no reservation was taken.
enum NotReserved {
    /// The key cap is reached ([`WhenFull::Deny`]); the suggested wait in ns.
    Full(Nanos),
    Error(AcquireError),
}

impl From<NotReserved> for AcquireError {
    /// For callers that do not wait out a full table: it is a rate limit with the cap's wait.
    fn from(e: NotReserved) -> AcquireError {
        match e {
            NotReserved::Full(wait) => AcquireError::RateLimited {
                retry_after: Duration::from_nanos(wait),
            },
            NotReserved::Error(e) => e,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
