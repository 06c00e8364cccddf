//! The HTTP layer's concurrency mode over a real axum server on loopback: a
//! streaming route with a per-key limit of 2 never has more than 2 bodies in flight (counted
//! by the bodies themselves, with an atomic high-water mark); the third concurrent request is
//! refused with the configured status and a problem+json body; a client that disconnects
//! mid-body frees its permit; keys are independent; a rate limit stacked in the same layer
//! or as a second layer (both orders) applies too; and the crate's own keyed concurrency
//! limiter behind the layer holds the permits and takes a new limit live.
//!
//! The concurrency backend lives here, outside the library, on its public API only
//! (`ConcurrencyBackend`): per-key counters under a mutex, whose total of held permits the
//! tests watch.

#[path = "support/mod.rs"]
mod http_support;

use std::collections::HashMap;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Empty};
use http_support::{client, send, serve_axum, Got, HttpClient, DEADLINE};
use tokio::sync::{mpsc, watch};
use tollgate::http::{
    BuildError, Busy, ConcurrencyBackend, HeaderKey, HeaderName, PermitBody, RateLimitLayer,
};

/// At most `limit` permits per key: per-key counters under one lock. A key is forgotten once
/// it holds nothing, so the table is bounded by what is in flight. `held` reports the total
/// held over all keys after every change.
struct Counters<K> {
    limit: u64,
    keys: Mutex<HashMap<K, u64>>,
    held: watch::Sender<u64>,
}

impl<K: Hash + Eq + Clone> Counters<K> {
    fn new(limit: u64) -> Arc<Self> {
        Arc::new(Counters {
            limit,
            keys: Mutex::new(HashMap::new()),
            held: watch::channel(0).0,
        })
    }

    fn in_flight(&self, key: &K) -> u64 {
        self.keys.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    fn tracked(&self) -> usize {
        self.keys.lock().unwrap().len()
    }
}

/// `n` permits of one key; given back on drop.
struct Slot<K: Hash + Eq + Clone> {
    counters: Arc<Counters<K>>,
    key: K,
    n: u64,
}

impl<K: Hash + Eq + Clone> Drop for Slot<K> {
    fn drop(&mut self) {
        let mut keys = self.counters.keys.lock().unwrap();
        let held = keys.get_mut(&self.key).expect("a held key is tracked");
        *held -= self.n;
        if *held == 0 {
            keys.remove(&self.key);
        }
        self.counters.held.send_modify(|total| *total -= self.n);
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> ConcurrencyBackend for Counters<K> {
    type Key = K;
    type Permit = Slot<K>;

    fn limit(&self) -> u64 {
        self.limit
    }

    fn keys_bounded(&self) -> bool {
        true
    }

    fn try_acquire_n_owned(self: &Arc<Self>, key: &K, n: u64) -> Result<Slot<K>, Busy> {
        let mut keys = self.keys.lock().unwrap();
        let held = keys.get(key).copied().unwrap_or(0);
        if self.limit.saturating_sub(held) < n {
            return Err(Busy::new(self.limit));
        }
        keys.insert(key.clone(), held + n);
        self.held.send_modify(|total| *total += n);
        Ok(Slot {
            counters: Arc::clone(self),
            key: key.clone(),
            n,
        })
    }
}

/// Bodies in flight, counted by the bodies: up when the handler makes one, down when it ends
/// or is dropped; `high` is the most ever at once.
#[derive(Clone, Default)]
struct Live {
    now: Arc<AtomicUsize>,
    high: Arc<AtomicUsize>,
}

impl Live {
    fn enter(&self) -> LiveGuard {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.high.fetch_max(n, Ordering::SeqCst);
        LiveGuard(self.clone())
    }

    fn high(&self) -> usize {
        self.high.load(Ordering::SeqCst)
    }

    fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }
}

struct LiveGuard(Live);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A streaming body whose chunks the test sends (through the sender the handler hands over),
/// ending when the test drops the sender. Leaves the live count when it ends, before it
/// reports its end (so before the layer's permit goes back), or when dropped.
struct GatedBody {
    live: Option<LiveGuard>,
    chunks: mpsc::UnboundedReceiver<Bytes>,
}

impl http_body::Body for GatedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.chunks.poll_recv(cx) {
            Poll::Ready(Some(chunk)) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            Poll::Ready(None) => {
                self.live = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A body of `chunks` chunks, each after the task yields once: a short stream that is in
/// flight across several polls.
struct YieldingBody {
    live: Option<LiveGuard>,
    chunks: u32,
    yielded: bool,
}

impl http_body::Body for YieldingBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.chunks == 0 {
            self.live = None;
            return Poll::Ready(None);
        }
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        self.chunks -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"row\n")))))
    }
}

