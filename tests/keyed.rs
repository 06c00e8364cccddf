//! The keyed limiter through its public API: per-key state, borrowed and composite keys,
//! per-call quotas, redis-cell values, exact eviction times, reservations, the key cap, async.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "tokio")]
use tollgate::TokioClock;
use tollgate::{AcquireError, KeyedRateLimiter, ManualClock, Quota, WhenFull};

const MS: Duration = Duration::from_millis(1);

fn manual<K>(q: Quota) -> (ManualClock, KeyedRateLimiter<K>)
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
{
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<K>::builder(q)
        .clock(clock.clone())
        .build();
    (clock, l)
}

#[test]
fn keys_are_independent() {
    let (clock, l) = manual::<u64>(Quota::per_second(2).unwrap());
    assert!(l.try_acquire(&1));
    assert!(l.try_acquire(&1));
    assert!(!l.try_acquire(&1));
    // Key 1 being empty does not touch key 2.
    assert_eq!(l.peek(&2).remaining, 2);
    assert!(l.try_acquire(&2));
    assert_eq!(l.check(&2).remaining, 0);
    assert!(!l.try_acquire(&2));
    clock.advance(Duration::from_millis(500));
    assert!(l.try_acquire(&1));
    assert!(!l.try_acquire(&1));
    assert!(l.try_acquire(&2));
    assert_eq!(l.len(), 2);
}

#[test]
fn borrowed_str_lookups_reach_the_string_keys_state() {
    let (_clock, l) = manual::<String>(Quota::per_second(1).unwrap());
    assert!(l.try_acquire("alice")); // &str
    assert!(!l.try_acquire(&"alice".to_string())); // &String: same key
    assert!(!l.check("alice").allowed);
    assert_eq!(l.peek("alice").remaining, 0);
    assert!(l.try_acquire("bob"));
    assert_eq!(l.len(), 2);
}

#[test]
fn composite_keys_limit_per_user_per_action_or_both() {
    let q = Quota::per_second(1).unwrap();
    let (_c1, per_user) = manual::<u64>(q);
    let (_c2, per_action) = manual::<&'static str>(q);
    let (_c3, per_pair) = manual::<(u64, &'static str)>(q);
    let requests = [(1, "read"), (1, "write"), (2, "read")];
    let user: Vec<bool> = requests
        .iter()
        .map(|(u, _)| per_user.try_acquire(u))
        .collect();
    let action: Vec<bool> = requests
        .iter()
        .map(|(_, a)| per_action.try_acquire(a))
        .collect();
    let pair: Vec<bool> = requests.iter().map(|r| per_pair.try_acquire(r)).collect();
    assert_eq!(user, [true, false, true]); // user 1's second request denied
    assert_eq!(action, [true, true, false]); // the second "read" denied
    assert_eq!(pair, [true, true, true]); // every pair is distinct
}

#[test]
fn per_call_quota_shares_the_keys_state() {
    let (clock, l) = manual::<&'static str>(Quota::per_second(1).unwrap());
    let pro = Quota::per_second(10).unwrap(); // T = 100 ms, burst 10
                                              // Five permits under the pro plan: tat = 500 ms.
    let d = l.check_n_with(&"k", 5, pro).unwrap();
    assert!(d.allowed);
    assert_eq!((d.limit, d.remaining), (10, 5));
    // The limiter's own quota (T = 1 s, burst 1) sees that debt: new_tat 1.5 s, allow at 0.5 s.
    let d = l.check(&"k");
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Duration::from_millis(500)));
    assert_eq!(d.reset_after, Duration::from_millis(500));
    // Back under the pro plan the same debt leaves room for exactly five more.
    assert!(l.check_n_with(&"k", 5, pro).unwrap().allowed);
    assert!(!l.check_n_with(&"k", 1, pro).unwrap().allowed);
    clock.advance(Duration::from_secs(1)); // tat was 1 s: now the bucket is full
    assert!(l.check(&"k").allowed);
}

#[test]
fn throttle_returns_redis_cells_values() {
    // CL.THROTTLE user123 15 30 60 q: burst 16, T = 2 s, tau = 32 s.
    let (clock, l) = manual::<String>(Quota::per_second(1).unwrap());
    let t = |q| l.throttle("user123", 15, 30, 60, q).unwrap().to_array();
    assert_eq!(t(1), [0, 16, 15, -1, 2]);
    assert_eq!(t(0), [0, 16, 15, -1, 2]); // a peek
    for left in (0..15).rev() {
        assert_eq!(t(1), [0, 16, left, -1, 32 - 2 * left]);
    }
    // Empty: tat = 32 s. The next one would be allowed at 34 - 32 = 2 s.
    assert_eq!(t(1), [1, 16, 0, 2, 32]);
    assert_eq!(t(17), [1, 16, 0, -1, 32]); // over the burst: never, so no retry
    clock.advance(Duration::from_millis(1500));
    // retry 0.5 s rounds up to 1; reset 30.5 s rounds up to 31.
    assert_eq!(t(1), [1, 16, 0, 1, 31]);
    clock.advance(Duration::from_millis(500));
    assert_eq!(t(1), [0, 16, 0, -1, 32]);
    // Another key is untouched; a bad quota is an error, not a panic.
    assert_eq!(l.throttle("other", 15, 30, 60, 1).unwrap().remaining, 15);
    assert!(l.throttle("user123", u64::MAX, 30, 60, 1).is_err());
    assert!(l.throttle("user123", 15, 0, 60, 1).is_err());
}

#[test]
fn only_cold_keys_are_evicted_at_exact_times() {
    let (clock, l) = manual::<u64>(Quota::from_interval(Duration::from_nanos(100)).unwrap());
    assert!(l.try_acquire(&1)); // tat 100
    clock.advance_nanos(1);
    assert!(l.try_acquire(&2)); // tat 101
    clock.set(99);
    assert_eq!(l.sweep_now(), 0);
    clock.set(100); // key 1: tat == now, cold; key 2: tat == now + 1, not
    assert_eq!(l.sweep_now(), 1);
    assert_eq!(l.len(), 1);
    assert!(!l.try_acquire(&2), "key 2 kept its state");
    assert!(l.try_acquire(&1), "key 1 was full anyway");
    clock.set(101);
    assert_eq!(l.sweep_now(), 1); // key 2 now cold, key 1 (tat 200) not
    assert_eq!(l.len(), 1);
    let s = l.stats();
    assert_eq!((s.keys, s.sweeps, s.evicted), (1, 3, 2));
}

