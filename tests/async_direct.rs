//! Async acquire on the direct limiter, under tokio's paused time: every grant instant is exact.
#![cfg(feature = "tokio")]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::{AcquireError, Quota, RateLimiter, TokioClock};

const T: Duration = Duration::from_millis(10);

/// 100 per second, burst 1: one grant every 10 ms exactly.
fn paced() -> Arc<RateLimiter> {
    let q = Quota::per_second(100).unwrap().with_burst(1).unwrap();
    Arc::new(RateLimiter::builder(q).clock(TokioClock::new()).build())
}

/// Counts how often the inner future is polled: one initial poll plus one per wake-up.
struct CountPolls<F> {
    inner: Pin<Box<F>>,
    polls: Arc<AtomicU64>,
}

impl<F: Future> Future for CountPolls<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_waiters_are_granted_ten_ms_apart_in_arrival_order() {
    let limiter = paced();
    let start = Instant::now();
    let grants = Arc::new(Mutex::new(Vec::new()));
    let polls = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for id in 0..1000u32 {
        let (limiter, grants) = (limiter.clone(), grants.clone());
        let fut = async move {
            let waited = limiter.acquire_n_async(1).await.unwrap();
            grants.lock().unwrap().push((id, start.elapsed(), waited));
        };
        let counted = CountPolls {
            inner: Box::pin(fut),
            polls: polls.clone(),
        };
        tasks.push(tokio::spawn(counted));
        // Let the task take its reservation before the next one arrives.
        tokio::task::yield_now().await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let grants = grants.lock().unwrap();
    assert_eq!(grants.len(), 1000);
    for (i, &(id, at, waited)) in grants.iter().enumerate() {
        assert_eq!(id as usize, i, "granted out of arrival order");
        assert_eq!(at, T * i as u32, "grant {i} at the wrong instant");
        assert_eq!(waited, T * i as u32);
    }
    // One poll to reserve, one wake-up at the ready time (none for the first, ready at once).
    assert_eq!(polls.load(Ordering::Relaxed), 1 + 2 * 999);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_gives_its_slot_to_the_next_arrival() {
    let limiter = paced();
    let start = Instant::now();
    limiter.acquire_n_async(1).await.unwrap(); // t=0, next slot at 10 ms
                                               // A waiter that gives up after 4 ms: its 10 ms slot must not be lost.
    let gave_up = tokio::time::timeout(Duration::from_millis(4), limiter.acquire_n_async(1)).await;
    assert!(gave_up.is_err());
    assert_eq!(start.elapsed(), Duration::from_millis(4));
    // The next arrival gets the 10 ms slot, not the 20 ms one.
    limiter.acquire_n_async(1).await.unwrap();
    assert_eq!(start.elapsed(), T);
    // select! loses nothing either.
    tokio::select! {
        _ = limiter.acquire_n_async(1) => panic!("cannot be ready before 20 ms"),
        _ = tokio::time::sleep(Duration::from_millis(1)) => {}
    }
    limiter.acquire_n_async(1).await.unwrap();
    assert_eq!(start.elapsed(), 2 * T);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_non_latest_waiter_keeps_the_later_ones_on_time() {
    let limiter = paced();
    let start = Instant::now();
    limiter.acquire_n_async(1).await.unwrap();
    let l = limiter.clone();
    let early = tokio::spawn(async move { l.acquire_async().await }); // 10 ms
    tokio::task::yield_now().await;
    let l = limiter.clone();
    let late = tokio::spawn(async move { l.acquire_async().await }); // 20 ms
    tokio::task::yield_now().await;
    early.abort();
    assert!(early.await.unwrap_err().is_cancelled());
    assert_eq!(late.await.unwrap().unwrap(), 2 * T);
    assert_eq!(start.elapsed(), 2 * T);
    // The early slot was behind a pending reservation: not handed out again.
    assert!(!limiter.try_acquire());
}

#[tokio::test(start_paused = true)]
async fn the_timeout_variant_refuses_at_once_and_changes_nothing() {
    let limiter = paced();
    let start = Instant::now();
    limiter.acquire_n_async(1).await.unwrap();
    let before = limiter.peek();
    let r = limiter
        .try_acquire_n_for_async(1, Duration::from_millis(9))
        .await;
    assert_eq!(r, Err(AcquireError::RateLimited { retry_after: T }));
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "must not sleep before refusing"
    );
    assert_eq!(limiter.peek(), before);
    assert_eq!(limiter.try_acquire_n_for_async(1, T).await, Ok(T));
    assert_eq!(start.elapsed(), T);
}

#[tokio::test(start_paused = true)]
async fn sync_try_acquire_and_async_waiters_share_the_rate() {
    let limiter = paced();
    let start = Instant::now();
    let admitted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let (limiter, admitted) = (limiter.clone(), admitted.clone());
        tasks.push(tokio::spawn(async move {
            limiter.acquire_n_async(1).await.unwrap();
            admitted.fetch_add(1, Ordering::Relaxed);
        }));
    }
    // A polling client trying every millisecond meanwhile.
    let poller = {
        let (limiter, admitted) = (limiter.clone(), admitted.clone());
        tokio::spawn(async move {
            let mut got = 0;
            for _ in 0..600 {
                if limiter.try_acquire() {
                    admitted.fetch_add(1, Ordering::Relaxed);
                    got += 1;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            got
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    let polled = poller.await.unwrap();
    let elapsed = start.elapsed();
    let total = admitted.load(Ordering::Relaxed);
    // Every waiter got through, and everything together stayed within burst + elapsed / T.
    assert!(total >= 40);
    assert!(
        total as u128 <= 1 + elapsed.as_nanos() / T.as_nanos(),
        "{total} admitted in {elapsed:?} ({polled} by polling)"
    );
}

#[tokio::test(start_paused = true)]
async fn more_than_the_burst_waits_for_the_excess() {
    let q = Quota::per_second(100).unwrap(); // burst 100
    let limiter = RateLimiter::builder(q).clock(TokioClock::new()).build();
    let start = Instant::now();
    assert_eq!(limiter.acquire_n_async(150).await, Ok(50 * T));
    assert_eq!(start.elapsed(), 50 * T);
    assert_eq!(
        limiter.acquire_n_async(u64::MAX).await,
        Err(AcquireError::Unrepresentable {
            requested: u64::MAX
        })
    );
}

#[test]
fn futures_are_send_and_async_move_ones_are_static() {
    fn send<F: Future + Send>(_: F) {}
    fn send_static<F: Future + Send + 'static>(_: F) {}
    let limiter = paced();
    send(limiter.acquire_n_async(1));
    send(limiter.try_acquire_n_for_async(1, T));
    let l = limiter.clone();
    send_static(async move { l.acquire_n_async(1).await });
}

/// Burst 1 at 10/s, one permit taken, then five waiters that all time out after 50 ms: every
/// cancelled slot comes back, so the next waiter waits the remaining 50 ms (it used to wait
/// 450 ms, because only the latest of the five was refunded).
#[tokio::test(start_paused = true)]
async fn five_waiters_that_time_out_together_give_every_slot_back() {
    let q = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let limiter = Arc::new(RateLimiter::builder(q).clock(TokioClock::new()).build());
    let start = Instant::now();
    limiter.acquire_async().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let l = limiter.clone();
        waiters.push(tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(50), l.acquire_async()).await
        }));
        tokio::task::yield_now().await;
    }
    for w in waiters {
        assert!(w.await.unwrap().is_err(), "no slot is ready before 100 ms");
    }
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    assert_eq!(limiter.peek().reset_after, Duration::from_millis(50));
    assert_eq!(limiter.acquire_async().await, Ok(Duration::from_millis(50)));
}

/// The same with waiters giving up one by one in a scrambled order, and new waiters arriving
/// in between: each arrival takes the earliest free slot, none is lost, none is given twice.
#[tokio::test(start_paused = true)]
async fn waiters_giving_up_in_any_order_lose_no_capacity() {
    let limiter = paced(); // one grant every 10 ms, burst 1
    let start = Instant::now();
    limiter.acquire_async().await.unwrap(); // slot 0

    // Eight waiters booked on slots 10..80 ms; they give up at these instants (ms).
    let give_up = [7u64, 2, 9, 4, 1, 8, 3, 6];
    let mut waiters = Vec::new();
    for &after in &give_up {
        let l = limiter.clone();
        waiters.push(tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(after), l.acquire_async()).await
        }));
        tokio::task::yield_now().await;
    }
    for w in waiters {
        assert!(w.await.unwrap().is_err());
    }
    assert_eq!(start.elapsed(), Duration::from_millis(9));
    // Every booked slot came back: the next arrivals get 10, 20, 30 ms.
    for k in 1..=3u32 {
        limiter.acquire_async().await.unwrap();
        assert_eq!(start.elapsed(), T * k);
    }
}

/// A permit available at once never touches tokio's timer, so it works on a runtime built
/// without one (waiting there panics inside tokio, as documented).
#[test]
fn an_immediate_async_acquire_needs_no_timer() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let limiter = RateLimiter::new(Quota::per_second(10).unwrap());
    assert_eq!(rt.block_on(limiter.acquire_n_async(10)), Ok(Duration::ZERO));
}