/// The server side of the tests: `/export` streams a gated body and hands its sender to the
/// test, in arrival order; `/stream` streams a short body on its own; `/hello` is plain.
struct Export {
    live: Live,
    gates: mpsc::UnboundedReceiver<mpsc::UnboundedSender<Bytes>>,
}

fn export_routes() -> (Router, Export) {
    let live = Live::default();
    let (gates_tx, gates) = mpsc::unbounded_channel();
    let (l1, l2) = (live.clone(), live.clone());
    let router = Router::new()
        .route(
            "/export",
            get(move || {
                let (live, gates_tx) = (l1.clone(), gates_tx.clone());
                async move {
                    let (tx, chunks) = mpsc::unbounded_channel();
                    let body = GatedBody {
                        live: Some(live.enter()),
                        chunks,
                    };
                    gates_tx.send(tx).unwrap();
                    axum::body::Body::new(body)
                }
            }),
        )
        .route(
            "/stream",
            get(move || {
                let live = l2.clone();
                async move {
                    axum::body::Body::new(YieldingBody {
                        live: Some(live.enter()),
                        chunks: 3,
                        yielded: false,
                    })
                }
            }),
        )
        .route("/hello", get(|| async { "hello" }));
    (router, Export { live, gates })
}

fn x_user() -> HeaderKey {
    HeaderKey::new(HeaderName::from_static("x-user"))
}

/// A response whose head has arrived, its body still open.
type Open = http::Response<hyper::body::Incoming>;

/// Sends `GET path` as `user` and returns once the response head has arrived.
async fn open(client: &HttpClient, addr: std::net::SocketAddr, path: &str, user: &str) -> Open {
    let req = Request::get(format!("http://{addr}{path}"))
        .header("x-user", user)
        .body(Empty::<Bytes>::new())
        .unwrap();
    tokio::time::timeout(DEADLINE, client.request(req))
        .await
        .expect("request timed out")
        .expect("request failed")
}

/// Reads the rest of an open body.
async fn finish(res: Open) -> Bytes {
    tokio::time::timeout(DEADLINE, res.into_body().collect())
        .await
        .expect("body timed out")
        .expect("body failed")
        .to_bytes()
}

async fn get_as(client: &HttpClient, addr: std::net::SocketAddr, path: &str, user: &str) -> Got {
    send(client, addr, "GET", path, &[("x-user", user)]).await
}

