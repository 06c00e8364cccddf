//! The layer's two ways in, over a real axum server on 127.0.0.1:0: limits given as quotas
//! (`RateLimitLayer::builder`: the builder makes the limiters, and `limiter`/`policies` reach
//! them) and limiters you made (`RateLimitLayer::with_limiters`: shared, not copied); and the
//! limiter settings (`max_keys`, `no_key_cap`, `when_full`, `sweep_interval`, `no_sweeper`)
//! reaching the limiters the builder makes; the two mixed on one builder, settings that
//! would reach no limiter refused, and the public types' names (two type parameters at most).

#[path = "support/mod.rs"]
mod http_support;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use http_support::{client, send, serve_axum};
use tollgate::http::{
    Backends, BuildError, HeaderKey, HeaderName, NoBody, RateLimitLayer, StatusCode,
    DEFAULT_MAX_KEYS,
};
use tollgate::{KeyedRateLimiter, Quota, WhenFull};

type Layer = RateLimitLayer<Backends<KeyedRateLimiter<String>>, NoBody>;

fn api_key() -> HeaderKey {
    HeaderKey::new(HeaderName::from_static("x-api-key"))
}

/// `GET /` and `POST /login` behind `layer`.
async fn serve(layer: Layer) -> SocketAddr {
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/login", post(|| async { "ok" }))
        .layer(layer);
    serve_axum(app).await
}

