//! The HTTP layer over the Redis limiter: a real `redis-server` (started and killed by the
//! test) and plain hyper servers on loopback. Two servers with their own Redis connections
//! share one limit (GCRA, and a sliding log with its own headers), a Redis that stops
//! answering is a 503, refunds work across the wire, and shaping waits (on GCRA and on a window),
//! each request one script call.

#[path = "support/mod.rs"]
mod http_support;
#[path = "../redis_support/mod.rs"]
mod redis_support;

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_support::{client, send, serve_hyper};
use redis_support::RedisServer;
use tollgate::http::{Backend, HeaderKey, HeaderName, RateLimitLayer, StatusCode};
use tollgate::redis::{RedisAlgorithm, RedisRateLimiter};
use tollgate::{Quota, SlidingLog};

fn prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("http{}", N.fetch_add(1, Ordering::Relaxed))
}

async fn limiter(server: &RedisServer, quota: Quota, prefix: &str) -> Arc<RedisRateLimiter> {
    window_limiter(server, tollgate::Gcra, quota, prefix).await
}

/// `/fail` answers 401, anything else 200.
async fn app(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"ok")));
    if req.uri().path() == "/fail" {
        *res.status_mut() = StatusCode::UNAUTHORIZED;
    }
    Ok(res)
}

fn api_key() -> HeaderKey {
    HeaderKey::new(HeaderName::from_static("x-api-key"))
}

/// A plain hyper server limiting by `x-api-key` through `limiter`.
async fn server(limiter: Arc<RedisRateLimiter>, refund: bool) -> std::net::SocketAddr {
    let mut b = RateLimitLayer::with_limiters(api_key()).limiter(limiter);
    if refund {
        b = b.refund_if(|res| res.status.is_success());
    }
    serve_layer(b.build().unwrap()).await
}

async fn serve_layer<B: Backend<Key = String>>(
    layer: tollgate::http::RateLimitLayer<tollgate::http::Backends<B>>,
) -> std::net::SocketAddr {
    serve_hyper(
        tower::ServiceBuilder::new()
            .layer(layer)
            .service(tower::service_fn(app)),
    )
    .await
}

/// A plain hyper server limiting by `x-api-key` through `limiter`, waiting up to 2 s for a
/// permit instead of refusing.
async fn serve_shaping<B: Backend<Key = String>>(limiter: Arc<B>) -> std::net::SocketAddr {
    let layer = RateLimitLayer::with_limiters(api_key())
        .limiter(limiter)
        .shape(Duration::from_secs(2))
        .build()
        .unwrap();
    serve_layer(layer).await
}

