//! The window algorithms on a real Redis against the in-process limiter running the same
//! algorithm type: the same schedule through both gives the same decisions, every `Decision`
//! field compared. Deterministic without any time override: every Redis reply carries the
//! server time it was decided at, and the in-process limiter's `ManualClock` is set to that
//! instant (in ns: the clock then reads Unix time, so its windows are the epoch-aligned ones
//! Redis counts) before it replays the same call. Quotas use whole-µs windows.
//!
//! The one difference is of resolution, and is asserted exactly: a weighted window's
//! `retry_after` (where a product of counts and times crosses the limit) can fall between two
//! microseconds; in process it is the first nanosecond, on Redis the first microsecond, i.e.
//! the in-process value rounded up to a whole µs.
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;
use redis_support::RedisServer;
use tollgate::redis::{RedisAlgorithm, RedisRateLimiter};
use tollgate::{
    Decision, FixedWindow, KeyedRateLimiter, ManualClock, Quota, SlidingLog, SlidingWindow,
    WeightedWindow,
};

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("w{}", N.fetch_add(1, Ordering::Relaxed))
}

/// A fixed window aligned to the epoch for a clock that reads Unix time: the same windows the
/// Redis script counts (it is epoch-aligned too, however the alignment was asked for).
fn fixed() -> FixedWindow {
    FixedWindow::epoch_aligned_from(UNIX_EPOCH)
}

#[derive(Clone, Debug)]
enum Step {
    Decide { key: u8, n: u64 },
    Sleep { us: u64 },
}

/// Steps for limit `l` and window `w` µs: costs around the limit, sleeps up to 1.5 windows.
fn steps(l: u64, w: u64, len: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0..2u8, 0..=l + 1).prop_map(|(key, n)| Step::Decide { key, n }),
        1 => (0..=w * 3 / 2).prop_map(|us| Step::Sleep { us }),
    ];
    prop::collection::vec(step, 1..len)
}

/// `d` as Redis reports it: `retry_after` on the microseconds its clock can read.
fn on_microseconds(mut d: Decision) -> Decision {
    d.retry_after = d
        .retry_after
        .map(|r| Duration::from_micros(u64::try_from(r.as_nanos().div_ceil(1000)).unwrap()));
    d
}

/// Runs `steps` through a Redis limiter and an in-process one, both running `alg` under
/// `quota`; panics at the first difference. `sub_us_retry`: the algorithm's `retry_after` may
/// fall between microseconds (the weighted window), else both must agree to the nanosecond.
async fn replay<A: RedisAlgorithm>(
    server: &RedisServer,
    alg: A,
    quota: Quota,
    steps: &[Step],
    sub_us_retry: bool,
) {
    let redis = RedisRateLimiter::builder(quota)
        .algorithm(alg)
        .unwrap()
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String, A> = KeyedRateLimiter::builder(quota)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build();
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Decide { key, n } => {
                let k = format!("k{key}");
                let r = redis.decide_n(&k, n).await.unwrap();
                let us = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
                assert!(clock.set(us * 1000), "the server clock went backwards");
                let l = local.check_n(&k, n);
                let at = || format!("{} step {i} at {us} us: {s:?}", A::NAME);
                if sub_us_retry {
                    assert_eq!(r.decision, on_microseconds(l), "{}", at());
                    if let (Some(got), Some(exact)) = (r.decision.retry_after, l.retry_after) {
                        assert!(got >= exact && got - exact < Duration::from_micros(1));
                    }
                } else {
                    assert_eq!(r.decision, l, "{}", at());
                }
            }
            Step::Sleep { us } => tokio::time::sleep(Duration::from_micros(us)).await,
        }
    }
}

fn block_on(f: impl std::future::Future<Output = ()>) {
    redis_support::current_thread().block_on(f);
}

/// Small limits over windows of a few milliseconds (whole µs), so schedules cross many
/// boundaries.
fn small_quota() -> impl Strategy<Value = Quota> {
    (
        1..6u64,
        prop_oneof![Just(2_000u64), Just(5_000), Just(20_000), Just(3_333)],
    )
        .prop_map(|(l, w_us)| Quota::new(l, Duration::from_micros(w_us)).unwrap())
}

fn schedule() -> impl Strategy<Value = (Quota, Vec<Step>)> {
    small_quota().prop_flat_map(|q| (Just(q), steps(q.count(), 5_000, 60)))
}

/// A sliding window's `k` with a window of a few milliseconds that it splits into whole µs
/// (sub-windows of 50 µs to 2.5 ms: many boundaries per schedule), and a small limit.
fn sliding_schedule() -> impl Strategy<Value = (SlidingWindow, Quota, Vec<Step>)> {
    let k_and_w = prop::sample::select(vec![
        (2u32, 2_000u64),
        (3, 3_333),
        (4, 5_000),
        (5, 20_000),
        (8, 2_000),
        (16, 20_000),
        (64, 3_200),
    ]);
    (k_and_w, 1..6u64).prop_flat_map(|((k, w_us), l)| {
        let q = Quota::new(l, Duration::from_micros(w_us)).unwrap();
        (Just(SlidingWindow::new(k)), Just(q), steps(l, 5_000, 60))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn fixed_window_decides_as_in_process((q, s) in schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, fixed(), q, &s, false));
    }

    #[test]
    fn weighted_window_decides_as_in_process((q, s) in schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, WeightedWindow, q, &s, true));
    }

    #[test]
    fn sliding_log_decides_as_in_process((q, s) in schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, SlidingLog, q, &s, false));
    }

    #[test]
    fn sliding_window_decides_as_in_process((alg, q, s) in sliding_schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, alg, q, &s, false));
    }
}

