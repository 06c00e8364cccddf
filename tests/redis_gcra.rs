//! GCRA on a real Redis: the same schedule through the Redis limiter and the in-process one
//! gives the same decisions, field for field. Deterministic without any time override: every
//! Redis reply carries the server time it was decided at, and the in-process limiter's
//! `ManualClock` is set to that instant before replaying the same call.
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use redis_support::{eventually, RedisServer};
use tollgate::redis::{RedisLimitError, RedisRateLimiter};
use tollgate::{AcquireError, KeyedRateLimiter, ManualClock, Quota};

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("t{}", N.fetch_add(1, Ordering::Relaxed))
}

async fn limiter(server: &RedisServer, quota: Quota) -> RedisRateLimiter {
    RedisRateLimiter::builder(quota)
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .expect("connect to the test server")
}

/// Quotas with whole-microsecond intervals (where Redis and in-process agree exactly), from
/// sub-millisecond pacing to per-hour limits.
fn quotas() -> Vec<Quota> {
    let us = Duration::from_micros;
    vec![
        Quota::from_interval(us(250))
            .unwrap()
            .with_burst(5)
            .unwrap(),
        Quota::from_interval(us(1000))
            .unwrap()
            .with_burst(3)
            .unwrap(),
        Quota::new(7, Duration::from_millis(7)).unwrap(),
        Quota::per_second(10).unwrap(),
        Quota::per_minute(60).unwrap().with_burst(2).unwrap(),
        Quota::per_hour(3600).unwrap(),
        Quota::from_interval(us(1))
            .unwrap()
            .with_burst(1000)
            .unwrap(),
    ]
}

