//! How a waiting acquire polls: a jittered back-off from 1 ms doubling to 50 ms, cut at the
//! first lease's expiry and at the timeout; and the random lease nonces.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use tokio::time::Instant;

const FIRST: Duration = Duration::from_millis(1);
/// The longest sleep between tries: how late a waiter can notice freed permits.
const MAX: Duration = Duration::from_millis(50);

/// A random number per call: `RandomState::new()` seeds each instance afresh (random per
/// thread, then stepped), so hashing the same value gives a new number each time. 63 bits,
/// so it travels as a positive Redis integer.
pub(super) fn nonce() -> u64 {
    RandomState::new().hash_one(std::process::id()) >> 1
}

/// The sleeps of one waiting acquire.
pub(super) struct Poll {
    start: Instant,
    timeout: Option<Duration>,
    backoff: Duration,
}

impl Poll {
    pub(super) fn new(timeout: Option<Duration>) -> Poll {
        Poll {
            start: Instant::now(),
            timeout,
            backoff: FIRST,
        }
    }

    /// The sleep before the next try after a refusal, or `None` to give up (the timeout has
    /// passed). `first_ends`: when the first current lease ends (zero if unknown).
    pub(super) fn next(&mut self, first_ends: Duration) -> Option<Duration> {
        let left = match self.timeout {
            Some(t) => Some(
                t.checked_sub(self.start.elapsed())
                    .filter(|l| !l.is_zero())?,
            ),
            None => None,
        };
        Some(sleep_for(self.backoff, first_ends, left, nonce()))
            .inspect(|_| self.backoff = self.backoff.saturating_mul(2).min(MAX))
    }
}

/// A sleep drawn in `[backoff / 2, backoff]` by `random` (jitter, so that processes refused
/// together do not retry together), no longer than `first_ends` (when known) nor `left`.
pub(super) fn sleep_for(
    backoff: Duration,
    first_ends: Duration,
    left: Option<Duration>,
    random: u64,
) -> Duration {
    let half = backoff / 2;
    let span = u64::try_from((backoff - half).as_micros()).unwrap_or(u64::MAX);
    let mut sleep = half + Duration::from_micros(random % span.saturating_add(1));
    if !first_ends.is_zero() {
        sleep = sleep.min(first_ends);
    }
    if let Some(left) = left {
        sleep = sleep.min(left);
    }
    sleep
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The model: within [backoff/2, backoff], then cut by the lease's end and the time left.
        #[test]
        fn sleeps_stay_within_their_bounds(
            backoff_us in 0u64..100_000,
            first_us in 0u64..100_000,
            left_us in proptest::option::of(1u64..100_000),
            random in any::<u64>(),
        ) {
            let us = Duration::from_micros;
            let s = sleep_for(us(backoff_us), us(first_us), left_us.map(us), random);
            let mut hi = us(backoff_us);
            if first_us > 0 { hi = hi.min(us(first_us)); }
            if let Some(l) = left_us { hi = hi.min(us(l)); }
            let lo = us(backoff_us / 2).min(hi);
            prop_assert!(lo <= s && s <= hi, "{s:?} not in [{lo:?}, {hi:?}]");
        }
    }

    #[test]
    fn nonces_differ_and_stay_positive() {
        let (a, b) = (nonce(), nonce());
        assert_ne!(a, b);
        assert!(i64::try_from(a).is_ok() && i64::try_from(b).is_ok());
    }
}