/// The xorshift state the large-count tests start from: fixed, so their costs reproduce.
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// The next xorshift step of `x`, as a cost near a limit `l`'s boundaries: anything up to
/// `l + 1`, about a third of it, just under it, or small.
fn boundary_cost(x: &mut u64, l: u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    match *x % 4 {
        0 => *x % (l + 2),
        1 => l / 3 + *x % 1000,
        2 => l - *x % 1000,
        _ => *x % 5,
    }
}

/// Counts up to 2^51 in the stored string (written with %d, where tostring would print
/// 2.2517998136852e+15, and parsed back exactly) and sums up to 2^52: L = 2^51 permits per
/// 2^45 µs (about a year) in 64 sub-windows, costs near the limit, its thirds, and small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_is_exact_with_counts_near_2_pow_51() {
    let server = RedisServer::start();
    let l = 1u64 << 51;
    let quota = Quota::new(l, Duration::from_micros(1 << 45)).unwrap();
    let mut steps = Vec::new();
    let mut x = SEED;
    for _ in 0..200 {
        let n = boundary_cost(&mut x, l);
        steps.push(Step::Decide {
            key: (x % 3) as u8,
            n,
        });
    }
    replay(&server, SlidingWindow::new(64), quota, &steps, false).await;
}

/// Products past 2^53: L = 4e9 permits per 4 s window (4e6 µs), so prev * (W - e) reaches
/// 1.6e16. Costs near the boundaries, and sleeps across two window boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_window_is_exact_past_2_pow_53() {
    let server = RedisServer::start();
    let l = 4_000_000_000u64;
    let quota = Quota::new(l, Duration::from_secs(4)).unwrap();
    let mut steps = Vec::new();
    let mut x = SEED;
    for round in 0..40 {
        for _ in 0..4 {
            let n = boundary_cost(&mut x, l);
            steps.push(Step::Decide { key: 0, n });
        }
        if round % 4 == 0 {
            steps.push(Step::Sleep { us: 900_000 });
        }
    }
    replay(&server, WeightedWindow, quota, &steps, true).await;
}

/// `mul_cmp`, `muldiv`, `muldiv_ceil` and `idiv` from the scripts' prelude, run by Redis's Lua
/// on operands up to 2^52, against u128.
#[test]
fn script_integer_helpers_are_exact() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let body = concat!(
        include_str!("../src/redis/scripts/prelude.lua"),
        include_str!("../src/redis/scripts/exact.lua"),
        "local a, b, c, d = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n",
        "return {mul_cmp(a, b, c, d), muldiv(a, b, c), muldiv_ceil(a, b, c), idiv(a, c)}\n"
    );
    let script = redis::Script::new(body);
    let top = 1u64 << 52;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = |bound: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % bound
    };
    let mut cases = vec![
        (top - 1, top - 1, top - 1, top - 1),
        (top - 1, 1, top - 1, 1),
        (0, 0, 1, 0),
    ];
    for _ in 0..3000 {
        let c = 1 + next(top - 1);
        let b = next(c + 1); // b <= c keeps a*b/c < a
        let a = next(1 << 51);
        let d = next(top);
        cases.push((a, b, c, d));
        // Exact multiples and their neighbours, where a rounded quotient would be off by one.
        let q = next(1 << 20);
        cases.push((c, q, c, d));
        cases.push((q * 3 + 1, c, c.max(3), q));
    }
    for (a, b, c, d) in cases {
        let got: Vec<i64> = script
            .arg(a)
            .arg(b)
            .arg(c)
            .arg(d)
            .invoke(&mut conn)
            .unwrap();
        let (ab, cd) = (u128::from(a) * u128::from(b), u128::from(c) * u128::from(d));
        let want_cmp = ab.cmp(&cd) as i64;
        let want_div = ab / u128::from(c);
        assert_eq!(got[0], want_cmp, "mul_cmp({a}, {b}, {c}, {d})");
        if want_div < 1 << 51 {
            assert_eq!(got[1] as u128, want_div, "muldiv({a}, {b}, {c})");
            assert_eq!(
                got[2] as u128,
                ab.div_ceil(u128::from(c)),
                "muldiv_ceil({a}, {b}, {c})"
            );
        }
        assert_eq!(got[3] as u64, a / c, "idiv({a}, {c})");
    }
}

/// The windows wait by deciding again after `retry_after`: never past a timeout, nothing
/// taken after giving up, and `n` above the limit refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_waits_decide_again_after_retry_after() {
    let server = RedisServer::start();
    let l = RedisRateLimiter::builder(Quota::new(2, Duration::from_millis(200)).unwrap())
        .algorithm(FixedWindow::epoch_aligned())
        .unwrap()
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    // Start just after a window boundary (windows are aligned to the epoch), so the steps below
    // all fall in one 200 ms window.
    let now = l.decide_n("k", 0).await.unwrap().server_time.unwrap();
    let into = Duration::from_micros((now.as_micros() % 200_000) as u64);
    tokio::time::sleep(Duration::from_millis(205) - into).await;
    l.try_acquire_n("k", 2).await.unwrap();
    let e = l
        .try_acquire_n_for_async("k", 1, Duration::from_micros(1))
        .await
        .unwrap_err();
    assert!(e.retry_after().is_some(), "{e}");
    assert_eq!(
        l.peek("k").await.unwrap().remaining,
        0,
        "a refused wait took a permit"
    );
    // Granted in the next window, after a real wait.
    let waited = l.acquire_n_async("k", 2).await.unwrap();
    assert!(waited > Duration::ZERO);
    assert_eq!(l.peek("k").await.unwrap().remaining, 0);
    assert!(matches!(
        l.acquire_n_async("k", 3).await,
        Err(tollgate::redis::RedisLimitError::Limited(
            tollgate::AcquireError::ExceedsBurst {
                requested: 3,
                burst: 2
            }
        ))
    ));
}
