//! Blocks, penalties, rewards and resets on a real Redis against the in-process keyed limiter
//! running the same algorithm type: schedules interleaving checks with every change give the
//! same `Decision`s, every field compared, at the server time each reply carries (the
//! in-process `ManualClock` is set to it before the same call is replayed, as in
//! `redis_windows.rs`: the clock then reads Unix time, so its windows are the epoch-aligned
//! ones Redis counts). The one difference is of resolution: where the in-process rule lands
//! between two microseconds, Redis reports the next whole microsecond (the in-process value
//! rounded up): a weighted window's `retry_after` (`redis_windows.rs`), and the sliding log's
//! times after a block that only its floor keeps alive (a block is stamped at least one tick
//! after the newest stamp's window start: 1 ns in process, 1 µs on Redis).
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;
use redis_support::RedisServer;
use tollgate::redis::{RedisAlgorithm, RedisDecision, RedisLimitError, RedisRateLimiter};
use tollgate::{
    Decision, FixedWindow, Gcra, KeyedRateLimiter, ManualClock, Quota, SlidingLog, SlidingWindow,
    WeightedWindow,
};

fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("p{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Epoch-aligned windows for a clock that reads Unix time (`redis_windows.rs`).
fn fixed() -> FixedWindow {
    FixedWindow::epoch_aligned_from(UNIX_EPOCH)
}

#[derive(Clone, Debug)]
enum Step {
    Decide { key: u8, n: u64 },
    Block { key: u8, us: u64 },
    Penalize { key: u8, n: u64 },
    Reward { key: u8, n: u64 },
    Reset { key: u8 },
    Sleep { us: u64 },
}

/// Steps for limit `l` and window `w` µs: checks around the limit, blocks up to two windows
/// (and now and then zero), penalties and rewards up to twice the limit (and now and then
/// huge: saturation), resets, sleeps up to 1.5 windows.
fn steps(l: u64, w: u64, len: usize) -> impl Strategy<Value = Vec<Step>> {
    let amount = prop_oneof![
        8 => 0..=2 * l + 1,
        1 => Just(u64::MAX),
        1 => (1u64 << 32) - 2..(1 << 32) + 2,
    ];
    let key = 0..2u8;
    let step = prop_oneof![
        6 => (key.clone(), 0..=l + 1).prop_map(|(key, n)| Step::Decide { key, n }),
        2 => (key.clone(), prop_oneof![4 => 0..=2 * w, 1 => Just(0)])
            .prop_map(|(key, us)| Step::Block { key, us }),
        2 => (key.clone(), amount.clone()).prop_map(|(key, n)| Step::Penalize { key, n }),
        2 => (key.clone(), amount).prop_map(|(key, n)| Step::Reward { key, n }),
        1 => key.prop_map(|key| Step::Reset { key }),
        2 => (0..=w * 3 / 2).prop_map(|us| Step::Sleep { us }),
    ];
    prop::collection::vec(step, 1..len)
}

/// `d` as Redis reports it: `retry_after` and `reset_after` on the microseconds its clock can
/// read.
fn on_microseconds(mut d: Decision) -> Decision {
    let up =
        |r: Duration| Duration::from_micros(u64::try_from(r.as_nanos().div_ceil(1000)).unwrap());
    d.retry_after = d.retry_after.map(up);
    d.reset_after = up(d.reset_after);
    d
}

/// Runs `steps` through a Redis limiter and an in-process one, both running `alg` under
/// `quota`; panics at the first difference. `sub_us`: the algorithm's times may fall between
/// microseconds (module docs), else both must agree to the nanosecond.
async fn replay<A: RedisAlgorithm>(
    server: &RedisServer,
    alg: A,
    quota: Quota,
    steps: &[Step],
    sub_us: bool,
) {
    let redis = RedisRateLimiter::builder(quota)
        .algorithm(alg)
        .unwrap()
        .prefix(unique_prefix())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let clock = ManualClock::new();
    let local: KeyedRateLimiter<String, A> = KeyedRateLimiter::builder(quota)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build();
    for (i, s) in steps.iter().enumerate() {
        let at = |us: u64| format!("{} step {i} at {us} us: {s:?}", A::NAME);
        // The Redis reply, and the same call in process once the clock reads its time.
        let (r, l): (RedisDecision, Decision) = match *s {
            Step::Sleep { us } => {
                tokio::time::sleep(Duration::from_micros(us)).await;
                continue;
            }
            Step::Reset { key } => {
                let k = format!("k{key}");
                redis.reset(&k).await.unwrap();
                local.reset(&k);
                continue;
            }
            Step::Decide { key, n } => {
                let k = format!("k{key}");
                let r = redis.decide_n(&k, n).await.unwrap();
                set(&clock, &r);
                (r, local.check_n(&k, n))
            }
            Step::Block { key, us } => {
                let k = format!("k{key}");
                let d = Duration::from_micros(us);
                let r = redis.block(&k, d).await.unwrap();
                set(&clock, &r);
                (r, local.block(&k, d).unwrap())
            }
            Step::Penalize { key, n } => {
                let k = format!("k{key}");
                let r = redis.penalize(&k, n).await.unwrap();
                set(&clock, &r);
                (r, local.penalize(&k, n).unwrap())
            }
            Step::Reward { key, n } => {
                let k = format!("k{key}");
                let r = redis.reward(&k, n).await.unwrap();
                set(&clock, &r);
                (r, local.reward(&k, n))
            }
        };
        let us = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
        if sub_us {
            assert_eq!(r.decision, on_microseconds(l), "{}", at(us));
            let under_a_us = |got: Duration, exact: Duration| {
                got >= exact && got - exact < Duration::from_micros(1)
            };
            assert!(under_a_us(r.decision.reset_after, l.reset_after));
            if let (Some(got), Some(exact)) = (r.decision.retry_after, l.retry_after) {
                assert!(under_a_us(got, exact));
            }
        } else {
            assert_eq!(r.decision, l, "{}", at(us));
        }
    }
}

/// Sets the in-process clock to the server time of `r`.
fn set(clock: &ManualClock, r: &RedisDecision) {
    let us = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
    assert!(clock.set(us * 1000), "the server clock went backwards");
}

fn block_on(f: impl std::future::Future<Output = ()>) {
    redis_support::current_thread().block_on(f);
}

/// Small limits over windows of a few milliseconds (whole µs), so schedules cross many
/// boundaries.
fn schedule() -> impl Strategy<Value = (Quota, Vec<Step>)> {
    (
        1..6u64,
        prop_oneof![Just(2_000u64), Just(5_000), Just(20_000), Just(3_333)],
    )
        .prop_flat_map(|(l, w_us)| {
            let q = Quota::new(l, Duration::from_micros(w_us)).unwrap();
            (Just(q), steps(l, w_us, 60))
        })
}

/// A sliding window's `k` with a window of a few milliseconds that it splits into whole µs
/// (`redis_windows.rs`), and a small limit.
fn sliding_schedule() -> impl Strategy<Value = (SlidingWindow, Quota, Vec<Step>)> {
    let k_and_w = prop::sample::select(vec![
        (2u32, 2_000u64),
        (3, 3_333),
        (4, 5_000),
        (5, 20_000),
        (8, 2_000),
        (16, 20_000),
        (64, 3_200),
    ]);
    (k_and_w, 1..6u64).prop_flat_map(|((k, w_us), l)| {
        let q = Quota::new(l, Duration::from_micros(w_us)).unwrap();
        (Just(SlidingWindow::new(k)), Just(q), steps(l, w_us, 60))
    })
}

proptest! {
    // 32 cases by default (each starts a server); PROPTEST_CASES raises it for a soak run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(32),
        ..ProptestConfig::default()
    })]

    #[test]
    fn fixed_window_adjusts_as_in_process((q, s) in schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, fixed(), q, &s, false));
    }

    #[test]
    fn weighted_window_adjusts_as_in_process((q, s) in schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, WeightedWindow, q, &s, true));
    }

    #[test]
    fn sliding_window_adjusts_as_in_process((alg, q, s) in sliding_schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, alg, q, &s, true));
    }

    #[test]
    fn sliding_log_adjusts_as_in_process((q, s) in schedule()) {
        let server = RedisServer::start();
        block_on(replay(&server, SlidingLog, q, &s, true));
    }
}

