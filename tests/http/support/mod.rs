//! Helpers for the HTTP tests: a real client, servers on 127.0.0.1:0, header parsing.
#![allow(dead_code)] // each test file uses a different subset

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Every request the tests make must finish within this (no test hangs).
pub const DEADLINE: Duration = Duration::from_secs(30);

pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// hyper-util's pooled HTTP/1.1 client.
pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A response as the tests look at it.
#[derive(Debug)]
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    /// A header as text (panics if missing: the tests assert presence this way).
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
            .to_str()
            .unwrap()
    }

    pub fn header_u64(&self, name: &str) -> u64 {
        self.header(name).parse().unwrap()
    }

    /// The parameters of the one IETF `RateLimit` item (`"name";r=1;t=2`).
    pub fn ratelimit(&self) -> (String, HashMap<String, u64>) {
        parse_item(self.header("ratelimit"))
    }

    /// The parameters of the one IETF `RateLimit-Policy` item (`"name";q=1;w=2`).
    pub fn policy(&self) -> (String, HashMap<String, u64>) {
        parse_item(self.header("ratelimit-policy"))
    }
}

/// Parses one Structured Fields list item with an sf-string value and integer parameters.
pub fn parse_item(item: &str) -> (String, HashMap<String, u64>) {
    let mut parts = item.split(';');
    let name = parts.next().unwrap();
    assert!(
        name.len() >= 2 && name.starts_with('"') && name.ends_with('"'),
        "{item}"
    );
    let params = parts
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or_else(|| panic!("{item}"));
            (k.to_owned(), v.parse().unwrap_or_else(|_| panic!("{item}")))
        })
        .collect();
    (name[1..name.len() - 1].to_owned(), params)
}

/// Sends `method path` with `headers` to `addr` and reads the whole response.
pub async fn send(
    client: &HttpClient,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Got {
    let raw: Vec<(&str, &[u8])> = headers.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
    send_bytes(client, addr, method, path, &raw).await
}

/// As [`send`], with header values as raw bytes (anything `HeaderValue` accepts, such as
/// obs-text bytes above 0x7f, which a `&str` cannot carry).
pub async fn send_bytes(
    client: &HttpClient,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
) -> Got {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, http::HeaderValue::from_bytes(v).unwrap());
    }
    let req = req.body(Empty::new()).unwrap();
    let res = tokio::time::timeout(DEADLINE, client.request(req))
        .await
        .expect("request timed out")
        .expect("request failed");
    let (head, body) = res.into_parts();
    let body = tokio::time::timeout(DEADLINE, body.collect())
        .await
        .expect("body timed out")
        .expect("body failed")
        .to_bytes();
    Got {
        status: head.status,
        headers: head.headers,
        body,
    }
}

pub async fn get(client: &HttpClient, addr: SocketAddr, path: &str) -> Got {
    send(client, addr, "GET", path, &[]).await
}

/// Serves an axum app on 127.0.0.1:0 with `ConnectInfo<SocketAddr>`; returns its address.
/// The server task ends with the test's runtime.
pub async fn serve_axum(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Serves an axum app on 127.0.0.1:0 *without* `ConnectInfo`, as `axum::serve(listener, app)`
/// does when the app is not made with `into_make_service_with_connect_info`: requests carry no
/// peer address, the misconfiguration the IP extractors must report.
pub async fn serve_axum_without_connect_info(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Serves `service` (anything `Clone` that handles `Request<Incoming>`) with plain hyper (no
/// axum) on 127.0.0.1:0, HTTP/1.1 and HTTP/2: each connection gets its peer address as a
/// `SocketAddr` request extension, which is how plain hyper gives the IP extractors a peer.
pub async fn serve_hyper<S, B>(service: S) -> SocketAddr
where
    S: tower::Service<
            Request<hyper::body::Incoming>,
            Response = http::Response<B>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use tower::ServiceBuilder;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                return;
            };
            let svc = ServiceBuilder::new()
                .map_request(move |mut req: Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(peer);
                    req
                })
                .service(service.clone());
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let svc = hyper_util::service::TowerToHyperService::new(svc);
                // A client that goes away mid-request ends its connection: not a test failure.
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(io, svc)
                    .await;
            });
        }
    });
    addr
}

/// What [`burst`] saw of one request: its status, when it was answered (from the first
/// request's arrival) and its `Retry-After`.
pub type Answered = (StatusCode, Duration, Option<String>);

/// Sends `n` requests through `layer` around an empty in-memory service, each one let run until
/// it waits before the next arrives; returns what each got, in arrival order. For shaping
/// tests under paused time, where every instant is exact.
pub async fn burst<B>(
    layer: tollgate::http::RateLimitLayer<tollgate::http::Backends<B>>,
    n: usize,
) -> Vec<Answered>
where
    B: tollgate::http::Backend<Key = ()>,
{
    use tower::{Layer, ServiceExt};

    let service = layer.layer(tower::service_fn(|_req: Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    }));
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..n {
        let svc = service.clone();
        tasks.push(tokio::spawn(async move {
            let res = svc.oneshot(Request::new(())).await.unwrap();
            let retry = res
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_owned());
            (res.status(), start.elapsed(), retry)
        }));
        tokio::task::yield_now().await;
    }
    let mut answered = Vec::with_capacity(n);
    for t in tasks {
        answered.push(t.await.unwrap());
    }
    answered
}
