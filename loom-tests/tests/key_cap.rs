//! The keyed store's key cap (`max_keys`, `src/store/cap.rs` and `src/store/walk.rs`), on the
//! real `KeyedRateLimiter` with two shards and a hasher that puts each key in the shard named
//! by its number:
//! - the slot count: a new key takes a slot (`take_slot`, one CAS below `max_keys`) under its
//!   shard's write lock before it is inserted, and a removal frees it after, so the count
//!   bounds the table from above at every instant and the cap is exact across shards;
//! - the lower bound on cold times (`earliest`) that lets a reclaim at the cap skip a sweep
//!   that could free nothing: a sweep resets it to `u64::MAX` and lowers it with each chunk's
//!   survivors as it walks, an insert lowers it under the shard's write lock.
//!
//! Properties, in every interleaving:
//! - two new keys on two shards racing for the last slot: exactly one gets in, and `len()` is
//!   the cap;
//! - a key inserted while a sweep walks the table lowers the bound the sweep leaves: once the
//!   key is cold, a new key at the cap is let in (its reclaim sweeps and evicts the cold key)
//!   rather than refused on a bound that missed it.
//!
//! Shown to fail with the sweep's bound kept in a local minimum and stored at its end (instead
//! of the reset first and `fetch_min` per chunk): the insert's lowering, made after the sweep
//! walked its shard, is overwritten, and the new key is refused. (And with `take_slot` as a
//! load then a store: both racing keys get in.)

use std::hash::{BuildHasher, Hasher};
use std::num::NonZeroUsize;
use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use tollgate::{KeyedRateLimiter, ManualClock, WhenFull};
use tollgate_loom_tests::{model, quota};

/// Hashes a key `k` to `k << 56`: the store's shard index is the hash's bit 56 with two shards,
/// so key 0 lands in shard 0 and key 1 in shard 1 (any key `k`: shard `k & 1`).
#[derive(Clone, Default)]
struct ByShard;

struct ByShardHasher(u64);

impl Hasher for ByShardHasher {
    fn finish(&self) -> u64 {
        self.0 << 56
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("keys are u64")
    }

    fn write_u64(&mut self, k: u64) {
        self.0 = k;
    }
}

impl BuildHasher for ByShard {
    type Hasher = ByShardHasher;

    fn build_hasher(&self) -> ByShardHasher {
        ByShardHasher(0)
    }
}

/// A limiter of 100 ns per permit, burst 3, capped at `max_keys`, on `clock`.
fn limiter(max_keys: usize, clock: &ManualClock) -> KeyedRateLimiter<u64, tollgate::Gcra, ByShard> {
    KeyedRateLimiter::builder(quota(100, 3))
        .clock(clock.clone())
        .shards(2)
        .hasher(ByShard)
        .max_keys(NonZeroUsize::new(max_keys).unwrap())
        .when_full(WhenFull::Deny)
        .build()
}

#[test]
fn two_new_keys_race_for_the_last_slot() {
    model(|| {
        let clock = ManualClock::new();
        let l = Arc::new(limiter(1, &clock));
        let other = {
            let l = l.clone();
            thread::spawn(move || l.try_acquire(&1))
        };
        let here = l.try_acquire(&0);
        let there = other.join().unwrap();
        assert!(here ^ there, "both or neither of two keys got the one slot");
        assert_eq!(l.len(), 1);
    });
}

#[test]
fn a_new_key_racing_a_sweep_lowers_its_bound() {
    model(|| {
        let clock = ManualClock::new();
        let l = Arc::new(limiter(2, &clock));
        // Key 0 (shard 0): its whole burst, cold at 300.
        l.try_acquire_n(&0, 3).unwrap();
        let inserter = {
            let l = l.clone();
            // Key 2 (shard 0 too) would be serialised with the sweep's walk of key 0; key 1
            // is in the other shard: one permit, cold at 100.
            thread::spawn(move || assert!(l.try_acquire(&1)))
        };
        assert_eq!(l.sweep_now(), 0, "nothing is cold at 0");
        inserter.join().unwrap();
        assert_eq!(l.len(), 2);
        // Key 1 is cold now, key 0 is not: a third key at the cap must get key 1's slot.
        clock.advance(Duration::from_nanos(100));
        assert!(
            l.try_acquire(&3),
            "a new key refused at the cap while a tracked key was cold"
        );
        assert_eq!(l.len(), 2);
    });
}
