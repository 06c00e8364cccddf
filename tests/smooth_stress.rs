//! Real-thread stress tests of `SmoothRateLimiter`: many threads, many calls, and count bounds
//! that hold in every schedule. Never timing assertions.
//!
//! The bound follows from Guava's rules. Every grant happens when `nextFree <= now`; each moves
//! `nextFree` forward by the cost of its fresh permits (`(long) (fresh * stable)`), and a resync
//! moves it to `now`, storing at most one permit per `coolDown = stable` microseconds of the
//! jump (bursty). So `nextFree` at the end is the sum of the jumps and the costs, and it is at
//! most the last grant's `now` plus that grant's cost: with `t1` the limiter's last reading,
//! `permits <= t1 / stable + n_max`, if costs are exact. The interval used, 16 us, is a power of
//! two, so they are. A warming-up limiter charges at least the stable interval per permit, but
//! its trapezoids are truncated, so its bound allows 1 us lost per grant.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tollgate::{Clock, ManualClock, SmoothRateLimiter, StdClock};

#[path = "support/threads.rs"]
mod threads;
use threads::{run, Rng};

const THREADS: usize = 4;
/// 62,500 permits per second: exactly 16 us apart.
const RATE: f64 = 62_500.0;
const STABLE_US: u64 = 16;

fn calls() -> u64 {
    if cfg!(debug_assertions) {
        300_000
    } else {
        2_000_000
    }
}

/// Microseconds between two readings of the limiter's clock, truncated as the limiter's are.
fn elapsed_us(t0: u64, t1: u64) -> u64 {
    (t1 - t0) / 1_000
}

/// `permits * stable <= t1 + slack`: the rules' bound (module docs), where `slack` covers the
/// last grant's cost and any truncation.
fn assert_within_bound(permits: u64, elapsed_us: u64, slack_us: u64) {
    let allowed = (elapsed_us + slack_us) / STABLE_US;
    assert!(
        permits <= allowed,
        "{permits} permits granted in {elapsed_us} us, the rules allow {allowed}"
    );
}

/// Bursty: exact costs, so the slack is the last grant's cost, `n_max * stable`.
fn bursty_slack(n_max: u64) -> u64 {
    n_max * STABLE_US
}

/// Warming up (cold factor 3): every permit costs at least the stable interval, but a grant's
/// three parts are truncated separately (under 3 us lost each), and the last grant can cost up
/// to the cold interval per permit.
fn warming_slack(n_max: u64, grants: u64) -> u64 {
    3 * grants + n_max * 3 * STABLE_US
}

/// `try_acquire_n` of 1 to 3 permits hammered on the real clock.
#[test]
fn std_clock_try_acquire_never_over_admits() {
    for warm in [false, true] {
        let clock = StdClock::new();
        let t0 = clock.now(); // before the limiter's origin
        let builder = SmoothRateLimiter::builder(RATE).clock(clock);
        let builder = if warm {
            builder.warmup(Duration::from_millis(200))
        } else {
            builder
        };
        let limiter = Arc::new(builder.build().unwrap());
        let l = Arc::clone(&limiter);
        let per_thread = run(THREADS, move |i| {
            let mut rng = Rng(0x9E37_79B9 ^ (i as u64 + 1));
            let (mut permits, mut grants) = (0, 0);
            for _ in 0..calls() {
                let n = 1 + rng.next() % 3;
                if l.try_acquire_n(n).is_ok() {
                    permits += n;
                    grants += 1;
                }
            }
            (permits, grants)
        });
        let t1 = clock.now();
        let permits: u64 = per_thread.iter().map(|p| p.0).sum();
        let grants: u64 = per_thread.iter().map(|p| p.1).sum();
        assert!(grants >= 1);
        let slack = if warm {
            warming_slack(3, grants)
        } else {
            bursty_slack(3)
        };
        assert_within_bound(permits, elapsed_us(t0, t1), slack);
    }
}

/// A manual clock that the calling threads move forward by small random steps between calls:
/// time passes only while someone asks, so the limiter is polled at every step and the bound
/// is nearly reached (a lost update would exceed it).
#[test]
fn manual_clock_advanced_by_callers_is_tight() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        SmoothRateLimiter::builder(RATE)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let (l, c) = (Arc::clone(&limiter), clock.clone());
    let permits: u64 = run(THREADS, move |i| {
        let mut rng = Rng(0xA076_1D64_78BD_642F ^ (i as u64 + 1));
        let mut permits = 0;
        for _ in 0..calls() {
            c.advance_nanos(rng.next() % 3_000);
            permits += u64::from(l.try_acquire());
        }
        permits
    })
    .into_iter()
    .sum();
    let elapsed = elapsed_us(0, clock.now());
    assert_within_bound(permits, elapsed, bursty_slack(1));
    // Polled at every step, it cannot fall far behind the rate either.
    assert!(
        permits >= elapsed / STABLE_US / 2,
        "only {permits} in {elapsed} us"
    );
}

