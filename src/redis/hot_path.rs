//! The path of a check through the hot-key options: the local denial cache, then the
//! coalescer, then Redis.

use std::sync::Arc;
use std::time::Instant;

use super::algorithm::{Params, RedisAlgorithm};
use super::coalesce::Coalescer;
use super::failure::Failure;
use super::meter::Counters;
use super::shared::Shared;

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
            shared.backend.counters.local_denial();
            return Ok(reply.to_vec());
        }
    }
    let sent = Instant::now();
    let reply = Coalescer::check(shared, A::spec(), state, n, p).await;
    if let (Some(cache), Ok(r)) = (&hot.cache, &reply) {
        cache.record(state, n, sent, r);
    }
    reply
}
