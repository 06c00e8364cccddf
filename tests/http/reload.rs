//! A layer built from a `LayerConfig` and reloaded while requests run: quotas change in place
//! (no fresh burst), shadow settings switch, a changed shape makes a new layer that keeps the
//! kept policies' keys, a changed algorithm starts its policy's keys afresh, and a refused
//! reload changes nothing.
//!
//! The quotas are per hour, so a permit refills every few minutes: what the tests count is
//! what the burst admits, whatever the machine's speed. Requests go through the layer in
//! process (tower's `oneshot`), a bounded number of them.

use std::convert::Infallible;
use std::num::NonZeroUsize;

use http::{Request, Response};
use tollgate::http::{
    AlgorithmConfig, BuildError, Change, ConfigLimiter, Enforcement, HeaderName, KeyConfig,
    LayerConfig, Per, QuotaConfig, RateLimitLayer, ReloadError, ReloadableLayer, RouteConfig,
    StatusCode,
};
use tollgate::QuotaError;
use tower::Layer;
use tower::{service_fn, Service, ServiceExt};

fn per_hour(count: u64, burst: u64) -> QuotaConfig {
    QuotaConfig {
        count,
        per: Per::Hour,
        burst: Some(burst),
        algorithm: AlgorithmConfig::Gcra,
    }
}

/// `count` per hour under `algorithm` (the window algorithms' burst is their count).
fn per_hour_with(count: u64, algorithm: AlgorithmConfig) -> QuotaConfig {
    QuotaConfig {
        count,
        per: Per::Hour,
        burst: None,
        algorithm,
    }
}

/// Keyed by `x-key`; a default of 10/hour and a `login` route of 3/hour.
fn config() -> LayerConfig {
    LayerConfig {
        key: KeyConfig::Header {
            name: HeaderName::from_static("x-key"),
            max_len: None,
        },
        default: Some(per_hour(10, 10)),
        routes: vec![RouteConfig {
            name: "login".into(),
            pattern: "POST /login".into(),
            quota: per_hour(3, 3),
            access: None,
        }],
        ..LayerConfig::default()
    }
}

/// One request through the layer: its status.
async fn send(layer: &ReloadableLayer, method: &str, path: &str, key: &str) -> StatusCode {
    let svc = layer.layer(service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(()))
    }));
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("x-key", key)
        .body(())
        .unwrap();
    svc.oneshot(req).await.unwrap().status()
}

/// How many of `n` requests on `key` pass.
async fn passed(layer: &ReloadableLayer, key: &str, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if send(layer, "GET", "/", key).await == StatusCode::OK {
            ok += 1;
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_changed_under_load_keeps_each_keys_debt() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    // `spent` uses its burst before the reload.
    assert_eq!(passed(&layer, "spent", 15).await, 10);
    // Requests on `busy` run while the quota changes: 4 tasks of 25.
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let layer = layer.clone();
            tokio::spawn(async move { passed(&layer, "busy", 25).await })
        })
        .collect();
    let mut faster = config();
    faster.default = Some(per_hour(20, 10)); // twice the rate, the same burst
    let changes = reloader.reload(&faster).unwrap();
    assert_eq!(
        changes,
        [Change::Quota {
            policy: "default".into(),
            from: per_hour(10, 10),
            to: per_hour(20, 10),
        }]
    );
    let mut busy = 0;
    for t in tasks {
        busy += t.await.unwrap();
    }
    // One burst between them, before and after the change (a permit refills in 3 minutes).
    assert!(busy <= 11, "{busy} passed: a fresh burst after the reload");
    assert!(busy >= 10, "{busy} passed");
    // A key that had used its burst stays limited under the new rule ...
    assert_eq!(passed(&layer, "spent", 5).await, 0);
    // ... and a new key gets the new quota's burst.
    assert_eq!(passed(&layer, "fresh", 15).await, 10);
    assert_eq!(
        layer.current().limiter("default").unwrap().quota().count(),
        20
    );
    assert_eq!(reloader.config(), faster);
}

#[tokio::test]
async fn a_lower_quota_leaves_no_room_for_a_key_over_it() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    assert_eq!(passed(&layer, "k", 4).await, 4);
    let mut slower = config();
    slower.default = Some(per_hour(4, 4));
    reloader.reload(&slower).unwrap();
    assert_eq!(passed(&layer, "k", 3).await, 0); // 4 used of a burst of 4
    assert_eq!(passed(&layer, "other", 6).await, 4);
}

