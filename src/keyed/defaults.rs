//! The keyed limiter's measured defaults: the key hasher and the shard count.

/// The default hasher of a [`KeyedRateLimiter`](crate::KeyedRateLimiter): [foldhash]'s fast
/// `RandomState`.
///
/// Chosen by measurement on this project's machine (`BuildHasher::hash_one`, best of 5):
///
/// | hasher | `u64` | `"user:1234"` | 30-byte string |
/// |---|---|---|---|
/// | std `RandomState` (SipHash-1-3) | 19.6 ns | 23.0 ns | 32.4 ns |
/// | foldhash `fast::RandomState` | 1.6 ns | 3.5 ns | 6.3 ns |
/// | ahash `RandomState` | 2.2 ns | 5.7 ns | 7.0 ns |
///
/// **HashDoS.** Each limiter gets its own random seed, so no fixed list of keys collides in
/// every process, and attacker-chosen keys cannot be precomputed offline. foldhash does *not*
/// claim resistance against an attacker who can observe hash behaviour (timing) over a long
/// time and adapt. If untrusted clients choose your keys freely (raw header values, arbitrary
/// strings) and that matters to you, pass std's SipHash with
/// [`KeyedRateLimiterBuilder::hasher`](crate::KeyedRateLimiterBuilder::hasher); collisions
/// only cost time within one shard, never correctness.
///
/// ```
/// use std::collections::hash_map::RandomState;
/// use tollgate::{Gcra, KeyedRateLimiter, Quota};
///
/// // Default: foldhash.
/// let fast: KeyedRateLimiter<String> = KeyedRateLimiter::new(Quota::per_second(5).unwrap());
/// // SipHash, for keys an adversary controls.
/// let sip: KeyedRateLimiter<String, Gcra, RandomState> =
///     KeyedRateLimiter::builder(Quota::per_second(5).unwrap())
///         .hasher(RandomState::new())
///         .build();
/// assert!(fast.try_acquire("a") && sip.try_acquire("a"));
/// ```
///
/// [foldhash]: https://docs.rs/foldhash
pub type DefaultKeyHasher = foldhash::fast::RandomState;

/// Default shard count: 64.
///
/// Chosen by measurement (release build, 1,000,000 keys, this project's 2-core machine). Memory
/// per key: many small tables each growing by doubling leave more allocator memory resident
/// than a few large ones. The sweeper's pause does not depend on it: a sweep holds a shard's
/// write lock for at most 2048 buckets at a time, whatever the shard's size.
///
/// | shards | RSS per key, `String` / `u64` (governor: 101.4 / 36.1) |
/// |---|---|
/// | 32 | - / 36.0 |
/// | 64 | 101.5 / 36.2-37.4 |
/// | 128 | 101.8 / 37.9-38.6 |
/// | 256 | 107.1-108.2 / 39.6 |
///
/// 64 is the most shards at which memory per key matches governor's (dashmap's own default
/// here is 8). With 2 cores, two writers (only new keys write-lock) rarely meet on one of 64
/// shards, and two threads' decisions rarely take the same shard's read lock (a shared cache
/// line). Each shard costs one cache line when empty. With many more cores, pass more with
/// [`KeyedRateLimiterBuilder::shards`](crate::KeyedRateLimiterBuilder::shards).
pub const DEFAULT_SHARDS: usize = 64;
