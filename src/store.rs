//! Where cells live: the keyed store (a sharded table with a key cap), and the eviction rule
//! that keeps it bounded. The direct limiters need no store: their one cell sits inline.
//!
//! - `table`: the sharded hash table (one hashbrown `HashTable` per shard, each behind a lock);
//! - `keyed`: the store over it, generic over its cells: the keyed rate limiters' (the
//!   decisions on a key are the engine's, `engine::keyed`, which holds the store) and the
//!   keyed concurrency limiter's (`concurrency::sem_store`); `evict::Evict` is what it asks
//!   of the cells' rule;
//! - `cap`: the key cap (`max_keys`), and `when_full`: what a new key meets at the cap;
//! - `walk`: the sweep's chunked walk over every shard;
//! - `sweeper`: the background thread or tokio task that runs a store's sweep every interval
//!   (the keyed concurrency limiter's store too);
//! - `evict`: what the store asks of its cells' rule (`Evict`: may this cell go now), the
//!   rate cells' cold-time rule (which keys are cold), and sweep statistics;
//! - `settings`: the table's settings as the keyed builders take them (hasher, shards,
//!   sweeping, key cap), their defaults (`DefaultKeyHasher`, `DEFAULT_SHARDS`), and the macro
//!   that writes the builders' setters for them.

pub(crate) mod cap;
pub(crate) mod evict;
pub(crate) mod keyed;
pub(crate) mod settings;
pub(crate) mod sweeper;
pub(crate) mod table;
pub(crate) mod walk;
pub(crate) mod when_full;
