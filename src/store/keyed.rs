//! The keyed store: one cell per key in a sharded table (`store::table`), with an exact key
//! cap (`store::cap`) and whole-table sweeps (`store::walk`), for every keyed limiter. This
//! file holds the store's state and what it does under its locks (a lookup is the table's own
//! `get`, under the shard's read guard): the insert of a new key under the shard's write
//! guard, the walk under read guards, the removal of a key. It is generic over its cells:
//! whether one may be evicted now it asks their rule through
//! [`Evict`](crate::store::evict::Evict), which the rate limiters' engine answers (a cell
//! cold by the clock's skew) and the keyed concurrency limiter's store for its semaphore
//! cells (an idle one; `concurrency::sem_store`, whose docs give its protocol). The
//! decisions on a key (a hit, a miss on a scratch fresh cell, inserting only what stores, the
//! key cap's answers) are the holders', in `engine::keyed` and `concurrency::sem_store`.
//!
//! Rate cells' concurrency contract with sweeping (see `store::evict`): a decision holds the
//! key's shard *read* guard while it runs on the cell; a sweep removes a key only under that
//! shard's *write* guard, and only if it is cold by the clock's
//! [`max_skew`](crate::Clock::max_skew) already (`cold_at + max_skew <= now`,
//! `store::evict::is_cold`). A decision that finds the key missing reads `now` after its
//! lookup: the lock orders that reading after the sweep's,
//! so it is at least the sweep's minus `max_skew` (exactly the sweep's or later on a clock
//! ordered across threads, such as `StdClock`; up to `max_skew` earlier on the TSC, which the
//! default clock reads on most x86_64 machines), hence at or after the evicted key's `cold_at`,
//! and it sees a fresh key exactly where it would have seen the cold one. A decision that finds
//! the key may use a `now` read before the lookup: on a stored cell an earlier `now` only makes
//! a decision stricter (`engine::decide_on_shard`).

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::num::NonZeroUsize;

use crate::store::evict::{SweepCounters, SweepStats};
use crate::store::table::ShardedTable;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};

pub use crate::store::when_full::WhenFull;

/// A keyed limiter's table of cells `C` by key `K`, with its key cap and sweep state.
pub(crate) struct KeyedStore<K, C, S> {
    pub(crate) map: ShardedTable<K, C, S>,
    pub(crate) max_keys: usize,
    pub(crate) when_full: WhenFull,
    /// Keys tracked, counted *before* an insert and *after* a removal, so it bounds the map's
    /// length from above at every instant; an insert happens only if it can take a slot below
    /// `max_keys`. That makes the cap exact.
    pub(crate) slots: AtomicUsize,
    /// A lower bound on every tracked key's `cold_at` (`u64::MAX` when empty): while
    /// `now < earliest + max_skew` no key can be evicted (`store::evict::is_cold`), so a
    /// reclaim at the cap can skip its sweep. (Kept for every rule; read only by one that
    /// gives such bounds: the rate cells' cold times.)
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

impl<K, C, S> KeyedStore<K, C, S>
where
    K: Hash + Eq,
    S: BuildHasher,
{
    /// An empty table; `max_keys: None` is kept as `usize::MAX`, a cap no count of keys can
    /// exceed.
    pub(crate) fn new(
        hasher: S,
        shards: usize,
        max_keys: Option<NonZeroUsize>,
        when_full: WhenFull,
    ) -> Self {
        KeyedStore {
            map: ShardedTable::new(hasher, shards),
            max_keys: max_keys.map_or(usize::MAX, NonZeroUsize::get),
            when_full,
            slots: AtomicUsize::new(0),
            earliest: AtomicU64::new(u64::MAX),
            sweep_lock: Mutex::new(()),
            counters: SweepCounters::default(),
        }
    }

    /// The key cap, if one was set (`max_keys` keeps "no cap" as `usize::MAX`).
    pub(crate) fn key_cap(&self) -> Option<NonZeroUsize> {
        NonZeroUsize::new(self.max_keys).filter(|n| n.get() != usize::MAX)
    }

    /// One try at storing `key` (hash `hash`) under its shard's write guard: if it is there
    /// (someone inserted it meanwhile), `op` on its cell; else `admit` (an answer instead of
    /// an insert, `Err`, or what `make` needs), then, if a slot below the cap is free, `op` on
    /// the cell `make` gives with the key (taken only here: a `String` key is best made before
    /// the lock), `stored` told of the state it left, and the cell inserted. `None` when the
    /// cap is full (the guard is dropped by then).
    pub(crate) fn try_insert<Q, T, R>(
        &self,
        key: &Q,
        hash: u64,
        admit: impl FnOnce() -> Result<T, R>,
        make: impl FnOnce(T) -> (K, C),
        op: impl Fn(&C) -> R,
        stored: impl FnOnce(&C),
    ) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let mut table = self.map.shard(hash).write();
        if let Some((_, cell)) = table.find(hash, |(k, _)| k.borrow() == key) {
            return Some(op(cell));
        }
        let admitted = match admit() {
            Ok(t) => t,
            Err(r) => return Some(r),
        };
        if !self.take_slot() {
            return None;
        }
        let (owned, cell) = make(admitted);
        let r = op(&cell);
        stored(&cell);
        table.insert_unique(hash, (owned, cell), self.map.rehash());
        Some(r)
    }

    /// Runs `f` on every tracked cell, one shard at a time under its read guard (a quota
    /// change migrating every cell). Keys inserted meanwhile are inserted under the write
    /// guard, so either this walk sees them or they were decided under the new parameters.
    pub(crate) fn for_each_cell(&self, f: &dyn Fn(&C)) {
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
