//! Async: 10,000 waiters on a fast quota (100,000/s, burst 1: ideal total 100 ms). Total time
//! and wake-ups per grant, for tollgate's `acquire_async` (direct and keyed) and governor's
//! `until_ready`.
//!
//! Every waiter is wrapped in a future that counts its polls; each poll after the first is a
//! wake-up of that task (one task per waiter, so no other future shares its waker). Grants
//! that were ready at the first poll have no wake-up. "Wake-ups per waited grant" divides by
//! the waiters that were not ready at once: 1.0 means every sleeper was woken exactly once.
//!
//! Run (in benches/): `cargo bench --bench async_wakeups` (or `bash benches/run.sh`). Prints markdown.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tollgate::{KeyedRateLimiter, Quota, RateLimiter};

mod support;
use support::{median, quick};

const WAITERS: u64 = 10_000;
const RATE: u64 = 100_000;
/// governor's waiters re-check in a herd; stop it if it has not finished by then.
const CAP: Duration = Duration::from_secs(60);

/// Counts the polls of the future it wraps.
struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: u64,
    totals: Arc<Totals>,
}

#[derive(Default)]
struct Totals {
    polls: AtomicU64,
    granted: AtomicU64,
    waited: AtomicU64,
}

impl<F: Future> Future for Counted<F> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls += 1;
        self.totals.polls.fetch_add(1, Ordering::Relaxed);
        match self.inner.as_mut().poll(cx) {
            Poll::Ready(_) => {
                self.totals.granted.fetch_add(1, Ordering::Relaxed);
                if self.polls > 1 {
                    self.totals.waited.fetch_add(1, Ordering::Relaxed);
                }
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

struct Outcome {
    elapsed: Duration,
    finished: bool,
    polls: u64,
    granted: u64,
    waited: u64,
}

impl Outcome {
    /// Every poll but each task's first (all tasks are polled long before the cap).
    fn wakeups(&self) -> u64 {
        self.polls.saturating_sub(WAITERS)
    }
}

/// Spawns `WAITERS` tasks made by `make` on a current-thread runtime; waits for all (or `CAP`).
fn run<F>(make: impl Fn() -> F) -> Outcome
where
    F: Future + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let totals = Arc::new(Totals::default());
    rt.block_on(async {
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..WAITERS {
            set.spawn(Counted {
                inner: Box::pin(make()),
                polls: 0,
                totals: totals.clone(),
            });
        }
        let all = async { while set.join_next().await.is_some() {} };
        let finished = tokio::time::timeout(CAP, all).await.is_ok();
        let elapsed = start.elapsed();
        set.abort_all();
        Outcome {
            elapsed,
            finished,
            polls: totals.polls.load(Ordering::Relaxed),
            granted: totals.granted.load(Ordering::Relaxed),
            waited: totals.waited.load(Ordering::Relaxed),
        }
    })
}

fn main() {
    let runs = if quick() { 1 } else { 5 };
    let tq = Quota::per_second(RATE).unwrap().with_burst(1).unwrap();
    let gq = governor::Quota::per_second(NonZeroU32::new(RATE as u32).unwrap())
        .allow_burst(NonZeroU32::new(1).unwrap());

    type Runner = Box<dyn Fn() -> Outcome>;
    let contenders: Vec<(&str, Runner)> = vec![
        (
            "tollgate direct acquire_async",
            Box::new(move || {
                let l = Arc::new(RateLimiter::new(tq));
                run(move || {
                    let l = l.clone();
                    async move { l.acquire_async().await }
                })
            }),
        ),
        (
            "tollgate keyed acquire_async (one key)",
            Box::new(move || {
                let l = Arc::new(KeyedRateLimiter::<u64>::new(tq));
                run(move || {
                    let l = l.clone();
                    async move { l.acquire_n_async(&7, 1).await }
                })
            }),
        ),
        (
            "governor until_ready",
            Box::new(move || {
                let l = Arc::new(governor::RateLimiter::direct(gq));
                run(move || {
                    let l = l.clone();
                    async move { l.until_ready().await }
                })
            }),
        ),
    ];

    println!(
        "\n### async: {WAITERS} waiters on {RATE}/s, burst 1 (ideal total {} ms), median of {runs}\n",
        WAITERS * 1000 / RATE
    );
    println!("| contender | total (ms) | polls | wake-ups per grant | wake-ups per waited grant | finished |");
    println!("|---|---:|---:|---:|---:|---|");
    for (name, go) in &contenders {
        let outs: Vec<Outcome> = (0..runs).map(|_| go()).collect();
        let mut total: Vec<f64> = outs.iter().map(|o| o.elapsed.as_secs_f64() * 1e3).collect();
        let mut polls: Vec<f64> = outs.iter().map(|o| o.polls as f64).collect();
        let mut per_grant: Vec<f64> = outs
            .iter()
            .map(|o| o.wakeups() as f64 / o.granted.max(1) as f64)
            .collect();
        let mut per_waited: Vec<f64> = outs
            .iter()
            .map(|o| o.wakeups() as f64 / o.waited.max(1) as f64)
            .collect();
        let finished = outs.iter().all(|o| o.finished);
        println!(
            "| {name} | {:.0} | {:.0} | {:.3} | {:.3} | {} |",
            median(&mut total),
            median(&mut polls),
            median(&mut per_grant),
            median(&mut per_waited),
            if finished {
                "all".to_string()
            } else {
                format!("capped at {} s", CAP.as_secs())
            }
        );
    }
}
