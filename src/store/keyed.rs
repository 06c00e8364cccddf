//! The keyed store: one cell per key in a sharded table (`store::table`), with an exact key
//! cap (`store::cap`) and whole-table sweeps (`store::walk`). This file holds the store's
//! state and its decisions: the lookup, the insert of a new key, the walk under read guards.
//!
//! Concurrency contract with sweeping (see `store::evict`): a decision holds the key's shard
//! *read* guard while it runs on the cell; a sweep removes a key only under that shard's
//! *write* guard, and only if it is cold by the clock's [`max_skew`](crate::Clock::max_skew)
//! already (`cold_at + max_skew <= now`, `store::evict::is_cold`). A decision that finds the
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

use crate::cell::Algorithm;
use crate::engine::{Engine, Find, Found, Placed, Slot};
use crate::store::evict::{SweepCounters, SweepStats};
use crate::store::table::ShardedTable;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::Nanos;

pub use crate::store::when_full::WhenFull;

/// The shared state of a keyed limiter; the sweeper holds a `Weak` to it.
pub(crate) struct KeyedStore<K, A: Algorithm, S> {
    pub(crate) map: ShardedTable<K, A::Cell, S>,
    pub(crate) engine: Engine<A>,
    pub(crate) max_keys: usize,
    pub(crate) when_full: WhenFull,
    /// Keys tracked, counted *before* an insert and *after* a removal, so it bounds the map's
    /// length from above at every instant; an insert happens only if it can take a slot below
    /// `max_keys`. That makes the cap exact.
    pub(crate) slots: AtomicUsize,
    /// A lower bound on every tracked key's `cold_at` (`u64::MAX` when empty): while
    /// `now < earliest + max_skew` no key can be evicted (`store::evict::is_cold`), so a
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
    const KEYED: bool = true;

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
            map: ShardedTable::new(hasher, shards),
            engine,
            max_keys,
            when_full,
            slots: AtomicUsize::new(0),
            earliest: AtomicU64::new(u64::MAX),
            sweep_lock: Mutex::new(()),
            counters: SweepCounters::default(),
        }
    }

    /// The key's cell under its shard's read guard, if tracked.
    #[inline(always)]
    fn lookup<Q>(&self, key: &Q) -> Option<impl Deref<Target = A::Cell> + '_>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get(key)
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
        let hash = self.map.hash(key);
        let shard = self.map.shard(hash);
        // The owned key is made before the write lock, not under it (a `String` allocates).
        let mut owned = Some(key.to_owned());
        // Insert under the write guard and decide again there with a fresh `now` (the loom
        // model in `loom-tests/tests/sweeper.rs` transcribes this step).
        for attempt in 0..2 {
            {
                let mut table = shard.write();
                // Someone inserted it meanwhile: decide on theirs, under the write guard.
                if let Some((_, cell)) = table.find(hash, |(k, _)| k.borrow() == key) {
                    return Placed::Tracked(op(cell, clock.now()));
                }
                if self.take_slot() {
                    let cell = A::Cell::default();
                    let r = op(&cell, clock.now());
                    self.lower_earliest(&cell);
                    // `owned` is still there: every path that takes it returns.
                    let owned = owned.take().unwrap_or_else(|| key.to_owned());
                    table.insert_unique(hash, (owned, cell), self.map.rehash());
                    return Placed::Tracked(r);
                }
            }
            // Full (the write guard is dropped by now, so sweeping cannot deadlock on it).
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

    /// Runs `f` on every tracked cell, one shard at a time under its read guard (a quota
    /// change migrating every cell). Keys inserted meanwhile are inserted under the write
    /// guard, so either this walk sees them or they were decided under the new parameters.
    pub(crate) fn for_each_cell(&self, f: &dyn Fn(&A::Cell)) {
        for shard in self.map.shards() {
            for (_, cell) in shard.read().iter() {
                f(cell);
            }
        }
        // A change may lower every key's cold time (a looser quota): forget the bound so the
        // key cap's reclaim does not skip sweeps that would now free keys.
        self.forget_cold_bound();
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.load(Ordering::Acquire)
    }

    pub(crate) fn stats(&self) -> SweepStats {
        self.counters.snapshot(self.len())
    }
}

impl<K, A, S> KeyedStore<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Forgets `key` (removes its cell under the shard's write guard, so no decision is on it,
    /// and frees its slot under the key cap); whether it was tracked. Its next decision finds
    /// it missing and decides as a fresh key.
    pub(crate) fn remove_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.map.hash(key);
        let removed = {
            let mut table = self.map.shard(hash).write();
            table
                .find_entry(hash, |(k, _)| k.borrow() == key)
                .ok()
                .map(|entry| entry.remove().0)
        };
        // The key and its cell are dropped after the guard (a `String` frees, a spill too).
        match removed {
            Some(_) => {
                // After the removal: `slots` never undercounts the map.
                self.slots.fetch_sub(1, Ordering::AcqRel);
                true
            }
            None => false,
        }
    }
}
