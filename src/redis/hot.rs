//! A hot key that costs Redis almost nothing, and many keys that cost it less: what the
//! builder's opt-in options (`denial_cache`, `coalesce`, `group_keys`:
//! `rate/builder/hot_keys.rs`) configure, the state they keep, and the path a check takes
//! through them: the local denial cache, then the coalescer, then the grouper, then Redis; and
//! the subscription that tells the cache of resets and rewards made elsewhere.

mod coalesce;
mod denial_cache;
mod group;
pub(super) mod invalidate;
pub(super) mod sharded_map;

pub(super) use denial_cache::DenialCache;

use std::num::NonZeroUsize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use super::connection::client::{Conn, ScriptClient};
use super::connection::error::RedisLimitError;
use super::connection::failure::Failure;
use super::connection::meter::Meter;
use super::connection::subscribe::Source;
use super::scripts::{Params, Spec};
use coalesce::Coalescer;
use group::Grouper;
use invalidate::Listener;

/// The builder's choices.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HotOptions {
    pub(crate) denial_cache: Option<NonZeroUsize>,
    pub(crate) coalesce: bool,
    pub(crate) group_keys: Option<NonZeroUsize>,
}

impl HotOptions {
    /// Whether the algorithm whose script is `spec` can run these options (coalescing needs a
    /// `batch` op).
    pub(crate) fn check(&self, spec: &Spec) -> Result<(), RedisLimitError> {
        if self.coalesce && !spec.batches {
            return Err(RedisLimitError::Unsupported(
                "coalesce() runs on Gcra only (its script decides a batch of checks)",
            ));
        }
        if self.group_keys.is_some() && !spec.groups() {
            return Err(RedisLimitError::Unsupported(
                "group_keys() runs on Gcra only (its script decides a group of keys)",
            ));
        }
        Ok(())
    }

    /// Whether these options can run on `conn`: grouping sends several keys in one call,
    /// which a cluster takes only within one slot.
    pub(crate) fn check_conn(&self, conn: &Conn) -> Result<(), RedisLimitError> {
        if self.group_keys.is_some() && matches!(conn, Conn::Cluster(_)) {
            return Err(RedisLimitError::Unsupported(
                "group_keys() needs one server (or Sentinel): a cluster call takes the keys of one slot only",
            ));
        }
        Ok(())
    }

    /// The options at work, coalescing (if on) through `client`; the denial cache (if on)
    /// told of changes published under `prefix` through a subscription at `source` (none on
    /// a connection you made: the limiter cannot make another like it).
    pub(crate) fn build(
        self,
        client: &Arc<ScriptClient>,
        source: Option<Source>,
        prefix: &str,
    ) -> Hot {
        let cache = self
            .denial_cache
            .map(|m| Arc::new(DenialCache::new(m.get())));
        let grouper = self
            .group_keys
            .map(|m| Arc::new(Grouper::new(client.clone(), m)));
        Hot {
            listener: cache
                .as_ref()
                .and(source)
                .map(|source| Listener::new(source, prefix)),
            cache,
            coalescer: self
                .coalesce
                .then(|| Arc::new(Coalescer::new(client.clone(), grouper.clone()))),
            grouper,
            local_denials: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
        }
    }
}

/// The limiter's denial cache and coalescer, if on, and what they did.
pub(crate) struct Hot {
    /// Shared with the listening task (which holds it weakly) and the local batches.
    pub(crate) cache: Option<Arc<DenialCache>>,
    /// The subscription that tells the cache of resets and rewards made elsewhere.
    listener: Option<Listener>,
    coalescer: Option<Arc<Coalescer>>,
    grouper: Option<Arc<Grouper>>,
    /// Checks the denial cache answered.
    pub(crate) local_denials: AtomicU64,
    /// Checks that went to Redis in a batch with others.
    pub(crate) coalesced: AtomicU64,
}

impl Hot {
    /// A check of `n` permits on `state` under `p` with `spec`'s script: the script's `check`
    /// reply, from the denial cache, the coalescer or `client`.
    pub(crate) async fn check(
        &self,
        client: &ScriptClient,
        spec: &'static Spec,
        state: &str,
        n: u64,
        p: Params,
    ) -> Result<Vec<i64>, Failure> {
        // One clock read, and only with the cache: the lookup's instant stands for when the
        // call is sent (a moment earlier, so a denial recorded from it ends no later).
        let sent = match &self.cache {
            Some(cache) => {
                let now = Instant::now();
                if let Some(reply) = cache.lookup(state, n, now) {
                    Meter::bump(&self.local_denials);
                    client.meter.local_denial();
                    return Ok(reply.to_vec());
                }
                Some((now, cache.generation()))
            }
            None => None,
        };
        let reply = match &self.coalescer {
            Some(c) => c.check(spec, state, n, p, &self.coalesced).await,
            None => group::check_one(self.grouper.as_ref(), client, spec, state, n, p).await,
        };
        if let (Some((sent, generation)), Ok(r)) = (sent, &reply) {
            self.record(state, n, sent, generation, r);
        }
        reply
    }

    /// Caches `reply` to a call for `n` permits on `state` sent at `sent` in the cache's
    /// `generation` if the cache is on and takes it (a one-permit denial).
    pub(crate) fn record(
        &self,
        state: &str,
        n: u64,
        sent: Instant,
        generation: u64,
        reply: &[i64],
    ) {
        if let Some(cache) = &self.cache {
            cache.record(state, n, sent, generation, reply);
        }
    }

    /// Subscribes the denial cache to the changes published elsewhere, if it has a
    /// subscription to make, and waits for the first attempt (see `invalidate`).
    pub(crate) async fn subscribe(&self) {
        if let (Some(cache), Some(l)) = (&self.cache, &self.listener) {
            l.start(cache).await;
        }
    }

    /// The cache's generation now (0 without a cache): see [`DenialCache::generation`].
    pub(crate) fn generation(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.generation())
    }

    /// Group calls sent, and the checks they carried.
    pub(crate) fn group_counts(&self) -> (u64, u64) {
        self.grouper
            .as_ref()
            .map_or((0, 0), |g| (Meter::get(&g.calls), Meter::get(&g.grouped)))
    }

    /// Invalidation messages heard, and subscriptions lost after being made.
    pub(crate) fn invalidation_counts(&self) -> (u64, u64) {
        self.listener
            .as_ref()
            .map_or((0, 0), |l| (l.heard(), l.losses()))
    }

    /// Forgets a cached denial on `state` (this process gave permits back on it).
    pub(crate) fn forget(&self, state: &str) {
        if let Some(c) = &self.cache {
            c.forget(state);
        }
    }
}
