//! The denial cache across processes: a reset or a reward made by another limiter (its own
//! connection, as another process) reaches this limiter's cached denials through Redis
//! pub/sub, on one server, a cluster and through Sentinel, and the subscription comes back
//! after its connection is killed. Every wait is a bounded poll, never a timed assertion.
#![cfg(feature = "redis")]

mod redis_support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use redis_support::{eventually, info, sentinel_pair, RedisCluster, RedisServer};
use tollgate::redis::{RedisAlgorithm, RedisRateLimiter, RedisRateLimiterBuilder};
use tollgate::{FixedWindow, Quota};

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("inv{}", N.fetch_add(1, Ordering::Relaxed))
}

/// One permit an hour: a cached denial lasts about an hour unless something ends it.
fn hourly() -> RedisRateLimiterBuilder {
    RedisRateLimiter::builder(Quota::per_hour(1).unwrap()).deadline(Duration::from_secs(2))
}

fn cache() -> NonZeroUsize {
    NonZeroUsize::new(1000).unwrap()
}

/// A (with a denial cache) and B (without), on connections of their own, under `prefix`.
async fn two_processes(server: &RedisServer, prefix: &str) -> (RedisRateLimiter, RedisRateLimiter) {
    let a = hourly().prefix(prefix).denial_cache(cache());
    let b = hourly().prefix(prefix);
    (
        a.connect(&server.url()).await.unwrap(),
        b.connect(&server.url()).await.unwrap(),
    )
}

/// How many clients are subscribed to `prefix`'s invalidation channel.
fn subscribers(server: &RedisServer, prefix: &str) -> u64 {
    let (_, n): (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!("{prefix}:invalidate"))
        .query(&mut server.conn())
        .unwrap();
    n
}

/// Takes `key`'s permit through `a` and has its denial cached: calls until one is refused by
/// the cache. (The subscription, made when the limiter connects, forgets the whole cache
/// once made, so the first denial may have to be cached again.)
async fn cache_a_denial<A: RedisAlgorithm>(a: &RedisRateLimiter<A>, key: &str) {
    let cached = eventually(50, Duration::from_millis(10), async || {
        let before = a.stats().local_denials;
        let d = a.decide(key).await.unwrap();
        !d.decision.allowed && a.stats().local_denials == before + 1
    })
    .await;
    assert!(cached, "{key}: the denial was never cached");
}

/// Whether `a` admits `key` again within about 2 s (polled, so a slow machine only waits).
async fn admitted_soon<A: RedisAlgorithm>(a: &RedisRateLimiter<A>, key: &str) -> bool {
    eventually(100, Duration::from_millis(20), async || {
        a.decide(key).await.is_ok_and(|d| d.decision.allowed)
    })
    .await
}