#[tokio::test]
async fn a_refused_reload_changes_nothing_and_says_why() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    assert_eq!(passed(&layer, "k", 3).await, 3);

    let mut zero = config();
    zero.routes[0].quota = per_hour(0, 1);
    zero.default = Some(per_hour(100, 100)); // valid, and not applied either
    assert_eq!(
        reloader.reload(&zero),
        Err(ReloadError::Invalid(BuildError::Quota(
            QuotaError::ZeroCount
        )))
    );
    let mut unknown = config();
    unknown.default = Some(per_hour(100, 100));
    unknown.shadow.policies = vec!["logn".into()];
    assert_eq!(
        reloader.reload(&unknown),
        Err(ReloadError::Invalid(BuildError::UnknownPolicy(
            "logn".into()
        )))
    );
    let mut capped = config();
    capped.default = Some(per_hour(100, 100));
    capped.limiters.max_keys = Some(NonZeroUsize::new(5).unwrap());
    let refused = reloader.reload(&capped).unwrap_err();
    assert_eq!(refused, ReloadError::Shape(vec!["limiters"]));
    assert!(
        refused.to_string().contains("changed: limiters"),
        "{refused}"
    );

    // Nothing changed: the quotas, the keys' state, the configuration in force.
    assert_eq!(reloader.config(), config());
    assert_eq!(
        layer.current().limiter("default").unwrap().quota().count(),
        10
    );
    assert_eq!(layer.current().policies().count(), 2);
    assert_eq!(passed(&layer, "k", 10).await, 7);
    assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
}

/// `config()` with a `search` route of 2/hour in front of the others.
fn with_search() -> LayerConfig {
    let mut c = config();
    c.routes.insert(
        0,
        RouteConfig {
            name: "search".into(),
            pattern: "/search".into(),
            quota: per_hour(2, 2),
            access: None,
        },
    );
    c
}

#[tokio::test]
async fn a_new_route_limits_at_once_and_the_other_policies_keep_their_keys() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    // A service made before the reload, used after it: it changes layers at `poll_ready`.
    let mut early = layer.layer(service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(()))
    }));
    assert_eq!(passed(&layer, "k", 6).await, 6);
    for _ in 0..3 {
        assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
    }
    assert_eq!(
        reloader.reload(&with_search()).unwrap(),
        [
            Change::Shape(vec!["routes"]),
            Change::Added {
                policy: "search".into()
            }
        ]
    );
    assert_eq!(layer.current().policies().count(), 3);
    // The new route limits: 2 of 5 pass, through the service made before the reload too.
    let mut search = 0;
    for i in 0..5 {
        let req = Request::builder()
            .uri("/search")
            .header("x-key", "k")
            .body(())
            .unwrap();
        let status = if i % 2 == 0 {
            send(&layer, "GET", "/search", "k").await
        } else {
            early
                .ready()
                .await
                .unwrap()
                .call(req)
                .await
                .unwrap()
                .status()
        };
        search += usize::from(status == StatusCode::OK);
    }
    assert_eq!(search, 2);
    // The kept policies kept their keys: `k` used 6 of 10 and all 3 logins.
    assert_eq!(passed(&layer, "k", 10).await, 4);
    assert_eq!(
        send(&layer, "POST", "/login", "k").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(reloader.config(), with_search());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_change_layers_under_load_without_a_fresh_burst() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    // 4 long-lived services of 25 requests each on one key, while the shape changes twice.
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let mut svc = layer.layer(service_fn(|_req: Request<()>| async {
                Ok::<_, Infallible>(Response::new(()))
            }));
            tokio::spawn(async move {
                let mut ok = 0;
                for _ in 0..25 {
                    let req = Request::builder().header("x-key", "busy").body(()).unwrap();
                    let res = svc.ready().await.unwrap().call(req).await.unwrap();
                    ok += usize::from(res.status() == StatusCode::OK);
                    tokio::task::yield_now().await;
                }
                ok
            })
        })
        .collect();
    reloader.reload(&with_search()).unwrap();
    reloader.reload(&config()).unwrap();
    let mut busy = 0;
    for t in tasks {
        busy += t.await.unwrap();
    }
    // The default's one limiter throughout: one burst of 10 (a permit refills in 6 minutes).
    assert_eq!(busy, 10, "{busy} passed");
}

