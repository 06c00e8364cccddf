//! A small axum API with two stacked limits: per client IP on everything (stricter on
//! `POST /login`), and per API key on `/api/*`; and its metrics at `/metrics`, in Prometheus'
//! text format (`metrics-exporter-prometheus`), labelled with the policies' names.
//!
//! ```sh
//! # listens on 127.0.0.1:3000
//! cargo run --release -p tollgate-http-tests --features prometheus --example axum_server
//! curl -i http://127.0.0.1:3000/
//! curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/api/items
//! for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:3000/login; done
//! curl -s http://127.0.0.1:3000/metrics | grep '^tollgate'
//! ```
//!
//! `PORT=8080` picks another port. Only the loopback address is used.

use std::net::SocketAddr;

use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusBuilder;
use tollgate::http::{HeaderKey, HeaderName, OnKeyError, PeerIp, RateLimitLayer, StatusCode};
use tollgate::Quota;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The exporter first: a limiter registers its series with the recorder installed when it
    // is built, so layers built before this line would report nothing.
    let prometheus = PrometheusBuilder::new().install_recorder()?;

    // Every route: 60 requests per minute per client IP (IPv6 clients by /64), and 5 login
    // attempts per minute. The client is the TCP peer: behind a reverse proxy use
    // `ClientIp::trusted_proxies([...])` instead.
    let per_ip = RateLimitLayer::builder(PeerIp::new())
        .per_minute(60)
        .policy_name("per-ip")
        .route("login", "POST /login", Quota::per_minute(5)?)
        .problem_json()
        .build()?;

    // /api/*: 10 requests per minute per API key, in bursts of up to 3; no key is a 401.
    let per_key = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
        .quota(Quota::per_minute(10)?.with_burst(3)?)
        .policy_name("per-key")
        .on_key_error(OnKeyError::Status(StatusCode::UNAUTHORIZED))
        .problem_json()
        .build()?;

    let api = Router::new()
        .route("/api/items", get(|| async { Json(["apple", "pear"]) }))
        .route_layer(per_key);
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route(
            "/login",
            post(|| async { (StatusCode::UNAUTHORIZED, "bad password\n") }),
        )
        .merge(api)
        .layer(per_ip)
        // Added after `layer`, so not limited: the scraper is never refused.
        .route(
            "/metrics",
            get(move || std::future::ready(prometheus.render())),
        );

    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
