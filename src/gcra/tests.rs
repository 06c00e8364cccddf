//! Every rule of DESIGN.md 2-3 with exact nanosecond expectations.

use super::*;

/// T = 10 ns, b = 3, tau = 30 ns.
fn q() -> Quota {
    Quota::from_parts(10, 3)
}

fn allow(new_tat: Nanos) -> Verdict {
    Verdict::Allow { new_tat }
}

#[test]
fn fresh_key_admits_the_whole_burst_then_denies() {
    let (mut tat, now) = (0, 1_000);
    for k in 1..=3 {
        let v = check(tat, now, 1, q());
        assert_eq!(v, allow(now + 10 * k));
        tat = v.store().unwrap();
    }
    assert_eq!(
        check(tat, now, 1, q()),
        Verdict::Deny {
            base: 1_030,
            retry_after: 10
        }
    );
}

#[test]
fn allow_at_equal_to_now_is_allowed() {
    // new_tat = 1030 + 10 = 1040, allow_at = 1010 = now.
    assert_eq!(check(1_030, 1_010, 1, q()), allow(1_040));
    // one nanosecond earlier it is denied, retry after exactly 1 ns.
    assert_eq!(
        check(1_030, 1_009, 1, q()),
        Verdict::Deny {
            base: 1_030,
            retry_after: 1
        }
    );
}

#[test]
fn n_equal_to_burst_from_full_is_allowed_and_n_above_is_never() {
    assert_eq!(check(0, 500, 3, q()), allow(530));
    assert_eq!(check(0, 500, 4, q()), Verdict::ExceedsBurst { base: 500 });
    assert_eq!(
        check(0, 500, u64::MAX, q()),
        Verdict::ExceedsBurst { base: 500 }
    );
    assert_eq!(
        check(0, 500, 4, q()).into_result(4, q()),
        Err(AcquireError::ExceedsBurst {
            requested: 4,
            burst: 3
        })
    );
}

#[test]
fn n_zero_is_a_peek_even_when_in_debt() {
    assert_eq!(check(0, 500, 0, q()), Verdict::Peek { base: 500 });
    // tat far beyond now + tau (reservations can do that): still a peek, nothing stored.
    let v = check(10_000, 500, 0, q());
    assert_eq!(v, Verdict::Peek { base: 10_000 });
    assert_eq!(v.store(), None);
    let d = v.decision(500, q());
    assert!(d.allowed);
    assert_eq!(d.remaining, 0);
    assert_eq!(d.reset_after, Duration::from_nanos(9_500));
}

#[test]
fn decision_fields_follow_redis_cell() {
    // Allowed: t = new_tat = 520, debt 20, remaining floor((30-20)/10) = 1.
    let d = check(510, 500, 1, q()).decision(500, q());
    assert_eq!(
        d,
        Decision {
            allowed: true,
            limit: 3,
            remaining: 1,
            retry_after: None,
            reset_after: Duration::from_nanos(20),
        }
    );
    // Denied: t = max(tat, now) = 535, debt 35 > tau, remaining 0, retry = 535+10-30-500 = 15.
    let d = check(535, 500, 1, q()).decision(500, q());
    assert_eq!(
        d,
        Decision {
            allowed: false,
            limit: 3,
            remaining: 0,
            retry_after: Some(Duration::from_nanos(15)),
            reset_after: Duration::from_nanos(35),
        }
    );
    // Partial interval: debt 5 -> remaining floor(25/10) = 2.
    let d = check(0, 500, 0, q()).decision(500, q());
    assert_eq!((d.remaining, d.reset_after), (3, Duration::ZERO));
    let d = check(505, 500, 0, q()).decision(500, q());
    assert_eq!(d.remaining, 2);
    // Exceeds burst: no retry_after.
    let d = check(0, 500, 9, q()).decision(500, q());
    assert!(!d.allowed && d.retry_after.is_none() && d.exceeds_burst());
}

