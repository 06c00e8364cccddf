//! The keyed store: one cell per key in a sharded concurrent map, with an exact key cap and
//! whole-table sweeps.
//!
//! Concurrency contract with sweeping (see `store::sweep`): a decision holds the key's shard
//! *read* guard while it runs on the cell; a sweep removes a key only under that shard's
//! *write* guard, and only if it is cold by the clock's [`max_skew`](crate::Clock::max_skew)
//! already (`cold_at + max_skew <= now`, `store::sweep::is_cold`). A decision that finds the
//! key missing reads `now` after its lookup: the lock orders that reading after the sweep's,
//! so it is at least the sweep's minus `max_skew` (exactly the sweep's or later on a clock
//! ordered across threads, such as `StdClock`; up to `max_skew` earlier on the TSC, which the
//! default clock reads on most x86_64 machines), hence at or after the evicted key's `cold_at`,
//! and it sees a fresh key exactly where it would have seen the cold one. A decision that finds
//! the key may use a `now` read before the lookup: on a stored cell an earlier `now` only makes
//! a decision stricter ([`decide_on_shard`]).

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::ops::Deref;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;

use crate::algorithm::Algorithm;
use crate::engine::{Engine, Find, Found, Placed, Slot};
use crate::store::sweep::{evict_cold, is_cold, SweepCounters, SweepStats};
use crate::sweeper::Sweep;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering, TryLockError};
use crate::Nanos;

/// What a keyed limiter does with a *new* key when its [`max_keys`] cap is reached and
/// reclaiming cold keys freed nothing. Keys already tracked are never affected by the cap.
///
/// [`max_keys`]: crate::KeyedRateLimiterBuilder::max_keys
///
/// ```
/// use std::num::NonZeroUsize;
/// use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};
///
/// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
///     .clock(ManualClock::new())
///     .max_keys(NonZeroUsize::MIN)
///     .when_full(WhenFull::Deny)
///     .build();
/// assert!(limiter.try_acquire(&1));
/// assert!(!limiter.try_acquire(&2)); // table full, key 1 still hot
/// assert!(!limiter.peek(&2).allowed); // and a peek says the same
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhenFull {
    /// Refuse the new key. Checks report `allowed: false`, `remaining: 0` and a `retry_after`
    /// (also used as `reset_after`) of the time until the earliest tracked key can be
    /// reclaimed, at least 1 ns and at most the quota's period or tolerance (judged from a
    /// lower bound on cold times unless the check swept: never later than that key turns
    /// cold, earlier if it got busier since). A peek of the new key reports the same.
    /// `try_acquire_n` returns
    /// [`AcquireError::RateLimited`](crate::AcquireError::RateLimited) with that wait;
    /// blocking and async `acquire` wait for a slot and try again; the timed waits return
    /// `RateLimited` at once when a slot plus the key's own wait would end past the timeout.
    /// The safe default: the cap is never a way around the limit.
    #[default]
    Deny,
    /// Decide for the new key as for a fresh key (a full bucket) and store nothing: the request
    /// is limited only by its own cost against the burst. Availability over strictness: under
    /// a flood of distinct keys each one gets its burst.
    AllowUntracked,
}

/// Buckets a sweep walks per hold of a shard's write lock (at most this many keys; about 1,300
/// at hashbrown's load factor). Measured on 10M cold keys (64 shards of 160k): a hold takes
/// 23 us at the median, 33 us at p99 (`u64` keys; `String` keys 27 / 66 us), whatever the
/// shard's size. Holds of a millisecond or more also occur, about once per 10M-key sweep and
/// with 1024-bucket chunks as often as with 4096: this VM being descheduled (steal time), not
/// the walk.
pub(crate) const SWEEP_CHUNK: usize = 2048;

/// How many times a sweep starts a shard over when inserts moved its keys between chunks.
const SWEEP_RESTARTS: usize = 2;

/// The longest a sweep waits between two chunks for decisions that were waiting on the last
/// one (a parked thread's wake-up takes tens of microseconds).
const SWEEP_HANDOFF: Duration = Duration::from_millis(1);