#[test]
fn an_evicted_key_decides_exactly_like_the_kept_one_would_have() {
    // Two limiters see the same requests; one sweeps after every step.
    let q = Quota::per_second(4).unwrap().with_burst(3).unwrap();
    let (c1, swept) = manual::<u8>(q);
    let (c2, kept) = manual::<u8>(q);
    let steps = [0u32, 250, 1, 749, 1000, 3, 333, 0, 2000, 250];
    for (i, &ms) in steps.iter().cycle().take(200).enumerate() {
        c1.advance(ms * MS);
        c2.advance(ms * MS);
        let n = (i % 4) as u64;
        assert_eq!(swept.check_n(&7, n), kept.check_n(&7, n), "step {i}");
        swept.sweep_now();
    }
    assert!(swept.stats().evicted > 10);
    assert_eq!(kept.len(), 1);
}

#[test]
fn reserve_and_cancel_through_the_keyed_api() {
    let (clock, l) = manual::<String>(Quota::per_second(2).unwrap()); // T 500 ms, burst 2
    let r1 = l.reserve_n("k", 4).unwrap();
    assert_eq!(r1.delay(), Duration::from_secs(1));
    let r2 = l.reserve_n("k", 1).unwrap();
    assert_eq!(r2.delay(), Duration::from_millis(1500));
    r2.cancel(); // the latest: fully refunded
    r1.cancel(); // now the latest again: fully refunded
    assert_eq!(l.peek("k").remaining, 2);
    assert!(l.try_acquire_n("k", 2).is_ok());

    // A cancel after the key was evicted and recreated refunds nothing into the new state.
    let r = l.reserve_n("j", 3).unwrap(); // tat 1.5 s, ready at 0.5 s
    clock.advance(Duration::from_millis(1500));
    assert!(l.sweep_now() >= 1); // "j" is cold
    assert!(l.try_acquire("j")); // a new state for "j": tat 2 s
    r.cancel(); // ready long ago: nothing to give back
    assert_eq!(l.peek("j").remaining, 1);
}

#[test]
fn blocking_acquire_and_timeouts_per_key() {
    let (clock, l) = manual::<u8>(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    assert_eq!(l.acquire(&1), Ok(Duration::ZERO));
    assert_eq!(l.acquire(&1), Ok(Duration::from_millis(100)));
    assert_eq!(l.acquire(&2), Ok(Duration::ZERO));
    assert_eq!(
        l.try_acquire_n_for(&1, 1, Duration::from_millis(99)),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_millis(100)
        })
    );
    assert_eq!(
        l.try_acquire_n_for(&1, 1, Duration::from_millis(100)),
        Ok(Duration::from_millis(100))
    );
    assert_eq!(l.acquire_n(&3, 3).unwrap(), Duration::from_millis(200));
    assert_eq!(clock.sleeps(), [100 * MS, 100 * MS, 200 * MS]);
}

#[test]
fn cap_with_deny_refuses_new_keys_until_one_turns_cold() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(clock.clone())
        .max_keys(std::num::NonZeroUsize::new(1).unwrap())
        .when_full(WhenFull::Deny)
        .build();
    assert!(l.try_acquire(&1)); // tat 1 s
    let d = l.check(&2);
    assert!(!d.allowed);
    assert_eq!(d.remaining, 0);
    assert_eq!(d.retry_after, Some(Duration::from_secs(1))); // when key 1 turns cold
    clock.advance(Duration::from_millis(400));
    assert_eq!(
        l.try_acquire_n(&2, 1),
        Err(AcquireError::KeyCapReached {
            retry_after: Some(Duration::from_millis(600))
        })
    );
    assert!(l.reserve_n(&2, 1).is_err());
    assert_eq!(l.len(), 1);
    clock.advance(Duration::from_millis(600));
    assert!(l.try_acquire(&2)); // key 1 reclaimed, key 2 stored
    assert_eq!(l.len(), 1);
    // A blocking acquire waits for the cap, then for its permit.
    assert_eq!(l.acquire(&3), Ok(Duration::from_secs(1)));
    assert_eq!(l.len(), 1);
    assert!(!l.try_acquire(&3), "key 3 is tracked now");
}

#[test]
fn cap_with_allow_untracked_decides_as_fresh_and_stores_nothing() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(clock.clone())
        .max_keys(std::num::NonZeroUsize::new(1).unwrap())
        .when_full(WhenFull::AllowUntracked)
        .build();
    assert!(l.try_acquire(&1));
    for _ in 0..5 {
        assert!(l.try_acquire(&2)); // a full bucket every time: nothing remembered
    }
    assert!(l.check_n(&2, 2).exceeds_burst());
    assert!(!l.try_acquire(&1), "the tracked key is still limited");
    // Blocking: waits only for the excess over the burst, from a full bucket.
    assert_eq!(l.acquire_n(&2, 3).unwrap(), Duration::from_secs(2));
    assert_eq!(l.len(), 1);
}

