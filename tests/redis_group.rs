//! Checks on different keys grouped into one script call (`group_keys`) on a real Redis:
//! every key decided exactly as alone (no over- or under-admission under 256 tasks), a
//! foreign value or a key the fast path cannot decide (holes, another quota) settled by the
//! check's own call without touching the others, failures given to every grouped check for
//! its policy, dropped queued checks stranding nobody, and the cluster refused at build.
#![cfg(feature = "redis")]

mod redis_support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use redis_support::{redis_decides, RedisServer};
use tollgate::redis::{FailurePolicy, RedisLimitError, RedisRateLimiter};
use tollgate::Quota;

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("g{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Burst `b`, refilling one permit an hour: nothing comes back during a test.
fn slow(b: u64) -> Quota {
    Quota::per_hour(1).unwrap().with_burst(b).unwrap()
}

async fn grouping(server: &RedisServer, quota: Quota, prefix: &str) -> RedisRateLimiter {
    RedisRateLimiter::builder(quota)
        .prefix(prefix)
        .deadline(Duration::from_secs(5))
        .group_keys(NonZeroUsize::new(64).unwrap())
        .connect(&server.url())
        .await
        .unwrap()
}

async fn plain(server: &RedisServer, quota: Quota, prefix: &str) -> RedisRateLimiter {
    RedisRateLimiter::builder(quota)
        .prefix(prefix)
        .deadline(Duration::from_secs(5))
        .connect(&server.url())
        .await
        .unwrap()
}

/// Runs `keys` as concurrent one-permit checks on a current-thread runtime, spawned in order:
/// each task's first poll comes before any reply is read, so the first few go alone and the
/// rest queue and go as groups. The results, in the same order.
async fn burst_of_checks(
    limiter: &RedisRateLimiter,
    keys: &[String],
) -> Vec<Result<bool, RedisLimitError>> {
    let mut out = Vec::new();
    for h in spawn_checks(limiter, keys) {
        out.push(h.await.unwrap());
    }
    out
}

/// A spawned one-permit check (whether it was allowed) on each of `keys`, in order.
fn spawn_checks(
    limiter: &RedisRateLimiter,
    keys: &[String],
) -> Vec<tokio::task::JoinHandle<Result<bool, RedisLimitError>>> {
    keys.iter()
        .map(|k| {
            let (l, k) = (limiter.clone(), k.clone());
            tokio::spawn(async move { l.check(&k).await.map(|d| d.allowed) })
        })
        .collect()
}

/// 8 filler keys that go first (the calls in flight the rest queue behind), then `tail`.
fn behind_fillers(tail: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = (0..8).map(|i| format!("filler{i}")).collect();
    keys.extend(tail.iter().map(|s| s.to_string()));
    keys
}

/// 256 tasks, 128 keys, 16 checks per key in random order: each key admits exactly its burst,
/// with grouping alone and after the denial cache and the coalescer.
#[test]
fn every_key_admits_exactly_its_burst_under_256_tasks() {
    let server = RedisServer::start();
    for with_hot_options in [false, true] {
        exact_under_256_tasks(&server, with_hot_options);
    }
}

fn exact_under_256_tasks(server: &RedisServer, with_hot_options: bool) {
    redis_support::runtime().block_on(async {
        let burst = 5u32;
        let b = RedisRateLimiter::builder(slow(burst.into()))
            .prefix(unique_prefix())
            .deadline(Duration::from_secs(5))
            .group_keys(NonZeroUsize::new(64).unwrap());
        let b = if with_hot_options {
            b.denial_cache(NonZeroUsize::new(1000).unwrap()).coalesce()
        } else {
            b
        };
        let l = b.connect(&server.url()).await.unwrap();
        let keys = 128u64;
        let tasks = 256u64;
        let per_task = 8u64;
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let l = l.clone();
                tokio::spawn(async move {
                    let mut admitted = vec![0u32; keys as usize];
                    for i in 0..per_task {
                        // A spread that gives each key 16 checks from 16 different tasks.
                        let k = (t * 37 + i * 16) % keys;
                        if l.check(&format!("k{k}")).await.unwrap().allowed {
                            admitted[k as usize] += 1;
                        }
                    }
                    admitted
                })
            })
            .collect();
        let mut total = vec![0u32; keys as usize];
        for h in handles {
            for (t, a) in total.iter_mut().zip(h.await.unwrap()) {
                *t += a;
            }
        }
        for (k, &a) in total.iter().enumerate() {
            assert_eq!(a, burst, "key k{k} admitted {a}, its burst is {burst}");
        }
        let s = l.stats();
        assert!(s.group_calls > 0 && s.grouped >= 2 * s.group_calls, "{s:?}");
    });
}

