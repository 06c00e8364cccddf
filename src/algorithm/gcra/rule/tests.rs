//! Every rule of `docs/design.md` sections "2. Quota and GCRA" and "3. Reservations, waiting,
//! cancel" with exact nanosecond expectations, plus holes and re-scaling.

use super::*;
use crate::decision::RefusedBy;

/// T = 10 ns, b = 3, tau = 30 ns, generation 0.
fn q() -> GcraParams {
    params(10, 3)
}

fn params(t: Nanos, burst: u64) -> GcraParams {
    GcraParams::new(t, burst, 0, t, 0)
}

fn kind(tat: Nanos, now: Nanos, n: u64) -> (Kind, Option<Nanos>) {
    let v = check(tat, now, n, &q());
    (v.kind, v.store)
}

fn booked(b: Result<Booking<Ticket>, AcquireError>) -> Ticket {
    match b {
        Ok(Booking::Booked { ticket, ready_at }) => {
            assert_eq!(ticket.ready_at, ready_at);
            ticket
        }
        other => panic!("expected a booking, got {other:?}"),
    }
}

#[test]
fn fresh_key_admits_the_whole_burst_then_denies() {
    let (mut tat, now) = (0, 1_000);
    for k in 1..=3 {
        let (kind, store) = kind(tat, now, 1);
        assert_eq!((kind, store), (Kind::Allow, Some(now + 10 * k)));
        tat = store.unwrap();
    }
    assert_eq!(kind(tat, now, 1), (Kind::Deny { retry_after: 10 }, None));
}

#[test]
fn allow_at_equal_to_now_is_allowed() {
    // new_tat = 1030 + 10 = 1040, allow_at = 1010 = now.
    assert_eq!(check(1_030, 1_010, 1, &q()).store, Some(1_040));
    // one nanosecond earlier it is denied, retry after exactly 1 ns.
    assert_eq!(
        check(1_030, 1_009, 1, &q()).kind,
        Kind::Deny { retry_after: 1 }
    );
}

#[test]
fn n_equal_to_burst_from_full_is_allowed_and_n_above_is_never() {
    assert_eq!(kind(0, 500, 3), (Kind::Allow, Some(530)));
    assert_eq!(kind(0, 500, 4), (Kind::ExceedsBurst, None));
    assert_eq!(kind(0, 500, u64::MAX), (Kind::ExceedsBurst, None));
    assert_eq!(
        check(0, 500, 4, &q()).into_result(4),
        Err(AcquireError::ExceedsBurst {
            requested: 4,
            burst: 3
        })
    );
}

#[test]
fn n_zero_is_a_peek_even_when_in_debt() {
    assert_eq!(kind(0, 500, 0), (Kind::Peek, None));
    // tat far beyond now + tau (reservations can do that): still a peek, nothing stored.
    let v = check(10_000, 500, 0, &q());
    assert_eq!((v.kind, v.store, v.tail), (Kind::Peek, None, 10_000));
    let d = v.decision(500);
    assert!(d.allowed);
    assert_eq!(d.remaining, 0);
    assert_eq!(d.reset_after, Duration::from_nanos(9_500));
}

#[test]
fn decision_fields_follow_redis_cell() {
    // Allowed: t = new_tat = 520, debt 20, remaining floor((30-20)/10) = 1.
    let d = check(510, 500, 1, &q()).decision(500);
    assert_eq!(
        d,
        Decision {
            allowed: true,
            limit: 3,
            remaining: 1,
            retry_after: None,
            reset_after: Duration::from_nanos(20),
            refused_by: None,
        }
    );
    // Denied: t = max(tat, now) = 535, debt 35 > tau, remaining 0, retry = 535+10-30-500 = 15.
    let d = check(535, 500, 1, &q()).decision(500);
    assert_eq!(
        d,
        Decision {
            allowed: false,
            limit: 3,
            remaining: 0,
            retry_after: Some(Duration::from_nanos(15)),
            reset_after: Duration::from_nanos(35),
            refused_by: Some(RefusedBy::Quota),
        }
    );
    // Partial interval: debt 5 -> remaining floor(25/10) = 2.
    let d = check(0, 500, 0, &q()).decision(500);
    assert_eq!((d.remaining, d.reset_after), (3, Duration::ZERO));
    let d = check(505, 500, 0, &q()).decision(500);
    assert_eq!(d.remaining, 2);
    // Exceeds burst: no retry_after.
    let d = check(0, 500, 9, &q()).decision(500);
    assert!(!d.allowed && d.retry_after.is_none() && d.exceeds_burst());
}