/// The `detail` of a problem+json body (the tests' bodies hold no escaped quotes).
fn detail(got: &Got) -> String {
    assert_eq!(got.header("content-type"), "application/problem+json");
    let body = std::str::from_utf8(&got.body).unwrap();
    let start = body.find(r#""detail":""#).expect("a detail member") + 10;
    body[start..body.len() - 2].to_owned()
}

/// Waits (up to the deadline) until the permits held over all keys come down to `n`.
async fn held_comes_to(held: &mut watch::Receiver<u64>, n: u64) {
    tokio::time::timeout(DEADLINE, held.wait_for(|&h| h == n))
        .await
        .unwrap_or_else(|_| panic!("held permits never came to {n}"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_key_limit_of_two_keeps_two_bodies_in_flight_and_refuses_the_third() {
    let (router, mut export) = export_routes();
    let slots = Counters::<String>::new(2);
    let layer = RateLimitLayer::builder(x_user())
        .route_concurrency("exports", "GET /export", Arc::clone(&slots))
        .problem_json()
        .build()
        .unwrap();
    let addr = serve_axum(router.layer(layer)).await;
    let client = client();

    // Two exports whose heads have come back: the handlers have returned, the bodies stream.
    let first = open(&client, addr, "/export", "alice").await;
    let second = open(&client, addr, "/export", "alice").await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let gate1 = export.gates.recv().await.unwrap();
    let gate2 = export.gates.recv().await.unwrap();
    assert_eq!(slots.in_flight(&"alice".to_owned()), 2);

    // The third is refused: the permits are held by the bodies, not by the handlers.
    let third = get_as(&client, addr, "/export", "alice").await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(third.header("cache-control"), "no-store");
    assert!(third.headers.get("retry-after").is_none());
    assert_eq!(
        detail(&third),
        "concurrency limit \\\"exports\\\" reached: at most 2 requests in flight per client; \
         retry when one of yours has finished"
    );
    assert_eq!(export.live.high(), 2);

    // Other routes are not under the concurrency policy.
    assert_eq!(
        get_as(&client, addr, "/hello", "alice").await.status,
        StatusCode::OK
    );

    // The bodies stream to their end; then the key is free again.
    gate1.send(Bytes::from_static(b"a,b\n")).unwrap();
    gate2.send(Bytes::from_static(b"c,d\n")).unwrap();
    drop((gate1, gate2));
    assert_eq!(finish(first).await, "a,b\n");
    assert_eq!(finish(second).await, "c,d\n");
    // The permit goes back when the body reports its end, before the last chunk is written.
    assert_eq!(slots.in_flight(&"alice".to_owned()), 0);
    assert_eq!(slots.tracked(), 0);
    let again = open(&client, addr, "/export", "alice").await;
    assert_eq!(again.status(), StatusCode::OK);
    drop(export.gates.recv().await.unwrap());
    assert!(finish(again).await.is_empty());
    assert_eq!(export.live.high(), 2);
    assert_eq!(export.live.now(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_body_frees_its_permit() {
    let (router, mut export) = export_routes();
    let slots = Counters::<String>::new(2);
    let layer = RateLimitLayer::builder(x_user())
        .concurrency("in-flight", Arc::clone(&slots))
        .build()
        .unwrap();
    let addr = serve_axum(router.layer(layer)).await;
    let client = client();
    let mut held = slots.held.subscribe();

    let kept = open(&client, addr, "/export", "bob").await;
    let gone = open(&client, addr, "/export", "bob").await;
    let kept_gate = export.gates.recv().await.unwrap();
    let gone_gate = export.gates.recv().await.unwrap();
    gone_gate.send(Bytes::from_static(b"partial\n")).unwrap();
    assert_eq!(
        get_as(&client, addr, "/hello", "bob").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );

    // The client goes away with the body half read: its connection closes, the server drops
    // the body, and the permit goes back. (Chunks keep coming, so the server's next write
    // finds the connection closed even if it did not notice the close on its own.)
    drop(gone);
    tokio::time::timeout(DEADLINE, async {
        while *held.borrow_and_update() != 1 {
            let _ = gone_gate.send(Bytes::from_static(b"more\n"));
            let _ = tokio::time::timeout(Duration::from_millis(10), held.changed()).await;
        }
    })
    .await
    .expect("the disconnected client's permit never came back");
    assert!(gone_gate.is_closed(), "the server dropped the body");

    // A following request succeeds, and the kept one is untouched.
    assert_eq!(
        get_as(&client, addr, "/hello", "bob").await.status,
        StatusCode::OK
    );
    kept_gate.send(Bytes::from_static(b"all\n")).unwrap();
    drop(kept_gate);
    assert_eq!(finish(kept).await, "all\n");
    held_comes_to(&mut held, 0).await;
    assert_eq!(export.live.high(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_independent_and_the_busy_status_is_configurable() {
    let (router, mut export) = export_routes();
    let slots = Counters::<String>::new(2);
    let layer = RateLimitLayer::builder(x_user())
        .route_concurrency("exports", "GET /export", Arc::clone(&slots))
        .busy_status(StatusCode::SERVICE_UNAVAILABLE)
        .problem_json()
        .build()
        .unwrap();
    let addr = serve_axum(router.layer(layer)).await;
    let client = client();
    let mut held = slots.held.subscribe();

    let mut open_bodies = Vec::new();
    for user in ["carol", "carol", "dave", "dave"] {
        let res = open(&client, addr, "/export", user).await;
        assert_eq!(res.status(), StatusCode::OK, "{user}");
        open_bodies.push((res, export.gates.recv().await.unwrap()));
    }
    assert_eq!(export.live.now(), 4);
    for user in ["carol", "dave"] {
        let busy = get_as(&client, addr, "/export", user).await;
        assert_eq!(busy.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(detail(&busy).contains("at most 2 requests in flight"));
    }
    // A third key is not affected by the two full ones.
    let erin = open(&client, addr, "/export", "erin").await;
    assert_eq!(erin.status(), StatusCode::OK);
    drop(export.gates.recv().await.unwrap());
    assert!(finish(erin).await.is_empty());

    // Ending carol's bodies frees carol only.
    let mut rest = open_bodies.split_off(2);
    for (res, gate) in open_bodies {
        drop(gate);
        assert!(finish(res).await.is_empty());
    }
    held_comes_to(&mut held, 2).await;
    let carol = open(&client, addr, "/export", "carol").await;
    assert_eq!(carol.status(), StatusCode::OK);
    assert_eq!(
        get_as(&client, addr, "/export", "dave").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    drop(export.gates.recv().await.unwrap());
    assert!(finish(carol).await.is_empty());
    for (res, gate) in rest.drain(..) {
        drop(gate);
        assert!(finish(res).await.is_empty());
    }
    held_comes_to(&mut held, 0).await;
    assert_eq!(export.live.high(), 5); // two keys at their limit of two, and erin's
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_concurrent_streams_never_has_more_than_two_in_flight() {
    let (router, export) = export_routes();
    let slots = Counters::<String>::new(2);
    let layer = RateLimitLayer::builder(x_user())
        .concurrency("in-flight", Arc::clone(&slots))
        .problem_json()
        .build()
        .unwrap();
    let addr = serve_axum(router.layer(layer)).await;
    let client = client();

    let mut tasks = Vec::new();
    for _ in 0..32 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            get_as(&client, addr, "/stream", "frank").await
        }));
    }
    let (mut served, mut refused) = (0, 0);
    for t in tasks {
        let got = t.await.unwrap();
        match got.status {
            StatusCode::OK => {
                assert_eq!(got.body, "row\nrow\nrow\n");
                served += 1;
            }
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(detail(&got).starts_with("concurrency limit"));
                refused += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(served + refused, 32);
    assert!(served >= 1, "the first request finds the key free");
    assert!(export.live.high() <= 2, "high-water {}", export.live.high());
    assert_eq!(slots.tracked(), 0);
}

/// Which limit refused a request, from its problem+json detail.
fn refused_by(got: &Got) -> &'static str {
    let d = detail(got);
    if d.starts_with("concurrency limit") {
        "concurrency"
    } else if d.starts_with("rate limit") {
        "rate"
    } else {
        panic!("unexpected detail {d}")
    }
}

/// Against a stack of a rate limit of 3 an hour and a concurrency limit of 2 per user: two
/// open exports, a third refused for concurrency; the exports end; then requests until the
/// rate limit refuses one. Returns who refused each request after the two open ones, in order.
async fn stacked_run(router: Router, export: &mut Export) -> Vec<&'static str> {
    let addr = serve_axum(router).await;
    let client = client();
    let a = open(&client, addr, "/export", "gina").await;
    let b = open(&client, addr, "/export", "gina").await;
    assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
    // The rate limit's headers are on the wrapped response too.
    assert!(a.headers().contains_key("ratelimit"));
    let gates = [
        export.gates.recv().await.unwrap(),
        export.gates.recv().await.unwrap(),
    ];
    let mut outcomes = Vec::new();
    let third = get_as(&client, addr, "/export", "gina").await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    outcomes.push(refused_by(&third));
    drop(gates);
    assert!(finish(a).await.is_empty());
    assert!(finish(b).await.is_empty());
    for _ in 0..3 {
        let got = get_as(&client, addr, "/hello", "gina").await;
        if got.status == StatusCode::OK {
            outcomes.push("served");
            continue;
        }
        assert_eq!(got.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(got.headers.contains_key("retry-after"));
        outcomes.push(refused_by(&got));
        break;
    }
    assert_eq!(export.live.high(), 2);
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_in_the_same_layer_applies_after_the_permit() {
    let (router, mut export) = export_routes();
    let layer = RateLimitLayer::builder(x_user())
        .per_hour(3)
        .concurrency("in-flight", Counters::<String>::new(2))
        .problem_json()
        .build()
        .unwrap();
    // The concurrency refusal spent no rate permit: one more request is served after it.
    let outcomes = stacked_run(router.layer(layer), &mut export).await;
    assert_eq!(outcomes, ["concurrency", "served", "rate"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_layers_stack_in_either_order() {
    let rate = || {
        RateLimitLayer::builder(x_user())
            .per_hour(3)
            .problem_json()
            .build()
            .unwrap()
    };
    let concurrency = || {
        RateLimitLayer::builder(x_user())
            .concurrency("in-flight", Counters::<String>::new(2))
            .problem_json()
            .build()
            .unwrap()
    };

    // Concurrency outside: a request it refuses never reaches the rate limit.
    let (router, mut export) = export_routes();
    let outer_concurrency = router.layer(rate()).layer(concurrency());
    let outcomes = stacked_run(outer_concurrency, &mut export).await;
    assert_eq!(outcomes, ["concurrency", "served", "rate"]);

    // Rate outside: every request spends a rate permit first, the refused third one too. The
    // rate layer's own 429 is made in the concurrency layer's body type (`PermitBody`).
    let (router, mut export) = export_routes();
    let outer_rate = router.layer(concurrency()).layer(rate());
    let outcomes = stacked_run(outer_rate, &mut export).await;
    assert_eq!(outcomes, ["concurrency", "rate"]);
}

#[test]
fn misconfigurations_that_would_defeat_the_limit_are_refused() {
    let zero = RateLimitLayer::builder(x_user())
        .concurrency("none", Counters::<String>::new(0))
        .build();
    assert_eq!(
        zero.unwrap_err(),
        BuildError::ZeroConcurrency("none".to_owned())
    );

    let ok = RateLimitLayer::builder(x_user())
        .concurrency("x", Counters::<String>::new(1))
        .busy_status(StatusCode::NO_CONTENT)
        .build();
    assert_eq!(
        ok.unwrap_err(),
        BuildError::BusyStatus(StatusCode::NO_CONTENT)
    );

    let route = RateLimitLayer::builder(x_user())
        .route_concurrency("x", "export", Counters::<String>::new(1))
        .build();
    assert!(matches!(route, Err(BuildError::Route(_))));

    let name = RateLimitLayer::builder(x_user())
        .concurrency("say \"hi\"", Counters::<String>::new(1))
        .build();
    assert!(matches!(name, Err(BuildError::PolicyName(_))));

    /// Counters that never forget a key.
    struct Hoarder(Arc<Counters<String>>);
    impl ConcurrencyBackend for Hoarder {
        type Key = String;
        type Permit = Slot<String>;
        fn limit(&self) -> u64 {
            self.0.limit()
        }
        fn keys_bounded(&self) -> bool {
            false
        }
        fn try_acquire_n_owned(
            self: &Arc<Self>,
            key: &String,
            n: u64,
        ) -> Result<Self::Permit, Busy> {
            self.0.try_acquire_n_owned(key, n)
        }
    }
    let unbounded = Arc::new(Hoarder(Counters::new(1)));
    let refused = RateLimitLayer::builder(x_user())
        .concurrency("hoard", Arc::clone(&unbounded))
        .build();
    assert_eq!(
        refused.unwrap_err(),
        BuildError::UnboundedKeys("hoard".to_owned())
    );
    let allowed = RateLimitLayer::builder(x_user())
        .concurrency("hoard", unbounded)
        .allow_unbounded_keys()
        .build();
    assert!(allowed.is_ok());
}

#[test]
fn a_permit_body_keeps_the_inner_body_and_gives_the_permit_back_when_dropped() {
    let slots = Counters::<String>::new(1);
    let permit = slots.try_acquire_n_owned(&"h".to_owned(), 1).unwrap();
    let body: PermitBody<String, Slot<String>> = PermitBody::new("x".to_owned(), Some(permit));
    assert!(body.holds_permit());
    assert!(slots.try_acquire_n_owned(&"h".to_owned(), 1).is_err());
    drop(body);
    assert_eq!(slots.in_flight(&"h".to_owned()), 0);
    assert!(slots.try_acquire_n_owned(&"h".to_owned(), 1).is_ok());
}

/// The crate's own keyed concurrency limiter, `limit` per user, with a key cap (the layer
/// refuses one without).
fn bounded_limiter(limit: u64) -> Arc<tollgate::KeyedConcurrencyLimiter<String>> {
    Arc::new(
        tollgate::KeyedConcurrencyLimiter::builder(limit)
            .unwrap()
            .max_keys(std::num::NonZeroUsize::new(10_000).unwrap())
            .build(),
    )
}

/// The crate's own `KeyedConcurrencyLimiter` behind the layer (its `ConcurrencyBackend`
/// impl): a limit of 2 per user held by the bodies, the third refused, a client that
/// disconnects mid-body gives its permit back, and a limiter without a key cap is refused at
/// build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_keyed_concurrency_limiter_holds_permits_for_the_bodies() {
    use tollgate::KeyedConcurrencyLimiter;

    let unbounded = Arc::new(KeyedConcurrencyLimiter::<String>::new(2).unwrap());
    assert!(matches!(
        RateLimitLayer::builder(x_user())
            .concurrency("exports", unbounded)
            .build()
            .unwrap_err(),
        BuildError::UnboundedKeys(_)
    ));

    let (router, mut export) = export_routes();
    let limiter = bounded_limiter(2);
    let layer = RateLimitLayer::builder(x_user())
        .route_concurrency("exports", "GET /export", Arc::clone(&limiter))
        .problem_json()
        .build()
        .unwrap();
    let addr = serve_axum(router.layer(layer)).await;
    let client = client();
    let alice = "alice".to_owned();

    let first = open(&client, addr, "/export", "alice").await;
    let second = open(&client, addr, "/export", "alice").await;
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let gate1 = export.gates.recv().await.unwrap();
    let gate2 = export.gates.recv().await.unwrap();
    assert_eq!(limiter.in_flight(&alice), 2);
    let third = get_as(&client, addr, "/export", "alice").await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(detail(&third).starts_with("concurrency limit"));
    let bob = open(&client, addr, "/export", "bob").await;
    assert_eq!(
        bob.status(),
        StatusCode::OK,
        "another user's exports are not alice's"
    );
    drop(export.gates.recv().await.unwrap()); // bob's body ends at once
    assert!(finish(bob).await.is_empty());

    // The first client goes away mid-body: the server drops the body and the permit.
    drop(first);
    drop(gate1);
    let mut freed = false;
    for _ in 0..200 {
        if limiter.in_flight(&alice) == 1 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(freed, "in flight: {}", limiter.in_flight(&alice));
    gate2.send(Bytes::from_static(b"x\n")).unwrap();
    drop(gate2);
    assert_eq!(finish(second).await, "x\n");
    assert_eq!(limiter.in_flight(&alice), 0);
    // Alice's two and bob's one: never more.
    assert_eq!(export.live.high(), 3);
}

/// The limit of the layer's keyed concurrency limiter changed live (through the layer's
/// accessor): raised, a request the old limit refused is served; lowered, nothing in flight
/// is cut off but the next request is refused until enough bodies have ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_limit_changes_live_through_the_layer() {
    let (router, mut export) = export_routes();
    let layer = RateLimitLayer::builder(x_user())
        .route_concurrency("exports", "GET /export", bounded_limiter(1))
        .build()
        .unwrap();
    let limiter = Arc::clone(layer.concurrency_limiter("exports").unwrap());
    let addr = serve_axum(router.layer(layer)).await;
    let client = client();
    let alice = "alice".to_owned();

    let first = open(&client, addr, "/export", "alice").await;
    assert_eq!(first.status(), StatusCode::OK);
    let gate1 = export.gates.recv().await.unwrap();
    let refused = get_as(&client, addr, "/export", "alice").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);

    limiter.set_limit(2).unwrap();
    let second = open(&client, addr, "/export", "alice").await;
    assert_eq!(
        second.status(),
        StatusCode::OK,
        "served under the raised limit"
    );
    let gate2 = export.gates.recv().await.unwrap();
    assert_eq!(limiter.in_flight(&alice), 2);

    limiter.set_limit(1).unwrap();
    assert_eq!(limiter.in_flight(&alice), 2, "lowering cuts nothing off");
    gate1.send(Bytes::from_static(b"1\n")).unwrap();
    drop(gate1);
    assert_eq!(finish(first).await, "1\n");
    let third = get_as(&client, addr, "/export", "alice").await;
    assert_eq!(
        third.status,
        StatusCode::TOO_MANY_REQUESTS,
        "one still in flight, limit 1"
    );
    drop(gate2);
    assert!(finish(second).await.is_empty());
    let fourth = open(&client, addr, "/export", "alice").await;
    assert_eq!(fourth.status(), StatusCode::OK);
    drop(export.gates.recv().await.unwrap());
    assert!(finish(fourth).await.is_empty());
    assert_eq!(limiter.in_flight(&alice), 0);
}