/// A foreign value on one key of a group fails that check with the error a check of its own
/// gets, and leaves the value alone; the others in the group are decided.
#[tokio::test(flavor = "current_thread")]
async fn a_foreign_value_fails_only_its_own_check() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let g = grouping(&server, slow(1), &prefix).await;
    let mut conn = server.conn();
    let bad = g.state_key("bad");
    let list = g.state_key("list");
    let _: () = redis::cmd("SET")
        .arg(&bad)
        .arg("1e3")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(&list)
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let keys = behind_fillers(&["a", "bad", "b", "list", "c"]);
    let before = g.stats();
    let r = burst_of_checks(&g, &keys).await;
    assert!(g.stats().group_calls > before.group_calls, "grouped");
    for (k, r) in keys.iter().zip(&r) {
        match k.as_str() {
            "bad" | "list" => {
                let lone = plain(&server, slow(1), &prefix).await.check(k).await;
                let (e, lone) = (r.as_ref().unwrap_err(), lone.unwrap_err());
                assert_eq!(e.to_string(), lone.to_string(), "{k}");
            }
            _ => assert!(matches!(r, Ok(true)), "{k}: {r:?}"),
        }
    }
    let v: String = redis::cmd("GET").arg(&bad).query(&mut conn).unwrap();
    assert_eq!(v, "1e3");
}

/// A key with holes (a cancelled reservation that was not the latest) in a group is decided
/// the general way: its check fills the hole, which the fast path would have denied.
#[tokio::test(flavor = "current_thread")]
async fn a_key_with_holes_in_a_group_is_decided_exactly() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let g = grouping(&server, slow(3), &prefix).await;
    let r: Vec<_> = [(); 3].iter().map(|_| g.reserve("holey")).collect();
    let mut rs = Vec::new();
    for r in r {
        rs.push(r.await.unwrap());
    }
    // The middle one: a hole below the TAT, with the bucket otherwise full.
    assert!(rs.remove(1).cancel().await.unwrap());
    let keys = behind_fillers(&["a", "holey", "holey", "b"]);
    let before = g.stats();
    let r = burst_of_checks(&g, &keys).await;
    assert!(g.stats().group_calls > before.group_calls, "grouped");
    let holey: Vec<bool> = keys
        .iter()
        .zip(&r)
        .filter(|(k, _)| *k == "holey")
        .map(|(_, r)| *r.as_ref().unwrap())
        .collect();
    // One fills the hole, the other finds the bucket full.
    assert_eq!(holey.iter().filter(|a| **a).count(), 1, "{holey:?}");
    assert!(!g.check("holey").await.unwrap().allowed);
}

/// A named state written under another quota is converted by the general way (its debt kept
/// in permits), not read as this quota's TAT.
#[tokio::test(flavor = "current_thread")]
async fn a_named_state_under_another_quota_is_decided_exactly() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    // Quota A: burst 2, 2 an hour (T0 = 30 min); both permits used: a debt of an hour.
    let a = RedisRateLimiter::builder(Quota::per_hour(2).unwrap())
        .prefix(&prefix)
        .state_name("shared")
        // Not the default 50 ms, which a stall of a loaded machine can outlast.
        .deadline(Duration::from_secs(5))
        .connect(&server.url())
        .await
        .unwrap();
    assert!(a.check("u").await.unwrap().allowed);
    assert!(a.check("u").await.unwrap().allowed);
    // Quota B: burst 4, 4 an hour (T = 15 min): the debt is 2 permits of B, 2 left.
    let b = RedisRateLimiter::builder(Quota::per_hour(4).unwrap())
        .prefix(&prefix)
        .state_name("shared")
        .deadline(Duration::from_secs(5))
        .group_keys(NonZeroUsize::new(64).unwrap())
        .connect(&server.url())
        .await
        .unwrap();
    let keys = behind_fillers(&["u", "x", "u", "u", "y", "u"]);
    let before = b.stats();
    let r = burst_of_checks(&b, &keys).await;
    assert!(b.stats().group_calls > before.group_calls, "grouped");
    let u = keys
        .iter()
        .zip(&r)
        .filter(|(k, r)| *k == "u" && matches!(r, Ok(true)))
        .count();
    assert_eq!(u, 2);
}

