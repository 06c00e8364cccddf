//! What the stress tests share: workers started together, and cheap per-thread randomness.

use std::sync::{Arc, Barrier};
use std::thread;

/// Spawns `threads` workers that start together; returns their results.
pub fn run<T: Send + 'static>(
    threads: usize,
    work: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let work = Arc::new(work);
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (work, start) = (Arc::clone(&work), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                work(i)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Deterministic per-thread pseudo-random numbers (xorshift), so runs vary by thread but need
/// no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
