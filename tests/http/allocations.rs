//! Heap allocations the layer adds to an allowed request, counted by a counting global
//! allocator: the same axum app called in process with and without the layer, the difference
//! per request. An allocation count is deterministic (no timing), so the bounds are exact: a
//! change that allocates more on the allowed path fails here, and a bench says what it costs.
//!
//! Its own test binary, since the counting allocator is global; counts are per thread, so
//! other threads (the test harness's) are not counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use http::Request;
use tollgate::http::{HeaderStyle, PeerIp, RateLimitLayer};
use tollgate::Quota;
use tower::util::MapResponseLayer;
use tower::{Service, ServiceBuilder};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the allocator runs during thread teardown too.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded to `System` unchanged; counting touches no heap.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Requests counted per app, after a warm-up (the key's first request inserts it).
const REQUESTS: u64 = 1000;

/// Polls `fut` once: everything on the allowed path here is ready at once (an in-memory
/// limiter, a handler with nothing to wait for).
fn now<F: Future>(fut: F) -> F::Output {
    match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the allowed path waited"),
    }
}

/// Allocations per request of `app`, `REQUESTS` sequential requests from one peer (the
/// request's own making included: it is the same for every app compared).
fn per_request(app: Router) -> u64 {
    let peer = ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000)));
    let mut svc = app;
    let one = |svc: &mut Router| {
        let mut req = Request::get("/").body(axum::body::Body::empty()).unwrap();
        req.extensions_mut().insert(peer);
        now(std::future::poll_fn(|cx| {
            Service::<Request<axum::body::Body>>::poll_ready(svc, cx)
        }))
        .unwrap();
        let res = now(svc.call(req)).unwrap();
        assert_eq!(res.status(), 200);
    };
    for _ in 0..10 {
        one(&mut svc);
    }
    let before = ALLOCATIONS.with(Cell::get);
    for _ in 0..REQUESTS {
        one(&mut svc);
    }
    let total = ALLOCATIONS.with(Cell::get) - before;
    assert_eq!(total % REQUESTS, 0, "not the same count every request");
    total / REQUESTS
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

/// The app with the layer (as one layer, or `stacked` as its access and rate layers), at a
/// quota no run comes near.
fn limited(style: HeaderStyle, stacked: bool) -> Router {
    let layer = RateLimitLayer::builder(PeerIp::new())
        .quota(Quota::per_second(1_000_000).unwrap())
        .headers(style)
        .build()
        .unwrap();
    if stacked {
        hello().layer(
            ServiceBuilder::new()
                .layer(layer.access_layer())
                .layer(layer.rate_layer()),
        )
    } else {
        hello().layer(layer)
    }
}

/// What the layer adds per allowed request, over a layer with state that passes the response
/// on unchanged (axum boxes a layered route's service, its future and a clone of the layer: a
/// few allocations any such layer costs, and all that tower_governor adds): with its default IETF headers, only the `RateLimit`
/// field's value (its numbers change from request to request; `RateLimit-Policy` is made once
/// per policy); without headers nothing; as separate access and rate layers, the hand-off's
/// request extension too; the older single-valued styles, only numbers of 1000 and more
/// (here the limit and the remainder; smaller ones are static).
#[test]
fn the_allowed_path_allocates_only_what_the_response_carries() {
    // With state (an `Arc`, as every layer here holds): axum boxes a clone of the layer per
    // request, which a stateless one would not need.
    let state = Arc::new(());
    let passthrough = per_request(hello().layer(MapResponseLayer::new(move |res| {
        let _ = &state;
        res
    })));
    let added = |style, stacked| per_request(limited(style, stacked)) - passthrough;
    let ietf = added(HeaderStyle::Ietf, false);
    let none = added(HeaderStyle::None, false);
    let stacked = added(HeaderStyle::Ietf, true);
    let legacy = added(HeaderStyle::Legacy, false);
    println!(
        "passthrough layer {passthrough}, no layer {}; added: IETF {ietf}, none {none}, \
         stacked {stacked}, legacy {legacy}",
        per_request(hello())
    );
    assert_eq!((ietf, none, stacked, legacy), (1, 0, 2, 2));
}
