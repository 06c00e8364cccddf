//! HTTP middleware: a tower [`Layer`](tower_layer::Layer) that rate-limits requests, for axum,
//! hyper and tonic (feature `tower`; `axum` adds axum's `ConnectInfo` as a peer address, and
//! its `MatchedPath` and `OriginalUri` for route rules).
//!
//! - **Keys** ([`KeyExtractor`]): [`GlobalKey`], [`PeerIp`], [`ClientIp`] (behind proxies you
//!   trust, read from the right), [`HeaderKey`] (API keys), or any closure ([`KeyFn`]). IPv6
//!   clients are keyed by /64. A request without a usable key is answered per [`OnKeyError`].
//! - **Limits**: a default quota and per-route quotas (`"POST /login"`, `"GET /users/{id}"`,
//!   `"/api/*"`: axum 0.8's path syntax, a `GET` rule covering `HEAD`, matched against the
//!   full path; see [`route`](RateLimitLayerBuilder::route)), each its own in-process GCRA
//!   [`KeyedRateLimiter`](crate::KeyedRateLimiter) made by the builder (with a sweeper and a
//!   key cap), or any [`Backend`] you pass: a `KeyedRateLimiter` running any algorithm (with a
//!   key cap: `build` refuses one without, see
//!   [`allow_unbounded_keys`](RateLimitLayerBuilder::allow_unbounded_keys)), and with feature
//!   `redis` a `RedisRateLimiter`. A per-request cost closure.
//! - **Over the limit**: `429 Too Many Requests` with `Retry-After` in whole seconds rounded
//!   up (never 0) and `Cache-Control: no-store`; or [shaping](RateLimitLayerBuilder::shape)
//!   (wait up to a bound; in arrival order with GCRA); or
//!   [response-aware refunds](RateLimitLayerBuilder::refund_if) (GCRA backends:
//!   [`RefundBackend`]). A request that can never pass (cost above the burst) gets 429
//!   without `Retry-After`. gRPC calls get `RESOURCE_EXHAUSTED`.
//! - **Concurrency** ([`concurrency`](RateLimitLayerBuilder::concurrency),
//!   [`route_concurrency`](RateLimitLayerBuilder::route_concurrency)): at most N requests in
//!   flight per key, counted by any [`ConcurrencyBackend`]; a request holds its permit until its
//!   response body has been sent or dropped ([`PermitBody`]), so a streaming download holds it
//!   for its whole length. Over the limit: 429 (or [`busy_status`](RateLimitLayerBuilder::busy_status)).
//!   Stacks with the rate limits of the same layer (the permit is taken first) or of another.
//! - **Allow and deny lists** ([`AccessList`]): client networks (the same trusted client
//!   address the IP keys use), request rules and key rules, checked before any limiter: allow
//!   bypasses every limit, deny answers `403`; deny wins over allow.
//! - **Shadow mode** ([`Enforcement`]): a policy that decides and counts but never refuses,
//!   switchable at run time ([`set_enforcement`](RateLimitLayer::set_enforcement)), with
//!   per-policy counts of what enforcing would have refused ([`stats`](RateLimitLayer::stats)).
//! - **Headers** ([`HeaderStyle`]): the IETF draft's `RateLimit-Policy` / `RateLimit` (default),
//!   `RateLimit-Limit/-Remaining/-Reset`, `X-RateLimit-*`, or none; optional
//!   `application/problem+json` bodies.
//!
//! - **Configuration files** (features `serde` and `tower`): `LayerConfig`, the layer's
//!   configuration as a serde type (keys, quotas, routes, lists, shadow mode, responses),
//!   built through the builder so that every refusal is a [`BuildError`]; unknown fields are
//!   refused. `RateLimitLayer::reloadable` adds a `Reloader` that changes quotas (keys
//!   keep their debt), shadow settings and the layer's shape (routes, key, lists, responses;
//!   kept policies keep their keys) at run time (see the guide, "Configuration files").
//! - **One layer per concern**: the same layer as an [`AccessLayer`], a
//!   [`ConcurrencyLimitLayer`] and a [`RateLayer`]
//!   ([`access_layer`](RateLimitLayer::access_layer), ...), sharing its state, for a stack of
//!   your own with `ServiceBuilder` (see the guide, "One layer per concern").
//!
//! All state is behind one `Arc` made by `build()`, so the layer works however often a
//! framework clones services (axum clones them per request). `poll_ready` forwards to the
//! inner service; the decision is made in `call`. The response type stays the inner service's.
//!
//! ```
//! use std::net::SocketAddr;
//! use tollgate::http::{PeerIp, RateLimitLayer};
//! use tollgate::Quota;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = RateLimitLayer::builder(PeerIp::new())
//!     .per_minute(100)                                       // 100/min per client IP
//!     .route("login", "POST /login", Quota::per_minute(5)?)  // 5/min on the login route
//!     .build()?;
//! let app = axum::Router::new()
//!     .route("/", axum::routing::get(|| async { "hello" }))
//!     .layer(layer);
//! // axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//! # let _ = app.into_make_service_with_connect_info::<SocketAddr>();
//! # Ok(()) }
//! ```
//!
//! With plain hyper, insert each connection's peer `SocketAddr` as a request extension (for
//! instance `tower::ServiceBuilder::new().map_request(move |mut req: Request<_>| { req.extensions_mut().insert(peer); req })`)
//! for the IP extractors. tonic inserts its own `TcpConnectInfo` instead: key by it with a
//! [`KeyFn`].
//!
//! # The `http` types
//!
//! The `http` crate's types the API takes are re-exported here, so that using the
//! layer needs no `http` dependency of your own (they are the very types axum re-exports as
//! `axum::http`): [`request::Parts`] for [`KeyExtractor`]s and
//! [`cost`](RateLimitLayerBuilder::cost), [`response::Parts`] for
//! [`refund_if`](RateLimitLayerBuilder::refund_if), [`HeaderName`] for [`HeaderKey`],
//! [`StatusCode`] for [`OnKeyError`], [`KeyError`] and
//! [`never_status`](RateLimitLayerBuilder::never_status), [`HeaderValue`] for
//! [`RejectBody`], [`Method`] for costs and keys by method. The paths are the `http` crate's
//! with `tollgate::` in front (`tollgate::http::request::Parts` is `tollgate::http::request::Parts`).
//!
//! ```
//! use tollgate::http::request::Parts;
//! use tollgate::http::{HeaderKey, HeaderName, Method, OnKeyError, RateLimitLayer, StatusCode};
//!
//! let layer = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
//!     .per_second(10)
//!     .cost(|req: &Parts| if req.method == Method::POST { 2 } else { 1 })
//!     .on_key_error(OnKeyError::Status(StatusCode::UNAUTHORIZED))
//!     .build();
//! assert!(layer.is_ok());
//! ```

