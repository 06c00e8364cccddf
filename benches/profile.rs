//! One hot path in a tight loop, nothing else, for a profiler:
//!
//! ```text
//! cd benches && cargo bench --bench profile --no-run   # then, with the printed executable:
//! perf record -e cpu-clock -g target/release/deps/profile-* CASE [CALLS]
//! valgrind --tool=callgrind --toggle-collect='profile::run*' target/release/deps/profile-* CASE 1000000
//! ```
//!
//! CASE: `direct`, `direct-floor`, `direct-check`, `gov-direct` (allowed path; each also as
//! `...-denied`: 1 per hour, spent first), `direct-coarse`, `keyed-hot`, `keyed-floor-hot`, `keyed-hot-str`, `keyed-floor-hot-str` (one
//! `String` key), `keyed-check-hot`, `keyed-10k`, `keyed-floor-10k`, `keyed-check-10k`,
//! `keyed-1m`, `keyed-floor-1m`, `gov-keyed-10k`; the concurrency limiters' `try_acquire` and
//! its drop as `conc-direct`, `conc-direct-refused` (the one permit held) and `conc-keyed-hot`,
//! and their baseline, `tokio::sync::Semaphore`'s `try_acquire`, as `tokio-sem` (granted and
//! released) and `tokio-sem-refused` (the one permit held); the window algorithms as `win-ALG-direct`,
//! `win-ALG-direct-denied`, `win-ALG-keyed-hot` and `win-ALG-keyed-10k`, ALG one of `gcra`,
//! `fixed`, `sliding8`, `weighted`, `log`, on the quotas of `benches/windows.rs` (1M per ms
//! allowed, 1 per hour denied). Setup (map filling) is done first and is small next to
//! the default 200M calls (10M for 1M keys).

use std::hint::black_box;
use std::num::NonZeroU32;

use std::time::Duration;

use tollgate::{
    Algorithm, DefaultClock, FixedWindow, Gcra, KeyedRateLimiter, Quota, RateLimiter, SlidingLog,
    SlidingWindow, WeightedWindow,
};

mod support;
use support::{random_u64_keys, DirectFloor, KeyedFloor};

const FAST: u64 = 1_000_000_000;

/// The measured loop, out of line so that callgrind can count it alone:
/// `valgrind --tool=callgrind --toggle-collect='profile::run*' ... CASE N` gives the
/// instructions of N calls (loop and `black_box` included), free of setup and calibration.
#[inline(never)]
fn run(calls: u64, mut op: impl FnMut(u64) -> u64) -> u64 {
    let mut allowed = 0;
    for i in 0..calls {
        allowed += op(i);
    }
    allowed
}

