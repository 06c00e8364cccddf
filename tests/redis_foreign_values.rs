//! A value tollgate did not write at a state key (a foreign string, hostile bytes, another
//! type, a sorted set with members or scores no script writes) is a typed error under every
//! failure policy, with and without the denial cache, for every call that reads the key: the
//! rate limiters' checks, peeks, blocks, penalties, rewards and resets, and every concurrency
//! limiter operation. And nothing is written: the key is byte for byte what it was (`DUMP`), with the
//! same expiry (`PEXPIRETIME`). Real servers on loopback; every loop is bounded.
#![cfg(feature = "redis")]

mod redis_support;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis_support::{current_thread, RedisServer};
use tollgate::redis::{
    FailurePolicy, RedisAlgorithm, RedisConcurrencyLimiter, RedisLimitError, RedisRateLimiter,
    ServerErrorKind,
};
use tollgate::{
    FixedWindow, Gcra, KeyedRateLimiter, Quota, SlidingLog, SlidingWindow, WeightedWindow,
};

/// What is written at the state key before the calls.
#[derive(Clone, Debug)]
enum Foreign {
    /// `SET key bytes`.
    Str(Vec<u8>),
    /// `RPUSH key item`.
    List(Vec<u8>),
    /// `HSET key field value`.
    Hash(Vec<u8>, Vec<u8>),
    /// `ZADD key score member ...` (scores as Redis parses them: "1e300", "-inf", ...).
    Zset(Vec<(String, Vec<u8>)>),
}

impl Foreign {
    fn str(s: &str) -> Foreign {
        Foreign::Str(s.as_bytes().to_vec())
    }

    /// A short description for failure messages (a 2 MiB value is not printed whole).
    fn describe(&self) -> String {
        let short = |b: &[u8]| {
            let s = String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned();
            format!("{s:?} ({} bytes)", b.len())
        };
        match self {
            Foreign::Str(v) => format!("string {}", short(v)),
            Foreign::List(v) => format!("list [{}]", short(v)),
            Foreign::Hash(f, v) => format!("hash {{{}: {}}}", short(f), short(v)),
            Foreign::Zset(m) => {
                let m: Vec<String> = m.iter().map(|(s, m)| format!("{s} {}", short(m))).collect();
                format!("zset [{}]", m.join(", "))
            }
        }
    }

    /// The Redis type it makes.
    fn redis_type(&self) -> &'static str {
        match self {
            Foreign::Str(_) => "string",
            Foreign::List(_) => "list",
            Foreign::Hash(..) => "hash",
            Foreign::Zset(_) => "zset",
        }
    }

    /// Replaces whatever `key` holds with this, expiring at `expire_at_ms` if given.
    fn write(&self, conn: &mut redis::Connection, key: &str, expire_at_ms: Option<u64>) {
        let _: () = redis::cmd("DEL").arg(key).query(conn).unwrap();
        let _: redis::Value = match self {
            Foreign::Str(v) => redis::cmd("SET").arg(key).arg(v).query(conn),
            Foreign::List(v) => redis::cmd("RPUSH").arg(key).arg(v).query(conn),
            Foreign::Hash(f, v) => redis::cmd("HSET").arg(key).arg(f).arg(v).query(conn),
            Foreign::Zset(members) => {
                let mut cmd = redis::cmd("ZADD");
                cmd.arg(key);
                for (score, member) in members {
                    cmd.arg(score).arg(member);
                }
                cmd.query(conn)
            }
        }
        .unwrap();
        if let Some(at) = expire_at_ms {
            let _: () = redis::cmd("PEXPIREAT")
                .arg(key)
                .arg(at)
                .query(conn)
                .unwrap();
        }
    }
}

/// The key as Redis holds it: its serialization, type and absolute expiry.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    dump: Option<Vec<u8>>,
    kind: String,
    expire_at: i64,
}

fn snapshot(conn: &mut redis::Connection, key: &str) -> Snapshot {
    Snapshot {
        dump: redis::cmd("DUMP").arg(key).query(conn).unwrap(),
        kind: redis::cmd("TYPE").arg(key).query(conn).unwrap(),
        expire_at: redis::cmd("PEXPIRETIME").arg(key).query(conn).unwrap(),
    }
}

/// The server's clock in ms since the epoch.
fn server_ms(conn: &mut redis::Connection) -> u64 {
    let t: Vec<String> = redis::cmd("TIME").query(conn).unwrap();
    t[0].parse::<u64>().unwrap() * 1000 + t[1].parse::<u64>().unwrap() / 1000
}

