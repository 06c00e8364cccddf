//! Feature `metrics`: what the limiters report, read back through `metrics-util`'s debugging
//! recorder on scripted scenarios (a manual clock, so every count is known in advance).
//!
//! Each test installs its own recorder *locally* while it builds its limiters: handles are
//! registered at build time, so the limiter keeps reporting to that recorder afterwards, and
//! tests running in parallel never see each other's counts.

use std::time::Duration;

#[path = "support/mod.rs"]
mod http_support;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tollgate::metric_names as names;
use tollgate::{
    AcquireError, ConcurrencyLimiter, KeyedConcurrencyLimiter, KeyedRateLimiter, ManualClock,
    Quota, RateLimiter, SmoothRateLimiter,
};

/// What the recorder holds at one moment (a snapshot drains it, so each test takes one).
struct Seen(Vec<(metrics_util::CompositeKey, DebugValue)>);

impl Seen {
    fn take(snap: &Snapshotter) -> Seen {
        Seen(
            snap.snapshot()
                .into_vec()
                .into_iter()
                .map(|(k, _, _, v)| (k, v))
                .collect(),
        )
    }

    /// The value of the series `name` whose labels include every pair of `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        self.0
            .iter()
            .find(|(key, _)| {
                let key = key.key();
                key.name() == name
                    && labels
                        .iter()
                        .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
            })
            .map(|(_, v)| v)
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.value(name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            None => 0,
            other => panic!("{name} {labels:?} is not a counter: {other:?}"),
        }
    }

    fn decisions(&self, limiter: &str, outcome: &str) -> u64 {
        self.counter(
            names::DECISIONS,
            &[(names::LIMITER, limiter), (names::OUTCOME, outcome)],
        )
    }

    /// Requests through the HTTP layer under `policy` that ended with `outcome`.
    fn http(&self, policy: &str, outcome: &str) -> u64 {
        self.counter(
            names::HTTP_REQUESTS,
            &[(names::POLICY, policy), (names::OUTCOME, outcome)],
        )
    }

    fn waits(&self, limiter: &str, event: &str) -> u64 {
        self.counter(
            names::WAITS,
            &[(names::LIMITER, limiter), (names::EVENT, event)],
        )
    }
}

fn recorder() -> (DebuggingRecorder, Snapshotter) {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    (recorder, snap)
}

#[test]
fn direct_limiter_counts_every_outcome_and_permit() {
    let (recorder, snap) = recorder();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder(Quota::per_second(3).unwrap())
            .clock(clock.clone())
            .name("api")
            .build()
    });
    let granted = (0..5).filter(|_| limiter.try_acquire()).count();
    assert_eq!(granted, 3);
    assert!(limiter.try_acquire_n(10).is_err()); // more than the burst
    assert!(!limiter.check().allowed);
    assert!(limiter.try_acquire_n(0).is_ok()); // nothing asked: allowed, no permit
    clock.advance(Duration::from_secs(1));
    assert!(limiter.check_n(2).allowed);
    let _ = limiter.peek(); // a look, not a decision

    let seen = Seen::take(&snap);
    assert_eq!(seen.decisions("api", names::OUTCOME_ALLOWED), 3 + 1 + 1);
    assert_eq!(seen.decisions("api", names::OUTCOME_DENIED), 2 + 1);
    assert_eq!(seen.decisions("api", names::OUTCOME_EXCEEDS_BURST), 1);
    assert_eq!(
        seen.counter(names::PERMITS, &[(names::LIMITER, "api")]),
        3 + 2
    );
}