/// A window-algorithm case (`win-ALG-SHAPE`) on `alg`, as `benches/windows.rs` measures it.
fn window_case<A: Algorithm>(alg: A, shape: &str, calls: u64, key: impl Fn(u64) -> u64) -> u64 {
    let allowing = Quota::new(1_000_000, Duration::from_millis(1)).unwrap();
    match shape {
        "direct" | "direct-denied" => {
            let denied = shape == "direct-denied";
            let q = if denied {
                Quota::per_hour(1).unwrap()
            } else {
                allowing
            };
            let l = RateLimiter::builder(q).algorithm(alg).unwrap().build();
            if denied {
                assert!(l.try_acquire());
            }
            run(calls, |_| u64::from(black_box(&l).try_acquire()))
        }
        "keyed-hot" | "keyed-10k" => {
            let l = KeyedRateLimiter::<u64>::builder(allowing)
                .algorithm(alg)
                .unwrap()
                .build();
            if shape == "keyed-hot" {
                return run(calls, |_| u64::from(l.try_acquire(black_box(&7))));
            }
            (0..10_000).for_each(|k| assert!(l.try_acquire(&k)));
            run(calls, |i| u64::from(l.try_acquire(&key(i))))
        }
        other => panic!("unknown window shape {other}"),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; skip flags.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(case) = args.first() else {
        // Run with no case (as `cargo bench` does): nothing to profile.
        return;
    };
    let big = case.ends_with("1m");
    let calls: u64 = args.get(1).and_then(|c| c.parse().ok()).unwrap_or(if big {
        10_000_000
    } else {
        200_000_000
    });
    let universe = if big { 1_000_000 } else { 10_000 };
    let seq = random_u64_keys(universe, 1 << 20, 0x5EED);
    let key = |i: u64| seq[(i & ((1 << 20) - 1)) as usize];
    let tq = Quota::per_second(FAST).unwrap();
    let mut allowed = 0u64;
    let denied = Quota::per_hour(1).unwrap();
    let gov_denied = governor::Quota::per_hour(NonZeroU32::new(1).unwrap());
    #[cfg(feature = "http")]
    if let Some(variant) = case.strip_prefix("http-") {
        let ok = http::case(variant, calls);
        println!("{case}: {ok} of {calls} answered 200");
        return;
    }
    if let Some(rest) = case.strip_prefix("win-") {
        let (alg, shape) = rest.split_once('-').expect("win-ALG-SHAPE");
        let allowed = match alg {
            "gcra" => window_case(Gcra, shape, calls, key),
            "fixed" => window_case(FixedWindow::new(), shape, calls, key),
            "sliding8" => window_case(SlidingWindow::new(8), shape, calls, key),
            "weighted" => window_case(WeightedWindow, shape, calls, key),
            "log" => window_case(SlidingLog, shape, calls, key),
            other => panic!("unknown algorithm {other}"),
        };
        println!("{case}: {allowed} of {calls} allowed");
        return;
    }
    match case.as_str() {
        "direct-denied" => {
            let l = RateLimiter::new(denied);
            assert!(l.try_acquire());
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire()));
        }
        "direct-floor-denied" => {
            let l = DirectFloor::new(DefaultClock::new(), 3_600_000_000_000, 1);
            assert!(l.try_acquire());
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire()));
        }
        "direct-check" => {
            let l = RateLimiter::new(tq);
            allowed += run(calls, |_| {
                u64::from(black_box(black_box(&l).check()).allowed)
            });
        }
        "direct-check-denied" => {
            let l = RateLimiter::new(denied);
            assert!(l.try_acquire());
            allowed += run(calls, |_| {
                u64::from(black_box(black_box(&l).check()).allowed)
            });
        }
        "gov-direct" | "gov-direct-denied" => {
            let q = if case == "gov-direct" {
                governor::Quota::per_second(NonZeroU32::new(FAST as u32).unwrap())
            } else {
                gov_denied
            };
            let l = governor::RateLimiter::direct(q);
            let _ = l.check();
            allowed += run(calls, |_| u64::from(black_box(&l).check().is_ok()));
        }
        "direct-coarse" => {
            let l = RateLimiter::builder(tq)
                .clock(tollgate::CoarseClock::new().unwrap())
                .build();
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire()));
        }
        "direct" => {
            let l = RateLimiter::new(tq);
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire()));
        }
        "direct-floor" => {
            let l = DirectFloor::new(DefaultClock::new(), 1, FAST);
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire()));
        }
        "keyed-hot" => {
            let l = KeyedRateLimiter::<u64>::new(tq);
            allowed += run(calls, |_| u64::from(l.try_acquire(black_box(&7))));
        }
        "keyed-10k" | "keyed-1m" => {
            let l = KeyedRateLimiter::<u64>::new(tq);
            (0..universe).for_each(|k| assert!(l.try_acquire(&k)));
            allowed += run(calls, |i| u64::from(l.try_acquire(&key(i))));
        }
        "keyed-floor-hot" => {
            let l = KeyedFloor::<u64, foldhash::fast::RandomState, _>::new(
                DefaultClock::new(),
                1,
                FAST,
            );
            allowed += run(calls, |_| u64::from(l.try_acquire(black_box(&7))));
        }
        "keyed-hot-str" => {
            let l = KeyedRateLimiter::<String>::new(tq);
            allowed += run(calls, |_| u64::from(l.try_acquire(black_box("k7"))));
        }
        "keyed-floor-hot-str" => {
            let l = KeyedFloor::<String, foldhash::fast::RandomState, _>::new(
                DefaultClock::new(),
                1,
                FAST,
            );
            allowed += run(calls, |_| u64::from(l.try_acquire(black_box("k7"))));
        }
        "keyed-check-hot" => {
            let l = KeyedRateLimiter::<u64>::new(tq);
            allowed += run(calls, |_| {
                u64::from(black_box(l.check(black_box(&7))).allowed)
            });
        }
        "keyed-check-10k" => {
            let l = KeyedRateLimiter::<u64>::new(tq);
            (0..universe).for_each(|k| assert!(l.try_acquire(&k)));
            allowed += run(calls, |i| u64::from(black_box(l.check(&key(i))).allowed));
        }
        "keyed-floor-10k" | "keyed-floor-1m" => {
            let l = KeyedFloor::<u64, foldhash::fast::RandomState, _>::new(
                DefaultClock::new(),
                1,
                FAST,
            );
            (0..universe).for_each(|k| assert!(l.try_acquire(&k)));
            allowed += run(calls, |i| u64::from(l.try_acquire(&key(i))));
        }
        "gov-keyed-10k" => {
            let l = governor::RateLimiter::<u64, _, _>::keyed(governor::Quota::per_second(
                NonZeroU32::new(FAST as u32).unwrap(),
            ));
            (0..universe).for_each(|k| assert!(l.check_key(&k).is_ok()));
            allowed += run(calls, |i| u64::from(l.check_key(&key(i)).is_ok()));
        }
        "conc-direct" => {
            let l = tollgate::ConcurrencyLimiter::new(1).unwrap();
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire().is_some()));
        }
        "conc-direct-refused" => {
            let l = tollgate::ConcurrencyLimiter::new(1).unwrap();
            let _held = l.try_acquire().unwrap();
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire().is_some()));
        }
        "tokio-sem" => {
            let l = tokio::sync::Semaphore::new(1);
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire().is_ok()));
        }
        "tokio-sem-refused" => {
            let l = tokio::sync::Semaphore::new(1);
            let _held = l.try_acquire().unwrap();
            allowed += run(calls, |_| u64::from(black_box(&l).try_acquire().is_ok()));
        }
        "conc-keyed-hot" => {
            let l = tollgate::KeyedConcurrencyLimiter::<u64>::new(1).unwrap();
            assert!(l.try_acquire(&7).is_some()); // tracked: every call takes the hot path
            allowed += run(calls, |_| u64::from(l.try_acquire(black_box(&7)).is_some()));
        }
        other => panic!("unknown case {other}"),
    }
    println!("{case}: {allowed} of {calls} allowed");
}