#[derive(Clone, Debug)]
enum Step {
    /// `check_n_with(key, n, quotas[q])`; `n = 0` peeks.
    Check { key: u8, n: u64, q: usize },
    /// Reserve `n` on the limiter's own quota (`n` may exceed the burst).
    Reserve { key: u8, n: u64 },
    /// Cancel the latest reservation held on a key, then peek the key.
    Cancel { key: u8 },
    /// Let real time pass.
    Sleep { us: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    let nq = quotas().len();
    prop_oneof![
        8 => (0..3u8, 0..12u64, 0..nq).prop_map(|(key, n, q)| Step::Check { key, n, q }),
        2 => (0..2u8, 0..6u64).prop_map(|(key, n)| Step::Reserve { key, n }),
        1 => (0..2u8).prop_map(|key| Step::Cancel { key }),
        2 => (0..3000u64).prop_map(|us| Step::Sleep { us }),
    ]
}

/// Runs `steps` through both limiters; panics at the first difference.
async fn replay(server: &RedisServer, steps: &[Step]) {
    // Reservations use T = 50 ms and burst 2 (tau = 100 ms), so a cancel lands clearly before
    // or after the end of its stretch.
    let own = Quota::from_interval(Duration::from_millis(50))
        .unwrap()
        .with_burst(2)
        .unwrap();
    let redis = limiter(server, own).await;
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String> =
        KeyedRateLimiter::builder(own).clock(clock.clone()).build();
    let qs = quotas();
    let rkeys = ["r0".to_string(), "r1".to_string()];
    // (key, redis reservation, local reservation, ready_at in µs)
    // Per key, the reservations held, oldest first.
    let mut held = [Vec::new(), Vec::new()];
    let mut last_us = 0u64;
    // Moves the local clock to the instant Redis decided at.
    let sync = |server_time: Option<Duration>, last_us: &mut u64| {
        let us = u64::try_from(server_time.expect("Redis answered").as_micros()).unwrap();
        assert!(clock.set(us * 1000), "the server clock went backwards");
        *last_us = us;
    };
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Check { key, n, q } => {
                let k = format!("k{key}");
                let r = redis.decide_n_with(&k, n, qs[q]).await.unwrap();
                sync(r.server_time, &mut last_us);
                // Locally too, each quota has its own state.
                let l = local.check_n_with(&format!("{k}/{q}"), n, qs[q]).unwrap();
                assert_eq!(r.decision, l, "step {i}: {s:?}");
            }
            Step::Reserve { key, n } => {
                let k = &rkeys[usize::from(key)];
                let r = redis.reserve_n(k, n).await.unwrap();
                sync(Some(r.server_time()), &mut last_us);
                let l = local.reserve_n(k.as_str(), n).unwrap();
                assert_eq!(r.delay(), l.delay(), "step {i}: {s:?}");
                let ready = last_us + u64::try_from(r.delay().as_micros()).unwrap();
                held[usize::from(key)].push((r, l, ready));
            }
            Step::Cancel { key } => {
                // Only the latest reservation on a key: both sides undo it exactly (cancels
                // in any order, which leave holes, are replayed in tests/redis_gcra_holes.rs).
                let k = &rkeys[usize::from(key)];
                let Some((r, l, ready)) = held[usize::from(key)].pop() else {
                    continue;
                };
                // Refundable while its stretch (ending at ready + tau) is not all past, judged
                // at the cancel's own instant, after last_us: replay only cancels that instant
                // cannot change. A skipped one stays booked, and nothing older on the key can
                // be the latest again.
                let end = ready + 100_000;
                if end > last_us && end <= last_us + 200_000 {
                    held[usize::from(key)].clear();
                    continue;
                }
                let refunded = r.cancel().await.unwrap();
                l.cancel();
                assert_eq!(refunded, end > last_us, "step {i}: {s:?}");
                let p = redis.decide_n(k, 0).await.unwrap();
                sync(p.server_time, &mut last_us);
                assert_eq!(
                    p.decision,
                    local.peek(k.as_str()),
                    "step {i}: {s:?} (state after)"
                );
            }
            Step::Sleep { us } => tokio::time::sleep(Duration::from_micros(us)).await,
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn same_decisions_as_in_process(steps in prop::collection::vec(step(), 1..40)) {
        let server = RedisServer::start();
        runtime().block_on(replay(&server, &steps));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttle_is_redis_cell_value_for_value() {
    let server = RedisServer::start();
    let l = limiter(&server, Quota::per_second(1).unwrap()).await;
    // CL.THROTTLE user123 15 30 60 1 on a fresh key: [0, 16, 15, -1, 2].
    let r = l.throttle("user123", 15, 30, 60, 1).await.unwrap();
    assert_eq!(r.to_array(), [0, 16, 15, -1, 2]);
    // Fifteen more succeed, then the 17th is limited with retry-after 2 s (1 per 2 s).
    for _ in 0..15 {
        assert_eq!(
            l.throttle("user123", 15, 30, 60, 1).await.unwrap().limited,
            0
        );
    }
    let r = l.throttle("user123", 15, 30, 60, 1).await.unwrap();
    assert_eq!(r.to_array()[..4], [1, 16, 0, 2]);
    assert!(matches!(
        l.throttle("user123", 15, 0, 60, 1).await,
        Err(RedisLimitError::InvalidQuota(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_are_granted_in_arrival_order_across_connections() {
    let server = RedisServer::start();
    // One permit a second: each reservation must reach Redis before the queue ahead of it has
    // drained (with 10 ms, a stall of 10 ms between two calls did that: the next one was
    // not queued, and its ready time was off).
    let interval = Duration::from_secs(1);
    let quota = Quota::from_interval(interval).unwrap();
    let first = limiter(&server, quota).await;
    // Five more "processes": their own connections, the same prefix.
    let mut others = Vec::new();
    for _ in 0..5 {
        others.push(
            RedisRateLimiter::builder(quota)
                .prefix(first.state_key("").split(':').next().unwrap())
                // `limiter`'s, not the default 50 ms, which a stall of a loaded machine can
                // outlast.
                .deadline(Duration::from_secs(2))
                .connect(&server.url())
                .await
                .unwrap(),
        );
    }
    let mut ready = Vec::new();
    for (i, l) in std::iter::once(&first)
        .chain(&others)
        .cycle()
        .take(12)
        .enumerate()
    {
        let cost = 1 + (i as u64 % 3);
        let r = l.reserve_n("job", cost).await.unwrap();
        ready.push((r.server_time() + r.delay(), r.delay(), cost));
        // Dropping a reservation keeps it.
    }
    // After the first, every reservation waits, and is ready exactly its cost after the
    // previous one: one queue, in the order the reservations reached Redis, whichever
    // connection made them.
    for w in ready.windows(2) {
        let (prev, _, _) = w[0];
        let (next, delay, cost) = w[1];
        assert!(delay > Duration::ZERO, "{ready:?}");
        let cost = u32::try_from(cost).unwrap();
        assert_eq!(next - prev, interval * cost, "{ready:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_waiter_gives_its_slot_back() {
    let server = RedisServer::start();
    let quota = Quota::from_interval(Duration::from_millis(300)).unwrap();
    let l = limiter(&server, quota).await;
    assert_eq!(l.acquire_async("k").await.unwrap(), Duration::ZERO);
    let debt_before = l.peek("k").await.unwrap().reset_after;
    // A waiter that needs ~300 ms is dropped after 20 ms: its reservation is cancelled.
    let waiter = tokio::time::timeout(Duration::from_millis(20), l.acquire_async("k")).await;
    assert!(waiter.is_err());
    let restored = eventually(100, Duration::from_millis(5), async || {
        l.peek("k").await.unwrap().reset_after <= debt_before
    })
    .await;
    assert!(
        restored,
        "the dropped waiter's reservation was not cancelled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_dropped_while_the_reserve_call_is_in_flight_cancels_too() {
    let server = RedisServer::start();
    let quota = Quota::from_interval(Duration::from_secs(10)).unwrap();
    let l = limiter(&server, quota).await;
    l.acquire_async("k").await.unwrap();
    // Stall the server, then drop a waiter before its reserve call is answered.
    let mut admin = server.conn();
    let sleeper = std::thread::spawn(move || {
        let _: () = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("0.3")
            .query(&mut admin)
            .unwrap();
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiter = tokio::time::timeout(Duration::from_millis(50), l.acquire_async("k")).await;
    assert!(waiter.is_err());
    sleeper.join().unwrap();
    // Once the server answers, the orphaned reservation is cancelled: one permit's debt left.
    let restored = eventually(200, Duration::from_millis(5), async || {
        l.peek("k").await.unwrap().reset_after <= Duration::from_secs(10)
    })
    .await;
    assert!(restored, "the in-flight reservation was not cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_never_reserve_what_they_cannot_wait_for() {
    let server = RedisServer::start();
    let quota = Quota::from_interval(Duration::from_millis(100)).unwrap();
    let l = limiter(&server, quota).await;
    l.acquire_async("k").await.unwrap();
    let before = l.peek("k").await.unwrap();
    let e = l
        .try_acquire_n_for_async("k", 1, Duration::from_millis(10))
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        RedisLimitError::Limited(AcquireError::RateLimited { .. })
    ));
    let after = l.peek("k").await.unwrap();
    assert!(
        after.reset_after <= before.reset_after,
        "a refused timeout stored a reservation"
    );
    // Within the timeout: granted after a real wait.
    let waited = l
        .try_acquire_n_for_async("k", 1, Duration::from_millis(500))
        .await
        .unwrap();
    assert!(waited > Duration::ZERO);
    // n above the burst waits (bandwidth shaping), checks refuse it.
    assert!(matches!(
        l.try_acquire_n("other", 2).await,
        Err(RedisLimitError::Limited(AcquireError::ExceedsBurst {
            requested: 2,
            burst: 1
        }))
    ));
    let r = l.reserve_n("other", 3).await.unwrap();
    assert_eq!(r.delay(), Duration::from_millis(200));
    assert!(r.cancel().await.unwrap());
}

/// `all_or_none_async` over an in-process per-user limit and a Redis global limit: a refusal
/// by either charges neither (the Redis reservation taken is cancelled with its script call,
/// awaited before the refusal is returned, so no polling is needed to see it back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_none_async_mixes_an_in_process_and_a_redis_limit() {
    use tollgate::{all_or_none_async, Hold};
    let server = RedisServer::start();
    // Slow limits (one permit per minute), so that the real time the test takes refills nothing.
    let global = limiter(
        &server,
        Quota::per_minute(1).unwrap().with_burst(2).unwrap(),
    )
    .await;
    let per_user = KeyedRateLimiter::<u8>::builder(Quota::per_minute(1).unwrap())
        .clock(ManualClock::new())
        .build();
    let take = |user: u8| {
        let (global, per_user) = (&global, &per_user);
        async move {
            let g = global.try_reserve_for("all", Duration::ZERO).await;
            all_or_none_async::<RedisLimitError, _>([
                per_user
                    .try_reserve_for(&user, Duration::ZERO)
                    .map(Hold::boxed)
                    .map_err(RedisLimitError::from),
                g.map(Hold::boxed),
            ])
            .await
        }
    };
    take(1).await.unwrap();
    assert_eq!(global.peek("all").await.unwrap().remaining, 1);
    // User 1 is out: the global permit Redis granted is given back.
    let e = take(1).await.unwrap_err();
    assert!(
        matches!(
            e,
            RedisLimitError::Limited(AcquireError::RateLimited { .. })
        ),
        "{e:?}"
    );
    assert_eq!(global.peek("all").await.unwrap().remaining, 1);
    take(2).await.unwrap();
    // Now the global limit is out: user 3 is not charged.
    let e = take(3).await.unwrap_err();
    assert!(
        e.retry_after().is_some_and(|w| w > Duration::from_secs(1)),
        "{e:?}"
    );
    assert_eq!(per_user.peek(&3).remaining, 1);
}