/// Blocking acquires of several permits on a manual clock whose `sleep` advances it: every
/// thread's waits are real waits on the shared clock. Pay later: each acquire is granted at its
/// moment, and the permits granted by the end fit the bound.
#[test]
fn blocking_acquires_on_a_shared_manual_clock() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        SmoothRateLimiter::builder(RATE)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let l = Arc::clone(&limiter);
    let permits: u64 = run(THREADS, move |i| {
        let mut rng = Rng(0x2545_F491 ^ (i as u64 + 1));
        (0..calls() / 20)
            .map(|_| {
                let n = 1 + rng.next() % 4;
                l.acquire_n(n).unwrap();
                n
            })
            .sum::<u64>()
    })
    .into_iter()
    .sum();
    // Every thread slept until its moment, so the clock has passed every moment; sleeps by
    // several threads add up, so it may run ahead of the schedule, never behind.
    let elapsed = elapsed_us(0, clock.now());
    assert_within_bound(permits, elapsed, bursty_slack(4));
}

/// `set_quota` racing `try_acquire`: rates alternate between 62,500/s and 31,250/s (16 and
/// 32 us), so some calls land while the limiter is in debt (the word is locked and decisions go
/// through the mutex) and some rescale saved permits up. Rescaling can double the saved permits
/// (at most `maxPermits` of the new rate each time), so the bound adds that per `set_quota`.
#[test]
fn set_rate_racing_decisions_never_over_admits() {
    let clock = StdClock::new();
    let t0 = clock.now();
    let limiter = Arc::new(
        SmoothRateLimiter::builder(RATE)
            .clock(clock)
            .build()
            .unwrap(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let set_rates = Arc::new(AtomicU64::new(0));
    let (l, d, s) = (
        Arc::clone(&limiter),
        Arc::clone(&done),
        Arc::clone(&set_rates),
    );
    let per_thread = run(THREADS, move |i| {
        if i == 0 {
            let mut k = 0u64;
            while !d.load(Ordering::Acquire) {
                l.set_quota(if k % 2 == 0 { RATE / 2.0 } else { RATE })
                    .unwrap();
                k += 1;
                thread::yield_now();
            }
            s.store(k, Ordering::Release);
            0
        } else {
            let granted = (0..calls()).filter(|_| l.try_acquire()).count() as u64;
            if i == 1 {
                d.store(true, Ordering::Release);
            }
            granted
        }
    });
    let t1 = clock.now();
    let permits: u64 = per_thread.iter().sum();
    let rescaled = set_rates.load(Ordering::Acquire) * RATE as u64;
    assert_within_bound(permits, elapsed_us(t0, t1), bursty_slack(1 + rescaled));
    assert!(permits >= 1);
}

/// Async waiters on a multi-threaded runtime, many of them dropped by timeouts mid-wait (their
/// reservations refunded when they are still the latest): the permits of the waiters that
/// completed fit the bound, refunds included.
#[cfg(feature = "tokio")]
#[test]
fn async_waiters_with_timeouts_never_over_admit() {
    // 1000/s: 1 ms apart, the timer's resolution.
    const RATE: f64 = 1_000.0;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(THREADS)
        .enable_time()
        .build()
        .unwrap();
    let clock = StdClock::new();
    let t0 = clock.now();
    let limiter = Arc::new(
        SmoothRateLimiter::builder(RATE)
            .clock(clock)
            .build()
            .unwrap(),
    );
    let (permits, grants) = rt.block_on(async {
        let tasks: Vec<_> = (0..64u64)
            .map(|i| {
                let l = Arc::clone(&limiter);
                tokio::spawn(async move {
                    let mut rng = Rng(0x1234_5678 ^ (i + 1));
                    let (mut permits, mut grants) = (0, 0);
                    for _ in 0..20 {
                        let n = 1 + rng.next() % 3;
                        let patience = Duration::from_micros(rng.next() % 40_000);
                        if let Ok(Ok(_)) =
                            tokio::time::timeout(patience, l.acquire_n_async(n)).await
                        {
                            permits += n;
                            grants += 1;
                        }
                    }
                    (permits, grants)
                })
            })
            .collect();
        let (mut permits, mut grants) = (0u64, 0u64);
        for t in tasks {
            let (p, g) = t.await.unwrap();
            permits += p;
            grants += g;
        }
        (permits, grants)
    });
    let t1 = clock.now();
    // 1000 us per permit; saved permits are multiples of 1/1000 that binary cannot hold
    // exactly, so allow 1 us truncated per grant, plus the last grant's cost.
    let allowed = (elapsed_us(t0, t1) + grants + 3 * 1_000) / 1_000;
    assert!(
        permits <= allowed,
        "{permits} permits, the rules allow {allowed}"
    );
    assert!(permits >= 1);
}
