//! Leaky bucket and token bucket are GCRA: plain reference implementations of both, written
//! the way the textbooks describe them (a funnel with a water level that leaks at a constant
//! rate; a bucket of tokens refilled at a constant rate), replayed against tollgate's GCRA on
//! scripted and random schedules, with identical decisions (every `Decision` field) at every
//! step.
//!
//! The mapping: capacity = burst `b`, leak (refill) rate = one permit per `T`; the leaky
//! bucket's water level is GCRA's debt `tat - now`, the token bucket's tokens are
//! `floor((tau - (tat - now)) / T)`. Both references keep exact integers: water and token
//! credit are in nanoseconds of leak (refill), one permit being `T` of them.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{Clock, Decision, ManualClock, Quota, RateLimiter};

/// What a reference decided, in `Decision`'s terms (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Said {
    allowed: bool,
    limit: u64,
    remaining: u64,
    retry_after: Option<u64>,
    reset_after: u64,
}

fn said(d: Decision) -> Said {
    Said {
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retry_after: d.retry_after.map(|r| r.as_nanos() as u64),
        reset_after: d.reset_after.as_nanos() as u64,
    }
}

/// The leaky bucket as a meter: a funnel of `capacity` permits that leaks one permit per
/// `leak_every` ns. A request of `n` pours `n` permits in if they do not overflow it.
struct Funnel {
    capacity: u128,
    leak_every: u128,
    /// Water, in ns of leaking (one permit is `leak_every` of them).
    water: u128,
    last: u64,
}

impl Funnel {
    fn new(capacity: u64, leak_every: u64) -> Funnel {
        Funnel {
            capacity: capacity.into(),
            leak_every: leak_every.into(),
            water: 0,
            last: 0,
        }
    }

    fn pour(&mut self, now: u64, n: u64) -> Said {
        // Leak since the last request.
        self.water = self.water.saturating_sub(u128::from(now - self.last));
        self.last = now;
        let full = self.capacity * self.leak_every;
        let add = u128::from(n) * self.leak_every;
        let (allowed, retry_after) = if n == 0 {
            (true, None)
        } else if u128::from(n) > self.capacity {
            (false, None)
        } else if self.water + add <= full {
            self.water += add;
            (true, None)
        } else {
            // Until enough has leaked out for n to fit.
            (false, Some((self.water + add - full) as u64))
        };
        Said {
            allowed,
            limit: self.capacity as u64,
            remaining: ((full - self.water) / self.leak_every) as u64,
            retry_after,
            reset_after: self.water as u64, // until it is empty
        }
    }
}

/// The token bucket: up to `burst` tokens, one more every `refill_every` ns; a request of `n`
/// takes `n` tokens if there are that many.
struct TokenBucket {
    burst: u128,
    refill_every: u128,
    /// Refill credit in ns (tokens = credit / refill_every), starting full.
    credit: u128,
    last: u64,
}

impl TokenBucket {
    fn new(burst: u64, refill_every: u64) -> TokenBucket {
        TokenBucket {
            burst: burst.into(),
            refill_every: refill_every.into(),
            credit: u128::from(burst) * u128::from(refill_every),
            last: 0,
        }
    }

    fn take(&mut self, now: u64, n: u64) -> Said {
        let full = self.burst * self.refill_every;
        self.credit = (self.credit + u128::from(now - self.last)).min(full);
        self.last = now;
        let cost = u128::from(n) * self.refill_every;
        let (allowed, retry_after) = if n == 0 {
            (true, None)
        } else if u128::from(n) > self.burst {
            (false, None)
        } else if self.credit >= cost {
            self.credit -= cost;
            (true, None)
        } else {
            (false, Some((cost - self.credit) as u64))
        };
        Said {
            allowed,
            limit: self.burst as u64,
            remaining: (self.credit / self.refill_every) as u64, // whole tokens
            retry_after,
            reset_after: (full - self.credit) as u64, // until the bucket is full
        }
    }
}

/// Replays `(advance, n)` steps through GCRA and both references; every decision must agree.
fn replay(q: Quota, steps: &[(u64, u64)]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let gcra = RateLimiter::builder(q).clock(clock.clone()).build();
    let t = q.interval().as_nanos() as u64;
    let mut funnel = Funnel::new(q.burst(), t);
    let mut tokens = TokenBucket::new(q.burst(), t);
    for (i, &(advance, n)) in steps.iter().enumerate() {
        clock.advance_nanos(advance);
        let now = clock.now();
        let g = said(gcra.check_n(n));
        prop_assert_eq!(
            g,
            funnel.pour(now, n),
            "leaky bucket, step {} at {}",
            i,
            now
        );
        prop_assert_eq!(
            g,
            tokens.take(now, n),
            "token bucket, step {} at {}",
            i,
            now
        );
    }
    Ok(())
}

#[test]
fn scripted_schedules() {
    let ms = 1_000_000;
    // 10/s, burst 10: a burst, denials, a steady trickle, a refill, over-burst and peeks.
    let q = Quota::per_second(10).unwrap();
    let mut steps = vec![(0, 10), (0, 1), (50 * ms, 1), (50 * ms, 1), (0, 0), (0, 11)];
    steps.extend((0..20).map(|_| (100 * ms, 1)));
    steps.extend([(2_000 * ms, 10), (99 * ms, 1), (ms, 1), (0, 2)]);
    replay(q, &steps).unwrap();
    // 3/s (T rounds up to 333,333,334 ns), burst 1: strict pacing, steps landing 1 ns before and
    // exactly on each emission.
    let q = Quota::per_second(3).unwrap().with_burst(1).unwrap();
    let t = 333_333_334;
    replay(
        q,
        &[
            (0, 1),
            (t - 1, 1),
            (1, 1),
            (t, 1),
            (0, 1),
            (5 * t, 1),
            (0, 2),
        ],
    )
    .unwrap();
    // Burst larger than the rate's count: 1/min with bursts of 5.
    let q = Quota::per_minute(1).unwrap().with_burst(5).unwrap();
    let s = 1_000 * ms;
    replay(
        q,
        &[
            (0, 3),
            (0, 2),
            (0, 1),
            (30 * s, 1),
            (30 * s, 1),
            (0, 1),
            (120 * s, 3),
        ],
    )
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_schedules(
        count in 1u64..20,
        period in 1u64..1_000,
        burst in 1u64..12,
        steps in prop::collection::vec(((0u64..400), (0u64..14)), 1..100),
    ) {
        let q = Quota::new(count, Duration::from_nanos(period.max(count))).unwrap()
            .with_burst(burst).unwrap();
        replay(q, &steps)?;
    }
}
