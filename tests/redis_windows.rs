//! The window algorithms on a real Redis, against plain reference models written from the
//! semantics of issue 10 (integer µs on the server's clock): fixed window, weighted
//! sliding-window counter, sliding log. Every `Decision` field is compared at every step, at
//! the server time each reply reports. The scripts' exact-integer helpers are checked on their
//! own against `u128` arithmetic.
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use redis_support::RedisServer;
use tollgate::redis::{
    FixedWindow, RedisAlgorithm, RedisRateLimiter, SlidingLog, SlidingWindowCounter,
};
use tollgate::{Decision, Quota};

/// A reference model: the decision for `n` at `now` (µs), updating its state when allowed.
trait Model: Default {
    fn decide(&mut self, now: u64, n: u64, l: u64, w: u64) -> Decision;
}

fn decision(allowed: bool, l: u64, remaining: u64, retry: Option<u64>, reset: u64) -> Decision {
    // Decision is non-exhaustive: build it through a real limiter's public fields by value.
    let mut d = tollgate::RateLimiter::new(Quota::per_second(1).unwrap()).peek();
    d.allowed = allowed;
    d.limit = l;
    d.remaining = remaining;
    d.retry_after = retry.map(Duration::from_micros);
    d.reset_after = Duration::from_micros(reset);
    d
}

/// Fixed window: `count_k + n <= L`.
#[derive(Default)]
struct Fixed {
    window: u64,
    count: u64,
}

impl Model for Fixed {
    fn decide(&mut self, now: u64, n: u64, l: u64, w: u64) -> Decision {
        let k = now / w;
        if self.window != k {
            (self.window, self.count) = (k, 0);
        }
        let reset = (k + 1) * w - now;
        if n == 0 || n > l {
            return decision(n == 0, l, l - self.count, None, reset);
        }
        if self.count + n <= l {
            self.count += n;
            return decision(true, l, l - self.count, None, reset);
        }
        decision(false, l, l - self.count, Some(reset), reset)
    }
}

/// Weighted counter: `prev*(W - e) + (cur + n)*W <= L*W`, in u128.
#[derive(Default)]
struct Weighted {
    window: u64,
    cur: u64,
    prev: u64,
}

impl Weighted {
    /// (cur, prev, e) as seen at `t`, with no admission in between.
    fn at(&self, t: u64, w: u64) -> (u128, u128, u128) {
        let k = t / w;
        let e = u128::from(t - k * w);
        if k == self.window {
            (self.cur.into(), self.prev.into(), e)
        } else if k == self.window + 1 {
            (0, self.cur.into(), e)
        } else {
            (0, 0, e)
        }
    }

    fn fits(&self, t: u64, n: u64, l: u64, w: u64) -> bool {
        let (cur, prev, e) = self.at(t, w);
        let w = u128::from(w);
        prev * (w - e) + (cur + u128::from(n)) * w <= u128::from(l) * w
    }
}

impl Model for Weighted {
    fn decide(&mut self, now: u64, n: u64, l: u64, w: u64) -> Decision {
        let (cur, prev, _) = self.at(now, w);
        (self.window, self.cur, self.prev) = (now / w, cur as u64, prev as u64);
        let fields = |m: &Weighted| {
            let (cur, prev, e) = m.at(now, w);
            let w128 = u128::from(w);
            let weighed = (prev * (w128 - e)).div_ceil(w128);
            let remaining = u128::from(l).saturating_sub(cur + weighed) as u64;
            let e = e as u64;
            let reset = if cur > 0 {
                2 * w - e
            } else if prev > 0 {
                w - e
            } else {
                0
            };
            (remaining, reset)
        };
        if n == 0 || n > l {
            let (rem, reset) = fields(self);
            return decision(n == 0, l, rem, None, reset);
        }
        if self.fits(now, n, l, w) {
            self.cur += n;
            let (rem, reset) = fields(self);
            return decision(true, l, rem, None, reset);
        }
        // The earliest later instant at which the same request fits: the weighed count only
        // falls with time, so bisect.
        let (mut lo, mut hi) = (now, now + 2 * w);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.fits(mid, n, l, w) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let (rem, reset) = fields(self);
        decision(false, l, rem, Some(hi - now), reset)
    }
}

/// Sliding log: one stamp per permit; admit iff the stamps in `(now - W, now]` plus `n` <= L.
#[derive(Default)]
struct Log {
    stamps: Vec<u64>,
}

impl Log {
    fn live(&self, t: u64, w: u64) -> u64 {
        self.stamps.iter().filter(|&&s| s + w > t).count() as u64
    }
}

