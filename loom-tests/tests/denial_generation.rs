//! The Redis denial cache's generation (`src/redis/hot/denial_cache.rs`, `DenialCache`): every
//! forget bumps the generation before it takes the key's entry out under the shard lock; a
//! reply is recorded only if the generation, compared under that lock, is still the one read
//! before its call was sent. So an invalidation is never undone by a late reply.
//!
//! The Redis backend cannot be built under loom (it needs tokio), so this is a model of the
//! protocol, step for step as `DenialCache::{generation, lookup, record, forget}` write it
//! (one key, one shard; its `present` count included, the sweep and the cap left out: they
//! only drop entries), driven as its callers drive it:
//! - a check (`Hot::check`): a lookup that misses, the generation read, the call (one step on
//!   "Redis", which denies), then `record` with the generation read before the send;
//! - a block or penalty (`RedisRateLimiter::adjust`): the generation read, the call (a denial),
//!   then its own forget (the reply may change what a cached denial says), then `record` with
//!   the generation its own forget moved it to (read + 1), so a forget from elsewhere between
//!   the send and the record makes it differ;
//! - an invalidation (another process's reset, then the subscription's message, or this
//!   process's own reset): the key's state changes on Redis, then `forget`; once it has
//!   returned, lookups must not be answered from before the change.
//!
//! "Redis" is the key's version under a mutex: a reset bumps it, and a denial carries the
//! version it was made at. `clear` (a subscription made again) takes the same steps as a
//! forget, over every shard: one key in one shard models it too.
//!
//! Property, in every interleaving: once the forget that follows a change to version `v` has
//! returned, no lookup answers with a denial made before `v`, and the entry left at the end is
//! from `v` or later. Fails with the record's generation re-check dropped
//! (`a_record_without_the_generation_check_is_caught`), and with the adjust path as it was
//! before this model: the generation read after the reply and its own forget, which takes in a
//! forget from elsewhere that came between the send and the record
//! (`an_adjust_reading_the_generation_late_is_caught`).

use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use tollgate_loom_tests::model;

/// The key's state on Redis: its version, bumped by a reset.
#[derive(Default)]
struct Redis(Mutex<u64>);

impl Redis {
    /// A call that is denied: the version it was denied at.
    fn deny(&self) -> u64 {
        *self.0.lock().unwrap()
    }

    /// A reset: the new version.
    fn reset(&self) -> u64 {
        let mut v = self.0.lock().unwrap();
        *v += 1;
        *v
    }
}

/// How the model's cache breaks the protocol, if it does.
#[derive(Clone, Copy, PartialEq)]
enum Break {
    None,
    /// `record` inserts without comparing the generation.
    NoRecheck,
    /// The adjust path reads the generation after the reply and its own forget.
    LateRead,
}

/// `DenialCache` for one key: the cached denial is the version it was made at.
struct Cache {
    generation: AtomicU64,
    present: AtomicUsize,
    /// The shard's map, one key.
    entry: Mutex<Option<u64>>,
    brk: Break,
}

impl Cache {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// `lookup` for one permit: the cached denial's version, if one answers.
    fn lookup(&self) -> Option<u64> {
        if self.present.load(Ordering::Relaxed) == 0 {
            return None;
        }
        // Denials in the model never expire: an entry found answers.
        *self.entry.lock().unwrap()
    }

    fn record(&self, generation: u64, made_at: u64) -> bool {
        let mut map = self.entry.lock().unwrap();
        if self.brk != Break::NoRecheck && self.generation.load(Ordering::Acquire) != generation {
            return false;
        }
        if let Some(old) = map.as_mut() {
            *old = made_at;
            return true;
        }
        *map = Some(made_at);
        self.present.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn forget(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if self.entry.lock().unwrap().take().is_some() {
            self.present.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What the invalidations have completed: the newest version whose forget has returned.
struct World {
    redis: Redis,
    cache: Cache,
    invalidated: AtomicU64,
}

impl World {
    /// A lookup that must not be answered from before a completed invalidation.
    fn lookup_checked(&self) {
        let floor = self.invalidated.load(Ordering::SeqCst);
        if let Some(made_at) = self.cache.lookup() {
            assert!(
                made_at >= floor,
                "a denial from version {made_at} served after the invalidation of {floor}"
            );
        }
    }

    /// `Hot::check` on a miss.
    fn check(&self) {
        self.lookup_checked();
        let g = self.cache.generation();
        let made_at = self.redis.deny();
        self.cache.record(g, made_at);
    }

    /// `RedisRateLimiter::adjust` for a block or penalty (a one-permit denial reply).
    fn adjust(&self) {
        let before = self.cache.generation();
        let made_at = self.redis.deny();
        self.cache.forget();
        let g = if self.cache.brk == Break::LateRead {
            self.cache.generation()
        } else {
            before.wrapping_add(1)
        };
        self.cache.record(g, made_at);
    }

    /// A reset (here or elsewhere) and the forget that follows it, then a lookup.
    fn invalidate(&self) {
        let v = self.redis.reset();
        self.cache.forget();
        self.invalidated.fetch_max(v, Ordering::SeqCst);
        self.lookup_checked();
    }
}

/// One thread runs `a`, another `b`, the model's own the invalidation; then the final entry is
/// checked.
fn race(brk: Break, a: fn(&World), b: Option<fn(&World)>) {
    model(move || {
        let w = Arc::new(World {
            redis: Redis::default(),
            cache: Cache {
                generation: AtomicU64::new(0),
                present: AtomicUsize::new(0),
                entry: Mutex::new(None),
                brk,
            },
            invalidated: AtomicU64::new(0),
        });
        let ta = {
            let w = w.clone();
            thread::spawn(move || a(&w))
        };
        let tb = b.map(|b| {
            let w = w.clone();
            thread::spawn(move || b(&w))
        });
        w.invalidate();
        ta.join().unwrap();
        if let Some(tb) = tb {
            tb.join().unwrap();
        }
        w.lookup_checked();
        let entry = *w.cache.entry.lock().unwrap();
        assert_eq!(
            w.cache.present.load(Ordering::Relaxed),
            usize::from(entry.is_some())
        );
    });
}

#[test]
fn a_check_racing_an_invalidation() {
    race(Break::None, World::check, None);
}

#[test]
fn an_adjust_racing_an_invalidation() {
    race(Break::None, World::adjust, None);
}

#[test]
fn a_check_and_an_adjust_racing_an_invalidation() {
    race(Break::None, World::check, Some(World::adjust));
}

#[test]
#[should_panic(expected = "served after the invalidation")]
fn a_record_without_the_generation_check_is_caught() {
    race(Break::NoRecheck, World::check, None);
}

#[test]
#[should_panic(expected = "served after the invalidation")]
fn an_adjust_reading_the_generation_late_is_caught() {
    race(Break::LateRead, World::adjust, None);
}
