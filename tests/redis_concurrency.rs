//! `RedisConcurrencyLimiter` on a real `redis-server` and a real 3-primary cluster: the bound held by 4
//! processes (this test binary run as children) x 8 tasks, a holder killed with SIGKILL whose
//! permits come back when its lease ends (measured), expired holders refused on release and by
//! the fencing check, renewal, exactly-once release, cancel safety, failure policies.
//! Loopback only; every wait is bounded.
#![cfg(feature = "redis")]

mod redis_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis_support::{eventually, RedisCluster, RedisServer};
use tollgate::redis::{FailurePolicy, RedisConcurrencyLimiter, RedisLimitError, Released};
use tollgate::AcquireError;

const ROLE: &str = "TOLLGATE_SEM_ROLE";
const URL: &str = "TOLLGATE_SEM_URL";
const LIMIT: u64 = 3;

async fn semaphore(url: &str, limit: u64, lease: Duration) -> RedisConcurrencyLimiter {
    RedisConcurrencyLimiter::builder(limit)
        .lease(lease)
        .deadline(Duration::from_secs(2))
        .connect(url)
        .await
        .unwrap()
}

/// The server's clock, µs since the epoch.
fn server_now(server: &RedisServer) -> u64 {
    let t: Vec<String> = redis::cmd("TIME").query(&mut server.conn()).unwrap();
    t[0].parse::<u64>().unwrap() * 1_000_000 + t[1].parse::<u64>().unwrap()
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap()
}

/// This test binary again, running only `child_process` with `role`.
fn spawn_child(role: &str, url: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_process", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(ROLE, role)
        .env(URL, url)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The child's `SEM ...` lines, until it exits (or `until` matches one).
fn sem_lines(child: &mut Child, until: impl Fn(&str) -> bool) -> Vec<String> {
    let out = BufReader::new(child.stdout.as_mut().unwrap());
    let mut lines = Vec::new();
    for line in out.lines() {
        let line = line.unwrap();
        // With --nocapture, libtest's `test child_process ... ` shares the first line.
        if let Some(at) = line.find("SEM ") {
            let rest = &line[at + 4..];
            lines.push(rest.to_owned());
            if until(rest) {
                break;
            }
        }
    }
    lines
}

/// Not a test of its own: the body of the child processes the tests below start (it does
/// nothing unless started by them).
#[test]
#[ignore = "run by the multi-process tests as a child process"]
fn child_process() {
    let (Ok(role), Ok(url)) = (std::env::var(ROLE), std::env::var(URL)) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        match role.as_str() {
            "hammer" => hammer(&url).await,
            "holder" => hold(&url).await,
            other => panic!("unknown role {other}"),
        }
    });
}

/// 8 tasks acquiring 1 or 2 permits of `hot` for a bounded time, each grant bracketed by
/// INCRBY/DECRBY of a shared counter while held: prints the counter's high-water mark, the
/// grants, and every token.
async fn hammer(url: &str) {
    let sem = semaphore(url, LIMIT, Duration::from_secs(10)).await;
    let client = redis::Client::open(url).unwrap();
    let stop = Instant::now() + Duration::from_millis(1500);
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let sem = sem.clone();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        tasks.push(tokio::spawn(async move {
            let (mut high, mut tokens, mut last) = (0i64, Vec::new(), 0u64);
            for i in 0..10_000u64 {
                if Instant::now() > stop {
                    break;
                }
                let n = 1 + (i + t) % 2;
                let lease = match sem
                    .try_acquire_n_for_async("hot", n, Duration::from_millis(100))
                    .await
                {
                    Ok(lease) => lease,
                    Err(RedisLimitError::Limited(AcquireError::RateLimited { .. })) => continue,
                    Err(e) => panic!("{e}"),
                };
                assert!(lease.token() > last, "tokens of one task increase");
                last = lease.token();
                tokens.push(last);
                let held: i64 = redis::cmd("INCRBY")
                    .arg("held")
                    .arg(n)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                high = high.max(held);
                tokio::time::sleep(Duration::from_micros(200 * (i % 5))).await;
                let _: i64 = redis::cmd("DECRBY")
                    .arg("held")
                    .arg(n)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if i % 7 == 0 {
                    drop(lease); // released in the background
                } else {
                    assert_eq!(lease.release().await.unwrap(), Released::Returned);
                }
            }
            (high, tokens)
        }));
    }
    let (mut high, mut tokens) = (0, Vec::new());
    for t in tasks {
        let (h, ts) = t.await.unwrap();
        high = high.max(h);
        tokens.extend(ts);
    }
    println!("SEM high {high}");
    println!("SEM grants {}", tokens.len());
    for t in tokens {
        println!("SEM token {t}");
    }
}

