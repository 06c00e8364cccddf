//! The failure policy decides only when Redis could not answer, and a limiter
//! starts while Redis is down. Real servers on loopback, each put in the state
//! that produces one row of the guide's table; every loop is bounded.
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::Arc;
use std::time::Duration;

use redis_support::{eventually, redis_decides, RedisCluster, RedisServer};
use tollgate::redis::{
    FailurePolicy, RedisAlgorithm, RedisConcurrencyLimiter, RedisLimitError, RedisRateLimiter,
    ServerErrorKind, UnavailableKind,
};
use tollgate::{Gcra, KeyedRateLimiter, Quota, SlidingLog};

/// No stall of a loaded machine reaches it: past it, a call these tests need answered (or
/// refused, or failed with a given kind) would be a `Timeout`, or its policy's decision.
const DEADLINE: Duration = Duration::from_secs(2);

fn policies<A: RedisAlgorithm>(alg: A) -> Vec<FailurePolicy<A>> {
    let local = KeyedRateLimiter::<String>::builder(Quota::per_second(5).unwrap())
        .algorithm(alg)
        .unwrap()
        .build();
    vec![
        FailurePolicy::Error,
        FailurePolicy::Open,
        FailurePolicy::Closed {
            retry_after: Duration::from_secs(1),
        },
        FailurePolicy::Fallback(Arc::new(local)),
    ]
}

async fn limiter<A: RedisAlgorithm>(
    url: &str,
    alg: A,
    policy: FailurePolicy<A>,
) -> RedisRateLimiter<A> {
    RedisRateLimiter::builder(Quota::per_second(10).unwrap())
        .algorithm(alg)
        .unwrap()
        .deadline(DEADLINE)
        .on_failure(policy)
        .connect(url)
        .await
        .unwrap()
}

fn set(server: &RedisServer, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query(&mut server.conn()).unwrap();
}