#[tokio::test]
async fn removing_a_policy_drops_it_and_the_rest_keep_limiting() {
    let (layer, reloader) = RateLimitLayer::reloadable(&with_search()).unwrap();
    for _ in 0..3 {
        assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
    }
    assert_eq!(passed(&layer, "k", 4).await, 4);
    let login = layer.current().limiter("login").unwrap().clone();
    // The routes but `login`: the search route's limiter goes, `login`'s is dropped.
    let mut fewer = with_search();
    fewer.routes.retain(|r| r.name == "search");
    assert_eq!(
        reloader.reload(&fewer).unwrap(),
        [
            Change::Shape(vec!["routes"]),
            Change::Removed {
                policy: "login".into()
            }
        ]
    );
    // `POST /login` now falls to the default, where `k` has 6 left of 10.
    assert!(layer.current().limiter("login").is_none());
    let mut left = 0;
    for _ in 0..8 {
        left += usize::from(send(&layer, "POST", "/login", "k").await == StatusCode::OK);
    }
    assert_eq!(left, 6);
    // Only this test holds the dropped limiter now: the layer let it go.
    assert_eq!(std::sync::Arc::strong_count(&login), 1);

    // Without a default, what no route matches is not limited.
    let mut no_default = fewer.clone();
    no_default.default = None;
    assert_eq!(
        reloader.reload(&no_default).unwrap(),
        [
            Change::Shape(vec!["default"]),
            Change::Removed {
                policy: "default".into()
            }
        ]
    );
    assert_eq!(passed(&layer, "k", 5).await, 5);
    // And a default added back starts empty.
    assert_eq!(
        reloader.reload(&fewer).unwrap(),
        [
            Change::Shape(vec!["default"]),
            Change::Added {
                policy: "default".into()
            }
        ]
    );
    assert_eq!(passed(&layer, "k", 15).await, 10);
}

#[tokio::test]
async fn a_changed_pattern_key_or_quota_keeps_the_policy_and_its_debt() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    for _ in 0..3 {
        assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
    }
    // A new pattern and a higher quota for `login`, and a new key header, at once.
    let mut moved = config();
    moved.routes[0].pattern = "POST /sign-in".into();
    moved.routes[0].quota = per_hour(6, 6);
    moved.key = KeyConfig::Header {
        name: HeaderName::from_static("x-key"),
        max_len: Some(64),
    };
    assert_eq!(
        reloader.reload(&moved).unwrap(),
        [
            Change::Shape(vec!["key", "routes"]),
            Change::Quota {
                policy: "login".into(),
                from: per_hour(3, 3),
                to: per_hour(6, 6),
            }
        ]
    );
    // `k` used 3 of 3: under 6/hour in bursts of 6 it has 3 left, not a fresh 6.
    let mut signed = 0;
    for _ in 0..6 {
        signed += usize::from(send(&layer, "POST", "/sign-in", "k").await == StatusCode::OK);
    }
    assert_eq!(signed, 3);
    // The old path is the default's now.
    assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
}

#[tokio::test]
async fn shadow_settings_switch_at_reload_and_only_when_changed() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    let mut shadow = config();
    shadow.shadow.policies = vec!["login".into()];
    assert_eq!(
        reloader.reload(&shadow).unwrap(),
        [Change::Enforcement {
            policy: "login".into(),
            to: Enforcement::Shadow,
        }]
    );
    for _ in 0..5 {
        assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
    }
    assert_eq!(layer.current().stats("login").unwrap().would_refuse, 2);
    // A switch made at run time stays through a reload that leaves shadow settings alone.
    assert!(layer
        .current()
        .set_enforcement("login", Enforcement::Enforce));
    let mut faster = shadow.clone();
    faster.default = Some(per_hour(20, 20));
    assert_eq!(reloader.reload(&faster).unwrap().len(), 1);
    assert_eq!(
        layer.current().enforcement("login"),
        Some(Enforcement::Enforce)
    );
    // The same configuration again changes nothing.
    assert_eq!(reloader.reload(&faster).unwrap(), []);
}

/// How many of `n` logins on `key` pass.
async fn logins(layer: &ReloadableLayer, key: &str, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if send(layer, "POST", "/login", key).await == StatusCode::OK {
            ok += 1;
        }
    }
    ok
}

#[tokio::test]
async fn each_algorithm_from_a_file_limits_requests_to_its_count() {
    for algorithm in [
        AlgorithmConfig::Gcra,
        AlgorithmConfig::FixedWindow {
            epoch_aligned: false,
        },
        AlgorithmConfig::FixedWindow {
            epoch_aligned: true,
        },
        AlgorithmConfig::SlidingWindow { sub_windows: 4 },
        AlgorithmConfig::SlidingLog,
        AlgorithmConfig::WeightedWindow,
    ] {
        let mut c = config();
        c.routes[0].quota = per_hour_with(3, algorithm);
        let (layer, _reloader) = RateLimitLayer::reloadable(&c).unwrap();
        assert_eq!(logins(&layer, "k", 6).await, 3, "{algorithm}");
        assert_eq!(logins(&layer, "other", 2).await, 2, "{algorithm}");
        // The default (GCRA) is its own limiter.
        assert_eq!(passed(&layer, "k", 12).await, 10, "{algorithm}");
        let login = layer.current().limiter("login").unwrap().clone();
        assert_eq!(login.algorithm(), algorithm);
        assert_eq!(login.len(), 2);
    }
}

