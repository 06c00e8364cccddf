//! GCRA's holes, blocks, penalties and rewards on a real Redis, replayed against the
//! in-process limiter field for field: reservations cancelled in random order (a cancelled
//! stretch that is not the latest becomes a hole that later checks and reservations fill,
//! lowest first), and adjustments among them. Each Redis reply carries the server time it was
//! decided at, and the in-process limiter's `ManualClock` is set to it before the same call.
#![cfg(feature = "redis")]

mod redis_support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use redis_support::RedisServer;
use tollgate::redis::{RedisDecision, RedisRateLimiter, RedisReservation};
use tollgate::{KeyedRateLimiter, ManualClock, Quota, Reservation};

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("g{}", N.fetch_add(1, Ordering::Relaxed))
}

/// T = 50 ms, burst 2 (tau = 100 ms): stretches long enough that a cancel lands clearly
/// before or after the end of its stretch, and holes that checks can use.
fn quota() -> Quota {
    Quota::from_interval(Duration::from_millis(50))
        .unwrap()
        .with_burst(2)
        .unwrap()
}

const TAU_US: u64 = 100_000;

#[derive(Clone, Debug)]
enum Step {
    /// `check_n` (`n = 0` peeks, `n = 3` is over the burst).
    Check {
        key: u8,
        n: u64,
    },
    /// Reserve `n` (may exceed the burst).
    Reserve {
        key: u8,
        n: u64,
    },
    /// Cancel one of the reservations held on the key (any of them: random order), then peek.
    Cancel {
        key: u8,
        pick: usize,
    },
    /// Block for this many ms.
    Block {
        key: u8,
        ms: u64,
    },
    Penalize {
        key: u8,
        n: u64,
    },
    Reward {
        key: u8,
        n: u64,
    },
    /// Let real time pass.
    Sleep {
        us: u64,
    },
}

fn holes_steps() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2u8, 0..4u64).prop_map(|(key, n)| Step::Check { key, n }),
        5 => (0..2u8, 1..4u64).prop_map(|(key, n)| Step::Reserve { key, n }),
        4 => (0..2u8, 0..8usize).prop_map(|(key, pick)| Step::Cancel { key, pick }),
        2 => (0..20_000u64).prop_map(|us| Step::Sleep { us }),
    ]
}

fn all_steps() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => holes_steps(),
        1 => (0..2u8, 0..400u64).prop_map(|(key, ms)| Step::Block { key, ms }),
        1 => (0..2u8, 0..5u64).prop_map(|(key, n)| Step::Penalize { key, n }),
        1 => (0..2u8, 0..5u64).prop_map(|(key, n)| Step::Reward { key, n }),
    ]
}

/// A reservation held on both sides, with bounds on its stretch's end (µs).
type Held<'a> = (RedisReservation, Reservation<'a>, (u64, u64));

fn us_of(t: Option<Duration>) -> u64 {
    u64::try_from(t.expect("Redis answered").as_micros()).unwrap()
}

