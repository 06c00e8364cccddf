//! The waiting acquires of a [`RedisRateLimiter`]: GCRA reserves once and sleeps until the
//! reservation is ready; the windows decide, sleep `retry_after` and decide again. When Redis
//! fails, the failure policy answers with the part of the timeout left.

use std::time::Duration;

use crate::{AcquireError, Decision};

use super::super::connection::error::RedisLimitError;
use super::super::connection::failure::Failure;
use super::super::scripts::{CheckReply, Params};
use super::super::waiting::retry;
use super::algorithm::RedisAlgorithm;
use super::limiter::{admitted, RedisRateLimiter};
use super::policy::FailurePolicy;
use super::reservation;

/// A wait's outcome before the failure policy: the time waited and the decision as the grant
/// left the key, or Redis's failure with the part of the timeout left.
type Waited = Result<(Duration, Decision), (Failure, Option<Duration>)>;

impl<A: RedisAlgorithm> RedisRateLimiter<A> {
    pub(super) async fn acquire_within(
        &self,
        key: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<Duration, RedisLimitError> {
        Ok(self.acquire_reporting(key, n, timeout).await?.0)
    }

    /// One permit; see [`check_n_for_async`](Self::check_n_for_async).
    ///
    /// # Errors
    /// As [`check_n_for_async`](Self::check_n_for_async).
    ///
    /// ```no_run
    /// # async fn demo(limiter: tollgate::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.check_for_async("user:42", std::time::Duration::from_millis(50)).await?;
    /// println!("allowed: {}, retry after: {:?}", d.allowed, d.retry_after);
    /// # Ok(()) }
    /// ```
    pub async fn check_for_async(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Decision, RedisLimitError> {
        self.check_n_for_async(key, 1, timeout).await
    }

    /// A check that may wait up to `timeout`, as the in-process
    /// [`KeyedRateLimiter::check_n_for_async`](crate::KeyedRateLimiter::check_n_for_async):
    /// takes `n` permits for `key` as [`try_acquire_n_for_async`](Self::try_acquire_n_for_async)
    /// does, and reports the outcome as a [`Decision`]: granted, `allowed` with the key's state
    /// from the reply that granted it (no second round trip); not grantable within `timeout`,
    /// denied with the wait needed as `retry_after` (nothing taken); never grantable (more
    /// than the burst, or past the scripts' range), denied with no `retry_after`. Granted by the
    /// failure policy while Redis fails, the key's state is unknown: it is asked for
    /// ([`peek`](Self::peek)), and that failing is the error.
    ///
    /// # Errors
    /// [`RedisLimitError`] when Redis fails and the failure policy does not decide (never
    /// [`RedisLimitError::Limited`]: a refusal is a denied decision).
    ///
    /// # Cancel safety
    /// As [`try_acquire_n_for_async`](Self::try_acquire_n_for_async).
    ///
    /// ```no_run
    /// # async fn demo(limiter: tollgate::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.check_n_for_async("user:42", 2, std::time::Duration::from_millis(50)).await?;
    /// if !d.allowed {
    ///     println!("retry after {:?}", d.retry_after);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check_n_for_async(
        &self,
        key: &str,
        n: u64,
        timeout: Duration,
    ) -> Result<Decision, RedisLimitError> {
        let quota = self.quota();
        let limit = quota.burst();
        // As in process: GCRA serves a count above the burst by waiting, `n * T - tau` even
        // from a full bucket; beyond `timeout` retrying can never help, so say so (no
        // retry-after) without a round trip. (The windows refuse such a count as
        // `ExceedsBurst`.)
        let least_wait = (quota.interval().as_nanos())
            .saturating_mul(u128::from(n))
            .saturating_sub(quota.tolerance().as_nanos());
        if least_wait > timeout.as_nanos() {
            return Ok(Decision::never(limit, 0, Duration::ZERO));
        }
        match self.acquire_reporting(key, n, Some(timeout)).await {
            Ok((_, Some(granted))) => Ok(granted),
            Ok((_, None)) => self
                .peek(key)
                .await
                .map(|d| Decision::allowed(d.limit, d.remaining, d.reset_after)),
            Err(RedisLimitError::Limited(AcquireError::RateLimited { retry_after })) => {
                Ok(Decision::denied(limit, 0, retry_after, retry_after))
            }
            // Over the burst, or past the scripts' range: no state to report beyond the limit.
            Err(RedisLimitError::Limited(_)) => Ok(Decision::never(limit, 0, Duration::ZERO)),
            Err(e) => Err(e),
        }
    }

    /// As [`acquire_within`](Self::acquire_within), with the decision as the grant left the
    /// key, from the same reply (`None` when the failure policy answered): what
    /// [`check_n_for_async`](Self::check_n_for_async) reports.
    async fn acquire_reporting(
        &self,
        key: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<(Duration, Option<Decision>), RedisLimitError> {
        let params = self.shared.params;
        let state = self.key_under(key, params);
        let waited = if A::spec().reserves {
            match reservation::reserve(&self.shared, state.clone(), params, n, timeout).await {
                Ok(ticket) => {
                    let ticket = ticket?;
                    let granted = ticket.granted();
                    let waited = reservation::sleep_until_ready(&self.shared, ticket).await;
                    Ok((waited, granted))
                }
                Err(failure) => Err((failure, timeout)),
            }
        } else {
            self.retry_until_admitted(&state, n, params, timeout)
                .await?
        };
        match waited {
            Ok((waited, granted)) => Ok((waited, Some(granted))),
            Err((failure, timeout_left)) => {
                let s = &self.shared;
                let decides =
                    failure.policy_decides() && !matches!(self.policy, FailurePolicy::Error);
                let r = self
                    .policy
                    .acquire(failure, s.client.deadline(), &state, n, timeout_left)
                    .await;
                if decides {
                    s.client.meter.policy_decided();
                }
                Ok((r?, None))
            }
        }
    }

    /// The windows' wait: decide, sleep `retry_after`, decide again. Returns the time waited,
    /// or the failure with the part of the timeout left for the policy.
    async fn retry_until_admitted(
        &self,
        state: &str,
        n: u64,
        params: Params,
        timeout: Option<Duration>,
    ) -> Result<Waited, RedisLimitError> {
        if n > params.limit {
            return Err(AcquireError::ExceedsBurst {
                requested: n,
                burst: params.limit,
            }
            .into());
        }
        let start = tokio::time::Instant::now();
        let attempt = || async move {
            let reply = match self.call_check(state, n, params).await {
                Ok(reply) => CheckReply::parse(&reply, params.limit)?,
                // Redis failed: the wait ends, for the policy with the time left.
                Err(failure) => {
                    let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
                    return Ok(Ok(Err((failure, left))));
                }
            };
            match admitted(&reply.decision, n) {
                Ok(()) => Ok(Ok(Ok((start.elapsed(), reply.decision)))),
                Err(AcquireError::RateLimited { retry_after }) => Ok(Err(retry_after)),
                Err(e) => Err(e.into()),
            }
        };
        // The hint is exact: sleep it, unless the grant would come past the timeout.
        let within = |retry_after: Duration| {
            let late = timeout.is_some_and(|t| start.elapsed().saturating_add(retry_after) > t);
            (!late).then_some(retry_after)
        };
        retry(attempt, within).await
    }
}
