//! Which requests a route rule covers, over a real axum server on 127.0.0.1:0: `HEAD` is
//! charged against the `GET` rule, path parameters and wildcards in the router's own syntax,
//! nested routers (the rule names the full path, wherever the layer sits), path variants a
//! client can write (axum routes none of them to the handler, and none gets past the limit),
//! and the limiters a layer accepts (a key cap, or an explicit opt-out).
//!
//! The last tests check the rules against axum's router itself, in process: for generated and
//! hostile patterns and paths, a request the router sends to the handler is one the layer
//! limits, and the other way round (exactly, where nothing is percent-encoded); and a literal
//! rule over a parameter or a wildcard applies to exactly the requests whose values, as axum's
//! `Path` extractor decodes them, are the rule's, however either is percent-encoded.

#[path = "support/mod.rs"]
mod http_support;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use http_support::{client, send, serve_axum};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tollgate::http::{
    BuildError, GlobalKey, HeaderKey, HeaderName, PeerIp, RateLimitLayer, RouteError, StatusCode,
};
use tollgate::{KeyedRateLimiter, Quota};

/// A handler that counts its runs.
fn counted(
    runs: &Arc<AtomicUsize>,
) -> impl Fn() -> std::future::Ready<&'static str> + Clone + use<> {
    let runs = runs.clone();
    move || {
        runs.fetch_add(1, Ordering::SeqCst);
        std::future::ready("ok")
    }
}

/// One rule, `pattern` at 1 per hour per peer IP, no default limit.
fn one_rule(
    pattern: &str,
) -> RateLimitLayer<tollgate::http::Backends<KeyedRateLimiter<std::net::IpAddr>>> {
    RateLimitLayer::builder(PeerIp::new())
        .route("rule", pattern, Quota::per_hour(1).unwrap())
        .build()
        .unwrap()
}

/// Statuses of `n` requests `method path`.
async fn statuses(addr: SocketAddr, method: &str, path: &str, n: usize) -> Vec<u16> {
    let c = client();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(send(&c, addr, method, path, &[]).await.status.as_u16());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_charged_against_the_get_rule() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/export", get(counted(&runs)))
        .layer(one_rule("GET /export"));
    let addr = serve_axum(app).await;
    assert_eq!(statuses(addr, "GET", "/export", 2).await, [200, 429]);
    assert_eq!(statuses(addr, "HEAD", "/export", 10).await, [429; 10]);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "axum runs the GET handler for HEAD"
    );

    // And HEAD first takes the one permit from GET: same key, same bucket.
    let runs = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/export", get(counted(&runs)))
        .layer(one_rule("GET /export"));
    let addr = serve_axum(app).await;
    assert_eq!(statuses(addr, "HEAD", "/export", 2).await, [200, 429]);
    assert_eq!(statuses(addr, "GET", "/export", 1).await, [429]);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_parameter_pattern_limits_every_value() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/users/{id}", get(counted(&runs)))
        .route("/files/{*rest}", get(counted(&runs)))
        .layer(
            RateLimitLayer::builder(PeerIp::new())
                .route("user", "GET /users/{id}", Quota::per_hour(1).unwrap())
                .route("file", "GET /files/{*path}", Quota::per_hour(1).unwrap())
                .build()
                .unwrap(),
        );
    let addr = serve_axum(app).await;
    assert_eq!(statuses(addr, "GET", "/users/7", 2).await, [200, 429]);
    assert_eq!(statuses(addr, "GET", "/users/8", 1).await, [429]);
    assert_eq!(statuses(addr, "GET", "/files/a/b.txt", 1).await, [200]);
    assert_eq!(statuses(addr, "GET", "/files/c", 1).await, [429]);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// `POST /api/login` in a router nested at `/api`, with the layer placed in each way axum