/// Runs `steps` through a Redis limiter (with coalescing on, if `hot`) and the in-process one;
/// panics at the first difference. (The denial cache answers on a local estimate of the
/// server's clock, which may run ahead of it: its own test is below.)
async fn replay(server: &RedisServer, steps: &[Step], hot: bool) {
    let mut b = RedisRateLimiter::builder(quota())
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5));
    if hot {
        b = b.coalesce();
    }
    let redis = b.connect(&server.url()).await.unwrap();
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String> = KeyedRateLimiter::builder(quota())
        .clock(clock.clone())
        .build();
    // Per key, the reservations held, in the order made, with bounds on their stretch's end
    // (µs).
    let mut held: [Vec<Held<'_>>; 2] = [Vec::new(), Vec::new()];
    let mut last_us = 0u64;
    let sync = |t: Option<Duration>, last_us: &mut u64| {
        let us = us_of(t);
        assert!(clock.set(us * 1000), "the server clock went backwards");
        *last_us = us;
    };
    let compare = |r: RedisDecision, l, what: String| assert_eq!(r.decision, l, "{what}");
    for (i, s) in steps.iter().enumerate() {
        let what = format!("step {i}: {s:?} in {steps:?}");
        match *s {
            Step::Check { key, n } => {
                let k = format!("k{key}");
                let r = redis.decide_n(&k, n).await.unwrap();
                sync(r.server_time, &mut last_us);
                compare(r, local.check_n(&k, n), what);
            }
            Step::Reserve { key, n } => {
                let k = format!("k{key}");
                let r = redis.reserve_n(&k, n).await.unwrap();
                sync(Some(r.server_time()), &mut last_us);
                let l = local.reserve_n(&k, n).unwrap();
                assert_eq!(r.delay(), l.delay(), "{what}");
                // Its stretch's end: ready + tau if it waits (ready = end - tau), else
                // somewhere in (now, now + tau].
                let ready = last_us + u64::try_from(r.delay().as_micros()).unwrap();
                let end = if r.delay().is_zero() {
                    (last_us, last_us + TAU_US)
                } else {
                    (ready + TAU_US, ready + TAU_US)
                };
                held[usize::from(key)].push((r, l, end));
            }
            Step::Cancel { key, pick } => {
                let k = format!("k{key}");
                let h = &mut held[usize::from(key)];
                if h.is_empty() {
                    continue;
                }
                let (r, l, end) = h.remove(pick % h.len());
                // Whether its stretch is all in the past is judged at the cancel's own
                // instant, after last_us: only cancels that instant cannot change are
                // replayed (the end surely by last_us, or surely after last_us + 200 ms). A
                // skipped one stays booked on both sides.
                let (lo, hi) = end;
                if hi > last_us && lo <= last_us + 200_000 {
                    continue;
                }
                r.cancel().await.unwrap();
                l.cancel();
                let p = redis.decide_n(&k, 0).await.unwrap();
                sync(p.server_time, &mut last_us);
                compare(p, local.peek(&k), format!("{what} (state after)"));
            }
            Step::Block { key, ms } => {
                let k = format!("k{key}");
                let d = Duration::from_millis(ms);
                let r = redis.block(&k, d).await.unwrap();
                sync(r.server_time, &mut last_us);
                compare(r, local.block(&k, d).unwrap(), what);
            }
            Step::Penalize { key, n } => {
                let k = format!("k{key}");
                let r = redis.penalize(&k, n).await.unwrap();
                sync(r.server_time, &mut last_us);
                compare(r, local.penalize(&k, n).unwrap(), what);
            }
            Step::Reward { key, n } => {
                let k = format!("k{key}");
                let r = redis.reward(&k, n).await.unwrap();
                sync(r.server_time, &mut last_us);
                compare(r, local.reward(&k, n), what);
            }
            Step::Sleep { us } => tokio::time::sleep(Duration::from_micros(us)).await,
        }
    }
    // What is still held stays booked on both sides (dropping keeps the permits).
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Reservations cancelled in random order: the holes they leave, and the checks and
    /// reservations that fill them, give the in-process decisions field for field.
    #[test]
    fn holes_are_the_in_process_holes(steps in prop::collection::vec(holes_steps(), 1..60)) {
        let server = RedisServer::start();
        runtime().block_on(replay(&server, &steps, false));
    }

    /// The same with blocks, penalties and rewards among them (a block clears the holes, a
    /// penalty keeps them, a reward drops those its lowered tail passes), with and without the
    /// coalescer.
    #[test]
    fn adjustments_are_the_in_process_adjustments(
        steps in prop::collection::vec(all_steps(), 1..60),
        hot in any::<bool>(),
    ) {
        let server = RedisServer::start();
        runtime().block_on(replay(&server, &steps, hot));
    }
}