/// Floods `cap`-limited limiters with 1,000,000 distinct keys from two threads while a third
/// checks `len() <= cap` continuously. Returns (admitted, largest len seen).
fn flood(policy: WhenFull, advance_every: Option<u64>) -> (u64, usize, KeyedRateLimiter<u64>) {
    const CAP: usize = 10_000;
    const PER_THREAD: u64 = 500_000;
    let clock = ManualClock::new();
    let l = Arc::new(
        KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
            .clock(clock.clone())
            .max_keys(std::num::NonZeroUsize::new(CAP).unwrap())
            .when_full(policy)
            .build(),
    );
    let admitted = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (l, done, max_seen) = (l.clone(), done.clone(), max_seen.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                let n = l.len();
                assert!(n <= CAP, "len {n} over the cap");
                max_seen.fetch_max(n, Ordering::Relaxed);
            }
        })
    };
    let workers: Vec<_> = (0..2u64)
        .map(|t| {
            let (l, admitted, clock) = (l.clone(), admitted.clone(), clock.clone());
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    if l.try_acquire(&(t * PER_THREAD + i)) {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    if advance_every.is_some_and(|e| i % e == e - 1) {
                        clock.advance(Duration::from_secs(1)); // earlier keys turn cold
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    watcher.join().unwrap();
    assert!(l.len() <= CAP);
    let l = Arc::try_unwrap(l).unwrap();
    (
        admitted.load(Ordering::Relaxed),
        max_seen.load(Ordering::Relaxed),
        l,
    )
}

#[test]
fn a_million_distinct_keys_never_exceed_the_cap_deny() {
    // Time frozen: every admitted key stays hot, so exactly the first CAP keys get in.
    let (admitted, max_seen, l) = flood(WhenFull::Deny, None);
    assert_eq!(admitted, 10_000);
    assert!(max_seen <= 10_000);
    assert_eq!(l.len(), 10_000);
    assert_eq!(
        l.stats().sweeps,
        0,
        "no reclaim sweep while nothing can be cold"
    );
}

#[test]
fn a_million_distinct_keys_never_exceed_the_cap_allow_untracked() {
    let (admitted, max_seen, l) = flood(WhenFull::AllowUntracked, None);
    assert_eq!(admitted, 1_000_000); // each distinct key gets its fresh bucket
    assert!(max_seen <= 10_000);
    assert_eq!(l.len(), 10_000);
}

#[test]
fn a_million_distinct_keys_with_time_passing_reclaim_cold_slots() {
    // Every 5,000 keys per thread a second passes: older keys turn cold and are reclaimed,
    // so far more than CAP keys are admitted, yet the table never grows past CAP.
    let (admitted, max_seen, l) = flood(WhenFull::Deny, Some(5_000));
    assert!(admitted > 100_000, "admitted only {admitted}");
    assert!(max_seen <= 10_000);
    assert!(l.stats().evicted > 0);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_acquire_waits_per_key_on_tokio_time() {
    let l =
        KeyedRateLimiter::<String>::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
            .clock(TokioClock::new())
            .build();
    let start = tokio::time::Instant::now();
    assert_eq!(l.acquire_n_async("a", 1).await.unwrap(), Duration::ZERO);
    assert_eq!(l.acquire_n_async("a", 1).await.unwrap(), 100 * MS);
    assert_eq!(l.acquire_n_async("b", 1).await.unwrap(), Duration::ZERO);
    assert_eq!(start.elapsed(), 100 * MS);
    assert!(l.try_acquire_n_for_async("a", 1, 50 * MS).await.is_err());
    assert_eq!(
        l.try_acquire_n_for_async("a", 1, 100 * MS).await.unwrap(),
        100 * MS
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn dropped_async_acquire_gives_the_keys_slot_back() {
    let l = Arc::new(
        KeyedRateLimiter::<String>::builder(Quota::per_second(1).unwrap())
            .clock(TokioClock::new())
            .build(),
    );
    assert!(l.try_acquire("k"));
    // Waits 1 s; abandoned after 300 ms: the reservation is cancelled.
    let waited = tokio::time::timeout(300 * MS, l.acquire_n_async("k", 1)).await;
    assert!(waited.is_err());
    let r = l.reserve_n("k", 1).unwrap();
    assert_eq!(
        r.delay(),
        700 * MS,
        "without the refund this would be 1.7 s"
    );
    r.cancel();
    // On a spawned task: an `async move` block owns the `Arc` and the key.
    let (owned, key) = (l.clone(), "k".to_string());
    let a = tokio::spawn(async move { owned.acquire_n_async(&key, 1).await });
    assert_eq!(a.await.unwrap().unwrap(), 700 * MS);
}

/// 2000 tasks over 50 keys at 10/s each (burst 10), every one giving up after 500 ms: 1250
/// give up, in whatever order their timers fire. Every abandoned slot comes back, so a second
/// after the timeouts no key owes anything (it used to owe up to 2.4 s).
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn thousands_of_abandoned_waiters_leave_no_debt_behind() {
    let l = Arc::new(
        KeyedRateLimiter::<u64>::builder(Quota::per_second(10).unwrap())
            .clock(TokioClock::new())
            .build(),
    );
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..2000u64 {
        let l = l.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::timeout(500 * MS, l.acquire_n_async(&(i % 50), 1)).await
        }));
    }
    let mut timed_out = 0;
    for t in tasks {
        if t.await.unwrap().is_err() {
            timed_out += 1;
        }
    }
    // Per key: 10 at once, then one every 100 ms up to 500 ms (the one due exactly at 500 ms
    // may lose the race with its own timeout).
    assert!((1250..=1300).contains(&timed_out), "{timed_out} timed out");
    tokio::time::sleep_until(start + 1500 * MS).await;
    for key in 0..50u64 {
        let d = l.peek(&key);
        assert_eq!(d.reset_after, Duration::ZERO, "key {key}: {d:?}");
        assert_eq!(d.remaining, 10, "key {key}: {d:?}");
    }
}

#[test]
fn tightening_the_quota_keeps_each_keys_debt_in_permits() {
    let (clock, l) = manual::<u8>(Quota::per_second(10).unwrap());
    assert!(l.try_acquire_n(&1, 10).is_ok());
    l.set_quota(Quota::per_hour(10).unwrap()).unwrap();
    // Key 1 owes its 10 permits for an hour now; an untouched key has the new burst.
    assert!(!l.try_acquire(&1));
    assert_eq!(l.peek(&1).reset_after, Duration::from_secs(3600));
    assert!(l.try_acquire_n(&2, 10).is_ok());
    assert!(!l.try_acquire(&2));
    clock.advance(Duration::from_secs(360));
    assert!(l.try_acquire(&1));
    assert!(!l.try_acquire(&1));
    // A sweep judges coldness in the new scale: key 1 is not cold after the old second.
    assert_eq!(l.sweep_now(), 0);
    assert_eq!(l.len(), 2);
}

#[test]
fn peek_agrees_with_check_at_a_full_cap() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(clock.clone())
        .max_keys(std::num::NonZeroUsize::MIN)
        .when_full(WhenFull::Deny)
        .build();
    assert!(l.try_acquire(&1));
    let (p, c) = (l.peek(&2), l.check(&2));
    assert_eq!(p, c);
    assert!(!p.allowed);
    assert_eq!(p.retry_after, Some(Duration::from_secs(1)));
    // Once key 1 can be cold, a check would reclaim it: the peek says a fresh key.
    clock.advance(Duration::from_secs(1));
    assert!(l.peek(&2).allowed);
    assert!(l.check(&2).allowed);
}

#[test]
fn keyed_acquire_never_returns_without_pacing() {
    let (clock, l) = manual::<u8>(Quota::per_second(10).unwrap());
    clock.set(tollgate::MAX_NANOS - 150 * 1_000_000);
    assert!(l.try_acquire(&1));
    assert_eq!(
        l.acquire(&1),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    assert!(clock.sleeps().is_empty());
}

/// A reservation owns its key: made from a temporary string and returned from a function.
#[test]
fn keyed_reservations_own_their_key() {
    fn book(l: &KeyedRateLimiter<String>, user: u32) -> tollgate::Reservation<'_> {
        l.reserve_n(&format!("user:{user}"), 1).unwrap()
    }
    let (_clock, l) = manual::<String>(Quota::per_second(1).unwrap());
    let r = book(&l, 7);
    assert!(!l.try_acquire("user:7"));
    r.cancel();
    assert!(l.try_acquire("user:7"));
}

#[test]
fn all_or_none_charges_no_limit_unless_every_one_admits() {
    use tollgate::{all_or_none, RateLimiter};
    let clock = ManualClock::new();
    let global = RateLimiter::builder(Quota::per_second(3).unwrap())
        .clock(clock.clone())
        .build();
    let per_user = KeyedRateLimiter::<u8>::builder(Quota::per_second(2).unwrap())
        .clock(clock.clone())
        .build();
    let take = |user: u8| {
        all_or_none([
            per_user.try_reserve_n_for(&user, 1, Duration::ZERO),
            global.try_reserve_n_for(1, Duration::ZERO),
        ])
    };
    assert!(take(1).is_ok() && take(1).is_ok());
    // User 1 is out: the global limit is not charged for the refusal.
    let e = take(1).unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_millis(500)));
    assert_eq!(global.peek().remaining, 1);
    assert!(take(2).is_ok());
    // Now the global limit is out: user 3 is not charged either.
    assert!(take(3).is_err());
    assert_eq!(per_user.peek(&3).remaining, 2);
}

