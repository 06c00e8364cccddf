//! Async waiting on the window algorithms, under tokio's paused time: waiters sleep exactly
//! until their permits would fit and decide again; timeouts refuse at once without taking
//! anything; dropping a waiter leaves nothing behind. Also `start_empty` on a window.
#![cfg(feature = "tokio")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::{
    AcquireError, Algorithm, FixedWindow, KeyedRateLimiter, ManualClock, Quota, RateLimiter,
    SlidingLog, SlidingWindow, TokioClock, WeightedWindow,
};

const SEC: Duration = Duration::from_secs(1);

fn limiter<A: Algorithm>(alg: A) -> Arc<RateLimiter<A>> {
    let q = Quota::new(2, SEC).unwrap();
    Arc::new(
        RateLimiter::builder(q)
            .clock(TokioClock::new())
            .algorithm(alg)
            .unwrap()
            .build(),
    )
}

/// Five waiters at once on 2 per second: granted 2 at 0 s, 2 at 1 s, 1 at 2 s (fixed window,
/// and the sliding ones too since everything is granted at whole seconds).
async fn waiters_in_windows<A: Algorithm>(alg: A) {
    let l = limiter(alg);
    let start = Instant::now();
    let grants = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let (l, grants) = (l.clone(), grants.clone());
            tokio::spawn(async move {
                l.acquire_async().await.unwrap();
                grants.lock().unwrap().push(start.elapsed());
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut g = grants.lock().unwrap().clone();
    g.sort();
    let secs: Vec<u64> = g.iter().map(|d| d.as_secs()).collect();
    assert_eq!(
        secs,
        [0, 0, 1, 1, 2],
        "{alg:?} {g:?}",
        alg = std::any::type_name::<A>()
    );
    assert!(g.iter().all(|d| d.subsec_nanos() == 0), "{g:?}");
}

#[tokio::test(start_paused = true)]
async fn fixed_window_waiters() {
    waiters_in_windows(FixedWindow::new()).await;
}

#[tokio::test(start_paused = true)]
async fn sliding_window_waiters() {
    waiters_in_windows(SlidingWindow::new(4)).await;
}

#[tokio::test(start_paused = true)]
async fn sliding_log_waiters() {
    waiters_in_windows(SlidingLog).await;
}

#[tokio::test(start_paused = true)]
async fn weighted_waiters_wait_for_the_weight_to_drop() {
    // 2 at 0 s; at 1 s prev = 2 weighs 100%: a third fits once 2*(W - e) + 1*W <= 2*W, at
    // e = 0.5 s; a fourth once 2*(W - e) + 2*W <= 2*W, at e = W: 2 s.
    let l = limiter(WeightedWindow);
    let start = Instant::now();
    l.acquire_n_async(2).await.unwrap();
    tokio::time::sleep(SEC).await;
    assert_eq!(l.acquire_async().await.unwrap(), SEC / 2);
    assert_eq!(start.elapsed(), SEC * 3 / 2);
    assert_eq!(l.acquire_async().await.unwrap(), SEC / 2);
    assert_eq!(start.elapsed(), SEC * 2);
}

#[tokio::test(start_paused = true)]
async fn timeouts_refuse_at_once_and_take_nothing() {
    let l = limiter(SlidingLog);
    l.acquire_n_async(2).await.unwrap();
    let start = Instant::now();
    let e = l.try_acquire_n_for_async(1, SEC / 2).await;
    assert_eq!(e, Err(AcquireError::RateLimited { retry_after: SEC }));
    assert_eq!(start.elapsed(), Duration::ZERO, "never slept");
    assert_eq!(l.try_acquire_n_for_async(1, SEC).await, Ok(SEC));
    // At 1 s the first two have left the log; the one just taken counts.
    assert_eq!(l.peek().remaining, 1);
    // More than the limit can never be waited for.
    assert_eq!(
        l.acquire_n_async(3).await,
        Err(AcquireError::ExceedsBurst {
            requested: 3,
            burst: 2
        })
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_leaves_nothing_behind() {
    let l = limiter(FixedWindow::new());
    l.acquire_n_async(2).await.unwrap();
    // A waiter abandoned by a timeout: nothing was booked, so the next window is whole.
    let r = tokio::time::timeout(SEC / 2, l.acquire_async()).await;
    assert!(r.is_err());
    tokio::time::sleep(SEC / 2).await;
    assert!(l.try_acquire_n(2).is_ok());
}

#[tokio::test(start_paused = true)]
async fn keyed_waiters_per_key() {
    let q = Quota::new(1, SEC).unwrap();
    let l = Arc::new(
        KeyedRateLimiter::<u32>::builder(q)
            .clock(TokioClock::new())
            .algorithm(FixedWindow::new())
            .unwrap()
            .build(),
    );
    let start = Instant::now();
    assert_eq!(l.acquire_async(&1).await, Ok(Duration::ZERO));
    assert_eq!(l.acquire_async(&2).await, Ok(Duration::ZERO)); // its own window
    assert_eq!(l.acquire_async(&1).await, Ok(SEC));
    let owned = l.clone();
    let spawned = tokio::spawn(async move { owned.acquire_n_async(&2, 1).await });
    assert_eq!(spawned.await.unwrap(), Ok(Duration::ZERO));
    assert_eq!(start.elapsed(), SEC);
    let e = l.try_acquire_n_for_async(&1, 1, SEC / 2).await;
    assert!(matches!(e, Err(AcquireError::RateLimited { .. })));
}

#[test]
fn start_empty_takes_the_current_window() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(Quota::new(3, SEC).unwrap())
        .clock(clock.clone())
        .start_empty()
        .algorithm(SlidingLog)
        .unwrap()
        .build();
    assert!(!l.try_acquire());
    assert_eq!(l.peek().retry_after, None);
    assert_eq!(l.check().retry_after, Some(SEC));
    clock.advance(SEC);
    assert!(l.try_acquire_n(3).is_ok());
}
