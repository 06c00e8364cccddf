//! The main job: a per-second quota saying yes and no (with retry-after), then a blocking
//! acquire pacing a loop at one permit per 100 ms, like Guava's `RateLimiter.create(10.0)`.
//!
//! Run: `cargo run --release --example quickstart`

use std::error::Error;
use std::time::{Duration, Instant};

use tollgate::{Quota, RateLimiter};

mod support;
use support::ms;

fn main() -> Result<(), Box<dyn Error>> {
    println!("1) try_acquire against 5 requests per second (burst 5):");
    let api = RateLimiter::new(Quota::per_second(5)?);
    for i in 1..=7 {
        let d = api.check();
        match d.retry_after {
            None => println!(
                "   request {i}: allowed   (limit {}, remaining {}, bucket full again in {:?})",
                d.limit, d.remaining, d.reset_after
            ),
            Some(retry) => println!(
                "   request {i}: DENIED    (retry after {retry:?}, remaining {})",
                d.remaining
            ),
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    println!(
        "   after 200 ms: {}",
        if api.try_acquire() {
            "allowed again (one permit refilled)"
        } else {
            "still denied"
        }
    );

    println!("\n2) blocking acquire: one permit every 100 ms (Guava's acquire()):");
    let pacer = RateLimiter::new(Quota::from_interval(Duration::from_millis(100))?);
    let start = Instant::now();
    for task in 1..=6 {
        let waited = pacer.acquire()?;
        println!(
            "   task {task} at {:>4} ms (waited {:>3} ms)",
            ms(start.elapsed()),
            ms(waited)
        );
    }
    println!(
        "   6 tasks took {} ms: the first is immediate, then 100 ms apart",
        ms(start.elapsed())
    );

    println!("\n3) a timeout that refuses at once instead of waiting too long:");
    let slow = RateLimiter::new(Quota::per_minute(1)?);
    slow.acquire()?;
    match slow.try_acquire_n_for(1, Duration::from_millis(50)) {
        Ok(waited) => println!("   got it after {waited:?}"),
        Err(e) => println!("   refused: {e}"),
    }
    Ok(())
}