/// One algorithm's reset: a used-up key is fresh again in every process, `true`; an unknown
/// key is `false`; the key's Redis key is gone.
async fn reset_forgets<A: RedisAlgorithm>(server: &RedisServer, alg: A) {
    let quota = Quota::per_minute(2).unwrap();
    let connect = || async {
        RedisRateLimiter::builder(quota)
            .algorithm(alg)
            .unwrap()
            .prefix("reset")
            .deadline(Duration::from_secs(2))
            .connect(&server.url())
            .await
            .unwrap()
    };
    let (a, b) = (connect().await, connect().await);
    a.try_acquire_n("{u1}", 2).await.unwrap();
    assert!(!b.try_acquire("{u1}").await.unwrap(), "{}", A::NAME);
    let mut conn = server.conn();
    let state = a.state_key("{u1}");
    assert!(redis::cmd("EXISTS")
        .arg(&state)
        .query::<bool>(&mut conn)
        .unwrap());
    assert!(b.reset("{u1}").await.unwrap(), "{}", A::NAME);
    assert!(!redis::cmd("EXISTS")
        .arg(&state)
        .query::<bool>(&mut conn)
        .unwrap());
    assert_eq!(a.peek("{u1}").await.unwrap().remaining, 2, "{}", A::NAME);
    assert!(a.try_acquire_n("{u1}", 2).await.is_ok(), "{}", A::NAME);
    assert!(!a.reset("{never-seen}").await.unwrap(), "{}", A::NAME);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_forgets_the_key_under_every_algorithm() {
    let server = RedisServer::start();
    reset_forgets(&server, Gcra).await;
    reset_forgets(&server, FixedWindow::epoch_aligned()).await;
    reset_forgets(&server, WeightedWindow).await;
    reset_forgets(&server, SlidingLog).await;
    reset_forgets(&server, SlidingWindow::new(4)).await;
}

/// A reset forgets this process's cached denial: the next check goes to Redis and is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_forgets_the_local_denial_cache() {
    let server = RedisServer::start();
    let l = RedisRateLimiter::builder(Quota::per_minute(1).unwrap())
        .denial_cache(std::num::NonZeroUsize::new(16).unwrap())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    assert!(l.try_acquire("k").await.unwrap());
    assert!(!l.try_acquire("k").await.unwrap());
    assert!(!l.try_acquire("k").await.unwrap());
    assert_eq!(l.stats().local_denials, 1);
    assert!(l.reset("k").await.unwrap());
    assert!(l.try_acquire("k").await.unwrap());
}

