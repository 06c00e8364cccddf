//! Real threads racing decisions, penalties and rewards on one limit: counts
//! only, never timing. On a frozen clock a key's state is exactly what it has taken, so
//! whatever the interleaving the end state must be `taken = grants + penalties - rewards`
//! (each thread rewards only what it took itself, so no reward ever meets the floor of a full
//! limit, and the counts stay far below any saturation): `remaining = L - taken`, floored at
//! 0. A lost update (a penalty or a reward that a racing CAS or lock overwrote) breaks the
//! equation; an over-admission shows as more grants than `L + rewards`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use tollgate::{
    Algorithm, FixedWindow, Gcra, KeyedRateLimiter, ManualClock, Quota, RateLimiter, SlidingLog,
    SlidingWindow, WeightedWindow,
};

const THREADS: usize = 4;
const CALLS: u64 = 20_000;
const L: u64 = 1_000;

/// What one thread did: permits granted, charged, given back.
#[derive(Default, Clone, Copy)]
struct Tally {
    granted: u64,
    penalized: u64,
    rewarded: u64,
}

/// Each thread: checks of one permit; a penalty of 1 or 2 every few calls; a reward of what it
/// took (by grant or penalty) and has not given back yet, in ones and twos.
fn race(
    check: impl Fn() -> bool + Send + Sync + 'static,
    penalize: impl Fn(u64) + Send + Sync + 'static,
    reward: impl Fn(u64) + Send + Sync + 'static,
    side: impl Fn() + Send + Sync + 'static,
) -> Tally {
    let ops = Arc::new((check, penalize, reward));
    let side = Arc::new(side);
    // The workers, the side thread and this one.
    let start = Arc::new(Barrier::new(THREADS + 2));
    let done = Arc::new(AtomicBool::new(false));
    let sider = {
        let (side, start, done) = (side.clone(), start.clone(), done.clone());
        thread::spawn(move || {
            start.wait();
            while !done.load(Ordering::Relaxed) {
                side();
            }
        })
    };
    let handles: Vec<_> = (0..THREADS as u64)
        .map(|t| {
            let (ops, start) = (ops.clone(), start.clone());
            thread::spawn(move || {
                let (check, penalize, reward) = &*ops;
                let mut tally = Tally::default();
                let mut owed = 0u64;
                start.wait();
                for i in 0..CALLS {
                    // A cheap scramble of (thread, call), so threads interleave differently.
                    match (i * 7 + t * 3) % 5 {
                        0 | 1 => {
                            if check() {
                                tally.granted += 1;
                                owed += 1;
                            }
                        }
                        2 => {
                            let n = 1 + (i + t) % 2;
                            penalize(n);
                            tally.penalized += n;
                            owed += n;
                        }
                        _ => {
                            let n = owed.min(1 + i % 2);
                            if n > 0 {
                                reward(n);
                                tally.rewarded += n;
                                owed -= n;
                            }
                        }
                    }
                }
                tally
            })
        })
        .collect();
    start.wait();
    let total = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold(Tally::default(), |a, b| Tally {
            granted: a.granted + b.granted,
            penalized: a.penalized + b.penalized,
            rewarded: a.rewarded + b.rewarded,
        });
    done.store(true, Ordering::Relaxed);
    sider.join().unwrap();
    total
}

fn check_end(name: &str, t: Tally, remaining: u64) {
    let taken = t.granted + t.penalized - t.rewarded;
    assert_eq!(
        remaining,
        L.saturating_sub(taken),
        "{name}: granted {} penalized {} rewarded {}",
        t.granted,
        t.penalized,
        t.rewarded
    );
    assert!(t.granted <= L + t.rewarded, "{name}: over-admitted");
    assert!(
        t.granted > 0 && t.rewarded > 0,
        "{name}: the race did not race"
    );
}

fn frozen() -> ManualClock {
    let clock = ManualClock::new();
    clock.set(5_000_000_000);
    clock
}

fn direct_race<A: Algorithm>(alg: A) {
    // A window of a day: the frozen clock stays inside one.
    let q = Quota::new(L, Duration::from_secs(86_400)).unwrap();
    let l = Arc::new(
        RateLimiter::builder(q)
            .clock(frozen())
            .algorithm(alg.clone())
            .unwrap()
            .build(),
    );
    let (a, b, c, d) = (l.clone(), l.clone(), l.clone(), l.clone());
    let t = race(
        move || a.try_acquire(),
        move |n| {
            let _ = b.penalize(n);
        },
        move |n| {
            let _ = c.reward(n);
        },
        move || {
            let _ = d.peek();
        },
    );
    check_end(&format!("{alg:?}"), t, l.peek().remaining);
}

fn keyed_race<A: Algorithm>(alg: A) {
    let q = Quota::new(L, Duration::from_secs(86_400)).unwrap();
    let l = Arc::new(
        KeyedRateLimiter::<u32>::builder(q)
            .clock(frozen())
            .algorithm(alg.clone())
            .unwrap()
            .build(),
    );
    let (a, b, c, d) = (l.clone(), l.clone(), l.clone(), l.clone());
    // A sweep evicts the key whenever it is back at a full limit (losslessly).
    let t = race(
        move || a.try_acquire(&7),
        move |n| {
            b.penalize(&7, n).unwrap();
        },
        move |n| {
            let _ = c.reward(&7, n);
        },
        move || {
            d.sweep_now();
        },
    );
    check_end(&format!("keyed {alg:?}"), t, l.peek(&7).remaining);
}

#[test]
fn gcra_penalties_and_rewards_race_exactly() {
    direct_race(Gcra);
    keyed_race(Gcra);
}

#[test]
fn fixed_window_penalties_and_rewards_race_exactly() {
    direct_race(FixedWindow::new());
    keyed_race(FixedWindow::new());
}

#[test]
fn weighted_window_penalties_and_rewards_race_exactly() {
    direct_race(WeightedWindow);
    keyed_race(WeightedWindow);
}

#[test]
fn sliding_window_penalties_and_rewards_race_exactly() {
    direct_race(SlidingWindow::new(8));
    keyed_race(SlidingWindow::new(8));
}

#[test]
fn sliding_log_penalties_and_rewards_race_exactly() {
    direct_race(SlidingLog);
    keyed_race(SlidingLog);
}