async fn window_limiter<A: RedisAlgorithm>(
    server: &RedisServer,
    alg: A,
    quota: Quota,
    prefix: &str,
) -> Arc<RedisRateLimiter<A>> {
    let l = RedisRateLimiter::builder(quota)
        .algorithm(alg)
        .unwrap()
        .prefix(prefix)
        .deadline(Duration::from_millis(500))
        .connect(&server.url())
        .await
        .expect("connect to the test server");
    Arc::new(l)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_one_limit_through_redis() {
    let redis = RedisServer::start();
    let p = prefix();
    let q = Quota::per_minute(3).unwrap();
    let a = server(limiter(&redis, q, &p).await, false).await;
    let b = server(limiter(&redis, q, &p).await, false).await;
    let c = client();
    let k1 = [("x-api-key", "k1")];
    let mut statuses = Vec::new();
    for addr in [a, b, a, b, a] {
        statuses.push(send(&c, addr, "GET", "/", &k1).await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    let limited = send(&c, b, "GET", "/", &k1).await;
    assert_eq!(limited.header("retry-after"), "20");
    assert_eq!(limited.header("ratelimit-policy"), "\"default\";q=3;w=60");
    assert_eq!(limited.header("cache-control"), "no-store");
    let (_, s) = limited.ratelimit();
    assert_eq!((s["r"], s["t"]), (0, 20));
    // Another key has its own bucket.
    let other = send(&c, a, "GET", "/", &[("x-api-key", "k2")]).await;
    assert_eq!(other.status, 200);
    assert_eq!(other.ratelimit().1["r"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_does_not_answer_is_a_503() {
    let mut redis = RedisServer::start();
    let a = server(
        limiter(&redis, Quota::per_minute(3).unwrap(), &prefix()).await,
        false,
    )
    .await;
    let c = client();
    let k = [("x-api-key", "k")];
    assert_eq!(send(&c, a, "GET", "/", &k).await.status, 200);
    redis.kill();
    let res = send(&c, a, "GET", "/", &k).await;
    assert_eq!(res.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.header("cache-control"), "no-store");
    assert!(res.headers.get("retry-after").is_none());
}

/// Each request is one script call (reserve if ready now, headers from its reply), plus one
/// for a refund: 5 refunded successes, 2 failures that count, 1 refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_go_back_to_redis_in_one_call_each() {
    let redis = RedisServer::start();
    let l = limiter(&redis, Quota::per_minute(2).unwrap(), &prefix()).await;
    let a = server(l.clone(), true).await;
    let c = client();
    let k = [("x-api-key", "k")];
    for _ in 0..5 {
        let ok = send(&c, a, "GET", "/ok", &k).await;
        assert_eq!(ok.status, 200);
        assert_eq!(ok.ratelimit().1["r"], 1);
    }
    for r in [1, 0] {
        let failed = send(&c, a, "GET", "/fail", &k).await;
        assert_eq!(failed.status, 401);
        assert_eq!(failed.ratelimit().1["r"], r);
    }
    let limited = send(&c, a, "GET", "/fail", &k).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), "30");
    assert_eq!(l.stats().replies, 5 * 2 + 2 + 1);
}

/// Shaping on GCRA: one reservation per request, FIFO, and the headers from its reply (no
/// `peek` after the wait): 3 requests, 3 script calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shaping_on_redis_is_one_call_per_request() {
    let redis = RedisServer::start();
    let l = limiter(
        &redis,
        Quota::new(1, Duration::from_millis(200)).unwrap(),
        &prefix(),
    )
    .await;
    let a = serve_shaping(l.clone()).await;
    let c = client();
    let k = [("x-api-key", "k")];
    let start = Instant::now();
    for _ in 0..3 {
        let got = send(&c, a, "GET", "/", &k).await;
        assert_eq!(got.status, 200);
        // Granted at its slot: no permit left, full again 200 ms later (rounded up to 1 s).
        let (_, s) = got.ratelimit();
        assert_eq!((s["r"], s["t"]), (0, 1));
    }
    assert!(start.elapsed() >= Duration::from_millis(390));
    assert_eq!(l.stats().replies, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sliding_log_on_redis_is_shared_and_sends_its_own_headers() {
    let redis = RedisServer::start();
    let p = prefix();
    let q = Quota::per_minute(3).unwrap();
    let layer = |l| {
        RateLimitLayer::with_limiters(api_key())
            .limiter(l)
            .build()
            .unwrap()
    };
    let a = serve_layer(layer(window_limiter(&redis, SlidingLog, q, &p).await)).await;
    let b = serve_layer(layer(window_limiter(&redis, SlidingLog, q, &p).await)).await;
    let c = client();
    let k1 = [("x-api-key", "k1")];
    for (addr, r) in [(a, 2), (b, 1), (a, 0)] {
        let got = send(&c, addr, "GET", "/", &k1).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.header("ratelimit-policy"), "\"default\";q=3;w=60");
        let (_, s) = got.ratelimit();
        assert_eq!((s["r"], s["t"]), (r, 60));
    }
    // Refused until the first of the three leaves the window, just under 60 s from now (GCRA
    // at one permit per 20 s would say 20).
    let limited = send(&c, b, "GET", "/", &k1).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.header("retry-after"), "60");
    assert_eq!(limited.ratelimit().1["t"], 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shaping_waits_for_a_window_on_redis() {
    let redis = RedisServer::start();
    let limiter = window_limiter(
        &redis,
        SlidingLog,
        Quota::new(2, Duration::from_millis(300)).unwrap(),
        &prefix(),
    )
    .await;
    let a = serve_shaping(limiter).await;
    let c = client();
    let k = [("x-api-key", "k")];
    let start = Instant::now();
    for _ in 0..2 {
        assert_eq!(send(&c, a, "GET", "/", &k).await.status, 200);
    }
    // The third waits until the first grant leaves the 300 ms window, then passes.
    let third = send(&c, a, "GET", "/", &k).await;
    assert_eq!(third.status, 200);
    assert!(
        start.elapsed() >= Duration::from_millis(290),
        "served after {:?}, before the window let it",
        start.elapsed()
    );
}

/// Feature `metrics`: a Redis limiter reports its replies, its failures by kind and the
/// failure policy's decisions under its name (a real server, then the same server killed).
#[tokio::test(flavor = "current_thread")]
async fn a_redis_limiter_reports_replies_failures_and_policy_decisions() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use tollgate::metric_names as names;
    use tollgate::redis::FailurePolicy;

    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let mut redis = RedisServer::start();
    let limiter = {
        let _scope = metrics::set_default_local_recorder(&recorder);
        RedisRateLimiter::builder(Quota::per_minute(2).unwrap())
            .prefix(prefix())
            .name("edge")
            .deadline(Duration::from_millis(200))
            .on_failure(FailurePolicy::Open)
            .connect(&redis.url())
            .await
            .unwrap()
    };
    for _ in 0..3 {
        let _ = limiter.check("k").await.unwrap();
    }
    redis.kill();
    let during_outage = limiter.check("k").await.unwrap();
    assert!(
        during_outage.allowed,
        "Open admits while Redis cannot answer"
    );

    let seen: Vec<_> = snap.snapshot().into_vec();
    let counter = |name: &str, labels: &[(&str, &str)]| -> u64 {
        seen.iter()
            .filter(|(k, ..)| {
                let key = k.key();
                key.name() == name
                    && labels
                        .iter()
                        .all(|(lk, lv)| key.labels().any(|l| l.key() == *lk && l.value() == *lv))
            })
            .map(|(.., v)| match v {
                DebugValue::Counter(n) => *n,
                other => panic!("{name} is not a counter: {other:?}"),
            })
            .sum()
    };
    let edge = [(names::LIMITER, "edge")];
    assert_eq!(counter(names::REDIS_REPLIES, &edge), 3);
    assert_eq!(counter(names::REDIS_POLICY_DECISIONS, &edge), 1);
    let failures = counter(names::REDIS_ERRORS, &edge);
    let unavailable = counter(
        names::REDIS_ERRORS,
        &[(names::LIMITER, "edge"), (names::KIND, "connection")],
    ) + counter(
        names::REDIS_ERRORS,
        &[(names::LIMITER, "edge"), (names::KIND, "timeout")],
    );
    assert_eq!((failures, unavailable), (1, 1), "{seen:?}");
}

/// Feature `metrics`: a named `RedisConcurrencyLimiter` reports its acquires by outcome
/// (`allowed`, `at_capacity`, `exceeds_burst`), its waits (refused at a timeout; granted once a
/// lease is released) and the permits this process holds leases on, under its name, as the
/// in-process concurrency limiters do; and its Redis calls as the rate limiter does.
#[tokio::test(flavor = "current_thread")]
async fn a_redis_concurrency_limiter_reports_acquires_waits_and_leases_held() {
    use std::collections::HashMap;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
    use tollgate::metric_names as names;
    use tollgate::redis::RedisConcurrencyLimiter;

    /// Every series seen so far, summed over snapshots (a snapshot drains what it reads; the
    /// gauge here only moves by increments, so its sum is its value).
    #[derive(Default)]
    struct Totals(HashMap<(String, Vec<(String, String)>), f64>);
    impl Totals {
        fn add(&mut self, snap: &Snapshotter) {
            for (k, _, _, v) in snap.snapshot().into_vec() {
                let key = k.key();
                let mut labels: Vec<_> = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                labels.sort();
                let v = match v {
                    DebugValue::Counter(n) => n as f64,
                    DebugValue::Gauge(g) => g.into_inner(),
                    DebugValue::Histogram(h) => h.len() as f64,
                };
                *self.0.entry((key.name().to_owned(), labels)).or_default() += v;
            }
        }
        fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
            self.0
                .iter()
                .filter(|((n, ls), _)| {
                    n == name
                        && labels
                            .iter()
                            .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
                })
                .map(|(_, v)| *v)
                .sum()
        }
    }

    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let redis = RedisServer::start();
    let sem = {
        let _scope = metrics::set_default_local_recorder(&recorder);
        RedisConcurrencyLimiter::builder(2)
            .prefix(prefix())
            .name("leases")
            .connect(&redis.url())
            .await
            .unwrap()
    };
    let held = sem.try_acquire_n("job", 2).await.unwrap();
    assert!(sem.try_acquire("job").await.unwrap().is_none());
    assert!(sem.try_acquire_n("job", 3).await.is_err()); // never grantable
    assert!(sem
        .try_acquire_for_async("job", Duration::from_millis(20))
        .await
        .is_err()); // waited, refused at its timeout

    let mut totals = Totals::default();
    let started = |t: &Totals| {
        t.get(
            names::WAITS,
            &[(names::LIMITER, "leases"), (names::EVENT, "started")],
        )
    };
    totals.add(&snap);
    assert_eq!(started(&totals), 1.0);
    let waiter = sem.acquire_async("job");
    let releaser = async {
        // Released only once the waiter has waited.
        while started(&totals) < 2.0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            totals.add(&snap);
        }
        held.release().await.unwrap()
    };
    let (lease, released) = tokio::join!(waiter, releaser);
    assert_eq!(released, tollgate::redis::Released::Returned);
    let lease = lease.unwrap();
    totals.add(&snap);

    let leases = |labels: &[(&str, &str)]| {
        let mut all = vec![(names::LIMITER, "leases")];
        all.extend_from_slice(labels);
        totals.get(names::DECISIONS, &all)
    };
    assert_eq!(leases(&[(names::OUTCOME, names::OUTCOME_ALLOWED)]), 2.0);
    assert_eq!(leases(&[(names::OUTCOME, names::OUTCOME_AT_CAPACITY)]), 2.0);
    assert_eq!(
        leases(&[(names::OUTCOME, names::OUTCOME_EXCEEDS_BURST)]),
        1.0
    );
    let l = [(names::LIMITER, "leases")];
    assert_eq!(totals.get(names::PERMITS, &l), 3.0);
    let wait = |e: &str| {
        totals.get(
            names::WAITS,
            &[(names::LIMITER, "leases"), (names::EVENT, e)],
        )
    };
    assert_eq!(
        (wait("started"), wait("refused"), wait("granted")),
        (2.0, 1.0, 1.0)
    );
    assert_eq!(totals.get(names::IN_FLIGHT, &l), 1.0); // the waiter's lease
    assert!(totals.get(names::REDIS_REPLIES, &l) >= 5.0); // the same name on its Redis calls

    drop(lease);
    totals.add(&snap);
    assert_eq!(totals.get(names::IN_FLIGHT, &l), 0.0);
}
