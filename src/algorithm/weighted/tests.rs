use std::time::Duration;

use super::*;

fn params(limit: u64, window: Nanos) -> WeightedParams {
    let q = Quota::new(limit, Duration::from_nanos(window)).unwrap();
    WeightedWindow.params(&q, 0).unwrap()
}

fn st(index: u64, prev: u64, cur: u64) -> State {
    State { index, prev, cur }
}

fn step(s: State, now: Nanos, n: u64, p: &WeightedParams) -> (Verdict, State) {
    let (v, store) = decide(s, now, n, p);
    (v, store.unwrap_or(s))
}

#[test]
fn the_weighted_inequality_exactly() {
    // L = 10, W = 100: window 1 at e = 30 weighs prev by 70/100.
    let p = params(10, 100);
    let s = st(1, 10, 0);
    let (v, s) = step(s, 130, 3, &p); // 10*70 + 3*100 = 1000 <= 1000
    assert_eq!((v.kind, v.remaining), (Kind::Allow, 0));
    assert_eq!(s, st(1, 10, 3));
    assert_eq!(v.reset_after, 170); // cur weighs nothing at the end of window 2 (300)
    let (v, _) = step(s, 130, 1, &p); // 700 + 400 > 1000: until prev weighs <= 600, at 140
    assert_eq!(v.kind, Kind::Deny { retry_after: 10 });
    assert_eq!(step(s, 139, 1, &p).0.kind, Kind::Deny { retry_after: 1 });
    assert_eq!(step(s, 140, 1, &p).0.kind, Kind::Allow);
    // remaining = floor((1000 - 10*60 - 300) / 100) = 1 at 140.
    assert_eq!(step(s, 140, 0, &p).0.remaining, 1);
    // remaining rounds the previous window's share up: at 131, 10*69 + 300 = 990 -> 0.
    assert_eq!(step(s, 131, 0, &p).0.remaining, 0);
}

#[test]
fn retry_in_the_next_window_when_the_current_count_is_the_obstacle() {
    let p = params(10, 100);
    // cur = 8 at 150: 8 + 3 > 10 whatever prev weighs; in window 2 cur becomes the weighted
    // one: 8*(100 - e') + 300 <= 1000 once e' >= 12.5, so e' = 13: at 213.
    let s = st(1, 0, 8);
    assert_eq!(step(s, 150, 3, &p).0.kind, Kind::Deny { retry_after: 63 });
    assert_eq!(step(s, 212, 3, &p).0.kind, Kind::Deny { retry_after: 1 });
    assert_eq!(step(s, 213, 3, &p).0.kind, Kind::Allow);
    // n = L: only once cur weighs nothing, at the start of window 3.
    let s = st(1, 0, 1);
    assert_eq!(step(s, 150, 10, &p).0.kind, Kind::Deny { retry_after: 150 });
    assert_eq!(step(s, 300, 10, &p).0.kind, Kind::Allow);
}

#[test]
fn fields_of_fresh_and_extreme_requests() {
    let p = params(10, 100);
    let (v, _) = step(State::default(), 55, 0, &p);
    assert_eq!((v.kind, v.remaining, v.reset_after), (Kind::Peek, 10, 0));
    let (v, _) = step(State::default(), 55, 11, &p);
    assert_eq!((v.kind, v.remaining), (Kind::ExceedsBurst, 10));
    let (v, s) = step(State::default(), 55, 10, &p);
    assert_eq!((v.kind, v.remaining, v.reset_after), (Kind::Allow, 0, 145));
    assert_eq!(s, st(0, 0, 10));
    let (v, store) = decide(s, MAX_NANOS + 1, 1, &p);
    assert_eq!((v.kind, store), (Kind::Never, None));
}

#[test]
fn a_later_stored_window_is_decided_in() {
    let p = params(10, 100);
    // Read the clock at 199, found window 2 written at 200: decided at 200 (e = 0).
    let (v, _) = step(st(2, 10, 0), 199, 1, &p);
    assert_eq!(v.kind, Kind::Deny { retry_after: 11 }); // prev weighs 90% at 210
    assert_eq!(v.reset_after, 101);
}

