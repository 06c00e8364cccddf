//! The builder's hot-key options: [`denial_cache`](RedisRateLimiterBuilder::denial_cache) and
//! [`coalesce`](RedisRateLimiterBuilder::coalesce).

use std::num::NonZeroUsize;

use super::super::algorithm::RedisAlgorithm;
use super::RedisRateLimiterBuilder;
#[cfg(doc)]
use crate::redis::connection::error::RedisLimitError;

impl<A: RedisAlgorithm> RedisRateLimiterBuilder<A> {
    /// Denies locally, with no round trip, the single-permit calls on a key that Redis has
    /// just denied one permit, until that denial's `retry_after` has passed (measured from
    /// when the denied call was sent, so never past Redis's own): a flood on one key (an
    /// attacker, a retry storm) then costs Redis one call per `retry_after` instead of one per
    /// request. At most `max_keys` denials are kept (when full, expired ones are dropped, and
    /// a new denial is not cached if none has expired), and expired ones are also swept while
    /// checks come, so none stays much more than a second past its `retry_after` (the guide's
    /// "A hot key" states the bound). Off by default.
    ///
    /// The reply is the one Redis would give: `remaining` 0, `retry_after` and `reset_after`
    /// as Redis sent them less the time since the denied call was sent,
    /// [`RedisDecision::server_time`] advanced by the same (so it may run ahead of Redis's
    /// clock by up to that call's round trip: the cached denial ends early, never late). It
    /// never refuses what Redis would admit, except after another process gives permits back:
    /// a [`reset`](crate::redis::RedisRateLimiter::reset) or
    /// [`reward`](crate::redis::RedisRateLimiter::reward) there is published and heard here
    /// within about a round trip (through a subscription of this limiter's own, made when it
    /// connects, on a connection the limiter made: none on one you made), and so is a
    /// cancelled [`RedisReservation`](crate::redis::RedisReservation); a local batch given
    /// back there, a `DEL` of a
    /// [`state_key`](crate::redis::RedisRateLimiter::state_key) not published, or anything
    /// while the subscription is down, is not, and the cache goes on refusing until the
    /// cached `retry_after` at worst (the guide's "A hot key" states the rule).
    /// Calls for more than one permit, and peeks, always ask Redis. Counted in
    /// [`RedisStats::local_denials`](crate::redis::RedisStats::local_denials).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .denial_cache(NonZeroUsize::new(10_000).unwrap());
    /// # let _ = b;
    /// ```
    ///
    /// [`RedisDecision::server_time`]: crate::redis::RedisDecision::server_time
    pub fn denial_cache(mut self, max_keys: NonZeroUsize) -> Self {
        self.hot.denial_cache = Some(max_keys);
        self
    }

    /// Coalesces concurrent checks on one key from this process: while one call on the key is
    /// in flight, the checks that arrive queue up and then go to Redis as one script call,
    /// which decides them in the order they arrived at one server time. Each caller gets its
    /// own exact [`Decision`](crate::Decision): the one the same calls, sent one by one at
    /// that instant, would get. Under load on one key, Redis runs one script per round trip
    /// instead of one per call. A queued call still answers within the
    /// [`deadline`](Self::deadline). Off by default. [`Gcra`](crate::Gcra) only: with
    /// another algorithm, [`connect`](Self::connect) returns [`RedisLimitError::Unsupported`].
    /// Counted in [`RedisStats::coalesced`](crate::redis::RedisStats::coalesced).
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .coalesce();
    /// # let _ = b;
    /// ```
    pub fn coalesce(mut self) -> Self {
        self.hot.coalesce = true;
        self
    }
}