/// Takes the 2 permits left of `victim` (limit 3) on a 1 s lease, says so, and waits to be
/// killed.
async fn hold(url: &str) {
    let sem = semaphore(url, 3, Duration::from_secs(1)).await;
    let lease = sem.try_acquire_n("victim", 2).await.unwrap();
    println!("SEM held {} {}", lease.token(), us(lease.expires_at()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(lease);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_of_eight_tasks_never_hold_more_than_the_limit() {
    let server = RedisServer::start();
    let mut children: Vec<Child> = (0..4)
        .map(|_| spawn_child("hammer", &server.url()))
        .collect();
    let (mut high, mut grants, mut tokens) = (0i64, 0u64, Vec::new());
    for c in &mut children {
        for line in sem_lines(c, |_| false) {
            let (what, v) = line.split_once(' ').unwrap();
            match what {
                "high" => high = high.max(v.parse().unwrap()),
                "grants" => grants += v.parse::<u64>().unwrap(),
                "token" => tokens.push(v.parse::<u64>().unwrap()),
                _ => panic!("{line}"),
            }
        }
        assert!(c.wait().unwrap().success(), "a child failed");
    }
    println!("4 processes x 8 tasks: {grants} grants, at most {high} permits held at once (limit {LIMIT})");
    assert!(high <= LIMIT as i64, "{high} held at once, limit {LIMIT}");
    assert!(grants >= 4, "each process got permits");
    let distinct: std::collections::HashSet<_> = tokens.iter().collect();
    assert_eq!(
        distinct.len(),
        tokens.len(),
        "every grant has its own token"
    );
    // Everything given back: the drops released in the background before the children exited,
    // or, for a background release that a child's exit cut short, its lease's end (10 s after
    // the grant; a child's last grant is at most a few seconds before this point). So wait up
    // to one lease and a margin, not less (a 2 s bound failed once in CI that way).
    let sem = semaphore(&server.url(), LIMIT, Duration::from_secs(10)).await;
    assert!(
        eventually(1300, Duration::from_millis(10), async || sem
            .in_flight("hot")
            .await
            .unwrap()
            == 0)
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_killed_with_sigkill_gives_its_permits_back_when_its_lease_ends() {
    let server = RedisServer::start();
    // A bystander holds the third permit throughout, so the key never expires: the dead
    // lease's permits must come back through the scripts' own bookkeeping.
    let lease = Duration::from_secs(1);
    let sem = semaphore(&server.url(), 3, lease).await;
    let bystander = sem
        .try_acquire("victim")
        .await
        .unwrap()
        .unwrap()
        .keep_alive();
    let mut child = spawn_child("holder", &server.url());
    let line = sem_lines(&mut child, |l| l.starts_with("held"))
        .pop()
        .unwrap();
    let mut parts = line.split(' ').skip(1).map(|v| v.parse::<u64>().unwrap());
    let (dead_token, dead_expiry) = (parts.next().unwrap(), parts.next().unwrap());
    child.kill().unwrap(); // SIGKILL: no release, no goodbye
    child.wait().unwrap();
    let killed = Instant::now();

    let mut refused = 0;
    let granted = loop {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "permits never came back"
        );
        if let Ok(l) = sem.try_acquire_n("victim", 2).await {
            break l;
        }
        refused += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let grant_time = us(granted.expires_at()) - us(lease);
    println!(
        "killed holder: permits back {:?} after the kill, {} us after its lease's expiry \
         (server clock), {refused} refusals before",
        killed.elapsed(),
        grant_time as i64 - dead_expiry as i64
    );
    assert!(
        grant_time >= dead_expiry,
        "granted before the dead lease ended"
    );
    assert!(granted.token() > dead_token);
    assert!(!sem.check_token("victim", dead_token).await.unwrap());
    assert!(sem.check_token("victim", granted.token()).await.unwrap());
    assert_eq!(granted.release().await.unwrap(), Released::Returned);
    assert!(bystander.is_held());
    assert_eq!(bystander.release().await.unwrap(), Released::Returned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_holder_is_refused_on_release_and_by_the_fencing_check() {
    let server = RedisServer::start();
    // A bystander on a long lease holds one of the 2 permits throughout, so the key never
    // expires: the stale lease must end through the scripts' own bookkeeping.
    let long = semaphore(&server.url(), 2, Duration::from_secs(10)).await;
    let bystander = long.try_acquire("k").await.unwrap().unwrap();
    // A lease of 1 s: the steps up to the "limit 2" check must fit in it (a few ms idle, a
    // stall's more on a busy machine), or they would see the lease already ended.
    let sem = semaphore(&server.url(), 2, Duration::from_secs(1)).await;
    let stale = sem.try_acquire("k").await.unwrap().unwrap();
    assert!(sem.check_token("k", stale.token()).await.unwrap());
    assert!(sem.try_acquire("k").await.unwrap().is_none(), "limit 2");
    // The holder stalls past its lease; a newer holder gets the permit.
    let fresh = loop {
        if let Some(l) = sem.try_acquire("k").await.unwrap() {
            break l;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(server_now(&server) >= us(stale.expires_at()));
    assert!(fresh.token() > stale.token());
    assert!(!sem.check_token("k", stale.token()).await.unwrap());
    assert!(sem.check_token("k", fresh.token()).await.unwrap());
    let mut stale = stale;
    assert!(!stale.renew().await.unwrap(), "an ended lease stays ended");
    assert_eq!(stale.release().await.unwrap(), Released::NotHeld);
    // The stale release took nothing from the fresh holder.
    assert_eq!(sem.in_flight("k").await.unwrap(), 2);
    assert_eq!(fresh.release().await.unwrap(), Released::Returned);
    assert_eq!(bystander.release().await.unwrap(), Released::Returned);
    assert!(!sem.check_token("k", 0).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_keeps_a_lease_alive_past_its_first_expiry() {
    let server = RedisServer::start();
    // A lease of 1 s, renewed every third of it in the background: a stall of a loaded
    // machine (tens to hundreds of ms) fits in what is left of it between renewals, and
    // between the manual take and renewal below.
    let lease_len = Duration::from_secs(1);
    let sem = semaphore(&server.url(), 1, lease_len).await;
    // By hand.
    let mut lease = sem.try_acquire("manual").await.unwrap().unwrap();
    let first = lease.expires_at();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(lease.renew().await.unwrap());
    assert!(lease.expires_at() > first);
    assert_eq!(lease.release().await.unwrap(), Released::Returned);

    // In the background, against a control lease that nobody renews.
    let kept = sem.try_acquire("kept").await.unwrap().unwrap().keep_alive();
    let control = sem.try_acquire("control").await.unwrap().unwrap();
    let first = us(kept.expires_at()).max(us(control.expires_at()));
    let past = eventually(500, Duration::from_millis(10), async || {
        server_now(&server) > first + us(lease_len)
    })
    .await;
    assert!(past, "the server's clock went past both first expiries");
    assert!(!sem.check_token("control", control.token()).await.unwrap());
    assert!(sem.check_token("kept", kept.token()).await.unwrap());
    assert!(kept.is_held() && us(kept.expires_at()) > first);
    assert!(
        sem.try_acquire("kept").await.unwrap().is_none(),
        "still held"
    );
    assert_eq!(control.release().await.unwrap(), Released::NotHeld);
    // Dropping the guard stops the renewals and releases.
    drop(kept);
    assert!(
        eventually(200, Duration::from_millis(10), async || sem
            .in_flight("kept")
            .await
            .unwrap()
            == 0)
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_is_exactly_once_and_tokens_survive_the_keys_expiry() {
    let server = RedisServer::start();
    let sem = semaphore(&server.url(), 3, Duration::from_secs(10)).await;
    let a = sem.try_acquire_n("k", 2).await.unwrap();
    let b = sem.try_acquire_n("k", 1).await.unwrap();
    assert!(b.token() > a.token());
    assert_eq!(sem.in_flight("k").await.unwrap(), 3);
    let id = a.id();
    assert_eq!(a.release().await.unwrap(), Released::Returned);
    assert_eq!(sem.in_flight("k").await.unwrap(), 1);
    for _ in 0..2 {
        assert_eq!(sem.release("k", &id).await.unwrap(), Released::NotHeld);
        assert_eq!(
            sem.in_flight("k").await.unwrap(),
            1,
            "a second release takes nothing"
        );
    }
    assert_eq!(sem.renew("k", &id).await.unwrap(), None);
    // Released through its id elsewhere; the lease's own release is then a no-op.
    assert!(sem.renew("k", &b.id()).await.unwrap().is_some());
    assert_eq!(sem.release("k", &b.id()).await.unwrap(), Released::Returned);
    let last = b.token();
    assert_eq!(b.release().await.unwrap(), Released::NotHeld);
    // A dropped lease is released in the background.
    drop(sem.try_acquire_n("k", 3).await.unwrap());
    assert!(
        eventually(200, Duration::from_millis(10), async || sem
            .in_flight("k")
            .await
            .unwrap()
            == 0)
        .await
    );
    // With nothing held the key goes, and tokens still increase.
    let state = sem.state_key("k");
    assert!(
        eventually(200, Duration::from_millis(10), async || {
            redis::cmd("EXISTS")
                .arg(&state)
                .query::<u64>(&mut server.conn())
                .unwrap()
                == 0
        })
        .await
    );
    let after = sem.try_acquire("k").await.unwrap().unwrap();
    assert!(after.token() > last, "{} after {last}", after.token());
    let _ = after.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_typed_and_waiting_is_bounded_and_cancel_safe() {
    let server = RedisServer::start();
    let sem = semaphore(&server.url(), 2, Duration::from_secs(10)).await;
    assert!(matches!(
        sem.try_acquire_n("k", 3).await,
        Err(RedisLimitError::Limited(AcquireError::ExceedsBurst {
            requested: 3,
            burst: 2
        }))
    ));
    let full = sem.try_acquire_n("k", 2).await.unwrap();
    match sem.try_acquire_n("k", 1).await {
        Err(RedisLimitError::Limited(AcquireError::RateLimited { retry_after })) => {
            assert!(retry_after <= Duration::from_secs(10) && !retry_after.is_zero());
        }
        other => panic!("{other:?}"),
    }
    // n = 0 takes nothing and is never refused.
    let zero = sem.try_acquire_n("k", 0).await.unwrap();
    assert!(zero.token() > full.token());
    assert_eq!(zero.release().await.unwrap(), Released::Returned);
    assert!(sem
        .try_acquire_for_async("k", Duration::from_millis(30))
        .await
        .is_err());
    // A waiter dropped while waiting leaves nothing behind; a waiter waiting gets the permits.
    let dropped = tokio::time::timeout(Duration::from_millis(30), sem.acquire_async("k")).await;
    assert!(dropped.is_err());
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire_n_async("k", 2).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(full.release().await.unwrap(), Released::Returned);
    let got = waiter.await.unwrap().unwrap();
    assert_eq!(sem.in_flight("k").await.unwrap(), 2);
    drop(got);
    assert!(
        eventually(200, Duration::from_millis(10), async || sem
            .in_flight("k")
            .await
            .unwrap()
            == 0)
        .await
    );

    // A waiter dropped while its call is in flight: the grant it never saw is released. (A
    // bystander keeps the key, so the last token shows that the grant happened.)
    let bystander = sem.try_acquire("c").await.unwrap().unwrap();
    let state = sem.state_key("c");
    let last_token = || -> u64 {
        let s: f64 = redis::cmd("ZSCORE")
            .arg(&state)
            .arg("#")
            .query(&mut server.conn())
            .unwrap();
        -s as u64
    };
    // Polled once (which starts the call), then dropped. The call runs in a task of its own,
    // so on a loaded machine it can finish before that one poll returns: then it was never
    // dropped in flight, and the case is tried again once its lease is back.
    let mut before = bystander.token();
    let mut tries = 0;
    loop {
        let finished = tokio::select! {
            biased;
            r = sem.try_acquire("c") => Some(r),
            () = std::future::ready(()) => None,
        };
        let Some(r) = finished else { break };
        tries += 1;
        assert!(
            tries < 20,
            "the call finished within its first poll {tries} times"
        );
        let lease = r.unwrap().expect("a permit was free");
        before = lease.token();
        assert_eq!(lease.release().await.unwrap(), Released::Returned);
    }
    let granted = eventually(200, Duration::from_millis(10), async || {
        last_token() > before
    })
    .await;
    assert!(granted, "the dropped call was granted on the server");
    assert!(
        eventually(200, Duration::from_millis(10), async || sem
            .in_flight("c")
            .await
            .unwrap()
            == 1)
        .await
    );
    assert_eq!(bystander.release().await.unwrap(), Released::Returned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_policies_error_or_refuse_and_open_is_refused() {
    let mut server = RedisServer::start();
    let open = RedisConcurrencyLimiter::builder(1)
        .on_failure(FailurePolicy::Open)
        .connect(&server.url())
        .await;
    assert!(matches!(open, Err(RedisLimitError::Unsupported(_))));
    let url = server.url();
    let connect = |policy| {
        // No stall of a loaded machine reaches it: the first acquire needs Redis's answer. (With
        // the server killed, calls fail at once: the connection is refused.)
        RedisConcurrencyLimiter::builder(1)
            .deadline(Duration::from_secs(2))
            .on_failure(policy)
            .connect(&url)
    };
    let error = connect(FailurePolicy::Error).await.unwrap();
    let retry_after = Duration::from_secs(3);
    let closed = connect(FailurePolicy::Closed { retry_after })
        .await
        .unwrap();
    let held = error.try_acquire("k").await.unwrap().unwrap();
    server.kill();
    assert!(error.try_acquire("k").await.unwrap_err().is_unavailable());
    assert!(closed.try_acquire("k").await.unwrap().is_none());
    assert!(matches!(
        closed.try_acquire_n_for_async("k", 1, Duration::from_secs(5)).await,
        Err(RedisLimitError::Limited(AcquireError::RateLimited { retry_after: r })) if r == retry_after
    ));
    assert!(closed.stats().policy_decisions >= 2);
    // Renewals and releases report the failure whatever the policy.
    let mut held = held;
    assert!(held.renew().await.unwrap_err().is_unavailable());
    assert!(held.release().await.unwrap_err().is_unavailable());
    assert!(closed
        .check_token("k", 1)
        .await
        .unwrap_err()
        .is_unavailable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_primary_cluster_grants_and_releases_on_many_keys() {
    let cluster = RedisCluster::start(3);
    let sem = RedisConcurrencyLimiter::builder(2)
        .deadline(Duration::from_secs(2))
        .connect_cluster(cluster.urls())
        .await
        .unwrap();
    let keys: Vec<String> = (0..60)
        .map(|i| {
            if i % 2 == 0 {
                format!("{{acct{i}}}:export")
            } else {
                format!("plain-{i}")
            }
        })
        .collect();
    let mut leases = Vec::new();
    for k in &keys {
        leases.push(sem.try_acquire_n(k, 2).await.unwrap());
        assert!(sem.try_acquire(k).await.unwrap().is_none(), "{k} is full");
    }
    let sizes: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| redis::cmd("DBSIZE").query(&mut n.conn()).unwrap())
        .collect();
    assert_eq!(
        sizes.iter().sum::<u64>(),
        keys.len() as u64,
        "one Redis key per key"
    );
    assert!(
        sizes.iter().all(|&s| s > 0),
        "keys on every node: {sizes:?}"
    );
    for (k, l) in keys.iter().zip(leases) {
        assert!(sem.check_token(k, l.token()).await.unwrap());
        assert_eq!(l.release().await.unwrap(), Released::Returned);
        let again = sem.try_acquire(k).await.unwrap().unwrap();
        assert_eq!(again.release().await.unwrap(), Released::Returned);
    }
}

/// Keys are untrusted input (a user id, a header): whatever bytes a key holds (control
/// characters, `{`, `}`, `:`, newlines, any Unicode), its state is the one Redis key
/// `<prefix>:sem:<key>`, it counts only its own permits, and another key never sees them.
#[test]
fn hostile_keys_keep_their_own_state() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    let server = RedisServer::start();
    let rt = redis_support::current_thread();
    let sem = rt.block_on(semaphore(&server.url(), 2, Duration::from_secs(30)));
    let key = prop_oneof![any::<String>(), "[{}:\\x00-\\x1f a-c]{0,24}"];
    let mut runner = TestRunner::new(Config {
        cases: 64,
        ..Config::default()
    });
    runner
        .run(&(key.clone(), key), |(a, b)| {
            prop_assume!(a != b);
            let state = sem.state_key(&a);
            prop_assert_eq!(&state, &format!("tollgate:sem:{a}"));
            rt.block_on(async {
                let first = sem.try_acquire_n(&a, 2).await.unwrap();
                let refused = sem.try_acquire(&a).await.unwrap();
                prop_assert!(refused.is_none(), "a third permit on a full key");
                prop_assert_eq!(sem.in_flight(&a).await.unwrap(), 2);
                prop_assert_eq!(sem.in_flight(&b).await.unwrap(), 0);
                let exists: bool = redis::cmd("EXISTS")
                    .arg(&state)
                    .query(&mut server.conn())
                    .unwrap();
                prop_assert!(exists, "no Redis key {:?}", state);
                prop_assert_eq!(first.release().await.unwrap(), Released::Returned);
                prop_assert_eq!(sem.in_flight(&a).await.unwrap(), 0);
                Ok::<(), TestCaseError>(())
            })
        })
        .unwrap();
}

/// The names before the rename still compile (with a deprecation warning) and are the very
/// same types, so code written against them keeps working unchanged.
#[test]
#[allow(deprecated)]
fn the_deprecated_semaphore_names_are_the_concurrency_limiter_types() {
    use std::any::TypeId;
    use tollgate::redis::{
        RedisConcurrencyLimiter, RedisConcurrencyLimiterBuilder, RedisSemaphore,
        RedisSemaphoreBuilder,
    };

    fn takes_old(limiter: &RedisSemaphore) -> u64 {
        limiter.limit()
    }
    // A function written for the old name accepts the new type, and the reverse.
    let _: fn(&RedisConcurrencyLimiter) -> u64 = takes_old;
    let _: fn(&RedisSemaphore) -> u64 = RedisConcurrencyLimiter::limit;
    assert_eq!(
        TypeId::of::<RedisSemaphore>(),
        TypeId::of::<RedisConcurrencyLimiter>()
    );
    assert_eq!(
        TypeId::of::<RedisSemaphoreBuilder>(),
        TypeId::of::<RedisConcurrencyLimiterBuilder>()
    );
    // The old name's constructor is the new one's.
    let old: RedisConcurrencyLimiterBuilder = RedisSemaphore::builder(2);
    let new: RedisSemaphoreBuilder = RedisConcurrencyLimiter::builder(2);
    assert_eq!(format!("{old:?}"), format!("{new:?}"));
}
