//! N tokio workers sharing one per-second quota: each awaits a permit before every job.
//! Waiters are served in arrival order, each woken once, and the total rate holds.
//!
//! Run: `cargo run --release --example async_workers`

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tollgate::{Quota, RateLimiter};

mod support;
use support::ms;

const WORKERS: usize = 8;
const JOBS_PER_WORKER: usize = 5;

#[tokio::main]
async fn main() {
    // 20 jobs per second for everybody together, burst 5.
    let quota = Quota::per_second(20).unwrap().with_burst(5).unwrap();
    let limiter = Arc::new(RateLimiter::new(quota));
    let start = Instant::now();

    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let limiter = limiter.clone();
        workers.push(tokio::spawn(async move {
            let mut log = Vec::new();
            for job in 0..JOBS_PER_WORKER {
                let waited = limiter
                    .acquire_n_async(1)
                    .await
                    .expect("one permit always fits");
                log.push((start.elapsed(), w, job, waited));
            }
            log
        }));
    }
    let mut log = Vec::new();
    for w in workers {
        log.extend(w.await.unwrap());
    }
    log.sort();
    for (at, w, job, waited) in &log {
        println!(
            "{:>5} ms  worker {w} job {job}  (waited {:>3} ms)",
            ms(*at),
            ms(*waited)
        );
    }
    let elapsed = start.elapsed();
    let jobs = log.len();
    println!(
        "\n{jobs} jobs by {WORKERS} workers in {elapsed:.2?}: {:.1} jobs/s (quota: 20/s after a burst of 5)",
        (jobs - 5) as f64 / elapsed.as_secs_f64()
    );

    // A worker that will not wait long: gives up at once if the wait is over 10 ms.
    match limiter
        .try_acquire_n_for_async(1, Duration::from_millis(10))
        .await
    {
        Ok(w) => println!("impatient worker got a permit after {w:?}"),
        Err(e) => println!("impatient worker declined: {e}"),
    }
}
