//! The keyed concurrency limiter's store: one boxed [`SemCell`] per key in the sharded table
//! (`store::table`), with the exact key cap (`store::cap::take_slot`), the cap's policy
//! ([`WhenFull`]), and a chunked sweep that evicts idle keys.
//!
//! **Eviction.** A key with nothing in flight and nobody waiting decides like a new key, so it
//! carries no information. A sweep evicts it under its shard's *write* guard by closing the
//! cell (`SemCell::try_close`: one CAS from an idle word to `CLOSED`), then removes it.
//! Every acquire looks its key up and takes or queues under the shard's *read* guard, so no
//! acquire is between its lookup and its CAS while a sweep holds the write guard; and once a
//! cell is closed no permit is granted on it (an acquire meeting `CLOSED` looks again).
//! Permits and waiters hold a pointer to the cell, not the guard (`concurrency::pinned`, which
//! states why it stays valid): cells are boxed, so the table moving its entries does not move
//! them, and a cell is freed only after it was closed (so nothing was in flight, queued or
//! refused unseen on it) and its mutex was taken once more (`SemCell::quiesce`), after the
//! guard was released.
//!
//! **A new limit** ([`set_limit`](SemStore::set_limit)) is stored, then set on every cell, one
//! shard at a time under its *read* guard. A new key's cell takes the limit read under the
//! shard's *write* guard, so either that walk finds the cell or the cell was made with the
//! new limit: no key keeps the old one once `set_limit` has returned.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use crate::cell::semaphore::{SemCell, Take};
use crate::concurrency::permit::Held;
use crate::concurrency::wait::{begin, busy, cell_count, exceeds, Step};
use crate::decision::AcquireError;
use crate::meter::Meter;
use crate::store::cap::take_slot;
use crate::store::evict::{SweepCounters, SweepStats};
use crate::store::sweeper::Sweep;
use crate::store::table::ShardedTable;
use crate::store::walk::SWEEP_CHUNK;
use crate::store::when_full::WhenFull;
use crate::sync::{unlock_fair, AtomicU32, AtomicUsize, Mutex, Ordering, TryLockError};

/// The shared state of a keyed concurrency limiter; the sweeper holds a `Weak` to it.
pub(crate) struct SemStore<K, S> {
    map: ShardedTable<K, Box<SemCell>, S>,
    /// The limit of a new key's cell (every tracked cell's too, once `set_limit` returns).
    limit: AtomicU32,
    /// Serialises `set_limit`s, so the last one's walk is the last to set any cell.
    set_lock: Mutex<()>,
    max_keys: usize,
    when_full: WhenFull,
    /// Keys tracked: counted before an insert and after a removal (the exact cap).
    slots: AtomicUsize,
    /// Serialises whole sweeps (background, `sweep_now`, reclaim at the cap).
    sweep_lock: Mutex<()>,
    counters: SweepCounters,
    /// The limiter's meter (here, so that sweeps report keys tracked and evictions).
    pub(crate) meter: Meter,
}

