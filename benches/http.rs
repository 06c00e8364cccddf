//! HTTP layer over loopback: a hello-world axum route with no layer, with tollgate's layer and
//! with tower_governor at the same quota, driven by a bounded load generator written here.
//!
//! ```sh
//! cd benches && cargo bench --bench http --features http
//! HTTP_BENCH_ROUNDS=9 HTTP_BENCH_REQUESTS=40000 cargo bench --bench http --features http
//! ```
//!
//! Every variant is served at the same time by the same process, on 127.0.0.1:0, and measured
//! in interleaved rounds (order rotated each round); every figure is reported as a median over
//! rounds of its ratio to the no-layer baseline measured in the same round. Three measures:
//! - loopback, `HTTP_BENCH_CONNECTIONS` keep-alive HTTP/1.1 connections (default 32), each
//!   sending its share of `HTTP_BENCH_REQUESTS` sequentially: requests/s and p99 latency;
//! - loopback, one connection: the median latency, whose difference to the baseline is the
//!   layer's cost per request as a client sees it;
//! - in process, no sockets: the service called directly, ns per request, the cleanest
//!   estimate of the layer's own cost.
//!
//! Quotas: "allowed" variants use 1,000,000 per second with a burst of 1,000,000 (never
//! limited during a run), "denied" variants 1 per hour (every request after the first is
//! refused), keyed by peer IP for both libraries. tower_governor sends no rate-limit headers by
//! default (its `use_headers()` adds `x-ratelimit-*` ones); tollgate's default is the IETF
//! pair, so both are measured with and without headers.
//! "stacked" is tollgate's layer as its separate access and rate layers composed with
//! `ServiceBuilder` (the hand-off between them costs a request extension).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use tollgate::http::{HeaderStyle, PeerIp, RateLimitLayer, StatusCode};
use tollgate::Quota;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;

const FAST: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    None,
    Tollgate,
    TollgateNoHeaders,
    TollgateStacked,
    Governor,
    GovernorHeaders,
    TollgateDenied,
    GovernorDenied,
}