/// The shared state of a keyed limiter; the sweeper holds a `Weak` to it.
pub(crate) struct KeyedStore<K, A: Algorithm, S> {
    pub(crate) map: DashMap<K, A::Cell, S>,
    pub(crate) engine: Engine<A>,
    pub(crate) max_keys: usize,
    pub(crate) when_full: WhenFull,
    /// Keys tracked, counted *before* an insert and *after* a removal, so it bounds the map's
    /// length from above at every instant; an insert happens only if it can take a slot below
    /// `max_keys`. That makes the cap exact.
    pub(crate) slots: AtomicUsize,
    /// A lower bound on every tracked key's `cold_at` (`u64::MAX` when empty): while
    /// `now < earliest + max_skew` no key can be evicted (`store::sweep::is_cold`), so a
    /// reclaim at the cap can skip its sweep.
    /// Lowered by every insert and cancel, recomputed by every sweep.
    ///
    /// A sweep first sets it to `u64::MAX`, then lowers it with each surviving key's `cold_at`
    /// as it walks; inserts and cancels lower it with the state they leave. Every key is either
    /// walked by the sweep after the reset, or written after its shard was walked, whose own
    /// `fetch_min` then comes after the reset; so when a sweep completes, `earliest` is at
    /// most every tracked key's `cold_at` (decisions only raise it). It is only read under the
    /// sweep lock, when no sweep is half done.
    pub(crate) earliest: AtomicU64,
    /// Serialises whole sweeps (background, `sweep_now`, reclaim at the cap).
    pub(crate) sweep_lock: Mutex<()>,
    pub(crate) counters: SweepCounters,
    /// Decisions waiting for a write-locked shard right now (see `let_waiting_decisions_in`).
    waiting: AtomicUsize,
}

/// A key of a keyed store: the [`Slot`] the method family runs on.
pub(crate) struct KeySlot<'a, K, Q: ?Sized, A: Algorithm, S> {
    pub(crate) store: &'a KeyedStore<K, A, S>,
    pub(crate) key: &'a Q,
}

impl<K, Q, A, S> Slot<A> for KeySlot<'_, K, Q, A, S>
where
    K: Hash + Eq + Send + Sync + Borrow<Q> + 'static,
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    #[inline(always)]
    fn decide<R>(&self, op: impl Fn(&A::Cell, Nanos) -> R) -> Placed<R> {
        self.store.decide(self.key, op)
    }

    #[inline(always)]
    fn decide_then<R, T>(
        &self,
        op: impl Fn(&A::Cell, Nanos) -> R,
        then: impl FnOnce(Placed<R>) -> T,
    ) -> T {
        self.store.decide_then(self.key, op, then)
    }

    fn slot_free_at(&self, now: Nanos) -> Nanos {
        self.store.slot_free_at(now)
    }
}

impl<K, Q, A, S> Find<A> for KeySlot<'_, K, Q, A, S>
where
    K: Hash + Eq + Send + Sync + Borrow<Q> + 'static,
    Q: Hash + Eq + ?Sized,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn find<R>(&self, f: impl FnOnce(Found<'_, A::Cell>, Nanos) -> R) -> R {
        self.store.find(self.key, f)
    }

    fn lowered(&self, cell: &A::Cell) {
        self.store.lower_earliest(cell);
    }
}

/// A tracked key's cell, borrowed: the cell and the read guard of its shard, which keeps the
/// cell in place (what dashmap's `Ref` is, without the key).
pub(crate) struct CellRef<G, C> {
    _guard: G,
    cell: *const C,
}

impl<G, C> CellRef<G, C> {
    /// Borrows `cell` for as long as `guard` lives.
    ///
    /// # Safety
    ///
    /// `cell` must point to a valid `C` that stays valid, in place and not mutably borrowed
    /// for as long as `guard` is alive: in [`KeyedStore::lookup`], `cell` is in the table
    /// `guard` read-locks, so no writer can remove, move or change it before the guard drops.
    #[inline(always)]
    unsafe fn new(guard: G, cell: *const C) -> Self {
        CellRef {
            _guard: guard,
            cell,
        }
    }
}

