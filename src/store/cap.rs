//! The key cap (`max_keys`): a count of slots that makes the cap exact, what a new key meets
//! at the cap ([`WhenFull`](crate::WhenFull)), the reclaim sweep that frees slots, and the lower bound on cold
//! times that lets a reclaim skip a sweep that could free nothing.

use std::hash::{BuildHasher, Hash};

use crate::cell::Algorithm;
use crate::store::evict::is_cold;
use crate::store::keyed::KeyedStore;
use crate::store::when_full::WhenFull;
use crate::sync::{AtomicUsize, Ordering, TryLockError};
use crate::Nanos;

impl<K, A, S> KeyedStore<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
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
    pub(super) fn cap_refusal(&self, now: Nanos) -> Option<Nanos> {
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
        for shard in self.map.shards() {
            for (_, cell) in shard.read().iter() {
                let at = self.engine.alg.cold_at(cell, &p);
                if is_cold(at, now, skew) {
                    return None;
                }
                min = min.min(at);
            }
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
    /// (the eviction rule, `store::evict::is_cold`, applied to the lower bound).
    fn may_reclaim(&self, now: Nanos) -> bool {
        let earliest = self.earliest.load(Ordering::Acquire);
        is_cold(earliest, now, self.engine.clock.max_skew())
    }

    pub(super) fn take_slot(&self) -> bool {
        take_slot(&self.slots, self.max_keys)
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
    pub(super) fn reclaim(&self) {
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
    pub(super) fn full_retry_after(&self) -> Nanos {
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
}

/// Takes one of `max_keys` slots counted by `slots`, if one is free: the exact cap of every
/// keyed store (the rate limiters' and the concurrency limiters'). `slots` is counted before
/// an insert and after a removal, so it bounds the table's length from above at every instant.
pub(crate) fn take_slot(slots: &AtomicUsize, max_keys: usize) -> bool {
    slots
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max_keys).then(|| n + 1)
        })
        .is_ok()
}