impl<K, S> SemStore<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(
        limit: u32,
        hasher: S,
        shards: usize,
        max_keys: usize,
        when_full: WhenFull,
        meter: Meter,
    ) -> Self {
        SemStore {
            map: ShardedTable::new(hasher, shards),
            limit: AtomicU32::new(limit),
            set_lock: Mutex::new(()),
            max_keys,
            when_full,
            slots: AtomicUsize::new(0),
            sweep_lock: Mutex::new(()),
            counters: SweepCounters::default(),
            meter,
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Acquire)
    }

    /// Makes `limit` (a valid one) every key's (module docs): new keys' at once, each tracked
    /// key's as the walk reaches it, all of them before this returns.
    pub(crate) fn set_limit(&self, limit: u32) {
        let _serial = self.set_lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.limit.store(limit, Ordering::Release);
        for shard in self.map.shards() {
            for (_, cell) in shard.read().iter() {
                // Not closed: a sweep closes a cell only under the write guard, and removes
                // it under the same hold.
                cell.set_limit(limit);
            }
        }
    }

    /// Takes `n` permits for `key` now, or refuses: the non-waiting acquire. The hot path (a
    /// tracked key whose permits are free) is the lookup and one CAS, with nothing else
    /// inlined around it; everything else goes through [`begin`](Self::begin).
    #[inline(always)]
    pub(crate) fn try_now<Q>(&self, key: &Q, n: u64) -> Result<Held, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if n > 0 {
            if let Some(guard) = self.map.get(key) {
                let k = cell_count(n);
                if let Take::Granted(_) = guard.try_take(k) {
                    // As in `begin`: the permits now in flight keep the cell from eviction.
                    return Ok(Held::new(&guard, k));
                }
            }
        }
        self.try_now_slow(key, n)
    }

    #[cold]
    #[inline(never)]
    fn try_now_slow<Q>(&self, key: &Q, n: u64) -> Result<Held, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.begin(key, n, false) {
            Step::Done(r) => r,
            // Not reached: nothing queues without being asked to, and `begin` looks a closed
            // cell's key up again.
            Step::Wait(w) => w.give_up(),
            Step::Closed => Err(busy(0, self.limit())),
        }
    }

    /// Takes `n` permits for `key` now, or (if `queue`) queues for them: the first step of
    /// every acquire (`concurrency::wait::begin`) on the key's cell, inserting the key if it
    /// takes permits.
    #[inline]
    pub(crate) fn begin<Q>(&self, key: &Q, n: u64, queue: bool) -> Step<'_>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        loop {
            if let Some(guard) = self.map.get(key) {
                let step = self.begin_on(&guard, n, queue);
                drop(guard);
                match step {
                    Step::Closed => continue, // evicted before this lookup's guard: look again
                    step => return step,
                }
            }
            return self.begin_new(key, n, queue);
        }
    }

    /// `concurrency::wait::begin` on `cell`, one of this store's boxed cells (or one about to
    /// be inserted), reached under its shard's guard, which the caller holds. The result may
    /// outlive the guard (it borrows the store, `'s`): it keeps no `&SemCell`, only the
    /// `Pinned` pointers of permits taken or a waiter queued, whose rules keep the cell.
    #[inline(always)]
    fn begin_on<'s>(&'s self, cell: &SemCell, n: u64, queue: bool) -> Step<'s> {
        // SAFETY: the caller holds the shard's guard, so no sweep closes or frees the cell
        // while `begin` runs, and only `begin` uses this borrow: its result holds no
        // `&SemCell`, only `Pinned` pointers (permits taken, a waiter queued), which
        // `Pinned`'s rules keep valid past the guard. `'s` only lets the result borrow the
        // store instead of the guard.
        let cell: &'s SemCell = unsafe { &*(cell as *const SemCell) };
        begin(cell, n, queue)
    }

    /// [`begin`](Self::begin) for a key not tracked: a fresh cell grants at once whatever
    /// fits, so insert it unless nothing would be stored.
    #[cold]
    #[inline(never)]
    fn begin_new<Q>(&self, key: &Q, n: u64, queue: bool) -> Step<'_>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if n == 0 {
            return Step::Done(Ok(Held::untracked(0)));
        }
        let limit = self.limit();
        if n > u64::from(limit) {
            return Step::Done(Err(exceeds(n, limit)));
        }
        let hash = self.map.hash(key);
        let shard = self.map.shard(hash);
        // Made before the write lock, not under it (a `String` allocates).
        let mut owned = Some((key.to_owned(), Box::new(SemCell::new(limit))));
        for attempt in 0..2 {
            {
                let mut table = shard.write();
                // The limit a new cell gets is read under the write guard (module docs): a
                // `set_limit` since the read above either walks this shard after this hold or
                // stored its limit before it.
                let limit = self.limit();
                if let Some((_, cell)) = table.find(hash, |(k, _)| k.borrow() == key) {
                    // Inserted meanwhile: decide on theirs, under the write guard.
                    return self.begin_on(cell, n, queue);
                }
                if n > u64::from(limit) {
                    return Step::Done(Err(exceeds(n, limit)));
                }
                if take_slot(&self.slots, self.max_keys) {
                    let (k, mut cell) = owned
                        .take()
                        .unwrap_or_else(|| (key.to_owned(), Box::new(SemCell::new(limit))));
                    if cell.state().limit != limit {
                        *cell = SemCell::new(limit); // not shared yet: made afresh in place
                    }
                    // Decided before the insert, under the same write guard: the box moves into
                    // the table, its contents do not.
                    let step = self.begin_on(&cell, n, queue);
                    table.insert_unique(hash, (k, cell), self.map.rehash());
                    return step;
                }
            }
            // Full (the write guard is dropped, so sweeping cannot deadlock on it).
            if attempt == 0 {
                self.reclaim();
            }
        }
        match self.when_full {
            // `n` fits: it is at most the limit (checked above).
            WhenFull::AllowUntracked => Step::Done(Ok(Held::untracked(cell_count(n)))),
            WhenFull::Deny => Step::Done(Err(busy(0, self.limit()))),
        }
    }

    /// Permits held for `key` now (0 if not tracked).
    pub(crate) fn in_flight<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get(key).map_or(0, |c| c.state().in_flight)
    }

    /// The key cap, if one was set (`usize::MAX` means none).
    pub(crate) fn max_keys(&self) -> Option<std::num::NonZeroUsize> {
        (self.max_keys != usize::MAX)
            .then(|| std::num::NonZeroUsize::new(self.max_keys))
            .flatten()
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.load(Ordering::Acquire)
    }

    pub(crate) fn stats(&self) -> SweepStats {
        self.counters.snapshot(self.len())
    }

    /// At the cap: sweep, unless a sweep is running right now (it is reclaiming already).
    fn reclaim(&self) {
        let _guard = match self.sweep_lock.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        self.sweep_locked(&|| false);
    }

    /// A whole sweep; `stop` is polled between chunks.
    pub(crate) fn sweep_all(&self, stop: &dyn Fn() -> bool) -> usize {
        let _serial = self
            .sweep_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.sweep_locked(stop)
    }

    /// Walks every shard in chunks of [`SWEEP_CHUNK`] buckets, one write-lock hold each,
    /// closing and removing idle cells (module docs). A key moved by a resize between two
    /// chunks may be skipped: it is kept until a later sweep, which loses nothing.
    fn sweep_locked(&self, stop: &dyn Fn() -> bool) -> usize {
        let started = Instant::now();
        let mut evicted = 0usize;
        let mut longest = Duration::ZERO;
        let mut graveyard: Vec<(K, Box<SemCell>)> = Vec::new();
        'shards: for shard in self.map.shards() {
            let mut pos = 0usize;
            loop {
                if stop() {
                    break 'shards;
                }
                let mut table = shard.write();
                let held = Instant::now();
                let end = table.num_buckets().min(pos.saturating_add(SWEEP_CHUNK));
                for i in pos..end {
                    let Ok(entry) = table.get_bucket_entry(i) else {
                        continue; // an empty or deleted bucket
                    };
                    if entry.get().1.try_close() {
                        graveyard.push(entry.remove().0);
                    }
                }
                let done = end >= table.num_buckets();
                unlock_fair(table);
                longest = longest.max(held.elapsed());
                if !graveyard.is_empty() {
                    // After the removal: `slots` never undercounts the map.
                    self.slots.fetch_sub(graveyard.len(), Ordering::AcqRel);
                    evicted += graveyard.len();
                    for (_, cell) in graveyard.drain(..) {
                        cell.quiesce();
                    }
                }
                if done {
                    break;
                }
                pos = end;
            }
        }
        self.counters.record(evicted, started.elapsed(), longest);
        self.meter.swept(evicted, self.len(), longest);
        evicted
    }
}

impl<K, S> Sweep for SemStore<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn sweep(&self, stop: &dyn Fn() -> bool) -> usize {
        self.sweep_all(stop)
    }
}
