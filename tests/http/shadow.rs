//! Shadow mode under a real axum server on 127.0.0.1:0: policies that decide
//! and count but never refuse, switched at run time.
//!
//! Limiters run on a `ManualClock` never advanced, so what a quota admits is exact whatever
//! the machine's speed: counts, not timings. A shadow policy that waited would hang on that
//! clock, and the support client's deadline would fail the test.

#[path = "support/mod.rs"]
mod http_support;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use http_support::{client, get as get_path, serve_axum};
use tollgate::http::{Answer, Backend, Enforcement, GlobalKey, RateLimitLayer, StatusCode};
use tollgate::{Decision, KeyedRateLimiter, ManualClock, Quota};

fn global(quota: Quota) -> Arc<KeyedRateLimiter<()>> {
    Arc::new(
        KeyedRateLimiter::builder(quota)
            .clock(ManualClock::new())
            .build(),
    )
}

/// `/` and `/search` answer 200, `/fail` 500; each call is counted.
fn counted(handled: Arc<AtomicUsize>) -> Router {
    let ok = {
        let handled = Arc::clone(&handled);
        move || {
            let handled = Arc::clone(&handled);
            async move {
                handled.fetch_add(1, Ordering::Relaxed);
                "ok"
            }
        }
    };
    let fail = move || {
        let handled = Arc::clone(&handled);
        async move {
            handled.fetch_add(1, Ordering::Relaxed);
            (StatusCode::INTERNAL_SERVER_ERROR, "no")
        }
    };
    Router::new()
        .route("/", get(ok.clone()))
        .route("/search", get(ok))
        .route("/fail", get(fail))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_requests_over_a_limit_of_100_in_shadow_all_pass_and_900_are_counted() {
    let limit = global(Quota::per_minute(100).unwrap());
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(limit.clone())
        .shadow()
        .build()
        .unwrap();
    let handled = Arc::new(AtomicUsize::new(0));
    let addr = serve_axum(counted(handled.clone()).layer(layer.clone())).await;

    // Four clients, 250 requests each.
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(async move {
                let client = client();
                let mut statuses = Vec::new();
                for _ in 0..250 {
                    let res = get_path(&client, addr, "/").await;
                    // Shadow headers are off by default: nothing tells the client.
                    assert!(!res.headers.contains_key("ratelimit"), "{:?}", res.headers);
                    assert!(!res.headers.contains_key("retry-after"));
                    statuses.push(res.status);
                }
                statuses
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        ok += t
            .await
            .unwrap()
            .iter()
            .filter(|s| **s == StatusCode::OK)
            .count();
    }
    assert_eq!(ok, 1000);
    assert_eq!(handled.load(Ordering::Relaxed), 1000);
    let stats = layer.stats("default").unwrap();
    assert_eq!(
        (stats.allowed, stats.would_refuse, stats.refused),
        (100, 900, 0)
    );
    // The limiter took permits as enforcing would have.
    assert_eq!(limit.peek(&()).remaining, 0);

    // Enforce at run time: the very next request is refused.
    assert!(layer.set_enforcement("default", Enforcement::Enforce));
    let client = client();
    let res = get_path(&client, addr, "/").await;
    assert_eq!(res.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.header_u64("retry-after"), 1);
    assert_eq!(handled.load(Ordering::Relaxed), 1000);
    let stats = layer.stats("default").unwrap();
    assert_eq!((stats.would_refuse, stats.refused), (900, 1));

    // And back.
    assert!(layer.set_enforcement("default", Enforcement::Shadow));
    assert_eq!(get_path(&client, addr, "/").await.status, StatusCode::OK);
    assert_eq!(layer.stats("default").unwrap().would_refuse, 901);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_headers_say_what_enforcing_would_without_retry_after() {
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(global(Quota::per_minute(2).unwrap()))
        .shadow()
        .shadow_headers(true)
        .build()
        .unwrap();
    let addr = serve_axum(counted(Arc::new(AtomicUsize::new(0))).layer(layer.clone())).await;
    let client = client();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let res = get_path(&client, addr, "/").await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(!res.headers.contains_key("retry-after"));
        let (name, params) = res.ratelimit();
        assert_eq!(name, "default");
        seen.push((params["r"], params["t"]));
    }
    // Full again in 30 s after the first, 60 s after the second; the third would wait 30 s.
    assert_eq!(seen, [(1, 30), (0, 60), (0, 30)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_policy_in_shadow_beside_one_enforcing_each_switched_alone() {
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(global(Quota::per_minute(1).unwrap()))
        .route_limiter("search", "/search", global(Quota::per_minute(1).unwrap()))
        .shadow_policy("search")
        .build()
        .unwrap();
    assert_eq!(layer.enforcement("search"), Some(Enforcement::Shadow));
    assert_eq!(layer.enforcement("default"), Some(Enforcement::Enforce));
    let addr = serve_axum(counted(Arc::new(AtomicUsize::new(0))).layer(layer.clone())).await;
    let client = client();
    let mut search = Vec::new();
    let mut home = Vec::new();
    for _ in 0..3 {
        search.push(get_path(&client, addr, "/search").await.status.as_u16());
        home.push(get_path(&client, addr, "/").await.status.as_u16());
    }
    assert_eq!(search, [200, 200, 200]);
    assert_eq!(home, [200, 429, 429]);

    assert!(layer.set_enforcement("search", Enforcement::Enforce));
    assert!(layer.set_enforcement("default", Enforcement::Shadow));
    assert_eq!(
        get_path(&client, addr, "/search").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get_path(&client, addr, "/").await.status, StatusCode::OK);
    let s = layer.stats("search").unwrap();
    let d = layer.stats("default").unwrap();
    assert_eq!((s.allowed, s.would_refuse, s.refused), (1, 2, 1));
    assert_eq!((d.allowed, d.would_refuse, d.refused), (1, 1, 2));
    assert!(!layer.set_enforcement("nope", Enforcement::Enforce));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shaping_in_shadow_never_waits_and_counts_delays_apart_from_refusals() {
    // 2 per second (one every 500 ms): over the burst, enforcing would wait 500 ms, which
    // the maximum delay allows.
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(global(Quota::per_second(2).unwrap()))
        .shape(Duration::from_secs(10))
        .shadow()
        .build()
        .unwrap();
    let addr = serve_axum(counted(Arc::new(AtomicUsize::new(0))).layer(layer.clone())).await;
    let client = client();
    for _ in 0..5 {
        assert_eq!(get_path(&client, addr, "/").await.status, StatusCode::OK);
    }
    let s = layer.stats("default").unwrap();
    assert_eq!((s.allowed, s.would_delay, s.would_refuse), (2, 3, 0));

    // 1 a minute with a maximum delay of 1 s: enforcing would refuse.
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(global(Quota::per_minute(1).unwrap()))
        .shape(Duration::from_secs(1))
        .shadow()
        .build()
        .unwrap();
    let addr = serve_axum(counted(Arc::new(AtomicUsize::new(0))).layer(layer.clone())).await;
    for _ in 0..2 {
        assert_eq!(get_path(&client, addr, "/").await.status, StatusCode::OK);
    }
    let s = layer.stats("default").unwrap();
    assert_eq!((s.allowed, s.would_delay, s.would_refuse), (1, 0, 1));
    assert!(layer.set_enforcement("default", Enforcement::Enforce));
    let res = get_path(&client, addr, "/").await;
    assert_eq!(res.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(layer.stats("default").unwrap().refused, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_in_shadow_let_refused_requests_through_holding_nothing() {
    // Count only failed requests: 1 a minute.
    let limit = global(Quota::per_minute(1).unwrap());
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(limit.clone())
        .refund_if(|res| res.status.is_success())
        .shadow()
        .build()
        .unwrap();
    let handled = Arc::new(AtomicUsize::new(0));
    let addr = serve_axum(counted(handled.clone()).layer(layer.clone())).await;
    let client = client();
    for _ in 0..3 {
        let res = get_path(&client, addr, "/fail").await;
        assert_eq!(res.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
    assert_eq!(handled.load(Ordering::Relaxed), 3);
    let s = layer.stats("default").unwrap();
    assert_eq!((s.allowed, s.would_refuse), (1, 2));
    assert_eq!(limit.peek(&()).remaining, 0);
}

/// A backend that always fails, as a Redis limiter does when Redis is down.
struct Down;

#[derive(Debug)]
struct DownError;

impl fmt::Display for DownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("down")
    }
}

impl std::error::Error for DownError {}

impl Backend for Down {
    type Key = ();
    type Error = DownError;

    fn quota(&self) -> Quota {
        Quota::per_second(1).unwrap()
    }

    fn window(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn keys_bounded(&self) -> bool {
        true
    }

    fn check_n(
        &self,
        _: &(),
        _: u64,
    ) -> Answer<
        Result<Decision, DownError>,
        impl Future<Output = Result<Decision, DownError>> + Send + 'static,
    > {
        Answer::<_, std::future::Ready<_>>::Now(Err(DownError))
    }

    async fn check_n_for_async<'a>(
        &'a self,
        _: &'a (),
        _: u64,
        _: Duration,
    ) -> Result<Decision, DownError> {
        Err(DownError)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_backend_in_shadow_lets_requests_through() {
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(Arc::new(Down))
        .build()
        .unwrap();
    let addr = serve_axum(counted(Arc::new(AtomicUsize::new(0))).layer(layer.clone())).await;
    let client = client();
    assert_eq!(
        get_path(&client, addr, "/").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert!(layer.set_enforcement("default", Enforcement::Shadow));
    assert_eq!(get_path(&client, addr, "/").await.status, StatusCode::OK);
    assert_eq!(layer.stats("default").unwrap().unavailable, 2);
}