/// A foreign value at a state key is a typed error under every policy: never admitted,
/// refused or handed to the fallback. A string where the algorithm keeps one is the scripts'
/// own refusal (kind `Script`, code `TOLLGATE`); another Redis type is `WrongType`.
async fn foreign_values<A: RedisAlgorithm>(server: &RedisServer, alg: A) {
    // GCRA keeps a string, the sliding log a sorted set.
    let string = if A::NAME == "log" {
        (ServerErrorKind::WrongType, "WRONGTYPE")
    } else {
        (ServerErrorKind::Script, "TOLLGATE")
    };
    for policy in policies(alg) {
        let name = format!("{policy:?}");
        let l = limiter(&server.url(), alg, policy).await;
        let key = l.state_key("k");
        let values: [(&[&str], (ServerErrorKind, &str)); 4] = [
            (&["SET", &key, "hello"], string),
            (&["SET", &key, "1e300"], string),
            (&["SET", &key, "-5"], string),
            (
                &["RPUSH", &key, "x"],
                (ServerErrorKind::WrongType, "WRONGTYPE"),
            ),
        ];
        for (write, (kind, code)) in values {
            let _: () = redis::cmd("DEL")
                .arg(&key)
                .query(&mut server.conn())
                .unwrap();
            set(server, write);
            for call in 0..2 {
                let r = if call == 0 {
                    l.check("k").await
                } else {
                    l.peek("k").await
                };
                let e = match r {
                    Ok(d) => panic!("{} {name} {write:?}: decided {d:?}", A::NAME),
                    Err(e) => e,
                };
                assert!(!e.is_unavailable(), "{} {name} {write:?}: {e}", A::NAME);
                let RedisLimitError::Server(s) = &e else {
                    panic!("{} {name} {write:?}: {e:?}", A::NAME);
                };
                assert_eq!(s.kind(), kind, "{} {name} {write:?}: {e}", A::NAME);
                assert_eq!(s.code(), Some(code), "{e}");
                // The redis client's error is reachable, not a public field.
                let source = std::error::Error::source(s).unwrap();
                assert!(source.to_string().contains(code), "{source}");
            }
        }
        assert_eq!(l.stats().policy_decisions, 0, "{} {name}", A::NAME);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_value_at_a_state_key_is_an_error_under_every_policy() {
    let server = RedisServer::start();
    foreign_values(&server, Gcra).await;
    foreign_values(&server, SlidingLog).await;
}

/// Under `Error`, the failure's kind; under `Open`, an admission that says the policy decided.
async fn decided_by_policy(url: &str, kind: UnavailableKind) {
    let error = limiter(url, Gcra, FailurePolicy::Error).await;
    let open = limiter(url, Gcra, FailurePolicy::Open).await;
    let e = error.check("k").await.unwrap_err();
    match &e {
        RedisLimitError::Unavailable(u) => {
            assert_eq!(u.kind(), kind, "{e}");
            assert!(std::error::Error::source(u).is_some());
        }
        _ => panic!("{kind:?}: {e:?}"),
    }
    let d = open.decide("k").await.unwrap();
    assert!(
        d.decision.allowed && d.server_time.is_none(),
        "{kind:?}: {d:?}"
    );
    assert_eq!(open.stats().policy_decisions, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outages_of_every_kind_are_decided_by_the_policy() {
    // Connection refused.
    let mut gone = RedisServer::start();
    gone.kill();
    decided_by_policy(&gone.url(), UnavailableKind::Connection).await;

    // A cluster node serving no slots: CLUSTERDOWN.
    let lone = RedisServer::start_with(&["--cluster-enabled", "yes"]);
    decided_by_policy(&lone.url(), UnavailableKind::ClusterDown).await;

    // A replica of a primary that is gone, told not to serve stale data: MASTERDOWN.
    let port = gone.port().to_string();
    let stale = RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--replica-serve-stale-data",
        "no",
    ]);
    decided_by_policy(&stale.url(), UnavailableKind::MasterDown).await;

    // A replica (a failover demoted the server): the script's write is refused, READONLY.
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    decided_by_policy(&replica.url(), UnavailableKind::ReadOnly).await;

    // A script running past the busy threshold: BUSY, until it is killed.
    let busy = RedisServer::start_with(&["--busy-reply-threshold", "10"]);
    let mut runner = busy.conn();
    let spin = std::thread::spawn(move || {
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<redis::Value>(&mut runner)
    });
    let mut admin = busy.conn();
    let busy_now = eventually(200, Duration::from_millis(10), async || {
        redis::cmd("PING")
            .query::<String>(&mut admin)
            .is_err_and(|e| e.code() == Some("BUSY"))
    })
    .await;
    assert!(busy_now, "the script never made the server busy");
    decided_by_policy(&busy.url(), UnavailableKind::Busy).await;
    let _: () = redis::cmd("SCRIPT").arg("KILL").query(&mut admin).unwrap();
    assert!(spin.join().unwrap().is_err());
}

/// Built while nothing listens on the port: the policy decides each call within its deadline;
/// once the server starts on that port, the same limiter gets Redis's decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limiter_built_during_an_outage_follows_the_server_when_it_starts() {
    let mut server = RedisServer::start();
    server.kill();
    let error = limiter(&server.url(), Gcra, FailurePolicy::Error).await;
    let closed = limiter(
        &server.url(),
        Gcra,
        FailurePolicy::Closed {
            retry_after: Duration::from_secs(2),
        },
    )
    .await;
    for _ in 0..5 {
        let e = error.check("k").await.unwrap_err();
        assert!(e.is_unavailable(), "{e:?}");
        let d = closed.decide("k").await.unwrap();
        assert!(!d.decision.allowed && d.server_time.is_none());
        assert_eq!(d.decision.retry_after, Some(Duration::from_secs(2)));
    }
    assert_eq!(closed.stats().policy_decisions, 5);

    server.restart();
    for l in [&error, &closed] {
        let back = redis_decides(l, "k", 1, 200).await;
        assert!(back, "no Redis decision after the server started");
    }
    // The two limiters share the key: 10 per second, two taken by Redis so far at least.
    assert!(error.peek("k").await.unwrap().remaining <= 8);
}

/// The same on a cluster: built with every node down, decided by the policy, then Redis's
/// decisions once the nodes are back (a restarted primary serves after the cluster's own
/// delay, about 2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_limiter_built_during_an_outage_follows_the_cluster_when_it_starts() {
    let mut cluster = RedisCluster::start(3);
    for n in &mut cluster.nodes {
        n.kill();
    }
    let open = RedisRateLimiter::builder(Quota::per_second(10).unwrap())
        .deadline(DEADLINE)
        .on_failure(FailurePolicy::Open)
        .connect_cluster(cluster.urls())
        .await
        .unwrap();
    for _ in 0..3 {
        let d = open.decide("{user1}:k").await.unwrap();
        assert!(d.decision.allowed && d.server_time.is_none());
    }
    for n in &mut cluster.nodes {
        n.restart();
    }
    let back = eventually(
        500,
        Duration::from_millis(20),
        async || matches!(open.decide("{user1}:k").await, Ok(d) if d.server_time.is_some()),
    )
    .await;
    assert!(back, "no Redis decision after the cluster came back");
}

/// Connections the server has accepted so far (the one asking included).
fn connections_received(server: &RedisServer) -> u64 {
    server
        .info_field("stats", "total_connections_received")
        .and_then(|n| n.parse().ok())
        .expect("INFO stats has total_connections_received")
}