#[test]
fn a_denied_decision_is_self_consistent_everywhere() {
    // Whatever the state, a denial of n reports fewer than n remaining, and a retry_after
    // after which the same check is allowed.
    for tat in [0u64, 5, 29, 30, 31, 45, 1_000] {
        for n in 1..=3 {
            let v = check(tat, 0, n, &q());
            let d = v.decision(0);
            if !d.allowed {
                assert!(d.remaining < n, "tat {tat} n {n}: {d:?}");
                let retry = d.retry_after.expect("a denial within the burst can retry");
                let at = u64::try_from(retry.as_nanos()).unwrap();
                assert!(check(tat, at, n, &q()).allowed(), "tat {tat} n {n}");
                assert!(!check(tat, at - 1, n, &q()).allowed(), "tat {tat} n {n}");
            }
        }
    }
}

#[test]
fn the_end_of_time_denies_for_good_and_says_so() {
    let max = MAX_NANOS;
    // Room for exactly one more interval: allowed, stores MAX.
    assert_eq!(check(max - 10, max - 10, 1, &q()).store, Some(max));
    // From a stored MAX, nothing more fits: never granted, nothing stored, and the decision
    // says so consistently (no retry, nothing remaining).
    let v = check(max, max - 5, 1, &q());
    assert_eq!((v.kind, v.store), (Kind::Never, None));
    let d = v.decision(max - 5);
    assert_eq!((d.allowed, d.remaining, d.retry_after), (false, 0, None));
    assert_eq!(
        v.into_result(1),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    // A clock past the end: the same.
    let d = check(0, u64::MAX, 1, &q()).decision(u64::MAX);
    assert_eq!((d.allowed, d.remaining, d.retry_after), (false, 0, None));
    // Reserve refuses what it cannot represent.
    assert_eq!(
        reserve(max, max, 1, &q(), None),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    assert_eq!(
        reserve(0, 0, u64::MAX, &q(), None),
        Err(AcquireError::Unrepresentable {
            requested: u64::MAX
        })
    );
    // The largest tolerance: tau = MAX_NANOS, T = 1.
    let huge = params(1, MAX_NANOS);
    assert_eq!(check(0, 0, MAX_NANOS, &huge).store, Some(MAX_NANOS));
    assert_eq!(check(0, 0, 0, &huge).decision(0).remaining, MAX_NANOS);
}

#[test]
fn reserve_stores_unconditionally_and_reports_ready_time() {
    // Full bucket: ready now (the stretch ended 20 ns before the tolerance runs out).
    let t = booked(reserve(0, 1_000, 1, &q(), None));
    assert_eq!(
        t,
        Ticket {
            start: 1_000,
            end: 1_010,
            ready_at: 1_000,
            generation: 0
        }
    );
    assert_eq!(t.wait_from(1_000), 0);
    // In debt: tat 1_040, new 1_050, ready 1_020, wait 20.
    let t = booked(reserve(1_040, 1_000, 1, &q(), None));
    assert_eq!((t.end, t.ready_at, t.wait_from(1_000)), (1_050, 1_020, 20));
    // n > burst waits (n - b) * T from a full bucket.
    let t = booked(reserve(0, 1_000, 5, &q(), None));
    assert_eq!(t.wait_from(1_000), 20);
    // n = 0 books nothing.
    assert_eq!(reserve(1_040, 1_000, 0, &q(), None), Ok(Booking::Now));
}

#[test]
fn timeout_reserve_never_reserves_past_the_timeout() {
    assert!(reserve(1_040, 1_000, 1, &q(), Some(20)).is_ok()); // wait == timeout: ok
    assert_eq!(
        reserve(1_040, 1_000, 1, &q(), Some(19)),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_nanos(20)
        })
    );
    // Timeout zero is the non-blocking check, for n > burst too (it reports the wait).
    assert!(reserve(0, 1_000, 3, &q(), Some(0)).is_ok());
    assert_eq!(
        reserve(0, 1_000, 4, &q(), Some(0)),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_nanos(10)
        })
    );
}

#[test]
fn cancel_of_the_latest_reservation_moves_the_tail_back_over_it() {
    let t = booked(reserve(1_040, 1_000, 2, &q(), None)); // (1_040, 1_060], ready 1_030
    assert_eq!(refund(1_060, &t, 1_000, &q()), Refund::Tail(1_040));
    // Also when it was ready at once: reserve, then decide not to use it.
    let t = booked(reserve(0, 1_000, 1, &q(), None)); // (1_000, 1_010], ready now
    assert_eq!(refund(1_010, &t, 1_000, &q()), Refund::Tail(1_000));
    // Also after its ready time, as long as part of it is ahead of now.
    assert_eq!(refund(1_010, &t, 1_005, &q()), Refund::Tail(1_000));
}

