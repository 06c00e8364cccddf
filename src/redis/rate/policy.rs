//! What a decision is when Redis could not answer: [`FailurePolicy`].

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::KeyedRateLimiter;
use crate::Quota;
use crate::{AcquireError, Decision};

use super::super::connection::error::RedisLimitError;
use super::super::connection::failure::Failure;
use super::algorithm::RedisAlgorithm;
use crate::Gcra;

/// What the limiter does when Redis could not answer: no reply within the deadline, no
/// connection (refused, lost, not made yet), the cluster down for the key's slot, a server
/// loading or busy, a slot migration that did not settle within the deadline.
///
/// The policy decides nothing else: when Redis answers with an error (a wrong-type or foreign
/// value at a state key, a script error) or an unexpected reply, every policy returns that
/// typed error ([`RedisLimitError::Server`], [`RedisLimitError::UnexpectedReply`]), since
/// admitting or refusing would hide a bug. The table of which failure is which is in the guide
/// (`tollgate::guide`, "Across machines: Redis"). Nor does it apply to changes made by hand
/// (`reset`, `block`, `penalize`, `reward`): they are not decisions, so every policy returns
/// their failure (and a fallback limiter is left as it is).
///
/// Every policy answers within the deadline; none of them hides the failure from metrics
/// (see [`RedisStats`](super::super::RedisStats)), and [`RedisDecision::server_time`] is `None` for a
/// decision the policy made. `A` is the limiter's algorithm: a fallback limiter runs the same
/// one.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::redis::FailurePolicy;
/// use tollgate::{KeyedRateLimiter, Quota, SlidingLog};
///
/// // Each of, say, 4 instances admits a quarter of the shared limit on its own while Redis is away.
/// let local = KeyedRateLimiter::<String>::builder(Quota::per_second(25).unwrap())
///     .algorithm(SlidingLog)
///     .unwrap()
///     .build();
/// let policy: FailurePolicy<SlidingLog> = FailurePolicy::Fallback(Arc::new(local));
/// # let _ = policy;
/// let _closed: FailurePolicy = FailurePolicy::Closed { retry_after: Duration::from_secs(1) };
/// ```
///
/// [`RedisDecision::server_time`]: super::super::RedisDecision::server_time
#[derive(Default)]
#[non_exhaustive]
pub enum FailurePolicy<A: RedisAlgorithm = Gcra> {
    /// Return the failure as [`RedisLimitError::Timeout`] or [`RedisLimitError::Unavailable`]: the
    /// caller decides. The default, so that nothing is admitted or refused silently.
    #[default]
    Error,
    /// Admit: every request of at most the limit is allowed (availability over enforcement).
    /// `remaining` is `limit - n` and `reset_after` zero: Redis's state is unknown.
    Open,
    /// Refuse: every request is denied with this `retry_after` (enforcement over
    /// availability). Waiting methods fail with [`AcquireError::RateLimited`].
    Closed {
        /// The `retry_after` reported in the meantime.
        retry_after: Duration,
    },
    /// Decide in this process with an in-process limiter running the same algorithm, on the
    /// same Redis key name (so different quotas and algorithms stay apart). Its quota applies
    /// to `check`/`check_n`; calls that carry their own quota (`check_with`, `check_n_with`, `throttle`) use
    /// that one, through its `check_n_with` (whose refusal is [`RedisLimitError::InvalidQuota`]).
    /// Each process admits on its own, so give it the shared quota divided by the
    /// number of processes.
    Fallback(Arc<KeyedRateLimiter<String, A>>),
}

impl<A: RedisAlgorithm> Clone for FailurePolicy<A> {
    fn clone(&self) -> Self {
        match self {
            FailurePolicy::Error => FailurePolicy::Error,
            FailurePolicy::Open => FailurePolicy::Open,
            FailurePolicy::Closed { retry_after } => FailurePolicy::Closed {
                retry_after: *retry_after,
            },
            FailurePolicy::Fallback(l) => FailurePolicy::Fallback(l.clone()),
        }
    }
}

impl<A: RedisAlgorithm> fmt::Debug for FailurePolicy<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailurePolicy::Error => f.write_str("Error"),
            FailurePolicy::Open => f.write_str("Open"),
            FailurePolicy::Closed { retry_after } => f
                .debug_struct("Closed")
                .field("retry_after", retry_after)
                .finish(),
            FailurePolicy::Fallback(l) => f.debug_tuple("Fallback").field(&l.quota()).finish(),
        }
    }
}

impl<A: RedisAlgorithm> FailurePolicy<A> {
    /// The same policy for a limiter running `B`: a fallback limiter only if it runs `B`
    /// already (`Err` gives the policy back otherwise).
    pub(crate) fn into_algorithm<B: RedisAlgorithm>(self) -> Result<FailurePolicy<B>, Self> {
        Ok(match self {
            FailurePolicy::Error => FailurePolicy::Error,
            FailurePolicy::Open => FailurePolicy::Open,
            FailurePolicy::Closed { retry_after } => FailurePolicy::Closed { retry_after },
            FailurePolicy::Fallback(l) => {
                let any: Arc<dyn Any + Send + Sync> = l.clone();
                match any.downcast::<KeyedRateLimiter<String, B>>() {
                    Ok(same) => FailurePolicy::Fallback(same),
                    Err(_) => return Err(FailurePolicy::Fallback(l)),
                }
            }
        })
    }

    /// The decision this policy makes for `n` permits on `redis_key` when Redis failed, or the
    /// error to return (always, for a failure the policy does not decide). `quota` is the call's own quota, if it carried one.
    pub(crate) fn decide(
        &self,
        failure: Failure,
        deadline: Duration,
        redis_key: &str,
        n: u64,
        limit: u64,
        quota: Option<Quota>,
    ) -> Result<Decision, RedisLimitError> {
        if !failure.policy_decides() {
            return Err(RedisLimitError::from_failure(failure, deadline));
        }
        match self {
            FailurePolicy::Error => Err(RedisLimitError::from_failure(failure, deadline)),
            FailurePolicy::Open => Ok(if n <= limit {
                Decision::allowed(limit, limit - n, Duration::ZERO)
            } else {
                Decision::never(limit, 0, Duration::ZERO)
            }),
            FailurePolicy::Closed { retry_after } => {
                Ok(Decision::denied(limit, 0, *retry_after, Duration::ZERO))
            }
            FailurePolicy::Fallback(local) => Ok(match quota {
                Some(q) => local.check_n_with(redis_key, n, q)?,
                None => local.check_n(redis_key, n),
            }),
        }
    }

    /// What a waiting acquire of `n` permits does when Redis failed: the time waited, or the
    /// error.
    pub(crate) async fn acquire(
        &self,
        failure: Failure,
        deadline: Duration,
        redis_key: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<Duration, RedisLimitError> {
        if !failure.policy_decides() {
            return Err(RedisLimitError::from_failure(failure, deadline));
        }
        match self {
            FailurePolicy::Error => Err(RedisLimitError::from_failure(failure, deadline)),
            FailurePolicy::Open => Ok(Duration::ZERO),
            FailurePolicy::Closed { retry_after } => {
                Err(RedisLimitError::Limited(AcquireError::RateLimited {
                    retry_after: *retry_after,
                }))
            }
            FailurePolicy::Fallback(local) => Ok(match timeout {
                Some(t) => local.try_acquire_n_for_async(redis_key, n, t).await?,
                None => local.acquire_n_async(redis_key, n).await?,
            }),
        }
    }
}
