//! The window algorithms' cells under loom: the one-word CAS loop (`cell::word`, 64-bit for
//! the fixed window, 128-bit for the weighted counter, whose atomic is a loom-mutex stand-in
//! under `--cfg loom`), the per-key lock of the sliding window and log (`cell::locked`), and the
//! quota-generation protocols: the fixed window's (a word written under the previous quota,
//! with another layout, read and migrated correctly while decisions race `set_quota`) and the
//! sliding window's and log's (grants that had left the window at the change stay gone).
//!
//! Properties, on a frozen clock:
//! - racing `try_acquire`s grant exactly `min(attempts, L)` and the state counts each of them
//!   (`peek().remaining` after), in every interleaving;
//! - `set_quota` racing decisions: every decision is made under one whole quota, the count in
//!   the window current at the change is kept, and nothing is counted twice or lost; a sliding
//!   log's grant that had left the window before a widening change is never counted again.
//!
//! Each model was shown to fail when its protocol is broken: the 64-bit CAS replaced by a blind
//! store (fixed window), the 128-bit stand-in's CAS storing whatever it saw (weighted), the log
//! read under the lock and written back under a second acquisition (sliding window and log), and
//! the generation parity ignored, every word read with the current layout (`set_quota`), and a
//! sliding log decided on without first being brought into the new generation. (A
//! decision that skips a *contended* lock is not a useful break here: a critical section with
//! no loom operation inside is atomic to loom.)

use std::time::Duration;

use loom::sync::Arc;
use tollgate::{
    Algorithm, FixedWindow, ManualClock, Quota, RateLimiter, SlidingLog, SlidingWindow,
    WeightedWindow,
};
use tollgate_loom_tests::model;

const NOW: u64 = 150;

fn limiter<A: Algorithm>(q: Quota, alg: A, preload: u64) -> RateLimiter<A> {
    let clock = ManualClock::new();
    clock.set(NOW);
    let l = RateLimiter::builder(q)
        .clock(clock)
        .algorithm(alg)
        .expect("a window quota")
        .build();
    if preload > 0 {
        l.try_acquire_n(preload).expect("preload fits");
    }
    l
}

/// `threads` threads each try one permit on a fresh limiter of limit `l`.
fn exactly_the_limit<A: Algorithm + Copy>(alg: A, threads: u64, l: u64) {
    model(move || {
        let q = Quota::new(l, Duration::from_nanos(100)).unwrap();
        let lim = Arc::new(limiter(q, alg, 0));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let lim = lim.clone();
                loom::thread::spawn(move || lim.try_acquire())
            })
            .collect();
        let granted = handles
            .into_iter()
            .map(|h| u64::from(h.join().unwrap()))
            .sum::<u64>();
        assert_eq!(granted, threads.min(l), "{alg:?}");
        assert_eq!(
            lim.peek().remaining,
            l - granted,
            "{alg:?}: a grant was lost"
        );
    });
}

#[test]
fn fixed_window_two_threads_limit_1() {
    exactly_the_limit(FixedWindow::new(), 2, 1);
}

#[test]
fn fixed_window_three_threads_limit_2() {
    exactly_the_limit(FixedWindow::new(), 3, 2);
}

#[test]
fn weighted_two_threads_limit_1() {
    exactly_the_limit(WeightedWindow, 2, 1);
}

#[test]
fn weighted_three_threads_limit_2() {
    exactly_the_limit(WeightedWindow, 3, 2);
}

#[test]
fn sliding_window_three_threads_limit_2() {
    exactly_the_limit(SlidingWindow::new(4), 3, 2);
}

#[test]
fn sliding_log_three_threads_limit_2() {
    exactly_the_limit(SlidingLog, 3, 2);
}

/// `set_quota` from (2 per 100 ns) to (3 per 1000 ns) at 150, with one permit counted in
/// window 1 = [100, 200), racing two `try_acquire`s. The two quotas lay the word out
/// differently (the count takes 7 bits beside the index for W = 100, 10 for W = 1000), so a
/// word from one generation read with the other's layout would show a count of 129 instead of
/// 1. In the new grid the permit moves to window 0 = [0, 1000).
///
/// Sequentially: both decisions before the change grant 1 (2 of 2), both after grant 2 (3 of
/// 3), one before and one after grant 2 (the count 2 carried, then 3 of 3). In every case the
/// final count is `1 + granted` under the new limit 3.
#[test]
fn fixed_window_set_quota_racing_decisions() {
    model(|| {
        let old = Quota::new(2, Duration::from_nanos(100)).unwrap();
        let new = Quota::new(3, Duration::from_nanos(1000)).unwrap();
        let lim = Arc::new(limiter(old, FixedWindow::new(), 1));
        let writer = {
            let lim = lim.clone();
            loom::thread::spawn(move || lim.set_quota(new).unwrap())
        };
        let decider = {
            let lim = lim.clone();
            loom::thread::spawn(move || u64::from(lim.try_acquire()) + u64::from(lim.try_acquire()))
        };
        writer.join().unwrap();
        let granted = decider.join().unwrap();
        assert!((1..=2).contains(&granted), "granted {granted}");
        let d = lim.peek();
        assert_eq!(d.limit, 3);
        assert_eq!(
            d.remaining,
            3 - (1 + granted),
            "count after the change: {d:?}"
        );
        assert_eq!(d.reset_after, Duration::from_nanos(1000 - NOW));
    });
}

/// `set_quota` from (1 per 100 ns) to (1 per 1000 ns) at 150 on a sliding window or log whose
/// one grant, at 0, left the window at 100, racing a `try_acquire` at 150. The grant stays gone
/// under the wider window, whether the decision runs before the change, after it,
/// or between the new parameters' store and the migration of the log (which must then bring
/// the log into the new generation itself): the permit is granted in every interleaving, and
/// counted under the new quota after.
fn sliding_set_quota_racing_a_decision<A: Algorithm + Copy>(alg: A) {
    model(move || {
        let old = Quota::new(1, Duration::from_nanos(100)).unwrap();
        let new = Quota::new(1, Duration::from_nanos(1000)).unwrap();
        let clock = ManualClock::new();
        let lim = RateLimiter::builder(old)
            .clock(clock.clone())
            .algorithm(alg)
            .expect("a window quota")
            .build();
        assert!(lim.try_acquire());
        clock.set(NOW);
        let lim = Arc::new(lim);
        let writer = {
            let lim = lim.clone();
            loom::thread::spawn(move || lim.set_quota(new).unwrap())
        };
        let decider = {
            let lim = lim.clone();
            loom::thread::spawn(move || lim.try_acquire())
        };
        writer.join().unwrap();
        assert!(
            decider.join().unwrap(),
            "{alg:?}: an expired grant came back"
        );
        let d = lim.peek();
        assert_eq!((d.limit, d.remaining), (1, 0), "{alg:?}: {d:?}");
    });
}

#[test]
fn sliding_log_set_quota_racing_a_decision() {
    sliding_set_quota_racing_a_decision(SlidingLog);
}

#[test]
fn sliding_window_set_quota_racing_a_decision() {
    sliding_set_quota_racing_a_decision(SlidingWindow::new(2));
}
