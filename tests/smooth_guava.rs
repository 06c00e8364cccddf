//! Guava's own `RateLimiterTest` scenarios, replayed on a `ManualClock` with Guava's event log:
//! `R` is a sleep by the limiter (the clock records every `Clock::sleep`, including Guava's
//! `R0.00` on a grant that does not wait), `U` a sleep by the test. Seconds with two decimals,
//! rounded half up on the exact microsecond value.
//!
//! The expectations are Guava's; the limiter computes them from the rules, nothing is stored.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tollgate::{AcquireError, ManualClock, SmoothRateLimiter};

/// A limiter on a manual clock plus Guava's event log.
struct Fake {
    clock: ManualClock,
    limiter: SmoothRateLimiter,
    seen: usize,
    events: Vec<String>,
}

/// Guava's `%3.2f` of a microsecond count, rounded half up.
fn secs(micros: u128) -> String {
    let h = (micros + 5_000) / 10_000;
    format!("{}.{:02}", h / 100, h % 100)
}

impl Fake {
    fn bursty(rate: f64) -> Fake {
        Fake::with(|b| b, rate)
    }

    fn warming(rate: f64, warmup_ms: u64, cold_factor: f64) -> Fake {
        Fake::with(
            |b| {
                b.warmup(Duration::from_millis(warmup_ms))
                    .cold_factor(cold_factor)
            },
            rate,
        )
    }

    fn with(
        configure: impl FnOnce(tollgate::SmoothRateLimiterBuilder) -> tollgate::SmoothRateLimiterBuilder,
        rate: f64,
    ) -> Fake {
        let clock = ManualClock::new();
        let limiter = configure(SmoothRateLimiter::builder(rate).clock(clock.clone()))
            .build()
            .unwrap();
        Fake {
            clock,
            limiter,
            seen: 0,
            events: Vec::new(),
        }
    }

    /// Moves the limiter's recorded sleeps into the log as `R` events.
    fn record(&mut self) {
        let sleeps = self.clock.sleeps();
        for d in &sleeps[self.seen..] {
            self.events.push(format!("R{}", secs(d.as_micros())));
        }
        self.seen = sleeps.len();
    }

    /// `limiter.acquire(n)`; returns what it returned.
    fn acquire(&mut self, n: u64) -> Duration {
        let waited = self.limiter.acquire_n(n).unwrap();
        self.record();
        waited
    }

    fn acquire_times(&mut self, count: usize) {
        for _ in 0..count {
            self.acquire(1);
        }
    }

    /// `tryAcquire(n, timeout)`.
    fn try_acquire(&mut self, n: u64, timeout: Duration) -> bool {
        let ok = self.limiter.try_acquire_n_for(n, timeout).is_ok();
        self.record();
        ok
    }

    /// `stopwatch.sleepMillis(ms)`: the test's own sleep, a `U` event.
    fn sleep_millis(&mut self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
        self.events
            .push(format!("U{}", secs(u128::from(ms) * 1_000)));
    }

    fn set_rate(&mut self, rate: f64) {
        self.limiter.set_quota(rate).unwrap();
    }

    /// The events since the last call, as one comma-separated line.
    fn events(&mut self) -> String {
        std::mem::take(&mut self.events).join(", ")
    }
}

#[test]
fn simple() {
    let mut f = Fake::bursty(5.0);
    f.acquire_times(3);
    assert_eq!(f.events(), "R0.00, R0.20, R0.20");
}

#[test]
fn simple_with_wait() {
    let mut f = Fake::bursty(5.0);
    let a = f.acquire(1);
    f.sleep_millis(200);
    let b = f.acquire(1);
    let c = f.acquire(1);
    assert_eq!(f.events(), "R0.00, U0.20, R0.00, R0.20");
    assert_eq!(
        [a, b, c],
        [Duration::ZERO, Duration::ZERO, Duration::from_millis(200)]
    );
}

#[test]
fn simple_acquire_earliest_available_is_in_past() {
    let mut f = Fake::bursty(5.0);
    assert_eq!(f.acquire(1), Duration::ZERO);
    f.sleep_millis(400);
    assert_eq!(f.acquire(1), Duration::ZERO);
    assert_eq!(f.acquire(1), Duration::ZERO);
    assert_eq!(f.acquire(1), Duration::from_millis(200));
}

