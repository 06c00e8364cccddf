//! Window algorithms behind the HTTP layer, in process.
//!
//! - A real axum server on 127.0.0.1:0 and hyper-util's client, with a sliding log and a fixed
//!   window on a `ManualClock` the test advances: the headers are the algorithm's own
//!   (`RateLimit-Policy` q = L, w = W; `Retry-After` and `t` until the permits that must leave
//!   have left), exact whatever the machine's speed.
//! - Shaping with a fixed window under tokio's paused time: a bounded wait with the generic
//!   acquire (sleep until the permits would fit, decide again), never past the bound, not in
//!   arrival order.

#[path = "support/mod.rs"]
mod http_support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use http_support::{burst, client, get as fetch, serve_axum};
use tollgate::http::{Backend, GlobalKey, PeerIp, RateLimitLayer, StatusCode};
use tollgate::{FixedWindow, KeyedRateLimiter, ManualClock, Quota, SlidingLog, TokioClock};

/// Serves `/` behind a layer over `limiter`, keyed by peer IP; returns the address.
async fn serve<A: tollgate::Algorithm>(
    limiter: Arc<KeyedRateLimiter<IpAddr, A>>,
) -> std::net::SocketAddr {
    let layer = RateLimitLayer::with_limiters(PeerIp::new())
        .limiter(limiter)
        .build()
        .unwrap();
    serve_axum(
        Router::new()
            .route("/", get(|| async { "hello" }))
            .layer(layer),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sliding_log_sends_its_own_headers() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedRateLimiter::<IpAddr>::builder(Quota::per_minute(3).unwrap())
            .clock(clock.clone())
            .algorithm(SlidingLog)
            .unwrap()
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    );
    let addr = serve(limiter).await;
    let c = client();
    // Grants at 0 s, 20 s and 40 s: each leaves the window 60 s after it was made.
    for (i, (advance, r)) in [(0, 2), (20, 1), (20, 0)].into_iter().enumerate() {
        clock.advance(Duration::from_secs(advance));
        let got = fetch(&c, addr, "/").await;
        assert_eq!(got.status, StatusCode::OK, "request {i}");
        let (name, p) = got.policy();
        assert_eq!((name.as_str(), p["q"], p["w"]), ("default", 3, 60));
        let (_, s) = got.ratelimit();
        assert_eq!((s["r"], s["t"]), (r, 60), "request {i}");
    }
    // At 45 s the window (-15 s, 45 s] holds all three: refused until the first leaves at 60 s.
    clock.advance(Duration::from_secs(5));
    let got = fetch(&c, addr, "/").await;
    assert_eq!(got.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(got.header("retry-after"), "15");
    assert_eq!(got.header("cache-control"), "no-store");
    let (_, s) = got.ratelimit();
    assert_eq!((s["r"], s["t"]), (0, 15));
    // At 60 s the first has left: one more, and the window is full again until 80 s.
    clock.advance(Duration::from_secs(15));
    let got = fetch(&c, addr, "/").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.ratelimit().1["r"], 0);
    clock.advance(Duration::from_secs(1));
    let got = fetch(&c, addr, "/").await;
    assert_eq!(got.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(got.header("retry-after"), "19"); // the grant at 20 s leaves at 80 s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_window_reports_its_window_not_a_bucket() {
    // 3 per second: GCRA's interval rounds up to 333,333,334 ns, so a full burst of 3 comes
    // back in just over a second; the window is one second. Both advertise the configured
    // rate, `q=3;w=1` (tests/http/hyper.rs).
    let q = Quota::new(3, Duration::from_secs(1)).unwrap();
    assert_eq!(
        Backend::window(&KeyedRateLimiter::<IpAddr>::new(q)),
        Duration::from_nanos(1_000_000_002)
    );
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedRateLimiter::<IpAddr>::builder(q)
            .clock(clock.clone())
            .algorithm(FixedWindow::new())
            .unwrap()
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    );
    assert_eq!(Backend::window(&*limiter), Duration::from_secs(1));
    let addr = serve(limiter).await;
    let c = client();
    clock.advance(Duration::from_millis(400));
    for r in [2, 1, 0] {
        let got = fetch(&c, addr, "/").await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.header("ratelimit-policy"), "\"default\";q=3;w=1");
        assert_eq!(got.ratelimit().1["r"], r);
    }
    // Refused until the window ends at 1 s: 600 ms, rounded up.
    let got = fetch(&c, addr, "/").await;
    assert_eq!(got.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(got.header("retry-after"), "1");
    assert_eq!(got.header("ratelimit"), "\"default\";r=0;t=1");
    clock.advance(Duration::from_millis(600));
    assert_eq!(fetch(&c, addr, "/").await.status, StatusCode::OK);
}

/// Shaping with a window algorithm: each request over the limit sleeps until its permits
/// would fit and decides again, for at most the bound. 2 per 100 ms windows, a bound of
/// 250 ms, 7 requests at once: 2 pass at 0, 2 at 100 ms, 2 at 200 ms, and the last, refused
/// again at 200 ms with 100 ms more to wait (past the bound), gets 429 then, having taken
/// nothing. Which waiter gets which window is not arrival order (GCRA would book them in
/// order and refuse the last at once).
#[tokio::test(start_paused = true)]
async fn shaping_a_window_waits_at_most_the_bound() {
    let limiter = Arc::new(
        KeyedRateLimiter::<()>::builder(Quota::new(2, Duration::from_millis(100)).unwrap())
            .clock(TokioClock::new())
            .algorithm(FixedWindow::new())
            .unwrap()
            .build(),
    );
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(limiter.clone())
        .shape(Duration::from_millis(250))
        .build()
        .unwrap();
    let mut got: Vec<_> = burst(layer, 7)
        .await
        .into_iter()
        .map(|(status, at, retry)| (at.as_millis(), status.as_u16(), retry))
        .collect();
    got.sort();
    let ok = |ms| (ms, 200, None);
    assert_eq!(
        got,
        [
            ok(0),
            ok(0),
            ok(100),
            ok(100),
            ok(200),
            ok(200),
            (200, 429, Some("1".to_owned()))
        ]
    );
    // Nothing was booked ahead: the window at 300 ms is empty.
    assert_eq!(limiter.peek(&()).remaining, 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(limiter.peek(&()).remaining, 2);
}