/// `r` is the typed error for `foreign` at a key of type `own`: `WRONGTYPE` for another type,
/// tollgate's own `Script` error (code `TOLLGATE`) for the right type with foreign content.
fn refused<T: std::fmt::Debug>(
    r: Result<T, RedisLimitError>,
    foreign: &Foreign,
    own: &str,
    what: &str,
) -> Result<(), TestCaseError> {
    let e = match r {
        Ok(v) => return Err(TestCaseError::fail(format!("{what}: decided {v:?}"))),
        Err(e) => e,
    };
    let RedisLimitError::Server(s) = &e else {
        return Err(TestCaseError::fail(format!("{what}: {e:?}")));
    };
    if foreign.redis_type() == own {
        prop_assert_eq!(s.kind(), ServerErrorKind::Script, "{}: {}", what, e);
        prop_assert_eq!(s.code(), Some("TOLLGATE"), "{}: {}", what, e);
    } else {
        prop_assert_eq!(s.kind(), ServerErrorKind::WrongType, "{}: {}", what, e);
        prop_assert_eq!(s.code(), Some("WRONGTYPE"), "{}: {}", what, e);
    }
    Ok(())
}

const DEADLINE: Duration = Duration::from_secs(2);

/// One limiter per failure policy, with and without the denial cache, all on one state key.
async fn limiters<A: RedisAlgorithm>(url: &str, alg: A) -> Vec<RedisRateLimiter<A>> {
    let quota = Quota::per_second(100).unwrap();
    let mut out = Vec::new();
    for cache in [false, true] {
        let local = KeyedRateLimiter::<String>::builder(quota)
            .algorithm(alg)
            .unwrap()
            .build();
        let policies = [
            FailurePolicy::Error,
            FailurePolicy::Open,
            FailurePolicy::Closed {
                retry_after: Duration::from_secs(1),
            },
            FailurePolicy::Fallback(Arc::new(local)),
        ];
        for policy in policies {
            let mut b = RedisRateLimiter::builder(quota)
                .algorithm(alg)
                .unwrap()
                .deadline(DEADLINE)
                .on_failure(policy);
            if cache {
                b = b.denial_cache(NonZeroUsize::new(16).unwrap());
            }
            out.push(b.connect(url).await.unwrap());
        }
    }
    out
}

/// Every call on `foreign` at the limiters' state key is refused, typed, and leaves it as it
/// was.
async fn windows_refuse<A: RedisAlgorithm>(
    server: &RedisServer,
    limiters: &[RedisRateLimiter<A>],
    own: &str,
    foreign: &Foreign,
    expire: bool,
) -> Result<(), TestCaseError> {
    let mut conn = server.conn();
    let key = limiters[0].state_key("k");
    let expire_at = expire.then(|| server_ms(&mut conn) + 600_000);
    foreign.write(&mut conn, &key, expire_at);
    let before = snapshot(&mut conn, &key);
    for (i, l) in limiters.iter().enumerate() {
        let what = |call: &str| format!("{} limiter {i} {call} on {}", A::NAME, foreign.describe());
        refused(l.check("k").await, foreign, own, &what("check"))?;
        refused(l.check_n("k", 2).await, foreign, own, &what("check_n"))?;
        refused(l.decide("k").await, foreign, own, &what("decide"))?;
        refused(l.peek("k").await, foreign, own, &what("peek"))?;
        refused(l.try_acquire("k").await, foreign, own, &what("try_acquire"))?;
        // Twice: a denial cached by the first call would answer the second locally.
        refused(l.check("k").await, foreign, own, &what("check again"))?;
        if i == 0 {
            if A::NAME != "gcra" {
                let block = l.block("k", Duration::from_secs(5)).await;
                refused(block, foreign, own, &what("block"))?;
                refused(l.penalize("k", 1).await, foreign, own, &what("penalize"))?;
                refused(l.reward("k", 1).await, foreign, own, &what("reward"))?;
            }
            refused(l.reset("k").await, foreign, own, &what("reset"))?;
        }
        prop_assert_eq!(l.stats().policy_decisions, 0, "{}", what("policy"));
        prop_assert_eq!(&snapshot(&mut conn, &key), &before, "{}", what("the key"));
    }
    Ok(())
}

/// All the window algorithms (and GCRA) on one server, each with its limiters.
struct Windows {
    gcra: Vec<RedisRateLimiter<Gcra>>,
    fixed: Vec<RedisRateLimiter<FixedWindow>>,
    weighted: Vec<RedisRateLimiter<WeightedWindow>>,
    sliding: Vec<RedisRateLimiter<SlidingWindow>>,
    log: Vec<RedisRateLimiter<SlidingLog>>,
}