#[test]
fn one_second_burst() {
    let mut f = Fake::bursty(5.0);
    f.sleep_millis(1000); // max capacity reached
    f.sleep_millis(1000); // this makes no difference
    for n in [1, 1, 3, 1, 1] {
        f.acquire(n);
    }
    assert_eq!(
        f.events(),
        "U1.00, U1.00, R0.00, R0.00, R0.00, R0.00, R0.20"
    );
}

#[test]
fn pay_later_with_weights() {
    let mut f = Fake::bursty(1.0);
    for n in [1, 1, 2, 4, 8, 1] {
        f.acquire(n);
    }
    assert_eq!(f.events(), "R0.00, R1.00, R1.00, R2.00, R4.00, R8.00");
}

#[test]
fn set_rate_keeps_the_old_rates_debt() {
    let mut f = Fake::bursty(1.0);
    f.acquire(1);
    f.acquire(1);
    f.set_rate(2.0);
    for n in [1, 2, 4, 1] {
        f.acquire(n);
    }
    assert_eq!(f.events(), "R0.00, R1.00, R1.00, R0.50, R1.00, R2.00");
}

#[test]
fn warm_up() {
    let mut f = Fake::warming(2.0, 4000, 3.0);
    f.acquire_times(8);
    f.sleep_millis(500); // repay the last acquire
    f.sleep_millis(4000); // cold again
    f.acquire_times(8);
    f.sleep_millis(500);
    f.sleep_millis(2000); // half cold: at the threshold
    f.acquire_times(8);
    let ramp = "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50";
    assert_eq!(
        f.events(),
        format!(
            "{ramp}, U0.50, U4.00, {ramp}, U0.50, U2.00, R0.00, R0.50, R0.50, R0.50, R0.50, \
             R0.50, R0.50, R0.50"
        )
    );
}

#[test]
fn warm_up_and_update() {
    let mut f = Fake::warming(2.0, 4000, 3.0);
    f.acquire_times(8); // #1
    f.sleep_millis(4500); // #2: back to cold (warm-up period + repay the last acquire)
    f.acquire_times(3); // #3: only three steps, somewhere in the warm-up period
    f.set_rate(4.0); // double the rate
    f.acquire(1); // #4: repays the debt of the last acquire, booked at the old rate
    f.acquire_times(4); // #5
    f.sleep_millis(4250); // #6: back to cold
    f.acquire_times(11); // #7: the warm-up from totally cold
    assert_eq!(
        f.events(),
        "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50, \
         U4.50, \
         R0.00, R1.38, R1.13, \
         R0.88, \
         R0.34, R0.28, R0.25, R0.25, \
         U4.25, \
         R0.00, R0.72, R0.66, R0.59, R0.53, R0.47, R0.41, \
         R0.34, R0.28, R0.25, R0.25"
    );
}

#[test]
fn warm_up_with_cold_factor() {
    let mut f = Fake::warming(5.0, 4000, 10.0);
    f.acquire_times(8);
    f.sleep_millis(200); // repay the last acquire
    f.sleep_millis(4000); // cold again
    f.acquire_times(8);
    f.sleep_millis(200);
    f.sleep_millis(1000); // still warm: it would take 3 more seconds to go cold
    f.acquire_times(8);
    let ramp = "R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, R0.20, R0.20";
    assert_eq!(
        f.events(),
        format!(
            "{ramp}, U0.20, U4.00, {ramp}, U0.20, U1.00, R0.00, R0.20, R0.20, R0.20, R0.20, \
             R0.20, R0.20, R0.20"
        )
    );
}

#[test]
fn warm_up_with_cold_factor_1() {
    let mut f = Fake::warming(5.0, 4000, 1.0);
    f.acquire_times(8);
    f.sleep_millis(340);
    f.acquire_times(8);
    let steady = "R0.00, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20";
    assert_eq!(f.events(), format!("{steady}, U0.34, {steady}"));
}

