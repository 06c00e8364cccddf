//! A hot key that costs Redis almost nothing: what the builder's two opt-in options
//! (`denial_cache`, `coalesce`: `hot_builder.rs`) configure, and the state they keep (the path
//! a check takes through them is `hot_path.rs`).

use std::num::NonZeroUsize;
use std::sync::atomic::AtomicU64;

use super::algorithm::RedisAlgorithm;
use super::coalesce::Coalescer;
use super::denial_cache::DenialCache;
use super::error::RedisLimitError;

/// The builder's choices.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HotOptions {
    pub(crate) denial_cache: Option<NonZeroUsize>,
    pub(crate) coalesce: bool,
}

impl HotOptions {
    /// Whether algorithm `A` can run these options (coalescing needs a `batch` op).
    pub(crate) fn check<A: RedisAlgorithm>(&self) -> Result<(), RedisLimitError> {
        if self.coalesce && !A::spec().batches {
            return Err(RedisLimitError::Unsupported(
                "coalesce() runs on Gcra only (its script decides a batch of checks)",
            ));
        }
        Ok(())
    }

    pub(crate) fn build(self) -> Hot {
        Hot {
            cache: self.denial_cache.map(|m| DenialCache::new(m.get())),
            coalescer: self.coalesce.then(Coalescer::new),
            local_denials: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
        }
    }
}

/// The limiter's denial cache and coalescer, if on, and what they did.
pub(crate) struct Hot {
    pub(crate) cache: Option<DenialCache>,
    pub(crate) coalescer: Option<Coalescer>,
    /// Checks the denial cache answered.
    pub(crate) local_denials: AtomicU64,
    /// Checks that went to Redis in a batch with others.
    pub(crate) coalesced: AtomicU64,
}

impl Hot {
    /// Forgets a cached denial on `state` (this process gave permits back on it).
    pub(crate) fn forget(&self, state: &str) {
        if let Some(c) = &self.cache {
            c.forget(state);
        }
    }
}
