//! A small map from string keys split into shards, each under its own lock, so that calls on
//! different keys seldom wait for each other: what the denial cache and the coalescer keep
//! per state key.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

use crate::DefaultKeyHasher;

/// One shard's map.
pub(crate) type Shard<V> = HashMap<String, V, DefaultKeyHasher>;

pub(crate) struct ShardedMap<V> {
    /// Chooses the shard (from the hash's high half; each map uses it too, from the low bits).
    hasher: DefaultKeyHasher,
    shards: Box<[Mutex<Shard<V>>]>,
}

impl<V> ShardedMap<V> {
    /// A map of `shards` shards (at least 1).
    pub(crate) fn new(shards: usize) -> ShardedMap<V> {
        let hasher = DefaultKeyHasher::default();
        ShardedMap {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(HashMap::with_hasher(hasher.clone())))
                .collect(),
            hasher,
        }
    }

    /// The shard holding `key`, locked. A panic while it was held cannot leave a map entry
    /// half-written, so a poisoned lock is taken as it is.
    pub(crate) fn lock(&self, key: &str) -> MutexGuard<'_, Shard<V>> {
        let h = self.hasher.hash_one(key) >> 32;
        // Fewer than 2^32 shards: the index fits.
        let shard = &self.shards[(h % self.shards.len() as u64) as usize];
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of shards.
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Entries held (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}