#[test]
fn infinity_bursty() {
    let mut f = Fake::bursty(f64::INFINITY);
    f.acquire(i32::MAX as u64 / 4);
    f.acquire(i32::MAX as u64 / 2);
    f.acquire(i32::MAX as u64);
    assert_eq!(f.events(), "R0.00, R0.00, R0.00"); // no wait, infinite rate
    f.set_rate(2.0);
    f.acquire_times(5);
    // The saved burst (1 s = 2 permits), the free request, then 0.5 s each.
    assert_eq!(f.events(), "R0.00, R0.00, R0.00, R0.50, R0.50");
    f.set_rate(f64::INFINITY);
    f.acquire_times(3);
    assert_eq!(f.events(), "R0.50, R0.00, R0.00"); // repay the last request, then free
}

#[test]
fn infinity_bursty_time_elapsed() {
    let mut f = Fake::bursty(f64::INFINITY);
    f.clock.advance(Duration::from_secs(1));
    f.set_rate(2.0);
    f.acquire_times(5);
    assert_eq!(f.events(), "R0.00, R0.00, R0.00, R0.50, R0.50");
}

#[test]
fn infinity_warm_up() {
    let mut f = Fake::warming(f64::INFINITY, 10_000, 3.0);
    f.acquire(i32::MAX as u64 / 4);
    f.acquire(i32::MAX as u64 / 2);
    f.acquire(i32::MAX as u64);
    assert_eq!(f.events(), "R0.00, R0.00, R0.00");
    f.set_rate(1.0);
    f.acquire_times(3);
    assert_eq!(f.events(), "R0.00, R1.00, R1.00");
    f.set_rate(f64::INFINITY);
    f.acquire_times(3);
    assert_eq!(f.events(), "R1.00, R0.00, R0.00");
}

#[test]
fn infinity_warm_up_time_elapsed() {
    let mut f = Fake::warming(f64::INFINITY, 10_000, 3.0);
    f.clock.advance(Duration::from_secs(1));
    f.set_rate(1.0);
    f.acquire_times(5);
    assert_eq!(f.events(), "R0.00, R1.00, R1.00, R1.00, R1.00");
}

#[test]
fn try_acquire_no_wait_allowed() {
    let mut f = Fake::bursty(5.0);
    assert!(f.try_acquire(1, Duration::ZERO));
    assert!(!f.try_acquire(1, Duration::ZERO));
    assert!(!f.try_acquire(1, Duration::ZERO));
    f.sleep_millis(100);
    assert!(!f.try_acquire(1, Duration::ZERO));
}

#[test]
fn try_acquire_some_wait_allowed() {
    let mut f = Fake::bursty(5.0);
    assert!(f.try_acquire(1, Duration::ZERO));
    assert!(f.try_acquire(1, Duration::from_millis(200)));
    assert!(!f.try_acquire(1, Duration::from_millis(100)));
    f.sleep_millis(100);
    assert!(f.try_acquire(1, Duration::from_millis(100)));
    assert_eq!(f.events(), "R0.00, R0.20, U0.10, R0.10");
}

#[test]
fn try_acquire_overflow() {
    let mut f = Fake::bursty(50.0);
    assert!(f.try_acquire(1, Duration::ZERO));
    f.sleep_millis(100);
    // Long.MAX_VALUE microseconds: the condition is a subtraction, it cannot overflow.
    assert!(f.try_acquire(1, Duration::from_micros(i64::MAX as u64)));
    assert!(f.try_acquire(1, Duration::MAX));
}

/// Guava's `testTryAcquire_negative`, with the negative timeouts (which Guava treats as 0) as
/// zero: `Duration` cannot be negative.
#[test]
fn try_acquire_weights_do_not_matter_only_the_debt() {
    let mut f = Fake::bursty(5.0);
    assert!(f.try_acquire(5, Duration::ZERO));
    f.sleep_millis(900);
    assert!(!f.try_acquire(1, Duration::ZERO));
    f.sleep_millis(100);
    assert!(f.try_acquire(1, Duration::ZERO));
}

#[test]
fn try_acquire_reports_the_wait_it_would_need() {
    let f = Fake::bursty(5.0);
    f.limiter.acquire_n(2).unwrap(); // debt: 400 ms
    let e = f.limiter.try_acquire_n_for(1, Duration::from_millis(399));
    assert_eq!(
        e,
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_millis(400)
        })
    );
}

