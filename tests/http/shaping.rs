//! Shaping mode under tokio's paused time, where every grant instant is exact: requests wait
//! for their slot in arrival order up to the maximum delay, and a client that disconnects
//! while waiting gives its slot to the next request.

#[path = "support/mod.rs"]
mod http_support;

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_support::{burst, client, get, serve_hyper};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;
use tollgate::http::{GlobalKey, PeerIp, RateLimitLayer, StatusCode};
use tollgate::{KeyedRateLimiter, Quota, TokioClock};
use tower::{Layer, ServiceExt};

const T: Duration = Duration::from_millis(100);

/// 10 per second, burst 1: one slot every 100 ms, on tokio's (paused) clock.
fn paced<K: std::hash::Hash + Eq + Send + Sync + 'static>() -> Arc<KeyedRateLimiter<K>> {
    let q = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    Arc::new(
        KeyedRateLimiter::builder(q)
            .clock(TokioClock::new())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    )
}

#[tokio::test(start_paused = true)]
async fn requests_wait_for_their_slot_in_arrival_order_up_to_the_bound() {
    let limiter = paced::<()>();
    let layer = RateLimitLayer::with_limiters(GlobalKey)
        .limiter(limiter.clone())
        .shape(Duration::from_secs(1))
        .build()
        .unwrap();
    let start = Instant::now();
    // Each request takes its slot before the next one arrives.
    for (i, (status, at, retry)) in burst(layer, 14).await.into_iter().enumerate() {
        if i <= 10 {
            // Slot i is at i * 100 ms: the 11th waits exactly the bound of 1 s.
            assert_eq!(
                (status, at, retry),
                (StatusCode::OK, T * i as u32, None),
                "request {i}"
            );
        } else {
            // It would wait 1.1 s: refused at once, nothing taken, told to come back in 2 s.
            assert_eq!(
                (status, at, retry.as_deref()),
                (StatusCode::TOO_MANY_REQUESTS, Duration::ZERO, Some("2")),
                "request {i}"
            );
        }
    }
    // Eleven slots were taken and nothing else: the last one ends at 1.1 s.
    assert_eq!(limiter.peek(&()).reset_after, T);
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

async fn hello(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// Yields (without letting paused time advance) until `done` holds; bounded.
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached");
}

#[tokio::test(start_paused = true)]
async fn a_client_that_disconnects_while_waiting_gives_its_slot_to_the_next() {
    let limiter = paced::<IpAddr>();
    let layer = RateLimitLayer::with_limiters(PeerIp::new())
        .limiter(limiter.clone())
        .shape(Duration::from_secs(5))
        .build()
        .unwrap();
    let service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(hello));
    let addr = serve_hyper(service).await;
    let me: IpAddr = "127.0.0.1".parse().unwrap();
    let start = Instant::now();
    let c = client();

    // A takes the only permit at once.
    assert_eq!(get(&c, addr, "/").await.status, 200);
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(limiter.peek(&me).reset_after, T);

    // B sends a request and waits for the slot at 100 ms...
    let mut b = tokio::net::TcpStream::connect(addr).await.unwrap();
    b.write_all(b"GET / HTTP/1.1\r\nhost: b\r\n\r\n")
        .await
        .unwrap();
    until(|| limiter.peek(&me).reset_after == 2 * T).await;
    // ...and hangs up. The server drops B's future, which cancels its reservation.
    drop(b);
    until(|| limiter.peek(&me).reset_after == T).await;
    assert_eq!(start.elapsed(), Duration::ZERO);

    // C gets B's slot at 100 ms (without the refund it would wait until 200 ms).
    assert_eq!(get(&c, addr, "/").await.status, 200);
    assert_eq!(start.elapsed(), T);
}

#[tokio::test(start_paused = true)]
async fn a_cost_no_wait_within_the_bound_can_serve_is_refused_without_retry_after() {
    // Burst 1 at 10/s: 3 permits need 200 ms even from a full bucket.
    let service = |max: Duration| {
        let layer = RateLimitLayer::with_limiters(GlobalKey)
            .limiter(paced::<()>())
            .cost(|_| 3)
            .shape(max)
            .build()
            .unwrap();
        layer.layer(tower::service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }))
    };
    let start = Instant::now();
    let res = service(T).oneshot(Request::new(())).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().get("retry-after").is_none());
    assert_eq!(start.elapsed(), Duration::ZERO);
    // With room to wait, the same request is shaped: served after 200 ms.
    let res = service(3 * T).oneshot(Request::new(())).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), 2 * T);
}