/// Builds holes on one key (reservations far ahead, every other one cancelled), then sends
/// `ns` as concurrent checks through a coalescing limiter (spawned in order on a
/// current-thread runtime: the first goes alone, the rest queue and go as batches), and
/// replays everything one by one on the in-process limiter at the server times the replies
/// carry: every field equal, holes filled lowest first inside the batch.
async fn coalesced_with_holes(server: &RedisServer, reserve: &[u64], ns: &[u64]) {
    // Burst 20 (tau = 1 s): holes up to a second ahead are within the checks' reach.
    let quota = Quota::from_interval(Duration::from_millis(50))
        .unwrap()
        .with_burst(20)
        .unwrap();
    let redis = RedisRateLimiter::builder(quota)
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .coalesce()
        .connect(&server.url())
        .await
        .unwrap();
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String> = KeyedRateLimiter::builder(quota)
        .clock(clock.clone())
        .build();
    let k = "hot".to_string();
    let mut held = Vec::new();
    let mut last_us = 0;
    for &n in reserve {
        let r = redis.reserve_n(&k, n).await.unwrap();
        last_us = us_of(Some(r.server_time()));
        assert!(clock.set(last_us * 1000));
        let l = local.reserve_n(&k, n).unwrap();
        assert_eq!(r.delay(), l.delay());
        // Booked at the tail (no holes yet): its end is the TAT the grant reports.
        let g = r.granted();
        let end = last_us + u64::try_from((r.delay() + g.reset_after).as_micros()).unwrap();
        held.push((r, l, end));
    }
    // Every other one whose stretch ends surely after the cancel (judged at last_us, a lower
    // bound of the cancel's instant, with 300 ms to spare): holes inside the checks' reach.
    for (i, (r, l, end)) in held.into_iter().enumerate() {
        if i % 2 == 1 && end > last_us + 300_000 {
            assert!(r.cancel().await.unwrap(), "a cancel far ahead gives back");
            l.cancel();
        }
    }
    let handles: Vec<_> = ns
        .iter()
        .map(|&n| {
            let (redis, k) = (redis.clone(), k.clone());
            tokio::spawn(async move { redis.decide_n(&k, n).await.unwrap() })
        })
        .collect();
    let mut replies = Vec::new();
    for h in handles {
        replies.push(h.await.unwrap());
    }
    for (i, (r, &n)) in replies.iter().zip(ns).enumerate() {
        assert!(
            clock.set(us_of(r.server_time) * 1000),
            "call {i}: out of order"
        );
        assert_eq!(
            r.decision,
            local.check_n(&k, n),
            "call {i} (n = {n}) of {ns:?} after reserving {reserve:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn coalesced_checks_fill_holes_as_one_by_one(
        reserve in prop::collection::vec(1..4u64, 8..24),
        ns in prop::collection::vec(prop_oneof![6 => 1..3u64, 1 => Just(0u64), 1 => Just(3u64)], 2..30),
    ) {
        let server = RedisServer::start();
        redis_support::current_thread().block_on(coalesced_with_holes(&server, &reserve, &ns));
    }
}

/// What the in-process limiter decides for a one-permit check at `at_us` after `history`
/// (adjustments at server times, in order), on a fresh limiter: the denial cache answers on a
/// local estimate of the server's clock, which may run ahead of the next real reply's, so each
/// answer gets its own timeline.
fn in_process(history: &[(u64, Adj)], at_us: u64) -> tollgate::Decision {
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String> = KeyedRateLimiter::builder(quota())
        .clock(clock.clone())
        .build();
    let k = "k".to_string();
    for &(t, op) in history {
        assert!(clock.set(t * 1000));
        let _ = match op {
            Adj::Block(d) => local.block(&k, d).unwrap(),
            Adj::Penalize(n) => local.penalize(&k, n).unwrap(),
            Adj::Reward(n) => local.reward(&k, n),
        };
    }
    assert!(clock.set(at_us * 1000));
    local.check(&k)
}

#[derive(Clone, Copy)]
enum Adj {
    Block(Duration),
    Penalize(u64),
    Reward(u64),
}

/// The local denial cache after adjustments: a block's denial is cached at once (the next
/// checks are answered locally, with the in-process fields at the server time they report);
/// a penalty replaces it with its longer one; a reward that ends the denial forgets it (the
/// next check goes to Redis and is allowed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adjustments_keep_the_denial_cache_exact() {
    let server = RedisServer::start();
    let redis = RedisRateLimiter::builder(quota())
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .denial_cache(NonZeroUsize::new(100).unwrap())
        .connect(&server.url())
        .await
        .unwrap();
    let k = "k";
    let mut history = Vec::new();
    let minute = Duration::from_secs(60);
    let b = redis.block(k, minute).await.unwrap();
    history.push((us_of(b.server_time), Adj::Block(minute)));
    let before = redis.stats().local_denials;
    for _ in 0..3 {
        let d = redis.decide(k).await.unwrap();
        assert!(!d.decision.allowed);
        assert_eq!(d.decision, in_process(&history, us_of(d.server_time)));
    }
    assert_eq!(redis.stats().local_denials - before, 3, "answered locally");
    // Five minutes of debt on top: the cached denial is replaced by the longer one.
    let p = redis.penalize(k, 6000).await.unwrap();
    history.push((us_of(p.server_time), Adj::Penalize(6000)));
    let d = redis.decide(k).await.unwrap();
    assert_eq!(redis.stats().local_denials - before, 4);
    assert!(d.decision.retry_after > Some(Duration::from_secs(300)));
    assert_eq!(d.decision, in_process(&history, us_of(d.server_time)));
    // A reward past the whole debt: the cached denial is gone, Redis admits.
    let r = redis.reward(k, 1 << 20).await.unwrap();
    history.push((us_of(r.server_time), Adj::Reward(1 << 20)));
    assert!(r.decision.allowed);
    let d = redis.decide(k).await.unwrap();
    assert!(
        d.decision.allowed,
        "the reward reached this process's cache"
    );
    assert_eq!(redis.stats().local_denials - before, 4);
}

