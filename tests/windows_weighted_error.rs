//! How far the weighted sliding-window counter is from the exact sliding log, measured on a
//! random bursty workload (seeded, so every run measures the same thing). Run with
//! `cargo test --release --test windows_weighted_error -- --nocapture` to see the figures
//! `benches/BENCHMARKS.md` quotes ("The weighted counter's error").
//!
//! Two measurements:
//! - **Same history**: the log decides; at each request the weighted formula is evaluated on
//!   the log's own admitted history (its permits per fixed window). The share of requests where
//!   the two disagree is the formula's error, not compounded by diverging states.
//! - **Side by side**: a `WeightedWindow` and a `SlidingLog` limiter each see the same stream;
//!   the share of requests decided differently, and what each admitted.
//!
//! The assertions are the guarantees: the log never admits more than `L` in any window of
//! length `W`; the weighted counter never more than `L` in a fixed window nor `2L` in any
//! window; and the two do differ on this workload (the comparison is not vacuous).

use std::collections::HashMap;
use std::time::Duration;

use tollgate::{Algorithm, ManualClock, Quota, RateLimiter, SlidingLog, WeightedWindow};

const L: u64 = 100;
const W: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// xorshift64*, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// 200,000 requests: a background of uniformly random gaps of `0..2 * mean_gap_ms`, and 2% of
/// the time a burst of 50-150 requests 1 ms apart.
fn workload(mean_gap_ms: u64) -> Vec<u64> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut t = 0;
    let mut times = Vec::new();
    while times.len() < 200_000 {
        if rng.next() % 100 < 2 {
            for _ in 0..50 + rng.next() % 101 {
                t += MS;
                times.push(t);
            }
        } else {
            t += rng.next() % (2 * mean_gap_ms * MS);
            times.push(t);
        }
    }
    times
}

fn limiter<A: Algorithm>(alg: A, clock: &ManualClock) -> RateLimiter<A> {
    RateLimiter::builder(Quota::new(L, Duration::from_nanos(W)).unwrap())
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build()
}

/// The most grants in any window `(t - W, t]` (grants sorted).
fn max_sliding(grants: &[u64]) -> usize {
    let mut start = 0;
    let mut best = 0;
    for (end, &t) in grants.iter().enumerate() {
        while grants[start] + W <= t {
            start += 1;
        }
        best = best.max(end + 1 - start);
    }
    best
}

fn max_fixed(grants: &[u64]) -> u64 {
    let mut per: HashMap<u64, u64> = HashMap::new();
    for &t in grants {
        *per.entry(t / W).or_default() += 1;
    }
    per.values().copied().max().unwrap_or(0)
}

#[test]
fn weighted_counter_against_the_exact_log() {
    // Background at the limit (100 per second, every decision near the margin), at half of it,
    // and at a fifth.
    for mean_gap_ms in [10, 20, 50] {
        println!("== background gaps averaging {mean_gap_ms} ms, plus bursts");
        measure(&workload(mean_gap_ms));
    }
}

fn measure(times: &[u64]) {
    let share = |x: usize| 100.0 * x as f64 / times.len() as f64;

    // Same history: the log decides, the formula is evaluated on the log's admissions.
    let clock = ManualClock::new();
    let log = limiter(SlidingLog, &clock);
    let mut per_window: HashMap<u64, u64> = HashMap::new();
    let (mut over, mut under) = (0, 0);
    for &t in times {
        clock.set(t);
        let k = t / W;
        let prev = per_window.get(&(k.wrapping_sub(1))).copied().unwrap_or(0);
        let cur = per_window.get(&k).copied().unwrap_or(0);
        let e = t - k * W;
        let weighted = u128::from(prev) * u128::from(W - e) + u128::from(cur + 1) * u128::from(W)
            <= u128::from(L) * u128::from(W);
        let exact = log.try_acquire();
        if exact {
            *per_window.entry(k).or_default() += 1;
        }
        match (weighted, exact) {
            (true, false) => over += 1,
            (false, true) => under += 1,
            _ => {}
        }
    }

    // Side by side: two limiters on the same stream.
    let clock = ManualClock::new();
    let (weighted, log) = (limiter(WeightedWindow, &clock), limiter(SlidingLog, &clock));
    let (mut w_grants, mut l_grants, mut differ) = (Vec::new(), Vec::new(), 0);
    for &t in times {
        clock.set(t);
        let (a, b) = (weighted.try_acquire(), log.try_acquire());
        if a {
            w_grants.push(t);
        }
        if b {
            l_grants.push(t);
        }
        differ += usize::from(a != b);
    }

    println!("requests: {}", times.len());
    println!(
        "same history: {:.2}% of decisions differ ({:.2}% admitted by the formula only, \
         {:.2}% by the log only)",
        share(over + under),
        share(over),
        share(under)
    );
    println!(
        "side by side: {:.2}% differ; admitted: weighted {}, log {}; most in any {W} ns \
         window: weighted {}, log {}",
        share(differ),
        w_grants.len(),
        l_grants.len(),
        max_sliding(&w_grants),
        max_sliding(&l_grants)
    );

    assert!(max_sliding(&l_grants) as u64 <= L);
    assert!(max_fixed(&w_grants) <= L);
    assert!(max_sliding(&w_grants) as u64 <= 2 * L);
    assert!(
        over + under > 0 && differ > 0,
        "the workload shows no difference"
    );
}
