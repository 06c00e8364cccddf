//! The key table's settings as the keyed builders take them ([`TableSettings`]: hasher,
//! shards, background sweeping, key cap, and the limiter's name), with the table's measured
//! defaults (the key hasher and the shard count), and [`table_setters!`], which writes a keyed
//! builder's public setters for them.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::num::NonZeroUsize;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::keyed::KeyedStore;
use super::sweeper::{Sweep, Sweeper};
use super::when_full::WhenFull;

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

/// A keyed builder's table settings (the keyed rate and concurrency limiters' builders hold
/// one each); their public setters are written by [`table_setters!`].
pub(crate) struct TableSettings<S> {
    pub(crate) hasher: S,
    /// Already rounded by [`shard_count`](super::table::shard_count).
    pub(crate) shards: usize,
    pub(crate) sweep_interval: Option<Duration>,
    #[cfg(feature = "tokio")]
    pub(crate) sweep_on_tokio: bool,
    pub(crate) max_keys: Option<NonZeroUsize>,
    pub(crate) when_full: WhenFull,
    /// The limiter's name: its metrics label and its name in logs.
    pub(crate) name: Option<Arc<str>>,
}

impl Default for TableSettings<DefaultKeyHasher> {
    /// A new default hasher (its own seed), [`DEFAULT_SHARDS`], no sweeper, no key cap,
    /// [`WhenFull::Deny`], no name.
    fn default() -> Self {
        TableSettings {
            hasher: DefaultKeyHasher::default(),
            shards: DEFAULT_SHARDS,
            sweep_interval: None,
            #[cfg(feature = "tokio")]
            sweep_on_tokio: false,
            max_keys: None,
            when_full: WhenFull::default(),
            name: None,
        }
    }
}

impl<S> TableSettings<S> {
    /// The same settings with another hasher (a builder's `hasher(..)`).
    pub(crate) fn with_key_hasher<S2>(self, hasher: S2) -> TableSettings<S2> {
        TableSettings {
            hasher,
            shards: self.shards,
            sweep_interval: self.sweep_interval,
            #[cfg(feature = "tokio")]
            sweep_on_tokio: self.sweep_on_tokio,
            max_keys: self.max_keys,
            when_full: self.when_full,
            name: self.name,
        }
    }

    /// An empty table with these settings, hashing with a clone of the hasher (the same
    /// seed).
    pub(crate) fn store<K: Hash + Eq, C>(&self) -> KeyedStore<K, C, S>
    where
        S: BuildHasher + Clone,
    {
        KeyedStore::new(
            self.hasher.clone(),
            self.shards,
            self.max_keys,
            self.when_full,
        )
    }

    /// The sweeper these settings ask for over `store`, the limiter's: none without an
    /// interval (or if the OS refused a thread); it holds only a weak reference to `store`.
    /// (`build` gives the store a clone of the hasher, the same seed, to keep these whole.)
    pub(crate) fn start_sweeper<T: Sweep>(&self, store: &Arc<T>) -> Option<Sweeper> {
        #[cfg(feature = "tokio")]
        let on_tokio = self.sweep_on_tokio;
        #[cfg(not(feature = "tokio"))]
        let on_tokio = false;
        let weak: Weak<dyn Sweep> = Arc::downgrade(store) as Weak<dyn Sweep>;
        self.sweep_interval
            .and_then(|interval| Sweeper::start(weak, interval, on_tokio))
    }

    /// Adds the settings to a builder's `Debug` (all but the hasher, which has none).
    pub(crate) fn debug_fields(&self, d: &mut fmt::DebugStruct<'_, '_>) {
        d.field("shards", &self.shards)
            .field("sweep_interval", &self.sweep_interval)
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
            .field("name", &self.name);
    }
}

/// Writes a keyed builder's public setters of its `settings: TableSettings<S>` field: each
/// setter named in the list, with the docs written before its name (so each builder keeps its
/// own docs and examples, and the setters' logic is written once).
macro_rules! table_setters {
    (@shards $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        shards(shards: usize) shards = $crate::store::table::shard_count(shards)); };
    (@sweep_interval $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        sweep_interval(interval: ::std::time::Duration) sweep_interval = Some(interval)); };
    (@no_sweeper $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        no_sweeper() sweep_interval = None); };
    (@sweep_on_tokio $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        #[cfg(feature = "tokio")] sweep_on_tokio(on_tokio: bool) sweep_on_tokio = on_tokio); };
    (@max_keys $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        max_keys(max_keys: ::std::num::NonZeroUsize) max_keys = Some(max_keys)); };
    (@no_key_cap $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        no_key_cap() max_keys = None); };
    (@when_full $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        when_full(policy: $crate::WhenFull) when_full = policy); };
    (@name $($d:tt)*) => { $crate::store::settings::table_setters!(@set $($d)*
        name(name: impl Into<::std::sync::Arc<str>>) name = Some(name.into())); };
    (@set $(#[$attr:meta])* $setter:ident($($arg:ident: $ty:ty)?) $field:ident = $value:expr_2021) => {
        $(#[$attr])*
        pub fn $setter(mut self $(, $arg: $ty)?) -> Self {
            self.settings.$field = $value;
            self
        }
    };
    ($($(#[$doc:meta])* $setter:ident;)*) => {
        $($crate::store::settings::table_setters!(@$setter $(#[$doc])*);)*
    };
}
pub(crate) use table_setters;
