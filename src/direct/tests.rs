//! The direct limiter end to end on a ManualClock: exact waits, exact fields.

use super::*;
use crate::ManualClock;

const MS: u64 = 1_000_000;

fn limiter(q: Quota) -> (RateLimiter, ManualClock) {
    let clock = ManualClock::new();
    (RateLimiter::builder(q).clock(clock.clone()).build(), clock)
}

fn per_sec(n: u64) -> Quota {
    Quota::per_second(n).unwrap()
}

#[test]
fn burst_then_one_per_interval() {
    let (l, clock) = limiter(per_sec(10)); // T = 100 ms, b = 10
    assert_eq!((0..20).filter(|_| l.try_acquire()).count(), 10);
    clock.advance(Duration::from_millis(99));
    assert!(!l.try_acquire());
    clock.advance(Duration::from_millis(1));
    assert!(l.try_acquire());
    assert!(!l.try_acquire());
}

#[test]
fn try_acquire_n_reports_retry_after_and_exceeds_burst() {
    let (l, clock) = limiter(per_sec(10));
    clock.advance(Duration::from_secs(5));
    assert_eq!(l.try_acquire_n(7), Ok(()));
    assert_eq!(
        l.try_acquire_n(4),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_millis(100)
        })
    );
    assert_eq!(
        l.try_acquire_n(11),
        Err(AcquireError::ExceedsBurst {
            requested: 11,
            burst: 10
        })
    );
    assert_eq!(l.try_acquire_n(0), Ok(()));
    assert_eq!(l.peek().remaining, 3);
}

#[test]
fn check_fields_are_exact() {
    let (l, clock) = limiter(per_sec(4)); // T 250 ms, tau 1 s
    clock.advance(Duration::from_secs(1));
    let d = l.check_n(3);
    assert_eq!(
        (
            d.allowed,
            d.limit,
            d.remaining,
            d.retry_after,
            d.reset_after
        ),
        (true, 4, 1, None, Duration::from_millis(750))
    );
    let d = l.check_n(2);
    assert_eq!(
        (d.allowed, d.remaining, d.retry_after, d.reset_after),
        (
            false,
            1,
            Some(Duration::from_millis(250)),
            Duration::from_millis(750)
        )
    );
    clock.advance(Duration::from_millis(100));
    let d = l.peek();
    assert_eq!(
        (d.remaining, d.reset_after),
        (1, Duration::from_millis(650))
    );
}

#[test]
fn blocking_acquire_paces_like_guava() {
    let (l, clock) = limiter(Quota::from_interval(Duration::from_millis(100)).unwrap());
    let waits: Vec<_> = (0..4).map(|_| l.acquire().unwrap()).collect();
    assert_eq!(
        waits,
        [0, 100, 100, 100].map(Duration::from_millis).to_vec()
    );
    assert_eq!(clock.sleeps(), vec![Duration::from_millis(100); 3]);
    assert_eq!(clock.now(), 300 * MS);
}

#[test]
fn acquire_more_than_burst_waits_the_excess() {
    let (l, clock) = limiter(per_sec(10));
    assert_eq!(l.acquire_n(25).unwrap(), Duration::from_millis(1_500));
    assert_eq!(clock.now(), 1_500 * MS);
    // Now exactly empty: the next permit is one interval away.
    assert_eq!(l.acquire(), Ok(Duration::from_millis(100)));
    assert_eq!(
        l.acquire_n(u64::MAX),
        Err(AcquireError::Unrepresentable {
            requested: u64::MAX
        })
    );
    assert_eq!(l.acquire_n(0), Ok(Duration::ZERO));
}

#[test]
fn timeout_variant_never_reserves_when_the_wait_is_too_long() {
    let (l, clock) = limiter(per_sec(10).with_burst(1).unwrap());
    assert_eq!(l.acquire(), Ok(Duration::ZERO));
    let before = l.peek();
    assert_eq!(
        l.try_acquire_n_for(1, Duration::from_millis(99)),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_millis(100)
        })
    );
    assert_eq!(l.peek(), before, "a refused timeout must change nothing");
    assert!(clock.sleeps().is_empty());
    assert_eq!(
        l.try_acquire_n_for(1, Duration::from_millis(100)),
        Ok(Duration::from_millis(100))
    );
    // n > burst within a long enough timeout is fine.
    assert_eq!(
        l.try_acquire_n_for(3, Duration::from_secs(1)),
        Ok(Duration::from_millis(300))
    );
    // An absurd timeout saturates rather than overflowing.
    assert!(l.try_acquire_n_for(1, Duration::MAX).is_ok());
}

