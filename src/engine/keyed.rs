//! The keyed engine: the [`Engine`] and the keyed table (`store::keyed`) it decides on, and
//! the decisions on a key. A key found decides on its stored cell; a key missing decides on a
//! scratch fresh cell and is inserted only if that stored something; a new key meets the key
//! cap's placement ([`Placed`], [`Found`]). The table knows its cells' rule only through
//! [`Evict`], which the engine implements here.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::ops::Deref;
use std::time::Duration;

use crate::cell::Algorithm;
use crate::engine::{Engine, Find, Found, Placed, Slot};
use crate::store::evict::{is_cold, verdict, Evict, Verdict};
use crate::store::keyed::{KeyedStore, WhenFull};
use crate::store::sweeper::Sweep;
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

    /// Runs `op` on the key's cell (with `now` read as [`decide_on_shard`] explains), inserting
    /// the key only when `op` leaves a fresh cell changed; `then` applied on each path.
    #[inline(always)]
    fn decide_then<R, T>(
        &self,
        op: impl Fn(&A::Cell, Nanos) -> R,
        then: impl FnOnce(Placed<R>) -> T,
    ) -> T {
        let keyed = self.keyed;
        let clock = &keyed.engine.clock;
        let alg = &keyed.engine.alg;
        decide_on_shard(
            #[inline(always)]
            || keyed.store.map.get(self.key),
            #[inline(always)]
            || clock.now(),
            &op,
            |c| alg.is_fresh(c),
            #[inline(always)]
            |on| match on {
                OnShard::Decided(r) => then(Placed::Tracked(r)),
                OnShard::MustInsert(fresh) => then(keyed.insert(self.key, &op, fresh)),
            },
        )
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
    /// What is there for the key now, creating nothing. A missing key at a full cap that
    /// would refuse it reports `Full` with the wait the check would report, so a peek agrees
    /// with the check that would follow ([`cap_refusal`](KeyedEngine::cap_refusal)).
    fn find<R>(&self, f: impl FnOnce(Found<'_, A::Cell>, Nanos) -> R) -> R {
        let keyed = self.keyed;
        let tracked = keyed.store.map.get(self.key);
        let now = keyed.engine.clock.now(); // after the lookup: a miss needs it
        match tracked.as_deref() {
            Some(cell) => f(Found::Cell(cell), now),
            None => match keyed.cap_refusal(now) {
                Some(wait) => f(Found::Full(wait), now),
                None => f(Found::Fresh, now),
            },
        }
    }

    fn lowered(&self, cell: &A::Cell) {
        self.keyed.lower_earliest(cell);
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

/// The read side of a decision's protocol with sweeping (`store::keyed`'s module docs).
/// Shared with the loom model of the sweeper (through `tollgate::__loom`), which runs it over
/// its own lock-guarded map.
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

    /// A new key's decision that stores: insert it (within the cap), or apply the cap's policy.
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
        let store = &self.store;
        if store.when_full != WhenFull::Deny || !store.is_full() {
            return None;
        }
        let earliest = store.earliest();
        if !is_cold(earliest, now, self.engine.clock.max_skew()) {
            return Some(self.full_wait(earliest, now));
        }
        self.min_cold_at(now).map(|min| self.full_wait(min, now))
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
