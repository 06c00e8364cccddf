//! The HTTP layer under a real axum server on 127.0.0.1:0, driven by hyper-util's client.
//!
//! Limiters run on a `ManualClock` that the tests never advance (unless said), so what a
//! quota admits is exact whatever the machine's speed: assertions are counts and header
//! values, never timings.

#[path = "support/mod.rs"]
mod http_support;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use http_support::{client, send, send_bytes, serve_axum, Got};
use tokio::sync::Semaphore;
use tollgate::http::{
    ClientIp, ForwardedHeader, HeaderKey, HeaderName, HeaderStyle, IpNet, OnKeyError, PeerIp,
    RateLimitLayer, StatusCode,
};
use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};

type IpLimiter = Arc<KeyedRateLimiter<IpAddr>>;

fn limiter(quota: Quota) -> IpLimiter {
    Arc::new(
        KeyedRateLimiter::builder(quota)
            .clock(ManualClock::new())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    )
}

fn localhost() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

fn hello_routes() -> Router {
    Router::new()
        .route("/a", get(|| async { "a" }))
        .route("/b", get(|| async { "b" }))
}

/// Sends `n` concurrent GETs of `path`; returns the responses.
async fn flood(addr: std::net::SocketAddr, path: &'static str, n: usize) -> Vec<Got> {
    let client = client();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { send(&client, addr, "GET", path, &[]).await })
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Checks a route's responses against its quota: exactly `burst` admitted, each `r` value from
/// `burst - 1` down to 0 seen once, every other response a 429 with consistent headers, and
/// the policy `(q, w)` as `advertised`.
fn check_route(
    responses: &[Got],
    name: &str,
    quota: Quota,
    advertised: (u64, u64),
    limiter: &KeyedRateLimiter<IpAddr>,
) {
    let burst = quota.burst();
    // When a full burst is back, rounded up: no `t` is later.
    let window = ceil_secs(quota.tolerance());
    // What the limiter itself says the next request would wait (a denied check stores
    // nothing, and the manual clock has not moved).
    let retry = limiter.check(&localhost()).retry_after.expect("exhausted");
    let retry_secs = ceil_secs(retry).max(1);
    let mut remaining = BTreeSet::new();
    let mut limited = 0;
    for res in responses {
        let (policy, p) = res.policy();
        assert_eq!(policy, name);
        assert_eq!((p["q"], p["w"]), advertised);
        let (state, s) = res.ratelimit();
        assert_eq!(state, name);
        match res.status {
            StatusCode::OK => {
                assert!(remaining.insert(s["r"]), "remaining {} seen twice", s["r"]);
                assert!(s["t"] >= 1 && s["t"] <= window, "{s:?}");
                assert!(res.headers.get("retry-after").is_none());
            }
            StatusCode::TOO_MANY_REQUESTS => {
                limited += 1;
                let retry_after = res.header_u64("retry-after");
                assert_eq!(
                    retry_after, retry_secs,
                    "Retry-After vs the limiter's retry_after"
                );
                assert!(retry_after >= 1);
                assert_eq!(s["r"], 0);
                assert_eq!(s["t"], retry_after, "t equals Retry-After on a 429");
                assert_eq!(res.header("cache-control"), "no-store");
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(
        remaining,
        (0..burst).collect(),
        "admitted exactly the burst"
    );
    assert_eq!(limited, responses.len() as u64 - burst);
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_routes_of_a_thousand_concurrent_requests_admit_exactly_the_quota() {
    // Retry-After: 36 s on /a; 3.333... s (so 4, rounded up) on /b.
    let qa = Quota::per_hour(100).unwrap();
    let qb = Quota::new(30, Duration::from_secs(100)).unwrap();
    let (la, lb) = (limiter(qa), limiter(qb));
    let layer = RateLimitLayer::with_limiters(PeerIp::new())
        .route_limiter("a", "GET /a", la.clone())
        .route_limiter("b", "GET /b", lb.clone())
        .build()
        .unwrap();
    let addr = serve_axum(hello_routes().layer(layer)).await;

    let (a, b) = tokio::join!(flood(addr, "/a", 1000), flood(addr, "/b", 1000));
    // The policy is the configured rate: 30 per 100 s, although GCRA's interval rounds up
    // to 3,333,333,334 ns and a full burst comes back in just over 100 s.
    check_route(&a, "a", qa, (100, 3600), &la);
    check_route(&b, "b", qb, (30, 100), &lb);
    assert_eq!(ceil_secs(lb.check(&localhost()).retry_after.unwrap()), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_rotation_does_not_bypass_but_proxy_appended_addresses_are_honoured() {
    let q = Quota::per_minute(3).unwrap();
    // The test client connects from loopback: it plays the trusted proxy, which appends the
    // client address it saw as the rightmost X-Forwarded-For entry.
    let behind_proxy = limiter(q);
    let trusted: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
    let app = hello_routes().layer(
        RateLimitLayer::with_limiters(ClientIp::trusted_proxies(trusted))
            .limiter(behind_proxy.clone())
            .build()
            .unwrap(),
    );
    let addr = serve_axum(app).await;
    let client = client();

    // One client rotating what it writes itself: one bucket, 3 admitted.
    let mut ok = 0;
    for i in 0..20 {
        let xff = format!("10.{i}.0.1, 2001:db8::{i}, 203.0.113.7");
        let res = send(&client, addr, "GET", "/a", &[("x-forwarded-for", &xff)]).await;
        ok += usize::from(res.status == StatusCode::OK);
    }
    assert_eq!(ok, 3);
    assert_eq!(behind_proxy.len(), 1);
    let proxied: IpAddr = "203.0.113.7".parse().unwrap();
    assert_eq!(behind_proxy.peek(&proxied).remaining, 0);

    // Different clients appended by the proxy: a bucket each.
    for i in 1..=10 {
        let client_ip = format!("198.51.100.{i}");
        let statuses: Vec<u16> = {
            let mut v = Vec::new();
            for _ in 0..4 {
                let res = send(
                    &client,
                    addr,
                    "GET",
                    "/b",
                    &[("x-forwarded-for", &client_ip)],
                )
                .await;
                v.push(res.status.as_u16());
            }
            v
        };
        assert_eq!(statuses, [200, 200, 200, 429], "{client_ip}");
    }
    assert_eq!(behind_proxy.len(), 11);

    // The same headers from a peer that is not a trusted proxy are ignored: the key is the
    // peer's address, so rotating the whole header changes nothing.
    let direct = limiter(q);
    let others: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
    let app = hello_routes().layer(
        RateLimitLayer::with_limiters(ClientIp::trusted_proxies(others))
            .limiter(direct.clone())
            .build()
            .unwrap(),
    );
    let addr = serve_axum(app).await;
    let mut ok = 0;
    for i in 0..20 {
        let xff = format!("192.0.2.{i}");
        let res = send(&client, addr, "GET", "/a", &[("x-forwarded-for", &xff)]).await;
        ok += usize::from(res.status == StatusCode::OK);
    }
    assert_eq!(ok, 3);
    assert_eq!(direct.len(), 1);
    assert_eq!(direct.peek(&localhost()).remaining, 0);
}

/// A byte the client writes left of what the trusted proxy appended (nginx's
/// `$proxy_add_x_forwarded_for` appends to the client's own line) must not turn the header
/// into a key error, which `OnKeyError::Allow` would let through unlimited. The key is the
/// proxy-appended address; the 6th request within the hour is 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_written_byte_left_of_the_trusted_entry_does_not_lift_the_limit() {
    type Line = fn(u8) -> Vec<u8>;
    let cases: [(&str, Line, &str); 3] = [
        (
            "x-forwarded-for",
            |i| [format!("6.6.9.{i}").as_bytes(), &b"\xff, 198.51.100.41"[..]].concat(),
            "198.51.100.41",
        ),
        (
            "forwarded",
            |i| {
                [
                    format!("for=6.6.9.{i}").as_bytes(),
                    &b"\xff, for=198.51.100.50"[..],
                ]
                .concat()
            },
            "198.51.100.50",
        ),
        // An unclosed quote whose backslash escapes the 0xff, left of a quoted IPv6 entry with
        // a port: read left to right, the quote would swallow the proxy's entry.
        (
            "forwarded",
            |i| {
                [
                    format!("for=\"6.6.9.{i}\\").as_bytes(),
                    &b"\xff;, For=\"[2001:db8:cafe::17]:4711\";proto=https"[..],
                ]
                .concat()
            },
            "2001:db8:cafe::",
        ),
    ];
    for (name, line, key) in cases {
        let limiter = limiter(Quota::per_hour(5).unwrap());
        let header = if name == "forwarded" {
            ForwardedHeader::Forwarded
        } else {
            ForwardedHeader::XForwardedFor
        };
        let client_ip = ClientIp::trusted_proxies(["127.0.0.1/32".parse().unwrap()]).header(header);
        let app = hello_routes().layer(
            RateLimitLayer::with_limiters(client_ip)
                .limiter(limiter.clone())
                .on_key_error(OnKeyError::Allow)
                .build()
                .unwrap(),
        );
        let addr = serve_axum(app).await;
        let client = client();
        let mut statuses = Vec::new();
        for i in 0..20 {
            let value = line(i);
            let res = send_bytes(&client, addr, "GET", "/a", &[(name, &value)]).await;
            statuses.push(res.status.as_u16());
        }
        let want: Vec<u16> = [200; 5].into_iter().chain([429; 15]).collect();
        assert_eq!(statuses, want, "{name}");
        assert_eq!(limiter.len(), 1, "{name}");
        assert_eq!(limiter.peek(&key.parse().unwrap()).remaining, 0, "{name}");
    }
}

/// The default `OnKeyError` fails closed: a request whose client position holds no address
/// (here a trusted proxy's `for=unknown`) is answered 400 and never reaches the handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_key_error_fails_closed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let app = Router::new()
        .route(
            "/a",
            get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { "a" }
            }),
        )
        .layer(
            RateLimitLayer::builder(
                ClientIp::trusted_proxies(["127.0.0.1/32".parse().unwrap()])
                    .header(ForwardedHeader::Forwarded),
            )
            .per_hour(5)
            .build()
            .unwrap(),
        );
    let addr = serve_axum(app).await;
    let client = client();
    for value in ["for=unknown", "for=192.0.2.1, for=_hidden", "proto=https"] {
        for _ in 0..3 {
            let res = send(&client, addr, "GET", "/a", &[("forwarded", value)]).await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{value}");
            assert_eq!(res.header("cache-control"), "no-store");
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_distinct_client_ips_stays_within_the_cap_and_is_swept_away() {
    // Keys go cold 1 ms after their last request (burst 1 at 1000/s); the sweeper runs every
    // 5 ms on the real clock, and the cap bounds the table exactly meanwhile.
    const CAP: usize = 200;
    let quota = Quota::per_second(1000).unwrap().with_burst(1).unwrap();
    let limiter: IpLimiter = Arc::new(
        KeyedRateLimiter::builder(quota)
            .sweep_interval(Duration::from_millis(5))
            .max_keys(std::num::NonZeroUsize::new(CAP).unwrap())
            .when_full(WhenFull::Deny)
            .build(),
    );
    let trusted: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
    let app = hello_routes().layer(
        RateLimitLayer::with_limiters(ClientIp::trusted_proxies(trusted))
            .limiter(limiter.clone())
            .build()
            .unwrap(),
    );
    let addr = serve_axum(app).await;
    let client = client();
    let most = Arc::new(AtomicUsize::new(0));
    // 40 concurrent senders, 5000 distinct addresses (half IPv6 /64s, half IPv4).
    let tasks: Vec<_> = (0..40u32)
        .map(|t| {
            let (client, limiter, most) = (client.clone(), limiter.clone(), most.clone());
            tokio::spawn(async move {
                for i in 0..125u32 {
                    let n = t * 125 + i;
                    let ip = if n % 2 == 0 {
                        format!("2001:db8:{:x}:{:x}::1", n >> 8, n & 0xff)
                    } else {
                        format!("10.{}.{}.{}", n >> 16, (n >> 8) & 0xff, n & 0xff)
                    };
                    let res = send(&client, addr, "GET", "/a", &[("x-forwarded-for", &ip)]).await;
                    assert!(matches!(res.status.as_u16(), 200 | 429));
                    most.fetch_max(limiter.len(), Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert!(
        most.load(Ordering::Relaxed) <= CAP,
        "table grew past the cap"
    );
    // Every key is cold within 1 ms; the background sweeper must empty the table.
    let mut waited = Duration::ZERO;
    while !limiter.is_empty() {
        assert!(
            waited < Duration::from_secs(10),
            "sweeper left {} keys",
            limiter.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += Duration::from_millis(10);
    }
    let stats = limiter.stats();
    assert!(stats.evicted >= 5000 - CAP as u64, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_and_x_headers_and_problem_json_bodies() {
    let q = Quota::per_minute(2).unwrap();
    for (style, prefix) in [(HeaderStyle::Legacy, ""), (HeaderStyle::XRateLimit, "x-")] {
        let app = hello_routes().layer(
            RateLimitLayer::with_limiters(PeerIp::new())
                .limiter(limiter(q))
                .headers(style)
                .problem_json()
                .build()
                .unwrap(),
        );
        let addr = serve_axum(app).await;
        let client = client();
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(send(&client, addr, "GET", "/a", &[]).await);
        }
        let remaining: Vec<u64> = got
            .iter()
            .map(|r| r.header_u64(&format!("{prefix}ratelimit-remaining")))
            .collect();
        assert_eq!(remaining, [1, 0, 0]);
        assert!(got
            .iter()
            .all(|r| r.header_u64(&format!("{prefix}ratelimit-limit")) == 2));
        assert!(got[0].headers.get("ratelimit-policy").is_none());
        let limited = &got[2];
        assert_eq!(limited.status, 429);
        assert_eq!(limited.header("retry-after"), "30");
        assert_eq!(limited.header(&format!("{prefix}ratelimit-reset")), "30");
        assert_eq!(limited.header("content-type"), "application/problem+json");
        let body = std::str::from_utf8(&limited.body).unwrap();
        assert!(body.starts_with(r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit \"default\" exceeded; retry after 30 s"}"#), "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_keys_and_key_error_policies() {
    let api_key = HeaderKey::new(HeaderName::from_static("x-api-key"));
    let keys: Arc<KeyedRateLimiter<String>> = Arc::new(
        KeyedRateLimiter::builder(Quota::per_minute(1).unwrap())
            .clock(ManualClock::new())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    );
    let strict = RateLimitLayer::with_limiters(api_key.clone())
        .limiter(keys.clone())
        .build()
        .unwrap();
    let lenient = RateLimitLayer::with_limiters(api_key)
        .limiter(keys.clone())
        .on_key_error(OnKeyError::Allow)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/strict", get(|| async { "s" }).layer(strict))
        .route("/lenient", get(|| async { "l" }).layer(lenient));
    let addr = serve_axum(app).await;
    let c = client();
    let key1 = [("x-api-key", "k1")];
    assert_eq!(send(&c, addr, "GET", "/strict", &key1).await.status, 200);
    assert_eq!(send(&c, addr, "GET", "/strict", &key1).await.status, 429);
    // The other route's layer shares the limiter: k1 is used up there too.
    assert_eq!(send(&c, addr, "GET", "/lenient", &key1).await.status, 429);
    assert_eq!(
        send(&c, addr, "GET", "/strict", &[("x-api-key", "k2")])
            .await
            .status,
        200
    );
    let missing = send(&c, addr, "GET", "/strict", &[]).await;
    assert_eq!(missing.status, 400);
    assert_eq!(missing.header("cache-control"), "no-store");
    assert_eq!(send(&c, addr, "GET", "/lenient", &[]).await.status, 200);
    assert_eq!(keys.len(), 2);
}

/// A login handler that holds every request until the test releases it, then fails it.
fn login_app(
    layer: RateLimitLayer<tollgate::http::Backends<KeyedRateLimiter<IpAddr>>>,
    entered: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
    status: StatusCode,
) -> Router {
    Router::new()
        .route(
            "/login",
            post(move || {
                let (entered, gate) = (entered.clone(), gate.clone());
                async move {
                    entered.fetch_add(1, Ordering::SeqCst);
                    let _permit = gate.acquire().await.unwrap();
                    status
                }
            }),
        )
        .layer(layer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_aware_mode_takes_permits_before_the_handler() {
    // 50 simultaneous login attempts, burst 5: the permits are taken before the handler runs,
    // so only 5 reach it while they are all in flight.
    let limiter = limiter(Quota::per_minute(5).unwrap());
    let layer = RateLimitLayer::with_limiters(PeerIp::new())
        .route_limiter("login", "POST /login", limiter.clone())
        .refund_if(|res| res.status.is_success())
        .build()
        .unwrap();
    let (entered, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    let addr = serve_axum(login_app(
        layer,
        entered.clone(),
        gate.clone(),
        StatusCode::UNAUTHORIZED,
    ))
    .await;
    let c = client();
    let refused = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (c, refused) = (c.clone(), refused.clone());
            tokio::spawn(async move {
                let status = send(&c, addr, "POST", "/login", &[]).await.status;
                if status == StatusCode::TOO_MANY_REQUESTS {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                status
            })
        })
        .collect();
    // Wait (bounded) until every request was either refused or is in the handler.
    let mut waited = Duration::ZERO;
    while refused.load(Ordering::SeqCst) + entered.load(Ordering::SeqCst) < 50 {
        assert!(
            waited < Duration::from_secs(20),
            "requests neither refused nor admitted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += Duration::from_millis(10);
    }
    assert_eq!(entered.load(Ordering::SeqCst), 5);
    assert_eq!(refused.load(Ordering::SeqCst), 45);
    gate.add_permits(50);
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap().as_u16());
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 401).count(), 5);
    // Failed logins count: the key is used up.
    assert_eq!(limiter.peek(&localhost()).remaining, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_aware_mode_counts_only_failed_logins() {
    let limiter = limiter(Quota::per_minute(3).unwrap());
    let ok = |layer| {
        let gate = Arc::new(Semaphore::new(1000));
        login_app(layer, Arc::new(AtomicUsize::new(0)), gate, StatusCode::OK)
    };
    let layer = || {
        RateLimitLayer::with_limiters(PeerIp::new())
            .route_limiter("login", "POST /login", limiter.clone())
            .refund_if(|res| res.status.is_success())
            .build()
            .unwrap()
    };
    let succeeding = serve_axum(ok(layer())).await;
    let failing = serve_axum(login_app(
        layer(),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Semaphore::new(1000)),
        StatusCode::UNAUTHORIZED,
    ))
    .await;
    let c = client();
    for _ in 0..10 {
        assert_eq!(
            send(&c, succeeding, "POST", "/login", &[]).await.status,
            200
        );
    }
    assert_eq!(
        limiter.peek(&localhost()).remaining,
        3,
        "successes were refunded"
    );
    for _ in 0..3 {
        assert_eq!(send(&c, failing, "POST", "/login", &[]).await.status, 401);
    }
    assert_eq!(send(&c, failing, "POST", "/login", &[]).await.status, 429);
}

/// Two `X-Api-Key` lines are ambiguous: a layer in front that checks the last one would let a
/// client rotate the first for a fresh bucket each time. The key extractor refuses such a
/// request as a key error (400 by default; `OnKeyError` decides), so rotation buys nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_header_is_a_key_error_not_a_fresh_bucket() {
    let keys: Arc<KeyedRateLimiter<String>> = Arc::new(
        KeyedRateLimiter::builder(Quota::per_minute(1).unwrap())
            .clock(ManualClock::new())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let runs = runs.clone();
        move || {
            runs.fetch_add(1, Ordering::SeqCst);
            std::future::ready("ok")
        }
    };
    let app = Router::new().route("/", get(handler)).layer(
        RateLimitLayer::with_limiters(HeaderKey::new(HeaderName::from_static("x-api-key")))
            .limiter(keys.clone())
            .build()
            .unwrap(),
    );
    let addr = serve_axum(app).await;
    let c = client();
    let real = ("x-api-key", "real");
    assert_eq!(send(&c, addr, "GET", "/", &[real]).await.status, 200);
    assert_eq!(send(&c, addr, "GET", "/", &[real]).await.status, 429);
    let mut got = Vec::new();
    for i in 0..5 {
        let rotated = format!("rotated-{i}");
        let res = send(&c, addr, "GET", "/", &[("x-api-key", &rotated), real]).await;
        got.push(res.status.as_u16());
    }
    assert_eq!(got, [400; 5]);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the handler ran past the limit"
    );
    assert_eq!(keys.len(), 1, "a rotated first line made a bucket");
}

/// Behind a CDN that sets one client-address header: each client gets its own bucket, a
/// client cannot pick its key by sending the header itself (the CDN replaces it; here, a
/// request that does not come from a trusted address is keyed by its peer), and a value the
/// CDN appended to instead of replacing is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdn_client_address_header_keys_each_client_from_trusted_peers_only() {
    for (header, name) in [
        (ForwardedHeader::CfConnectingIp, "cf-connecting-ip"),
        (ForwardedHeader::TrueClientIp, "true-client-ip"),
        (ForwardedHeader::FlyClientIp, "fly-client-ip"),
        (ForwardedHeader::XRealIp, "x-real-ip"),
    ] {
        // The test client connects from loopback: it plays the CDN's edge.
        let cdn: IpNet = "127.0.0.0/8".parse().unwrap();
        let layer = RateLimitLayer::builder(ClientIp::trusted_proxies([cdn]).header(header))
            .quota(Quota::per_hour(2).unwrap())
            .build()
            .unwrap();
        let addr = serve_axum(hello_routes().layer(layer)).await;
        let client = client();
        let mut statuses = Vec::new();
        for who in [
            "203.0.113.1",
            "203.0.113.1",
            "203.0.113.1",
            "203.0.113.2",
            "[2001:db8::1]:443",
        ] {
            statuses.push(
                send(&client, addr, "GET", "/a", &[(name, who)])
                    .await
                    .status
                    .as_u16(),
            );
        }
        assert_eq!(statuses, [200, 200, 429, 200, 200], "{name}");
        // A list is not an address: refused, not keyed by either part.
        let got = send(
            &client,
            addr,
            "GET",
            "/a",
            &[(name, "203.0.113.3, 203.0.113.4")],
        )
        .await;
        assert_eq!(got.status, StatusCode::BAD_REQUEST, "{name}");
        // The forwarding lists are not read.
        let got = send(
            &client,
            addr,
            "GET",
            "/a",
            &[(name, "203.0.113.1"), ("x-forwarded-for", "198.51.100.9")],
        )
        .await;
        assert_eq!(got.status, StatusCode::TOO_MANY_REQUESTS, "{name}");

        // The same layer trusting another network: loopback is not the CDN, so the header
        // is ignored and every request is the peer's, whatever it claims.
        let elsewhere: IpNet = "192.0.2.0/24".parse().unwrap();
        let layer = RateLimitLayer::builder(ClientIp::trusted_proxies([elsewhere]).header(header))
            .quota(Quota::per_hour(2).unwrap())
            .build()
            .unwrap();
        let addr = serve_axum(hello_routes().layer(layer)).await;
        let mut statuses = Vec::new();
        for who in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
            statuses.push(
                send(&client, addr, "GET", "/a", &[(name, who)])
                    .await
                    .status
                    .as_u16(),
            );
        }
        assert_eq!(
            statuses,
            [200, 200, 429],
            "{name}: rotating the header bypassed the limit"
        );
    }
}

/// The reason the IP extractors give when a request carries no peer address.
const NO_PEER: &str = "no peer address: serve with axum's ConnectInfo<SocketAddr> or insert the peer's SocketAddr as a request extension";

/// Served without `ConnectInfo`, a layer keyed by `PeerIp` cannot key any request: every one
/// is a `500` that says why and how to fix it (the problem+json `detail`; with the default
/// empty bodies, the `Tollgate-Error` header), counted as `misconfigured` apart from the
/// clients' `key_errors`. The handler never runs; with `OnKeyError::Allow` it does, and the
/// misconfiguration is counted all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_connect_info_a_peer_key_is_a_500_that_says_why() {
    use http_support::serve_axum_without_connect_info;

    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let handler = get(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async { "a" }
    });
    let json = RateLimitLayer::builder(PeerIp::new())
        .per_hour(5)
        .problem_json()
        .build()
        .unwrap();
    let empty = RateLimitLayer::builder(PeerIp::new())
        .per_hour(5)
        .build()
        .unwrap();
    let open = RateLimitLayer::builder(PeerIp::new())
        .per_hour(5)
        .on_key_error(OnKeyError::Allow)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/json", handler.clone().layer(json.clone()))
        .route("/empty", handler.clone().layer(empty.clone()))
        .route("/open", handler.layer(open.clone()));
    let addr = serve_axum_without_connect_info(app).await;
    let c = client();
    for _ in 0..3 {
        let res = send(&c, addr, "GET", "/json", &[]).await;
        assert_eq!(res.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(res.header("content-type"), "application/problem+json");
        assert_eq!(res.header("cache-control"), "no-store");
        assert_eq!(res.header("tollgate-error"), NO_PEER);
        let body = std::str::from_utf8(&res.body).unwrap();
        assert_eq!(
            body,
            format!(
                r#"{{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"{NO_PEER}"}}"#
            )
        );

        let res = send(&c, addr, "GET", "/empty", &[]).await;
        assert_eq!(res.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(res.body.is_empty());
        assert_eq!(res.header("tollgate-error"), NO_PEER);

        let res = send(&c, addr, "GET", "/open", &[]).await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.headers.get("tollgate-error").is_none());
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let stats = [
        &json.stats("default"),
        &empty.stats("default"),
        &open.stats("default"),
    ];
    for stats in stats.map(|s| s.unwrap()) {
        assert_eq!((stats.misconfigured, stats.key_errors), (3, 0), "{stats:?}");
        assert_eq!(stats.total(), 3);
    }
}

/// `X-Forwarded-For: unknown` from a trusted proxy is the client's key error: a `400` that
/// names the reason (header and problem+json `detail`), counted in `key_errors`, not as a
/// misconfiguration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_forwarded_for_from_a_trusted_peer_is_a_400_that_says_why() {
    let layer =
        RateLimitLayer::builder(ClientIp::trusted_proxies(["127.0.0.1/32".parse().unwrap()]))
            .per_hour(5)
            .problem_json()
            .build()
            .unwrap();
    let addr = serve_axum(hello_routes().layer(layer.clone())).await;
    let c = client();
    let reason =
        "the forwarding header has an entry that is not an IP address where the client is expected";
    for _ in 0..3 {
        let res = send(&c, addr, "GET", "/a", &[("x-forwarded-for", "unknown")]).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(res.header("tollgate-error"), reason);
        let body = std::str::from_utf8(&res.body).unwrap();
        assert!(body.contains(&format!(r#""detail":"{reason}""#)), "{body}");
        assert!(
            !body.contains("unknown"),
            "request data in the body: {body}"
        );
    }
    let stats = layer.stats("default").unwrap();
    assert_eq!((stats.key_errors, stats.misconfigured), (3, 0), "{stats:?}");
}
