//! A hot key that costs Redis almost nothing: the two opt-in options of the builder
//! ([`denial_cache`](RedisRateLimiterBuilder::denial_cache),
//! [`coalesce`](RedisRateLimiterBuilder::coalesce)) and the path a check takes through them
//! (the local denial cache, then the coalescer, then Redis).

use std::num::NonZeroUsize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use super::algorithm::{Params, RedisAlgorithm};
use super::client::{Counters, Failure};
use super::coalesce::Coalescer;
use super::config::RedisRateLimiterBuilder;
use super::denial_cache::DenialCache;
use super::error::RedisLimitError;
use super::shared::Shared;

/// The builder's choices.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HotOptions {
    denial_cache: Option<NonZeroUsize>,
    coalesce: bool,
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
    cache: Option<DenialCache>,
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

/// A check of `n` permits on `state` under `p`: the script's `check` reply, from the denial
/// cache, the coalescer or Redis.
pub(crate) async fn check<A: RedisAlgorithm>(
    shared: &Arc<Shared>,
    state: &str,
    n: u64,
    p: Params,
) -> Result<Vec<i64>, Failure> {
    let hot = &shared.hot;
    if let Some(cache) = &hot.cache {
        if let Some(reply) = cache.lookup(state, n, Instant::now()) {
            Counters::bump(&hot.local_denials);
            return Ok(reply.to_vec());
        }
    }
    let sent = Instant::now();
    let reply = Coalescer::check(shared, &A::spec().script, state, n, p).await;
    if let (Some(cache), Ok(r)) = (&hot.cache, &reply) {
        cache.record(state, n, sent, r);
    }
    reply
}

impl<A: RedisAlgorithm> RedisRateLimiterBuilder<A> {
    /// Denies locally, with no round trip, the single-permit calls on a key that Redis has
    /// just denied one permit, until that denial's `retry_after` has passed (measured from
    /// when the denied call was sent, so never past Redis's own): a flood on one key (an
    /// attacker, a retry storm) then costs Redis one call per `retry_after` instead of one per
    /// request. At most `max_keys` denials are kept (when full, expired ones are dropped, and
    /// a new denial is not cached if none has expired). Off by default.
    ///
    /// The reply is the one Redis would give: `remaining` 0, `retry_after` and `reset_after`
    /// as Redis sent them less the time since, [`RedisDecision::server_time`] advanced by the
    /// same. It never refuses what Redis would admit, with one exception: another process
    /// giving permits back (a cancelled [`RedisReservation`](super::RedisReservation)) or a
    /// reset of the key (`DEL` of [`state_key`](super::RedisRateLimiter::state_key)) does not
    /// reach this cache, which goes on refusing until the cached `retry_after` has passed.
    /// Calls for more than one permit, and peeks, always ask Redis. Counted in
    /// [`RedisStats::local_denials`](super::RedisStats::local_denials).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .denial_cache(NonZeroUsize::new(10_000).unwrap());
    /// # let _ = b;
    /// ```
    ///
    /// [`RedisDecision::server_time`]: super::RedisDecision::server_time
    pub fn denial_cache(mut self, max_keys: NonZeroUsize) -> Self {
        self.hot.denial_cache = Some(max_keys);
        self
    }

    /// Coalesces concurrent checks on one key from this process: while one call on the key is
    /// in flight, the checks that arrive queue up and then go to Redis as one script call,
    /// which decides them in the order they arrived at one server time. Each caller gets its
    /// own exact [`Decision`](crate::Decision): the one the same calls, sent one by one at
    /// that instant, would get. Under load on one key, Redis runs one script per round trip
    /// instead of one per call. A queued call still answers within the
    /// [`deadline`](Self::deadline). Off by default. [`Gcra`](crate::Gcra) only: with
    /// another algorithm, [`connect`](Self::connect) returns [`RedisLimitError::Unsupported`].
    /// Counted in [`RedisStats::coalesced`](super::RedisStats::coalesced).
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .coalesce();
    /// # let _ = b;
    /// ```
    pub fn coalesce(mut self) -> Self {
        self.hot.coalesce = true;
        self
    }
}
