//! The keyed limiter's measured defaults: the key hasher and the shard count.

/// The default hasher of a [`KeyedRateLimiter`](crate::KeyedRateLimiter): [foldhash]'s fast
/// `RandomState`.
///
/// Chosen by measurement: the fastest of std's SipHash, foldhash and ahash on `u64` and short
/// string keys, several times faster than SipHash (figures in `benches/BENCHMARKS.md`, "Key
/// hashers").
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
/// Chosen by measurement of memory per key at a million keys (`benches/BENCHMARKS.md`, "Shard
/// count"): many small tables each growing by doubling leave more allocator memory resident
/// than a few large ones. The sweeper's pause does not depend on it: a sweep holds a shard's
/// write lock for at most 2048 buckets at a time, whatever the shard's size.
///
/// 64 is the most shards at which memory per key matched governor's (whose dashmap defaults
/// to 4 shards per core, rounded up to a power of two). With 2 cores, two writers (only new
/// keys write-lock) rarely meet on one of 64 shards, and two threads' decisions rarely take
/// the same shard's read lock (a shared cache line). Each shard costs one cache line when empty. With many more cores, pass more with
/// [`KeyedRateLimiterBuilder::shards`](crate::KeyedRateLimiterBuilder::shards).
pub const DEFAULT_SHARDS: usize = 64;