/// A key keeps at most 64 holes on Redis: the 65th disjoint one gives nothing back (a stricter
/// refusal, never more), and the holes expire with the TAT (the key's `PEXPIRETIME` is the
/// TAT's, rounded up to a whole ms) while a key without holes stays a bare integer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holes_are_bounded_and_expire_with_the_key() {
    let server = RedisServer::start();
    let redis = RedisRateLimiter::builder(
        // T = 1 s: the stretches cancelled below are all seconds ahead.
        Quota::from_interval(Duration::from_secs(1))
            .unwrap()
            .with_burst(2)
            .unwrap(),
    )
    .prefix(unique_prefix())
    .deadline(Duration::from_secs(5))
    .connect(&server.url())
    .await
    .unwrap();
    let k = "k";
    let state = redis.state_key(k);
    let mut conn = server.conn();
    let mut held = Vec::new();
    for _ in 0..160 {
        held.push(redis.reserve(k).await.unwrap());
    }
    let plain: String = redis::cmd("GET").arg(&state).query(&mut conn).unwrap();
    assert!(
        plain.parse::<u64>().is_ok(),
        "no holes: a bare TAT, {plain}"
    );
    // 66 of them, every other one from the twelfth on (all seconds ahead, none the latest):
    // disjoint holes.
    let mut given = Vec::new();
    for (i, r) in held.into_iter().enumerate() {
        if (11..11 + 2 * 66).contains(&i) && i % 2 == 1 {
            given.push(r.cancel().await.unwrap());
        }
    }
    assert_eq!(given.iter().filter(|g| **g).count(), 64, "{given:?}");
    assert!(given[..64].iter().all(|g| *g) && given[64..].iter().all(|g| !*g));
    let value: String = redis::cmd("GET").arg(&state).query(&mut conn).unwrap();
    let parts: Vec<u64> = value.split(':').map(|p| p.parse().unwrap()).collect();
    assert_eq!(parts.len(), 1 + 2 * 64);
    let expires: u64 = redis::cmd("PEXPIRETIME")
        .arg(&state)
        .query(&mut conn)
        .unwrap();
    assert_eq!(expires, parts[0].div_ceil(1000), "expires with the TAT");
}