#[test]
fn cancelled_reservations_give_their_stretch_back_in_any_order() {
    let (l, clock) = limiter(per_sec(10).with_burst(1).unwrap());
    clock.advance(Duration::from_secs(1));
    let first = l.reserve_n(1).unwrap();
    assert_eq!(first.delay(), Duration::ZERO);
    let a = l.reserve_n(2).unwrap(); // ready in 200 ms
    let b = l.reserve_n(1).unwrap(); // ready in 300 ms
    assert_eq!(
        (a.delay(), b.delay()),
        (Duration::from_millis(200), Duration::from_millis(300))
    );
    assert_eq!(a.ready_at(), 1_200 * MS);
    // a is not the latest: b is booked behind it. Its stretch becomes a hole...
    a.cancel();
    assert_eq!(l.peek().reset_after, Duration::from_millis(400));
    // ...that the next reservation takes (ready at a's first slot, not after b).
    let c = l.reserve_n(1).unwrap();
    assert_eq!(c.delay(), Duration::from_millis(100));
    // b, the latest, moves the tail back over itself and over what is left of the hole.
    b.cancel();
    assert_eq!(l.peek().reset_after, Duration::from_millis(200));
    c.cancel();
    assert_eq!(l.peek().reset_after, Duration::from_millis(100));
    // Cancelling after the ready time gives back what is still ahead of now.
    let d = l.reserve_n(1).unwrap(); // tat 1_200 ms, ready 1_100 ms
    clock.advance(Duration::from_millis(150));
    assert_eq!(d.remaining_delay(), Duration::ZERO);
    d.cancel();
    assert_eq!(l.peek().reset_after, Duration::ZERO);
    // Dropping a reservation keeps it.
    let e = l.reserve_n(1).unwrap();
    drop(e);
    assert_eq!(l.peek().reset_after, Duration::from_millis(100));
    drop(first);
}

#[test]
fn a_reservation_ready_at_once_and_cancelled_is_refunded() {
    let (l, _clock) = limiter(per_sec(1));
    let r = l.reserve_n(1).unwrap();
    assert!(r.delay().is_zero());
    r.cancel();
    assert_eq!(l.peek().remaining, 1);
    assert!(l.try_acquire());
}

#[test]
fn five_dropped_waiters_in_any_order_lose_no_capacity() {
    // The reported scenario, synchronously: burst 1 at 10/s, one permit taken, five waiters
    // reserve and all give up; the next arrival waits one interval, not six.
    for order in [
        [0, 1, 2, 3, 4],
        [4, 3, 2, 1, 0],
        [2, 0, 4, 1, 3],
        [1, 3, 0, 4, 2],
    ] {
        let (l, _clock) = limiter(per_sec(10).with_burst(1).unwrap());
        assert!(l.try_acquire());
        let mut waiters: Vec<Option<Reservation<'_>>> =
            (0..5).map(|_| Some(l.reserve_n(1).unwrap())).collect();
        for i in order {
            waiters[i].take().unwrap().cancel();
        }
        assert_eq!(
            l.peek().reset_after,
            Duration::from_millis(100),
            "{order:?}"
        );
        assert_eq!(l.reserve_n(1).unwrap().delay(), Duration::from_millis(100));
    }
}

#[test]
fn reservation_wait_sleeps_on_the_limiter_clock() {
    let (l, clock) = limiter(per_sec(10).with_burst(1).unwrap());
    let _ = l.reserve_n(1).unwrap();
    let r = l.reserve_n(1).unwrap();
    assert_eq!(r.wait(), Duration::from_millis(100));
    assert_eq!(clock.now(), 100 * MS);
}

#[test]
fn tightening_the_quota_keeps_the_debt_in_permits() {
    let (l, clock) = limiter(per_sec(10)); // T 100 ms, b 10
    assert!(l.try_acquire_n(10).is_ok()); // 10 permits of debt
    l.set_quota(Quota::per_minute(10).unwrap()).unwrap(); // T 6 s, b 10
    assert_eq!(l.quota(), Quota::per_minute(10).unwrap());
    // Still 10 permits of debt: none available, a full minute to refill.
    assert!(!l.try_acquire());
    let d = l.peek();
    assert_eq!(
        (d.limit, d.remaining, d.reset_after),
        (10, 0, Duration::from_secs(60))
    );
    clock.advance(Duration::from_secs(6));
    assert!(l.try_acquire());
    assert!(!l.try_acquire());
}

#[test]
fn loosening_the_quota_drains_the_debt_at_the_new_rate() {
    let (l, clock) = limiter(Quota::per_minute(10).unwrap());
    assert!(l.try_acquire_n(10).is_ok()); // 10 permits = 60 s of debt
    clock.advance(Duration::from_secs(6)); // one permit back: 9 of debt
    l.set_quota(per_sec(10)).unwrap();
    assert_eq!(l.peek().reset_after, Duration::from_millis(900));
    assert_eq!(l.peek().remaining, 1);
    assert!(l.try_acquire());
    assert!(!l.try_acquire());
}

#[test]
fn a_larger_burst_has_room_beside_the_old_debt() {
    let (l, _clock) = limiter(per_sec(1)); // T 1 s, b 1
    assert!(l.try_acquire());
    l.set_quota(per_sec(1).with_burst(2).unwrap()).unwrap();
    let d = l.peek();
    assert_eq!(
        (d.limit, d.remaining, d.reset_after),
        (2, 1, Duration::from_secs(1))
    );
    assert!(l.try_acquire());
    assert!(!l.try_acquire());
}