/// The async form over boxed holds: the same all-or-none rule for in-process limits, and a
/// hold that is not ready now counts as a refusal with its delay (and is given back).
#[tokio::test]
async fn all_or_none_async_charges_no_limit_unless_every_one_admits() {
    use tollgate::{all_or_none_async, Hold, RateLimiter};
    let clock = ManualClock::new();
    let global = RateLimiter::builder(Quota::per_second(3).unwrap())
        .clock(clock.clone())
        .build();
    let per_user = KeyedRateLimiter::<u8>::builder(Quota::per_second(2).unwrap())
        .clock(clock.clone())
        .build();
    let take = |user: u8| {
        all_or_none_async::<AcquireError, _>([
            per_user
                .try_reserve_n_for(&user, 1, Duration::ZERO)
                .map(Hold::boxed),
            global.try_reserve_n_for(1, Duration::ZERO).map(Hold::boxed),
        ])
    };
    assert!(take(1).await.is_ok() && take(1).await.is_ok());
    let e = take(1).await.unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_millis(500)));
    assert_eq!(global.peek().remaining, 1);
    assert!(take(2).await.is_ok());
    assert!(take(3).await.is_err());
    assert_eq!(per_user.peek(&3).remaining, 2);
    // A reservation that is not ready now (plain `reserve_n`: 4 permits of a burst of 3, one interval ahead) is a refusal
    // with its delay, and is given back together with the ready one.
    clock.advance(Duration::from_secs(10));
    let e = all_or_none_async::<AcquireError, _>([
        per_user
            .try_reserve_n_for(&4, 1, Duration::ZERO)
            .map(Hold::boxed),
        global.reserve_n(4).map(Hold::boxed),
    ])
    .await
    .unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_nanos(333_333_334)));
    assert_eq!(global.peek().remaining, 3);
    assert_eq!(per_user.peek(&4).remaining, 2);
}

/// A manual clock that declares a cross-core skew, as the TSC does (`Clock::max_skew`).
#[derive(Clone)]
struct Skewed(ManualClock, u64);

impl tollgate::Clock for Skewed {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn sleep(&self, d: Duration) {
        self.0.sleep(d);
    }
    fn max_skew(&self) -> u64 {
        self.1
    }
}

const SKEW: u64 = 30;
const SECOND: u64 = 1_000_000_000;

#[test]
fn a_skewed_clock_evicts_a_key_only_once_cold_by_the_skew() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(Skewed(clock.clone(), SKEW))
        .build();
    assert!(l.try_acquire(&1)); // tat 1 s
    clock.set(SECOND + SKEW - 1);
    assert_eq!(
        l.sweep_now(),
        0,
        "a reading up to the skew earlier still sees tat > now"
    );
    clock.set(SECOND + SKEW);
    assert_eq!(l.sweep_now(), 1);
}

#[test]
fn a_skewed_clock_widens_the_key_caps_reclaim_and_its_wait() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(Skewed(clock.clone(), SKEW))
        .max_keys(std::num::NonZeroUsize::new(1).unwrap())
        .when_full(WhenFull::Deny)
        .build();
    assert!(l.try_acquire(&1)); // tat 1 s
    clock.set(SECOND);
    // Cold at 1 s on an exact clock, but not yet by the skew: no reclaim sweep, and the wait
    // runs to tat + skew.
    let d = l.check(&2);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Duration::from_nanos(SKEW)));
    assert_eq!(l.peek(&2), d, "peek agrees with the check");
    assert_eq!(
        l.stats().sweeps,
        0,
        "no reclaim sweep while nothing can be evicted"
    );
    clock.set(SECOND + SKEW - 1);
    assert_eq!(
        l.try_acquire_n(&2, 1),
        Err(AcquireError::KeyCapReached {
            retry_after: Some(Duration::from_nanos(1))
        })
    );
    clock.set(SECOND + SKEW);
    assert!(l.try_acquire(&2), "key 1 reclaimed, key 2 stored");
    assert_eq!((l.len(), l.stats().evicted), (1, 1));
}

