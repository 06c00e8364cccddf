//! A plain check's allocations on the client, counted by this binary's allocator on the
//! calling thread (a current-thread runtime: the connection's I/O task runs there too): the
//! state key made without `format!` (its quota part made once per limiter), the command
//! built in the buffers of the thread's last one, no boxed future around the request, the
//! full check reply in the reply's own buffer. Deterministic (a count, not a time); a real
//! Redis on loopback, every loop bounded.
#![cfg(feature = "redis")]

#[path = "redis_support/counting.rs"]
mod counting;
mod redis_support;

use std::fmt::Write as _;
use std::time::Duration;

use counting::allocs;
use redis_support::RedisServer;
use tollgate::redis::RedisRateLimiter;
use tollgate::Quota;

const CALLS: u64 = 2_000;
/// Allocations per check, tollgate's and the `redis` crate's (the state key, then the packed
/// request, its channel, the reply and its integers): 5 measured; a `format!`ed state key,
/// command buffers made and grown one argument at a time on every call, the boxed future of
/// `query_async` and a new vector for the full check reply made 14.
const PER_CHECK: u64 = 5;

#[tokio::test]
async fn a_plain_check_allocates_no_more_than_it_must() {
    let server = RedisServer::start();
    let l = RedisRateLimiter::builder(Quota::per_second(100).unwrap())
        .prefix("allocs")
        .deadline(Duration::from_secs(10))
        .connect(&server.url())
        .await
        .unwrap();
    let mut key = String::with_capacity(16);
    let mut run = async |from: u64| {
        for i in from..from + CALLS {
            key.clear();
            write!(key, "{{u{i}}}").unwrap();
            assert!(l.check(&key).await.unwrap().allowed);
        }
    };
    // Warm-up: the script loaded, the connection's buffers grown.
    run(0).await;
    let a = allocs();
    run(CALLS).await;
    let per_check = (allocs() - a) as f64 / CALLS as f64;
    assert!(
        per_check <= PER_CHECK as f64 + 0.5,
        "{per_check:.2} allocations per check (at most {PER_CHECK})"
    );
}
