//! The keyed concurrency limiter's store: one boxed [`SemCell`] per key in the keyed store
//! (`store::keyed`: the sharded table, its exact key cap and chunked sweep, shared with the
//! rate limiters), with what is the concurrency limiter's own: the limit, the acquire paths,
//! the cap's policy ([`WhenFull`]) for a new key, and the rule that evicts idle keys.
//!
//! **Eviction.** A key with nothing in flight and nobody waiting decides like a new key, so it
//! carries no information. A sweep evicts it under its shard's *write* guard by closing the
//! cell (`SemCell::try_close`: one CAS from an idle word to `CLOSED`, the [`Evict`] rule),
//! then removes it.
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
use std::time::Duration;

use crate::cell::semaphore::SemCell;
use crate::concurrency::permit::Held;
use crate::concurrency::wait::{begin, busy, cell_count, exceeds, take_now, Step};
use crate::decision::AcquireError;
use crate::meter::Meter;
use crate::store::evict::{Evict, SweepStats, Verdict};
use crate::store::keyed::KeyedStore;
use crate::store::sweeper::Sweep;
use crate::store::when_full::WhenFull;
use crate::sync::{AtomicU32, Mutex, Ordering};
use crate::Nanos;

/// The shared state of a keyed concurrency limiter; the sweeper holds a `Weak` to it.
pub(crate) struct SemStore<K, S> {
    table: KeyedStore<K, Box<SemCell>, S>,
    /// The limit of a new key's cell (every tracked cell's too, once `set_limit` returns).
    limit: AtomicU32,
    /// Serialises `set_limit`s, so the last one's walk is the last to set any cell.
    set_lock: Mutex<()>,
    /// The limiter's meter (here, so that sweeps report keys tracked and evictions).
    pub(crate) meter: Meter,
}

/// The semaphore cells' eviction rule: an idle cell is closed under the shard's write guard,
/// and quiesced after it (module docs). It keeps no bound on when a busy cell turns idle, so
/// a reclaim at the cap always sweeps.
struct Idle<'a>(&'a Meter);

impl Evict<Box<SemCell>> for Idle<'_> {
    type At = ();

    fn at(&self) {}

    fn judge(&self, cell: &Box<SemCell>, (): &()) -> Verdict {
        if cell.try_close() {
            Verdict::Evict
        } else {
            Verdict::Keep(Nanos::MAX)
        }
    }

    fn evicted(&self, cell: &Box<SemCell>) {
        cell.quiesce();
    }

    fn swept(&self, evicted: usize, keys: usize, longest: Duration) {
        self.0.swept(evicted, keys, longest);
    }
}

impl<K, S> SemStore<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(limit: u32, table: KeyedStore<K, Box<SemCell>, S>, meter: Meter) -> Self {
        SemStore {
            table,
            limit: AtomicU32::new(limit),
            set_lock: Mutex::new(()),
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
        // Not closed: a sweep closes a cell only under the write guard, and removes it under
        // the same hold.
        self.table.for_each_cell(&|cell| cell.set_limit(limit));
    }