/// A's cached denial of `key` ends when B resets the key.
async fn reset_elsewhere_reaches<A: RedisAlgorithm>(
    a: &RedisRateLimiter<A>,
    b: &RedisRateLimiter<A>,
    key: &str,
) {
    cache_a_denial(a, key).await;
    assert!(b.reset(key).await.unwrap());
    assert!(
        admitted_soon(a, key).await,
        "{key}: A's cache went on refusing after B's reset"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subscription_is_made_when_the_limiter_connects() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let (a, _b) = two_processes(&server, &prefix).await;
    // Made before `connect` returned (A's only: B has no cache), with nothing cached yet.
    assert_eq!(subscribers(&server, &prefix), 1);
    // So the first denials cached stay cached: no subscription arrives later to forget them.
    assert!(a.decide("k").await.unwrap().decision.allowed);
    assert!(!a.decide("k").await.unwrap().decision.allowed);
    let replies = a.stats().replies;
    for _ in 0..20 {
        assert!(!a.decide("k").await.unwrap().decision.allowed);
    }
    assert_eq!(a.stats().local_denials, 20, "{:?}", a.stats());
    assert_eq!(a.stats().replies, replies, "no script call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_elsewhere_ends_the_cached_denial_here() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let (a, b) = two_processes(&server, &prefix).await;
    reset_elsewhere_reaches(&a, &b, "user1").await;
    // Hostile keys: bytes that mean something elsewhere (separators, braces, NUL, newlines,
    // RESP framing, non-ASCII) reach exactly their own entry.
    for key in ["a:b", "{t}x", "nul\0byte", "line\r\n$3\r\nend", "ключ", " "] {
        reset_elsewhere_reaches(&a, &b, key).await;
    }
    assert!(a.stats().invalidations > 0, "{:?}", a.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reward_elsewhere_ends_the_cached_denial_here() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let url = server.url();
    let connect = |cached: bool| {
        let b = hourly()
            .algorithm(FixedWindow::epoch_aligned())
            .unwrap()
            .prefix(&prefix);
        let b = if cached { b.denial_cache(cache()) } else { b };
        b.connect(&url)
    };
    let a = connect(true).await.unwrap();
    let b = connect(false).await.unwrap();
    cache_a_denial(&a, "k").await;
    let d = b.reward("k", 1).await.unwrap();
    assert!(d.decision.allowed, "{d:?}");
    assert!(
        admitted_soon(&a, "k").await,
        "A's cache went on refusing after B's reward"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_cancelled_elsewhere_ends_the_cached_denial_here() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let (a, b) = two_processes(&server, &prefix).await;
    // The subscription is made when the limiter connects: from then on only a forget of the
    // key ends its cached denial.
    assert_eq!(subscribers(&server, &prefix), 1);
    // B reserves the key's one permit; A is refused and caches the refusal for the hour.
    let r = b.reserve("k").await.unwrap();
    let before = a.stats().local_denials;
    assert!(!a.decide("k").await.unwrap().decision.allowed);
    assert!(!a.decide("k").await.unwrap().decision.allowed);
    assert_eq!(a.stats().local_denials, before + 1, "not cached");
    // B gives it back (the latest reservation: undone exactly), and A hears of it.
    assert!(r.cancel().await.unwrap());
    assert!(
        admitted_soon(&a, "k").await,
        "A's cache went on refusing after B's cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_subscription_subscribes_again() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let (a, b) = two_processes(&server, &prefix).await;
    reset_elsewhere_reaches(&a, &b, "k").await;
    let subscribers = || subscribers(&server, &prefix);
    assert_eq!(subscribers(), 1);
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(killed, 1);
    let back = eventually(200, Duration::from_millis(10), async || subscribers() == 1).await;
    assert!(back, "never subscribed again");
    assert!(a.stats().subscription_losses >= 1, "{:?}", a.stats());
    reset_elsewhere_reaches(&a, &b, "k").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_elsewhere_reaches_every_node_of_a_cluster() {
    let cluster = RedisCluster::start(3);
    let prefix = unique_prefix();
    let a = hourly()
        .prefix(&prefix)
        .denial_cache(cache())
        .connect_cluster(cluster.urls())
        .await
        .unwrap();
    // B knows only the last node: A subscribed on the first it could reach.
    let b = hourly()
        .prefix(&prefix)
        .connect_cluster(cluster.urls().into_iter().rev())
        .await
        .unwrap();
    // Keys on every slot range, so on every node.
    for i in 0..12 {
        reset_elsewhere_reaches(&a, &b, &format!("user{i}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_elsewhere_reaches_through_sentinel_and_after_a_failover() {
    let (mut primary, replica, sentinel) = sentinel_pair("tg").await;
    let prefix = unique_prefix();
    let connect = |cached: bool| {
        // `hourly`'s deadline (2 s, which no stall reaches): the reset and the decisions
        // before the failover need Redis's answers; the calls during it are polled.
        let b = hourly().prefix(&prefix);
        let b = if cached { b.denial_cache(cache()) } else { b };
        b.connect_sentinel([sentinel.url()], "tg")
    };
    let a = connect(true).await.unwrap();
    let b = connect(false).await.unwrap();
    reset_elsewhere_reaches(&a, &b, "k").await;

    primary.kill();
    let promoted = eventually(500, Duration::from_millis(20), async || {
        replica
            .client()
            .get_connection()
            .is_ok_and(|mut c| info(&mut c, "replication").contains("role:master"))
    })
    .await;
    assert!(promoted, "the replica was never promoted");
    // Both limiters find the new primary (their calls fail until they do).
    for l in [&a, &b] {
        let found = eventually(300, Duration::from_millis(20), async || {
            l.decide("probe").await.is_ok()
        })
        .await;
        assert!(found, "a limiter never reached the new primary");
    }
    let channel = format!("{prefix}:invalidate");
    let subscribed = eventually(300, Duration::from_millis(20), async || {
        replica.client().get_connection().is_ok_and(|mut c| {
            redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query::<(String, u64)>(&mut c)
                .is_ok_and(|(_, n)| n == 1)
        })
    })
    .await;
    assert!(subscribed, "never subscribed on the new primary");
    reset_elsewhere_reaches(&a, &b, "k2").await;
}

/// The batches' refresh interval in `a_batch_given_back_ends_the_cached_denial_here`, so a
/// batch's life: its steps from the take to the cached denial must fit in it (about 5 ms
/// idle, 70 ms with both cores busy), or the batch goes back first and forgets the denial.
const BATCH_LIFE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_given_back_ends_the_cached_denial_here() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let quota = Quota::per_hour(10).unwrap();
    let a = RedisRateLimiter::builder(quota)
        .deadline(Duration::from_secs(2))
        .prefix(&prefix)
        .denial_cache(cache())
        .local_batches(BATCH_LIFE, 100)
        .connect(&server.url())
        .await
        .unwrap();
    // The subscription is made when the limiter connects: from then on, only a forget of
    // the key ends its cached denial.
    assert_eq!(subscribers(&server, &prefix), 1);
    // A hot key: a batch is taken in the background.
    for _ in 0..8 {
        a.decide("k").await.unwrap();
    }
    let taken = eventually(100, Duration::from_millis(10), async || {
        a.stats().batches_taken > 0
    })
    .await;
    assert!(taken, "no batch taken: {:?}", a.stats());
    // Under a per-call quota (here the limiter's own) calls skip the batches: Redis refuses,
    // the batch's permits being booked, and the refusal is cached.
    let mut refused = false;
    for _ in 0..10 {
        if !a.decide_with("k", quota).await.unwrap().decision.allowed {
            refused = true;
            break;
        }
    }
    assert!(refused);
    let before = a.stats().local_denials;
    assert!(!a.decide_with("k", quota).await.unwrap().decision.allowed);
    assert_eq!(a.stats().local_denials, before + 1, "not cached");
    // All of the above happened while the batch was held: nothing was given back yet.
    assert_eq!(
        a.stats().permits_returned,
        0,
        "the batch ended before its denial was cached (a stall longer than {BATCH_LIFE:?}?)"
    );
    // The batch ends unused and goes back (at its end, or at the sweep after it, one
    // refresh interval later at most): its permits are free on Redis again. Polled for
    // three batch lives at least.
    let returned = eventually(600, Duration::from_millis(10), async || {
        a.stats().permits_returned > 0
    })
    .await;
    assert!(returned, "the batch never went back: {:?}", a.stats());
    // The next call is Redis's to decide (it admits, unless a refill took the permits again).
    let before = a.stats().local_denials;
    let d = a.decide_with("k", quota).await.unwrap();
    assert_eq!(
        a.stats().local_denials,
        before,
        "the cache went on refusing: {d:?}"
    );
}
