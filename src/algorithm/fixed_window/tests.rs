use std::time::{Duration, UNIX_EPOCH};

use super::*;
use crate::algorithm::tests::direct_and_keyed;
use crate::{ManualClock, RateLimiter};

fn params(limit: u64, window: Nanos) -> FixedParams {
    let q = Quota::new(limit, Duration::from_nanos(window)).unwrap();
    FixedWindow::new().params(&q, 0).unwrap()
}

/// Runs `decide` the way the cell does: the verdict, and the state after it.
fn step(s: (u64, u64), now: Nanos, n: u64, p: &FixedParams) -> (Verdict, (u64, u64)) {
    let (v, store) = decide(s, now, n, p);
    (v, store.unwrap_or(s))
}

#[test]
fn counts_per_window_and_reports_every_field() {
    let p = params(3, 100);
    let s = (0, 0);
    let (v, s) = step(s, 10, 1, &p);
    assert_eq!((v.kind, v.remaining, v.reset_after), (Kind::Allow, 2, 90));
    let (v, s) = step(s, 20, 2, &p);
    assert_eq!((v.kind, v.remaining, v.reset_after), (Kind::Allow, 0, 80));
    let (v, s) = step(s, 99, 1, &p);
    assert_eq!(v.kind, Kind::Deny { retry_after: 1 });
    assert_eq!((v.remaining, v.reset_after), (0, 1));
    // Exactly on the boundary: a new window.
    let (v, s) = step(s, 100, 3, &p);
    assert_eq!((v.kind, v.remaining, v.reset_after), (Kind::Allow, 0, 100));
    assert_eq!(s, (1, 3));
    let (v, _) = step(s, 150, 0, &p);
    assert_eq!((v.kind, v.remaining, v.reset_after), (Kind::Peek, 0, 50));
    let (v, _) = step(s, 150, 4, &p);
    assert_eq!(v.kind, Kind::ExceedsBurst);
    assert_eq!(v.decision().retry_after, None);
    // A fresh key still reports the window's end.
    let (v, _) = step((0, 0), 250, 0, &p);
    assert_eq!((v.remaining, v.reset_after), (3, 50));
}

#[test]
fn a_later_stored_window_is_decided_in() {
    // A decision that read the clock at 99 finds window 1 (written at 100 by another thread).
    let p = params(3, 100);
    let (v, s) = step((1, 3), 99, 1, &p);
    assert_eq!(v.kind, Kind::Deny { retry_after: 101 });
    assert_eq!(s, (1, 3));
    let (v, s) = step((1, 2), 99, 1, &p);
    assert_eq!((v.kind, s), (Kind::Allow, (1, 3)));
}

