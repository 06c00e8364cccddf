//! The builder's hot-key options: [`denial_cache`](RedisRateLimiterBuilder::denial_cache),
//! [`coalesce`](RedisRateLimiterBuilder::coalesce), and their many-keys twin
//! [`group_keys`](RedisRateLimiterBuilder::group_keys).

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

    /// Groups concurrent checks on different keys from this process: while a few calls are
    /// in flight (two), the checks that arrive queue, and each time a call ends up to
    /// `max_keys` of them (at most 256) go to Redis as one script call that decides each
    /// key. What is paid per call (the request and its reply on both sides, the script's
    /// set-up and its reading of the clock) is then paid once per group instead of once per
    /// check, while each key's read and write still cost what they cost: with many concurrent checks on
    /// different keys the server, usually what runs out first, does more decisions per
    /// second. A check that finds fewer calls in flight goes alone at once, as without the
    /// option (no timer, never an added wait on an idle limiter); a queued check waits for
    /// a call in flight to end, then for its group's call (its
    /// [`deadline`](Self::deadline) counts from its own start, queueing included).
    ///
    /// Each [`Decision`](crate::Decision) is exactly the one a check of its own would get. A
    /// check the grouped call cannot decide on its fast path (a key with cancelled
    /// reservations' holes, a [`state_name`](Self::state_name) state written under another
    /// quota, a value tollgate did not write) is sent again as a check of its own, which
    /// decides it (or returns its typed error) as always; the other checks of the group are
    /// unaffected. A failed group call (a timeout, a lost connection) gives each of its checks
    /// that failure, for the [`FailurePolicy`](crate::redis::FailurePolicy). With
    /// [`coalesce`](Self::coalesce), a key's single checks are grouped, its batches go as
    /// they are; local batches' calls are not grouped. [`Gcra`](crate::Gcra) only, and not on
    /// a cluster (the keys of one call must share a slot): [`connect`](Self::connect),
    /// [`connect_cluster`](Self::connect_cluster) and
    /// [`with_cluster_connection`](Self::with_cluster_connection) return
    /// [`RedisLimitError::Unsupported`]. Off by default. Counted in
    /// [`RedisStats::group_calls`](crate::redis::RedisStats::group_calls) and
    /// [`RedisStats::grouped`](crate::redis::RedisStats::grouped).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .group_keys(NonZeroUsize::new(32).unwrap());
    /// # let _ = b;
    /// ```
    pub fn group_keys(mut self, max_keys: NonZeroUsize) -> Self {
        self.hot.group_keys = Some(max_keys);
        self
    }
}
