//! A hot key on a real Redis: coalesced checks and the local denial cache give, field for
//! field, the decisions that the same calls made one by one at the same instant get from the
//! in-process limiter (a `ManualClock` set to each reply's server time).
#![cfg(feature = "redis")]

mod redis_support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use redis_support::{current_thread, RedisServer};
use tollgate::redis::{RedisDecision, RedisLimitError, RedisRateLimiter};
use tollgate::{KeyedRateLimiter, ManualClock, Quota, SlidingLog};

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("h{}", N.fetch_add(1, Ordering::Relaxed))
}

fn us_of(d: &RedisDecision) -> u64 {
    u64::try_from(d.server_time.expect("Redis answered").as_micros()).unwrap()
}

/// Quotas with whole-microsecond intervals (where Redis and in-process agree exactly).
fn quotas() -> Vec<Quota> {
    let us = Duration::from_micros;
    vec![
        Quota::from_interval(us(250))
            .unwrap()
            .with_burst(5)
            .unwrap(),
        Quota::per_second(10).unwrap(),
        Quota::per_hour(3600).unwrap().with_burst(7).unwrap(),
        Quota::from_interval(us(1)).unwrap().with_burst(40).unwrap(),
    ]
}

/// Sends `ns` as concurrent checks on one key of a coalescing limiter (spawned in order on a
/// current-thread runtime: the first goes alone, the others queue in that order and go as
/// batches), then replays them one by one in the same order on the in-process limiter, each
/// at the server time its reply carries, and compares every field.
async fn coalesced_equal_one_by_one(server: &RedisServer, quota: Quota, ns: &[u64]) {
    let redis = RedisRateLimiter::builder(quota)
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .coalesce()
        .connect(&server.url())
        .await
        .unwrap();
    let before = redis.stats();
    let handles: Vec<_> = ns
        .iter()
        .map(|&n| {
            let redis = redis.clone();
            tokio::spawn(async move { redis.decide_n("hot", n).await.unwrap() })
        })
        .collect();
    let mut replies = Vec::new();
    for h in handles {
        replies.push(h.await.unwrap());
    }
    let after = redis.stats();
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String> = KeyedRateLimiter::builder(quota)
        .clock(clock.clone())
        .build();
    for (i, (r, &n)) in replies.iter().zip(ns).enumerate() {
        assert!(
            clock.set(us_of(r) * 1000),
            "call {i}: replies out of server-time order"
        );
        let l = local.check_n("hot", n);
        assert_eq!(r.decision, l, "call {i} (n = {n}) of {ns:?}");
    }
    // Coalesced for real: every check but the first queued, and (from three on: the first
    // goes alone) fewer script calls than checks.
    let calls = after.replies - before.replies;
    assert_eq!(after.coalesced - before.coalesced, ns.len() as u64 - 1);
    if ns.len() > 2 {
        assert!(
            calls < ns.len() as u64,
            "{calls} calls for {} checks",
            ns.len()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every field of every coalesced decision equals the one-by-one decision at its instant:
    /// admissions, denials, peeks (n = 0) and requests above the burst, in random mixes.
    #[test]
    fn coalesced_decisions_are_the_one_by_one_decisions(
        q in 0..4usize,
        ns in prop::collection::vec(prop_oneof![6 => 1..3u64, 1 => Just(0u64), 1 => 3..50u64], 1..40),
    ) {
        let server = RedisServer::start();
        current_thread().block_on(coalesced_equal_one_by_one(&server, quotas()[q], &ns));
    }
}

/// More checks than one batch holds (256): the queue goes as several batches, in order.
#[test]
fn long_queues_go_as_several_batches_in_order() {
    let server = RedisServer::start();
    let ns: Vec<u64> = (0..700).map(|i| [1, 1, 2, 0, 1][i % 5]).collect();
    let q = Quota::from_interval(Duration::from_micros(1))
        .unwrap()
        .with_burst(600)
        .unwrap();
    current_thread().block_on(coalesced_equal_one_by_one(&server, q, &ns));
}

#[tokio::test]
async fn coalescing_is_gcra_only() {
    let server = RedisServer::start();
    let r = RedisRateLimiter::builder(Quota::per_second(5).unwrap())
        .algorithm(SlidingLog)
        .unwrap()
        .coalesce()
        .connect(&server.url())
        .await;
    assert!(matches!(r, Err(RedisLimitError::Unsupported(_))));
}

/// After Redis denies a key, the same process's single-permit checks are denied locally
/// (no script call), each with the fields the in-process limiter gives at the server time
/// the cached reply reports; once the denial has passed, Redis decides again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_denials_are_the_decisions_at_their_instant() {
    let server = RedisServer::start();
    for quota in [
        Quota::per_second(10).unwrap().with_burst(3).unwrap(),
        Quota::per_hour(3600).unwrap().with_burst(2).unwrap(),
    ] {
        let redis = RedisRateLimiter::builder(quota)
            .prefix(unique_prefix())
            .deadline(Duration::from_secs(5))
            .denial_cache(NonZeroUsize::new(100).unwrap())
            .connect(&server.url())
            .await
            .unwrap();
        let clock = ManualClock::new();
        let local: KeyedRateLimiter<String> = KeyedRateLimiter::builder(quota)
            .clock(clock.clone())
            .build();
        // Use the burst up, then one denial from Redis.
        for _ in 0..=quota.burst() {
            let r = redis.decide("k").await.unwrap();
            assert!(clock.set(us_of(&r) * 1000));
            assert_eq!(r.decision, local.check("k"));
        }
        let s = redis.stats();
        assert_eq!(s.local_denials, 0);
        for i in 0..20 {
            let r = redis.decide("k").await.unwrap();
            assert!(!r.decision.allowed);
            // A later instant than any Redis reply so far, as the local clock requires.
            assert!(clock.set(us_of(&r) * 1000), "check {i}: time went back");
            assert_eq!(r.decision, local.check("k"), "check {i}");
        }
        let s2 = redis.stats();
        assert_eq!(s2.local_denials, 20, "answered locally");
        assert_eq!(s2.replies, s.replies, "no script call");
        // Calls for more than one permit and peeks still ask Redis. (Not replayed: a cached
        // reply's server time is counted from when the denied call was sent, so it may be
        // ahead of Redis's clock by up to that call's round trip.)
        let r = redis.decide_n("k", 2).await.unwrap();
        assert!(!r.decision.allowed);
        redis.peek("k").await.unwrap();
        assert_eq!(redis.stats().replies, s2.replies + 2);
    }
}

/// Once the cached `retry_after` has passed, the cache answers nothing: Redis admits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_denials_end_by_their_retry_after() {
    let server = RedisServer::start();
    let quota = Quota::from_interval(Duration::from_millis(2)).unwrap();
    let redis = RedisRateLimiter::builder(quota)
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .denial_cache(NonZeroUsize::new(10).unwrap())
        .connect(&server.url())
        .await
        .unwrap();
    // The denial needs the second check within 2 ms of the first: on a stalled machine, try
    // the pair again (bounded).
    let mut denied = None;
    for _ in 0..50 {
        let _ = redis.check("k").await.unwrap();
        let d = redis.check("k").await.unwrap();
        if !d.allowed {
            denied = Some(d);
            break;
        }
    }
    let retry = denied
        .expect("a denial in 50 tries")
        .retry_after
        .expect("denied for now");
    tokio::time::sleep(retry).await;
    let local = redis.stats().local_denials;
    let d = redis.check("k").await.unwrap();
    assert!(d.allowed, "{d:?}");
    assert_eq!(redis.stats().local_denials, local);
}

