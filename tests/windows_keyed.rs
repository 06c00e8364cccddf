//! Window algorithms on the keyed limiter: the sweeper is lossless (a limiter swept at random
//! moments decides exactly like one never swept, every `Decision` field), it evicts every key
//! once its window is over, and `max_keys` caps every algorithm.

use std::num::NonZeroUsize;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, FixedWindow, Gcra, KeyedRateLimiter, ManualClock, Quota, SlidingLog, SlidingWindow,
    WeightedWindow, WhenFull,
};

fn keyed<A: Algorithm>(q: Quota, clock: &ManualClock, alg: A) -> KeyedRateLimiter<u8, A> {
    KeyedRateLimiter::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Check(u8, u64),
    Peek(u8),
    Advance(u64),
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => ((0u8..4), (0u64..5)).prop_map(|(k, n)| Op::Check(k, n)),
        1 => (0u8..4).prop_map(Op::Peek),
        3 => (0u64..25).prop_map(Op::Advance),
        2 => Just(Op::Sweep),
    ]
}

/// Runs `ops` on a swept and a never-swept limiter; every decision must be equal, and at the
/// end, once every window is over, a sweep must leave the table empty.
fn lossless<A: Algorithm + Copy>(alg: A, l: u64, w: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
    let clock = ManualClock::new();
    let swept = keyed(q, &clock, alg);
    let kept = keyed(q, &clock, alg);
    let mut evicted = 0;
    for (i, &op) in ops.iter().enumerate() {
        match op {
            Op::Check(k, n) => {
                prop_assert_eq!(
                    swept.check_n(&k, n),
                    kept.check_n(&k, n),
                    "op {} {:?}",
                    i,
                    op
                )
            }
            Op::Peek(k) => prop_assert_eq!(swept.peek(&k), kept.peek(&k), "op {} {:?}", i, op),
            Op::Advance(d) => clock.advance_nanos(d),
            Op::Sweep => evicted += swept.sweep_now(),
        }
    }
    prop_assert!(swept.len() <= kept.len());
    let left = swept.len();
    clock.advance_nanos(2 * w);
    prop_assert_eq!(
        swept.sweep_now(),
        left,
        "every window is over: nothing carries information"
    );
    prop_assert_eq!(swept.len(), 0);
    prop_assert_eq!(swept.stats().evicted as usize, evicted + left);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sweeping_fixed_windows_loses_nothing(l in 1u64..5, w in 5u64..30, ops in prop::collection::vec(op(), 1..60)) {
        lossless(FixedWindow::new(), l, w, &ops)?;
    }

    #[test]
    fn sweeping_sliding_windows_loses_nothing(l in 1u64..5, g in 3u64..8, ops in prop::collection::vec(op(), 1..60)) {
        lossless(SlidingWindow::new(3), l, 3 * g, &ops)?;
    }

    #[test]
    fn sweeping_weighted_windows_loses_nothing(l in 1u64..5, w in 5u64..30, ops in prop::collection::vec(op(), 1..60)) {
        lossless(WeightedWindow, l, w, &ops)?;
    }

    #[test]
    fn sweeping_sliding_logs_loses_nothing(l in 1u64..5, w in 5u64..30, ops in prop::collection::vec(op(), 1..60)) {
        lossless(SlidingLog, l, w, &ops)?;
    }
}

