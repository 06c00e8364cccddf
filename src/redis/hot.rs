//! A hot key that costs Redis almost nothing: what the builder's two opt-in options
//! (`denial_cache`, `coalesce`: `rate/builder/hot_keys.rs`) configure, the state they keep, and the path
//! a check takes through them: the local denial cache, then the coalescer, then Redis.

mod coalesce;
mod denial_cache;
pub(super) mod sharded_map;

use std::num::NonZeroUsize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use super::connection::client::ScriptClient;
use super::connection::error::RedisLimitError;
use super::connection::failure::Failure;
use super::connection::meter::Meter;
use super::scripts::{Params, Spec};
use coalesce::Coalescer;
use denial_cache::DenialCache;

/// The builder's choices.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HotOptions {
    pub(crate) denial_cache: Option<NonZeroUsize>,
    pub(crate) coalesce: bool,
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
        Ok(())
    }

    /// The options at work, coalescing (if on) through `client`.
    pub(crate) fn build(self, client: &Arc<ScriptClient>) -> Hot {
        Hot {
            cache: self.denial_cache.map(|m| DenialCache::new(m.get())),
            coalescer: self
                .coalesce
                .then(|| Arc::new(Coalescer::new(client.clone()))),
            local_denials: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
        }
    }
}

/// The limiter's denial cache and coalescer, if on, and what they did.
pub(crate) struct Hot {
    pub(crate) cache: Option<DenialCache>,
    coalescer: Option<Arc<Coalescer>>,
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
                Some((cache, now))
            }
            None => None,
        };
        let reply = match &self.coalescer {
            Some(c) => c.check(spec, state, n, p, &self.coalesced).await,
            None => spec.check(client, state, n, p).await,
        };
        if let (Some((cache, sent)), Ok(r)) = (sent, &reply) {
            cache.record(state, n, sent, r);
        }
        reply
    }

    /// Forgets a cached denial on `state` (this process gave permits back on it).
    pub(crate) fn forget(&self, state: &str) {
        if let Some(c) = &self.cache {
            c.forget(state);
        }
    }
}
