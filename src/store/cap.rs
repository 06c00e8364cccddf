//! The key cap (`max_keys`): a count of slots that makes the cap exact, the reclaim sweep that
//! frees slots, and the lower bound on cold times that lets a reclaim skip a sweep that could
//! free nothing. What a new key meets at the cap ([`WhenFull`](crate::WhenFull)) and the
//! waits a refusal reports are the engine's (`engine::keyed`).

use std::hash::{BuildHasher, Hash};

use crate::store::evict::{Evict, Verdict};
use crate::store::keyed::KeyedStore;
use crate::sync::{Ordering, TryLockError};
use crate::Nanos;

impl<K, C, S> KeyedStore<K, C, S>
where
    K: Hash + Eq,
    S: BuildHasher,
{
    /// The smallest bound `judge` gives the tracked cells (`u64::MAX` if none), or `None` as
    /// soon as one may go (a sweep would evict it). Walks the table under each shard's read
    /// lock in turn, so `judge` must change nothing (the rate cells' cold-time rule does not).
    pub(crate) fn min_bound(&self, judge: impl Fn(&C) -> Verdict) -> Option<Nanos> {
        let mut min = Nanos::MAX;
        for shard in self.map.shards() {
            for (_, cell) in shard.read().iter() {
                match judge(cell) {
                    Verdict::Evict => return None,
                    Verdict::Keep(bound) => min = min.min(bound),
                }
            }
        }
        Some(min)
    }

    /// The lower bound on every tracked key's cold time (`earliest`).
    pub(crate) fn earliest(&self) -> Nanos {
        self.earliest.load(Ordering::Acquire)
    }

    /// Whether every slot under the cap is taken.
    pub(crate) fn is_full(&self) -> bool {
        self.slots.load(Ordering::Acquire) >= self.max_keys
    }

    /// Takes one of the `max_keys` slots, if one is free: `slots` is counted before an
    /// insert and after a removal, so it bounds the table's length from above at every
    /// instant, and the cap is exact.
    pub(super) fn take_slot(&self) -> bool {
        self.slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_keys).then(|| n + 1)
            })
            .is_ok()
    }

    /// Lowers the cold-time bound to `cold_at` (a cell's, after an insert or a cancel).
    pub(crate) fn lower_earliest(&self, cold_at: Nanos) {
        self.earliest.fetch_min(cold_at, Ordering::AcqRel);
    }

    /// At the cap: sweep, unless a sweep is running right now (it is reclaiming already) or
    /// the rule's bound says no key can go yet (then a sweep would walk every key for
    /// nothing, which under a flood of new keys would make each one cost a full scan).
    pub(crate) fn reclaim(&self, rule: &impl Evict<C>) {
        let _guard = match self.sweep_lock.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if rule.may_evict_any(self.earliest()) {
            self.sweep_locked(rule, &|| false);
        }
    }

    /// Forgets the lower bound on cold times: the key cap's next reclaim sweeps.
    pub(crate) fn forget_cold_bound(&self) {
        self.earliest.store(0, Ordering::Release);
    }
}