/// The server paused (`CLIENT PAUSE`): every check, lone or grouped, is decided by the failure policy within
/// its deadline.
#[tokio::test(flavor = "current_thread")]
async fn a_paused_server_gives_every_grouped_check_its_policy() {
    let server = RedisServer::start();
    let deadline = Duration::from_millis(100);
    let url = server.url();
    let make = async |policy: FailurePolicy| {
        RedisRateLimiter::builder(slow(5))
            .prefix(unique_prefix())
            .deadline(deadline)
            .on_failure(policy)
            .group_keys(NonZeroUsize::new(64).unwrap())
            .connect(&url)
            .await
            .unwrap()
    };
    let open = make(FailurePolicy::Open).await;
    let error = make(FailurePolicy::Error).await;
    // Connected and the script loaded first. Polled: on a busy machine a first call can
    // outlast the 100 ms deadline.
    for l in [&open, &error] {
        let up = redis_decides(l, "warm", 1, 100).await;
        assert!(up, "Redis never decided");
    }
    let decided = open.stats().policy_decisions;
    // Every client's script calls held for 5 s (the server answers none of our checks).
    server.pause_writes(5000);
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let t = Instant::now();
    let (o, e) = tokio::join!(
        async {
            let hs: Vec<_> = keys
                .iter()
                .map(|k| {
                    let (l, k) = (open.clone(), k.clone());
                    tokio::spawn(async move { l.decide(&k).await })
                })
                .collect();
            let mut out = Vec::new();
            for h in hs {
                out.push(h.await.unwrap());
            }
            out
        },
        burst_of_checks(&error, &keys)
    );
    // Within the deadline, not at the pause's end (5 s).
    assert!(
        t.elapsed() < Duration::from_millis(800),
        "{:?}",
        t.elapsed()
    );
    for d in o {
        let d = d.unwrap();
        assert!(d.decision.allowed && d.server_time.is_none());
    }
    for r in e {
        assert!(matches!(r, Err(RedisLimitError::Timeout { .. })), "{r:?}");
    }
    assert_eq!(open.stats().policy_decisions - decided, 40);
    server.unpause();
    // The groups went (their calls failed or were answered late): counted.
    let counted = redis_support::eventually(200, Duration::from_millis(10), async || {
        open.stats().group_calls > 0
    })
    .await;
    assert!(counted, "{:?}", open.stats());
}

/// Queued checks whose futures are dropped are still sent with their group (their permit is
/// taken, the reply ignored) and strand nobody: every later check is decided.
#[tokio::test(flavor = "current_thread")]
async fn dropped_queued_checks_strand_nobody() {
    let server = RedisServer::start();
    let g = grouping(&server, slow(1), &unique_prefix()).await;
    let keys = behind_fillers(&["q0", "q1", "q2", "q3", "q4", "q5"]);
    let handles = spawn_checks(&g, &keys);
    // Every task polled once (registered, lone or queued), then the odd queued ones dropped.
    tokio::task::yield_now().await;
    let mut kept = Vec::new();
    for (k, h) in keys.iter().zip(handles) {
        if k.starts_with('q') && k[1..].parse::<u32>().unwrap() % 2 == 1 {
            h.abort();
            // Dropped before its reply: it was queued, not done.
            assert!(h.await.unwrap_err().is_cancelled(), "{k}");
        } else {
            kept.push(h);
        }
    }
    for h in kept {
        assert!(matches!(h.await.unwrap(), Ok(true)));
    }
    // The dropped ones were sent: each key's one permit is taken.
    assert!(
        redis_support::eventually(100, Duration::from_millis(10), async || {
            let mut all = true;
            for i in 0..6 {
                all &= g.peek(&format!("q{i}")).await.unwrap().remaining == 0;
            }
            all
        })
        .await
    );
    let later: Vec<String> = (0..64).map(|i| format!("later{i}")).collect();
    for r in burst_of_checks(&g, &later).await {
        assert!(matches!(r, Ok(true)));
    }
}