/// A count of zero is the same on every limiter (a deliberate difference from Guava, which
/// throws for `permits <= 0`): it succeeds at once, takes nothing, and never sleeps, even in
/// debt.
#[test]
fn zero_permits_succeed_at_once_and_take_nothing() {
    let f = Fake::bursty(5.0);
    f.limiter.acquire_n(2).unwrap(); // debt: 400 ms
    let sleeps = f.clock.sleeps().len();
    assert_eq!(f.limiter.try_acquire_n(0), Ok(()));
    assert_eq!(f.limiter.acquire_n(0), Ok(Duration::ZERO));
    assert_eq!(
        f.limiter.try_acquire_n_for(0, Duration::ZERO),
        Ok(Duration::ZERO)
    );
    assert_eq!(f.clock.sleeps().len(), sleeps, "no sleep, not even of zero");
    // Nothing taken: the next permit still waits exactly the 400 ms of debt.
    assert_eq!(
        f.limiter.try_acquire_n_for(1, Duration::from_millis(399)),
        Err(AcquireError::RateLimited {
            retry_after: Duration::from_millis(400)
        })
    );
}

/// `f64::MIN_POSITIVE` permits per second: the interval is `+Inf`. The first permit is free,
/// the next waits `Long.MAX_VALUE` microseconds (Guava's saturated debt): no panic, no hang,
/// the manual clock saturates.
#[test]
fn vanishing_rate() {
    let mut f = Fake::bursty(f64::MIN_POSITIVE);
    assert_eq!(f.limiter.quota(), 0.0); // getRate() = 1e6 / inf
    f.acquire(1);
    assert!(!f.try_acquire(1, Duration::from_secs(1 << 40)));
    let waited = f.acquire(u64::MAX);
    assert_eq!(waited, Duration::from_micros(i64::MAX as u64));
    assert_eq!(f.events(), "R0.00, R9223372036854.78");
    f.set_rate(1.0); // debt booked at the vanishing rate is still owed
    assert!(!f.limiter.try_acquire());
}

/// A zero warm-up, exactly as Guava behaves: the cool-down interval is `0 / 0 = NaN`, so the
/// first resync makes the stored permits NaN, and from then on every wait is 0.
#[test]
fn zero_warm_up_stops_limiting_after_idle_time_as_in_guava() {
    let mut f = Fake::warming(2.0, 0, 3.0);
    f.acquire_times(3);
    assert_eq!(f.events(), "R0.00, R0.50, R0.50");
    f.sleep_millis(600);
    f.acquire(1_000_000);
    f.acquire_times(2);
    assert_eq!(f.events(), "U0.60, R0.00, R0.00, R0.00");
}

#[test]
fn huge_requests_saturate_without_panicking() {
    let mut f = Fake::warming(0.001, 3_600_000, 3.0);
    f.acquire(u64::MAX);
    let waited = f.acquire(1);
    assert_eq!(waited, Duration::from_micros(i64::MAX as u64));
    let mut g = Fake::bursty(1e300);
    g.acquire(u64::MAX);
    g.acquire(u64::MAX);
    assert_eq!(g.events(), "R0.00, R0.00");
}

/// A clock that moves 1 ms on every reading and records sleeps without sleeping.
#[derive(Clone, Default)]
struct Ticking(std::sync::Arc<(AtomicU64, Mutex<Vec<Duration>>)>);

impl tollgate::Clock for Ticking {
    fn now(&self) -> u64 {
        self.0 .0.fetch_add(1_000_000, Ordering::Relaxed)
    }

    fn sleep(&self, d: Duration) {
        self.0 .1.lock().unwrap().push(d);
    }
}

/// Every blocking method measures its wait from the reading its reservation used: a ready
/// ticket waits 0 however far the clock moves between readings (`acquire()` once measured
/// it from an earlier reading and slept for the difference).
#[test]
fn a_ready_ticket_waits_zero_on_a_moving_clock() {
    let clock = Ticking::default();
    let limiter = SmoothRateLimiter::builder(1e6)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(limiter.acquire(), Ok(Duration::ZERO));
    assert_eq!(limiter.acquire_n(1).unwrap(), Duration::ZERO);
    assert_eq!(
        limiter.try_acquire_n_for(1, Duration::from_secs(5)),
        Ok(Duration::ZERO)
    );
    assert_eq!(*clock.0 .1.lock().unwrap(), [Duration::ZERO; 3]);
}
