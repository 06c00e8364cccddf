//! The keyed store's table: a power-of-two number of shards, each a hashbrown [`HashTable`]
//! of `(key, value)` pairs behind its own read-write lock (`crate::sync::RwLock`).
//!
//! A key's hash picks its shard and is reused to probe that shard's table, so a lookup hashes
//! once. A lookup holds the shard's read guard for as long as it uses the value; writers
//! (an insert, a sweep's chunk, `shrink_to_fit`) hold the write guard. The values are cells
//! with interior mutability, so every decision needs only the read guard.
//!
//! The layout is the one dashmap 6 had (which this replaces): cache-padded locks around one
//! table per shard, the shard chosen by the hash bits just below the 7 that hashbrown keeps
//! for its control bytes, so memory per key and the spread of keys over shards are unchanged.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::ops::Deref;

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

use crate::sync::{RwLock, RwLockReadGuard};

/// One shard: its lock and its table.
pub(crate) type Shard<K, V> = RwLock<HashTable<(K, V)>>;

/// A sharded hash table whose values are used through shared references.
pub(crate) struct ShardedTable<K, V, S> {
    shards: Box<[CachePadded<Shard<K, V>>]>,
    /// `usize::BITS - log2(shards)`: [`shard`](Self::shard) keeps the top `log2(shards)` bits
    /// of the hash below its top 7.
    shift: u32,
    hasher: S,
}

/// The shard count a builder's `shards(n)` setting gives: `n` rounded up to a power of two,
/// clamped to `2..=65536` (what [`ShardedTable::new`] takes).
pub(crate) fn shard_count(requested: usize) -> usize {
    requested.clamp(2, 1 << 16).next_power_of_two()
}

impl<K, V, S> ShardedTable<K, V, S>
where
    K: Hash + Eq,
    S: BuildHasher,
{
    /// An empty table of `shards` shards (a power of two, at least 2; the keyed builder
    /// rounds and clamps its setting to that).
    pub(crate) fn new(hasher: S, shards: usize) -> Self {
        assert!(shards > 1 && shards.is_power_of_two(), "{shards} shards");
        ShardedTable {
            shards: (0..shards)
                .map(|_| CachePadded::new(RwLock::new(HashTable::new())))
                .collect(),
            shift: usize::BITS - shards.trailing_zeros(),
            hasher,
        }
    }

    /// `key`'s hash: the same for a key and its borrowed forms (the `Borrow` contract).
    #[inline(always)]
    pub(crate) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of a key with hash `hash`.
    #[inline(always)]
    pub(crate) fn shard(&self, hash: u64) -> &Shard<K, V> {
        // The shift leaves fewer than `usize::BITS` bits, so the index is below `shards.len()`.
        &self.shards[((hash as usize) << 7) >> self.shift]
    }

    /// Every shard, in order.
    pub(crate) fn shards(&self) -> impl Iterator<Item = &Shard<K, V>> {
        self.shards.iter().map(|s| &**s)
    }

    /// The hasher a shard's table rehashes its entries with when it grows or shrinks.
    #[inline(always)]
    pub(crate) fn rehash(&self) -> impl Fn(&(K, V)) -> u64 + '_ {
        |(k, _)| self.hash(k)
    }

    /// `key`'s value under its shard's read guard, if present: one hash picks the shard and
    /// probes its table. Written to inline into the decision.
    #[inline(always)]
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<ValueRef<'_, K, V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hash(key);
        let table = self.shard(hash).read();
        let value: *const V = &table.find(hash, |(k, _)| k.borrow() == key)?.1;
        // SAFETY: `value` points into the table `table` read-locks, and `ValueRef` owns that
        // guard (moving a guard moves no data: the table stays in the shard's lock).
        Some(unsafe { ValueRef::new(table, value) })
    }

    /// Whether `key` is present (right now).
    pub(crate) fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(key).is_some()
    }

    /// Entries in the table, summed over the shards one read guard at a time.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards().map(|s| s.read().len()).sum()
    }

    /// Buckets allocated over all shards (what a sweep walks).
    #[cfg(test)]
    pub(crate) fn num_buckets(&self) -> usize {
        self.shards().map(|s| s.read().num_buckets()).sum()
    }

    /// Releases the memory each shard's table holds beyond what its entries need, locking each
    /// shard in turn.
    pub(crate) fn shrink_to_fit(&self) {
        for shard in self.shards() {
            shard.write().shrink_to_fit(self.rehash());
        }
    }
}

/// A value of the table, borrowed: the value and the read guard of its shard, which keeps it
/// in place.
pub(crate) struct ValueRef<'a, K, V> {
    _guard: RwLockReadGuard<'a, HashTable<(K, V)>>,
    value: *const V,
}

impl<'a, K, V> ValueRef<'a, K, V> {
    /// Borrows `value` for as long as `guard` lives.
    ///
    /// # Safety
    ///
    /// `value` must point to a valid `V` that stays valid, in place and not mutably borrowed
    /// for as long as `guard` is alive: in [`ShardedTable::get`], `value` is in the table
    /// `guard` read-locks, so no writer can remove, move or change it before the guard drops.
    #[inline(always)]
    unsafe fn new(guard: RwLockReadGuard<'a, HashTable<(K, V)>>, value: *const V) -> Self {
        ValueRef {
            _guard: guard,
            value,
        }
    }
}

impl<K, V> Deref for ValueRef<'_, K, V> {
    type Target = V;

    #[inline(always)]
    fn deref(&self) -> &V {
        // SAFETY: `ValueRef::new`'s contract: `value` stays valid and shared while `_guard`,
        // which `self` owns, is alive; the returned borrow cannot outlive `self`.
        unsafe { &*self.value }
    }
}