#[test]
fn saturation_near_the_end_of_time_denies_instead_of_wrapping() {
    let max = u64::MAX;
    // Room for exactly one more interval: allowed, stores MAX.
    assert_eq!(check(max - 10, max - 10, 1, q()), allow(max));
    // From a stored MAX, nothing more fits: denied, never wrapped, nothing stored.
    let v = check(max, max - 5, 1, q());
    assert_eq!(v.store(), None);
    assert!(!v.allowed());
    let v = check(max, max, 3, q());
    assert_eq!(v.store(), None);
    assert!(!v.allowed());
    // Reserve refuses what it cannot represent.
    assert_eq!(
        reserve(max, max, 1, q(), None),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    assert_eq!(
        reserve(0, 0, u64::MAX, q(), None),
        Err(AcquireError::Unrepresentable {
            requested: u64::MAX
        })
    );
    // The largest tolerance: tau = u64::MAX, T = 1.
    let huge = Quota::from_parts(1, u64::MAX);
    assert_eq!(check(0, 0, u64::MAX, huge), allow(u64::MAX));
    let d = check(0, 0, 0, huge).decision(0, huge);
    assert_eq!(d.remaining, u64::MAX);
}

#[test]
fn reserve_stores_unconditionally_and_reports_ready_time() {
    // Full bucket: ready now.
    let t = reserve(0, 1_000, 1, q(), None).unwrap();
    assert_eq!(
        t,
        Ticket {
            new_tat: 1_010,
            cost: 10,
            ready_at: 980
        }
    );
    assert_eq!(t.wait_from(1_000), 0);
    // In debt: tat 1_040, new 1_050, ready 1_020, wait 20.
    let t = reserve(1_040, 1_000, 1, q(), None).unwrap();
    assert_eq!(
        (t.new_tat, t.ready_at, t.wait_from(1_000)),
        (1_050, 1_020, 20)
    );
    // n > burst waits (n - b) * T from a full bucket.
    let t = reserve(0, 1_000, 5, q(), None).unwrap();
    assert_eq!(t.wait_from(1_000), 20);
    // n = 0 reserves nothing and is ready now.
    let t = reserve(1_040, 1_000, 0, q(), None).unwrap();
    assert_eq!(
        t,
        Ticket {
            new_tat: 1_040,
            cost: 0,
            ready_at: 1_000
        }
    );
}

#[test]
fn timeout_reserve_never_reserves_past_the_timeout() {
    assert!(reserve(1_040, 1_000, 1, q(), Some(20)).is_ok()); // wait == timeout: ok
    assert_eq!(
        reserve(1_040, 1_000, 1, q(), Some(19)),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_nanos(20)
        })
    );
    // Timeout zero is the non-blocking check, for n > burst too (it reports the wait).
    assert!(reserve(0, 1_000, 3, q(), Some(0)).is_ok());
    assert_eq!(
        reserve(0, 1_000, 4, q(), Some(0)),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_nanos(10)
        })
    );
}

#[test]
fn cancel_of_the_latest_reservation_refunds_all_of_it() {
    let t = reserve(1_040, 1_000, 2, q(), None).unwrap(); // new_tat 1_060, ready 1_030
    assert_eq!(refund(1_060, &t, 1_000), Some(1_040));
}

#[test]
fn cancel_of_a_non_latest_reservation_refunds_nothing() {
    let a = reserve(1_040, 1_000, 2, q(), None).unwrap(); // 1_040 -> 1_060
    let b = reserve(a.new_tat, 1_000, 1, q(), None).unwrap(); // 1_060 -> 1_070
                                                              // b is pending behind a: lowering the TAT below 1_070 would hand b's slot out twice.
    assert_eq!(refund(b.new_tat, &a, 1_000), None);
    // Cancelling latest-first unwinds everything, exactly.
    assert_eq!(refund(b.new_tat, &b, 1_000), Some(1_060));
    assert_eq!(refund(1_060, &a, 1_000), Some(1_040));
    // A TAT moved past a reservation by anything else (a per-call quota check, say) also
    // blocks the refund.
    assert_eq!(refund(a.new_tat + 1, &a, 1_000), None);
}

#[test]
fn cancel_at_or_after_ready_does_nothing() {
    let t = reserve(1_040, 1_000, 1, q(), None).unwrap(); // ready 1_020
    assert_eq!(refund(1_050, &t, 1_019), Some(1_040));
    assert_eq!(refund(1_050, &t, 1_020), None);
    assert_eq!(refund(1_050, &t, 5_000), None);
    // Ready immediately: cancel never refunds.
    let t = reserve(0, 1_000, 1, q(), None).unwrap();
    assert_eq!(refund(t.new_tat, &t, 1_000), None);
}

#[test]
fn refund_never_goes_below_zero() {
    let t = Ticket {
        new_tat: 50,
        cost: 100,
        ready_at: 1_000,
    };
    assert_eq!(refund(50, &t, 0), Some(0));
    // Nothing reserved (n = 0): nothing to give back.
    let t = Ticket {
        new_tat: 50,
        cost: 0,
        ready_at: 1_000,
    };
    assert_eq!(refund(50, &t, 0), None);
}

#[test]
fn a_quota_change_keeps_the_debt() {
    // Debt 25 ns under the old quota (tat 1_025 at now 1_000).
    let slower = Quota::from_parts(20, 2); // tau 40
                                           // new_tat = 1_025 + 20 = 1_045, allow_at 1_005 > 1_000: denied, retry 5.
    assert_eq!(
        check(1_025, 1_000, 1, slower),
        Verdict::Deny {
            base: 1_025,
            retry_after: 5
        }
    );
    let roomier = Quota::from_parts(10, 10); // tau 100
    assert_eq!(check(1_025, 1_000, 7, roomier), allow(1_095));
}
