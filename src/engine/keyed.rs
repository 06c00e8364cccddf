//! The keyed engine: the [`Engine`] and the keyed table (`store::keyed`) it decides on, and
//! a key's [`Slot`] there: its lookup, and the insert of a new key that the engine's decision
//! on a scratch fresh cell stored something on (`engine::decide_on_shard`), which meets the
//! key cap's placement ([`Placed`], [`Found`]). The table knows its cells' rule only through
//! [`Evict`], which the engine implements here.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::cell::Algorithm;
use crate::engine::{Engine, Find, Placed, Slot};
use crate::store::evict::{is_cold, verdict, Evict, Verdict};
use crate::store::keyed::{KeyedStore, WhenFull};
use crate::store::sweeper::Sweep;
use crate::store::table::ValueRef;
use crate::Nanos;

/// Rate cells go by the cold-time rule (`store::evict::verdict`): a cell cold by the
/// clock's skew already, judged with `now` read under the shard's write guard.
impl<A: Algorithm> Evict<A::Cell> for Engine<A> {
    /// `now`, the clock's skew, and the parameters.
    type At = (Nanos, Nanos, A::Params);

    fn at(&self) -> Self::At {
        (
            self.clock.now(),
            self.clock.max_skew(),
            self.params.load_full(),
        )
    }

    #[inline]
    fn judge(&self, cell: &A::Cell, (now, skew, p): &Self::At) -> Verdict {
        verdict(self.alg.cold_at(cell, p), *now, *skew)
    }

    fn swept(&self, evicted: usize, keys: usize, longest: Duration) {
        self.meter.swept(evicted, keys, longest);
    }

    /// `earliest` bounds every tracked key's cold time: none can go before it is cold.
    fn may_evict_any(&self, earliest: Nanos) -> bool {
        is_cold(earliest, self.clock.now(), self.clock.max_skew())
    }
}

/// The shared state of a keyed limiter: the engine and its table. The sweeper holds a `Weak`
/// to it.
pub(crate) struct KeyedEngine<K, A: Algorithm, S> {
    pub(crate) engine: Engine<A>,
    pub(crate) store: KeyedStore<K, A::Cell, S>,
}

impl<K, A, S> Sweep for KeyedEngine<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn sweep(&self, stop: &dyn Fn() -> bool) -> usize {
        self.sweep_all(stop)
    }
}

/// A key of a keyed engine: the [`Slot`] the method family runs on.
pub(crate) struct KeySlot<'a, K, Q: ?Sized, A: Algorithm, S> {
    pub(crate) keyed: &'a KeyedEngine<K, A, S>,
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

    /// Out of line in [`KeyedEngine::insert`], which takes the key and the engine in registers
    /// (this slot, passed by reference out of line, would be spilled to memory on every call).
    #[inline(always)]
    fn insert<R>(&self, op: impl Fn(&A::Cell, Nanos) -> R, fresh: R) -> Placed<R> {
        self.keyed.insert(self.key, op, fresh)
    }

    /// The earliest time at or after `now` when a new key can take a slot, judged from the
    /// tracked keys as they are now (a read-only walk when the table is full): `now` if a slot
    /// is free or some key is cold, else when the earliest key turns cold by the clock's skew.
    /// Later decisions can only make it later. The waiting methods use it at the cap to
    /// refuse at once a wait that could not end by their deadline.
    fn slot_free_at(&self, now: Nanos) -> Nanos {
        let keyed = self.keyed;
        if !keyed.store.is_full() {
            return now;
        }
        match keyed.min_cold_at(now) {
            Some(min) => min.saturating_add(keyed.engine.clock.max_skew()).max(now),
            None => now,
        }
    }
}

