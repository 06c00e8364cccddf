//! Operators' changes to the one limit: block, penalize, reward, reset (the guide's
//! [Penalties](crate::guide::penalties) page defines them per algorithm).

use std::time::Duration;

use super::RateLimiter;
use crate::algorithm::Adjust;
use crate::cell::Algorithm;
use crate::clock::duration_to_nanos;
use crate::decision::Decision;

impl<A: Algorithm> RateLimiter<A> {
    /// Refuses every request for `duration` from now (a zero duration does nothing), and
    /// returns the state after it, taking nothing: `allowed` and `retry_after` as a check of
    /// one permit would find them now (refused, until the block ends), `remaining` and
    /// `reset_after` as [`peek`](Self::peek) reports them. A block never shortens what the
    /// limiter owes already; what it is at the end of the block depends on the algorithm
    /// (the guide's [Penalties](crate::guide::penalties) page).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::builder(Quota::per_second(10)?).clock(clock.clone()).build();
    /// let d = limiter.block(Duration::from_secs(5));
    /// assert_eq!(d.retry_after, Some(Duration::from_secs(5)));
    /// clock.advance(Duration::from_secs(5));
    /// assert!(limiter.try_acquire());
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn block(&self, duration: Duration) -> Decision {
        let d = duration_to_nanos(duration);
        self.adjust(|now| Adjust::Block {
            until: now.saturating_add(d),
        })
    }

    /// Charges `n` permits now, even into debt (saturating at what the algorithm's state
    /// holds), and returns the state after it as [`block`](Self::block) does.
    ///
    /// ```
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::builder(Quota::per_second(10)?).clock(ManualClock::new()).build();
    /// assert_eq!(limiter.penalize(4).remaining, 6);
    /// assert!(!limiter.penalize(100).allowed);
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn penalize(&self, n: u64) -> Decision {
        self.adjust(|_| Adjust::Penalize(n))
    }

    /// Gives `n` permits back, never above a full limit, and returns the state after it as
    /// [`block`](Self::block) does.
    ///
    /// ```
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::builder(Quota::per_second(10)?).clock(ManualClock::new()).build();
    /// assert!(limiter.try_acquire_n(10).is_ok());
    /// assert_eq!(limiter.reward(3).remaining, 3);
    /// assert_eq!(limiter.reward(30).remaining, 10);
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn reward(&self, n: u64) -> Decision {
        self.adjust(|_| Adjust::Reward(n))
    }

    /// Back to a fresh limiter's state (a full limit; with [`Gcra`](crate::Gcra), holes left
    /// by cancelled reservations are dropped too). Reservations made before give nothing back
    /// when cancelled after it, unless the limiter has booked nothing since.
    ///
    /// ```
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::builder(Quota::per_minute(1)?).clock(ManualClock::new()).build();
    /// assert!(limiter.try_acquire());
    /// limiter.reset();
    /// assert!(limiter.try_acquire());
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn reset(&self) {
        let _ = self.adjust(|_| Adjust::Reset);
    }

    fn adjust(&self, op: impl Fn(crate::Nanos) -> Adjust) -> Decision {
        match self.engine.adjust(&self.slot(), op) {
            Ok(d) => d,
            // The direct limiter's one cell is always tracked.
            Err(_) => self.peek(),
        }
    }
}
