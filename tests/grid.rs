//! The method grid (crate docs, "The method grid"): the same names, with the same argument
//! shapes, return types and meaning, on every limiter. Each row is called on each limiter that
//! has it, with its return type spelled out, so a rename, a changed signature or a changed
//! return type on any one limiter fails to compile here; the shared rules (`n = 0`, one permit
//! per one-permit form, what a refusal carries) are checked by running them.
//!
//! `RedisRateLimiter` (feature `redis`) is checked against a throwaway `redis-server`, as the
//! `redis_*` tests do.

use std::time::Duration;

use tollgate::{
    AcquireError, Decision, KeyedRateLimiter, ManualClock, Quota, QuotaError, RateLimiter,
    Reservation, SmoothConfigError, SmoothRateLimiter,
};

fn quota() -> Quota {
    Quota::per_second(10).unwrap()
}

/// The acquire rows (blocking and async, with and without a count and a timeout), on any
/// in-process limiter: `$l` is the limiter, `$key` the key for a keyed one. Every form with a
/// count of zero succeeds at once and takes nothing; the one-permit forms each take a permit.
/// Returns how many permits the one-permit forms took.
macro_rules! acquire_rows {
    ($rt:expr_2021, $l:expr_2021 $(, $key:expr_2021)?) => {{
        let l = &$l;
        let _ = &$rt; // the async rows need the `tokio` feature
        let zero = Duration::ZERO;
        // n = 0: at once, nothing taken, never waits.
        let r: Result<(), AcquireError> = l.try_acquire_n($($key,)? 0);
        assert_eq!(r, Ok(()));
        let r: Result<Duration, AcquireError> = l.acquire_n($($key,)? 0);
        assert_eq!(r, Ok(zero));
        let r: Result<Duration, AcquireError> = l.try_acquire_n_for($($key,)? 0, zero);
        assert_eq!(r, Ok(zero));
        #[cfg(feature = "tokio")]
        {
            let r: Result<Duration, AcquireError> =
                $rt.block_on(l.acquire_n_async($($key,)? 0));
            assert_eq!(r, Ok(zero));
            let r: Result<Duration, AcquireError> =
                $rt.block_on(l.try_acquire_n_for_async($($key,)? 0, zero));
            assert_eq!(r, Ok(zero));
        }
        // One permit each, all available now (the limiters start with at least 6).
        let b: bool = l.try_acquire($($key)?);
        assert!(b);
        let r: Result<Duration, AcquireError> = l.acquire($($key)?);
        assert!(r.is_ok());
        let r: Result<Duration, AcquireError> = l.try_acquire_for($($key,)? zero);
        assert!(r.is_ok());
        #[cfg(feature = "tokio")]
        {
            let r: Result<Duration, AcquireError> = $rt.block_on(l.acquire_async($($key)?));
            assert!(r.is_ok());
            let r: Result<Duration, AcquireError> =
                $rt.block_on(l.try_acquire_for_async($($key,)? zero));
            assert!(r.is_ok());
        }
        // n permits: the same names with a count.
        let r: Result<Duration, AcquireError> = l.acquire_n($($key,)? 1);
        assert!(r.is_ok());
        if cfg!(feature = "tokio") { 6u64 } else { 4 }
    }};
}