#[test]
fn cancel_of_a_non_latest_reservation_leaves_a_hole() {
    let a = booked(reserve(1_040, 1_000, 2, &q(), None)); // (1_040, 1_060]
    let b = booked(reserve(a.end, 1_000, 1, &q(), None)); // (1_060, 1_070]
                                                          // b is booked behind a: lowering the tail would hand b's stretch out twice; a's stretch
                                                          // becomes a hole instead.
    assert_eq!(refund(b.end, &a, 1_000, &q()), Refund::Hole(1_040, 1_060));
    // A hole starts no earlier than now: the past is gone.
    assert_eq!(refund(b.end, &a, 1_050, &q()), Refund::Hole(1_050, 1_060));
    // Entirely in the past, or from another quota generation: nothing.
    assert_eq!(refund(b.end, &a, 1_060, &q()), Refund::Nothing);
    let later = GcraParams {
        generation: 1,
        ..q()
    };
    assert_eq!(refund(b.end, &a, 1_000, &later), Refund::Nothing);
    // Zero permits: nothing.
    assert_eq!(
        refund(b.end, &Ticket::nothing(1_000), 1_000, &q()),
        Refund::Nothing
    );
}

#[test]
fn holes_are_filled_before_the_tail_by_checks_and_reservations() {
    // Schedule (1_000, 1_070]; a cancelled stretch (1_010, 1_030] in the middle.
    let mut holes = Holes::new(0);
    holes.give(1_010, 1_030);
    // At 1_000 the window is (1_000, 1_030]: a check of 2 fits the hole exactly.
    let v = check_holey(1_070, &mut holes, 1_000, 2, &q());
    assert_eq!((v.kind, v.store, v.tail), (Kind::Allow, None, 1_070));
    assert!(holes.is_empty());
    // Again: nothing left; denied, retry when the tail's window opens.
    let v = check_holey(1_070, &mut holes, 1_000, 1, &q());
    assert_eq!(v.kind, Kind::Deny { retry_after: 50 });

    // A reservation takes the hole's stretch and is ready when it is, not at the tail's.
    let mut holes = Holes::new(0);
    holes.give(1_040, 1_060);
    let t = booked(reserve_holey(1_070, &mut holes, 1_000, 1, &q(), None));
    assert_eq!((t.start, t.end, t.ready_at), (1_040, 1_050, 1_020));
    assert_eq!(holes.spans(), [(1_050, 1_060)]);
    // Too big for the hole: the tail.
    let t = booked(reserve_holey(1_070, &mut holes, 1_000, 2, &q(), None));
    assert_eq!((t.start, t.end), (1_070, 1_090));
    assert_eq!(holes.spans(), [(1_050, 1_060)]);
}

#[test]
fn a_hole_out_of_the_window_is_a_retry_time_not_a_grant() {
    // Tail 1_100, hole (1_050, 1_070]: at 1_000 the window reaches 1_030 only.
    let mut holes = Holes::new(0);
    holes.give(1_050, 1_070);
    let v = check_holey(1_100, &mut holes, 1_000, 1, &q());
    // The hole's first interval is in the window at 1_030; the tail's at 1_080.
    assert_eq!(v.kind, Kind::Deny { retry_after: 30 });
    assert_eq!(v.decision(1_000).remaining, 0);
    let v = check_holey(1_100, &mut holes, 1_030, 1, &q());
    assert_eq!(v.kind, Kind::Allow);
    assert_eq!(holes.spans(), [(1_060, 1_070)]);
    // remaining counts whole intervals of holes inside the window.
    let d = check_holey(1_100, &mut holes, 1_040, 0, &q()).decision(1_040);
    assert_eq!(d.remaining, 1);
}

