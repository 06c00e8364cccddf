//! A layer built from a `LayerConfig` and reloaded while requests run: quotas change in place
//! (no fresh burst), shadow settings switch, and a refused reload changes nothing.
//!
//! The quotas are per hour, so a permit refills every few minutes: what the tests count is
//! what the burst admits, whatever the machine's speed. Requests go through the layer in
//! process (tower's `oneshot`), a bounded number of them.

use std::convert::Infallible;

use http::{Request, Response};
use tollgate::http::{
    BuildError, Change, ConfigLayer, Enforcement, HeaderName, KeyConfig, LayerConfig, Per,
    QuotaConfig, RateLimitLayer, ReloadError, RouteConfig, StatusCode,
};
use tollgate::QuotaError;
use tower::Layer;
use tower::{service_fn, ServiceExt};

fn per_hour(count: u64, burst: u64) -> QuotaConfig {
    QuotaConfig {
        count,
        per: Per::Hour,
        burst: Some(burst),
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
async fn send(layer: &ConfigLayer, method: &str, path: &str, key: &str) -> StatusCode {
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
async fn passed(layer: &ConfigLayer, key: &str, n: usize) -> usize {
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
    assert_eq!(layer.limiter("default").unwrap().quota().count(), 20);
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
    let mut more = config();
    more.default = Some(per_hour(100, 100));
    more.routes.push(RouteConfig {
        name: "search".into(),
        pattern: "/search".into(),
        quota: per_hour(1, 1),
        access: None,
    });
    let refused = reloader.reload(&more).unwrap_err();
    assert_eq!(refused, ReloadError::Shape(vec!["routes"]));
    assert!(refused.to_string().contains("changed: routes"), "{refused}");

    // Nothing changed: the quotas, the keys' state, the configuration in force.
    assert_eq!(reloader.config(), config());
    assert_eq!(layer.limiter("default").unwrap().quota().count(), 10);
    assert_eq!(layer.policies().count(), 2);
    assert_eq!(passed(&layer, "k", 10).await, 7);
    assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
}

#[tokio::test]
async fn removing_a_policy_is_refused_and_it_keeps_limiting() {
    let (layer, reloader) = RateLimitLayer::reloadable(&config()).unwrap();
    let mut fewer = config();
    fewer.routes.clear();
    assert_eq!(
        reloader.reload(&fewer),
        Err(ReloadError::Shape(vec!["routes"]))
    );
    let mut no_default = config();
    no_default.default = None;
    assert_eq!(
        reloader.reload(&no_default),
        Err(ReloadError::Shape(vec!["default"]))
    );
    for _ in 0..3 {
        assert_eq!(send(&layer, "POST", "/login", "k").await, StatusCode::OK);
    }
    assert_eq!(
        send(&layer, "POST", "/login", "k").await,
        StatusCode::TOO_MANY_REQUESTS
    );
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
    assert_eq!(layer.stats("login").unwrap().would_refuse, 2);
    // A switch made at run time stays through a reload that leaves shadow settings alone.
    assert!(layer.set_enforcement("login", Enforcement::Enforce));
    let mut faster = shadow.clone();
    faster.default = Some(per_hour(20, 20));
    assert_eq!(reloader.reload(&faster).unwrap().len(), 1);
    assert_eq!(layer.enforcement("login"), Some(Enforcement::Enforce));
    // The same configuration again changes nothing.
    assert_eq!(reloader.reload(&faster).unwrap(), []);
}