    /// Takes `n` permits for `key` now, or refuses: the non-waiting acquire. The hot path (a
    /// tracked key) is the lookup and one take, which grants or refuses with nothing else
    /// inlined around it; everything else (`n = 0`, a new key, a cell evicted under the
    /// lookup) goes through [`begin`](Self::begin).
    #[inline(always)]
    pub(crate) fn try_now<Q>(&self, key: &Q, n: u64) -> Result<Held, AcquireError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if n > 0 {
            if let Some(guard) = self.table.map.get(key) {
                // As in `begin`: permits taken (now in flight) keep the cell from eviction.
                if let Some(r) = take_now(&guard, n) {
                    return r;
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
            if let Some(guard) = self.table.map.get(key) {
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
        let hash = self.table.map.hash(key);
        // Made before the write lock, not under it (a `String` allocates).
        let mut owned = Some((key.to_owned(), Box::new(SemCell::new(limit))));
        for attempt in 0..2 {
            if let Some(step) = self.table.try_insert(
                key,
                hash,
                || {
                    // The limit a new cell gets is read under the write guard (module docs):
                    // a `set_limit` since the read above either walks this shard after this
                    // hold or stored its limit before it.
                    let limit = self.limit();
                    if n > u64::from(limit) {
                        return Err(Step::Done(Err(exceeds(n, limit))));
                    }
                    Ok(limit)
                },
                |limit| {
                    let (k, mut cell) = owned
                        .take()
                        .unwrap_or_else(|| (key.to_owned(), Box::new(SemCell::new(limit))));
                    if cell.state().limit != limit {
                        *cell = SemCell::new(limit); // not shared yet: made afresh in place
                    }
                    (k, cell)
                },
                // Decided under the write guard: on theirs if inserted meanwhile, else on the
                // new cell before the insert (the box moves into the table, its contents do
                // not).
                |cell| self.begin_on(cell, n, queue),
                |_| {},
            ) {
                return step;
            }
            // Full (the write guard is dropped, so sweeping cannot deadlock on it).
            if attempt == 0 {
                self.table.reclaim(&Idle(&self.meter));
            }
        }
        match self.table.when_full {
            // `n` fits: it is at most the limit (checked above).
            WhenFull::AllowUntracked => Step::Done(Ok(Held::untracked(cell_count(n)))),
            // No wait to suggest: slots free as permits are released, not on a schedule.
            WhenFull::Deny => Step::Done(Err(AcquireError::KeyCapReached { retry_after: None })),
        }
    }

    /// Permits held for `key` now (0 if not tracked).
    pub(crate) fn in_flight<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.table.map.get(key).map_or(0, |c| c.state().in_flight)
    }

    /// The key cap, if one was set.
    pub(crate) fn max_keys(&self) -> Option<std::num::NonZeroUsize> {
        self.table.key_cap()
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn stats(&self) -> SweepStats {
        self.table.stats()
    }
}

impl<K, S> Sweep for SemStore<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// A whole sweep, evicting idle keys (module docs).
    fn sweep(&self, stop: &dyn Fn() -> bool) -> usize {
        self.table.sweep_all(&Idle(&self.meter), stop)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;
    use crate::cell::semaphore::test_takes;
    use crate::store::settings::DefaultKeyHasher;
    use crate::store::walk::SWEEP_CHUNK;

    fn store(limit: u32) -> SemStore<u64, DefaultKeyHasher> {
        let table = KeyedStore::new(DefaultKeyHasher::default(), 2, None, WhenFull::Deny);
        SemStore::new(limit, table, Meter::concurrency(None))
    }

    /// On a tracked key, a grant and the refusal at capacity are decided from one lookup and
    /// one take: the refusal is not looked up and taken a second time.
    #[test]
    fn a_tracked_keys_grant_or_refusal_at_capacity_takes_its_word_once() {
        let store = store(2);
        let held = store.try_now(&7, 2).unwrap(); // tracked, at capacity
        let mut r = None;
        assert_eq!(
            test_takes::during(|| r = Some(store.try_now(&7, 1).map(drop))),
            1
        );
        assert_eq!(
            r,
            Some(Err(AcquireError::AtCapacity {
                in_flight: 2,
                limit: 2
            }))
        );
        assert_eq!(
            store.try_now(&7, 3).map(drop),
            Err(AcquireError::ExceedsBurst {
                requested: 3,
                burst: 2
            })
        );
        drop(held);
        assert_eq!(
            test_takes::during(|| r = Some(store.try_now(&7, 1).map(drop))),
            1
        );
        assert_eq!(r, Some(Ok(())));
    }

    /// Inserts between two chunks of a sweep (here from the stop poll, which runs with no lock
    /// held, as a concurrent acquire could) grow and rehash the table under the walk: the
    /// sweep starts the shard over, and still evicts every key idle before it began and no
    /// busy one.
    #[test]
    fn keys_moved_between_sweep_chunks_are_not_missed() {
        let store = store(1);
        let idle = 6 * SWEEP_CHUNK as u64;
        for k in 0..idle {
            drop(store.try_now(&k, 1).unwrap()); // tracked, idle
        }
        let held = RefCell::new(Vec::new());
        let polls = Cell::new(0);
        let evicted = store.sweep(&|| {
            polls.set(polls.get() + 1);
            if polls.get() == 2 {
                // Enough busy keys to resize both shards once.
                let mut held = held.borrow_mut();
                held.extend((idle..5 * idle).map(|k| store.try_now(&k, 1).unwrap()));
            }
            false
        });
        assert_eq!(evicted as u64, idle, "every idle key evicted");
        assert_eq!(store.len() as u64, 4 * idle);
        assert!((0..idle).all(|k| store.table.map.get(&k).is_none()));
        assert!((idle..5 * idle).all(|k| store.in_flight(&k) == 1));
        assert_eq!(store.stats().evicted, idle);
        drop(held);
        assert_eq!(store.sweep(&|| false) as u64, 4 * idle);
        assert_eq!(store.len(), 0);
    }
}