#[test]
fn a_cancel_within_the_clocks_skew_of_a_stretchs_end_gives_nothing_back() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(Skewed(clock.clone(), SKEW))
        .build();
    // Stretch (0, 1 s], ready at once; the cancel reads 1 s - 10 ns, but another core may
    // already have read 1 s + 20 ns (the skew is 30): the stretch may have passed.
    let r = l.reserve_n(&1, 1).unwrap();
    clock.set(SECOND - 10);
    r.cancel();
    assert!(!l.try_acquire(&1), "nothing given back");
    // Further from the end than the skew, the cancel gives the stretch back as before.
    let (exact, l) = manual::<u64>(Quota::per_second(1).unwrap());
    let r = l.reserve_n(&1, 1).unwrap();
    exact.set(SECOND - 10);
    r.cancel();
    assert!(l.try_acquire(&1), "an exact clock gives the stretch back");
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(Skewed(clock.clone(), SKEW))
        .build();
    let r = l.reserve_n(&1, 1).unwrap(); // stretch (1 s - 10, 2 s - 10]
    clock.set(SECOND - 10 + SECOND / 2);
    r.cancel();
    assert!(
        l.try_acquire(&1),
        "half a second before the end: given back"
    );
}

/// Keys busier than when the cap's lower bound on cold times was taken. Cap 2,
/// T = 13 ns, burst 6: keys 1 and 2 take a permit at 0 (cold at 13) and another at 13 (cold at
/// 26). At 13 nothing is cold, so a check on key 3 is refused until 26; the peek just before
/// it must say the same, field for field, and so must `check_n(0)` (which is the peek).
#[test]
fn a_peek_at_the_cap_agrees_with_the_check_when_keys_got_busier() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::new(6, Duration::from_nanos(78)).unwrap())
        .clock(clock.clone())
        .max_keys(std::num::NonZeroUsize::new(2).unwrap())
        .when_full(WhenFull::Deny)
        .build();
    assert!(l.try_acquire(&1) && l.try_acquire(&2));
    clock.advance_nanos(13);
    assert!(l.try_acquire(&1) && l.try_acquire(&2));
    let peek = l.peek(&3);
    let zero = l.check_n(&3, 0);
    let check = l.check(&3);
    assert!(!check.allowed, "{check:?}");
    assert_eq!(check.retry_after, Some(Duration::from_nanos(13)));
    assert_eq!(peek, check, "the peek promised what the check refused");
    assert_eq!(zero, check, "check_n(0) is the peek");
    assert_eq!(l.len(), 2);
    // The same after a quota change forgot the bound (it resets it to 0).
    l.set_quota(Quota::new(6, Duration::from_nanos(78)).unwrap())
        .unwrap();
    assert_eq!(l.peek(&3), l.check(&3));
    // At 26 both keys are cold: the peek and the check both let key 3 in.
    clock.advance_nanos(13);
    assert!(l.peek(&3).allowed);
    assert!(l.check(&3).allowed);
    assert!(l.contains_key(&3));
}

/// A timed wait that cannot be granted by its deadline, counting the wait for a
/// slot at the cap, returns at once. Cap 1, T = 100 ns, burst 2: key 1 takes 2 permits at 0
/// (cold at 200). Key 2 gets a slot at 200 at the earliest, and 3 permits from a full bucket
/// of 2 take one more T: ready at 300, past the 200 ns deadline.
#[test]
fn a_timed_wait_at_the_cap_refuses_at_once_when_the_slot_comes_too_late() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::new(2, Duration::from_nanos(200)).unwrap())
        .clock(clock.clone())
        .max_keys(std::num::NonZeroUsize::MIN)
        .when_full(WhenFull::Deny)
        .build();
    assert!(l.try_acquire_n(&1, 2).is_ok());
    assert_eq!(
        l.try_acquire_n_for(&2, 3, Duration::from_nanos(200)),
        Err(AcquireError::KeyCapReached {
            retry_after: Some(Duration::from_nanos(300))
        })
    );
    assert!(clock.sleeps().is_empty(), "slept {:?}", clock.sleeps());
    assert_eq!(tollgate::Clock::now(&clock), 0);
    assert!(!l.contains_key(&2));
    // With the deadline at 300 it waits: 200 for the slot, then 100 for the third permit.
    assert_eq!(
        l.try_acquire_n_for(&2, 3, Duration::from_nanos(300)),
        Ok(Duration::from_nanos(300))
    );
    assert_eq!(clock.sleeps(), [200, 100].map(Duration::from_nanos));
    assert!(l.contains_key(&2) && !l.contains_key(&1));
}

/// The slot's time is judged from the keys as they are, not from a stale lower
/// bound. T = 100 ns, burst 3: key 1 is cold at 100 when stored, then busier (cold at 300): a
/// wait that the bound would allow (slot at 100) but the table does not (slot at 300) is
/// refused at once, and an untimed acquire still waits exactly until the slot frees.
#[test]
fn a_timed_wait_at_the_cap_is_judged_from_the_keys_not_from_a_stale_bound() {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::new(3, Duration::from_nanos(300)).unwrap())
        .clock(clock.clone())
        .max_keys(std::num::NonZeroUsize::MIN)
        .when_full(WhenFull::Deny)
        .build();
    assert!(l.try_acquire(&1)); // cold at 100
    clock.advance_nanos(50);
    assert!(l.try_acquire_n(&1, 2).is_ok()); // cold at 300
    assert_eq!(
        l.try_acquire_n_for(&2, 1, Duration::from_nanos(200)),
        Err(AcquireError::KeyCapReached {
            retry_after: Some(Duration::from_nanos(250))
        })
    );
    assert!(clock.sleeps().is_empty(), "slept {:?}", clock.sleeps());
    // A blocking acquire waits through the cap: 250 ns in all, however it splits the sleep.
    assert_eq!(l.acquire(&2), Ok(Duration::from_nanos(250)));
    assert_eq!(tollgate::Clock::now(&clock), 300);
    assert!(l.contains_key(&2) && !l.contains_key(&1));
}

