//! The layer on plain hyper (no axum): hyper-util's server and client over loopback, the
//! peer address given as a `SocketAddr` request extension, `Full<Bytes>` bodies.

#[path = "support/mod.rs"]
mod http_support;

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_support::{client, get, serve_hyper};
use tollgate::http::{PeerIp, RateLimitLayerBuilder};
use tollgate::{KeyedRateLimiter, ManualClock, Quota};

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
    let layer = RateLimitLayerBuilder::new(PeerIp::new())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_hyper_without_a_peer_address_is_a_server_error() {
    let layer = RateLimitLayerBuilder::new(PeerIp::new())
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