/// The HTTP layer's allowed path in process (feature `http`): `http-VARIANT`, VARIANT one of
/// `none` (the app alone), `pass` (a layer passing the response on), `ietf` (tollgate, its default IETF headers), `noheaders`,
/// `stacked` (its access and rate layers composed), `gov` (tower_governor) and `gov-headers`
/// (tower_governor with its `x-ratelimit-*` headers, `use_headers()`), as
/// `benches/http.rs` builds them (an axum hello-world route, keyed by peer IP, never limited).
/// Each call makes the request and drives the app's future, which is ready at once.
#[cfg(feature = "http")]
mod http {
    use std::future::Future;
    use std::net::SocketAddr;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use axum::extract::ConnectInfo;
    use axum::routing::get;
    use axum::Router;
    use tollgate::http::{HeaderStyle, PeerIp, RateLimitLayer};
    use tollgate::Quota;
    use tower::{Service, ServiceBuilder};
    use tower_governor::governor::GovernorConfigBuilder;
    use tower_governor::GovernorLayer;

    fn now<F: Future>(fut: F) -> F::Output {
        match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("the allowed path waited"),
        }
    }

    fn app(variant: &str) -> Router {
        let hello = Router::new().route("/", get(|| async { "hello" }));
        let tollgate = |style| {
            RateLimitLayer::builder(PeerIp::new())
                .quota(Quota::per_second(1_000_000).unwrap())
                .headers(style)
                .build()
                .unwrap()
        };
        match variant {
            "none" => hello,
            // What any layer costs under axum (its boxes), without doing anything.
            "pass" => hello.layer(tower::util::MapResponseLayer::new(|res| res)),
            "ietf" => hello.layer(tollgate(HeaderStyle::Ietf)),
            "noheaders" => hello.layer(tollgate(HeaderStyle::None)),
            "stacked" => {
                let layer = tollgate(HeaderStyle::Ietf);
                hello.layer(
                    ServiceBuilder::new()
                        .layer(layer.access_layer())
                        .layer(layer.rate_layer()),
                )
            }
            "gov" => {
                let config = GovernorConfigBuilder::default()
                    .period(Duration::from_micros(1))
                    .burst_size(1_000_000)
                    .finish()
                    .unwrap();
                hello.layer(GovernorLayer::new(Arc::new(config)))
            }
            "gov-headers" => {
                let config = GovernorConfigBuilder::default()
                    .period(Duration::from_micros(1))
                    .burst_size(1_000_000)
                    .use_headers()
                    .finish()
                    .unwrap();
                hello.layer(GovernorLayer::new(Arc::new(config)))
            }
            other => panic!("unknown http variant {other}"),
        }
    }

    /// Requests answered `200` of `calls`.
    pub fn case(variant: &str, calls: u64) -> u64 {
        let peer = ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000)));
        let mut svc = app(variant);
        let mut one = || {
            let mut req = http::Request::get("/")
                .body(axum::body::Body::empty())
                .unwrap();
            req.extensions_mut().insert(peer);
            now(std::future::poll_fn(|cx| {
                Service::<http::Request<axum::body::Body>>::poll_ready(&mut svc, cx)
            }))
            .unwrap();
            let res = now(svc.call(req)).unwrap();
            u64::from(res.status() == 200)
        };
        // Out of the count: the key's first request inserts it.
        (0..10).for_each(|_| assert_eq!(one(), 1));
        super::run(calls, |_| one())
    }
}