#[tokio::test]
async fn a_changed_algorithm_starts_its_policys_keys_afresh_and_says_so() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    assert_eq!(logins(&layer, "k", 5).await, 3);
    assert_eq!(passed(&layer, "k", 12).await, 10);
    let before = layer.current().limiter("login").unwrap().clone();
    // A switch made at run time, which a reload of the algorithm alone leaves alone.
    assert!(layer
        .current()
        .set_enforcement("default", Enforcement::Shadow));
    let mut logged = config();
    logged.routes[0].quota = per_hour_with(3, AlgorithmConfig::SlidingLog);
    let changes = reloader.reload(&logged).unwrap();
    assert_eq!(
        changes,
        [Change::Algorithm {
            policy: "login".into(),
            from: per_hour(3, 3),
            to: per_hour_with(3, AlgorithmConfig::SlidingLog),
        }]
    );
    assert_eq!(
        changes[0].to_string(),
        "policy \"login\": algorithm gcra -> sliding_log, quota 3/hour (burst 3) -> \
         3/hour, sliding_log; its keys start afresh"
    );
    assert_eq!(
        layer.current().enforcement("default"),
        Some(Enforcement::Shadow)
    );
    assert!(layer
        .current()
        .set_enforcement("default", Enforcement::Enforce));
    let after = layer.current().limiter("login").unwrap().clone();
    assert!(!std::sync::Arc::ptr_eq(&before, &after));
    assert!(matches!(*after, ConfigLimiter::SlidingLog(_)));
    // A fresh burst for `login` once; the default kept its limiter and `k`'s debt.
    assert_eq!(logins(&layer, "k", 5).await, 3);
    assert_eq!(passed(&layer, "k", 3).await, 0);
    assert_eq!(reloader.config(), logged);
}

#[tokio::test]
async fn a_quota_changed_within_a_window_algorithm_keeps_the_keys_count() {
    let mut c = config();
    c.routes[0].quota = per_hour_with(3, AlgorithmConfig::SlidingLog);
    let (layer, reloader) = RateLimitLayer::reloadable(&c).unwrap();
    assert_eq!(logins(&layer, "k", 5).await, 3);
    let before = layer.current().limiter("login").unwrap().clone();
    let mut more = c.clone();
    more.routes[0].quota = per_hour_with(5, AlgorithmConfig::SlidingLog);
    assert_eq!(
        reloader.reload(&more).unwrap(),
        [Change::Quota {
            policy: "login".into(),
            from: per_hour_with(3, AlgorithmConfig::SlidingLog),
            to: per_hour_with(5, AlgorithmConfig::SlidingLog),
        }]
    );
    let after = layer.current().limiter("login").unwrap().clone();
    assert!(std::sync::Arc::ptr_eq(&before, &after));
    // 3 of 5 in the last hour: 2 more, not a fresh 5.
    assert_eq!(logins(&layer, "k", 5).await, 2);
}

#[tokio::test]
async fn an_algorithm_changed_with_the_layers_shape_is_reported_with_it() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    assert_eq!(logins(&layer, "k", 5).await, 3);
    let mut moved = config();
    moved.routes[0].pattern = "POST /sign-in".into();
    moved.routes[0].quota = per_hour_with(3, AlgorithmConfig::WeightedWindow);
    assert_eq!(
        reloader.reload(&moved).unwrap(),
        [
            Change::Shape(vec!["routes"]),
            Change::Algorithm {
                policy: "login".into(),
                from: per_hour(3, 3),
                to: per_hour_with(3, AlgorithmConfig::WeightedWindow),
            }
        ]
    );
    let mut signed = 0;
    for _ in 0..5 {
        signed += usize::from(send(&layer, "POST", "/sign-in", "k").await == StatusCode::OK);
    }
    assert_eq!(signed, 3);
}

#[tokio::test]
async fn a_refused_algorithm_changes_nothing() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    assert_eq!(logins(&layer, "k", 2).await, 2);
    let mut bad = config();
    bad.routes[0].quota = per_hour_with(3, AlgorithmConfig::SlidingWindow { sub_windows: 0 });
    assert!(matches!(
        reloader.reload(&bad),
        Err(ReloadError::Invalid(BuildError::Quota(
            QuotaError::Unsupported(_)
        )))
    ));
    assert_eq!(logins(&layer, "k", 5).await, 1);
    assert_eq!(reloader.config(), config());
}