impl<G, C> Deref for CellRef<G, C> {
    type Target = C;

    #[inline(always)]
    fn deref(&self) -> &C {
        // SAFETY: `CellRef::new`'s contract: `cell` stays valid and shared while `_guard`,
        // which `self` owns, is alive; the returned borrow cannot outlive `self`.
        unsafe { &*self.cell }
    }
}

/// What [`decide_on_shard`] did.
pub(crate) enum OnShard<R> {
    /// Decided: on the stored cell, or as a fresh key that stores nothing.
    Decided(R),
    /// The key is absent and the decision (this one, made on a scratch fresh cell) stores
    /// something: insert the key under the shard's write guard and decide again there.
    MustInsert(R),
}

/// The read side of a decision's protocol with sweeping (module docs). Shared with the loom
/// model of the sweeper (through `tollgate::__loom`), which runs it over its own lock-guarded map.
///
/// `now` is read before the lookup, so the clock read overlaps the lookup's cache misses
/// instead of waiting for them. On a stored cell an early `now` is safe: it can only make the
/// decision stricter, since `max(tat, now) - now` only grows as `now` shrinks. On a miss it is
/// not: the key may have been evicted after `now` was read, with a state above it. So a miss
/// reads `now` again, after `lookup` took (and released) the shard's read guard, which orders
/// it after any sweep that removed the key under the write guard: that `now` is at least the
/// sweep's, where the evicted key and a fresh one decide alike.
///
/// Absent is the same state as a fresh cell, so a miss decides on a scratch one: if it stays
/// fresh (a peek, a request over the burst, a wait past the timeout) the answer is already
/// exact and nothing needs inserting, so denials of unknown keys never grow the map.
///
/// What was done goes to `then`, on each path separately: a large result (a full decision)
/// then stays in registers on the hit path instead of meeting the miss path's in memory.
#[inline(always)]
pub(crate) fn decide_on_shard<G, C, R, T>(
    lookup: impl FnOnce() -> Option<G>,
    now: impl Fn() -> Nanos,
    op: &impl Fn(&C, Nanos) -> R,
    is_fresh: impl Fn(&C) -> bool,
    then: impl FnOnce(OnShard<R>) -> T,
) -> T
where
    G: Deref<Target = C>,
    C: Default,
{
    let early = now();
    if let Some(cell) = lookup() {
        // The guard is held until the decision is done.
        let r = op(&cell, early);
        drop(cell);
        return then(OnShard::Decided(r));
    }
    then(decide_on_scratch(now, op, is_fresh))
}

/// The miss half of [`decide_on_shard`], kept out of line so the hit path inlines `op`.
#[cold]
#[inline(never)]
fn decide_on_scratch<C, R>(
    now: impl Fn() -> Nanos,
    op: &impl Fn(&C, Nanos) -> R,
    is_fresh: impl Fn(&C) -> bool,
) -> OnShard<R>
where
    C: Default,
{
    let scratch = C::default();
    let fresh = op(&scratch, now());
    if is_fresh(&scratch) {
        OnShard::Decided(fresh)
    } else {
        OnShard::MustInsert(fresh)
    }
}

