//! Feature `tracing`: a debug event per refusal with the limiter's name (never the key), and a
//! `tollgate.wait` span per wait that records how it ended. Read back through a minimal
//! subscriber scoped to each test (`tracing::subscriber::with_default`).

use std::time::Duration;

#[path = "support/mod.rs"]
mod http_support;
#[path = "support/trace_collect.rs"]
mod trace_collect;

use tollgate::{KeyedRateLimiter, ManualClock, Quota, RateLimiter};
use trace_collect::Collect;

#[test]
fn a_refusal_is_one_debug_event_with_the_name_and_no_key() {
    let collect = Collect::default();
    let clock = ManualClock::new();
    tracing::subscriber::with_default(collect.clone(), || {
        let limiter = KeyedRateLimiter::<String>::builder(Quota::per_second(1).unwrap())
            .clock(clock.clone())
            .name("login")
            .build();
        let key = "alice@example.com".to_owned();
        assert!(limiter.try_acquire(&key));
        assert!(!limiter.try_acquire(&key));
        assert!(limiter.try_acquire_n(&key, 5).is_err());
    });
    let events = collect.events.lock().unwrap().clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].name, "refused");
    assert_eq!(events[0].field("limiter"), Some("login"));
    assert_eq!(events[0].field("outcome"), Some("denied"));
    assert_eq!(events[1].field("outcome"), Some("exceeds_burst"));
    assert_eq!(events[1].field("permits"), Some("5"));
    let everything = format!("{events:?}");
    assert!(
        !everything.contains("alice"),
        "a key was logged: {everything}"
    );
}

#[test]
fn each_wait_is_a_span_that_says_how_it_ended() {
    let collect = Collect::default();
    let clock = ManualClock::new();
    tracing::subscriber::with_default(collect.clone(), || {
        let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
            .clock(clock.clone())
            .name("paced")
            .build();
        assert_eq!(limiter.acquire(), Ok(Duration::ZERO)); // granted at once: no span
        assert_eq!(limiter.acquire(), Ok(Duration::from_millis(100)));
    });
    let spans = collect.spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].name, "tollgate.wait");
    assert_eq!(spans[0].field("limiter"), Some("paced"));
    assert_eq!(spans[0].field("outcome"), Some("allowed"));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_async_wait_closes_its_span_as_cancelled() {
    let collect = Collect::default();
    let _guard = tracing::subscriber::set_default(collect.clone());
    let limiter = RateLimiter::builder(Quota::per_second(1).unwrap())
        .clock(tollgate::TokioClock::new())
        .build();
    assert!(limiter.try_acquire());
    let abandoned = tokio::time::timeout(Duration::from_millis(10), limiter.acquire_async()).await;
    assert!(abandoned.is_err());
    let spans = collect.spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].field("limiter"), Some("unnamed"));
    assert_eq!(spans[0].field("outcome"), Some("cancelled"));
}

/// The HTTP layer over a real socket: a refused request is one debug event with the policy's
/// name and outcome, and no key unless the builder was told `trace_keys(true)` (then the key,
/// as its `Debug`). A request enforcement would refuse in shadow is an event too.
#[tokio::test(flavor = "current_thread")]
async fn http_refusals_are_events_with_the_key_only_when_asked() {
    use tollgate::http::{HeaderKey, HeaderName, RateLimitLayer};

    for trace_keys in [false, true] {
        let collect = Collect::default();
        let _guard = tracing::subscriber::set_default(collect.clone());
        let layer = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-user")))
            .per_hour(1)
            .policy_name("api")
            .trace_keys(trace_keys)
            .build()
            .unwrap();
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "ok" }))
            .layer(layer);
        let addr = http_support::serve_axum(app).await;
        let client = http_support::client();
        let user = [("x-user", "alice@example.com")];
        assert_eq!(
            http_support::send(&client, addr, "GET", "/", &user)
                .await
                .status,
            200
        );
        assert_eq!(
            http_support::send(&client, addr, "GET", "/", &user)
                .await
                .status,
            429
        );

        let events = collect.events.lock().unwrap().clone();
        let refused: Vec<_> = events
            .iter()
            .filter(|e| e.name == "request refused")
            .collect();
        assert_eq!(refused.len(), 1, "{events:?}");
        assert_eq!(refused[0].field("policy"), Some("api"));
        assert_eq!(refused[0].field("outcome"), Some("refused"));
        let everything = format!("{events:?}");
        if trace_keys {
            let key = refused[0].field("key").expect("the key, asked for");
            assert!(key.contains("alice@example.com"), "{key}");
        } else {
            assert_eq!(refused[0].field("key"), None);
            assert!(
                !everything.contains("alice"),
                "a key was logged: {everything}"
            );
        }
    }
}

