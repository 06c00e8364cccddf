//! A primary found through a real Redis Sentinel, and followed through a failover: two
//! servers (a primary and its replica) and one sentinel (`redis-server --sentinel`, the same
//! binary) on loopback; every loop is bounded. Without the re-resolution after a failure the
//! limiter never reaches the new primary (seen: the test fails).
#![cfg(feature = "redis")]

mod redis_support;

use std::time::{Duration, Instant};

use redis_support::{eventually, info, sentinel_pair};
use tollgate::redis::{FailurePolicy, RedisRateLimiter};
use tollgate::Quota;

const DEADLINE: Duration = Duration::from_millis(200);
/// "Never a hang": every call returns long before this, failover or not.
const HANG: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiter_follows_a_sentinel_failover_to_the_new_primary() {
    let (mut primary, replica, sentinel) = sentinel_pair("tg").await;

    let limiter = RedisRateLimiter::builder(Quota::per_hour(100).unwrap())
        .deadline(DEADLINE)
        .on_failure(FailurePolicy::Open)
        .connect_sentinel([sentinel.url()], "tg")
        .await
        .unwrap();
    let d = limiter.decide("k").await.unwrap();
    assert!(d.server_time.is_some(), "{d:?}");
    let key = limiter.state_key("k");
    let on_replica = eventually(100, Duration::from_millis(10), async || {
        redis::cmd("EXISTS")
            .arg(&key)
            .query::<bool>(&mut replica.conn())
            .unwrap_or(false)
    })
    .await;
    assert!(on_replica, "the state never reached the replica");

    primary.kill();
    let killed = Instant::now();
    let (mut slowest, mut policy, mut back) = (Duration::ZERO, 0u32, None);
    for _ in 0..300 {
        let t = Instant::now();
        let d = limiter.decide("k").await.unwrap();
        slowest = slowest.max(t.elapsed());
        if d.server_time.is_some() {
            back = Some(killed.elapsed());
            break;
        }
        policy += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let back = back.expect("the limiter never reached the new primary");
    assert!(slowest < HANG, "a call took {slowest:?}");
    assert!(
        policy > 0,
        "the policy never decided while the primary was away"
    );
    // The new primary is the old replica, and the limiter's state is on it: 2 permits taken.
    assert!(info(&mut replica.conn(), "replication").contains("role:master"));
    let d = limiter.peek("k").await.unwrap();
    assert_eq!(d.remaining, 98, "{d:?}");
    eprintln!(
        "failover followed: Redis decisions again {back:?} after the kill, {policy} policy \
         decisions meanwhile, slowest call {slowest:?}"
    );
}