/// A reward forgets this process's cached denial too: the permit given back is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reward_forgets_the_local_denial_cache() {
    let server = RedisServer::start();
    let l = RedisRateLimiter::builder(Quota::per_minute(1).unwrap())
        .algorithm(SlidingLog)
        .unwrap()
        .denial_cache(std::num::NonZeroUsize::new(16).unwrap())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    assert!(l.try_acquire("k").await.unwrap());
    assert!(!l.try_acquire("k").await.unwrap());
    assert!(!l.try_acquire("k").await.unwrap());
    assert_eq!(l.stats().local_denials, 1);
    assert!(l.reward("k", 1).await.unwrap().decision.allowed);
    assert!(l.try_acquire("k").await.unwrap());
}

/// The per-call quota's key name is the key `check_with` and `throttle` write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_key_with_names_the_per_call_state() {
    let server = RedisServer::start();
    let l = RedisRateLimiter::builder(Quota::per_second(10).unwrap())
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let mut conn = server.conn();
    let exists = |conn: &mut redis::Connection, k: &str| {
        redis::cmd("EXISTS").arg(k).query::<bool>(conn).unwrap()
    };
    let q = Quota::per_minute(5).unwrap();
    let name = l.state_key_with("{u}:search", q).unwrap();
    assert_ne!(name, l.state_key("{u}:search"));
    assert!(!exists(&mut conn, &name));
    assert!(l.check_with("{u}:search", q).await.unwrap().allowed);
    assert!(exists(&mut conn, &name));
    let t = Quota::from_throttle(15, 30, 60).unwrap();
    let name = l.state_key_with("user123", t).unwrap();
    l.throttle("user123", 15, 30, 60, 1).await.unwrap();
    assert!(exists(&mut conn, &name));
    assert_eq!(l.state_key_with("u", l.quota()).unwrap(), l.state_key("u"));
    // What the algorithm cannot run is refused as check_with refuses it.
    let bursty = Quota::per_second(3).unwrap().with_burst(9).unwrap();
    let w = RedisRateLimiter::builder(q)
        .algorithm(WeightedWindow)
        .unwrap()
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    assert!(matches!(
        w.state_key_with("u", bursty),
        Err(RedisLimitError::InvalidQuota(_))
    ));
}