/// In shadow, a request enforcement would refuse goes through, and is an event
/// (`would_refuse`) all the same: what a rollout watches.
#[tokio::test(flavor = "current_thread")]
async fn http_shadow_refusals_are_events_too() {
    use tollgate::http::{GlobalKey, RateLimitLayer};

    let collect = Collect::default();
    let _guard = tracing::subscriber::set_default(collect.clone());
    let layer = RateLimitLayer::builder(GlobalKey)
        .per_hour(1)
        .policy_name("search")
        .shadow()
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer);
    let addr = http_support::serve_axum(app).await;
    let client = http_support::client();
    for _ in 0..3 {
        assert_eq!(http_support::get(&client, addr, "/").await.status, 200);
    }
    let events = collect.events.lock().unwrap().clone();
    let would: Vec<_> = events
        .iter()
        .filter(|e| e.name == "request refused" && e.field("outcome") == Some("would_refuse"))
        .collect();
    assert_eq!(would.len(), 2, "{events:?}");
    assert_eq!(would[0].field("policy"), Some("search"));
}

/// A layer that cannot key requests because the server is set up wrongly (`PeerIp` served
/// without `ConnectInfo`) says so as an `error` event with the reason and the fix: once for a
/// burst of requests, not once per request (the counts are in the metrics). A client's bad key
/// (an API-key header sent twice) is a `warn` event, rate-limited the same way. Neither
/// carries request data.
#[tokio::test(flavor = "current_thread")]
async fn a_misconfiguration_is_one_error_event_for_many_requests() {
    use tollgate::http::{HeaderKey, HeaderName, PeerIp, RateLimitLayer};

    let collect = Collect::default();
    let _guard = tracing::subscriber::set_default(collect.clone());
    let peer = RateLimitLayer::builder(PeerIp::new())
        .per_hour(5)
        .policy_name("peer")
        .build()
        .unwrap();
    let keyed = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
        .per_hour(5)
        .policy_name("keyed")
        .build()
        .unwrap();
    let handler = axum::routing::get(|| async { "ok" });
    let app = axum::Router::new()
        .route("/peer", handler.clone().layer(peer))
        .route("/keyed", handler.layer(keyed));
    let addr = http_support::serve_axum_without_connect_info(app).await;
    let client = http_support::client();
    let started = std::time::Instant::now();
    let twice = [("x-api-key", "secret-a"), ("x-api-key", "secret-b")];
    for _ in 0..20 {
        assert_eq!(http_support::get(&client, addr, "/peer").await.status, 500);
        let got = http_support::send(&client, addr, "GET", "/keyed", &twice).await;
        assert_eq!(got.status, 400);
    }
    // At most one event a minute per layer and kind: one here, unless this machine took over
    // a minute for 40 requests (then one more per minute, never one per request).
    let most = 1 + started.elapsed().as_secs() as usize / 60;

    let events = collect.events.lock().unwrap().clone();
    let errors: Vec<_> = events.iter().filter(|e| e.level == "ERROR").collect();
    assert!(!errors.is_empty() && errors.len() <= most, "{events:?}");
    let error = errors[0];
    assert_eq!(error.field("policy"), Some("peer"));
    assert_eq!(error.field("outcome"), Some("misconfigured"));
    assert_eq!(error.field("status"), Some("500"));
    assert_eq!(error.field("suppressed"), Some("0"));
    assert!(
        error
            .field("reason")
            .is_some_and(|r| r.contains("serve with axum's ConnectInfo<SocketAddr>")),
        "{error:?}"
    );
    let warnings: Vec<_> = events.iter().filter(|e| e.level == "WARN").collect();
    assert!(!warnings.is_empty() && warnings.len() <= most, "{events:?}");
    assert_eq!(warnings[0].field("policy"), Some("keyed"));
    assert_eq!(warnings[0].field("outcome"), Some("key_error"));
    assert_eq!(warnings[0].field("status"), Some("400"));
    let everything = format!("{events:?}");
    assert!(
        !everything.contains("secret") && !everything.contains("127.0.0.1"),
        "request data was logged: {everything}"
    );
}
