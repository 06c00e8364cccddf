//! Real threads on the window algorithms: count bounds only, never timing.
//!
//! - A frozen clock: exactly `L` permits are granted however the threads interleave (none
//!   lost to a racing CAS or lock, none granted twice).
//! - A clock advanced concurrently (manual, and the real default clock): at most `L` per
//!   window the algorithm bounds, counted over the span `[t0, t1]` of the limiter's own clock
//!   read before the first call and after the last.
//! - Keyed, with a sweeper evicting concurrently: still exactly `L` per key on a frozen clock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use tollgate::{
    Algorithm, Clock, FixedWindow, KeyedRateLimiter, ManualClock, Quota, RateLimiter, SlidingLog,
    SlidingWindow, StdClock, WeightedWindow,
};

const THREADS: usize = 4;

fn direct<A: Algorithm>(q: Quota, clock: impl Clock, alg: A) -> Arc<RateLimiter<A>> {
    Arc::new(
        RateLimiter::builder(q)
            .clock(clock)
            .algorithm(alg)
            .unwrap()
            .build(),
    )
}

/// Runs `calls` per thread of `op` on every thread at once; returns the permits granted.
fn hammer(calls: u64, op: impl Fn(u64) -> u64 + Send + Sync + 'static) -> u64 {
    let op = Arc::new(op);
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (op, start) = (op.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                (0..calls)
                    .map(|i| op(i * THREADS as u64 + t as u64))
                    .sum::<u64>()
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

fn exactly_the_limit_on_a_frozen_clock<A: Algorithm>(alg: A) {
    let q = Quota::new(1_000, Duration::from_secs(1)).unwrap();
    let clock = ManualClock::new();
    clock.set(123_456_789);
    let l = direct(q, clock, alg);
    let granted = {
        let l = l.clone();
        hammer(20_000, move |i| match i % 3 {
            0 => u64::from(l.try_acquire()),
            1 => l.try_acquire_n(2).map_or(0, |()| 2),
            _ => {
                let d = l.check_n(3);
                if d.allowed {
                    3
                } else {
                    0
                }
            }
        })
    };
    // Cost 3 may be refused while 1 or 2 still fit: at most L, and within 2 of it.
    assert!(granted <= 1_000, "{granted}");
    assert!(granted >= 998, "{granted}");
    assert_eq!(
        l.peek().remaining,
        1_000 - granted,
        "the state counts every grant"
    );
}

/// The most permits each algorithm allows over `[t0, t1]`.
fn bound<A: Algorithm + 'static>(l: u64, w: u64, t0: u64, t1: u64) -> u64 {
    let any = std::any::TypeId::of::<A>();
    let windows = if any == std::any::TypeId::of::<SlidingLog>() {
        // Every window (t - W, t] holds at most L.
        (t1 - t0) / w + 1
    } else if any == std::any::TypeId::of::<SlidingWindow>() {
        // Every window of W aligned to a sub-window holds at most L; [t0, t1] is covered by
        // this many of them starting at the sub-window holding t0.
        (t1 - t0) / w + 2
    } else {
        // At most L in every fixed window [kW, (k+1)W) (weighted too).
        t1 / w - t0 / w + 1
    };
    l * windows
}

fn within_the_window_bound<A: Algorithm + Copy + 'static>(alg: A) {
    let (limit, w) = (50, 1_000_000); // 50 per ms
    let q = Quota::new(limit, Duration::from_nanos(w)).unwrap();
    // A manual clock advanced by the callers themselves.
    let clock = ManualClock::new();
    let l = direct(q, clock.clone(), alg);
    let t0 = clock.now();
    let granted = {
        let (l, clock) = (l.clone(), clock.clone());
        hammer(50_000, move |i| {
            if i % 7 == 0 {
                clock.advance_nanos(3_001);
            }
            u64::from(l.try_acquire())
        })
    };
    let t1 = clock.now();
    assert!(
        granted <= bound::<A>(limit, w, t0, t1),
        "{alg:?}: {granted} in {}",
        t1 - t0
    );
    assert!(granted > 0);

    // The default clock, for a bounded number of calls.
    let clock = StdClock::new();
    let l = direct(q, clock, alg);
    let t0 = clock.now();
    let granted = {
        let l = l.clone();
        hammer(200_000, move |_| u64::from(l.try_acquire()))
    };
    let t1 = clock.now();
    assert!(
        granted <= bound::<A>(limit, w, t0, t1),
        "{alg:?}: {granted} in {}",
        t1 - t0
    );
}

fn keyed_with_a_racing_sweeper<A: Algorithm + Copy>(alg: A) {
    let q = Quota::new(100, Duration::from_secs(1)).unwrap();
    let clock = ManualClock::new();
    let l = Arc::new(
        KeyedRateLimiter::<u64>::builder(q)
            .clock(clock.clone())
            .algorithm(alg)
            .unwrap()
            .build(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sweeps = Arc::new(AtomicU64::new(0));
    let sweeper = {
        let (l, stop, sweeps) = (l.clone(), stop.clone(), sweeps.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                l.sweep_now();
                sweeps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let granted = {
        let l = l.clone();
        hammer(20_000, move |i| u64::from(l.try_acquire(&(i % 16))))
    };
    stop.store(true, Ordering::Relaxed);
    sweeper.join().unwrap();
    // 16 keys, each exactly at its limit: nothing was cold, so nothing was evicted or lost.
    assert_eq!(granted, 16 * 100, "{alg:?}");
    for k in 0..16 {
        assert_eq!(l.peek(&k).remaining, 0, "{alg:?} key {k}");
    }
    assert!(sweeps.load(Ordering::Relaxed) > 0);
    assert_eq!(l.stats().evicted, 0);
}

macro_rules! every_algorithm {
    ($($name:ident: $alg:expr_2021,)*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn exactly_the_limit() {
                exactly_the_limit_on_a_frozen_clock($alg);
            }

            #[test]
            fn window_bound() {
                within_the_window_bound($alg);
            }

            #[test]
            fn keyed_sweeper() {
                keyed_with_a_racing_sweeper($alg);
            }
        }
    )*};
}

every_algorithm! {
    fixed_window: FixedWindow::new(),
    sliding_window: SlidingWindow::new(8),
    weighted_window: WeightedWindow,
    sliding_log: SlidingLog,
}