impl<K, A, S> KeyedStore<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(
        engine: Engine<A>,
        hasher: S,
        shards: usize,
        max_keys: usize,
        when_full: WhenFull,
    ) -> Self {
        KeyedStore {
            map: DashMap::with_capacity_and_hasher_and_shard_amount(0, hasher, shards),
            engine,
            max_keys,
            when_full,
            slots: AtomicUsize::new(0),
            earliest: AtomicU64::new(u64::MAX),
            sweep_lock: Mutex::new(()),
            counters: SweepCounters::default(),
            waiting: AtomicUsize::new(0),
        }
    }

    /// The key's cell under its shard's read guard, if tracked: dashmap's `get`, written out
    /// so that it inlines into the decision (dashmap's is a call, and builds a `Ref` of three
    /// pointers): hash once, pick the shard as dashmap does, probe its table.
    #[inline(always)]
    fn lookup<Q>(&self, key: &Q) -> Option<CellRef<impl Sized + '_, A::Cell>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.map.hasher().hash_one(key);
        let shard = &self.map.shards()[self.map.determine_shard(hash as usize)];
        // `try_read` first: the same cost as `read` when the shard is free, and a way to tell
        // a sweep that a decision is waiting when it is not.
        let table = match shard.try_read() {
            Some(table) => table,
            None => self.read_waiting(shard),
        };
        let bucket = table.find(hash, |(k, _)| k.borrow() == key)?;
        // SAFETY: `bucket` was just found, full, in the table the guard `table` read-locks:
        // no writer can remove or move the entry while that guard lives, and it lives past
        // this borrow (which only becomes a pointer) and on in the `CellRef`.
        let cell: *const A::Cell = unsafe { bucket.as_ref() }.1.get();
        // SAFETY: `cell` points into the table `table` read-locks, and `CellRef` owns that
        // guard (moving a guard moves no data: the table stays in the shard's lock).
        Some(unsafe { CellRef::new(table, cell) })
    }

    /// A shard's read guard for a decision that found it write-locked (a sweep's chunk, or an
    /// insert), counted in `waiting` while it waits so that the sweep lets it in.
    #[cold]
    #[inline(never)]
    fn read_waiting<'a, T>(&self, lock: &'a dashmap::RwLock<T>) -> dashmap::RwLockReadGuard<'a, T> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let guard = lock.read();
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        guard
    }

    /// Between two chunks of a sweep: lets every decision that waited for the last one on the
    /// read side (a tracked key's lookup, counted in `read_waiting`; a new key's insert takes
    /// the write lock and is not counted) take its read lock before the sweep write-locks
    /// again. dashmap's lock is not fair: a waiting
    /// reader parks after a few microseconds, and a writer that re-locks at once wins every
    /// race against its wake-up, so without this a decision could wait out a whole shard's
    /// walk, not one chunk (measured: 1.6-4.6 ms at 10M keys). Bounded by [`SWEEP_HANDOFF`],
    /// so decisions arriving without end cannot stall the sweep.
    fn let_waiting_decisions_in(&self) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        let deadline = Instant::now() + SWEEP_HANDOFF;
        while self.waiting.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }

    /// Runs `op` on the key's cell (with `now` read as [`decide_on_shard`] explains), inserting
    /// the key only when `op` leaves a fresh cell changed.
    #[inline(always)]
    pub(crate) fn decide<Q, R>(&self, key: &Q, op: impl Fn(&A::Cell, Nanos) -> R) -> Placed<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_then(key, op, |placed| placed)
    }

    /// `then(self.decide(key, op))`, with `then` applied on each path (see
    /// [`decide_on_shard`]).
    #[inline(always)]
    pub(crate) fn decide_then<Q, R, T>(
        &self,
        key: &Q,
        op: impl Fn(&A::Cell, Nanos) -> R,
        then: impl FnOnce(Placed<R>) -> T,
    ) -> T
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let clock = &self.engine.clock;
        let alg = &self.engine.alg;
        decide_on_shard(
            #[inline(always)]
            || self.lookup(key),
            #[inline(always)]
            || clock.now(),
            &op,
            |c| alg.is_fresh(c),
            #[inline(always)]
            |on| match on {
                OnShard::Decided(r) => then(Placed::Tracked(r)),
                OnShard::MustInsert(fresh) => then(self.insert(key, &op, fresh)),
            },
        )
    }

    /// A new key's decision that stores: insert it (within the cap), or apply the cap's policy.
    #[cold]
    #[inline(never)]
    fn insert<Q, R>(&self, key: &Q, op: impl Fn(&A::Cell, Nanos) -> R, fresh: R) -> Placed<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let clock = &self.engine.clock;
        // Insert under the write guard and decide again there with a fresh `now` (the loom
        // model in `loom-tests/tests/sweeper.rs` transcribes this step).
        for attempt in 0..2 {
            match self.map.entry(key.to_owned()) {
                // Someone inserted it meanwhile: decide on theirs, under the write guard.
                Entry::Occupied(e) => return Placed::Tracked(op(e.get(), clock.now())),
                Entry::Vacant(e) => {
                    if self.take_slot() {
                        let cell = A::Cell::default();
                        let r = op(&cell, clock.now());
                        self.lower_earliest(&cell);
                        e.insert(cell);
                        return Placed::Tracked(r);
                    }
                }
            }
            // Full (the entry guard is dropped by now, so sweeping cannot deadlock on it).
            if attempt == 0 {
                self.reclaim();
            }
        }
        match self.when_full {
            WhenFull::AllowUntracked => Placed::Untracked(fresh),
            WhenFull::Deny => Placed::Full(self.full_retry_after()),
        }
    }

    /// What is there for `key` now, creating nothing. A missing key at a full cap that would
    /// refuse it reports `Full` with the wait the check would report, so a peek agrees with
    /// the check that would follow ([`cap_refusal`](Self::cap_refusal)).
    pub(crate) fn find<Q, R>(&self, key: &Q, f: impl FnOnce(Found<'_, A::Cell>, Nanos) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let tracked = self.lookup(key);
        let now = self.engine.clock.now(); // after the lookup: a miss needs it
        match tracked.as_deref() {
            Some(cell) => f(Found::Cell(cell), now),
            None => match self.cap_refusal(now) {
                Some(wait) => f(Found::Full(wait), now),
                None => f(Found::Fresh, now),
            },
        }
    }

    /// What a decision that stores a new key at `now` would meet at the cap, found without
    /// evicting anything: `None` if it gets in (a slot is free, a sweep would free one, or
    /// `WhenFull::AllowUntracked` decides it untracked), else the wait its refusal reports.
    ///
    /// It follows [`insert`](Self::insert) step by step. Where the check skips its reclaim
    /// sweep (the lower bound `earliest` says no key can be cold yet) the refusal's wait comes
    /// from that bound, as the check's does. Where the check would sweep, a sweep evicts
    /// every key cold at `now` and then leaves `earliest` at the exact smallest cold time of
    /// the keys it kept; so this walks the table read-only for the same two facts (a cold
    /// key: the check gets in; otherwise the smallest cold time), rather than trusting a bound
    /// that keys grown busier since it was taken have left behind.
    fn cap_refusal(&self, now: Nanos) -> Option<Nanos> {
        if self.when_full != WhenFull::Deny || self.slots.load(Ordering::Acquire) < self.max_keys {
            return None;
        }
        if !self.may_reclaim(now) {
            return Some(self.full_wait(self.earliest.load(Ordering::Acquire), now));
        }
        self.min_cold_at(now).map(|min| self.full_wait(min, now))
    }

    /// The smallest cold time of the tracked keys (`u64::MAX` if none), or `None` as soon as
    /// one is cold at `now` by the clock's skew (a sweep would evict it). Walks the table
    /// under each shard's read lock in turn, changing nothing.
    fn min_cold_at(&self, now: Nanos) -> Option<Nanos> {
        let p = self.engine.params.load_full();
        let skew = self.engine.clock.max_skew();
        let mut min = Nanos::MAX;
        for entry in self.map.iter() {
            let at = self.engine.alg.cold_at(entry.value(), &p);
            if is_cold(at, now, skew) {
                return None;
            }
            min = min.min(at);
        }
        Some(min)
    }

    /// The earliest time at or after `now` when a new key can take a slot, judged from the
    /// tracked keys as they are now (a read-only walk when the table is full): `now` if a slot
    /// is free or some key is cold, else when the earliest key turns cold by the clock's skew.
    /// Later decisions can only make it later. The waiting methods use it at the cap to
    /// refuse at once a wait that could not end by their deadline.
    pub(crate) fn slot_free_at(&self, now: Nanos) -> Nanos {
        if self.slots.load(Ordering::Acquire) < self.max_keys {
            return now;
        }
        match self.min_cold_at(now) {
            Some(min) => min.saturating_add(self.engine.clock.max_skew()).max(now),
            None => now,
        }
    }

    /// Whether a sweep at `now` could evict any key: some key is cold by the clock's skew
    /// (the eviction rule, `store::sweep::is_cold`, applied to the lower bound).
    fn may_reclaim(&self, now: Nanos) -> bool {
        let earliest = self.earliest.load(Ordering::Acquire);
        is_cold(earliest, now, self.engine.clock.max_skew())
    }

    fn take_slot(&self) -> bool {
        self.slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_keys).then(|| n + 1)
            })
            .is_ok()
    }

    /// Lowers the cold-time bound to `cell`'s (after an insert or a cancel).
    pub(crate) fn lower_earliest(&self, cell: &A::Cell) {
        let at = self
            .engine
            .alg
            .cold_at(cell, &self.engine.params.load_full());
        self.earliest.fetch_min(at, Ordering::AcqRel);
    }

    /// At the cap: sweep, unless a sweep is running right now (it is reclaiming already) or
    /// no key can be cold yet (then a sweep would walk every key for nothing, which under a
    /// flood of new keys would make each one cost a full scan).
    fn reclaim(&self) {
        let _guard = match self.sweep_lock.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if self.may_reclaim(self.engine.clock.now()) {
            self.sweep_locked(&|| false);
        }
    }

    /// [`WhenFull::Deny`]'s suggested wait: until the earliest tracked key can be evicted
    /// (`earliest + max_skew - now`, from the lower bound `earliest`, exact right after a
    /// complete sweep), at least 1 ns, at most the longer of the quota's period and tolerance.
    fn full_retry_after(&self) -> Nanos {
        let now = self.engine.clock.now();
        self.full_wait(self.earliest.load(Ordering::Acquire), now)
    }

    /// The suggested wait at `now` when the earliest tracked key turns cold at `cold_at`.
    fn full_wait(&self, cold_at: Nanos, now: Nanos) -> Nanos {
        let q = self.engine.quota();
        let cap = q.tau().max(q.period_nanos()).max(1);
        cold_at
            .saturating_add(self.engine.clock.max_skew())
            .saturating_sub(now)
            .clamp(1, cap)
    }

    /// Forgets the lower bound on cold times: the key cap's next reclaim sweeps.
    pub(crate) fn forget_cold_bound(&self) {
        self.earliest.store(0, Ordering::Release);
    }

    /// Runs `f` on every tracked cell, one shard at a time under its read guard (a quota
    /// change migrating every cell). Keys inserted meanwhile are inserted under the write
    /// guard, so either this walk sees them or they were decided under the new parameters.
    pub(crate) fn for_each_cell(&self, f: &dyn Fn(&A::Cell)) {
        for shard in self.map.shards() {
            let table = shard.read();
            // SAFETY: the iterator does not outlive `table`, a read guard held throughout.
            for bucket in unsafe { table.iter() } {
                // SAFETY: a full bucket the iterator yielded from `table`, still read-locked
                // (no entry can be removed or moved); the borrow ends with `f`'s call.
                let cell = unsafe { bucket.as_ref() }.1.get();
                f(cell);
            }
        }
        // A change may lower every key's cold time (a looser quota): forget the bound so the
        // key cap's reclaim does not skip sweeps that would now free keys.
        self.forget_cold_bound();
    }

    /// A whole sweep; `stop` is polled between chunks.
    pub(crate) fn sweep_all(&self, stop: &dyn Fn() -> bool) -> usize {
        let _serial = self
            .sweep_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.sweep_locked(stop)
    }

    /// A whole sweep; the caller holds `sweep_lock`.
    ///
    /// Each shard is walked in chunks of [`SWEEP_CHUNK`] buckets, one write-lock hold per
    /// chunk, so a decision waits for at most one chunk however large the table: the pause is
    /// bounded by the chunk, not by the shard. Coldness is judged under the lock with `now`
    /// read under it, chunk by chunk, so eviction stays lossless (module docs).
    ///
    /// Between two chunks an insert may have moved keys (a resize, or hashbrown's rehash in
    /// place when tombstones use up the free slots). A key moved into the part already walked
    /// would be missed, so the walk starts the shard over when the table's shape changed
    /// (`buckets` and `capacity`, read at the end of one chunk and the start of the next; an
    /// insert into a free slot changes neither). After [`SWEEP_RESTARTS`] restarts it goes on
    /// without, and forgets the lower bound on cold times (`earliest`): a missed key is only
    /// kept until a later sweep, and the key cap's reclaim then sweeps rather than skips.
    pub(crate) fn sweep_locked(&self, stop: &dyn Fn() -> bool) -> usize {
        let started = Instant::now();
        self.earliest.store(Nanos::MAX, Ordering::Release);
        let mut evicted = 0usize;
        let mut longest = Duration::ZERO;
        // Evicted keys are moved here and dropped after the shard lock is released: freeing a
        // million `String`s is most of a sweep's cost, and none of it needs the lock.
        // Room for one chunk's keys, allocated before any lock is taken.
        let mut graveyard = Vec::with_capacity(SWEEP_CHUNK);
        let alg = &self.engine.alg;
        let skew = self.engine.clock.max_skew();
        let mut complete = true;
        'shards: for shard in self.map.shards() {
            let mut pos = 0usize;
            let mut shape = None;
            let mut restarts = 0;
            loop {
                if stop() {
                    break 'shards;
                }
                let mut table = shard.write();
                let held = Instant::now();
                // Read under the lock: any decision after this one sees a later `now` (less
                // the clock's skew, which the rule allows for).
                let now = self.engine.clock.now();
                let p = self.engine.params.load_full();
                if shape.is_some_and(|s| s != (table.buckets(), table.capacity())) {
                    if restarts < SWEEP_RESTARTS {
                        restarts += 1;
                        pos = 0;
                    } else {
                        complete = false;
                    }
                }
                let end = table.buckets().min(pos.saturating_add(SWEEP_CHUNK));
                let swept = evict_cold(
                    now,
                    skew,
                    |cell| alg.cold_at(cell, &p),
                    |keep| {
                        // `table` is held exclusively (write guard) for the whole loop, and
                        // `end <= buckets()`, read under it. Removing a bucket (hashbrown's
                        // `erase` under the hood) leaves the other buckets where they are, as
                        // `HashMap::retain` relies on, so `buckets()` and each index hold.
                        for i in pos..end {
                            // SAFETY: `i < end <= table.buckets()`.
                            if !unsafe { table.is_bucket_full(i) } {
                                continue;
                            }
                            // SAFETY: `i < buckets()`, and the table is allocated: a bucket of
                            // the unallocated empty table is never full.
                            let bucket = unsafe { table.bucket(i) };
                            // SAFETY: a full bucket of the locked table; the borrow ends with
                            // `keep`'s call, before anything is removed.
                            let cell = unsafe { bucket.as_ref() }.1.get();
                            if !keep(cell) {
                                // SAFETY: `bucket` is full and in `table` (locked, unchanged
                                // since it was read), and is not used again.
                                graveyard.push(unsafe { table.remove(bucket) });
                            }
                        }
                    },
                );
                shape = Some((table.buckets(), table.capacity()));
                let done = end >= table.buckets();
                drop(table);
                longest = longest.max(held.elapsed());
                graveyard.clear();
                if swept.evicted > 0 {
                    // After the removal: `slots` never undercounts the map.
                    self.slots.fetch_sub(swept.evicted, Ordering::AcqRel);
                }
                self.earliest.fetch_min(swept.min_cold_at, Ordering::AcqRel);
                evicted += swept.evicted;
                if done {
                    break;
                }
                pos = end;
                self.let_waiting_decisions_in();
            }
        }
        if !complete {
            self.earliest.store(0, Ordering::Release);
        }
        self.counters.record(evicted, started.elapsed(), longest);
        evicted
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.load(Ordering::Acquire)
    }

    pub(crate) fn stats(&self) -> SweepStats {
        self.counters.snapshot(self.len())
    }
}

impl<K, A, S> Sweep for KeyedStore<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn sweep(&self, stop: &dyn Fn() -> bool) -> usize {
        self.sweep_all(stop)
    }
}