#[test]
fn rescale_keeps_the_debt_in_permits() {
    // 10 permits of debt at T = 100 ms, then T = 6 s (10/s -> 10/min) at the change time.
    let ms = 1_000_000u64;
    let p = GcraParams::new(6_000 * ms, 10, 1, 100 * ms, 5_000 * ms);
    assert_eq!(
        rescale(5_000 * ms + 1_000 * ms, p.t, &p.change.unwrap()),
        5_000 * ms + 60_000 * ms
    );
    // A full bucket at the change stays full.
    assert_eq!(rescale(4_000 * ms, p.t, &p.change.unwrap()), 4_000 * ms);
    assert_eq!(rescale(5_000 * ms, p.t, &p.change.unwrap()), 5_000 * ms);
    // A fraction of a permit rounds up: never forgives debt.
    let p = GcraParams::new(3, 1, 1, 2, 0);
    // Half a permit at T=2 is 1.5 ns at T=3: 2.
    assert_eq!(rescale(1, p.t, &p.change.unwrap()), 2);
    // Loosening is symmetric.
    let p = GcraParams::new(100 * ms, 10, 1, 6_000 * ms, 0);
    assert_eq!(rescale(60_000 * ms, p.t, &p.change.unwrap()), 1_000 * ms);
    // Beyond the end of time: the end of time (never granted again), never wrapped.
    let p = GcraParams::new(MAX_NANOS, 1, 1, 1, 0);
    assert_eq!(rescale(MAX_NANOS, p.t, &p.change.unwrap()), MAX_NANOS);
}

#[test]
fn leaky_and_token_bucket_readings_are_the_gcra_state() {
    // Water level (tat - now) / T and tokens floor((tau - (tat - now)) / T) add up to b.
    for tat in [0u64, 1_000, 1_005, 1_010, 1_029, 1_030] {
        let d = check(tat, 1_000, 0, &q()).decision(1_000);
        let level = tat.saturating_sub(1_000);
        assert_eq!(d.remaining, (30 - level) / 10, "tat {tat}");
    }
}