#[test]
fn blocking_waits_are_counted_with_their_time() {
    let (recorder, snap) = recorder();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
            .clock(clock.clone())
            .name("paced")
            .build()
    });
    assert_eq!(limiter.acquire(), Ok(Duration::ZERO)); // no wait: a plain decision
    assert_eq!(limiter.acquire(), Ok(Duration::from_millis(100)));
    assert!(limiter.try_acquire_for(Duration::from_millis(1)).is_err());

    let seen = Seen::take(&snap);
    assert_eq!(seen.waits("paced", "started"), 1);
    assert_eq!(seen.waits("paced", "granted"), 1);
    assert_eq!(seen.decisions("paced", names::OUTCOME_ALLOWED), 2);
    assert_eq!(seen.decisions("paced", names::OUTCOME_DENIED), 1);
    match seen.value(names::WAIT_SECONDS, &[(names::LIMITER, "paced")]) {
        Some(DebugValue::Histogram(v)) => {
            assert_eq!(v.len(), 1);
            assert!((v[0].into_inner() - 0.1).abs() < 1e-9, "{v:?}");
        }
        other => panic!("no wait histogram: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_dropped_async_wait_is_counted_as_cancelled() {
    let (recorder, snap) = recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder(Quota::per_second(1).unwrap())
            .clock(tollgate::TokioClock::new())
            .name("async")
            .build()
    });
    assert!(limiter.try_acquire());
    let waited = tokio::time::timeout(Duration::from_millis(10), limiter.acquire_async()).await;
    assert!(waited.is_err(), "the wait was abandoned");
    // The abandoned booking was given back: 10 ms of the second have passed.
    assert_eq!(
        limiter.acquire_async().await,
        Ok(Duration::from_millis(990))
    );

    let seen = Seen::take(&snap);
    assert_eq!(seen.waits("async", "started"), 2);
    assert_eq!(seen.waits("async", "cancelled"), 1);
    assert_eq!(seen.waits("async", "granted"), 1);
}

#[test]
fn sweeps_report_evictions_and_keys() {
    let (recorder, snap) = recorder();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        KeyedRateLimiter::<u32>::builder(Quota::per_second(5).unwrap())
            .clock(clock.clone())
            .name("per-user")
            .build()
    });
    for user in 0..4 {
        assert!(limiter.try_acquire(&user));
    }
    assert!(limiter.try_acquire_n(&9, 5).is_ok()); // user 9 drained: still tracked later
    clock.advance(Duration::from_millis(300)); // users 0..4 full again, 9 not
    assert_eq!(limiter.sweep_now(), 4);

    let seen = Seen::take(&snap);
    assert_eq!(seen.decisions("per-user", names::OUTCOME_ALLOWED), 5);
    assert_eq!(
        seen.counter(names::SWEEPS, &[(names::LIMITER, "per-user")]),
        1
    );
    assert_eq!(
        seen.counter(names::EVICTED, &[(names::LIMITER, "per-user")]),
        4
    );
    assert_eq!(
        seen.value(names::KEYS, &[(names::LIMITER, "per-user")]),
        Some(&DebugValue::Gauge(1.0.into()))
    );
}

#[test]
fn smooth_limiter_counts_decisions_and_waits() {
    let (recorder, snap) = recorder();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        SmoothRateLimiter::builder(5.0)
            .clock(clock.clone())
            .name("guava")
            .build()
            .unwrap()
    });
    assert!(limiter.try_acquire()); // pays later: the next one must wait 200 ms
    assert!(!limiter.try_acquire());
    assert_eq!(limiter.acquire(), Ok(Duration::from_millis(200)));

    let seen = Seen::take(&snap);
    assert_eq!(seen.decisions("guava", names::OUTCOME_ALLOWED), 2);
    assert_eq!(seen.decisions("guava", names::OUTCOME_DENIED), 1);
    assert_eq!(seen.waits("guava", "granted"), 1);
}

#[test]
fn an_unnamed_limiter_is_labelled_unnamed() {
    let (recorder, snap) = recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder(Quota::per_second(1).unwrap())
            .clock(ManualClock::new())
            .build()
    });
    assert!(limiter.try_acquire());
    let seen = Seen::take(&snap);
    assert_eq!(seen.decisions(names::UNNAMED, names::OUTCOME_ALLOWED), 1);
}

#[test]
fn reservations_are_decisions() {
    let (recorder, snap) = recorder();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        KeyedRateLimiter::<&str>::builder(Quota::per_second(2).unwrap())
            .clock(clock.clone())
            .name("booked")
            .build()
    });
    let r = limiter.reserve_n(&"k", 2).unwrap();
    assert!(limiter
        .try_reserve_for(&"k", Duration::from_millis(1))
        .is_err());
    r.cancel();
    let seen = Seen::take(&snap);
    assert_eq!(seen.decisions("booked", names::OUTCOME_ALLOWED), 1);
    assert_eq!(seen.decisions("booked", names::OUTCOME_DENIED), 1);
    assert_eq!(
        seen.counter(names::PERMITS, &[(names::LIMITER, "booked")]),
        2
    );
}

impl Seen {
    fn gauge(&self, name: &str, limiter: &str) -> Option<f64> {
        match self.value(name, &[(names::LIMITER, limiter)]) {
            Some(DebugValue::Gauge(v)) => Some(v.into_inner()),
            None => None,
            other => panic!("{name} {limiter} is not a gauge: {other:?}"),
        }
    }