/// A value that looks like a TAT with holes but is not one this script wrote is a typed error
/// under `FailurePolicy::Open` too (never admitted), for checks, peeks and adjustments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_holes_are_typed_errors_even_under_open() {
    let server = RedisServer::start();
    let redis = RedisRateLimiter::builder(quota())
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .on_failure(tollgate::redis::FailurePolicy::Open)
        .connect(&server.url())
        .await
        .unwrap();
    let state = redis.state_key("k");
    let mut conn = server.conn();
    // Odd count, empty field, offsets not decreasing, an offset above the TAT, a letter, a
    // trailing separator, a number past 2^53.
    let far = "9999999999999999999:5:3";
    for v in [
        "12:5", "12:5::3", "20:3:5", "5:9:3", "12:5:a", "12:5:3:", far,
    ] {
        let _: () = redis::cmd("SET")
            .arg(&state)
            .arg(v)
            .query(&mut conn)
            .unwrap();
        for r in [
            redis.check("k").await,
            redis.peek("k").await,
            redis.penalize("k", 1).await.map(|d| d.decision),
        ] {
            match r {
                Err(e) => assert!(!e.is_unavailable(), "{v}: {e}"),
                Ok(d) => panic!("{v}: decided {d:?}"),
            }
        }
    }
}

/// A penalty or block past the end of the limiter's time refuses for good, as in process:
/// one permit is never grantable (no `retry_after`), a reservation is unrepresentable, and
/// every field but `reset_after` (whole µs on Redis, ns in process) is the in-process one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saturated_penalties_refuse_for_good() {
    let server = RedisServer::start();
    let redis = RedisRateLimiter::builder(quota())
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .connect(&server.url())
        .await
        .unwrap();
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String> = KeyedRateLimiter::builder(quota())
        .clock(clock.clone())
        .build();
    for (k, block) in [("p", false), ("b", true)] {
        let r = if block {
            redis.block(k, Duration::MAX).await.unwrap()
        } else {
            redis.penalize(k, u64::MAX).await.unwrap()
        };
        assert!(clock.set(us_of(r.server_time) * 1000));
        let l = if block {
            local.block(&k.to_string(), Duration::MAX).unwrap()
        } else {
            local.penalize(&k.to_string(), u64::MAX).unwrap()
        };
        // Every field, `reset_after` to the whole µs.
        let fields = |d: &tollgate::Decision| {
            (
                d.allowed,
                d.limit,
                d.remaining,
                d.retry_after,
                d.reset_after.as_micros(),
            )
        };
        assert_eq!(fields(&r.decision), fields(&l), "{k}");
        let c = redis.decide(k).await.unwrap();
        assert!(clock.set(us_of(c.server_time) * 1000));
        assert_eq!(
            fields(&c.decision),
            fields(&local.check(&k.to_string())),
            "{k}"
        );
        assert_eq!((c.decision.allowed, c.decision.retry_after), (false, None));
        assert!(matches!(
            redis.reserve(k).await,
            Err(tollgate::redis::RedisLimitError::Limited(
                tollgate::AcquireError::Unrepresentable { .. }
            ))
        ));
    }
}

/// A case the property test found (CI, 2026-12-05): a block, a reservation over the burst,
/// two rewards, a second reservation, and both cancelled.
#[test]
fn rewards_between_reservations_then_both_cancelled() {
    let server = RedisServer::start();
    let steps = [
        Step::Block { key: 0, ms: 54 },
        Step::Reserve { key: 0, n: 3 },
        Step::Reward { key: 0, n: 1 },
        Step::Reward { key: 0, n: 1 },
        Step::Reserve { key: 0, n: 1 },
        Step::Cancel { key: 0, pick: 0 },
        Step::Cancel { key: 0, pick: 0 },
    ];
    runtime().block_on(replay(&server, &steps, false));
    runtime().block_on(replay(&server, &steps, true));
}