/// A change is not a decision: with Redis down, every policy returns the failure for `reset`,
/// `block`, `penalize` and `reward`, and a fallback limiter is left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_return_the_failure_under_every_policy() {
    use std::sync::Arc;
    use tollgate::redis::FailurePolicy;
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let quota = Quota::per_minute(5).unwrap();
    let fallback: Arc<KeyedRateLimiter<String, SlidingLog>> = Arc::new(
        KeyedRateLimiter::builder(quota)
            .algorithm(SlidingLog)
            .unwrap()
            .build(),
    );
    let policies = [
        FailurePolicy::Error,
        FailurePolicy::Open,
        FailurePolicy::Closed {
            retry_after: Duration::from_secs(1),
        },
        FailurePolicy::Fallback(fallback.clone()),
    ];
    for policy in policies {
        let l = RedisRateLimiter::builder(quota)
            .algorithm(SlidingLog)
            .unwrap()
            .on_failure(policy)
            .deadline(Duration::from_millis(50))
            .connect(&url)
            .await
            .unwrap();
        let down = |e: RedisLimitError| e.is_unavailable();
        assert!(down(l.reset("k").await.unwrap_err()));
        assert!(down(
            l.block("k", Duration::from_secs(9)).await.unwrap_err()
        ));
        assert!(down(l.penalize("k", 3).await.unwrap_err()));
        assert!(down(l.reward("k", 3).await.unwrap_err()));
    }
    assert_eq!(fallback.len(), 0, "the fallback limiter was changed");
}

/// The block-entry tests' limiter: quota 2 per 200 ms, so a 60 s block's entry is stamped
/// 59.8 s ahead.
async fn two_per_200ms<A: RedisAlgorithm>(server: &RedisServer, alg: A) -> RedisRateLimiter<A> {
    RedisRateLimiter::builder(Quota::new(2, Duration::from_millis(200)).unwrap())
        .algorithm(alg)
        .unwrap()
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap()
}