impl Variant {
    const ALL: [Variant; 8] = [
        Variant::None,
        Variant::Tollgate,
        Variant::TollgateNoHeaders,
        Variant::TollgateStacked,
        Variant::Governor,
        Variant::GovernorHeaders,
        Variant::TollgateDenied,
        Variant::GovernorDenied,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::None => "no layer",
            Variant::Tollgate => "tollgate (IETF headers)",
            Variant::TollgateNoHeaders => "tollgate (no headers)",
            Variant::TollgateStacked => "tollgate, access + rate layers stacked (IETF headers)",
            Variant::Governor => "tower_governor",
            Variant::GovernorHeaders => "tower_governor (x-ratelimit headers)",
            Variant::TollgateDenied => "tollgate, all denied (429)",
            Variant::GovernorDenied => "tower_governor, all denied (429)",
        }
    }

    fn denied(self) -> bool {
        matches!(self, Variant::TollgateDenied | Variant::GovernorDenied)
    }

    fn app(self) -> Router {
        let hello = Router::new().route("/", get(|| async { "hello" }));
        let tollgate = |quota: Quota, style| {
            RateLimitLayer::builder(PeerIp::new())
                .quota(quota)
                .headers(style)
                .build()
                .unwrap()
        };
        let governor = |period: Duration, burst: u32| {
            let config = GovernorConfigBuilder::default()
                .period(period)
                .burst_size(burst)
                .finish()
                .unwrap();
            GovernorLayer::new(Arc::new(config))
        };
        // Its `x-ratelimit-*` headers (a different middleware type parameter, hence its own
        // builder).
        let governor_headers = |period: Duration, burst: u32| {
            let config = GovernorConfigBuilder::default()
                .period(period)
                .burst_size(burst)
                .use_headers()
                .finish()
                .unwrap();
            GovernorLayer::new(Arc::new(config))
        };
        let fast = Quota::per_second(FAST).unwrap();
        let slow = Quota::per_hour(1).unwrap();
        match self {
            Variant::None => hello,
            Variant::Tollgate => hello.layer(tollgate(fast, HeaderStyle::Ietf)),
            Variant::TollgateNoHeaders => hello.layer(tollgate(fast, HeaderStyle::None)),
            Variant::TollgateStacked => {
                // The separate layers' hand-off (a request extension) against the combined
                // layer's one service.
                let layer = tollgate(fast, HeaderStyle::Ietf);
                hello.layer(
                    ServiceBuilder::new()
                        .layer(layer.access_layer())
                        .layer(layer.rate_layer()),
                )
            }
            Variant::TollgateDenied => hello.layer(tollgate(slow, HeaderStyle::Ietf)),
            Variant::Governor => hello.layer(governor(Duration::from_micros(1), FAST as u32)),
            Variant::GovernorHeaders => {
                hello.layer(governor_headers(Duration::from_micros(1), FAST as u32))
            }
            Variant::GovernorDenied => hello.layer(governor(Duration::from_secs(3600), 1)),
        }
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One load run's results.
struct Run {
    rps: f64,
    p50: Duration,
    p99: Duration,
}

/// `per_conn` sequential requests on each of `conns` keep-alive connections. Bounded: every
/// request has a deadline and the counts are fixed.
async fn load(addr: SocketAddr, conns: usize, per_conn: usize, denied: bool) -> Run {
    let start = Instant::now();
    let tasks: Vec<_> = (0..conns)
        .map(|_| tokio::spawn(connection(addr, per_conn, denied)))
        .collect();
    let mut latencies = Vec::with_capacity(conns * per_conn);
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    let wall = start.elapsed();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Run {
        rps: latencies.len() as f64 / wall.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

async fn connection(addr: SocketAddr, n: usize, denied: bool) -> Vec<Duration> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let req = Request::get("/")
            .header("host", "bench")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let t = Instant::now();
        let res = tokio::time::timeout(Duration::from_secs(10), async {
            sender.ready().await.unwrap();
            let res = sender.send_request(req).await.unwrap();
            let status = res.status();
            res.into_body().collect().await.unwrap();
            status
        })
        .await
        .expect("request timed out");
        latencies.push(t.elapsed());
        let expected = if denied {
            StatusCode::TOO_MANY_REQUESTS
        } else {
            StatusCode::OK
        };
        assert!(
            res == expected || (denied && res == StatusCode::OK),
            "{res}"
        );
    }
    latencies
}

/// ns per request calling the app directly (no sockets), `n` sequential calls.
async fn in_process(app: &Router, n: usize) -> f64 {
    let peer = ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000)));
    let mut svc = app.clone();
    let start = Instant::now();
    for _ in 0..n {
        let mut req = Request::get("/").body(axum::body::Body::empty()).unwrap();
        req.extensions_mut().insert(peer);
        let res = ServiceExt::<Request<axum::body::Body>>::ready(&mut svc)
            .await
            .unwrap()
            .call(req)
            .await
            .unwrap();
        std::hint::black_box(res);
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// One round: each variant with its many-connection and one-connection runs.
type Round = [(Variant, Run, Run)];

/// The (many connections, one connection) runs of `v` in a round.
fn find(round: &Round, v: Variant) -> (&Run, &Run) {
    let (_, many, one) = round.iter().find(|(x, _, _)| *x == v).unwrap();
    (many, one)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The lower and upper quartiles (order statistics, as `median`).
fn quartiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 4], v[v.len() * 3 / 4])
}