/// allows; the rule names the full path in every case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_route_is_limited_by_its_full_path_wherever_the_layer_sits() {
    let login = |runs: &Arc<AtomicUsize>| post(counted(runs));
    for setup in [
        "layer on the nested router",
        "route_layer on the nested router",
        "layer on the route",
        "layer on the outer router",
        "layer around the whole app",
    ] {
        let runs = Arc::new(AtomicUsize::new(0));
        let layer = one_rule("POST /api/login");
        let app = match setup {
            "layer on the nested router" => Router::new().nest(
                "/api",
                Router::new().route("/login", login(&runs)).layer(layer),
            ),
            "route_layer on the nested router" => Router::new().nest(
                "/api",
                Router::new()
                    .route("/login", login(&runs))
                    .route_layer(layer),
            ),
            "layer on the route" => Router::new().nest(
                "/api",
                Router::new().route("/login", login(&runs).layer(layer)),
            ),
            "layer on the outer router" => Router::new()
                .nest("/api", Router::new().route("/login", login(&runs)))
                .layer(layer),
            _ => {
                let app = Router::new().nest("/api", Router::new().route("/login", login(&runs)));
                let addr = serve_wrapped(layer, app).await;
                assert_eq!(
                    statuses(addr, "POST", "/api/login", 3).await,
                    [200, 429, 429],
                    "{setup}"
                );
                assert_eq!(runs.load(Ordering::SeqCst), 1, "{setup}");
                continue;
            }
        };
        let addr = serve_axum(app).await;
        assert_eq!(
            statuses(addr, "POST", "/api/login", 3).await,
            [200, 429, 429],
            "{setup}"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{setup}");
    }
}

/// Serves `app` wrapped in `layer` as a whole (the layer runs before routing).
async fn serve_wrapped(
    layer: RateLimitLayer<tollgate::http::Backends<KeyedRateLimiter<std::net::IpAddr>>>,
    app: Router,
) -> SocketAddr {
    use tower::Layer;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = layer.layer(app);
    tokio::spawn(async move {
        axum::serve(
            listener,
            axum::ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
                SocketAddr,
            >(app),
        )
        .await
        .unwrap();
    });
    addr
}

/// Sends exactly `request_line` (plus a Host and `Connection: close`) over a new connection;
/// returns the status code.
async fn raw_status(addr: SocketAddr, request_line: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("{request_line}\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(http_support::DEADLINE, stream.read_to_end(&mut buf))
        .await
        .expect("response timed out")
        .unwrap();
    let head = String::from_utf8_lossy(&buf);
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"))
}

/// Once `/export` is used up, no way of writing the path reaches the handler: each variant is
/// either routed elsewhere by axum (404, 405: the handler never runs) or limited (429). The
/// layer matches the path byte for byte, as axum's router does, so this holds as long as axum
/// routes no variant to the handler; this test fails if a future axum starts to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_the_path_gets_past_a_used_up_limit() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/export", get(counted(&runs)))
        .route("/export/{id}", get(counted(&runs)))
        .layer(
            RateLimitLayer::builder(PeerIp::new())
                .route("export", "GET /export", Quota::per_hour(1).unwrap())
                .route("export", "GET /export/{id}", Quota::per_hour(1).unwrap())
                .build()
                .unwrap(),
        );
    let addr = serve_axum(app).await;
    assert_eq!(raw_status(addr, "GET /export HTTP/1.1").await, 200);
    assert_eq!(raw_status(addr, "GET /export/1 HTTP/1.1").await, 200);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let mut seen = Vec::new();
    for target in [
        "/export",
        "/export?x=1",
        "/export#frag",
        "/export/",
        "//export",
        "/./export",
        "/x/../export",
        "/%65xport",
        "/%2Fexport",
        "/EXPORT",
        "/Export",
        "/export%20",
        "/export;x",
        "/export/2",
        "/export/%32",
        "/export//2",
        "/export/2/",
        "http://localhost/export",
        "HTTP://LOCALHOST/export",
    ] {
        for method in ["GET", "HEAD", "get"] {
            let status = raw_status(addr, &format!("{method} {target} HTTP/1.1")).await;
            assert_eq!(
                runs.load(Ordering::SeqCst),
                2,
                "{method} {target} reached the handler"
            );
            seen.push(format!("{method} {target} {status}"));
        }
    }
    // What axum does with each (printed with --nocapture): 429, or not routed to the handler.
    println!("{seen:#?}");
}