/// After a block longer than the window is partly rewarded, a grant made now counts until now
/// plus the window, not until the block's end (the rule "an entry counts while `stamp > now -
/// W`, a grant is stamped `now`"): quota 2 per 200 ms, a 60 s block (an entry of 2 stamped
/// 59.8 s ahead) rewarded by 1, one grant now, and one more once that grant left the window.
/// (A script that stamped the grant at the newest stamp, the block's, held it for the whole
/// block.)
async fn a_grant_after_a_rewarded_block_counts_one_window<A: RedisAlgorithm>(alg: A) {
    let server = RedisServer::start();
    let l = two_per_200ms(&server, alg).await;
    l.block("k", Duration::from_secs(60)).await.unwrap();
    l.reward("k", 1).await.unwrap();
    let first = l.decide("k").await.unwrap();
    assert!(first.decision.allowed, "{}: {first:?}", A::NAME);
    // The block's rewarded entry (one permit) still counts, for about 60 s, and the key lives
    // as long.
    assert!(
        first.decision.reset_after >= Duration::from_secs(59),
        "{}: {first:?}",
        A::NAME
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(l.state_key("k"))
        .query(&mut server.conn())
        .unwrap();
    assert!(ttl >= 59_000, "{}: the key expires in {ttl} ms", A::NAME);
    let later = redis_support::eventually(150, Duration::from_millis(20), async || {
        l.check("k").await.unwrap().allowed
    })
    .await;
    assert!(later, "{}: the grant counted past its window", A::NAME);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_log_grant_after_rewarded_block_counts_one_window() {
    a_grant_after_a_rewarded_block_counts_one_window(SlidingLog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_grant_after_rewarded_block_counts_one_window() {
    a_grant_after_a_rewarded_block_counts_one_window(SlidingWindow::new(4)).await;
}

/// A key written before block entries were marked (a block's entry among the sliding log's
/// `h:` members, the sliding window's `=t:c` form with no block count) decides as it did then:
/// a grant beside the block's later entry is stamped at it and counts until it leaves. That can
/// only under-admit: quota 2 per 200 ms, the entry of a 60 s block rewarded by 1 (stamped
/// 59.8 s ahead), one grant, then a denial until the block's end.
async fn an_unmarked_block_entry_decides_as_before<A: RedisAlgorithm>(
    alg: A,
    write: impl Fn(&mut redis::Connection, &str, u64),
) {
    let server = RedisServer::start();
    let l = two_per_200ms(&server, alg).await;
    let mut conn = server.conn();
    let t: Vec<u64> = redis::cmd("TIME").query(&mut conn).unwrap();
    // Off the sliding window's 50 ms grid, as a block's end less W mostly is.
    let stamp = (t[0] * 1_000_000 + t[1] + 59_800_000) / 50_000 * 50_000 + 1;
    let key = l.state_key("k");
    write(&mut conn, &key, stamp);
    let _: () = redis::cmd("PEXPIREAT")
        .arg(&key)
        .arg((stamp + 200_000).div_ceil(1000))
        .query(&mut conn)
        .unwrap();
    let first = l.decide("k").await.unwrap();
    assert!(first.decision.allowed, "{}: {first:?}", A::NAME);
    let second = l.decide("k").await.unwrap();
    assert!(!second.decision.allowed, "{}: {second:?}", A::NAME);
    let retry = second.decision.retry_after.unwrap();
    assert!(retry >= Duration::from_secs(59), "{}: {second:?}", A::NAME);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_log_unmarked_block_entry_decides_as_before() {
    an_unmarked_block_entry_decides_as_before(SlidingLog, |conn, key, stamp| {
        let _: () = redis::cmd("ZADD")
            .arg(key)
            .arg(-1)
            .arg(format!("h:{stamp}:1"))
            .query(conn)
            .unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_unmarked_block_entry_decides_as_before() {
    an_unmarked_block_entry_decides_as_before(SlidingWindow::new(4), |conn, key, stamp| {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(format!("={stamp}:1"))
            .query(conn)
            .unwrap();
    })
    .await;
}

/// The stored forms of block entries, as the guide's Redis page gives them: after a 60 s block
/// rewarded by 1 and a grant (quota 2 per 200 ms), the sliding log holds the grant's member
/// and `b:<stamp>:1`, the sliding window `=<grant's stamp>:1:<stamp>:1=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_entries_are_stored_marked() {
    let server = RedisServer::start();
    let log = two_per_200ms(&server, SlidingLog).await;
    let sliding = two_per_200ms(&server, SlidingWindow::new(4)).await;
    let mut conn = server.conn();
    let us = |r: &RedisDecision| u64::try_from(r.server_time.unwrap().as_micros()).unwrap();

    let b = us(&log.block("k", Duration::from_secs(60)).await.unwrap()) + 59_800_000;
    log.reward("k", 1).await.unwrap();
    let g = us(&log.decide("k").await.unwrap());
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(log.state_key("k"))
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(members, [format!("b:{b}:1"), format!("{g}:1")]);

    let b = us(&sliding.block("k", Duration::from_secs(60)).await.unwrap()) + 59_800_000;
    sliding.reward("k", 1).await.unwrap();
    let g = us(&sliding.decide("k").await.unwrap()) / 50_000 * 50_000;
    let value: String = redis::cmd("GET")
        .arg(sliding.state_key("k"))
        .query(&mut conn)
        .unwrap();
    assert_eq!(value, format!("={g}:1:{b}:1=1"));
}

/// Redis compares an expiry with its live clock, which runs on while a script does: an expiry
/// that the script's clock reading put ahead can be past when it is set, and the key goes at
/// once. The sliding log's change ops set the expiry before their reply's reads, which then
/// found no key (a Lua error). Here the script is slow (200,000 expired operator entries to
/// drop) and the key's information ends 100 ms after the clock reading before the call: a
/// `penalize(0)` of a key with its 3 permits used must reply a denial, as it would at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_log_change_replies_when_the_key_expires_during_the_script() {
    let server = RedisServer::start();
    let l = RedisRateLimiter::builder(Quota::per_second(3).unwrap())
        .algorithm(SlidingLog)
        .unwrap()
        .deadline(Duration::from_secs(20))
        .connect(&server.url())
        .await
        .unwrap();
    let key = l.state_key("k");
    let mut conn = server.conn();
    let _: () = redis::cmd("EVAL")
        .arg("for s = 1, 200000 do redis.call('ZADD', KEYS[1], -1, 'h:' .. s .. ':1') end")
        .arg(1)
        .arg(&key)
        .query(&mut conn)
        .unwrap();
    let t: Vec<u64> = redis::cmd("TIME").query(&mut conn).unwrap();
    let g = t[0] * 1_000_000 + t[1] - 1_000_000 + 100_000;
    for seq in 1..=3 {
        let _: () = redis::cmd("ZADD")
            .arg(&key)
            .arg(g)
            .arg(format!("{g}:{seq}"))
            .query(&mut conn)
            .unwrap();
    }
    let r = l.penalize("k", 0).await.unwrap();
    let now = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
    assert!(now < g + 1_000_000, "the call came too late to test: {r:?}");
    assert!(!r.decision.allowed, "{r:?}");
    assert_eq!(r.decision.remaining, 0, "{r:?}");
    assert_eq!(
        r.decision.retry_after,
        Some(Duration::from_micros(g + 1_000_000 - now)),
        "{r:?}"
    );
}