    fn in_flight(&self, limiter: &str) -> f64 {
        self.gauge(names::IN_FLIGHT, limiter)
            .unwrap_or_else(|| panic!("no in-flight gauge for {limiter}"))
    }
}

/// The direct concurrency limiter: acquires by outcome (`allowed`, `at_capacity`,
/// `exceeds_burst`), permits, and the in-flight gauge raised on grant and lowered on release
/// (a forgotten permit stays in flight, as in the limiter).
#[test]
fn concurrency_limiter_counts_acquires_and_in_flight() {
    let (recorder, snap) = recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimiter::builder(3).unwrap().name("db").build()
    });
    let a = limiter.try_acquire_n(2).unwrap();
    let b = limiter.try_acquire().unwrap();
    assert!(limiter.try_acquire().is_none());
    assert!(matches!(
        limiter.try_acquire_n(4),
        Err(AcquireError::ExceedsBurst { .. })
    ));
    assert!(limiter.try_acquire_for(Duration::ZERO).is_err()); // at capacity, no queueing
    let seen = Seen::take(&snap);
    assert_eq!(seen.in_flight("db"), 3.0);
    assert_eq!(seen.decisions("db", names::OUTCOME_ALLOWED), 2);
    assert_eq!(seen.decisions("db", names::OUTCOME_AT_CAPACITY), 2);
    assert_eq!(seen.decisions("db", names::OUTCOME_EXCEEDS_BURST), 1);
    assert_eq!(seen.counter(names::PERMITS, &[(names::LIMITER, "db")]), 3);

    // A snapshot drains what it reads (a gauge too): later ones hold the change since.
    let mut in_flight = seen.in_flight("db");
    drop(a);
    b.forget(); // kept for good: still in flight
    let c = limiter.try_acquire().unwrap();
    in_flight += Seen::take(&snap).in_flight("db");
    assert_eq!(in_flight, 2.0);
    assert_eq!(limiter.in_flight(), 2);
    drop(c);
    in_flight += Seen::take(&snap).in_flight("db");
    assert_eq!(in_flight, 1.0);
}

/// A blocking wait on a concurrency limiter: started, then granted when a holder releases
/// (with its time in the histogram), or refused at its timeout; the gauge counts the waiter's
/// permits once granted.
#[test]
fn concurrency_waits_are_counted() {
    let (recorder, snap) = recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimiter::builder(1).unwrap().name("pool").build()
    });
    let held = limiter.try_acquire().unwrap();
    assert!(limiter.try_acquire_for(Duration::from_millis(1)).is_err()); // queued, timed out
    std::thread::scope(|s| {
        let waiter = s.spawn(|| limiter.acquire().map(|p| p.forget()));
        // Released only once the waiter is queued behind `held`.
        while limiter.in_flight() == 1 && !waiter.is_finished() && !queued(&limiter) {
            std::thread::yield_now();
        }
        drop(held);
        waiter.join().unwrap().unwrap();
    });
    let seen = Seen::take(&snap);
    assert_eq!(seen.waits("pool", "started"), 2);
    assert_eq!(seen.waits("pool", "refused"), 1);
    assert_eq!(seen.waits("pool", "granted"), 1);
    assert_eq!(seen.decisions("pool", names::OUTCOME_ALLOWED), 2);
    assert_eq!(seen.decisions("pool", names::OUTCOME_AT_CAPACITY), 1);
    assert_eq!(seen.in_flight("pool"), 1.0); // the waiter's, forgotten
    assert!(matches!(
        seen.value(names::WAIT_SECONDS, &[(names::LIMITER, "pool")]),
        Some(DebugValue::Histogram(v)) if v.len() == 1
    ));
}

/// Whether a waiter is queued on `limiter` (its `Debug` shows the queue).
fn queued(limiter: &ConcurrencyLimiter) -> bool {
    format!("{limiter:?}").contains("queued: true")
}

/// An abandoned async wait is `cancelled`, and holds nothing in the gauge.
#[tokio::test(start_paused = true)]
async fn a_dropped_concurrency_wait_is_cancelled() {
    let (recorder, snap) = recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimiter::builder(1)
            .unwrap()
            .name("async-pool")
            .build()
    });
    let held = limiter.try_acquire().unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(10), limiter.acquire_async()).await;
    assert!(waited.is_err(), "the wait was abandoned");
    drop(held);
    let seen = Seen::take(&snap);
    assert_eq!(seen.waits("async-pool", "started"), 1);
    assert_eq!(seen.waits("async-pool", "cancelled"), 1);
    assert_eq!(seen.waits("async-pool", "granted"), 0);
    assert_eq!(seen.in_flight("async-pool"), 0.0);
}