/// `host:port` without a scheme (or any URL the redis client does not read) is refused by
/// every connect form of both limiters as `InvalidUrl`, saying what was wrong and the form
/// expected, and nothing is sent to the server it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_without_a_scheme_is_an_invalid_url_for_every_connect_form() {
    let server = RedisServer::start();
    let bare = format!("127.0.0.1:{}", server.port());
    let before = connections_received(&server);
    let q = Quota::per_second(1).unwrap();
    let one = [bare.as_str()];
    let results: Vec<(&str, Result<(), RedisLimitError>)> = vec![
        (
            "connect",
            RedisRateLimiter::builder(q).connect(&bare).await.map(drop),
        ),
        (
            "connect_cluster",
            RedisRateLimiter::builder(q)
                .connect_cluster(one)
                .await
                .map(drop),
        ),
        (
            "connect_sentinel",
            RedisRateLimiter::builder(q)
                .connect_sentinel(one, "mymaster")
                .await
                .map(drop),
        ),
        (
            "concurrency connect",
            RedisConcurrencyLimiter::builder(1)
                .connect(&bare)
                .await
                .map(drop),
        ),
        (
            "concurrency connect_cluster",
            RedisConcurrencyLimiter::builder(1)
                .connect_cluster(one)
                .await
                .map(drop),
        ),
    ];
    for (form, result) in results {
        let e = result.expect_err(form);
        match &e {
            RedisLimitError::InvalidUrl { url, reason } => {
                assert_eq!(url, &bare, "{form}");
                assert!(reason.contains("scheme"), "{form}: {reason}");
            }
            _ => panic!("{form}: {e:?}"),
        }
        assert!(!e.is_unavailable(), "{form}: {e}");
        let shown = e.to_string();
        for part in [bare.as_str(), "redis://", "rediss://", "redis+unix://"] {
            assert!(shown.contains(part), "{form}: {shown:?} lacks {part:?}");
        }
        assert!(!shown.contains("answered"), "{form}: {shown}");
        eprintln!("{form}: {shown}");
    }
    // The rest of what the redis client refuses in a URL is refused the same way, with a
    // password never shown.
    let hidden = format!("redis://app:s3cret@127.0.0.1:{}/notadb", server.port());
    for (url, why) in [
        (hidden.as_str(), "database"),
        ("http://127.0.0.1:6379/", "scheme"),
        ("redis://[nope/", "parse"),
    ] {
        let e = RedisRateLimiter::builder(q).connect(url).await.unwrap_err();
        let RedisLimitError::InvalidUrl { reason, .. } = &e else {
            panic!("{url}: {e:?}");
        };
        assert!(reason.contains(why), "{url}: {reason}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(!format!("{e:?}").contains("s3cret"), "{e:?}");
    }
    // No node or sentinel at all.
    let none = Vec::<String>::new();
    let e = RedisRateLimiter::builder(q).connect_cluster(&none).await;
    assert!(
        matches!(e, Err(RedisLimitError::InvalidUrl { .. })),
        "{e:?}"
    );
    let e = RedisRateLimiter::builder(q)
        .connect_sentinel(&none, "mymaster")
        .await;
    assert!(
        matches!(e, Err(RedisLimitError::InvalidUrl { .. })),
        "{e:?}"
    );
    // Only our own INFO connection reached the server.
    assert_eq!(connections_received(&server), before + 1);
}

/// Redis down when the limiter starts: every call under `FailurePolicy::Error` is
/// `Unavailable` (kind `Connection`), whether it met the refusal itself or ran out of its
/// deadline while the connection was being retried. Repeated, to meet both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_at_start_is_always_unavailable() {
    let mut gone = RedisServer::start();
    gone.kill();
    let url = gone.url();
    let mut seen = std::collections::BTreeMap::<String, u32>::new();
    for round in 0..20u64 {
        // Connect timeouts around the client's own retry delays, so that calls meet the
        // connection at every stage: refused, retrying, waiting for the next try.
        let connect_timeout = Duration::from_millis(5 + 10 * (round % 5));
        let rate = RedisRateLimiter::builder(Quota::per_second(10).unwrap())
            .deadline(Duration::from_millis(50))
            .connect_timeout(connect_timeout)
            .connect(&url)
            .await
            .unwrap();
        let sem = RedisConcurrencyLimiter::builder(2)
            .deadline(Duration::from_millis(50))
            .connect_timeout(connect_timeout)
            .connect(&url)
            .await
            .unwrap();
        for call in 0..3 {
            for e in [
                rate.check("k").await.unwrap_err(),
                sem.try_acquire("k").await.unwrap_err(),
            ] {
                let RedisLimitError::Unavailable(u) = &e else {
                    panic!("round {round}, call {call}: {e:?}");
                };
                assert_eq!(u.kind(), UnavailableKind::Connection, "{e}");
                assert!(std::error::Error::source(u).is_some(), "{e}");
                *seen.entry(e.to_string()).or_default() += 1;
            }
        }
        assert_eq!(rate.stats().timeouts, 0, "round {round}");
    }
    eprintln!("errors seen: {seen:#?}");
}