#[test]
fn cold_exactly_when_neither_count_weighs() {
    let p = params(10, 100);
    assert_eq!(cold_at(State::default(), &p), 0);
    assert_eq!(cold_at(st(3, 4, 0), &p), 400);
    assert_eq!(cold_at(st(3, 4, 1), &p), 500);
    let fresh = |now| decide(State::default(), now, 10, &p).0;
    for s in [st(3, 4, 0), st(3, 4, 1), st(3, 0, 2)] {
        let at = cold_at(s, &p);
        assert_eq!(decide(s, at, 10, &p).0, fresh(at), "{s:?}");
        assert_ne!(decide(s, at - 1, 10, &p).0, fresh(at - 1), "{s:?}");
    }
}

#[test]
fn words_round_trip_at_the_extremes() {
    let p = WeightedParams {
        limit: u64::from(u32::MAX),
        ..params(1, 1)
    };
    let max = u64::from(u32::MAX);
    // Windows of 1 ns: the largest index a clock reading up to MAX_NANOS can have, and one more.
    for index in [MAX_NANOS, MAX_NANOS + 1] {
        let s = st(index, max, max);
        assert_eq!(current(pack(s, &p), &p), s);
    }
    let q = Quota::new(u64::from(u32::MAX) + 1, Duration::from_secs(10)).unwrap();
    assert!(matches!(
        WeightedWindow.params(&q, 0),
        Err(QuotaError::Unsupported(_))
    ));
    // Near the end of time nothing overflows.
    let p = params(3, 7);
    let last = MAX_NANOS / 7;
    let (v, s) = step(st(last, 3, 0), MAX_NANOS, 3, &p);
    assert!(matches!(v.kind, Kind::Deny { .. }), "{v:?}");
    let (v, _) = step(s, MAX_NANOS, 0, &p);
    assert!(v.reset_after < 14);
}

#[test]
fn quota_changes_keep_the_counts_at_the_change() {
    let p0 = params(10, 100);
    let w = pack(st(2, 4, 6), &p0); // window [200, 300)
                                    // Same window length at 250: unchanged, under the new limit.
    let q = Quota::new(5, Duration::from_nanos(100)).unwrap();
    let p1 = WeightedWindow.next_params(&p0, &q, 250).unwrap();
    assert_eq!(current(w, &p1), st(2, 4, 6));
    // At 320 (window 3 of the old grid), for W = 1000: cur became prev.
    let q = Quota::new(10, Duration::from_nanos(1000)).unwrap();
    let p2 = WeightedWindow.next_params(&p0, &q, 320).unwrap();
    assert_eq!(current(w, &p2), st(0, 6, 0));
    // Two old windows later: nothing left.
    let p3 = WeightedWindow.next_params(&p0, &q, 400).unwrap();
    assert_eq!(current(w, &p3), State::default());
    assert_eq!(WeightedParams::from_words(p2.to_words()), p2);
    assert_eq!(current(0, &p2), State::default());
}

/// On the weighted counter: 1000 taken in a 1 ms window, then 1 per 18 ns and back
/// to 1000 per 1 ms at 1 ns. Both counts are carried whole (32-bit, whatever the window), so
/// nothing more passes before the window ends, direct and keyed; after it, the previous
/// window's 1000 still weigh by what the sliding window covers of it.
#[test]
fn counts_carried_twice_through_a_narrow_window_are_kept() {
    use crate::algorithm::tests::direct_and_keyed;
    use crate::{ManualClock, Quota};
    let wide = Quota::new(1000, Duration::from_millis(1)).unwrap();
    let narrow = Quota::new(1, Duration::from_nanos(18)).unwrap();
    let clock = ManualClock::new();
    let (direct, keyed) = direct_and_keyed(wide, &clock, WeightedWindow);
    assert!(direct.try_acquire_n(1000).is_ok());
    assert!(keyed.try_acquire_n(&1, 1000).is_ok());
    clock.set(1);
    for q in [narrow, wide] {
        direct.set_quota(q).unwrap();
        keyed.set_quota(q).unwrap();
    }
    for d in [direct.peek(), keyed.peek(&1)] {
        assert_eq!((d.remaining, d.reset_after.as_nanos()), (0, 1_999_999));
    }
    clock.set(999_999);
    assert!(!direct.try_acquire() && !keyed.try_acquire(&1));
    // A quarter into the next window, the previous one's 1000 weigh 750.
    clock.set(1_250_000);
    assert_eq!(direct.peek().remaining, 250);
    assert_eq!(keyed.peek(&1).remaining, 250);
}