impl Windows {
    async fn new(url: &str) -> Windows {
        Windows {
            gcra: limiters(url, Gcra).await,
            fixed: limiters(url, FixedWindow::epoch_aligned()).await,
            weighted: limiters(url, WeightedWindow).await,
            sliding: limiters(url, SlidingWindow::new(4)).await,
            log: limiters(url, SlidingLog).await,
        }
    }

    async fn refuse(
        &self,
        server: &RedisServer,
        f: &Foreign,
        expire: bool,
    ) -> Result<(), TestCaseError> {
        windows_refuse(server, &self.gcra, "string", f, expire).await?;
        windows_refuse(server, &self.fixed, "string", f, expire).await?;
        windows_refuse(server, &self.weighted, "string", f, expire).await?;
        windows_refuse(server, &self.sliding, "string", f, expire).await?;
        windows_refuse(server, &self.log, "zset", f, expire).await
    }
}

/// The values an independent suite found admitted and overwritten by the fixed, weighted and
/// sliding-window scripts (under every policy, cache on and off), and the other types.
#[test]
fn the_reported_foreign_values_are_refused_and_left_alone() {
    let server = RedisServer::start();
    let rt = current_thread();
    let w = rt.block_on(Windows::new(&server.url()));
    let big_digits = Foreign::Str(vec![b'9'; 2 << 20]);
    let big_letters = Foreign::Str(vec![b'a'; 2 << 20]);
    let values = [
        Foreign::str("hello"),
        Foreign::str("1e300"),
        Foreign::str("-5"),
        Foreign::str("nan"),
        big_digits,
        big_letters,
        Foreign::List(b"x".to_vec()),
        Foreign::Hash(b"f".to_vec(), b"v".to_vec()),
        Foreign::Zset(vec![("5".into(), b"garbage".to_vec())]),
    ];
    for (i, f) in values.iter().enumerate() {
        rt.block_on(w.refuse(&server, f, i % 2 == 0)).unwrap();
    }
}

/// Strings shaped almost like a state some script writes: foreign to every algorithm.
fn near_misses() -> Vec<&'static str> {
    vec![
        "",
        "0",
        "1e3",
        "0x10",
        " 5",
        "5 ",
        "-0",
        "inf",
        "9007199254740993",
        "1:0",
        "01:1",
        "1:01",
        ":1",
        "5:",
        "1:1.5",
        "1:-1",
        "1::1",
        "18446744073709551617:1",
        "99999999999999999:1:1",
        "1:9007199254740993:0",
        "1:0:0",
        "=",
        "=5",
        "=5:0",
        "=9:1:5:1",
        "=5:1:5:1",
        "1:1:x",
    ]
    .into_iter()
    .chain(block_count_near_misses())
    .collect()
}

/// Strings shaped almost like a sliding window's with a block count (`=t1:c1:...:tj:cj=b`,
/// `1 <= b <= j`).
fn block_count_near_misses() -> Vec<&'static str> {
    vec![
        "=5:1=0",
        "=5:1=2",
        "=5:1=",
        "=5:1=01",
        "=5:1==1",
        "=5:1=1=1",
        "=5:1=1:1",
        "=5:1:7=1",
        "=5:0=1",
        "=9:1:5:1=1",
        "=5:1=9007199254740993",
        "=1=1",
        "==1",
        "1:1=1",
    ]
}

/// Sorted sets shaped almost like a sliding log's: block entries (`b:stamp:count`, scored -1)
/// that are not the newest entries, share a stamp, or are malformed.
fn log_near_misses() -> Vec<Vec<(String, Vec<u8>)>> {
    let m = |s: &str| s.as_bytes().to_vec();
    let heavy = |s: &str| ("-1".to_owned(), m(s));
    vec![
        vec![heavy("b:5:1"), heavy("h:7:1")],
        vec![heavy("b:5:1"), heavy("h:5:1")],
        vec![heavy("b:5:1"), heavy("b:5:2")],
        vec![heavy("b:5:1"), ("7".into(), m("7:1"))],
        vec![heavy("b:7:1"), ("7".into(), m("7:1"))],
        vec![heavy("b:5:1"), heavy("h:3:1"), ("6".into(), m("6:1"))],
        vec![heavy("b:5:0")],
        vec![heavy("b:05:1")],
        vec![heavy("b::1")],
        vec![heavy("B:5:1")],
        vec![heavy("bh:5:1")],
        vec![heavy("b:5:1:1")],
        vec![("5".into(), m("b:5:1"))],
        vec![("-2".into(), m("b:5:1"))],
    ]
}