/// The decision and reservation rows, on `RateLimiter` and `KeyedRateLimiter` (GCRA).
macro_rules! decision_rows {
    ($l:expr_2021 $(, $key:expr_2021)?) => {{
        let l = &$l;
        let zero = Duration::ZERO;
        let start: Decision = l.peek($($key)?);
        // n = 0: `check_n(0)` is `peek`; reservations of nothing are ready now.
        let d: Decision = l.check_n($($key,)? 0);
        assert_eq!(d, start);
        let d: Result<Decision, QuotaError> = l.check_n_with($($key,)? 0, quota());
        assert_eq!(d, Ok(start));
        let r: Result<Reservation<'_>, AcquireError> = l.reserve_n($($key,)? 0);
        assert!(r.unwrap().delay().is_zero());
        let r: Result<Reservation<'_>, AcquireError> = l.try_reserve_n_for($($key,)? 0, zero);
        assert!(r.unwrap().delay().is_zero());
        assert_eq!(l.peek($($key)?), start, "n = 0 took nothing");
        // One permit each.
        assert!(l.check($($key)?).allowed);
        let d: Result<Decision, QuotaError> = l.check_with($($key,)? quota());
        assert!(d.unwrap().allowed);
        let r: Result<Reservation<'_>, AcquireError> = l.reserve($($key)?);
        assert!(r.unwrap().delay().is_zero());
        let r: Result<Reservation<'_>, AcquireError> = l.try_reserve_for($($key,)? zero);
        assert!(r.unwrap().delay().is_zero());
        assert_eq!(l.peek($($key)?).remaining, start.remaining - 4);
        // n permits.
        assert!(l.check_n($($key,)? 1).allowed);
        assert!(l.check_n_with($($key,)? 1, quota()).unwrap().allowed);
        let r = l.reserve_n($($key,)? 1).unwrap();
        r.cancel();
        let r = l.try_reserve_n_for($($key,)? 1, zero).unwrap();
        r.cancel();
        assert_eq!(l.peek($($key)?).remaining, start.remaining - 6);
        // The quota rows.
        let q: Quota = l.quota();
        let r: Result<(), QuotaError> = l.set_quota(q);
        assert_eq!(r, Ok(()));
    }};
}

/// What a refusal carries, the same on every in-process limiter.
macro_rules! refusals {
    ($l:expr_2021 $(, $key:expr_2021)?) => {{
        let l = &$l;
        assert_eq!(
            l.try_acquire_n($($key,)? 11),
            Err(AcquireError::ExceedsBurst { requested: 11, burst: 10 })
        );
        while l.try_acquire($($key)?) {}
        assert!(matches!(
            l.try_acquire_n($($key,)? 1),
            Err(AcquireError::RateLimited { .. })
        ));
        assert!(matches!(
            l.try_acquire_n_for($($key,)? 1, Duration::ZERO),
            Err(AcquireError::RateLimited { .. })
        ));
        let d = l.check($($key)?);
        assert!(!d.allowed && d.retry_after.is_some());
    }};
}

/// The "await at most `timeout`, full report" row on `RateLimiter` and `KeyedRateLimiter`
/// (`$l` a limiter with a burst of 10 and nothing taken yet): `n = 0` granted at once and
/// taking nothing; granted, the state as the grant left it; not within the timeout, the wait
/// needed; never within it, no retry-after.
#[cfg(feature = "tokio")]
macro_rules! check_for_async_rows {
    ($rt:expr_2021, $l:expr_2021 $(, $key:expr_2021)?) => {{
        let l = &$l;
        let zero = Duration::ZERO;
        let d: Decision = $rt.block_on(l.check_n_for_async($($key,)? 0, zero));
        assert!(d.allowed && d.remaining == 10);
        let d: Decision = $rt.block_on(l.check_for_async($($key,)? zero));
        assert!(d.allowed && d.remaining == 9);
        let d: Decision = $rt.block_on(l.check_n_for_async($($key,)? 9, zero));
        assert!(d.allowed && d.remaining == 0);
        let d: Decision = $rt.block_on(l.check_for_async($($key,)? zero));
        assert!(!d.allowed && d.retry_after.is_some());
        let d: Decision = $rt.block_on(l.check_n_for_async($($key,)? 11, zero));
        assert!(d.exceeds_burst());
    }};
}