/// `max_keys` with both policies, on one algorithm: the table never exceeds the cap, a full
/// table refuses (Deny) or decides untracked (AllowUntracked), and keys whose window is over
/// are reclaimed for new ones.
fn capped<A: Algorithm + Copy>(alg: A) {
    let q = Quota::new(2, Duration::from_secs(1)).unwrap();
    let cap = NonZeroUsize::new(3).unwrap();
    for policy in [WhenFull::Deny, WhenFull::AllowUntracked] {
        let clock = ManualClock::new();
        let l = KeyedRateLimiter::<u32>::builder(q)
            .clock(clock.clone())
            .max_keys(cap)
            .when_full(policy)
            .algorithm(alg)
            .unwrap()
            .build();
        for k in 0..3 {
            assert!(l.try_acquire(&k), "{alg:?} key {k}");
        }
        let d = l.check(&99);
        assert_eq!(l.len(), 3, "{alg:?} {policy:?}");
        match policy {
            WhenFull::Deny => {
                assert!(!d.allowed, "{alg:?}: a full table refuses new keys");
                assert!(d.retry_after.is_some());
                assert!(!l.peek(&99).allowed);
            }
            _ => {
                assert!(d.allowed, "{alg:?}: decided as a fresh key");
                assert_eq!(d.remaining, 1);
            }
        }
        // Tracked keys are unaffected by the cap.
        assert!(l.try_acquire(&0));
        // Once every window is over (two for the weighted counter), new keys take their place.
        clock.advance(Duration::from_secs(2));
        for k in 100..103 {
            assert!(l.try_acquire_n(&k, 2).is_ok(), "{alg:?} {policy:?} key {k}");
        }
        assert_eq!(l.len(), 3);
        assert!(!l.try_acquire(&100));
    }
}

#[test]
fn max_keys_caps_every_algorithm() {
    capped(Gcra);
    capped(FixedWindow::new());
    capped(SlidingWindow::new(4));
    capped(WeightedWindow);
    capped(SlidingLog);
}