/// A refund by this process forgets the key's cached denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_cancels_forget_the_cached_denial() {
    let server = RedisServer::start();
    let quota = Quota::per_hour(1).unwrap();
    let redis = RedisRateLimiter::builder(quota)
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .denial_cache(NonZeroUsize::new(10).unwrap())
        .connect(&server.url())
        .await
        .unwrap();
    let r = redis.reserve("k").await.unwrap();
    assert!(!redis.check("k").await.unwrap().allowed, "denied by Redis");
    assert!(!redis.check("k").await.unwrap().allowed, "denied locally");
    assert_eq!(redis.stats().local_denials, 1);
    assert!(r.cancel().await.unwrap(), "refunded");
    assert!(
        redis.check("k").await.unwrap().allowed,
        "Redis admits again"
    );
}

/// When Redis does not answer, every queued check fails on its own (here as the
/// `FailurePolicy::Error` failure) within its deadline, none is left waiting, and the key
/// coalesces again once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_checks_fail_on_their_own_when_redis_does_not_answer() {
    let server = RedisServer::start();
    let redis = RedisRateLimiter::builder(Quota::per_second(1000).unwrap())
        .prefix(unique_prefix())
        .deadline(Duration::from_millis(50))
        .coalesce()
        .connect(&server.url())
        .await
        .unwrap();
    // Connected and the script loaded first. Polled: on a busy machine a first call can
    // outlast the 50 ms deadline.
    let up = redis_support::eventually(
        100,
        Duration::from_millis(10),
        async || matches!(redis.check("k").await, Ok(d) if d.allowed),
    )
    .await;
    assert!(up, "Redis never decided");
    // Redis busy for far longer than the deadline: it holds every script call for 5 s.
    server.pause_writes(5000);
    let before = redis.stats();
    let t = Instant::now();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let redis = redis.clone();
            tokio::spawn(async move { redis.check("k").await })
        })
        .collect();
    for h in handles {
        assert!(h.await.unwrap().is_err(), "Redis could not answer");
    }
    // Within their deadline, not at the pause's end (5 s).
    assert!(
        t.elapsed() < Duration::from_millis(800),
        "{:?}",
        t.elapsed()
    );
    let after = redis.stats();
    // Each check's own timeout (the batch sent after the first one's may time out too).
    assert!(after.timeouts - before.timeouts >= 8);
    server.unpause();
    // Back: the key is not stuck behind the failed batch.
    let ok = redis_support::eventually(100, Duration::from_millis(20), async || {
        redis.check("k").await.is_ok()
    })
    .await;
    assert!(ok);
}