#[cfg(feature = "tokio")]
#[test]
fn check_for_async_follows_the_grid_on_both_in_process_limiters() {
    let rt = runtime();
    let l = RateLimiter::builder(quota())
        .clock(ManualClock::new())
        .build();
    check_for_async_rows!(rt, l);
    let l = KeyedRateLimiter::<String>::builder(quota())
        .clock(ManualClock::new())
        .build();
    check_for_async_rows!(rt, l, "k");
    assert_eq!(l.peek("other").remaining, 10, "only the key's own state");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn rate_limiter_follows_the_grid() {
    let rt = runtime();
    let l = RateLimiter::builder(quota())
        .clock(ManualClock::new())
        .build();
    let taken = acquire_rows!(rt, l);
    assert_eq!(l.peek().remaining, 10 - taken);
    let l = RateLimiter::builder(quota())
        .clock(ManualClock::new())
        .build();
    decision_rows!(l);
    refusals!(l);
}

#[test]
fn keyed_rate_limiter_follows_the_grid_key_first() {
    let rt = runtime();
    let l = KeyedRateLimiter::<String>::builder(quota())
        .clock(ManualClock::new())
        .build();
    let taken = acquire_rows!(rt, l, "k");
    assert_eq!(l.peek("k").remaining, 10 - taken);
    assert_eq!(l.peek("other").remaining, 10, "only the key's own state");
    decision_rows!(l, "d");
    refusals!(l, "d");
}

#[test]
fn smooth_rate_limiter_follows_the_grid() {
    let rt = runtime();
    let clock = ManualClock::new();
    // Saved permits to spend at once: 10/s, idle for 1 s (Guava starts empty).
    let l = SmoothRateLimiter::builder(10.0)
        .clock(clock.clone())
        .build()
        .unwrap();
    clock.advance(Duration::from_secs(1));
    let sleeps = clock.sleeps().len();
    acquire_rows!(rt, l);
    // The three blocking grants slept once each (Guava's `R0.00`); n = 0 never touched the
    // clock.
    assert_eq!(clock.sleeps().len(), sleeps + 3);
    // Its limit is a rate.
    let q: f64 = l.quota();
    let r: Result<(), SmoothConfigError> = l.set_quota(q);
    assert_eq!(r, Ok(()));
    assert_eq!(l.quota(), 10.0);
    // A refusal is the crate's `AcquireError` (pay later: never `ExceedsBurst`).
    assert!(l.try_acquire_n(1_000).is_ok());
    assert!(matches!(
        l.try_acquire_n(1),
        Err(AcquireError::RateLimited { .. })
    ));
    assert!(matches!(
        l.try_acquire_n_for(1, Duration::ZERO),
        Err(AcquireError::RateLimited { .. })
    ));
}

#[cfg(feature = "redis")]
mod redis_support;

/// `RedisRateLimiter`: the same names, each returning a future for its round trip; `_async`
/// only on the methods that wait for permits; refusals as `RedisLimitError::Limited`.
#[cfg(feature = "redis")]
#[test]
fn redis_rate_limiter_follows_the_grid_key_first_and_async() {
    use tollgate::redis::{RedisDecision, RedisLimitError, RedisRateLimiter, RedisReservation};

    let server = redis_support::RedisServer::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // 10 an hour: nothing comes back while the test runs.
        let q = Quota::per_hour(10).unwrap();
        let l: RedisRateLimiter = RedisRateLimiter::builder(q)
            .prefix("grid")
            .deadline(Duration::from_secs(2))
            .connect(&server.url())
            .await
            .expect("connect to the test server");
        let k = "{grid}:k";
        let zero = Duration::ZERO;
        type R<T> = Result<T, RedisLimitError>;

        // n = 0: at once, nothing taken.
        let start: R<Decision> = l.peek(k).await;
        let start = start.unwrap();
        assert_eq!(start.remaining, 10);
        let d: R<Decision> = l.check_n(k, 0).await;
        assert!(d.unwrap().allowed);
        let d: R<Decision> = l.check_n_with(k, 0, q).await;
        assert!(d.unwrap().allowed);
        let r: R<()> = l.try_acquire_n(k, 0).await;
        assert!(r.is_ok());
        let r: R<Duration> = l.acquire_n_async(k, 0).await;
        assert_eq!(r.unwrap(), zero);
        let r: R<Duration> = l.try_acquire_n_for_async(k, 0, zero).await;
        assert_eq!(r.unwrap(), zero);
        let d: R<Decision> = l.check_n_for_async(k, 0, zero).await;
        assert!(d.unwrap().allowed);
        let r: R<RedisReservation> = l.reserve_n(k, 0).await;
        assert!(r.unwrap().delay().is_zero());
        let r: R<RedisReservation> = l.try_reserve_n_for(k, 0, zero).await;
        assert!(r.unwrap().delay().is_zero());
        let d: R<RedisDecision> = l.decide_n(k, 0).await;
        assert!(d.unwrap().decision.allowed);
        let d: R<RedisDecision> = l.decide_n_with(k, 0, q).await;
        assert!(d.unwrap().decision.allowed);
        assert_eq!(l.peek(k).await.unwrap().remaining, 10, "n = 0 took nothing");

        // One permit each (the `_with` forms under the limiter's own quota share its state).
        let b: R<bool> = l.try_acquire(k).await;
        assert!(b.unwrap());
        let d: R<Decision> = l.check(k).await;
        assert!(d.unwrap().allowed);
        let r: R<Duration> = l.acquire_async(k).await;
        assert!(r.is_ok());
        let r: R<Duration> = l.try_acquire_for_async(k, zero).await;
        assert!(r.is_ok());
        let r: R<RedisReservation> = l.reserve(k).await;
        assert!(r.unwrap().delay().is_zero());
        let r: R<RedisReservation> = l.try_reserve_for(k, zero).await;
        assert!(r.unwrap().delay().is_zero());
        let d: R<RedisDecision> = l.decide(k).await;
        assert!(d.unwrap().decision.allowed);
        assert_eq!(l.peek(k).await.unwrap().remaining, 3);
        let d: R<Decision> = l.check_with(k, q).await;
        assert!(d.unwrap().allowed);
        let d: R<RedisDecision> = l.decide_with(k, q).await;
        assert!(d.unwrap().decision.allowed);
        let in_force: Quota = l.quota();
        assert_eq!(in_force, q);

        // n permits, then what a refusal carries.
        assert!(l.check_n(k, 1).await.unwrap().allowed);
        assert_eq!(l.peek(k).await.unwrap().remaining, 0);
        assert!(matches!(
            l.try_acquire_n(k, 11).await,
            Err(RedisLimitError::Limited(AcquireError::ExceedsBurst {
                requested: 11,
                burst: 10
            }))
        ));
        assert!(matches!(
            l.try_acquire_n(k, 1).await,
            Err(RedisLimitError::Limited(AcquireError::RateLimited { .. }))
        ));
        assert!(matches!(
            l.try_reserve_n_for(k, 1, zero).await,
            Err(RedisLimitError::Limited(AcquireError::RateLimited { .. }))
        ));
        // The waiting check reports a refusal as a decision, not an error.
        let d: R<Decision> = l.check_for_async(k, zero).await;
        let d = d.unwrap();
        assert!(!d.allowed && d.retry_after.is_some());
        let d: R<Decision> = l.check_n_for_async(k, 11, zero).await;
        assert!(d.unwrap().exceeds_burst());
    });
}