/// The keyed concurrency limiter: the gauge sums every key's permits, the key cap's refusal
/// is `at_capacity`, and a sweep reports its evictions and the keys left.
#[test]
fn keyed_concurrency_limiter_counts_keys_and_in_flight() {
    let (recorder, snap) = recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        KeyedConcurrencyLimiter::<u32>::builder(2)
            .unwrap()
            .name("exports")
            .max_keys(std::num::NonZeroUsize::new(3).unwrap())
            .when_full(tollgate::WhenFull::Deny)
            .build()
    });
    let a = limiter.try_acquire_n(&1, 2).unwrap();
    let b = limiter.try_acquire(&2).unwrap();
    let c = limiter.try_acquire(&3).unwrap();
    assert!(limiter.try_acquire(&1).is_none()); // key 1 at its limit
    assert!(limiter.try_acquire(&4).is_none()); // the cap: three busy keys
                                                // A snapshot drains what it reads (a gauge too): later ones hold the change since.
    let seen = Seen::take(&snap);
    assert_eq!(seen.decisions("exports", names::OUTCOME_ALLOWED), 3);
    // Key 1 busy is `at_capacity`; key 4 refused by the full table is counted apart.
    assert_eq!(seen.decisions("exports", names::OUTCOME_AT_CAPACITY), 1);
    assert_eq!(seen.decisions("exports", names::OUTCOME_KEY_CAP_REACHED), 1);
    let mut in_flight = seen.in_flight("exports");
    assert_eq!(in_flight, 4.0);
    drop((b, c));
    assert_eq!(limiter.sweep_now(), 2); // keys 2 and 3 idle

    let seen = Seen::take(&snap);
    in_flight += seen.in_flight("exports");
    assert_eq!(in_flight, 2.0);
    assert_eq!(
        seen.counter(names::SWEEPS, &[(names::LIMITER, "exports")]),
        1
    );
    assert_eq!(
        seen.counter(names::EVICTED, &[(names::LIMITER, "exports")]),
        2
    );
    assert_eq!(seen.gauge(names::KEYS, "exports"), Some(1.0));
    drop(a);
    in_flight += Seen::take(&snap).in_flight("exports");
    assert_eq!(in_flight, 0.0);
}

/// A rate limiter registers no in-flight gauge and no `at_capacity` series.
#[test]
fn a_rate_limiter_has_no_concurrency_series() {
    let (recorder, snap) = recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder(Quota::per_second(1).unwrap())
            .clock(ManualClock::new())
            .name("rate")
            .build()
    });
    assert!(limiter.try_acquire());
    let seen = Seen::take(&snap);
    assert_eq!(seen.gauge(names::IN_FLIGHT, "rate"), None);
    assert!(seen
        .value(
            names::DECISIONS,
            &[(names::OUTCOME, names::OUTCOME_AT_CAPACITY)]
        )
        .is_none());
}

/// A keyed rate limiter counts a new key refused by its full key table as `key_cap_reached`,
/// apart from the tracked key's rate refusals (`denied`), whichever method meets the cap; a
/// direct limiter, which has no key table, registers no such series.
#[test]
fn a_full_key_table_is_counted_apart_from_rate_refusals() {
    let (recorder, snap) = recorder();
    let (keyed, direct) = metrics::with_local_recorder(&recorder, || {
        let keyed = KeyedRateLimiter::<u32>::builder(Quota::per_second(1).unwrap())
            .clock(ManualClock::new())
            .name("capped")
            .max_keys(std::num::NonZeroUsize::MIN)
            .when_full(tollgate::WhenFull::Deny)
            .build();
        let direct = RateLimiter::builder(Quota::per_second(1).unwrap())
            .clock(ManualClock::new())
            .name("direct")
            .build();
        (keyed, direct)
    });
    assert!(keyed.try_acquire(&1));
    assert!(!keyed.try_acquire(&1)); // the rate
    assert!(!keyed.check(&1).allowed); // the rate
    assert!(!keyed.try_acquire(&2)); // the cap
    assert!(keyed.check(&2).is_key_cap_reached());
    assert!(matches!(
        keyed.try_acquire_n(&2, 1),
        Err(AcquireError::KeyCapReached { .. })
    ));
    assert!(keyed.reserve(&2).is_err());
    let _ = keyed.peek(&2); // a look, not a decision
    assert!(direct.try_acquire());

    let seen = Seen::take(&snap);
    assert_eq!(seen.decisions("capped", names::OUTCOME_ALLOWED), 1);
    assert_eq!(seen.decisions("capped", names::OUTCOME_DENIED), 2);
    assert_eq!(seen.decisions("capped", names::OUTCOME_KEY_CAP_REACHED), 4);
    assert!(seen
        .value(
            names::DECISIONS,
            &[
                (names::LIMITER, "direct"),
                (names::OUTCOME, names::OUTCOME_KEY_CAP_REACHED)
            ]
        )
        .is_none());
}

