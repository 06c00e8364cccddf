//! The layer's concerns as separate tower layers (`access_layer`, `concurrency_layer`,
//! `rate_layer`) stacked with `ServiceBuilder`, against the combined layer built from the same
//! configuration: the same statuses, headers, bodies and per-policy counts, request by request.
//!
//! In process (no sockets), so that a response can be held open and a handler held inside;
//! the rate limiters run on a `ManualClock` never advanced, so what they admit is exact.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::{Notify, Semaphore};
use tollgate::http::{AccessList, GlobalKey, HeaderKey, HeaderName, PolicyStats, RateLimitLayer};
use tollgate::{KeyedConcurrencyLimiter, KeyedRateLimiter, ManualClock, Quota};
use tower::{ServiceBuilder, ServiceExt};

/// Every request here must finish within this (no test hangs).
const DEADLINE: Duration = Duration::from_secs(30);

fn rate<K: std::hash::Hash + Eq + Clone + Send + Sync + 'static>(
    per_minute: u64,
) -> Arc<KeyedRateLimiter<K>> {
    Arc::new(
        KeyedRateLimiter::builder(Quota::per_minute(per_minute).unwrap())
            .clock(ManualClock::new())
            .max_keys(NonZeroUsize::new(1_000).unwrap())
            .build(),
    )
}

fn slots<K: std::hash::Hash + Eq + Clone + Send + Sync + 'static>(
    limit: u64,
) -> Arc<KeyedConcurrencyLimiter<K>> {
    Arc::new(
        KeyedConcurrencyLimiter::builder(limit)
            .unwrap()
            .max_keys(NonZeroUsize::new(1_000).unwrap())
            .build(),
    )
}

/// A handler that says it was entered, then waits to be released.
#[derive(Clone)]
struct Gate {
    entered: Arc<Notify>,
    release: Arc<Semaphore>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            entered: Arc::new(Notify::new()),
            release: Arc::new(Semaphore::new(0)),
        }
    }
}

/// `/api`, `/shadowed`, `/free`, `/health` answer "ok" at once; `/slow` waits on the gate.
fn app(gate: &Gate) -> Router {
    let gate = gate.clone();
    Router::new()
        .route("/api", get(|| async { "ok" }))
        .route("/shadowed", get(|| async { "ok" }))
        .route("/free", get(|| async { "ok" }))
        .route("/health", get(|| async { "ok" }))
        .route(
            "/slow",
            get(move || {
                let gate = gate.clone();
                async move {
                    gate.entered.notify_one();
                    gate.release.acquire().await.unwrap().forget();
                    "slow"
                }
            }),
        )
}

/// One configuration, built anew for each setup (each its own limiters): rate routes `api`
/// (3 a minute) and `shadowed` (2 a minute, in shadow, with headers), a concurrency route
/// `slow` (1 in flight), no default (so `/free` is unmatched), lists (deny by header, allow
/// `/health`), bodies as problem+json, keyed by the `x-user` header.
fn layer() -> RateLimitLayer<
    tollgate::http::Backends<KeyedRateLimiter<String>, KeyedConcurrencyLimiter<String>>,
    tollgate::http::ProblemJson,
> {
    RateLimitLayer::with_limiters(HeaderKey::new(HeaderName::from_static("x-user")))
        .route_limiter("api", "GET /api", rate(3))
        .route_limiter("shadowed", "GET /shadowed", rate(2))
        .shadow_policy("shadowed")
        .shadow_headers(true)
        .route_concurrency("slow", "GET /slow", slots(1))
        .access(
            AccessList::new()
                .deny_if(|req| req.headers.contains_key("x-deny"))
                .allow_if(|req| req.uri.path() == "/health"),
        )
        .problem_json()
        .build()
        .unwrap()
}

/// A response as compared: status, headers, body.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: StatusCode,
    headers: Vec<(String, String)>,
    body: String,
}