// Folders by concern, each importing only from those below it (`.ci/import_cycles.py`):
// config (feature `serde`: the file's form, built through the builder; config/: reload, the
// serde forms of networks and statuses) -> builder -> layer -> service (the request's steps, and the services of the combined layer and
// of the concern layers: concurrent, access, rate, handoff; the waiting paths: shaping,
// refunding) ->
// state (with the layer's type, which the service names) -> policy (the route table, and per policy: ops, shadow, stats) -> access -> key
// (extractors, client_ip); rate/ (backends, refunds), concurrency/ (backend, permit body),
// responses/ (headers, rejections) and error.rs at the bottom.
mod access;
mod builder;
mod concurrency;
#[cfg(feature = "serde")]
mod config;
mod error;
mod key;
mod layer;
mod policy;
mod rate;
mod responses;
mod service;
mod state;

pub use access::AccessList;
pub use builder::{RateLimitLayerBuilder, DEFAULT_MAX_KEYS, DEFAULT_SWEEP_INTERVAL};
pub use concurrency::backend::{Busy, ConcurrencyBackend, NoConcurrency};
pub use concurrency::permit_body::PermitBody;
#[cfg(feature = "serde")]
pub use config::{
    AccessConfig, AlgorithmConfig, Change, ConfigKey, ConfigLayer, ConfigLimiter, ForwardedConfig,
    HeaderConfig, KeyConfig, KeyErrorConfig, LayerConfig, LimiterConfig, Per, QuotaConfig,
    ReloadError, ReloadableLayer, Reloader, Reloading, ResponseConfig, RouteConfig, ShadowConfig,
    Trust, WhenFullConfig,
};
pub use error::{BuildError, RouteError};
pub use key::client_ip::{ClientIp, ForwardedHeader, IpNet, IpNetError, PeerIp};
pub use key::{AddrSource, GlobalKey, HeaderKey, KeyError, KeyExtractor, KeyFn};
pub use policy::shadow::Enforcement;
pub use policy::stats::PolicyStats;
pub use rate::backend::{Answer, Backend, RefundBackend};
pub use responses::headers::HeaderStyle;
pub use responses::rejection::{NoBody, Problem, ProblemJson, RejectBody};
pub use service::concurrent::PermitFuture;
pub use service::{RateLimit, ResponseFuture};
pub use state::{
    AccessLayer, Backends, ConcurrencyLimitLayer, LayerBackends, OnKeyError, RateLayer,
    RateLimitLayer,
};

// The `http` types the API takes (see the module docs, "The `http` types").
pub use ::http::{request, response, HeaderName, HeaderValue, Method, StatusCode};