/// The HTTP layer counts a new key its limiter's full key table refused as `key_cap_reached`
/// (a `503`), apart from `refused` (a `429`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_layer_counts_a_full_key_table_apart() {
    use std::sync::Arc;
    use tollgate::http::{HeaderKey, HeaderName, RateLimitLayer};

    let (recorder, snap) = recorder();
    let layer = metrics::with_local_recorder(&recorder, || {
        let keys = Arc::new(
            KeyedRateLimiter::<String>::builder(Quota::per_minute(1).unwrap())
                .clock(ManualClock::new())
                .max_keys(std::num::NonZeroUsize::MIN)
                .build(),
        );
        RateLimitLayer::with_limiters(HeaderKey::new(HeaderName::from_static("x-api-key")))
            .limiter(keys)
            .policy_name("api")
            .build()
            .unwrap()
    });
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer.clone());
    let addr = http_support::serve_axum(app).await;
    let client = http_support::client();
    let send = |key: &'static str| {
        let client = client.clone();
        async move {
            http_support::send(&client, addr, "GET", "/", &[("x-api-key", key)])
                .await
                .status
        }
    };
    assert_eq!(send("k1").await, 200);
    assert_eq!(send("k1").await, 429);
    assert_eq!(send("k2").await, 503);

    let seen = Seen::take(&snap);
    let http = |outcome| seen.http("api", outcome);
    assert_eq!(
        (http("allowed"), http("refused"), http("key_cap_reached")),
        (1, 1, 1)
    );
}

/// The HTTP layer over a real socket: per policy and outcome, the same counts as
/// `RateLimitLayer::stats`, and the limiter the layer built from a quota is named after its
/// policy. A shadow rollout seen from the metrics: 10 requests over a limit of 4 in shadow
/// are all served and 6 counted as `would_refuse`; enforced, the next one is `refused`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_layer_counts_each_request_once_by_policy_and_outcome() {
    use tollgate::http::{Enforcement, GlobalKey, RateLimitLayer};

    let (recorder, snap) = recorder();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(GlobalKey)
            .per_hour(4)
            .policy_name("api")
            .shadow()
            .build()
            .unwrap()
    });
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer.clone());
    let addr = http_support::serve_axum(app).await;
    let client = http_support::client();
    for _ in 0..10 {
        let got = http_support::get(&client, addr, "/").await;
        assert_eq!(got.status, 200);
    }
    assert!(layer.set_enforcement("api", Enforcement::Enforce));
    assert_eq!(http_support::get(&client, addr, "/").await.status, 429);

    let seen = Seen::take(&snap);
    let http = |outcome| seen.http("api", outcome);
    assert_eq!(
        (http("allowed"), http("would_refuse"), http("refused")),
        (4, 6, 1)
    );
    let stats = layer.stats("api").unwrap();
    assert_eq!(
        (stats.allowed, stats.would_refuse, stats.refused),
        (4, 6, 1)
    );
    // The layer's own limiter reports under the policy's name.
    assert_eq!(seen.decisions("api", names::OUTCOME_ALLOWED), 4);
    assert_eq!(seen.decisions("api", names::OUTCOME_DENIED), 7);
}

/// A request that can never pass (its cost above the burst) is counted as `never`, apart from
/// the `refused` ones that may pass later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_grantable_request_is_counted_apart() {
    use tollgate::http::{GlobalKey, RateLimitLayer};

    let (recorder, snap) = recorder();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(GlobalKey)
            .per_hour(3)
            .policy_name("bulk")
            .cost(|req| if req.uri.path() == "/big" { 10 } else { 1 })
            .build()
            .unwrap()
    });
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .route("/big", axum::routing::get(|| async { "big" }))
        .layer(layer.clone());
    let addr = http_support::serve_axum(app).await;
    let client = http_support::client();
    let big = http_support::get(&client, addr, "/big").await;
    assert_eq!(big.status, 429);
    assert!(big.headers.get("retry-after").is_none());
    for _ in 0..4 {
        let _ = http_support::get(&client, addr, "/").await;
    }
    let seen = Seen::take(&snap);
    let http = |outcome| seen.http("bulk", outcome);
    assert_eq!((http("allowed"), http("refused"), http("never")), (3, 1, 1));
    let stats = layer.stats("bulk").unwrap();
    assert_eq!((stats.allowed, stats.refused, stats.never), (3, 1, 1));
}