/// The async timed wait at the cap: on tokio's paused time, a wait past the deadline returns
/// without advancing time.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_async_timed_wait_at_the_cap_refuses_at_once_when_the_slot_comes_too_late() {
    let l = KeyedRateLimiter::<u64>::builder(Quota::new(2, 200 * MS).unwrap())
        .clock(TokioClock::new())
        .max_keys(std::num::NonZeroUsize::MIN)
        .when_full(WhenFull::Deny)
        .build();
    let start = tokio::time::Instant::now();
    assert!(l.try_acquire_n(&1, 2).is_ok());
    assert_eq!(
        l.try_acquire_n_for_async(&2, 3, 200 * MS).await,
        Err(AcquireError::KeyCapReached {
            retry_after: Some(300 * MS)
        })
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(
        l.try_acquire_n_for_async(&2, 3, 300 * MS).await,
        Ok(300 * MS)
    );
    assert_eq!(start.elapsed(), 300 * MS);
}

/// A keyed limiter of `alg` on a manual clock, at most `cap` keys (`WhenFull::Deny`), or
/// uncapped.
fn capped<A: tollgate::Algorithm>(
    alg: A,
    q: Quota,
    cap: Option<usize>,
) -> (ManualClock, KeyedRateLimiter<u64, A>) {
    let clock = ManualClock::new();
    let b = KeyedRateLimiter::<u64>::builder(q)
        .clock(clock.clone())
        .when_full(WhenFull::Deny);
    let b = match cap {
        Some(cap) => b.max_keys(std::num::NonZeroUsize::new(cap).unwrap()),
        None => b,
    };
    (clock, b.algorithm(alg).unwrap().build())
}

/// At a full key cap (`WhenFull::Deny`) a waiting acquire of a new key answers, at once,
/// what it answers when the cap is not full: a window algorithm refuses a count above its
/// limit (`ExceedsBurst`), a wait past the limiter's time is `Unrepresentable`; it never
/// sleeps for a slot first. GCRA serves a count above its burst by waiting, so there it waits
/// for the slot and then its own `(n - burst) * T`.
#[test]
fn a_waiting_acquire_at_the_cap_refuses_at_once_what_a_fresh_key_would() {
    fn check<A: tollgate::Algorithm + Copy>(alg: A, n: u64) {
        let q = Quota::new(2, Duration::from_secs(1)).unwrap();
        // What the same acquire of a new key meets without the cap.
        let (_, free) = capped(alg, q, None);
        let want = free.acquire_n(&2, n);
        assert!(want.is_err(), "{alg:?} {n}: {want:?}");
        let (clock, l) = capped(alg, q, Some(1));
        assert!(l.try_acquire(&1));
        assert_eq!(l.acquire_n(&2, n), want, "{alg:?} {n}");
        assert_eq!(l.try_acquire_n_for(&2, n, 100 * S), want, "{alg:?} {n}");
        assert!(
            clock.sleeps().is_empty(),
            "{alg:?} {n}: {:?}",
            clock.sleeps()
        );
        assert!(!l.contains_key(&2));
    }
    const S: Duration = Duration::from_secs(1);
    for n in [3, u64::MAX] {
        check(tollgate::FixedWindow::new(), n);
        check(tollgate::SlidingWindow::new(2), n);
        check(tollgate::SlidingLog, n);
        check(tollgate::WeightedWindow, n);
    }
    // GCRA: a wait of u64::MAX * T does not fit the limiter's time.
    check(tollgate::Gcra, u64::MAX);
    // GCRA books a count above the burst: T = 500 ms, key 1 is cold at 500 ms; then 3
    // permits from a full bucket of 2 wait one T more.
    let q = Quota::new(2, S).unwrap();
    let (clock, l) = capped(tollgate::Gcra, q, Some(1));
    assert!(l.try_acquire(&1));
    assert_eq!(l.acquire_n(&2, 3), Ok(S));
    assert_eq!(clock.sleeps(), [500 * MS, 500 * MS]);
    // A count whose wait fits the limiter's time from now but not from when a slot frees
    // (60 s, behind a block): no grant can ever come, so it is refused before any sleep.
    let n = tollgate::MAX_NANOS / 1_000_000_000 - 29; // (n - 1) s from a full bucket of 1
    let (clock, free) = capped(tollgate::Gcra, Quota::per_second(1).unwrap(), None);
    assert!(free.acquire_n(&2, n).is_ok());
    assert_eq!(clock.sleeps(), [Duration::from_secs(n - 1)]);
    let (clock, l) = capped(tollgate::Gcra, Quota::per_second(1).unwrap(), Some(1));
    assert!(l.block(&1, 60 * S).is_ok());
    assert_eq!(
        l.acquire_n(&2, n),
        Err(AcquireError::Unrepresentable { requested: n })
    );
    assert!(clock.sleeps().is_empty(), "{:?}", clock.sleeps().len());
}

/// An untimed wait at a full key cap sleeps until the earliest tracked key turns cold, once,
/// however far that is (it polled once per quota period: sixty wake-ups behind a one-minute
/// block at 1/s).
#[test]
fn an_untimed_wait_at_the_cap_sleeps_until_the_earliest_slot_frees() {
    fn check<A: tollgate::Algorithm + Copy>(alg: A, cold: Duration) {
        let (clock, l) = capped(alg, Quota::per_second(1).unwrap(), Some(2));
        assert!(l.block(&1, 60 * S).is_ok());
        assert!(l.block(&2, 90 * S).is_ok());
        assert_eq!(l.acquire(&3), Ok(cold), "{alg:?}");
        assert_eq!(clock.sleeps(), [cold], "{alg:?}");
        assert!(l.contains_key(&3) && !l.contains_key(&1) && l.contains_key(&2));
    }
    const S: Duration = Duration::from_secs(1);
    check(tollgate::Gcra, 60 * S);
    check(tollgate::FixedWindow::new(), 60 * S);
    check(tollgate::SlidingWindow::new(2), 60 * S);
    check(tollgate::SlidingLog, 60 * S);
    // The block's window (59 s) weighs in the next one too.
    check(tollgate::WeightedWindow, 61 * S);
}