#[test]
fn past_the_end_of_time_nothing_is_counted() {
    let p = params(3, 100);
    let (v, store) = decide((0, 0), MAX_NANOS + 1, 1, &p);
    assert_eq!((v.kind, store), (Kind::Never, None));
    assert_eq!(
        v.result(1),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    let (v, _) = decide((0, 0), u64::MAX, 1, &p);
    assert_eq!(v.kind, Kind::Never);
}

#[test]
fn words_hold_the_largest_index_and_count() {
    for (limit, window) in [(1, 1), (1, 2), (2, 4), (1_000, 1_000_000), (1, MAX_NANOS)] {
        let p = params(limit, window);
        let max_index = (MAX_NANOS + p.offset) / window;
        let w = pack((max_index, limit), &p);
        assert_eq!(current(w, &p), (max_index, limit), "L={limit} W={window}");
        assert_eq!(w & GEN, 0);
    }
    // One permit per ns in windows of 4 shifted by 3 (epoch-aligned): the largest index
    // needs one more bit, and the count no longer fits beside it.
    let q = Quota::new(4, Duration::from_nanos(4)).unwrap();
    let shifted = FixedWindow::epoch_aligned_from(UNIX_EPOCH + Duration::from_nanos(3));
    assert!(matches!(
        shifted.params(&q, 0),
        Err(QuotaError::Unsupported(_))
    ));
    assert!(FixedWindow::new().params(&q, 0).is_ok());
}

#[test]
fn cold_exactly_when_the_window_ends() {
    let p = params(3, 100);
    assert_eq!(cold_at((0, 0), &p), 0);
    assert_eq!(cold_at((4, 1), &p), 500);
    // At 500 the state decides like a fresh key, at 499 it does not.
    let fresh = |now| decide((0, 0), now, 3, &p).0;
    assert_eq!(decide((4, 1), 500, 3, &p).0, fresh(500));
    assert_ne!(decide((4, 1), 499, 3, &p).0, fresh(499));
}

#[test]
fn quota_changes_keep_the_current_windows_count() {
    let alg = FixedWindow::new();
    let p0 = params(10, 100);
    let w = pack((2, 7), &p0); // 7 permits in window 2 = [200, 300)
                               // Same window, tighter limit, at 250.
    let q = Quota::new(5, Duration::from_nanos(100)).unwrap();
    let p1 = alg.next_params(&p0, &q, 250).unwrap();
    assert_eq!(current(w, &p1), (2, 7));
    let (v, _) = decide(current(w, &p1), 260, 1, &p1);
    assert_eq!((v.kind, v.remaining), (Kind::Deny { retry_after: 40 }, 0));
    // Another window length (and so another layout): the count moves to the window holding
    // the change, [0, 1000) for W = 1000 at 250, and is dropped when it ends.
    let q = Quota::new(10, Duration::from_nanos(1000)).unwrap();
    let p2 = alg.next_params(&p0, &q, 250).unwrap();
    assert_eq!(current(w, &p2), (0, 7));
    let (v, _) = decide(current(w, &p2), 999, 4, &p2);
    assert_eq!(v.kind, Kind::Deny { retry_after: 1 });
    let (v, _) = decide(current(w, &p2), 1000, 10, &p2);
    assert_eq!(v.kind, Kind::Allow);
    // A count from a window already over at the change is forgotten.
    let p3 = alg.next_params(&p0, &q, 300).unwrap();
    assert_eq!(current(w, &p3), (0, 0));
    // A count the new layout cannot hold is carried as full (the all-ones count): it refuses
    // until the window ends (and stays full if carried again: see below).
    let big = params(1_000_000, 1_000_000);
    let w = pack((0, 999_999), &big);
    let q = Quota::new(2, Duration::from_nanos(4)).unwrap();
    let small = alg.next_params(&big, &q, 1).unwrap();
    let (k, c) = current(w, &small);
    assert_eq!((k, c), (0, capacity(small.count_bits)));
    assert_eq!(
        decide((k, c), 1, 1, &small).0.kind,
        Kind::Deny { retry_after: 3 }
    );
    // Fresh words read as empty in every generation.
    assert_eq!(current(0, &p1), (0, 0));
    assert_eq!(current(GEN, &p0), (0, 0));
}

#[test]
fn params_survive_the_sequence_lock_words() {
    let alg = FixedWindow::epoch_aligned_from(UNIX_EPOCH + Duration::from_secs(90));
    let q = Quota::per_minute(100).unwrap();
    let p0 = alg.params(&q, 0).unwrap();
    let p = alg
        .next_params(&p0, &Quota::per_hour(7).unwrap(), 5_000)
        .unwrap();
    assert_eq!(FixedParams::from_words(p.to_words()), p);
    assert!(p.generation && p0.offset == 30_000_000_000);
}

fn limiter(q: Quota, clock: &ManualClock, alg: FixedWindow) -> RateLimiter<FixedWindow> {
    RateLimiter::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build()
}

#[test]
fn two_limits_pass_across_a_boundary() {
    // The fixed window's known weakness, shown: L = 100 per minute, yet 200 in 2 ms.
    let clock = ManualClock::new();
    let l = limiter(Quota::per_minute(100).unwrap(), &clock, FixedWindow::new());
    clock.set(60_000_000_000 - 1_000_000);
    let first = (0..150).filter(|_| l.try_acquire()).count();
    clock.advance(Duration::from_millis(2));
    let second = (0..150).filter(|_| l.try_acquire()).count();
    assert_eq!((first, second), (100, 100));
}

#[test]
fn epoch_aligned_windows_end_on_wall_clock_boundaries() {
    // A clock whose origin is 10:00:45 UTC: the first per-minute window ends 15 s later.
    let clock = ManualClock::new();
    let origin = UNIX_EPOCH + Duration::from_secs(1_700_000_000 / 60 * 60 + 45);
    let alg = FixedWindow::epoch_aligned_from(origin);
    let l = limiter(Quota::per_minute(2).unwrap(), &clock, alg);
    assert_eq!(l.check_n(2).reset_after, Duration::from_secs(15));
    clock.advance(Duration::from_secs(15) - Duration::from_nanos(1));
    assert!(!l.try_acquire());
    clock.advance_nanos(1);
    assert!(l.try_acquire_n(2).is_ok());
    assert_eq!(l.peek().reset_after, Duration::from_secs(60));
}

#[test]
fn month_long_and_century_long_windows_do_not_overflow() {
    let clock = ManualClock::new();
    let month = Quota::new(10_000, Duration::from_secs(30 * 86_400)).unwrap();
    let alg = FixedWindow::epoch_aligned_from(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let l = limiter(month, &clock, alg);
    assert!(l.try_acquire_n(10_000).is_ok());
    let d = l.check();
    let until = d.retry_after.unwrap();
    // 1_700_000_000 s is 19_675 days + 80_000 s; windows of 30 days from the epoch.
    let into = 1_700_000_000 % (30 * 86_400);
    assert_eq!(until, Duration::from_secs(30 * 86_400 - into));
    clock.advance(until);
    assert!(l.try_acquire_n(10_000).is_ok());

    // A window as long as time itself, at the end of time.
    let q = Quota::new(3, Duration::from_nanos(MAX_NANOS)).unwrap();
    let l = limiter(q, &clock, FixedWindow::epoch_aligned());
    clock.set(MAX_NANOS);
    assert!(l.try_acquire_n(3).is_ok());
    assert!(!l.check().allowed);
    clock.set(u64::MAX);
    // Past MAX_NANOS nothing is granted and nothing wraps.
    assert_eq!(
        l.try_acquire_n(1),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
}

/// 1000 taken in a 1 ms window; at 1 ns the quota goes to 1 per 18 ns and back
/// to 1000 per 1 ms. The count is carried through a layout too narrow to hold it, and must
/// come back whole: nothing more passes before the window ends (direct and keyed, windows
/// from the clock's origin or the epoch).
#[test]
fn a_count_carried_twice_through_a_narrow_window_is_not_lowered() {
    let wide = Quota::new(1000, Duration::from_millis(1)).unwrap();
    let narrow = Quota::new(1, Duration::from_nanos(18)).unwrap();
    // An origin 0.3 ms into a wall-clock millisecond: the window holding 0 ends at 0.7 ms.
    let shifted = FixedWindow::epoch_aligned_from(UNIX_EPOCH + Duration::from_nanos(300_000));
    for (alg, end) in [(FixedWindow::new(), 1_000_000), (shifted, 700_000)] {
        let clock = ManualClock::new();
        let (direct, keyed) = direct_and_keyed(wide, &clock, alg);
        assert!(direct.try_acquire_n(1000).is_ok());
        assert!(keyed.try_acquire_n(&1, 1000).is_ok());
        clock.set(1);
        direct.set_quota(narrow).unwrap();
        keyed.set_quota(narrow).unwrap();
        direct.set_quota(wide).unwrap();
        keyed.set_quota(wide).unwrap();
        for d in [direct.peek(), keyed.peek(&1)] {
            assert_eq!(
                (d.remaining, d.reset_after.as_nanos()),
                (0, end - 1),
                "{alg:?}"
            );
        }
        clock.set(end as u64 - 1);
        assert!(!direct.try_acquire(), "{alg:?}");
        assert!(!keyed.try_acquire(&1), "{alg:?}");
        // A sweep right before the window ends keeps the key (it is not cold yet).
        assert_eq!(keyed.sweep_now(), 0);
        assert!(!keyed.try_acquire(&1), "{alg:?}");
        clock.set(end as u64);
        assert!(direct.try_acquire_n(1000).is_ok());
        assert!(keyed.try_acquire_n(&1, 1000).is_ok());
    }
    // Windows on the wall clock read at build and at each change (the manual clock stands
    // still meanwhile, so the grid may move by the time that passed): still nothing more.
    let clock = ManualClock::new();
    let direct = limiter(wide, &clock, FixedWindow::epoch_aligned());
    assert!(direct.try_acquire_n(1000).is_ok());
    clock.set(1);
    direct.set_quota(narrow).unwrap();
    direct.set_quota(wide).unwrap();
    let d = direct.peek();
    assert_eq!(d.remaining, 0);
    assert!(!direct.try_acquire());
    clock.advance(d.reset_after - Duration::from_nanos(1));
    assert!(!direct.try_acquire());
}

#[test]
fn a_saturated_count_stays_full_when_carried_again() {
    let alg = FixedWindow::new();
    let big = params(1_000_000, 1_000_000);
    let w = pack((0, 999_999), &big);
    let q = Quota::new(2, Duration::from_nanos(4)).unwrap();
    let small = alg.next_params(&big, &q, 1).unwrap();
    let full = current(w, &small);
    assert_eq!(full, (0, capacity(small.count_bits)));
    // Back to the wide layout, in the same window: the count is not lowered to the narrow
    // word's capacity.
    let q = Quota::new(1_000_000, Duration::from_nanos(1_000_000)).unwrap();
    let back = alg.next_params(&small, &q, 2).unwrap();
    let (k, c) = current(pack(full, &small), &back);
    assert_eq!((k, c), (0, capacity(back.count_bits)));
    let (v, _) = decide((k, c), 2, 1, &back);
    assert_eq!(
        (v.kind, v.remaining),
        (
            Kind::Deny {
                retry_after: 999_998
            },
            0
        )
    );
    // A count the new word can hold exactly is carried exactly.
    let (k, c) = current(
        pack((0, 999_999), &big),
        &alg.next_params(&big, &q, 2).unwrap(),
    );
    assert_eq!((k, c), (0, 999_999));
}

/// A per-call count the key's word cannot hold beside the limiter's window index
/// is refused with a typed error (it was silently capped to the word: `limit` 1023 for 5000),
/// direct and keyed, and nothing is taken; a count the word holds is the call's limit.
#[test]
fn a_per_call_count_the_word_cannot_hold_is_an_error() {
    let clock = ManualClock::new();
    let q = |l, w| Quota::new(l, Duration::from_nanos(w)).unwrap();
    let (direct, keyed) = direct_and_keyed(q(1000, 1000), &clock, FixedWindow::new());
    let refused = |r: Result<Decision, QuotaError>| matches!(r, Err(QuotaError::Unsupported(_)));
    assert!(refused(direct.check_n_with(5000, q(5000, 5000))));
    assert!(refused(keyed.check_n_with(&1, 5000, q(5000, 5000))));
    assert!(refused(direct.check_n_with(0, q(1024, 5000))));
    assert!(refused(keyed.check_n_with(&1, 1, q(1024, 5000))));
    // A burst other than the count means nothing to a window: refused, not read as the count.
    assert!(refused(
        direct.check_n_with(1, q(10, 1000).with_burst(3).unwrap())
    ));
    // Nothing was taken, and no key was stored.
    assert_eq!(direct.peek().remaining, 1000);
    assert!(keyed.is_empty());
    // The largest count the word holds (1023) is the call's limit, exactly.
    let d = direct.check_n_with(1023, q(1023, 5000)).unwrap();
    assert_eq!((d.allowed, d.limit, d.remaining), (true, 1023, 0));
    let d = keyed.check_n_with(&1, 5, q(1023, 2000)).unwrap();
    assert_eq!((d.allowed, d.limit, d.remaining), (true, 1023, 1018));
    assert_eq!(direct.peek().remaining, 0);

    // L = 1, W = 1: the word holds a count of 1, so a call cannot count to 2 there.
    let one = limiter(q(1, 1), &clock, FixedWindow::new());
    assert!(refused(one.check_n_with(0, q(2, 2))));
    let d = one.check_n_with(1, q(1, 7)).unwrap();
    assert_eq!((d.allowed, d.limit, d.remaining), (true, 1, 0));
}

/// A refused per-call quota decides on inert parameters: nothing is ever stored under them.
#[test]
fn inert_parameters_store_nothing() {
    let p = FixedWindow::inert(&params(3, 100));
    for n in [0, 1, 3] {
        assert_eq!(decide((0, 0), 10, n, &p).1, None);
        assert_eq!(decide((0, 2), 10, n, &p).1, None);
    }
}

/// `decide` with `/` where it multiplies by the window's reciprocal: the window in force found
/// by dividing whenever the stored one has ended (the plain model of "which window holds
/// `now`"). Both forms of the rule are checked against it: the branch (`decide`, the direct
/// limiter's) and the selects (`decide_by_selects`, the keyed tables').
fn decide_dividing(
    s: (u64, u64),
    now: Nanos,
    n: u64,
    p: &FixedParams,
) -> (Verdict, Option<(u64, u64)>) {
    let (index, count) = s;
    let now_index = now.saturating_add(p.offset) / p.window;
    let (k, c) = if count > 0 && index >= now_index {
        (index, count)
    } else {
        (now_index, 0)
    };
    // The verdict in the window found is the rule's own step: what this model checks is
    // which window that is.
    decide_in(k, c, window_end(k, p), now, n, p)
}

/// The rule's two forms, by name, each with the states it is defined on: the branch form on
/// any, the selects on those `current` returns (an empty count at index 0).
type Rule = fn((u64, u64), Nanos, u64, &FixedParams) -> (Verdict, Option<(u64, u64)>);
type Defined = fn((u64, u64)) -> bool;
const FORMS: [(&str, Rule, Defined); 2] = [
    ("branch", decide, |_| true),
    ("selects", decide_by_selects, |(index, count)| {
        count > 0 || index == 0
    }),
];

fn shifted_params(limit: u64, window: Nanos, offset: Nanos) -> FixedParams {
    FixedParams {
        offset,
        count_bits: count_bits(window, offset),
        ..params(limit, window)
    }
}

#[test]
fn both_forms_find_the_window_as_dividing_does_at_every_edge() {
    for (window, offset) in [
        (1, 0),
        (2, 1),
        (3, 2),
        (100, 0),
        (100, 37),
        (MAX_NANOS, 0),
        (MAX_NANOS, MAX_NANOS - 1),
    ] {
        let p = shifted_params(1, window, offset);
        let max_index = (MAX_NANOS + offset) / window;
        for index in [0, 1, 2, max_index.saturating_sub(1), max_index] {
            let end = window_end(index, &p);
            let mut instants = vec![0, 1, MAX_NANOS, MAX_NANOS + 1, u64::MAX - 1, u64::MAX];
            for base in [
                end,
                end.saturating_add(window),
                end.saturating_add(2 * window),
            ] {
                for d in 0..3 {
                    instants.push(base.saturating_sub(d));
                    instants.push(base.saturating_add(d));
                }
            }
            for now in instants {
                for (count, n) in [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)] {
                    let s = (index, count);
                    let model = decide_dividing(s, now, n, &p);
                    for (form, rule, _) in FORMS.iter().filter(|f| f.2(s)) {
                        assert_eq!(
                            rule(s, now, n, &p),
                            model,
                            "{form}: {s:?} at {now}, n = {n}, W = {window}, offset = {offset}"
                        );
                    }
                }
            }
        }
    }
}

proptest::proptest! {
    /// The same on random quotas, offsets, states and instants: near the stored window's end,
    /// near the next one's, and anywhere.
    #[test]
    fn both_forms_find_the_window_as_dividing_does(
        window in 1u64..=MAX_NANOS,
        offset in proptest::num::u64::ANY,
        limit in 1u64..4,
        index in proptest::num::u64::ANY,
        count in 0u64..5,
        n in 0u64..5,
        near in 0u64..4_000,
        far in proptest::num::u64::ANY,
        pick in 0u8..3,
    ) {
        let offset = offset % window;
        let p = shifted_params(limit.min(capacity(count_bits(window, offset))), window, offset);
        let index = index % ((MAX_NANOS + offset) / window + 1);
        let end = window_end(index, &p);
        let now = match pick {
            0 => end.saturating_sub(2_000).saturating_add(near),
            1 => end.saturating_add(window).saturating_sub(2_000).saturating_add(near),
            _ => far,
        };
        let count = count.min(capacity(p.count_bits));
        // Every other case an empty count at index 0, the state the selects are defined on.
        let s = if count == 0 && far % 2 == 0 { (0, 0) } else { (index, count) };
        let model = decide_dividing(s, now, n, &p);
        for (form, rule, _) in FORMS.iter().filter(|f| f.2(s)) {
            proptest::prop_assert_eq!(rule(s, now, n, &p), model, "{}", form);
        }
    }
}

proptest::proptest! {
    /// Through the limiters: a keyed limiter (the selects, `check_keyed`) and a direct one (the
    /// branch, `check`) on one clock decide every call alike, across a quota change (a word a
    /// generation behind) and window ends.
    #[test]
    fn keyed_and_direct_limiters_decide_alike(
        limit in 1u64..5,
        window in 8u64..60,
        steps in proptest::collection::vec((0u64..60, 0u64..6, 0u8..8), 1..60),
    ) {
        let clock = ManualClock::new();
        let q = |l: u64, w: u64| Quota::new(l, Duration::from_nanos(w)).unwrap();
        let (direct, keyed) = direct_and_keyed(q(limit, window), &clock, FixedWindow::new());
        for (advance, n, op) in steps {
            clock.advance_nanos(advance);
            match op {
                0 => {
                    let (l, w) = (limit + n % 3, window + advance % 7 + 1);
                    direct.set_quota(q(l, w)).unwrap();
                    keyed.set_quota(q(l, w)).unwrap();
                }
                1 => proptest::prop_assert_eq!(direct.try_acquire(), keyed.try_acquire(&1)),
                2 => proptest::prop_assert_eq!(direct.try_acquire_n(n), keyed.try_acquire_n(&1, n)),
                3 => proptest::prop_assert_eq!(direct.peek(), keyed.peek(&1)),
                _ => proptest::prop_assert_eq!(direct.check_n(n), keyed.check_n(&1, n)),
            }
        }
    }
}

proptest::proptest! {
    /// What the selects rely on: every state `current` returns holds an empty count only at
    /// index 0, for a word written in this quota generation or the previous one (any layout).
    #[test]
    fn current_returns_an_empty_count_only_at_index_0(
        w0 in 1u64..1_000,
        w1 in 1u64..1_000,
        index in 0u64..1_000,
        count in 0u64..8,
        at in 0u64..1_000_000,
    ) {
        let p0 = params(1, w0);
        let p1 = FixedWindow::new().next_params(&p0, &Quota::new(1, Duration::from_nanos(w1)).unwrap(), at).unwrap();
        let word = pack((index, count.min(capacity(p0.count_bits))), &p0);
        for p in [&p0, &p1] {
            let (k, c) = current(word, p);
            proptest::prop_assert!(c > 0 || k == 0, "{:?}", (k, c));
        }
    }
}