impl Model for Log {
    fn decide(&mut self, now: u64, n: u64, l: u64, w: u64) -> Decision {
        self.stamps.retain(|&s| s + w > now);
        let count = self.live(now, w);
        let reset = |m: &Log| m.stamps.iter().max().map_or(0, |&s| s + w - now);
        if n == 0 || n > l {
            return decision(n == 0, l, l - count, None, reset(self));
        }
        if count + n <= l {
            self.stamps.extend(std::iter::repeat(now).take(n as usize));
            return decision(true, l, l - count - n, None, reset(self));
        }
        // The first instant at which enough stamps have left.
        let mut t = now + 1;
        let mut stamps = self.stamps.clone();
        stamps.sort_unstable();
        for s in stamps {
            if self.live(t, w) + n <= l {
                break;
            }
            t = s + w;
        }
        decision(false, l, l - count, Some(t - now), reset(self))
    }
}

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("w{}", N.fetch_add(1, Ordering::Relaxed))
}

#[derive(Clone, Debug)]
enum Step {
    Decide { n: u64 },
    Sleep { us: u64 },
}

/// Steps for limit `l` and window `w` µs: costs around the limit, sleeps up to 1.5 windows.
fn steps(l: u64, w: u64, len: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0..=l + 1).prop_map(|n| Step::Decide { n }),
        1 => (0..=w * 3 / 2).prop_map(|us| Step::Sleep { us }),
    ];
    prop::collection::vec(step, 1..len)
}

async fn run<A: RedisAlgorithm, M: Model>(
    server: &RedisServer,
    alg: A,
    quota: Quota,
    steps: &[Step],
) {
    // L = count per W = period; the Redis backend rounds W up to whole microseconds.
    let l = quota.count();
    let w = u64::try_from(quota.period().as_nanos().div_ceil(1000)).unwrap();
    let limiter = RedisRateLimiter::builder(quota)
        .algorithm(alg)
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let mut model = M::default();
    let mut last = 0;
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Decide { n } => {
                let r = limiter.decide("k", n).await.unwrap();
                let now = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
                assert!(now >= last, "the server clock went backwards");
                last = now;
                let want = model.decide(now, n, l, w);
                assert_eq!(r.decision, want, "{} step {i} at {now} us: {s:?}", A::NAME);
            }
            Step::Sleep { us } => tokio::time::sleep(Duration::from_micros(us)).await,
        }
    }
}

fn block_on(f: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f);
}

/// Small limits over windows of a few milliseconds, so schedules cross many boundaries.
fn small_quota() -> impl Strategy<Value = Quota> {
    (
        1..6u64,
        prop_oneof![Just(2_000u64), Just(5_000), Just(20_000)],
    )
        .prop_map(|(l, w_us)| Quota::new(l, Duration::from_micros(w_us)).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn fixed_window_matches_the_model((q, s) in small_quota().prop_flat_map(|q| (Just(q), steps(q.count(), 5_000, 60)))) {
        let server = RedisServer::start();
        block_on(run::<_, Fixed>(&server, FixedWindow, q, &s));
    }

    #[test]
    fn weighted_counter_matches_the_model((q, s) in small_quota().prop_flat_map(|q| (Just(q), steps(q.count(), 5_000, 60)))) {
        let server = RedisServer::start();
        block_on(run::<_, Weighted>(&server, SlidingWindowCounter, q, &s));
    }

    #[test]
    fn sliding_log_matches_the_model((q, s) in small_quota().prop_flat_map(|q| (Just(q), steps(q.count(), 5_000, 60)))) {
        let server = RedisServer::start();
        block_on(run::<_, Log>(&server, SlidingLog, q, &s));
    }
}

/// Products past 2^53: L = 4e9 permits per 4 s window (4e6 µs), so prev * (W - e) reaches
/// 1.6e16. Costs near the boundaries, and sleeps across two window boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_counter_is_exact_past_2_pow_53() {
    let server = RedisServer::start();
    let l = 4_000_000_000u64;
    let quota = Quota::new(l, Duration::from_secs(4)).unwrap();
    let mut steps = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64; // xorshift: fixed, reproducible costs
    for round in 0..40 {
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = match x % 4 {
                0 => x % (l + 2),
                1 => l / 3 + x % 1000,
                2 => l - x % 1000,
                _ => x % 5,
            };
            steps.push(Step::Decide { n });
        }
        if round % 4 == 0 {
            steps.push(Step::Sleep { us: 900_000 });
        }
    }
    run::<_, Weighted>(&server, SlidingWindowCounter, quota, &steps).await;
}

/// `mul_cmp`, `muldiv`, `muldiv_ceil` and `idiv` from the scripts' prelude, run by Redis's Lua
/// on operands up to 2^52, against u128.
#[test]
fn script_integer_helpers_are_exact() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let body = concat!(
        include_str!("../src/redis/prelude.lua"),
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
        .algorithm(FixedWindow)
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    // Start just after a window boundary (windows are aligned to the epoch), so the steps below
    // all fall in one 200 ms window.
    let now = l.decide("k", 0).await.unwrap().server_time.unwrap();
    let into = Duration::from_micros((now.as_micros() % 200_000) as u64);
    tokio::time::sleep(Duration::from_millis(205) - into).await;
    l.try_acquire_n("k", 2).await.unwrap();
    let e = l
        .try_acquire_for_async("k", 1, Duration::from_micros(1))
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