/// `n = 0` means the same under every algorithm, also on a limit used up: at once, nothing
/// taken, nothing waited for.
#[test]
fn zero_permits_succeed_at_once_under_every_algorithm() {
    use tollgate::{Algorithm, FixedWindow, Gcra, SlidingLog, SlidingWindow, WeightedWindow};

    fn check<A: Algorithm>(alg: A) {
        let clock = ManualClock::new();
        let direct = RateLimiter::builder(quota())
            .clock(clock.clone())
            .algorithm(alg.clone())
            .unwrap()
            .build();
        let keyed = KeyedRateLimiter::<u8>::builder(quota())
            .clock(clock.clone())
            .algorithm(alg)
            .unwrap()
            .build();
        while direct.try_acquire() {}
        while keyed.try_acquire(&1) {}
        let (d, k) = (direct.peek(), keyed.peek(&1));
        let zero = Duration::ZERO;
        assert_eq!(direct.try_acquire_n(0), Ok(()));
        assert_eq!(direct.acquire_n(0), Ok(zero));
        assert_eq!(direct.try_acquire_n_for(0, zero), Ok(zero));
        assert_eq!(direct.check_n(0), d);
        assert_eq!(keyed.try_acquire_n(&1, 0), Ok(()));
        assert_eq!(keyed.acquire_n(&1, 0), Ok(zero));
        assert_eq!(keyed.try_acquire_n_for(&1, 0, zero), Ok(zero));
        assert_eq!(keyed.check_n(&1, 0), k);
        assert!(clock.sleeps().is_empty(), "{:?}", clock.sleeps());
        assert_eq!((direct.peek(), keyed.peek(&1)), (d, k), "nothing taken");
    }
    check(Gcra);
    check(FixedWindow::new());
    check(SlidingWindow::new(4));
    check(WeightedWindow);
    check(SlidingLog);
}
