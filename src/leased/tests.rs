use std::num::NonZeroU32;
use std::time::Duration;

use proptest::prelude::*;

use super::LeasedRateLimiter;
use crate::{ManualClock, Quota, RateLimiter};

fn leased(q: Quota, lease: u32, shards: usize) -> (LeasedRateLimiter, ManualClock) {
    let clock = ManualClock::new();
    let inner = RateLimiter::builder(q).clock(clock.clone()).build();
    let l = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(lease).unwrap(), shards);
    (l, clock)
}

/// The plain model: GCRA with interval `t` and burst `b`, one permit per call.
struct Plain {
    tat: u128,
    t: u128,
    tau: u128,
}

impl Plain {
    fn try_acquire(&mut self, now: u128) -> bool {
        let new = self.tat.max(now) + self.t;
        if new <= now + self.tau {
            self.tat = new;
            true
        } else {
            false
        }
    }
}

/// The most grants (times in `grants`, sorted) in any window of `[a, a + d]`, for every
/// window, against `allowed(d)`: the first window that admits more, if any.
fn worst_window(grants: &[u64], allowed: impl Fn(u64) -> u64) -> Option<(u64, u64, u64)> {
    for i in 0..grants.len() {
        for j in i..grants.len() {
            let d = grants[j] - grants[i];
            let n = (j - i + 1) as u64;
            if n > allowed(d) {
                return Some((grants[i], d, n));
            }
        }
    }
    None
}

#[test]
fn leases_reach_the_bound_and_no_further() {
    // 10 per second (T = 100 ms), burst 10, leases of 5 on 2 shards: bound 2 * 4 = 8.
    let (l, clock) = leased(Quota::per_second(10).unwrap(), 5, 2);
    assert!(l.try_acquire_on(0) && l.try_acquire_on(1));
    assert_eq!(l.held(), 8);
    // The inner limiter is empty now: 10 permits were leased.
    assert!(!l.inner().try_acquire());
    clock.advance(Duration::from_secs(1));
    // At one instant: the 8 held, then the refilled burst of 10 (two more leases of 5).
    let at_once = (0..40).filter(|i| l.try_acquire_on(i % 2)).count() as u64;
    assert_eq!(at_once, 10 + l.max_over_admission());
}

#[test]
fn lease_is_capped_at_the_burst_and_one_is_the_plain_limiter() {
    let (l, _) = leased(Quota::per_second(3).unwrap(), 64, 4);
    assert_eq!(l.lease(), 3);
    let (one, _) = leased(Quota::per_second(3).unwrap(), 1, 4);
    assert_eq!(one.max_over_admission(), 0);
    assert_eq!((0..10).filter(|i| one.try_acquire_on(i % 4)).count(), 3);
    assert_eq!(one.held(), 0);
}

proptest! {
    /// Against the plain model: in every window `[a, a + d]`, the leased limiter admits at most
    /// `burst + floor(d / T) + shards * (L - 1)`, where the plain model (checked here too) admits
    /// at most `burst + floor(d / T)`; a shard never holds more than `L - 1`.
    #[test]
    fn never_more_than_the_quota_plus_the_bound(
        burst in 1u64..12,
        lease in 1u32..8,
        shards in 1usize..4,
        calls in proptest::collection::vec((0u64..250, 0usize..4), 1..120),
    ) {
        const T: u64 = 100_000_000; // 10 per second
        let q = Quota::per_second(10).unwrap().with_burst(burst).unwrap();
        let (l, clock) = leased(q, lease, shards);
        let mut plain = Plain { tat: 0, t: T.into(), tau: (T * burst).into() };
        let (mut now, mut got, mut plain_got) = (0u64, Vec::new(), Vec::new());
        for (advance_ms, shard) in calls {
            clock.advance(Duration::from_millis(advance_ms));
            now += advance_ms * 1_000_000;
            if l.try_acquire_on(shard % shards) {
                got.push(now);
            }
            if plain.try_acquire(now.into()) {
                plain_got.push(now);
            }
            prop_assert!(l.held() <= l.max_over_admission());
        }
        let quota = |d: u64| burst + d / T;
        prop_assert_eq!(worst_window(&plain_got, quota), None);
        let bound = l.max_over_admission();
        prop_assert_eq!(worst_window(&got, |d| quota(d) + bound), None);
    }
}