/// Through Sentinel: groups go to the primary it names, decided as on one server.
#[tokio::test(flavor = "current_thread")]
async fn sentinel_groups_on_the_primary() {
    let (_primary, _replica, sentinel) = redis_support::sentinel_pair("tgg").await;
    let g = RedisRateLimiter::builder(slow(1))
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(5))
        .group_keys(NonZeroUsize::new(64).unwrap())
        .connect_sentinel([sentinel.url()], "tgg")
        .await
        .unwrap();
    let keys = behind_fillers(&["a", "b", "a", "c", "b"]);
    let r = burst_of_checks(&g, &keys).await;
    assert!(g.stats().group_calls > 0, "{:?}", g.stats());
    let admitted: Vec<&str> = keys
        .iter()
        .zip(&r)
        .filter(|(_, r)| matches!(r, Ok(true)))
        .map(|(k, _)| k.as_str())
        .collect();
    // Each key's burst of 1, once: the repeated keys' second checks denied.
    assert_eq!(admitted.len(), 8 + 3, "{r:?}");
    assert!(r.iter().all(Result::is_ok));
}

/// A cluster's keys of one call must share a slot: refused at build, typed.
#[tokio::test(flavor = "current_thread")]
async fn a_cluster_is_refused_at_build() {
    let r = RedisRateLimiter::builder(slow(1))
        .group_keys(NonZeroUsize::new(8).unwrap())
        .connect_timeout(Duration::from_millis(50))
        .connect_cluster(["redis://127.0.0.1:1/"])
        .await;
    assert!(matches!(r, Err(RedisLimitError::Unsupported(_))), "{r:?}");
}

/// Another algorithm has no group op: refused at build, typed.
#[tokio::test(flavor = "current_thread")]
async fn another_algorithm_is_refused_at_build() {
    let r = RedisRateLimiter::builder(slow(1))
        .algorithm(tollgate::SlidingLog)
        .unwrap()
        .group_keys(NonZeroUsize::new(8).unwrap())
        .connect("redis://127.0.0.1:1/")
        .await;
    assert!(matches!(r, Err(RedisLimitError::Unsupported(_))), "{r:?}");
}

/// Hostile bytes at one key of a group: that check gets what a check of its own on the same
/// value gets (the same error, or the same admission), and the group's other keys are
/// admitted.
fn hostile() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..24),
        "[0-9:,]{1,20}".prop_map(String::into_bytes),
        "[0-9]{1,16}".prop_map(String::into_bytes),
    ]
}

// A plain test around the runner, not `proptest!`: the server is the test's own, so it is
// stopped when the test ends (a server in a `static` is never dropped and outlives the process).
#[test]
fn hostile_values_in_a_group_fail_only_their_check() {
    let server = RedisServer::start();
    let rt = redis_support::current_thread();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 48,
        // Replays the seeds in redis_group.proptest-regressions, as `proptest!` would.
        source_file: Some(file!()),
        ..ProptestConfig::default()
    });
    let result = runner.run(&hostile(), |value| {
        rt.block_on(async {
            let prefix = unique_prefix();
            let g = grouping(&server, slow(2), &prefix).await;
            let p = plain(&server, slow(2), &prefix).await;
            let mut conn = server.conn();
            for k in ["h", "twin"] {
                let _: () = redis::cmd("SET")
                    .arg(g.state_key(k))
                    .arg(&value)
                    .query(&mut conn)
                    .unwrap();
            }
            let keys = behind_fillers(&["a", "h", "b"]);
            let r = burst_of_checks(&g, &keys).await;
            let lone = p.check("twin").await.map(|d| d.allowed);
            let h = &r[keys.iter().position(|k| k == "h").unwrap()];
            match (h, &lone) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                _ => prop_assert!(false, "grouped {:?}, alone {:?}", h, lone),
            }
            for (k, r) in keys.iter().zip(&r) {
                if k != "h" {
                    prop_assert!(matches!(r, Ok(true)), "{}: {:?}", k, r);
                }
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
