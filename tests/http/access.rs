//! Allow and deny lists under a real axum server on 127.0.0.1:0.
//!
//! The test client connects from loopback and plays the trusted proxy: it appends the client
//! address as the rightmost `X-Forwarded-For` entry, which is how these tests vary the client
//! address the lists see. Limiters run on a `ManualClock` never advanced: counts, not timings.

#[path = "support/mod.rs"]
mod http_support;

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use http_support::{client, send, serve_axum};
use tollgate::http::{
    AccessList, BuildError, ClientIp, HeaderKey, HeaderName, IpNet, PeerIp, RateLimitLayer,
    StatusCode,
};
use tollgate::{KeyedRateLimiter, ManualClock, Quota};

fn limiter(quota: Quota) -> Arc<KeyedRateLimiter<IpAddr>> {
    Arc::new(
        KeyedRateLimiter::builder(quota)
            .clock(ManualClock::new())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    )
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn behind_loopback_proxy() -> ClientIp {
    ClientIp::trusted_proxies([net("127.0.0.0/8")])
}

/// Routes that count the requests reaching a handler.
fn counted(handled: Arc<AtomicUsize>) -> Router {
    let h = move || {
        let handled = Arc::clone(&handled);
        async move {
            handled.fetch_add(1, Ordering::Relaxed);
            "ok"
        }
    };
    Router::new()
        .route("/a", get(h.clone()))
        .route("/healthz", get(h.clone()))
        .route("/login", get(h))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_listed_network_is_never_limited_while_its_neighbour_is() {
    let per_ip = limiter(Quota::per_minute(3).unwrap());
    let layer = RateLimitLayer::with_limiters(behind_loopback_proxy())
        .limiter(per_ip.clone())
        .access(AccessList::new().allow_networks([net("198.51.100.0/25"), net("2001:db8::/64")]))
        .build()
        .unwrap();
    let handled = Arc::new(AtomicUsize::new(0));
    let addr = serve_axum(counted(handled.clone()).layer(layer.clone())).await;
    let client = client();
    let statuses = |xff: &'static str, n: usize| {
        let client = client.clone();
        async move {
            let mut out = Vec::new();
            for _ in 0..n {
                let res = send(&client, addr, "GET", "/a", &[("x-forwarded-for", xff)]).await;
                // An allowed request runs no limiter: no rate-limit headers either.
                if res.status == StatusCode::OK && res.headers.contains_key("ratelimit") {
                    out.push(0);
                } else {
                    out.push(res.status.as_u16());
                }
            }
            out
        }
    };
    // Inside the /25 (its last address, an IPv4-mapped spelling, and an IPv6 /64): never
    // limited, no headers.
    for inside in [
        "198.51.100.127",
        "198.51.100.0",
        "::ffff:198.51.100.5",
        "[2001:db8::ffff]:443",
    ] {
        assert_eq!(statuses(inside, 20).await, vec![200; 20], "{inside}");
    }
    // The neighbours on either side: limited (3 a minute, with headers), then refused.
    for neighbour in ["198.51.100.128", "198.51.99.255", "[2001:db8:0:1::]:443"] {
        let got = statuses(neighbour, 5).await;
        assert_eq!(got, [0, 0, 0, 429, 429], "{neighbour}");
    }
    // A client writing an allow-listed address left of what the proxy appended gains
    // nothing: the lists judge the same trusted address the key comes from.
    let spoof = statuses("198.51.100.1, 203.0.113.9", 5).await;
    assert_eq!(spoof, [0, 0, 0, 429, 429]);

    assert_eq!(handled.load(Ordering::Relaxed), 4 * 20 + 3 * 3 + 3);
    assert_eq!(per_ip.len(), 4, "only the limited clients are tracked");
    let stats = layer.stats("default").unwrap();
    assert_eq!(
        (stats.bypassed, stats.allowed, stats.refused, stats.denied),
        (80, 12, 8, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_list_answers_403_before_any_limiter_and_wins_over_allow() {
    let per_ip = limiter(Quota::per_minute(100).unwrap());
    let layer = RateLimitLayer::with_limiters(behind_loopback_proxy())
        .route_limiter("login", "GET /login", per_ip.clone())
        .access(
            AccessList::new()
                .allow_networks([net("198.51.100.0/24")])
                .allow_if(|req| req.uri.path() == "/healthz")
                .deny_networks([net("198.51.100.64/26")])
                .deny_if(|req| req.headers.contains_key("x-bad-bot")),
        )
        .problem_json()
        .build()
        .unwrap();
    let handled = Arc::new(AtomicUsize::new(0));
    let addr = serve_axum(counted(handled.clone()).layer(layer.clone())).await;
    let client = client();

    // Denied inside the allowed /24, on a limited route and on one no policy covers.
    for path in ["/login", "/a", "/healthz"] {
        let res = send(
            &client,
            addr,
            "GET",
            path,
            &[("x-forwarded-for", "198.51.100.70")],
        )
        .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(res.header("content-type"), "application/problem+json");
        assert_eq!(res.header("cache-control"), "no-store");
        let body = std::str::from_utf8(&res.body).unwrap();
        assert!(
            body.contains(r#""status":403"#) && body.contains("deny list"),
            "{body}"
        );
    }
    // A request rule denies too, whatever the address.
    let res = send(
        &client,
        addr,
        "GET",
        "/login",
        &[("x-forwarded-for", "198.51.100.1"), ("x-bad-bot", "1")],
    )
    .await;
    assert_eq!(res.status, StatusCode::FORBIDDEN);
    assert_eq!(handled.load(Ordering::Relaxed), 0);
    assert_eq!(per_ip.len(), 0, "no limiter ran");

    // The rest of the /24, and health checks from anywhere, are allowed.
    for xff in ["198.51.100.63", "198.51.100.128", "203.0.113.1"] {
        let path = if xff.starts_with("203") {
            "/healthz"
        } else {
            "/login"
        };
        let res = send(&client, addr, "GET", path, &[("x-forwarded-for", xff)]).await;
        assert_eq!(res.status, StatusCode::OK, "{xff}");
    }
    assert_eq!(per_ip.len(), 0);
    let login = layer.stats("login").unwrap();
    assert_eq!((login.denied, login.bypassed, login.allowed), (2, 2, 0));
    let unmatched = layer.unmatched_stats();
    assert_eq!((unmatched.denied, unmatched.bypassed), (2, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_has_lists_of_its_own_and_key_rules_see_the_key() {
    let by_key = |quota| {
        Arc::new(
            KeyedRateLimiter::<String>::builder(quota)
                .clock(ManualClock::new())
                .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
                .build(),
        )
    };
    let layer = RateLimitLayer::with_limiters(HeaderKey::new(HeaderName::from_static("x-api-key")))
        .limiter(by_key(Quota::per_minute(2).unwrap()))
        .route_limiter("login", "GET /login", by_key(Quota::per_minute(1).unwrap()))
        .access_addr(behind_loopback_proxy())
        .access(AccessList::new().deny_key(|key: &String| key == "revoked"))
        .policy_access(
            "login",
            AccessList::new()
                .allow_key(|key: &String| key.starts_with("internal-"))
                .deny_networks([net("192.0.2.0/24")]),
        )
        .build()
        .unwrap();
    let addr = serve_axum(counted(Arc::new(AtomicUsize::new(0))).layer(layer.clone())).await;
    let client = client();
    let status = |path: &'static str, key: &'static str, xff: &'static str| {
        let client = client.clone();
        async move {
            let headers = [("x-api-key", key), ("x-forwarded-for", xff)];
            send(&client, addr, "GET", path, &headers)
                .await
                .status
                .as_u16()
        }
    };
    let mut login = Vec::new();
    let mut other = Vec::new();
    for _ in 0..3 {
        login.push(status("/login", "internal-ci", "203.0.113.1").await);
        other.push(status("/a", "internal-ci", "203.0.113.1").await);
    }
    // The allow rule is the login policy's only; the default limits the same key.
    assert_eq!(login, [200, 200, 200]);
    assert_eq!(other, [200, 200, 429]);
    // The layer's deny rule covers every policy; the login policy's networks only login.
    assert_eq!(status("/a", "revoked", "203.0.113.1").await, 403);
    assert_eq!(status("/login", "revoked", "203.0.113.1").await, 403);
    assert_eq!(status("/login", "internal-ci", "192.0.2.1").await, 403);
    assert_eq!(status("/a", "k-1", "192.0.2.1").await, 200);
}

#[test]
fn lists_that_cannot_work_are_refused_at_build() {
    let everyone = |nets: &[&str]| AccessList::new().allow_networks(nets.iter().map(|n| net(n)));
    for all in [
        &["0.0.0.0/0"][..],
        &["::/0"],
        &["::ffff:0.0.0.0/96"],
        &["0.0.0.0/1", "128.0.0.0/1"],
    ] {
        let err = RateLimitLayer::builder(PeerIp::new())
            .per_second(5)
            .access(everyone(all))
            .build()
            .unwrap_err();
        assert_eq!(
            err,
            BuildError::AllowsEveryAddress("the layer".into()),
            "{all:?}"
        );
        let err = RateLimitLayer::builder(PeerIp::new())
            .per_second(5)
            .policy_access("default", everyone(all))
            .build()
            .unwrap_err();
        assert_eq!(
            err,
            BuildError::AllowsEveryAddress("policy \"default\"".into())
        );
        assert!(RateLimitLayer::builder(PeerIp::new())
            .per_second(5)
            .access(everyone(all).confirm_allow_all())
            .build()
            .is_ok());
    }
    // Networks need an address: an API-key layer has none unless given one.
    let by_key = || RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")));
    let denied = || AccessList::new().deny_networks([net("192.0.2.0/24")]);
    let err = by_key().per_second(5).access(denied()).build().unwrap_err();
    assert_eq!(err, BuildError::NoClientAddr);
    assert!(by_key()
        .per_second(5)
        .access_addr(PeerIp::new())
        .access(denied())
        .build()
        .is_ok());
    // Key rules need no address.
    assert!(by_key()
        .per_second(5)
        .access(AccessList::new().deny_key(|k: &String| k.is_empty()))
        .build()
        .is_ok());
    let err = RateLimitLayer::builder(PeerIp::new())
        .per_second(5)
        .policy_access("login", AccessList::new())
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::UnknownPolicy("login".into()));
}