#[test]
fn every_series_is_described_with_its_unit() {
    let (recorder, snap) = recorder();
    let clock = ManualClock::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        RateLimiter::builder(Quota::per_second(1).unwrap())
            .clock(clock.clone())
            .name("described")
            .build()
    });
    let _ = limiter.try_acquire();
    let described: Vec<_> = snap
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, unit, help, _)| (key.key().name().to_owned(), unit, help))
        .collect();
    for name in [names::DECISIONS, names::PERMITS, names::WAITS, names::KEYS] {
        let (_, unit, help) = described
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("{name} not registered"));
        assert_eq!(*unit, Some(metrics::Unit::Count), "{name}");
        assert!(
            help.as_deref().is_some_and(|h| !h.is_empty()),
            "{name} has no help text"
        );
    }
    let (_, unit, _) = described
        .iter()
        .find(|(n, _, _)| n == names::WAIT_SECONDS)
        .unwrap();
    assert_eq!(*unit, Some(metrics::Unit::Seconds));
    // Every metric the crate names has a description, once.
    for (i, (name, _, help)) in names::DESCRIPTIONS.iter().enumerate() {
        assert!(!help.is_empty() && help.ends_with('.'), "{name}");
        assert!(
            names::DESCRIPTIONS[..i].iter().all(|(n, _, _)| n != name),
            "{name} described twice"
        );
    }
}

// Feature `prometheus` (run by .ci/run): the exporter is heavy for the default test build.
#[cfg(feature = "prometheus")]
#[test]
fn a_prometheus_scrape_has_help_lines() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let limiter = metrics::with_local_recorder(&recorder, || {
        KeyedRateLimiter::<u32>::builder(Quota::per_second(1).unwrap())
            .name("scraped")
            .build()
    });
    let _ = limiter.try_acquire(&1);
    let page = handle.render();
    assert!(
        page.contains(
            "# HELP tollgate_decisions_total Decisions, by limiter and outcome (key_cap_reached: "
        ),
        "{page}"
    );
}

/// A server that cannot key its requests (a `PeerIp` layer served without `ConnectInfo`) is
/// counted as `misconfigured`, apart from the clients' `key_error`s, so that an alert can fire
/// on it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misconfigured_server_is_counted_apart_from_client_key_errors() {
    use tollgate::http::{ClientIp, PeerIp, RateLimitLayer};

    let (recorder, snap) = recorder();
    let (peer, client_ip) = metrics::with_local_recorder(&recorder, || {
        let peer = RateLimitLayer::builder(PeerIp::new())
            .per_hour(5)
            .policy_name("peer")
            .build()
            .unwrap();
        let client_ip =
            RateLimitLayer::builder(ClientIp::trusted_proxies(["127.0.0.1/32".parse().unwrap()]))
                .per_hour(5)
                .policy_name("proxied")
                .build()
                .unwrap();
        (peer, client_ip)
    });
    let handler = axum::routing::get(|| async { "ok" });
    let app = axum::Router::new()
        .route("/peer", handler.clone().layer(peer))
        .route("/proxied", handler.layer(client_ip));
    let addr = http_support::serve_axum_without_connect_info(app).await;
    let client = http_support::client();
    for _ in 0..4 {
        assert_eq!(http_support::get(&client, addr, "/peer").await.status, 500);
    }
    // Without a peer address the trusted-proxy check cannot run either: the server's fault.
    let xff = [("x-forwarded-for", "unknown")];
    let got = http_support::send(&client, addr, "GET", "/proxied", &xff).await;
    assert_eq!(got.status, 500);

    let seen = Seen::take(&snap);
    let http = |policy, outcome| seen.http(policy, outcome);
    assert_eq!(
        (http("peer", "misconfigured"), http("peer", "key_error")),
        (4, 0)
    );
    assert_eq!(
        (
            http("proxied", "misconfigured"),
            http("proxied", "key_error")
        ),
        (1, 0)
    );
}
