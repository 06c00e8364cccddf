//! The layer on plain hyper (no axum): hyper-util's server and client over loopback, the
//! peer address given as a `SocketAddr` request extension, `Full<Bytes>` bodies.

#[path = "support/mod.rs"]
mod http_support;

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_support::{client, get, serve_hyper};
use tollgate::http::{PeerIp, RateLimitLayer};
use tollgate::{
    Algorithm, FixedWindow, KeyedRateLimiter, KeyedRateLimiterBuilder, ManualClock, Quota,
};

async fn hello(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_hyper_is_limited_per_peer_with_problem_json() {
    let limiter: Arc<KeyedRateLimiter<IpAddr>> = Arc::new(
        KeyedRateLimiter::builder(Quota::per_minute(2).unwrap())
            .clock(ManualClock::new())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    );
    let layer = RateLimitLayer::with_limiters(PeerIp::new())
        .limiter(limiter.clone())
        .problem_json()
        .build()
        .unwrap();
    let service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(hello));
    let addr = serve_hyper(service).await;
    let c = client();

    let first = get(&c, addr, "/").await;
    assert_eq!(first.status, 200);
    assert_eq!(&first.body[..], b"hello");
    assert_eq!(first.header("ratelimit-policy"), "\"default\";q=2;w=60");
    assert_eq!(first.header("ratelimit"), "\"default\";r=1;t=30");
    assert_eq!(get(&c, addr, "/").await.status, 200);
    let limited = get(&c, addr, "/").await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), "30");
    assert_eq!(limited.header("cache-control"), "no-store");
    assert_eq!(limited.header("content-type"), "application/problem+json");
    assert!(std::str::from_utf8(&limited.body)
        .unwrap()
        .contains(r#""status":429"#));
    assert_eq!(limiter.len(), 1);
    assert_eq!(limiter.peek(&"127.0.0.1".parse().unwrap()).remaining, 0);
}

/// `RateLimit-Policy` states the configured rate, `q` per `w` whole seconds. It
/// said `q=1;w=1` for 50/s in bursts of 1 (the 20 ms tolerance rounded up to a second), so a
/// client pacing by it ran 50 times slower than allowed. A client that paces at `w / q`
/// (rounded up to the nanosecond) is never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_header_states_the_configured_rate_and_a_client_pacing_by_it_passes() {
    let ms = Duration::from_millis;
    let burst = |q: Quota, b| q.with_burst(b).unwrap();
    for (quota, policy) in [
        (burst(Quota::per_second(50).unwrap(), 1), "q=50;w=1"),
        (burst(Quota::per_second(10).unwrap(), 1), "q=10;w=1"),
        (Quota::new(1, ms(1500)).unwrap(), "q=2;w=3"),
        (burst(Quota::per_minute(100).unwrap(), 5), "q=5;w=3"),
        (Quota::per_minute(100).unwrap(), "q=100;w=60"),
        (Quota::per_second(3).unwrap(), "q=3;w=1"),
    ] {
        paced(KeyedRateLimiter::builder(quota), policy).await;
    }
    for (quota, policy) in [
        (Quota::new(2, ms(100)).unwrap(), "q=20;w=1"),
        (Quota::per_minute(3).unwrap(), "q=3;w=60"),
    ] {
        let window = KeyedRateLimiter::builder(quota).algorithm(FixedWindow::new());
        paced(window.unwrap(), policy).await;
    }
}

/// Serves `builder`'s limiter, checks the policy header, and paces 30 requests by it.
async fn paced<A: Algorithm>(builder: KeyedRateLimiterBuilder<IpAddr, A>, policy: &str) {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        builder
            .clock(clock.clone())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    );
    let layer = RateLimitLayer::with_limiters(PeerIp::new())
        .limiter(limiter)
        .build()
        .unwrap();
    let service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(hello));
    let addr = serve_hyper(service).await;
    let c = client();
    let first = get(&c, addr, "/").await;
    assert_eq!(
        first.header("ratelimit-policy"),
        format!("\"default\";{policy}")
    );
    let (_, p) = first.policy();
    let pace = Duration::from_nanos((p["w"] * 1_000_000_000).div_ceil(p["q"]));
    for i in 0..30 {
        clock.advance(pace);
        let status = get(&c, addr, "/").await.status;
        assert_eq!(status, 200, "{policy}: request {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_hyper_without_a_peer_address_is_a_server_error() {
    let layer = RateLimitLayer::with_limiters(PeerIp::new())
        .limiter(Arc::new(
            KeyedRateLimiter::builder(Quota::per_minute(2).unwrap())
                .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
                .build(),
        ))
        .build()
        .unwrap();
    // Served without the extension: the extractor cannot key, and says so with a 500.
    let service = tower::ServiceBuilder::new()
        .map_request(|mut req: Request<hyper::body::Incoming>| {
            req.extensions_mut().remove::<std::net::SocketAddr>();
            req
        })
        .layer(layer)
        .service(tower::service_fn(hello));
    let addr = serve_hyper(service).await;
    let res = get(&client(), addr, "/").await;
    assert_eq!(res.status, 500);
    assert_eq!(res.header("cache-control"), "no-store");
}