impl<K, Q, A, S> Find<A> for KeySlot<'_, K, Q, A, S>
where
    K: Hash + Eq + Send + Sync + Borrow<Q> + 'static,
    Q: Hash + Eq + ?Sized,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    type Held<'s>
        = ValueRef<'s, K, A::Cell>
    where
        Self: 's;

    #[inline(always)]
    fn lookup(&self) -> Option<Self::Held<'_>> {
        self.keyed.store.map.get(self.key)
    }

    /// What a decision that stores a new key at `now` would meet at the cap, found without
    /// evicting anything: `None` if it gets in (a slot is free, a sweep would free one, or
    /// `WhenFull::AllowUntracked` decides it untracked), else the wait its refusal reports.
    ///
    /// It follows [`insert`](KeyedEngine::insert) step by step. Where the check skips its reclaim
    /// sweep (the lower bound `earliest` says no key can be cold yet) the refusal's wait comes
    /// from that bound, as the check's does. Where the check would sweep, a sweep evicts
    /// every key cold at `now` and then leaves `earliest` at the exact smallest cold time of
    /// the keys it kept; so this walks the table read-only for the same two facts (a cold
    /// key: the check gets in; otherwise the smallest cold time), rather than trusting a bound
    /// that keys grown busier since it was taken have left behind.
    fn refusal(&self, now: Nanos) -> Option<Nanos> {
        let keyed = self.keyed;
        let store = &keyed.store;
        if store.when_full != WhenFull::Deny || !store.is_full() {
            return None;
        }
        let earliest = store.earliest();
        if !is_cold(earliest, now, keyed.engine.clock.max_skew()) {
            return Some(keyed.full_wait(earliest, now));
        }
        keyed.min_cold_at(now).map(|min| keyed.full_wait(min, now))
    }

    fn lowered(&self, cell: &A::Cell) {
        self.keyed.lower_earliest(cell);
    }
}

impl<K, A, S> KeyedEngine<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(engine: Engine<A>, store: KeyedStore<K, A::Cell, S>) -> Self {
        KeyedEngine { engine, store }
    }

    /// Lowers the table's bound on cold times to `cell`'s (after an insert or a cancel).
    fn lower_earliest(&self, cell: &A::Cell) {
        let e = &self.engine;
        self.store
            .lower_earliest(e.alg.cold_at(cell, &e.params.load_full()));
    }

    /// A whole sweep of the table; `stop` is polled between chunks.
    pub(crate) fn sweep_all(&self, stop: &dyn Fn() -> bool) -> usize {
        self.store.sweep_all(&self.engine, stop)
    }

    /// A new key's decision that stores (`fresh`: its answer on a scratch fresh cell): insert
    /// the key (within the cap) and decide again under the shard's write guard, or apply the
    /// cap's policy.
    #[cold]
    #[inline(never)]
    fn insert<Q, R>(&self, key: &Q, op: impl Fn(&A::Cell, Nanos) -> R, fresh: R) -> Placed<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let clock = &self.engine.clock;
        let hash = self.store.map.hash(key);
        // The owned key is made before the write lock, not under it (a `String` allocates).
        let mut owned = Some(key.to_owned());
        // Insert under the write guard and decide again there with a fresh `now` (the loom
        // model in `loom-tests/tests/sweeper.rs` transcribes this step).
        for attempt in 0..2 {
            if let Some(r) = self.store.try_insert(
                key,
                hash,
                || Ok(()),
                |()| {
                    // `owned` is still there: every path that takes it returns.
                    let owned = owned.take().unwrap_or_else(|| key.to_owned());
                    (owned, A::Cell::default())
                },
                |cell| op(cell, clock.now()),
                |cell| self.lower_earliest(cell),
            ) {
                return Placed::Tracked(r);
            }
            // Full (the write guard is dropped by now, so sweeping cannot deadlock on it).
            if attempt == 0 {
                self.store.reclaim(&self.engine);
            }
        }
        match self.store.when_full {
            WhenFull::AllowUntracked => Placed::Untracked(fresh),
            WhenFull::Deny => Placed::Full(self.full_retry_after()),
        }
    }

    /// The smallest cold time of the tracked keys (`u64::MAX` if none), or `None` as soon as
    /// one is cold at `now` by the clock's skew (a sweep would evict it); a read-only walk.
    fn min_cold_at(&self, now: Nanos) -> Option<Nanos> {
        let e = &self.engine;
        let at = (now, e.clock.max_skew(), e.params.load_full());
        self.store.min_bound(|cell| e.judge(cell, &at))
    }

    /// [`WhenFull::Deny`]'s suggested wait: until the earliest tracked key can be evicted
    /// (`earliest + max_skew - now`, from the lower bound `earliest`, exact right after a
    /// complete sweep), at least 1 ns, at most the longer of the quota's period and tolerance.
    fn full_retry_after(&self) -> Nanos {
        let now = self.engine.clock.now();
        self.full_wait(self.store.earliest(), now)
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
}
