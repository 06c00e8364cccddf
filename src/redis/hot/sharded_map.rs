//! A small table of string-keyed shards, each under its own lock, so that calls on different
//! keys seldom wait for each other: what the denial cache and the coalescer keep per state key.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

use crate::DefaultKeyHasher;

/// A map from state keys, the usual content of a shard.
pub(crate) type Shard<V> = HashMap<String, V, DefaultKeyHasher>;

pub(crate) struct ShardedMap<S> {
    /// Chooses the shard (from the hash's high half; each map uses it too, from the low bits).
    hasher: DefaultKeyHasher,
    shards: Box<[Mutex<S>]>,
}

impl<S> ShardedMap<S> {
    /// `shards` shards (at least 1), each made by `make` from the hasher its maps should use.
    pub(crate) fn new(shards: usize, make: impl Fn(&DefaultKeyHasher) -> S) -> ShardedMap<S> {
        let hasher = DefaultKeyHasher::default();
        ShardedMap {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(make(&hasher)))
                .collect(),
            hasher,
        }
    }

    /// `key`'s hash, which chooses its shard ([`lock_hashed`](Self::lock_hashed)): computed
    /// once per call, for every shard and slot it chooses.
    pub(crate) fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard holding the key whose [`hash`](Self::hash) is `h`, locked.
    pub(crate) fn lock_hashed(&self, h: u64) -> MutexGuard<'_, S> {
        // Fewer than 2^32 shards: the index fits.
        self.lock_index(((h >> 32) % self.shards.len() as u64) as usize)
    }

    /// Shard `i` (below [`shards`](Self::shards)), locked. A panic while it was held cannot
    /// leave a map entry half-written, so a poisoned lock is taken as it is.
    pub(crate) fn lock_index(&self, i: usize) -> MutexGuard<'_, S> {
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of shards.
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }
}