/// Holds every command of `server`'s clients for `ms` (CLIENT PAUSE), so that the checks sent
/// meanwhile are all in flight together.
fn pause(server: &RedisServer, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("ALL")
        .query(&mut server.conn())
        .unwrap();
}

/// Sends `count` checks, the `i`th on `key(i)`, through a coalescing limiter, all in flight
/// together (Redis paused meanwhile); asserts each is decided and allowed, and returns the
/// script calls they took and how many of them were coalesced.
async fn paused_checks(server: &RedisServer, count: usize, key: fn(usize) -> String) -> (u64, u64) {
    let redis = RedisRateLimiter::builder(Quota::per_second(1000).unwrap())
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(20))
        .coalesce()
        .connect(&server.url())
        .await
        .unwrap();
    assert!(redis.check("warm-up").await.unwrap().allowed);
    let before = redis.stats();
    pause(server, 1000);
    let handles: Vec<_> = (0..count)
        .map(|i| {
            let redis = redis.clone();
            tokio::spawn(async move { redis.check(&key(i)).await })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let d = h.await.unwrap().unwrap();
        assert!(d.allowed, "check {i} on {}: {d:?}", key(i));
    }
    let after = redis.stats();
    (
        after.replies - before.replies,
        after.coalesced - before.coalesced,
    )
}

/// More checks on distinct keys in flight together than the coalescer has slots (4096), so
/// that many share a slot with another key's check: every one is decided, each by its own
/// call (distinct keys never batch), and none is left waiting for another key's call.
#[test]
fn checks_on_keys_sharing_a_slot_are_all_decided() {
    let server = RedisServer::start();
    let (calls, coalesced) =
        current_thread().block_on(paused_checks(&server, 10_000, |i| format!("k{i}")));
    assert_eq!(calls, 10_000, "one call per key");
    // (A batch here would need two keys of one slot to share 32 more bits of hash as well:
    // about one chance in 10^5 over the 10 000 keys.)
    assert_eq!(coalesced, 0, "distinct keys never batch");
}

/// Checks on one key sent together still coalesce, on a multi-threaded runtime: all in flight
/// together (Redis paused), the first goes alone and every other one goes in a batch after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_checks_on_one_key_coalesce() {
    let server = RedisServer::start();
    let (calls, coalesced) = paused_checks(&server, 64, |_| "hot".to_owned()).await;
    assert_eq!(coalesced, 63, "all but the first queued");
    assert_eq!(calls, 2, "the first call, then one batch");
}