#[test]
fn reservations_from_before_a_quota_change_refund_nothing() {
    let (l, _clock) = limiter(per_sec(10).with_burst(1).unwrap());
    assert!(l.try_acquire());
    let r = l.reserve_n(1).unwrap();
    l.set_quota(per_sec(10).with_burst(2).unwrap()).unwrap();
    let before = l.peek();
    r.cancel();
    assert_eq!(l.peek(), before);
}

#[test]
fn start_empty_begins_used_up() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(per_sec(10))
        .clock(clock.clone())
        .start_empty()
        .build();
    assert!(!l.try_acquire());
    assert_eq!(l.peek().reset_after, Duration::from_secs(1));
    clock.advance(Duration::from_millis(100));
    assert!(l.try_acquire());
}

#[test]
fn per_call_quota_shares_state() {
    let (l, _clock) = limiter(per_sec(1));
    assert!(l.check_n_with(5, per_sec(10)).unwrap().allowed); // tat 500 ms
                                                              // Under the limiter's own quota (tau 1 s) that debt leaves no room for a full 1 s permit.
    assert!(!l.try_acquire());
}

#[test]
fn throttle_matches_redis_cell_replies() {
    let (l, clock) = limiter(per_sec(1));
    // CL.THROTTLE user123 15 30 60 [1]: T = 2 s, burst 16.
    assert_eq!(
        l.throttle(15, 30, 60, 1).unwrap().to_array(),
        [0, 16, 15, -1, 2]
    );
    assert_eq!(
        l.throttle(15, 30, 60, 1).unwrap().to_array(),
        [0, 16, 14, -1, 4]
    );
    // Drain: 14 more allowed, then limited with retry 2 s (one interval), reset 32 s.
    for _ in 0..14 {
        assert_eq!(l.throttle(15, 30, 60, 1).unwrap().limited, 0);
    }
    assert_eq!(
        l.throttle(15, 30, 60, 1).unwrap().to_array(),
        [1, 16, 0, 2, 32]
    );
    // Sub-second parts: 1.5 s later, retry 0.5 s -> 1, reset 30.5 s -> 31.
    clock.advance(Duration::from_millis(1_500));
    assert_eq!(
        l.throttle(15, 30, 60, 1).unwrap().to_array(),
        [1, 16, 0, 1, 31]
    );
    // Quantity above the limit: limited, retry -1.
    assert_eq!(
        l.throttle(15, 30, 60, 17).unwrap().to_array(),
        [1, 16, 0, -1, 31]
    );
    // Quantity 0 peeks.
    assert_eq!(
        l.throttle(15, 30, 60, 0).unwrap().to_array(),
        [0, 16, 0, -1, 31]
    );
    // Bad quotas are typed errors.
    assert_eq!(l.throttle(15, 0, 60, 1), Err(QuotaError::ZeroCount));
    assert_eq!(l.throttle(15, 30, 0, 1), Err(QuotaError::ZeroPeriod));
    assert_eq!(
        l.throttle(u64::MAX, 30, 60, 1),
        Err(QuotaError::ToleranceOverflow)
    );
    // A period beyond the limiter's time is the same error Quota::new gives, not a clamp.
    assert_eq!(
        l.throttle(15, 30, u64::MAX, 1),
        Err(QuotaError::PeriodTooLong)
    );
    assert_eq!(
        Quota::new(30, Duration::from_secs(u64::MAX)),
        Err(QuotaError::PeriodTooLong)
    );
}

#[test]
fn the_end_of_the_limiters_time_never_panics_and_never_lies() {
    let (l, clock) = limiter(per_sec(10));
    clock.set(crate::MAX_NANOS - 150 * MS);
    assert!(l.try_acquire()); // tat MAX - 50 ms
    assert!(!l.try_acquire()); // would pass the end of time: denied, not wrapped
    assert!(l.reserve_n(1).is_err());
    let d = l.check();
    assert_eq!((d.allowed, d.remaining, d.retry_after), (false, 0, None));
    // Blocking acquire returns at once with an error, without sleeping and without a permit.
    assert_eq!(
        l.acquire(),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    assert!(clock.sleeps().is_empty());
    clock.set(u64::MAX);
    assert!(!l.try_acquire());
    let _ = l.peek();
    let _ = l.throttle(0, 1, 1, 1);
}

#[test]
fn a_pacing_call_never_returns_without_pacing() {
    // Reserve the whole representable future, then ask for one more.
    let (l, clock) = limiter(per_sec(10).with_burst(1).unwrap());
    let t = 100 * MS;
    let r = l.reserve_n(crate::MAX_NANOS / t).unwrap();
    drop(r);
    assert_eq!(
        l.acquire(),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    assert!(clock.sleeps().is_empty());
    // A quota so slow its first interval ends past the end of time.
    let (l, clock) = limiter(Quota::from_interval(Duration::from_nanos(crate::MAX_NANOS)).unwrap());
    clock.set(1);
    assert_eq!(
        l.acquire(),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    assert!(clock.sleeps().is_empty());
}
