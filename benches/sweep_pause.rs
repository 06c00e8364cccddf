//! The worst pause a hot-path call sees while a sweep evicts 1M cold keys.
//!
//! One thread calls `try_acquire` on a hot key in a loop and records each call's latency;
//! another runs `sweep_now()` over 1M cold keys (the same code the background sweeper runs).
//! The same loop is also run for as long with no sweep: its worst call is the machine's own
//! noise floor (preemption by other processes on 2 shared cores), which the sweep figure must
//! be read against.
//!
//! Run (in benches/): `cargo bench --bench sweep_pause` (or `bash benches/run.sh`). Prints markdown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate::{KeyedRateLimiter, Quota};

mod support;
use support::{median, quick};

const COLD: u64 = 1_000_000;

/// Latency stats of the hot loop while it ran.
struct Loop {
    calls: u64,
    max: Duration,
    over_100us: u64,
    over_1ms: u64,
}

/// Calls `try_acquire(&hot)` until `stop`, timing each call.
fn hot_loop(limiter: &KeyedRateLimiter<u64>, hot: u64, stop: &AtomicBool) -> Loop {
    let mut l = Loop {
        calls: 0,
        max: Duration::ZERO,
        over_100us: 0,
        over_1ms: 0,
    };
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        std::hint::black_box(limiter.try_acquire(&hot));
        let d = t0.elapsed();
        l.calls += 1;
        l.max = l.max.max(d);
        l.over_100us += u64::from(d > Duration::from_micros(100));
        l.over_1ms += u64::from(d > Duration::from_millis(1));
    }
    l
}

struct Round {
    sweep: Duration,
    /// The longest one shard's write lock was held (the sweeper's own figure, `stats()`).
    longest_hold: Duration,
    evicted: usize,
    during: Loop,
    idle: Loop,
}

fn round(hot: u64) -> Round {
    // T = 1 ms: a key that took one permit is cold 1 ms later. The hot key is drained (its
    // TAT runs a second ahead), so it is never cold and stays in the map throughout.
    let limiter = KeyedRateLimiter::<u64>::new(Quota::per_second(1000).unwrap());
    for k in 0..COLD {
        let _ = limiter.try_acquire(&k);
    }
    while limiter.try_acquire(&hot) {}
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(limiter.len() as u64, COLD + 1);

    let stop = AtomicBool::new(false);
    let (sweep, evicted, during) = std::thread::scope(|s| {
        let h = s.spawn(|| hot_loop(&limiter, hot, &stop));
        std::thread::sleep(Duration::from_millis(20)); // the hot loop is running and warm
        let t0 = Instant::now();
        let evicted = limiter.sweep_now();
        let sweep = t0.elapsed();
        std::thread::sleep(Duration::from_millis(2));
        stop.store(true, Ordering::Relaxed);
        (sweep, evicted, h.join().unwrap())
    });
    assert_eq!(evicted as u64, COLD, "every cold key evicted");
    assert_eq!(limiter.len(), 1, "the hot key stays");
    let longest_hold = limiter.stats().longest_pause;

    // The noise floor: the same loop, as long, with nothing else running in this process.
    let stop = AtomicBool::new(false);
    let idle = std::thread::scope(|s| {
        let h = s.spawn(|| hot_loop(&limiter, hot, &stop));
        std::thread::sleep(Duration::from_millis(22) + sweep);
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap()
    });
    Round {
        sweep,
        longest_hold,
        evicted,
        during,
        idle,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let rounds = if quick() { 1 } else { 7 };
    let rs: Vec<Round> = (0..rounds)
        .map(|i| round(u64::MAX - i as u64)) // a different hot key (shard) each round
        .collect();
    println!("\n### worst hot-path pause while sweeping 1M cold keys ({rounds} rounds)\n");
    println!("| round | sweep took (ms) | longest shard lock hold (ms) | evicted | hot calls during | worst call during sweep (ms) | calls > 100 us | calls > 1 ms | worst call, no sweep (ms) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, r) in rs.iter().enumerate() {
        println!(
            "| {} | {:.1} | {:.3} | {} | {} | {:.3} | {} | {} | {:.3} |",
            i + 1,
            ms(r.sweep),
            ms(r.longest_hold),
            r.evicted,
            r.during.calls,
            ms(r.during.max),
            r.during.over_100us,
            r.during.over_1ms,
            ms(r.idle.max),
        );
    }
    let mut during: Vec<f64> = rs.iter().map(|r| ms(r.during.max)).collect();
    let mut idle: Vec<f64> = rs.iter().map(|r| ms(r.idle.max)).collect();
    let worst = during.iter().cloned().fold(0.0, f64::max);
    let mut holds: Vec<f64> = rs.iter().map(|r| ms(r.longest_hold)).collect();
    println!(
        "\nmedian worst pause during a sweep: {:.3} ms (max over rounds {:.3} ms); median worst call with no sweep: {:.3} ms; median longest shard lock hold: {:.3} ms",
        median(&mut during),
        worst,
        median(&mut idle),
        median(&mut holds)
    );
}