/// A per-call count above the 32-bit counts is refused (it was capped to
/// `u32::MAX`), as the limiter's own quota is; nothing is taken.
#[test]
fn a_per_call_count_above_u32_is_an_error() {
    use crate::{ManualClock, Quota, RateLimiter};
    let l = RateLimiter::builder(Quota::per_second(10).unwrap())
        .clock(ManualClock::new())
        .algorithm(WeightedWindow)
        .unwrap()
        .build();
    let big = Quota::new(u64::from(u32::MAX) + 1, Duration::from_secs(10)).unwrap();
    assert!(matches!(
        l.check_n_with(1, big),
        Err(QuotaError::Unsupported(_))
    ));
    assert_eq!(l.peek().remaining, 10);
    let most = Quota::new(u64::from(u32::MAX), Duration::from_secs(10)).unwrap();
    let d = l.check_n_with(3, most).unwrap();
    assert_eq!((d.allowed, d.limit), (true, u64::from(u32::MAX)));
    assert_eq!(d.remaining, u64::from(u32::MAX) - 3);
    let p = WeightedWindow::inert(&params(3, 100));
    assert_eq!(decide(st(0, 1, 1), 10, 1, &p).1, None);
}

/// The decision's roll to `now`'s window without a division is the division's: every stored
/// window (empty or not, at the end of time or not) against every `now` around its end, the
/// next window's end and far later, windows of 1 ns to `MAX_NANOS`.
#[test]
fn rolling_without_a_division_is_rolling_by_the_division() {
    let windows = [
        1,
        2,
        3,
        7,
        1_000,
        1_000_000_007,
        MAX_NANOS / 3,
        MAX_NANOS,
        u64::MAX,
    ];
    for w in windows {
        let last = u64::MAX / w;
        for index in [
            0,
            1,
            2,
            5,
            last.saturating_sub(2),
            last.saturating_sub(1),
            last,
        ] {
            for s in [
                st(index, 0, 0),
                st(index, 3, 0),
                st(index, 0, 4),
                st(index, 9, 8),
            ] {
                let end = index.saturating_add(1).saturating_mul(w);
                let nows = [0, 1, end.saturating_sub(1), end, end.saturating_add(1)]
                    .into_iter()
                    .chain([
                        end.saturating_add(w).saturating_sub(1),
                        end.saturating_add(w),
                    ])
                    .chain([
                        end.saturating_add(w).saturating_add(1),
                        MAX_NANOS,
                        u64::MAX - 1,
                    ])
                    .chain([u64::MAX]);
                for now in nows {
                    assert_eq!(
                        rolled_to(s, now, w, u64::MAX / w),
                        rolled(s, now / w),
                        "{s:?} at {now}, W = {w}"
                    );
                }
            }
        }
    }
}

proptest::proptest! {
    /// The same, on random words and instants: near the stored window's end and anywhere.
    #[test]
    fn rolling_without_a_division_matches_on_random_states(
        w in 1u64..=MAX_NANOS,
        index in 0u64..=u64::MAX,
        prev in 0u64..4,
        cur in 0u64..4,
        near in 0u64..4_000,
        far in proptest::num::u64::ANY,
        pick in 0u8..3,
    ) {
        let index = index % (u64::MAX / w).max(1);
        let s = st(index, prev, cur);
        let end = index.saturating_add(1).saturating_mul(w);
        let now = match pick {
            0 => end.saturating_sub(2_000).saturating_add(near),
            1 => end.saturating_add(w).saturating_sub(2_000).saturating_add(near),
            _ => far,
        };
        proptest::prop_assert_eq!(rolled_to(s, now, w, u64::MAX / w), rolled(s, now / w));
    }
}