fn main() {
    let rounds = env("HTTP_BENCH_ROUNDS", 7).max(1);
    let requests = env("HTTP_BENCH_REQUESTS", 20_000).max(100);
    let conns = env("HTTP_BENCH_CONNECTIONS", 32).clamp(1, 512);
    let single = (requests / 8).max(100);
    let calls = requests * 5;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let apps: Vec<(Variant, Router)> = Variant::ALL.iter().map(|&v| (v, v.app())).collect();

    let results = rt.block_on(async {
        let mut servers = Vec::new();
        for (v, app) in &apps {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let app = app.clone();
            tokio::spawn(async move {
                axum::serve(
                    listener,
                    app.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .await
                .unwrap();
            });
            servers.push((*v, addr));
        }
        // Warm-up (and use up the denied variants' single permit).
        for (v, addr) in &servers {
            load(*addr, 4, 200, v.denied()).await;
        }
        let mut per_round = Vec::new();
        for round in 0..rounds {
            let mut order = servers.clone();
            order.rotate_left(round % servers.len());
            let mut this = Vec::new();
            for (v, addr) in &order {
                let many = load(*addr, conns, requests / conns, v.denied()).await;
                let one = load(*addr, 1, single, v.denied()).await;
                this.push((*v, many, one));
            }
            per_round.push(this);
            eprintln!("round {}/{rounds} done", round + 1);
        }
        per_round
    });

    // In process, on one thread: the layer's own cost without sockets.
    let local = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut in_proc: Vec<Vec<(Variant, f64)>> = Vec::new();
    local.block_on(async {
        for (_, app) in &apps {
            in_process(app, calls / 10).await; // warm-up
        }
        for round in 0..rounds {
            let mut order: Vec<_> = apps.iter().collect();
            order.rotate_left(round % apps.len());
            let mut this = Vec::new();
            for (v, app) in order {
                this.push((*v, in_process(app, calls).await));
            }
            in_proc.push(this);
        }
    });

    println!(
        "\nHTTP layer over loopback: {rounds} interleaved rounds; {requests} requests on {conns} \
         connections and {single} on 1 connection per variant per round; medians over rounds. \
         requests/s is each variant's own median with its interquartile range over rounds: \
         loopback throughput moves from round to round far more than a variant's ratio to the \
         no-layer baseline of the same round, so the two columns need not agree (compare by \
         the ratio).\n"
    );
    println!("| variant | requests/s [IQR] | x no layer | p99 (ms) | x no layer | 1-conn median (µs) | cost per request vs no layer (µs) | in process (ns) | in-process cost (ns) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &v in &Variant::ALL {
        let col = |f: &dyn Fn(&Round) -> f64| median(results.iter().map(|r| f(r)).collect());
        let rps = col(&|r| find(r, v).0.rps);
        let (rps_lo, rps_hi) = quartiles(results.iter().map(|r| find(r, v).0.rps).collect());
        let rps_ratio = col(&|r| find(r, v).0.rps / find(r, Variant::None).0.rps);
        let p99 = col(&|r| find(r, v).0.p99.as_secs_f64() * 1e3);
        let p99_ratio =
            col(&|r| find(r, v).0.p99.as_secs_f64() / find(r, Variant::None).0.p99.as_secs_f64());
        let one = col(&|r| find(r, v).1.p50.as_secs_f64() * 1e6);
        let one_cost = col(&|r| {
            (find(r, v).1.p50.as_secs_f64() - find(r, Variant::None).1.p50.as_secs_f64()) * 1e6
        });
        let ip = |r: &Vec<(Variant, f64)>, x: Variant| {
            r.iter().find(|(y, _)| *y == x).map(|(_, ns)| *ns).unwrap()
        };
        let inproc = median(in_proc.iter().map(|r| ip(r, v)).collect());
        let inproc_cost = median(
            in_proc
                .iter()
                .map(|r| ip(r, v) - ip(r, Variant::None))
                .collect(),
        );
        println!(
            "| {} | {rps:.0} [{rps_lo:.0}-{rps_hi:.0}] | {rps_ratio:.3} | {p99:.2} | {p99_ratio:.2} | {one:.1} | {one_cost:+.1} | {inproc:.0} | {inproc_cost:+.0} |",
            v.name()
        );
    }
}