/// The status of `method path` sent with `x-api-key: key`.
async fn status(addr: SocketAddr, method: &str, path: &str, key: &str) -> StatusCode {
    send(&client(), addr, method, path, &[("x-api-key", key)])
        .await
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiters_the_builder_makes_are_the_ones_it_decides_with() {
    let layer = RateLimitLayer::builder(api_key())
        .per_minute(3)
        .route("login", "POST /login", Quota::per_minute(1).unwrap())
        .build()
        .unwrap();
    let names: Vec<&str> = layer.policies().map(|(name, _)| name).collect();
    assert_eq!(names, ["login", "default"]);
    let default = layer.limiter("default").unwrap().clone();
    let login = layer.limiter("login").unwrap().clone();
    for (name, limiter) in layer.policies() {
        assert!(Arc::ptr_eq(limiter, layer.limiter(name).unwrap()));
    }
    assert!(!Arc::ptr_eq(&default, &login));
    assert!(layer.limiter("nope").is_none());
    assert_eq!((default.len(), login.len()), (0, 0));
    assert_eq!(default.stats().keys, 0);

    let addr = serve(layer).await;
    // Requests take permits from the limiters the accessor returned...
    assert_eq!(status(addr, "GET", "/", "a").await, StatusCode::OK);
    assert_eq!(status(addr, "GET", "/", "a").await, StatusCode::OK);
    assert_eq!(status(addr, "GET", "/", "b").await, StatusCode::OK);
    assert_eq!((default.len(), login.len()), (2, 0));
    assert_eq!(default.stats().keys, 2);
    assert_eq!(default.peek("a").remaining, 1);
    assert_eq!(default.peek("b").remaining, 2);
    assert_eq!(status(addr, "POST", "/login", "a").await, StatusCode::OK);
    assert_eq!(login.len(), 1);
    assert_eq!(login.peek("a").remaining, 0);
    assert_eq!(
        status(addr, "POST", "/login", "a").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // ... and permits taken through them are gone for requests too.
    default.try_acquire_n("b", 2).unwrap();
    assert_eq!(
        status(addr, "GET", "/", "b").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Upkeep reaches them: every key is hot, so a sweep evicts none, and counts.
    let sweeps = default.stats().sweeps;
    assert_eq!(default.sweep_now(), 0);
    assert_eq!(default.stats().sweeps, sweeps + 1);
    assert_eq!(default.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiters_you_pass_are_shared_not_copied() {
    let cap = NonZeroUsize::new(1_000).unwrap();
    let mine = Arc::new(
        KeyedRateLimiter::<String>::builder(Quota::per_minute(2).unwrap())
            .max_keys(cap)
            .build(),
    );
    let auth = Arc::new(
        KeyedRateLimiter::<String>::builder(Quota::per_minute(1).unwrap())
            .max_keys(cap)
            .build(),
    );
    let layer = RateLimitLayer::with_limiters(api_key())
        .limiter(mine.clone())
        .route_limiter("auth", "POST /login", auth.clone())
        .route_limiter("auth", "POST /reset", auth.clone())
        .build()
        .unwrap();
    assert!(Arc::ptr_eq(layer.limiter("default").unwrap(), &mine));
    assert!(Arc::ptr_eq(layer.limiter("auth").unwrap(), &auth));
    let names: Vec<&str> = layer.policies().map(|(name, _)| name).collect();
    assert_eq!(names, ["auth", "auth", "default"]);
    assert!(layer
        .policies()
        .filter(|(name, _)| *name == "auth")
        .all(|(_, l)| Arc::ptr_eq(l, &auth)));

    let addr = serve(layer).await;
    assert_eq!(status(addr, "GET", "/", "a").await, StatusCode::OK);
    assert_eq!(mine.len(), 1);
    assert_eq!(mine.peek("a").remaining, 1);
    assert_eq!(status(addr, "POST", "/login", "a").await, StatusCode::OK);
    assert_eq!(auth.len(), 1);
    assert_eq!(mine.len(), 1);
}

#[test]
fn the_key_cap_of_the_limiters_the_builder_makes() {
    let cap = |b: tollgate::http::RateLimitLayerBuilder<_, _>| {
        let layer: Layer = b.build().unwrap();
        layer.limiter("default").unwrap().max_keys()
    };
    let per_key = || RateLimitLayer::builder(api_key()).per_second(5);
    assert_eq!(cap(per_key()), Some(DEFAULT_MAX_KEYS));
    assert_eq!(
        cap(per_key().max_keys(NonZeroUsize::MIN)),
        Some(NonZeroUsize::MIN)
    );
    // "No cap" is said, not implied: `no_key_cap`, which `build` refuses unless allowed.
    assert!(matches!(
        per_key().no_key_cap().build(),
        Err(BuildError::UnboundedKeys(ref name)) if name == "default"
    ));
    assert_eq!(cap(per_key().no_key_cap().allow_unbounded_keys()), None);
    // The last call wins, as on KeyedRateLimiterBuilder.
    assert_eq!(
        cap(per_key().no_key_cap().max_keys(NonZeroUsize::MIN)),
        Some(NonZeroUsize::MIN)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_keys_and_when_full_reach_the_limiters_over_http() {
    let one_key = |policy| {
        RateLimitLayer::builder(api_key())
            .per_minute(10)
            .max_keys(NonZeroUsize::MIN)
            .when_full(policy)
            .build()
            .unwrap()
    };
    let deny = one_key(WhenFull::Deny);
    let limiter = deny.limiter("default").unwrap().clone();
    let addr = serve(deny).await;
    assert_eq!(status(addr, "GET", "/", "a").await, StatusCode::OK);
    // A new key with no room in the table: the server's capacity, not the client's rate.
    assert_eq!(
        status(addr, "GET", "/", "b").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(limiter.len(), 1);

    let allow = one_key(WhenFull::AllowUntracked);
    let limiter = allow.limiter("default").unwrap().clone();
    let addr = serve(allow).await;
    assert_eq!(status(addr, "GET", "/", "a").await, StatusCode::OK);
    assert_eq!(status(addr, "GET", "/", "b").await, StatusCode::OK);
    assert_eq!(limiter.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_interval_and_no_sweeper_reach_the_limiters() {
    // One permit per millisecond, burst 1: a key is cold a millisecond after its request.
    let q = Quota::new(1, Duration::from_millis(1)).unwrap();
    let layer = |b: tollgate::http::RateLimitLayerBuilder<_, _>| -> Layer { b.build().unwrap() };
    let swept = layer(
        RateLimitLayer::builder(api_key())
            .quota(q)
            .sweep_interval(Duration::from_millis(5)),
    );
    let unswept = layer(RateLimitLayer::builder(api_key()).quota(q).no_sweeper());
    let (l_swept, l_unswept) = (
        swept.limiter("default").unwrap().clone(),
        unswept.limiter("default").unwrap().clone(),
    );
    let (a, b) = (serve(swept).await, serve(unswept).await);
    assert_eq!(status(a, "GET", "/", "k").await, StatusCode::OK);
    assert_eq!(status(b, "GET", "/", "k").await, StatusCode::OK);
    // The sweeper evicts the cold key on its own (give a loaded machine two seconds).
    let start = std::time::Instant::now();
    while !l_swept.is_empty() && start.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(l_swept.len(), 0);
    assert!(l_swept.stats().sweeps > 0);
    // Without one, the cold key stays until a sweep is asked for. Cold, that is, a
    // millisecond after b's request (the loop above may have ended at once: a's key can be
    // swept before b's request is even sent on a loaded machine); a sleep lasts at least
    // its time.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(l_unswept.stats().sweeps, 0);
    assert_eq!(l_unswept.len(), 1);
    assert_eq!(l_unswept.sweep_now(), 1);
    assert_eq!(l_unswept.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_and_limiters_you_made_mix_on_one_builder() {
    let auth = Arc::new(
        KeyedRateLimiter::<String>::builder(Quota::per_minute(1).unwrap())
            .max_keys(NonZeroUsize::new(1_000).unwrap())
            .build(),
    );
    let layer: Layer = RateLimitLayer::builder(api_key())
        .per_minute(2)
        .max_keys(NonZeroUsize::new(10).unwrap())
        .route_limiter("auth", "POST /login", auth.clone())
        .build()
        .unwrap();
    assert!(Arc::ptr_eq(layer.limiter("auth").unwrap(), &auth));
    // The settings reach the limiter made from the quota, not the one passed in.
    assert_eq!(
        layer.limiter("default").unwrap().max_keys(),
        NonZeroUsize::new(10)
    );
    assert_eq!(auth.max_keys(), NonZeroUsize::new(1_000));

    let addr = serve(layer).await;
    let (login, home) = (("POST", "/login"), ("GET", "/"));
    let mut got = Vec::new();
    for (method, path) in [login, login, home, home, home] {
        got.push(status(addr, method, path, "a").await.as_u16());
    }
    // The login route's 1 per minute is yours, the rest the quota's 2 per minute.
    assert_eq!(got, [200, 429, 200, 200, 429]);
    assert_eq!(auth.len(), 1);
}

#[test]
fn limiter_settings_that_reach_no_limiter_are_refused() {
    let mine = || {
        Arc::new(
            KeyedRateLimiter::<String>::builder(Quota::per_minute(2).unwrap())
                .max_keys(NonZeroUsize::new(1_000).unwrap())
                .build(),
        )
    };
    let refused = RateLimitLayer::with_limiters(api_key())
        .limiter(mine())
        .max_keys(NonZeroUsize::MIN)
        .build();
    assert_eq!(refused.unwrap_err(), BuildError::UnusedLimiterSettings);
    let refused = RateLimitLayer::builder(api_key())
        .route_limiter("auth", "POST /login", mine())
        .no_sweeper()
        .build();
    assert_eq!(refused.unwrap_err(), BuildError::UnusedLimiterSettings);
    // With one limit made from a quota, they apply to it.
    let mixed = RateLimitLayer::with_limiters(api_key())
        .limiter(mine())
        .route("login", "POST /login", Quota::per_minute(1).unwrap())
        .when_full(WhenFull::AllowUntracked)
        .build();
    assert!(mixed.is_ok());
    // With no rate limit at all they apply to nothing, and are accepted (as they always were).
    assert!(RateLimitLayer::builder(api_key())
        .no_sweeper()
        .build()
        .is_ok());
}

/// The public types name the backends, the reject body and the inner service: at most two
/// type parameters each, never the key extractor.
#[test]
fn the_layer_types_take_at_most_two_type_parameters() {
    use axum::body::Body;
    use axum::routing::MethodRouter;
    use tollgate::http::{ProblemJson, RateLimit, RateLimitLayerBuilder, ResponseFuture};
    use tower::{Layer as _, Service as _};

    type Json = RateLimitLayer<Backends<KeyedRateLimiter<String>>, ProblemJson>;
    let builder: RateLimitLayerBuilder<Backends<KeyedRateLimiter<String>>, ProblemJson> =
        RateLimitLayer::builder(api_key())
            .per_second(1)
            .problem_json();
    let layer: Json = builder.build().unwrap();
    let mut service: RateLimit<MethodRouter, Json> = layer.layer(get(|| async { "ok" }));
    // No key header: answered at once, without a runtime.
    let future: ResponseFuture<<MethodRouter as tower::Service<http::Request<Body>>>::Future> =
        service.call(http::Request::new(Body::empty()));
    drop(future);
}