/// Random hostile bytes, near misses, and other types; a sorted set with at least one member
/// no script writes.
fn foreign() -> impl Strategy<Value = Foreign> {
    // Bytes that cannot be a state: at least one byte outside digits, ':' and '='.
    let hostile = prop::collection::vec(any::<u8>(), 1..48).prop_filter("not a state", |b| {
        b.iter()
            .any(|c| !(c.is_ascii_digit() || *c == b':' || *c == b'='))
    });
    let score = prop_oneof![
        Just("1e300".to_owned()),
        Just("-5".to_owned()),
        Just("0.5".to_owned()),
        Just("-1".to_owned()),
        Just("-inf".to_owned()),
        Just("+inf".to_owned()),
        Just("1e17".to_owned()),
        (0u64..1 << 52).prop_map(|s| s.to_string()),
    ];
    let member = prop_oneof![
        hostile.clone(),
        Just(b"x:y:z".to_vec()),
        Just(b"h:5:x".to_vec()),
        Just(b"h::1".to_vec()),
        Just(b"b:5:x".to_vec()),
        Just(b"b::1".to_vec()),
        Just(b"b:5:0".to_vec()),
        Just(b"1:2:3:4".to_vec()),
    ];
    prop_oneof![
        3 => hostile.clone().prop_map(Foreign::Str),
        2 => prop::sample::select(near_misses()).prop_map(Foreign::str),
        1 => hostile.clone().prop_map(Foreign::List),
        1 => (hostile.clone(), hostile).prop_map(|(f, v)| Foreign::Hash(f, v)),
        2 => prop::collection::vec((score, member), 1..4).prop_map(Foreign::Zset),
        1 => prop::sample::select(log_near_misses()).prop_map(Foreign::Zset),
    ]
}

/// The near misses of the forms that mark block entries (the sliding window's block count, the
/// sliding log's `b:` members), each: refused, typed, by every window algorithm (and GCRA),
/// the key left as it was.
#[test]
fn near_misses_of_block_entries_are_refused_and_left_alone() {
    let server = RedisServer::start();
    let rt = current_thread();
    let w = rt.block_on(Windows::new(&server.url()));
    let strings = block_count_near_misses().into_iter().map(Foreign::str);
    let sets = log_near_misses().into_iter().map(Foreign::Zset);
    for (i, f) in strings.chain(sets).enumerate() {
        rt.block_on(w.refuse(&server, &f, i % 2 == 0)).unwrap();
    }
}

/// The property: whatever foreign value sits at a window algorithm's (or GCRA's) state key,
/// every call under every policy, denial cache on and off, is a typed error and the key is
/// unchanged.
#[test]
fn foreign_values_at_window_keys_are_typed_errors_and_left_alone() {
    let server = RedisServer::start();
    let rt = current_thread();
    let w = rt.block_on(Windows::new(&server.url()));
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(foreign(), any::<bool>()), |(f, expire)| {
            rt.block_on(w.refuse(&server, &f, expire))
        })
        .unwrap();
}

/// A concurrency limiter per policy it runs under (`Open` and `Fallback` are refused by `connect`).
async fn semaphores(url: &str) -> Vec<RedisConcurrencyLimiter> {
    let mut out = Vec::new();
    for policy in [
        FailurePolicy::Error,
        FailurePolicy::Closed {
            retry_after: Duration::from_secs(1),
        },
    ] {
        let sem = RedisConcurrencyLimiter::builder(3)
            .lease(Duration::from_secs(30))
            .deadline(DEADLINE)
            .on_failure(policy)
            .connect(url)
            .await
            .unwrap();
        out.push(sem);
    }
    out
}