async fn seen<B>(res: Response<B>) -> Seen
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let (head, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Seen {
        status: head.status,
        headers: sorted(&head.headers),
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

fn sorted(headers: &HeaderMap) -> Vec<(String, String)> {
    let mut all: Vec<_> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    all.sort();
    all
}

fn request(path: &str, user: Option<&str>, deny: bool) -> Request<Body> {
    let mut req = Request::get(path);
    if let Some(user) = user {
        req = req.header("x-user", user);
    }
    if deny {
        req = req.header("x-deny", "1");
    }
    req.body(Body::empty()).unwrap()
}

/// Runs the same script against `service` (made from `layer` and the gate's app): every
/// response as seen, and every policy's counts at the end.
async fn script<S, B>(
    service: S,
    layer: &RateLimitLayer<
        tollgate::http::Backends<KeyedRateLimiter<String>, KeyedConcurrencyLimiter<String>>,
        tollgate::http::ProblemJson,
    >,
    gate: &Gate,
) -> (Vec<Seen>, Vec<(String, PolicyStats)>)
where
    S: tower::Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: std::fmt::Debug + Send,
    B: http_body::Body + Send + 'static,
    B::Error: std::fmt::Debug,
{
    let call = |req| {
        let service = service.clone();
        async move {
            tokio::time::timeout(DEADLINE, service.oneshot(req))
                .await
                .expect("request timed out")
                .unwrap()
        }
    };
    let mut out = Vec::new();
    // Rate: 3 allowed, then 429s with Retry-After; another key has its own 3.
    for user in ["ann", "ann", "ann", "ann", "ann", "bob"] {
        out.push(seen(call(request("/api", Some(user), false)).await).await);
    }
    // Shadow: never refused, the would-be refusals counted, headers without Retry-After.
    for _ in 0..4 {
        out.push(seen(call(request("/shadowed", Some("ann"), false)).await).await);
    }
    // Lists: denied (403) before any limiter, even without a key; allowed (bypass).
    out.push(seen(call(request("/api", Some("ann"), true)).await).await);
    out.push(seen(call(request("/api", None, true)).await).await);
    out.push(seen(call(request("/health", None, false)).await).await);
    // No key for a limited route: 400. An unmatched route: through.
    out.push(seen(call(request("/api", None, false)).await).await);
    out.push(seen(call(request("/free", Some("ann"), false)).await).await);
    // Concurrency: one in flight per key; the second is busy (429), another key is not.
    let first = tokio::spawn(call(request("/slow", Some("ann"), false)));
    tokio::time::timeout(DEADLINE, gate.entered.notified())
        .await
        .expect("the handler was never entered");
    out.push(seen(call(request("/slow", Some("ann"), false)).await).await);
    // The gate open for good: the first finishes, another key and then the first key (its
    // permit back with the first body) are admitted.
    gate.release.add_permits(1_000);
    out.push(seen(first.await.unwrap()).await);
    out.push(seen(call(request("/slow", Some("bob"), false)).await).await);
    out.push(seen(call(request("/slow", Some("ann"), false)).await).await);

    let mut stats: Vec<_> = ["api", "shadowed"]
        .iter()
        .map(|name| (name.to_string(), layer.stats(name).unwrap()))
        .collect();
    stats.push(("unmatched".to_owned(), layer.unmatched_stats()));
    (out, stats)
}

#[tokio::test]
async fn the_layers_stacked_with_service_builder_answer_and_count_as_the_combined_one() {
    let combined_gate = Gate::new();
    let combined_layer = layer();
    let combined = app(&combined_gate).layer(combined_layer.clone());
    let (expected, expected_stats) = script(combined, &combined_layer, &combined_gate).await;

    let stacked_gate = Gate::new();
    let stacked_layer = layer();
    let stacked = app(&stacked_gate).layer(
        ServiceBuilder::new()
            .layer(stacked_layer.access_layer())
            .layer(stacked_layer.concurrency_layer())
            .layer(stacked_layer.rate_layer()),
    );
    let (got, got_stats) = script(stacked, &stacked_layer, &stacked_gate).await;

    // The script saw what it was written for (the comparison alone would pass on a layer
    // that did nothing in both setups).
    let statuses: Vec<u16> = expected.iter().map(|s| s.status.as_u16()).collect();
    assert_eq!(
        statuses,
        [
            200, 200, 200, 429, 429, 200, 200, 200, 200, 200, 403, 403, 200, 400, 200, 429, 200,
            200, 200
        ]
    );
    for (i, (want, have)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(want, have, "response {i}");
    }
    assert_eq!(expected.len(), got.len());
    assert_eq!(expected_stats, got_stats);
    let api = &expected_stats[0].1;
    assert_eq!(
        (api.allowed, api.refused, api.denied, api.key_errors),
        (4, 2, 2, 1)
    );
    let shadowed = &expected_stats[1].1;
    assert_eq!((shadowed.allowed, shadowed.would_refuse), (2, 2));
}

/// A request the rate layer refuses at once gives its concurrency permit back at once, as with
/// the combined layer: the refusal still open, the next request meets the rate limit, not the
/// concurrency limit.
#[tokio::test]
async fn a_refusal_of_the_rate_layer_gives_the_concurrency_permit_back_at_once() {
    let build = || {
        RateLimitLayer::with_limiters(GlobalKey)
            .limiter(rate(1))
            .concurrency("one", slots(1))
            .build()
            .unwrap()
    };
    let hello = || Router::new().route("/", get(|| async { "hello" }));
    let combined = hello().layer(build());
    let layer = build();
    let stacked = hello().layer(
        ServiceBuilder::new()
            .layer(layer.concurrency_layer())
            .layer(layer.rate_layer()),
    );
    let mut statuses = Vec::new();
    for service in [combined, stacked] {
        let req = || Request::get("/").body(Body::empty()).unwrap();
        let first = service.clone().oneshot(req()).await.unwrap();
        drop(first); // its permit goes back with its body
        let refused = service.clone().oneshot(req()).await.unwrap();
        let again = service.clone().oneshot(req()).await.unwrap();
        statuses.push((
            refused.status(),
            again.status(),
            again.headers().contains_key("retry-after"),
        ));
        drop(refused);
    }
    // Both 429s of the rate limit (with Retry-After), not the busy answer (without).
    let rate_refusal = (
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::TOO_MANY_REQUESTS,
        true,
    );
    assert_eq!(statuses, [rate_refusal, rate_refusal]);
}

/// The key is extracted once per request by a stack, by its outermost layer; a layer of
/// another `RateLimitLayer` (same key type) inside the stack extracts its own key, never
/// reading the stack's hand-off, which stays for the stack's own rate layer.
#[tokio::test]
async fn a_stack_extracts_the_key_once_and_never_reads_another_stacks_hand_off() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tollgate::http::{KeyError, KeyFn};

    let counted = |count: Arc<AtomicUsize>| {
        KeyFn(
            move |_: &http::request::Parts| -> Result<String, KeyError> {
                count.fetch_add(1, Ordering::Relaxed);
                Ok("k".to_owned())
            },
        )
    };
    let (outer_calls, inner_calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let outer = RateLimitLayer::with_limiters(counted(Arc::clone(&outer_calls)))
        .limiter(rate(100))
        .concurrency("outer", slots(10))
        .build()
        .unwrap();
    // One a minute: the second request is refused by the inner stack alone.
    let inner = RateLimitLayer::with_limiters(counted(Arc::clone(&inner_calls)))
        .limiter(rate(1))
        .build()
        .unwrap();
    let service = Router::new().route("/", get(|| async { "hello" })).layer(
        ServiceBuilder::new()
            .layer(outer.access_layer())
            .layer(outer.concurrency_layer())
            .layer(inner.rate_layer())
            .layer(outer.rate_layer()),
    );
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let req = Request::get("/").body(Body::empty()).unwrap();
        statuses.push(service.clone().oneshot(req).await.unwrap().status());
    }
    assert_eq!(statuses, [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
    assert_eq!(outer_calls.load(Ordering::Relaxed), 2);
    assert_eq!(inner_calls.load(Ordering::Relaxed), 2);
    let (outer_stats, inner_stats) = (
        outer.stats("default").unwrap(),
        inner.stats("default").unwrap(),
    );
    // The second request, refused inside, never reached the outer rate layer.
    assert_eq!((outer_stats.allowed, outer_stats.refused), (1, 0));
    assert_eq!((inner_stats.allowed, inner_stats.refused), (1, 1));
}
