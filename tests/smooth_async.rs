//! Async acquire on `SmoothRateLimiter` under tokio's paused time: grants at exact instants, and
//! what a dropped waiter gives back (its reservation, exactly, if it is still the latest and no
//! `set_quota` happened since; nothing otherwise).
#![cfg(feature = "tokio")]

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{timeout, Instant};
use tollgate::{AcquireError, SmoothRateLimiter, TokioClock};

const MS: Duration = Duration::from_millis(1);

/// 10 per second, bursty: 100 ms per permit, paid by the next caller.
fn limiter() -> Arc<SmoothRateLimiter> {
    Arc::new(
        SmoothRateLimiter::builder(10.0)
            .clock(TokioClock::new())
            .build()
            .unwrap(),
    )
}

/// Spawns `acquire_async(n)` and lets it take its reservation before returning.
async fn spawn_acquire(
    l: &Arc<SmoothRateLimiter>,
    n: u64,
    patience: Option<Duration>,
) -> tokio::task::JoinHandle<Option<Duration>> {
    let l = Arc::clone(l);
    let task = tokio::spawn(async move {
        match patience {
            Some(p) => timeout(p, l.acquire_n_async(n))
                .await
                .ok()
                .map(Result::unwrap),
            None => Some(l.acquire_n_async(n).await.unwrap()),
        }
    });
    tokio::task::yield_now().await;
    task
}

#[tokio::test(start_paused = true)]
async fn waiters_are_granted_in_arrival_order_at_exact_instants_paying_later() {
    let l = limiter();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for n in [1, 5, 1, 2, 1] {
        tasks.push(spawn_acquire(&l, n, None).await);
    }
    let mut waits = Vec::new();
    for t in tasks {
        waits.push(t.await.unwrap().unwrap());
    }
    // Each waits for the permits before it: 0, 1, 1+5, 1+5+1, 1+5+1+2 intervals.
    assert_eq!(waits, [0, 100, 600, 700, 900].map(|ms| MS * ms));
    assert_eq!(start.elapsed(), MS * 900);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_latest_waiter_is_refunded_exactly() {
    let l = limiter();
    l.acquire_n_async(1).await.unwrap(); // t=0, free; next moment 100 ms
    let gave_up = spawn_acquire(&l, 3, Some(MS * 40)).await; // moment 100 ms, books 300 ms
    assert_eq!(gave_up.await.unwrap(), None); // dropped at 40 ms
                                              // Its reservation was the latest: the next arrival gets the 100 ms moment, not 400 ms.
    assert_eq!(l.acquire_n_async(1).await.unwrap(), MS * 60);
    assert_eq!(l.acquire_n_async(1).await.unwrap(), MS * 100);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_with_a_later_one_behind_it_keeps_its_permits() {
    let l = limiter();
    l.acquire_n_async(1).await.unwrap();
    let gave_up = spawn_acquire(&l, 1, Some(MS * 40)).await; // moment 100 ms
    let behind = spawn_acquire(&l, 1, None).await; // moment 200 ms, computed from it
    assert_eq!(gave_up.await.unwrap(), None);
    // No refund: it would hand the 100-200 ms slot out twice (to `behind` and to the next).
    assert_eq!(l.acquire_n_async(1).await.unwrap(), MS * 260); // at 40 ms, moment 300 ms
    assert_eq!(behind.await.unwrap(), Some(MS * 200));
}

#[tokio::test(start_paused = true)]
async fn refunds_unwind_latest_first() {
    let l = limiter();
    l.acquire_n_async(1).await.unwrap();
    let first = spawn_acquire(&l, 1, Some(MS * 40)).await; // moment 100 ms
    let second = spawn_acquire(&l, 2, Some(MS * 20)).await; // moment 200 ms, latest
    assert_eq!(second.await.unwrap(), None); // refunded at 20 ms: `first` is the latest again
    assert_eq!(first.await.unwrap(), None); // refunded at 40 ms
    assert_eq!(l.acquire_n_async(1).await.unwrap(), MS * 60); // moment 100 ms again
}

#[tokio::test(start_paused = true)]
async fn no_refund_across_a_set_rate() {
    let l = limiter();
    l.acquire_n_async(1).await.unwrap();
    let gave_up = spawn_acquire(&l, 2, Some(MS * 40)).await; // moment 100 ms, books 300 ms
    l.set_quota(10.0).unwrap(); // same rate, but the state was rescaled: a new generation
    assert_eq!(gave_up.await.unwrap(), None);
    assert_eq!(l.acquire_n_async(1).await.unwrap(), MS * 260);
}

#[tokio::test(start_paused = true)]
async fn try_acquire_for_async_never_reserves_what_it_will_not_wait_for() {
    let l = limiter();
    l.acquire_n_async(4).await.unwrap(); // free now, next moment 400 ms
    let start = Instant::now();
    let e = l.try_acquire_n_for_async(1, MS * 399).await;
    assert_eq!(
        e,
        Err(AcquireError::RateLimited {
            retry_after: MS * 400
        })
    );
    assert_eq!(start.elapsed(), Duration::ZERO); // refused at once
    assert_eq!(l.try_acquire_n_for_async(1, MS * 400).await, Ok(MS * 400));
}

/// A count of zero succeeds at once and takes nothing, in debt too (as on every limiter).
#[tokio::test(start_paused = true)]
async fn zero_permits_succeed_at_once_and_take_nothing() {
    let l = limiter();
    l.acquire_n_async(4).await.unwrap(); // free now, next moment 400 ms
    let start = Instant::now();
    assert_eq!(l.try_acquire_n_for_async(0, MS).await, Ok(Duration::ZERO));
    assert_eq!(l.acquire_n_async(0).await, Ok(Duration::ZERO));
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(l.acquire_async().await, Ok(MS * 400)); // nothing was taken
}

#[tokio::test(start_paused = true)]
async fn warm_up_ramp_on_tokio_time() {
    let l = SmoothRateLimiter::builder(2.0)
        .warmup(Duration::from_secs(4))
        .clock(TokioClock::new())
        .build()
        .unwrap();
    let mut waits = Vec::new();
    for _ in 0..6 {
        waits.push(l.acquire_n_async(1).await.unwrap().as_micros());
    }
    assert_eq!(waits, [0, 1_375_000, 1_125_000, 875_000, 625_000, 500_000]);
}

#[test]
fn futures_are_send() {
    fn send<T: Send>(_: T) {}
    let l = SmoothRateLimiter::bursty(1.0).unwrap();
    send(l.acquire_async());
    send(l.acquire_n_async(1));
    send(l.try_acquire_for_async(MS));
    send(l.try_acquire_n_for_async(1, MS));
}