/// Every concurrency limiter operation on `foreign` at the key is refused, typed, and leaves it as it
/// was.
async fn semaphore_refuses(
    server: &RedisServer,
    sems: &[RedisConcurrencyLimiter],
    foreign: &Foreign,
    expire: bool,
) -> Result<(), TestCaseError> {
    let mut conn = server.conn();
    let key = sems[0].state_key("k");
    let expire_at = expire.then(|| server_ms(&mut conn) + 600_000);
    foreign.write(&mut conn, &key, expire_at);
    let before = snapshot(&mut conn, &key);
    for (i, sem) in sems.iter().enumerate() {
        let what = |call: &str| format!("semaphore {i} {call} on {}", foreign.describe());
        // A lease of another key: its id names a member, which the calls below look for.
        let other = sem.try_acquire_n("other", 1).await.unwrap();
        let id = other.id();
        let own = "zset";
        refused(
            sem.try_acquire("k").await,
            foreign,
            own,
            &what("try_acquire"),
        )?;
        refused(sem.try_acquire("k").await, foreign, own, &what("again"))?;
        refused(sem.try_acquire_n("k", 2).await, foreign, own, &what("n"))?;
        let wait = sem
            .try_acquire_for_async("k", Duration::from_millis(20))
            .await;
        refused(wait, foreign, own, &what("try_acquire_for_async"))?;
        refused(sem.in_flight("k").await, foreign, own, &what("in_flight"))?;
        refused(sem.check_token("k", 5).await, foreign, own, &what("check"))?;
        refused(sem.renew("k", &id).await, foreign, own, &what("renew"))?;
        refused(sem.release("k", &id).await, foreign, own, &what("release"))?;
        assert_eq!(
            other.release().await.unwrap(),
            tollgate::redis::Released::Returned
        );
        prop_assert_eq!(&snapshot(&mut conn, &key), &before, "{}", what("the key"));
    }
    Ok(())
}

/// The two sorted sets the independent suite reported: a foreign score that made `PEXPIREAT`
/// fail after the lease was added (two permits held by nobody, on a key that never expires),
/// and a far score that was granted and pushed the key's expiry 3000 years out.
#[test]
fn the_reported_semaphore_members_are_refused_and_left_alone() {
    let server = RedisServer::start();
    let rt = current_thread();
    let sems = rt.block_on(semaphores(&server.url()));
    let values = [
        Foreign::Zset(vec![("1e300".into(), b"garbage".to_vec())]),
        Foreign::Zset(vec![("1e17".into(), b"x:y:z".to_vec())]),
        Foreign::str("hello"),
        Foreign::List(b"x".to_vec()),
    ];
    for f in &values {
        rt.block_on(semaphore_refuses(&server, &sems, f, false))
            .unwrap();
    }
}

/// Sorted sets that look almost like a semaphore's: bookkeeping members with the wrong sign
/// or no leases behind them, leases with scores no grant gives, tokens above the last one.
fn semaphore_near_misses(now_us: u64) -> Vec<Vec<(String, Vec<u8>)>> {
    let lease = (now_us + 10_000_000).to_string();
    let m = |s: &str| s.as_bytes().to_vec();
    vec![
        vec![("5".into(), m("#"))],
        vec![("-5".into(), m("#")), ("2".into(), m("="))],
        vec![("-5".into(), m("#")), ("-1.5".into(), m("="))],
        vec![("-5".into(), m("#")), ("-1".into(), m("="))],
        vec![
            ("-5".into(), m("#")),
            ("-1".into(), m("=")),
            ("1e17".into(), m("5:7:1")),
        ],
        vec![
            ("-5".into(), m("#")),
            ("-1".into(), m("=")),
            (lease.clone(), m("6:7:1")),
        ],
        vec![
            ("-5".into(), m("#")),
            ("-2".into(), m("=")),
            (lease.clone(), m("5:7:1")),
        ],
        vec![
            ("-5".into(), m("#")),
            ("-1".into(), m("=")),
            (lease.clone(), m("5:07:1")),
        ],
        vec![
            ("-5".into(), m("#")),
            ("-1".into(), m("=")),
            ("-3".into(), m("5:7:1")),
        ],
        vec![("-1".into(), m("=")), (lease, m("5:7:1"))],
        vec![("-0.5".into(), m("#"))],
    ]
}

/// The property for the semaphore: foreign members, scores and types at its key are a typed
/// error for every operation under both policies, and the key is unchanged.
#[test]
fn foreign_values_at_semaphore_keys_are_typed_errors_and_left_alone() {
    let server = RedisServer::start();
    let rt = current_thread();
    let sems = rt.block_on(semaphores(&server.url()));
    let now_us = server_ms(&mut server.conn()) * 1000;
    let near = prop::sample::select(semaphore_near_misses(now_us)).prop_map(Foreign::Zset);
    let strategy = prop_oneof![3 => foreign(), 2 => near];
    let mut runner = TestRunner::new(Config {
        cases: 32,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(strategy, any::<bool>()), |(f, expire)| {
            rt.block_on(semaphore_refuses(&server, &sems, &f, expire))
        })
        .unwrap();
}
