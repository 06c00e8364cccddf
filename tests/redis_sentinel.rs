//! A primary found through a real Redis Sentinel, and followed through a failover: two
//! servers (a primary and its replica) and one sentinel (`redis-server --sentinel`, the same
//! binary) on loopback; every loop is bounded. Without the re-resolution after a failure the
//! limiter never reaches the new primary (seen: the test fails).
#![cfg(feature = "redis")]

mod redis_support;

use std::time::{Duration, Instant};

use redis_support::{eventually, info, redis_decides, sentinel_pair};
use tollgate::redis::{FailurePolicy, RedisRateLimiter};
use tollgate::{Quota, WeightedWindow};

const DEADLINE: Duration = Duration::from_millis(200);
/// "Never a hang": every call returns long before this, failover or not.
const HANG: Duration = Duration::from_secs(2);
/// The deadline of the limiters that only write and read the state around the failover: no
/// stall of a loaded machine reaches it (past it, an `Open` admission would be counted as a
/// permit taken).
const PATIENT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiter_follows_a_sentinel_failover_to_the_new_primary() {
    let (mut primary, replica, sentinel) = sentinel_pair("tg").await;

    let limiter = RedisRateLimiter::builder(Quota::per_hour(100).unwrap())
        .deadline(DEADLINE)
        .on_failure(FailurePolicy::Open)
        .connect_sentinel([sentinel.url()], "tg")
        .await
        .unwrap();
    // The same state, for the steps that need Redis's answer: an error, not an admission,
    // when Redis cannot give it.
    let patient = RedisRateLimiter::builder(Quota::per_hour(100).unwrap())
        .deadline(PATIENT)
        .connect_sentinel([sentinel.url()], "tg")
        .await
        .unwrap();
    // Named states (GCRA and the weighted window), written before the failover.
    let named = |quota: Quota| {
        RedisRateLimiter::builder(quota)
            .state_name("login")
            .deadline(PATIENT)
            .on_failure(FailurePolicy::Open)
            .connect_sentinel([sentinel.url()], "tg")
    };
    let named_weighted = |quota: Quota| {
        RedisRateLimiter::builder(quota)
            .algorithm(WeightedWindow)
            .unwrap()
            .state_name("login")
            .deadline(PATIENT)
            .on_failure(FailurePolicy::Open)
            .connect_sentinel([sentinel.url()], "tg")
    };
    let gcra_old = named(Quota::per_hour(10).unwrap()).await.unwrap();
    let weighted_old = named_weighted(Quota::per_hour(10).unwrap()).await.unwrap();
    for _ in 0..4 {
        // Redis's admissions (an `Open` one past the deadline may have taken nothing).
        for d in [gcra_old.decide("n").await, weighted_old.decide("n").await] {
            let d = d.unwrap();
            assert!(d.decision.allowed && d.server_time.is_some(), "{d:?}");
        }
    }
    let d = patient.decide("k").await.unwrap();
    assert!(d.server_time.is_some(), "{d:?}");
    // The limiter under test is connected to the primary and has its script before the kill.
    // Polled (a call past its 200 ms deadline is the policy's), for no permit: nothing taken.
    let up = redis_decides(&limiter, "k", 0, 100).await;
    assert!(up, "Redis never decided");
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
    // Calls for no permit: one past its deadline may still run on the new primary (its first
    // call there loads the script), and one that took a permit would change the counts below
    // unseen.
    let (mut slowest, mut policy, mut back) = (Duration::ZERO, 0u32, None);
    for _ in 0..300 {
        let t = Instant::now();
        let d = limiter.decide_n("k", 0).await.unwrap();
        slowest = slowest.max(t.elapsed());
        if d.server_time.is_some() {
            back = Some((killed.elapsed(), d.decision));
            break;
        }
        policy += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (back, seen) = back.expect("the limiter never reached the new primary");
    assert!(slowest < HANG, "a call took {slowest:?}");
    assert!(
        policy > 0,
        "the policy never decided while the primary was away"
    );
    // The new primary is the old replica, and the limiter finds its state there: the permit
    // taken before the kill.
    assert!(info(&mut replica.conn(), "replication").contains("role:master"));
    assert_eq!(seen.remaining, 99, "{seen:?}");
    // (Read by the patient limiter, whose first calls fail until it finds the new primary.)
    let mut peeked = None;
    let found = eventually(300, Duration::from_millis(20), async || {
        peeked = patient.peek("k").await.ok();
        peeked.is_some()
    })
    .await;
    assert!(found, "the patient limiter never reached the new primary");
    let d = peeked.unwrap();
    assert_eq!(d.remaining, 99, "{d:?}");
    // The limiter under test takes permits there too (polled, on a key of its own: the calls
    // past their deadline may have taken some as well).
    let took = redis_decides(&limiter, "w", 1, 100).await;
    assert!(took, "the limiter never took a permit on the new primary");
    let w = patient.peek("w").await.unwrap();
    assert!(w.remaining < 100, "{w:?}");
    // The named states came over too, and limiters under another quota (20 per 2 hours)
    // convert them: the 4 permits taken are still counted (GCRA: 4 permits of debt).
    let gcra_new = named(Quota::new(20, Duration::from_secs(7200)).unwrap())
        .await
        .unwrap();
    let weighted_new = named_weighted(Quota::new(20, Duration::from_secs(7200)).unwrap())
        .await
        .unwrap();
    let g = gcra_new.decide_n("n", 0).await.unwrap();
    assert!(g.server_time.is_some(), "{g:?}");
    assert_eq!(g.decision.remaining, 16, "{g:?}");
    let w = weighted_new.decide_n("n", 0).await.unwrap();
    assert!(w.server_time.is_some(), "{w:?}");
    assert_eq!(w.decision.remaining, 16, "{w:?}");
    eprintln!(
        "failover followed: Redis decisions again {back:?} after the kill, {policy} policy \
         decisions meanwhile, slowest call {slowest:?}"
    );
}
