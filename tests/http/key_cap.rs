//! A full key table is the server's capacity, not the client's traffic: under a real axum
//! server on 127.0.0.1:0, a new key the limiter has no room for gets `503 Service Unavailable`
//! with `Retry-After` and a reason naming the full key table (gRPC: `UNAVAILABLE`), counted
//! as `key_cap_reached`, while a key already tracked still gets its normal `200`/`429`.
//!
//! The limiter runs on a `ManualClock` the test never advances: every answer is exact.

#[path = "support/mod.rs"]
mod http_support;

use std::num::NonZeroUsize;
use std::sync::Arc;

use std::net::SocketAddr;

use axum::routing::get;
use axum::Router;
use http_support::{client, send, serve_axum};
use tollgate::http::{
    Backends, HeaderKey, HeaderName, ProblemJson, RateLimitLayer, RateLimitLayerBuilder,
};
use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};

type Keys = Arc<KeyedRateLimiter<String>>;

/// A limit of 1 a minute per `x-api-key`, with room for one key (new keys refused when full),
/// and the layer builder that runs it.
fn one_key_table() -> (
    Keys,
    RateLimitLayerBuilder<Backends<KeyedRateLimiter<String>>>,
) {
    let keys: Keys = Arc::new(
        KeyedRateLimiter::builder(Quota::per_minute(1).unwrap())
            .clock(ManualClock::new())
            .max_keys(NonZeroUsize::MIN)
            .when_full(WhenFull::Deny)
            .build(),
    );
    let builder =
        RateLimitLayer::with_limiters(HeaderKey::new(HeaderName::from_static("x-api-key")))
            .limiter(keys.clone());
    (keys, builder)
}

/// Serves `layer` over one route on 127.0.0.1:0.
async fn serve(
    layer: RateLimitLayer<Backends<KeyedRateLimiter<String>>, ProblemJson>,
) -> SocketAddr {
    serve_axum(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_key_at_a_full_key_table_gets_503_while_a_tracked_key_gets_200_and_429() {
    let (keys, builder) = one_key_table();
    let layer = builder.problem_json().build().unwrap();
    let addr = serve(layer.clone()).await;
    let c = client();
    let k1 = [("x-api-key", "k1")];
    let k2 = [("x-api-key", "k2")];

    assert_eq!(send(&c, addr, "GET", "/", &k1).await.status, 200);
    let limited = send(&c, addr, "GET", "/", &k1).await;
    assert_eq!(limited.status, 429, "the tracked key over its rate");
    assert_eq!(limited.header("retry-after"), "60");

    let full = send(&c, addr, "GET", "/", &k2).await;
    assert_eq!(full.status, 503, "a new key with no room in the table");
    // When k1 turns cold and its slot can be reclaimed: the minute k1's permit takes.
    assert_eq!(full.header("retry-after"), "60");
    assert_eq!(full.header("cache-control"), "no-store");
    assert_eq!(full.header("content-type"), "application/problem+json");
    assert!(
        full.header("tollgate-error").contains("key table is full"),
        "{:?}",
        full.headers
    );
    assert!(
        full.headers.get("ratelimit").is_none(),
        "no rate-limit fields: the client used none of its limit"
    );
    let body = std::str::from_utf8(&full.body).unwrap();
    assert!(
        body.starts_with(r#"{"type":"about:blank","title":"Service Unavailable","status":503,"#),
        "{body}"
    );
    assert!(body.contains("key table is full"), "{body}");

    // gRPC: UNAVAILABLE (14), not the rate limit's RESOURCE_EXHAUSTED (8).
    let grpc = send(
        &c,
        addr,
        "POST",
        "/",
        &[("x-api-key", "k3"), ("content-type", "application/grpc")],
    )
    .await;
    assert_eq!(grpc.status, 200, "trailers-only");
    assert_eq!(grpc.header("grpc-status"), "14");
    assert!(grpc.header("grpc-message").contains("key table is full"));

    // The tracked key is unaffected: still its own 429.
    assert_eq!(send(&c, addr, "GET", "/", &k1).await.status, 429);
    let stats = layer.stats("default").unwrap();
    assert_eq!(
        (
            stats.allowed,
            stats.refused,
            stats.key_cap_reached,
            stats.unavailable
        ),
        (1, 2, 2, 0)
    );
    assert_eq!(stats.total(), 5);
    assert_eq!(keys.len(), 1, "no refused key stored");
}

/// Refunding (permits reserved before the handler) and shaping (a bounded wait) reach the key
/// cap through their own backend methods: a new key still gets the `503`, not a `429`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunding_and_shaping_layers_answer_a_full_key_table_with_503() {
    for mode in ["refund", "shape"] {
        let (_keys, builder) = one_key_table();
        let layer = match mode {
            "refund" => builder.refund_if(|res| res.status.is_server_error()),
            _ => builder.shape(std::time::Duration::from_millis(1)),
        }
        .problem_json()
        .build()
        .unwrap();
        let addr = serve(layer.clone()).await;
        let c = client();
        assert_eq!(
            send(&c, addr, "GET", "/", &[("x-api-key", "k1")])
                .await
                .status,
            200,
            "{mode}"
        );
        assert_eq!(
            send(&c, addr, "GET", "/", &[("x-api-key", "k1")])
                .await
                .status,
            429,
            "{mode}"
        );
        let full = send(&c, addr, "GET", "/", &[("x-api-key", "k2")]).await;
        assert_eq!(full.status, 503, "{mode}");
        assert!(!full.header("retry-after").is_empty(), "{mode}");
        let stats = layer.stats("default").unwrap();
        assert_eq!(
            (stats.allowed, stats.refused, stats.key_cap_reached),
            (1, 1, 1),
            "{mode}"
        );
    }
}

/// The concurrency mode with the crate's `KeyedConcurrencyLimiter`: a new key that its full key
/// table refuses gets `503` with the reason, while a tracked key at its own limit gets the busy
/// status (`429` by default), and a tracked key with a free slot is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_concurrency_limit_answers_a_full_key_table_with_503() {
    let slots = Arc::new(
        tollgate::KeyedConcurrencyLimiter::<String>::builder(1)
            .unwrap()
            .max_keys(NonZeroUsize::MIN)
            .build(),
    );
    let layer = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
        .concurrency("in-flight", Arc::clone(&slots))
        .problem_json()
        .build()
        .unwrap();
    let addr = serve_axum(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let c = client();
    // k1 holds its one slot (taken here rather than by a request left open): the table is full
    // of busy keys.
    let held = slots.try_acquire_owned("k1").unwrap();
    let busy = send(&c, addr, "GET", "/", &[("x-api-key", "k1")]).await;
    assert_eq!(busy.status, 429, "k1 at its own limit");
    let full = send(&c, addr, "GET", "/", &[("x-api-key", "k2")]).await;
    assert_eq!(full.status, 503, "no room in the table for k2");
    assert!(full.header("tollgate-error").contains("key table is full"));
    assert!(std::str::from_utf8(&full.body)
        .unwrap()
        .contains("key table is full"));
    drop(held);
    let served = send(&c, addr, "GET", "/", &[("x-api-key", "k2")]).await;
    assert_eq!(served.status, 200, "k1 idle: reclaimed for k2");
}