#[test]
fn a_rule_that_can_never_match_is_refused_at_build() {
    for pattern in [
        "get /x",
        "Get /x",
        "PURGE /x",
        "GET\t/x",
        "/users/{id",
        "/users/id}",
        "/users/{}",
        "/users/{id}{x}",
        "/users/x{id}",
        "/users/{id}/{id}",
        "/a//b",
        "//",
        "x",
        "GET x",
        "/files/{*rest}/x",
        "/files/{*}",
        "/users/:id",
        "/files/*rest",
        "/a?b",
        "/a#b",
    ] {
        let built = RateLimitLayer::builder(GlobalKey)
            .route("r", pattern, Quota::per_second(1).unwrap())
            .build();
        assert!(
            matches!(built, Err(BuildError::Route(_))),
            "{pattern:?} accepted"
        );
    }
}

#[test]
fn a_limiter_without_a_key_cap_is_refused_unless_allowed() {
    let api_key = || HeaderKey::new(HeaderName::from_static("x-api-key"));
    let unbounded = || {
        Arc::new(KeyedRateLimiter::<String>::new(
            Quota::per_second(1).unwrap(),
        ))
    };
    let err = RateLimitLayer::with_limiters(api_key())
        .limiter(unbounded())
        .build()
        .unwrap_err();
    assert!(
        matches!(err, BuildError::UnboundedKeys(ref name) if name == "default"),
        "{err}"
    );
    let err = RateLimitLayer::with_limiters(api_key())
        .route_limiter("search", "/search", unbounded())
        .build()
        .unwrap_err();
    assert!(
        matches!(err, BuildError::UnboundedKeys(ref name) if name == "search"),
        "{err}"
    );
    let err = RateLimitLayer::builder(api_key())
        .per_second(1)
        .no_key_cap()
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::UnboundedKeys(_)), "{err}");
    assert!(RateLimitLayer::with_limiters(api_key())
        .limiter(unbounded())
        .allow_unbounded_keys()
        .build()
        .is_ok());
    // One key only (GlobalKey's `()`): nothing to bound.
    let global = Arc::new(KeyedRateLimiter::<()>::new(Quota::per_second(1).unwrap()));
    assert!(RateLimitLayer::with_limiters(GlobalKey)
        .limiter(global)
        .build()
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_distinct_keys_stays_within_a_passed_limiters_cap() {
    const CAP: usize = 500;
    const KEYS: usize = 20_000;
    let limiter = Arc::new(
        KeyedRateLimiter::<String>::builder(Quota::per_hour(1).unwrap())
            .max_keys(NonZeroUsize::new(CAP).unwrap())
            .build(),
    );
    let app = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::with_limiters(HeaderKey::new(HeaderName::from_static("x-api-key")))
            .limiter(limiter.clone())
            .build()
            .unwrap(),
    );
    let addr = serve_axum(app).await;
    let c = client();
    let most = Arc::new(AtomicUsize::new(0));
    let (ok, denied) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let tasks: Vec<_> = (0..32)
        .map(|t| {
            let (c, limiter, most) = (c.clone(), limiter.clone(), most.clone());
            let (ok, denied) = (ok.clone(), denied.clone());
            tokio::spawn(async move {
                for i in (t..KEYS).step_by(32) {
                    let key = format!("key-{i}");
                    let res = send(&c, addr, "GET", "/", &[("x-api-key", &key)]).await;
                    match res.status.as_u16() {
                        200 => ok.fetch_add(1, Ordering::Relaxed),
                        // A new key at the full table: the server's capacity.
                        503 => denied.fetch_add(1, Ordering::Relaxed),
                        s => panic!("status {s}"),
                    };
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
        "{} keys",
        most.load(Ordering::Relaxed)
    );
    assert_eq!(limiter.len(), CAP);
    // Keys stay hot for an hour, so the cap's new keys are denied: exactly CAP admitted.
    assert_eq!(ok.load(Ordering::Relaxed), CAP);
    assert_eq!(denied.load(Ordering::Relaxed), KEYS - CAP);
}

// --- The rules against axum's router, in process -------------------------------------------

/// Whether axum's router sends `method path` to the one route `route` (200), and whether the
/// layer, wrapped around the whole router (so it sees every request, routed or not, and no
/// route template), applies its rule (`pattern`) to it, seen from the `RateLimit-Policy`
/// header.
fn routed_and_limited(
    route: &str,
    pattern: &str,
    method: &str,
    path: &str,
) -> Option<(bool, bool)> {
    use tower::{Layer, ServiceExt};
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .body(axum::body::Body::empty())
        .ok()?;
    let layer = RateLimitLayer::builder(GlobalKey)
        .route("r", pattern, Quota::per_second(1_000_000).unwrap())
        .build()
        .ok()?;
    let router =
        std::panic::catch_unwind(|| Router::new().route(route, get(|| async { "ok" }))).ok()?;
    let service = layer.layer(router);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let res = rt.block_on(service.oneshot(req)).unwrap();
    Some((
        res.status() == StatusCode::OK,
        res.headers().contains_key("ratelimit-policy"),
    ))
}

/// A route in axum 0.8's syntax: literal segments, `{name}` parameters, a trailing slash, a
/// final `{*name}` wildcard.
fn route_strategy() -> impl Strategy<Value = String> {
    let seg = prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("users".to_owned()),
        Just("7".to_owned()),
        Just("x.y".to_owned()),
        Just("%41".to_owned()),
        Just("{}".to_owned()), // a parameter, named below
    ];
    (prop::collection::vec(seg, 0..5), 0..3u8).prop_map(|(segs, end)| {
        let mut route = String::new();
        for (i, s) in segs.iter().enumerate() {
            route.push('/');
            if s == "{}" {
                route.push_str(&format!("{{p{i}}}"));
            } else {
                route.push_str(s);
            }
        }
        match end {
            0 if !route.is_empty() => {}
            1 => route.push('/'),
            _ => route.push_str("/{*rest}"),
        }
        if route.is_empty() {
            route.push('/');
        }
        route
    })
}

/// Request paths made of the same pieces and of what a client might try: empty segments,
/// dot segments, percent-encodings, case, very long segments.
fn path_strategy() -> impl Strategy<Value = String> {
    let seg = prop_oneof![
        Just("a".to_owned()),
        Just("A".to_owned()),
        Just("b".to_owned()),
        Just("users".to_owned()),
        Just("7".to_owned()),
        Just("x.y".to_owned()),
        Just("%41".to_owned()),
        Just("%61".to_owned()),
        Just("%2F".to_owned()),
        Just(String::new()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("{p0}".to_owned()),
        "[a-z%0-9.~:@!$&'()*+,;=-]{1,6}",
        Just("z".repeat(5000)),
    ];
    (prop::collection::vec(seg, 0..6), any::<bool>()).prop_map(|(segs, slash)| {
        let mut path = String::new();
        for s in segs {
            path.push('/');
            path.push_str(&s);
        }
        if slash || path.is_empty() {
            path.push('/');
        }
        path
    })
}

/// Hostile pattern text: the characters the syntax gives meaning to, and others.
fn hostile_pattern() -> impl Strategy<Value = String> {
    let method = prop_oneof![
        Just(""),
        Just("GET "),
        Just("HEAD "),
        Just("get "),
        Just("POST "),
        Just("GET  "),
        Just(" "),
    ];
    (method, "[/a{}*:.%7 ?#-]{0,16}").prop_map(|(m, p)| format!("{m}{p}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// For routes in the router's syntax, written the same way as patterns: the layer limits
    /// exactly the requests axum routes to the handler (GET and HEAD), never one it does not.
    #[test]
    fn the_layer_limits_exactly_what_axum_routes(
        route in route_strategy(),
        paths in prop::collection::vec(path_strategy(), 1..8),
        head in any::<bool>(),
    ) {
        let method = if head { "HEAD" } else { "GET" };
        for path in paths {
            let Some((routed, limited)) = routed_and_limited(&route, &format!("GET {route}"), method, &path) else {
                continue; // a path http::Uri refuses never reaches a server
            };
            // Wrapped around the whole router, the layer sees no route template, so it reads
            // any segment as a possible parameter: every request routed to the handler is
            // limited, and without percent-encoding exactly those are; a percent-encoded
            // spelling the router sends elsewhere may be limited too.
            prop_assert!(limited || !routed, "route {} {} {}", route, method, path);
            if !route.contains('%') && !path.contains('%') {
                prop_assert_eq!(routed, limited, "route {} {} {}", route, method, path);
            }
            // A POST is not routed (405) and not limited by a GET rule.
            if let Some((routed, limited)) = routed_and_limited(&route, &format!("GET {route}"), "POST", &path) {
                prop_assert!(!routed && !limited, "POST {}", path);
            }
        }
    }

    /// Any pattern text: `build()` never panics; if it accepts the pattern, axum accepts it as a
    /// route too and the layer limits exactly what axum routes there.
    #[test]
    fn hostile_patterns_are_refused_or_match_what_axum_routes(
        pattern in hostile_pattern(),
        paths in prop::collection::vec(path_strategy(), 1..6),
    ) {
        let built = RateLimitLayer::builder(GlobalKey)
            .route("r", &pattern, Quota::per_second(1).unwrap())
            .build();
        let Ok(_) = built else {
            prop_assert!(matches!(built, Err(BuildError::Route(_))));
            return Ok(());
        };
        let trimmed = pattern.trim();
        let (method, route) = match trimmed.split_once(' ') {
            Some((m, r)) => (m, r.trim()),
            None => ("GET", trimmed),
        };
        let route = route.strip_suffix("/*").map_or(route.to_owned(), |p| {
            // The crate's own subtree form has no one-route equivalent in axum: skip it.
            p.to_owned()
        });
        if trimmed.ends_with("/*") || method == "POST" {
            return Ok(());
        }
        let accepted_by_axum = std::panic::catch_unwind(|| Router::<()>::new().route(&route, get(|| async { "ok" }))).is_ok();
        prop_assert!(accepted_by_axum, "accepted {:?}, axum refuses {:?}", pattern, route);
        for path in paths {
            if let Some((routed, limited)) = routed_and_limited(&route, &pattern, method, &path) {
                // As above: no template, so percent-encoded spellings may be limited too.
                prop_assert!(limited || !routed, "{:?} {}", pattern, path);
                if !route.contains('%') && !path.contains('%') {
                    prop_assert_eq!(routed, limited, "{:?} {}", pattern, path);
                }
            }
        }
    }
}

#[test]
fn route_errors_say_why() {
    let err = |p: &str| match RateLimitLayer::builder(GlobalKey)
        .route("r", p, Quota::per_second(1).unwrap())
        .build()
    {
        Err(BuildError::Route(e)) => e,
        other => panic!("{p:?}: {other:?}"),
    };
    assert!(matches!(err("get /x"), RouteError::Method(_)));
    assert!(matches!(
        err("/a/{id}/{id}"),
        RouteError::DuplicateParameter(_)
    ));
    assert!(matches!(err("/a/:id"), RouteError::OldSyntax(_)));
}

// --- Percent-encoded spellings of a parameter's value -----------------------------------------

/// A literal rule on a parameterised route: `%37` is `7` to the handler (axum decodes a
/// parameter's value), so it is `7` to the rule too. Every run of the id-7 handler is counted
/// against the rule's 1 per hour; other ids are not limited by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_literal_rule_on_a_parameter_is_met_by_every_spelling_of_its_value() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler = {
        let seen = seen.clone();
        move |axum::extract::Path(id): axum::extract::Path<String>| {
            seen.lock().unwrap().push(id);
            std::future::ready("ok")
        }
    };
    let app = Router::new()
        .route("/users/{id}/export", get(handler))
        .layer(one_rule("GET /users/7/export"));
    let addr = serve_axum(app).await;
    let c = client();
    let mut got = Vec::new();
    for path in [
        "/users/7/export",
        "/users/7/export",
        "/users/%37/export",
        "/users/%37/export",
        "/users/8/export",
        "/users/%38/export",
    ] {
        got.push(send(&c, addr, "GET", path, &[]).await.status.as_u16());
    }
    assert_eq!(got, [200, 429, 429, 429, 200, 200]);
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.iter().filter(|id| *id == "7").count(),
        1,
        "the id-7 handler ran {seen:?} against a limit of 1"
    );
}

/// What axum's `Path` extractor hands the handler of the one route `template` for a path:
/// `None` if the router sends it elsewhere (404), `Some(None)` if the extractor refuses it
/// (a value that decodes to invalid UTF-8: the handler never runs), else the names and
/// values, in order, in Rust's debug form.
type Extracted = Option<Option<String>>;

/// Sends `GET path` through `service` in process; returns the status, whether the rule's
/// policy decided it (its `RateLimit-Policy` header), and the body.
fn oneshot_get<S>(service: S, path: &str) -> Option<(StatusCode, bool, bytes::Bytes)>
where
    S: tower::Service<
        http::Request<axum::body::Body>,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
    >,
{
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let req = http::Request::get(path)
        .body(axum::body::Body::empty())
        .ok()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async move {
        let res = service.oneshot(req).await.unwrap();
        let limited = res.headers().contains_key("ratelimit-policy");
        let status = res.status();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        Some((status, limited, body))
    })
}

/// A router with the one route `template`, whose handler answers with the parameters it
/// extracted (`name=value` lines, values in Rust's debug form).
fn echo_router(template: &str) -> Router {
    Router::new().route(
        template,
        get(
            |axum::extract::Path(params): axum::extract::Path<Vec<(String, String)>>| async move {
                format!("{params:?}")
            },
        ),
    )
}

/// [`Extracted`] for `path`, or `None` if `http::Uri` refuses the path.
fn extracted(template: &str, path: &str) -> Option<Extracted> {
    let (status, _, body) = oneshot_get(echo_router(template), path)?;
    Some(match status {
        StatusCode::OK => Some(Some(String::from_utf8(body.to_vec()).unwrap())),
        StatusCode::BAD_REQUEST => Some(None),
        _ => None,
    })
}

/// Route templates with literal segments, parameters, a trailing slash or a final wildcard.
fn param_template() -> impl Strategy<Value = String> {
    let seg = prop_oneof![
        Just("users".to_owned()),
        Just("7".to_owned()),
        Just("%41".to_owned()),
        Just("{}".to_owned()),
        Just("{}".to_owned()),
    ];
    (prop::collection::vec(seg, 0..4), 0..3u8).prop_map(|(segs, end)| {
        let mut t = String::new();
        for (i, s) in segs.iter().enumerate() {
            t.push('/');
            if s == "{}" {
                t.push_str(&format!("{{p{i}}}"));
            } else {
                t.push_str(s);
            }
        }
        match end {
            0 if !t.is_empty() => {}
            1 => t.push('/'),
            _ => t.push_str("/{*rest}"),
        }
        if t.is_empty() {
            t.push('/');
        }
        t
    })
}

/// A few values, each with the raw spellings that decode to it: `7` and `%37`, case in hex
/// digits, `/` inside a value (`%2F`), a `%` that starts no escape (itself, as `%25` is),
/// bytes that decode to invalid UTF-8, and an encoded `é`.
const SPELLINGS: [&[&str]; 10] = [
    &["7", "%37"],
    &["a", "%61"],
    &["A", "%41"],
    &["%2F", "%2f"],
    &["%", "%25"],
    &["%ZZ", "%25ZZ", "%25%5A%5a"],
    &["%FF", "%ff"],
    &["%C3%A9", "%c3%a9", "%C3%a9"],
    &["-", "%2D"],
    &["users", "%75sers", "%75%73%65%72%73"],
];

/// Values for each segment of a path: indices into [`SPELLINGS`], one to three per segment.
fn values() -> impl Strategy<Value = Vec<Vec<usize>>> {
    prop::collection::vec(prop::collection::vec(0..SPELLINGS.len(), 1..3), 1..5)
}

/// A raw path for `template`: each literal segment as written (or, where `swap` says, replaced
/// by values), each parameter and the wildcard's rest made of `values` (the rest joined with
/// raw slashes), each value spelled as `variant` picks.
fn spell(template: &str, values: &[Vec<usize>], swap: &[bool], variant: &[usize]) -> String {
    let mut out = String::new();
    let mut n = 0;
    for (i, seg) in template.split('/').skip(1).enumerate() {
        out.push('/');
        let spelled: Vec<&str> = values[i % values.len()]
            .iter()
            .map(|&v| {
                n += 1;
                SPELLINGS[v][variant[n % variant.len()] % SPELLINGS[v].len()]
            })
            .collect();
        if seg.starts_with("{*") {
            out.push_str(&spelled.join("/"));
        } else if seg.starts_with('{') || swap[i % swap.len()] {
            out.push_str(&spelled.concat());
        } else {
            out.push_str(seg);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A literal rule over a parameterised route, with the layer after routing: the rule
    /// applies to a request the router sends to the handler exactly when the handler
    /// extracts the same values from it as from the rule's own path, however each is
    /// percent-encoded.
    #[test]
    fn a_literal_rule_applies_exactly_when_the_handler_sees_its_values(
        template in param_template(),
        rule in values(),
        rule_swap in prop::collection::vec(prop::bool::weighted(0.1), 1..5),
        rule_variant in prop::collection::vec(0..3usize, 1..8),
        requests in prop::collection::vec(
            (
                prop::option::of(values()), // `None`: the rule's values, spelled otherwise
                prop::collection::vec(prop::bool::weighted(0.1), 1..5),
                prop::collection::vec(0..3usize, 1..8),
            ),
            1..6,
        ),
    ) {
        let rule_path = spell(&template, &rule, &rule_swap, &rule_variant);
        let Ok(layer) = RateLimitLayer::builder(GlobalKey)
            .route("r", &format!("GET {rule_path}"), Quota::per_second(1_000_000).unwrap())
            .build()
        else {
            return Ok(()); // a rule path the syntax refuses (an empty segment)
        };
        let Some(rule_values) = extracted(&template, &rule_path) else {
            return Ok(()); // not a path http::Uri takes
        };
        let app = echo_router(&template).layer(layer.clone());
        // The same layer wrapped around the whole router: no route template.
        let wrapped = tower::Layer::layer(&layer, echo_router(&template));
        for (values, swap, variant) in requests {
            let path = spell(&template, values.as_ref().unwrap_or(&rule), &swap, &variant);
            let Some(values) = extracted(&template, &path) else { continue };
            let Some(Some(values)) = values else {
                continue; // not routed here, or refused by the extractor: the handler never runs
            };
            let (_, limited, _) = oneshot_get(app.clone(), &path).unwrap();
            let same = rule_values.as_ref().and_then(|v| v.as_ref()) == Some(&values);
            prop_assert_eq!(
                limited, same,
                "route {} rule {:?} ({:?}) request {:?} ({:?})",
                template, rule_path, rule_values, path, values
            );
            // Without the template the layer cannot tell parameters from literals, so it
            // may limit more; but never a spelling of the rule's own values.
            let (_, limited, _) = oneshot_get(wrapped.clone(), &path).unwrap();
            prop_assert!(
                limited || !same,
                "wrapped: route {} rule {:?} request {:?}", template, rule_path, path
            );
        }
    }
}