#[test]
fn a_background_sweeper_evicts_window_keys() {
    // Real time: a 1 ms window, a sweeper every 5 ms; the keys go once their windows are over.
    let q = Quota::new(5, Duration::from_millis(1)).unwrap();
    let l = KeyedRateLimiter::<u32>::builder(q)
        .sweep_interval(Duration::from_millis(5))
        .algorithm(SlidingLog)
        .unwrap()
        .build();
    for k in 0..100 {
        assert!(l.try_acquire(&k));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !l.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(l.is_empty(), "{:?}", l.stats());
    assert!(l.stats().evicted >= 100);
}

/// A sweep at the instant a key's grants leave the window, then `set_quota` to a
/// wider window: the swept and the never-swept limiter decide alike, since grants that had
/// left the window in force at the change are gone for good (`docs/guide/algorithms.md`, "Quota changes
/// and per-call quotas"). The log at 5 per 9 ns widened to 1 per 41 ns (the issue's case); the
/// sliding window (2 sub-windows, which must divide both windows) at 5 per 10 ns widened to
/// 1 per 42 ns.
fn sweep_then_widen<A: Algorithm + Copy>(alg: A, w_old: u64, w_new: u64) {
    let old = Quota::new(5, Duration::from_nanos(w_old)).unwrap();
    let new = Quota::new(1, Duration::from_nanos(w_new)).unwrap();
    let clock = ManualClock::new();
    let swept = keyed(old, &clock, alg);
    let kept = keyed(old, &clock, alg);
    assert!(swept.check_n(&1, 5).allowed && kept.check_n(&1, 5).allowed);
    clock.set(w_old); // the grants at 0 have just left the window
    assert_eq!(swept.sweep_now(), 1, "{alg:?}: the key is cold");
    swept.set_quota(new).unwrap();
    kept.set_quota(new).unwrap();
    let (s, k) = (swept.peek(&1), kept.peek(&1));
    assert_eq!(s, k, "{alg:?}: a sweep changed a later decision");
    assert!(k.allowed, "{alg:?}");
    assert_eq!((k.limit, k.remaining), (1, 1), "{alg:?}: {k:?}");
    assert_eq!(k.reset_after, Duration::ZERO, "{alg:?}: nothing counts");
    // And the next grant is judged alike too.
    assert_eq!(swept.check(&1), kept.check(&1), "{alg:?}");
}

#[test]
fn a_sweep_before_a_wider_window_changes_no_decision() {
    sweep_then_widen(SlidingLog, 9, 41);
    sweep_then_widen(SlidingWindow::new(2), 10, 42);
}

#[derive(Clone, Copy, Debug)]
enum CapOp {
    /// Permits for a key among the few the table can hold.
    Take(u8, u64),
    /// A new key's peek, `check_n(0)`, then check.
    Probe(u8),
    /// A timed wait for `n` permits on a key, with a timeout.
    TryFor(u8, u64, u64),
    Advance(u64),
    /// The same quota again: forgets the cap's lower bound on cold times.
    SetQuota,
}

fn cap_op() -> impl Strategy<Value = CapOp> {
    prop_oneof![
        5 => ((0u8..4), (1u64..3)).prop_map(|(k, n)| CapOp::Take(k, n)),
        4 => (10u8..13).prop_map(CapOp::Probe),
        2 => ((0u8..13), (1u64..3), (0u64..60)).prop_map(|(k, n, t)| CapOp::TryFor(k, n, t)),
        3 => (0u64..15).prop_map(CapOp::Advance),
        1 => Just(CapOp::SetQuota),
    ]
}

/// On every algorithm and both policies: a peek of a key the table does not hold
/// (and `check_n(0)`, which is the peek) says what the check right after it meets: the cap's
/// refusal field for field, or a fresh key's full limit; a timed wait that fails has not
/// slept; the table never holds more than the cap.
fn peek_agrees_at_the_cap<A: Algorithm + Copy>(
    alg: A,
    deny: bool,
    ops: &[CapOp],
) -> Result<(), TestCaseError> {
    let q = Quota::new(2, Duration::from_nanos(20)).unwrap();
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u8>::builder(q)
        .clock(clock.clone())
        .max_keys(NonZeroUsize::new(2).unwrap())
        .when_full(if deny {
            WhenFull::Deny
        } else {
            WhenFull::AllowUntracked
        })
        .algorithm(alg)
        .unwrap()
        .build();
    for &op in ops {
        match op {
            CapOp::Take(k, n) => {
                let _ = l.try_acquire_n(&k, n);
            }
            CapOp::Probe(k) => {
                if l.contains_key(&k) {
                    continue;
                }
                let peek = l.peek(&k);
                prop_assert_eq!(l.check_n(&k, 0), peek, "{:?}: check_n(0) is the peek", alg);
                let check = l.check(&k);
                if check.allowed {
                    // A fresh key: nothing taken yet, the whole limit left.
                    prop_assert!(
                        peek.allowed && peek.remaining == peek.limit,
                        "{:?}: {:?}",
                        alg,
                        peek
                    );
                    prop_assert_eq!(peek.retry_after, None);
                } else {
                    // One permit on a fresh key is always allowed: this is the cap's refusal.
                    prop_assert!(deny);
                    prop_assert_eq!(peek, check, "{:?}: the peek says what the check meets", alg);
                    prop_assert!(check.retry_after.is_some() && check.remaining == 0);
                }
            }
            CapOp::TryFor(k, n, t) => {
                let before = tollgate::Clock::now(&clock);
                if l.try_acquire_n_for(&k, n, Duration::from_nanos(t)).is_err() {
                    prop_assert_eq!(
                        tollgate::Clock::now(&clock),
                        before,
                        "{:?}: slept, then failed",
                        alg
                    );
                }
            }
            CapOp::Advance(d) => clock.advance_nanos(d),
            CapOp::SetQuota => l.set_quota(q).unwrap(),
        }
        prop_assert!(l.len() <= 2);
    }
    Ok(())
}

proptest! {
    #[test]
    fn a_peek_at_the_cap_says_what_the_check_meets_on_every_algorithm(
        deny in any::<bool>(),
        ops in proptest::collection::vec(cap_op(), 1..50),
    ) {
        peek_agrees_at_the_cap(Gcra, deny, &ops)?;
        peek_agrees_at_the_cap(FixedWindow::new(), deny, &ops)?;
        peek_agrees_at_the_cap(SlidingWindow::new(4), deny, &ops)?;
        peek_agrees_at_the_cap(WeightedWindow, deny, &ops)?;
        peek_agrees_at_the_cap(SlidingLog, deny, &ops)?;
    }
}
