//! The leaky bucket as a queue: requests wait, then leave at a constant rate. That is GCRA
//! with burst 1 and reservations: each `reserve` books the next free slot, `T` after the
//! previous one, in arrival order; the caller waits until its slot. A queue of bounded length
//! is `try_reserve_n_for(n, max_delay)`: a request that would wait longer than `max_delay` (the
//! queue is full) is refused at once instead of queued.
//!
//! ```sh
//! cargo run --release --example leaky_queue
//! ```

use std::time::{Duration, Instant};

use tollgate::{Quota, RateLimiter};

mod support;
use support::ms;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Leaks one request every 50 ms; holds at most 4 waiting (200 ms of queue).
    let leak = Duration::from_millis(50);
    let max_delay = leak * 4;
    let queue = RateLimiter::new(Quota::from_interval(leak)?);

    // Eight requests arrive at once: each gets its slot, 50 ms apart.
    let start = Instant::now();
    let mut slots = Vec::new();
    for id in 0..8 {
        match queue.try_reserve_n_for(1, max_delay) {
            Ok(r) => {
                println!("request {id}: queued, leaves after {:>3} ms", ms(r.delay()));
                slots.push((id, r));
            }
            Err(e) => println!("request {id}: refused, queue full ({e})"),
        }
    }
    assert_eq!(slots.len(), 5, "one leaves now, four wait");

    // Each waits for its slot, then proceeds: they leave evenly spaced.
    for (id, r) in slots {
        r.wait();
        println!("request {id}: left at {:>3} ms", ms(start.elapsed()));
    }

    // Blocking acquire is the same queue without a bound: it sleeps until its slot.
    let waited = queue.acquire()?;
    println!("one more: waited {} ms for its slot", ms(waited));
    Ok(())
}