/// The async waits at a full key cap, on tokio's paused time: a count a fresh key would refuse
/// is refused without advancing time, and an untimed wait behind a long block wakes once.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_waits_at_the_cap_refuse_at_once_and_wake_once_for_a_slot() {
    use std::future::Future;
    use std::pin::pin;

    /// Polls `f` to completion, counting its polls (each after the first is a wake-up).
    async fn polls<F: Future>(f: F) -> (F::Output, usize) {
        let mut f = pin!(f);
        let mut n = 0;
        let out = std::future::poll_fn(|cx| {
            n += 1;
            f.as_mut().poll(cx)
        })
        .await;
        (out, n)
    }

    const S: Duration = Duration::from_secs(1);
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(2).unwrap())
        .clock(TokioClock::new())
        .max_keys(std::num::NonZeroUsize::MIN)
        .when_full(WhenFull::Deny)
        .algorithm(tollgate::SlidingLog)
        .unwrap()
        .build();
    let start = tokio::time::Instant::now();
    assert!(l.block(&1, 60 * S).is_ok());
    let exceeds = Err(AcquireError::ExceedsBurst {
        requested: 3,
        burst: 2,
    });
    assert_eq!(l.acquire_n_async(&2, 3).await, exceeds);
    assert_eq!(l.try_acquire_n_for_async(&2, 3, 100 * S).await, exceeds);
    assert_eq!(start.elapsed(), Duration::ZERO);
    let (got, polled) = polls(l.acquire_async(&2)).await;
    assert_eq!(got, Ok(60 * S));
    assert_eq!(start.elapsed(), 60 * S);
    assert_eq!(polled, 2, "one wake-up");
    assert!(l.contains_key(&2) && !l.contains_key(&1));
}

/// The key cap against a plain model of its rule (`docs/guide/keyed.md`, "Key cap"), on GCRA with
/// random T, burst, cap and policy, over random schedules of peek + check, timed and untimed
/// waits and advances on a few keys:
/// - a key's state is its TAT; a new key decides as a fresh one (TAT at or before now);
/// - a decision that would store state for a key not tracked gets it a slot if one is free,
///   or, at the cap, if some tracked key is cold (TAT <= now), after every cold key is evicted;
///   otherwise `Deny` refuses it (remaining 0, `retry_after` = `reset_after`, never after the
///   earliest key turns cold) and `AllowUntracked` decides it as fresh and stores nothing;
/// - a peek (and `check_n(0)`) says what the check after it meets: the key's state, or the
///   cap's refusal field for field;
/// - a wait grants at the earliest time a slot frees and the fresh key's permits are ready,
///   and a timed wait that cannot end by its deadline returns at once, without sleeping.
mod cap_model {
    use std::collections::BTreeMap;
    use std::num::NonZeroUsize;
    use std::time::Duration;

    use proptest::prelude::*;
    use tollgate::{AcquireError, Clock, Decision, KeyedRateLimiter, ManualClock, Quota, WhenFull};

