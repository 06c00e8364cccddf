//! A local grant's allocations, counted by this binary's allocator on the calling thread:
//! none (not even the key's state key), so that a grant from a batch costs about what an
//! in-process check does, not a formatting of the key. Deterministic (a count, not a
//! time); a real Redis on loopback gives the batches, every loop is bounded.
#![cfg(feature = "redis")]

#[path = "redis_support/counting.rs"]
mod counting;
mod redis_support;

use std::time::Duration;

use counting::allocs;
use redis_support::RedisServer;
use tollgate::redis::RedisRateLimiter;
use tollgate::Quota;

/// Calls measured once the batches grant.
const CALLS: u64 = 5_000;
/// What a call that goes to Redis may allocate (the request, the reply, a spawned take; about
/// 12 measured): it only keeps the few such calls among `CALLS` from counting as grants.
const PER_REPLY: u64 = 50;

// Current-thread: the calls, and the takes they start, run on this thread, whose
// allocations are the ones counted.
#[tokio::test]
async fn a_local_grant_allocates_nothing() {
    let server = RedisServer::start();
    // Far above the load, so every call is allowed; an hour's refresh, so that no batch ends
    // and the few takes (each about twice the last) depend on the call count only.
    let quota = Quota::per_second(1_000_000)
        .unwrap()
        .with_burst(10_000_000)
        .unwrap();
    let l = RedisRateLimiter::builder(quota)
        .prefix("allocs")
        .deadline(Duration::from_secs(10))
        .local_batches(Duration::from_secs(3600), 5)
        .connect(&server.url())
        .await
        .unwrap();
    for _ in 0..CALLS {
        assert!(l.check("{hot}").await.unwrap().allowed);
        if l.stats().local_grants >= 100 {
            break;
        }
    }
    let before = l.stats();
    assert!(before.local_grants >= 100, "no batch taken: {before:?}");
    let a = allocs();
    for _ in 0..CALLS {
        assert!(l.check("{hot}").await.unwrap().allowed);
    }
    let allocated = allocs() - a;
    let after = l.stats();
    let grants = after.local_grants - before.local_grants;
    let replies = after.replies - before.replies;
    assert!(grants >= CALLS * 9 / 10, "{grants} local grants of {CALLS}");
    assert!(
        allocated <= PER_REPLY * replies,
        "{allocated} allocations for {grants} local grants and {replies} replies"
    );
}