#[test]
fn division_by_the_reciprocal_is_exact() {
    let ts = [
        1u64,
        2,
        3,
        7,
        10,
        1_000,
        999_999_937,
        1 << 31,
        (1 << 32) + 1,
        MAX_NANOS,
    ];
    let xs = [
        0u64,
        1,
        2,
        9,
        10,
        11,
        1 << 40,
        MAX_NANOS - 1,
        MAX_NANOS,
        u64::MAX - 1,
        u64::MAX,
    ];
    for &t in &ts {
        let recip = GcraParams::new(t, 1, 0, t, 0).recip;
        for &x in &xs {
            for x in [
                x,
                x.saturating_sub(t),
                x / t * t,
                (x / t * t).saturating_sub(1),
            ] {
                assert_eq!(div_t(x, t, recip), x / t, "{x} / {t}");
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn division_by_the_reciprocal_agrees_with_division(x: u64, t in 1..=MAX_NANOS) {
        let recip = GcraParams::new(t, 1, 0, t, 0).recip;
        proptest::prop_assert_eq!(div_t(x, t, recip), x / t);
    }

    #[test]
    fn division_by_the_reciprocal_agrees_for_small_divisors(x: u64, t in 1u64..1_000_000) {
        let recip = GcraParams::new(t, 1, 0, t, 0).recip;
        proptest::prop_assert_eq!(div_t(x, t, recip), x / t);
    }
}

/// The decision's fields by their definitions (`docs/design.md`, "2. Quota and GCRA"), from
/// the verdict's tail alone: what the per-branch arithmetic in `check` must agree with.
fn decision_by_definition(v: &Verdict, now: Nanos, p: &GcraParams) -> Decision {
    let debt = v.tail.saturating_sub(now);
    let remaining = match v.kind {
        Kind::Never => 0,
        _ => (p.tau.saturating_sub(debt) / p.t).min(p.burst),
    };
    Decision {
        allowed: matches!(v.kind, Kind::Allow | Kind::Peek),
        limit: p.burst,
        remaining,
        retry_after: match v.kind {
            Kind::Deny { retry_after } => Some(Duration::from_nanos(retry_after)),
            _ => None,
        },
        reset_after: Duration::from_nanos(debt),
        refused_by: (!matches!(v.kind, Kind::Allow | Kind::Peek)).then_some(RefusedBy::Quota),
    }
}

#[test]
fn decisions_agree_with_the_definitions_at_the_edges() {
    for (t, burst) in [(10, 3), (1, 1), (7, 1), (3, 1_000), (1, MAX_NANOS)] {
        let p = params(t, burst);
        let ats = [
            0,
            1,
            t - 1,
            t,
            t + 1,
            p.tau - 1,
            p.tau,
            p.tau + 1,
            p.tau.saturating_mul(5),
        ];
        for now in [0, 1, 1_000, MAX_NANOS - p.tau, MAX_NANOS, u64::MAX] {
            for d in ats {
                let ahead = now.saturating_add(d).min(MAX_NANOS);
                for (tat, n) in [ahead, now.saturating_sub(d)]
                    .into_iter()
                    .flat_map(|tat| [0, 1, 2, burst, burst + 1].map(|n| (tat, n)))
                {
                    let v = check(tat, now, n, &p);
                    assert_eq!(
                        v.decision(now),
                        decision_by_definition(&v, now, &p),
                        "t {t} b {burst} tat {tat} now {now} n {n}"
                    );
                }
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn decisions_agree_with_the_definitions(
        t in 1u64..1_000_000,
        burst in 1u64..10_000,
        now in 0u64..1 << 50,
        ahead in 0u64..1 << 40,
        behind: bool,
        n in 0u64..20,
    ) {
        let p = params(t, burst);
        let d = ahead % (3 * p.tau);
        // A TAT behind `now` is a full bucket (the fast path of an allowed check).
        let tat = if behind { now.saturating_sub(d) } else { now + d };
        let v = check(tat, now, n, &p);
        proptest::prop_assert_eq!(v.decision(now), decision_by_definition(&v, now, &p));
    }
}

/// `check` tests `n > burst` only once a grant is ruled out; the rule it states tests it
/// first. Where both could apply (past the end of time, inert parameters), the burst wins.
#[test]
fn more_than_the_burst_is_said_before_the_end_of_time() {
    let v = check(MAX_NANOS, MAX_NANOS - 5, 4, &q());
    assert_eq!((v.kind, v.store), (Kind::ExceedsBurst, None));
    assert_eq!(check(0, u64::MAX, 4, &q()).kind, Kind::ExceedsBurst);
    let inert = GcraParams {
        burst: 0,
        tau: 0,
        ..q()
    };
    assert_eq!(check(0, 500, 1, &inert).kind, Kind::ExceedsBurst);
    assert_eq!(check(MAX_NANOS, 500, 1, &inert).kind, Kind::ExceedsBurst);
}

proptest::proptest! {
    /// `check` against the rule in the order it is stated: nothing (a peek), more than the
    /// burst, past the end of time, then granted iff `new_tat - tau <= now`.
    #[test]
    fn check_agrees_with_the_rule_in_its_stated_order(
        tat in 0u64..20_000,
        now in 0u64..20_000,
        near_the_end: bool,
        now_past_the_end: bool,
        n in 0u64..8,
        t in 1u64..1_000,
        burst in 0u64..6,
    ) {
        // Near the end of time too, where `Never` and the burst compete; and a clock past it,
        // up to `u64::MAX`, where `max(tat, now) + n*T` would wrap.
        let shift = if near_the_end { MAX_NANOS - 10_000 } else { 0 };
        let (tat, now) = ((tat + shift).min(MAX_NANOS), now + shift);
        let now = if now_past_the_end { u64::MAX - now % 20_000 } else { now };
        let p = GcraParams { burst, tau: t * burst, ..params(t, burst.max(1)) };
        let base = tat.max(now);
        let expected = if n == 0 {
            Kind::Peek
        } else if n > burst {
            Kind::ExceedsBurst
        } else {
            match base.checked_add(n * t).filter(|&e| e <= MAX_NANOS) {
                None => Kind::Never,
                Some(e) if e.saturating_sub(p.tau) <= now => Kind::Allow,
                Some(e) => Kind::Deny { retry_after: e.saturating_sub(p.tau) - now },
            }
        };
        let v = check(tat, now, n, &p);
        proptest::prop_assert_eq!(v.kind, expected);
        proptest::prop_assert_eq!(v.store.is_some(), expected == Kind::Allow);
    }
}

proptest::proptest! {
    /// `grant_one` is `check`'s decision of one permit, on the full parameters and on a load of
    /// their first `ALLOW_WORDS` words (`burst` and `recip` 0), at any `now` up to `u64::MAX`.
    #[test]
    fn grant_one_is_the_check_of_one_permit(
        (tat, now, edge) in (0u64..20_000, 0u64..20_000, 0u8..3),
        (t, burst) in (1u64..1_000, 1u64..6),
    ) {
        let shift = [0, MAX_NANOS - 10_000, u64::MAX - 20_000][usize::from(edge)];
        let (tat, now) = ((tat + shift).min(MAX_NANOS), now + shift);
        let p = params(t, burst);
        let mut words = p.to_words();
        words[GcraParams::ALLOW_WORDS..].fill(0);
        let narrow = GcraParams::from_words(words);
        proptest::prop_assert_eq!((narrow.t, narrow.tau, narrow.generation), (p.t, p.tau, p.generation));
        let expected = check(tat, now, 1, &p).store;
        proptest::prop_assert_eq!(grant_one(tat, now, &p), expected);
        proptest::prop_assert_eq!(grant_one(tat, now, &narrow), expected);
    }
}
