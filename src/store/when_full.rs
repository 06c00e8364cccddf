//! [`WhenFull`]: what a new key meets at a full key cap.

/// What a keyed limiter does with a *new* key when its [`max_keys`] cap is reached and
/// reclaiming cold keys freed nothing. Keys already tracked are never affected by the cap.
///
/// [`max_keys`]: crate::KeyedRateLimiterBuilder::max_keys
///
/// ```
/// use std::num::NonZeroUsize;
/// use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};
///
/// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
///     .clock(ManualClock::new())
///     .max_keys(NonZeroUsize::MIN)
///     .when_full(WhenFull::Deny)
///     .build();
/// assert!(limiter.try_acquire(&1));
/// assert!(!limiter.try_acquire(&2)); // table full, key 1 still hot
/// assert!(!limiter.peek(&2).allowed); // and a peek says the same
/// assert!(limiter.check(&2).is_key_cap_reached()); // the table, not key 2's rate
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhenFull {
    /// Refuse the new key. Checks report `allowed: false`, `remaining: 0` and a `retry_after`
    /// (also used as `reset_after`) of the time until the earliest tracked key can be
    /// reclaimed, at least 1 ns and at most the quota's period or tolerance (judged from a
    /// lower bound on cold times unless the check swept: never later than that key turns
    /// cold, earlier if it got busier since). A peek of the new key reports the same.
    /// The refusal says it comes from the full table, not from the key's rate: `refused_by`
    /// is [`RefusedBy::KeyCap`](crate::RefusedBy::KeyCap), and `try_acquire_n` and
    /// `reserve_n` return
    /// [`AcquireError::KeyCapReached`](crate::AcquireError::KeyCapReached) with that wait;
    /// blocking and async `acquire` sleep until the earliest tracked key turns cold (once,
    /// judged from the keys as they are) and try again, refusing at once what a fresh key
    /// would refuse; the timed waits return `KeyCapReached` at once when a slot plus the key's
    /// own wait would end past the timeout. A keyed concurrency limiter refuses with
    /// `KeyCapReached { retry_after: None }`, waiting forms included.
    /// The safe default: the cap is never a way around the limit.
    #[default]
    Deny,
    /// Decide for the new key as for a fresh key (a full bucket) and store nothing: the request
    /// is limited only by its own cost against the burst. Availability over strictness: under
    /// a flood of distinct keys each one gets its burst.
    AllowUntracked,
}