    #[derive(Clone, Debug)]
    enum Op {
        /// `peek`, `check_n(0)`, then `check_n(n)`, on one key.
        PeekThenCheck(u8, u64),
        TryFor(u8, u64, u64),
        Acquire(u8, u64),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0u8..5, 0u64..7).prop_map(|(k, n)| Op::PeekThenCheck(k, n)),
            3 => (0u8..5, 0u64..7, 0u64..400).prop_map(|(k, n, t)| Op::TryFor(k, n, t)),
            1 => (0u8..5, 0u64..7).prop_map(|(k, n)| Op::Acquire(k, n)),
            3 => (0u64..120).prop_map(Op::Advance),
        ]
    }

    /// Every field of a [`Decision`] (a non-exhaustive struct the model cannot build).
    type Fields = (bool, u64, u64, Option<Duration>, Duration);

    fn fields(d: &Decision) -> Fields {
        (
            d.allowed,
            d.limit,
            d.remaining,
            d.retry_after,
            d.reset_after,
        )
    }

    struct Model {
        t: u64,
        b: u64,
        cap: usize,
        deny: bool,
        /// Tracked keys and their TAT.
        tat: BTreeMap<u8, u64>,
    }

    /// What the cap does with a new key that needs a slot at `now`.
    enum Cap {
        /// Stored (after evicting every cold key, if the table was full).
        Stored,
        /// Decided as fresh, stored nothing (`AllowUntracked`).
        Untracked,
        /// Refused (`Deny`): the earliest tracked TAT.
        Refused(u64),
    }

    impl Model {
        /// The state decision (GCRA on one TAT) of `n` permits at `now`; the new TAT if taken.
        fn decide(&self, tat: u64, now: u64, n: u64) -> (Fields, Option<u64>) {
            let (t, b) = (self.t, self.b);
            let tail = tat.max(now);
            let room = |tail: u64| ((now + b * t).saturating_sub(tail) / t).min(b);
            let took = (1..=b).contains(&n) && tail + n * t <= now + b * t;
            let new_tail = if took { tail + n * t } else { tail };
            let retry = ((1..=b).contains(&n) && !took).then(|| tail + n * t - b * t - now);
            let d = (
                n == 0 || took,
                b,
                room(new_tail),
                retry.map(Duration::from_nanos),
                Duration::from_nanos(new_tail - now),
            );
            (d, took.then_some(new_tail))
        }

        /// Whether a key not tracked would get a slot at `now`, without changing anything.
        fn cap_at(&self, now: u64) -> Cap {
            if self.tat.len() < self.cap || self.tat.values().any(|&tat| tat <= now) {
                Cap::Stored
            } else if self.deny {
                Cap::Refused(*self.tat.values().min().unwrap())
            } else {
                Cap::Untracked
            }
        }

        /// Stores `key` with `tat`, evicting every cold key first if the table is full.
        fn store(&mut self, key: u8, tat: u64, now: u64) {
            if self.tat.len() >= self.cap {
                self.tat.retain(|_, &mut t| t > now);
            }
            assert!(self.tat.len() < self.cap);
            self.tat.insert(key, tat);
        }

        /// When `n` permits booked on `tat` at `now` are ready, and the TAT after.
        fn book(&self, tat: u64, now: u64, n: u64) -> (u64, u64) {
            let tail = tat.max(now) + n * self.t;
            ((tail.saturating_sub(self.b * self.t)).max(now), tail)
        }
    }

    /// The cap's refusal as the limiter reports it, whose wait may be earlier than the
    /// earliest key's turning cold (the limiter judges it from a lower bound unless it swept)
    /// but never later, and at least 1 ns, at most the quota's period and tolerance.
    fn assert_refusal(
        d: &Decision,
        b: u64,
        earliest: u64,
        now: u64,
        q: &Quota,
    ) -> Result<(), TestCaseError> {
        let most = (earliest - now).clamp(1, q.tolerance().max(q.period()).as_nanos() as u64);
        prop_assert!(!d.allowed && d.remaining == 0 && d.limit == b, "{:?}", d);
        prop_assert_eq!(d.retry_after, Some(d.reset_after), "{:?}", d);
        let w = d.reset_after;
        prop_assert!(
            w >= Duration::from_nanos(1) && w <= Duration::from_nanos(most),
            "{:?}, earliest key cold at {}, now {}",
            d,
            earliest,
            now
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(512),
            ..ProptestConfig::default()
        })]

        #[test]
        fn the_key_cap_follows_its_rule_and_a_peek_says_what_the_check_meets(
            t in 1u64..40,
            b in 1u64..5,
            cap in 1usize..4,
            deny in any::<bool>(),
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let clock = ManualClock::new();
            let q = Quota::from_interval(Duration::from_nanos(t)).unwrap().with_burst(b).unwrap();
            let l = KeyedRateLimiter::<u8>::builder(q)
                .clock(clock.clone())
                .max_keys(NonZeroUsize::new(cap).unwrap())
                .when_full(if deny { WhenFull::Deny } else { WhenFull::AllowUntracked })
                .build();
            let mut m = Model { t, b, cap, deny, tat: BTreeMap::new() };
            for op in ops {
                let now = clock.now();
                match op {
                    Op::PeekThenCheck(k, n) => {
                        let peek = l.peek(&k);
                        prop_assert_eq!(l.check_n(&k, 0), peek, "check_n(0) is the peek");
                        let check = l.check_n(&k, n);
                        let tracked = m.tat.get(&k).copied();
                        let (state_peek, _) = m.decide(tracked.unwrap_or(0), now, 0);
                        let (state_check, took) = m.decide(tracked.unwrap_or(0), now, n);
                        match (tracked, m.cap_at(now)) {
                            (Some(_), _) | (None, Cap::Stored | Cap::Untracked) => {
                                prop_assert_eq!(fields(&peek), state_peek);
                                prop_assert_eq!(fields(&check), state_check);
                                if let Some(tat) = took {
                                    match (tracked, m.cap_at(now)) {
                                        (Some(_), _) => { m.tat.insert(k, tat); }
                                        (None, Cap::Stored) => m.store(k, tat, now),
                                        _ => {}
                                    }
                                }
                            }
                            (None, Cap::Refused(earliest)) if took.is_some() => {
                                assert_refusal(&check, b, earliest, now, &q)?;
                                prop_assert_eq!(peek, check, "the peek says what the check meets");
                            }
                            (None, Cap::Refused(earliest)) => {
                                // The check stores nothing (n = 0, or over the burst), so it
                                // never meets the cap; the peek reports the cap's refusal.
                                assert_refusal(&peek, b, earliest, now, &q)?;
                                let want = if n == 0 { fields(&peek) } else { state_check };
                                prop_assert_eq!(fields(&check), want);
                            }
                        }
                    }
                    Op::TryFor(k, n, timeout) => {
                        let got = l.try_acquire_n_for(&k, n, Duration::from_nanos(timeout));
                        let deadline = now + timeout;
                        let tracked = m.tat.get(&k).copied();
                        let (ready, tail) = m.book(tracked.unwrap_or(0), now, n);
                        // Where the grant happens: (start, key stored?), or refused with a wait
                        // (and whether the full key table refused it).
                        let plan: Result<(u64, u64, bool), (u64, bool)> = match (tracked, n) {
                            (Some(_), _) => Ok((now, ready, true)),
                            (None, 0) => Ok((now, now, false)),
                            (None, _) if ready > deadline => Err((ready - now, false)),
                            (None, _) => match m.cap_at(now) {
                                Cap::Stored => Ok((now, ready, true)),
                                Cap::Untracked => Ok((now, ready, false)),
                                Cap::Refused(earliest) => {
                                    let (at, _) = m.book(0, earliest, n);
                                    if at > deadline { Err((at - now, true)) } else { Ok((earliest, at, true)) }
                                }
                            },
                        };
                        let plan = match plan {
                            Ok((_, ready, _)) if ready > deadline => Err((ready - now, false)),
                            p => p,
                        };
                        match (got, plan) {
                            (Ok(waited), Ok((start, ready, store))) => {
                                prop_assert_eq!(waited, Duration::from_nanos(ready - now));
                                if n > 0 && store {
                                    let tat = if start == now { tail } else { m.book(0, start, n).1 };
                                    if tracked.is_some() { m.tat.insert(k, tat); } else { m.store(k, tat, start); }
                                }
                            }
                            (Err(AcquireError::RateLimited { retry_after }), Err((wait, false)))
                            | (
                                Err(AcquireError::KeyCapReached { retry_after: Some(retry_after) }),
                                Err((wait, true)),
                            ) => {
                                prop_assert_eq!(retry_after, Duration::from_nanos(wait));
                                prop_assert_eq!(clock.now(), now, "a refused timed wait never sleeps");
                            }
                            (got, plan) => prop_assert!(false, "limiter {:?}, model {:?}", got, plan),
                        }
                    }
                    Op::Acquire(k, n) => {
                        let waited = l.acquire_n(&k, n).unwrap();
                        let tracked = m.tat.get(&k).copied();
                        let (start, store) = match (tracked, n) {
                            (Some(_), _) => (now, true),
                            (None, 0) => (now, false),
                            (None, _) => match m.cap_at(now) {
                                Cap::Stored => (now, true),
                                Cap::Untracked => (now, false),
                                Cap::Refused(earliest) => (earliest, true),
                            },
                        };
                        let (ready, tat) = m.book(tracked.unwrap_or(0), start, n);
                        prop_assert_eq!(waited, Duration::from_nanos(ready - now));
                        if n > 0 && store {
                            if tracked.is_some() { m.tat.insert(k, tat); } else { m.store(k, tat, start); }
                        }
                    }
                    Op::Advance(d) => clock.advance_nanos(d),
                }
                prop_assert!(l.len() <= cap);
                prop_assert_eq!(l.len(), m.tat.len());
                for k in 0..5u8 {
                    prop_assert_eq!(l.contains_key(&k), m.tat.contains_key(&k), "key {}", k);
                }
            }
        }
    }
}
