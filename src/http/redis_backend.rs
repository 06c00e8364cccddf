//! [`Backend`] for the Redis limiter (features `tower` and `redis`): the same layer, with the
//! limit shared by every process that talks to the same Redis.
//!
//! Decisions are one script call each, so they arrive as [`Answer::Later`]. What happens when
//! Redis does not answer is the limiter's own [`FailurePolicy`](crate::redis::FailurePolicy):
//! `Open`, `Closed` and `Fallback` turn a failure into a decision before the layer sees it;
//! under `Error` (the default) the layer answers `503 Service Unavailable`.

use std::future::Future;
use std::time::Duration;

use super::backend::{denied, never, Answer, Backend, RefundBackend};
use crate::redis::{RedisAlgorithm, RedisLimitError, RedisRateLimiter, RedisReservation};
use crate::{AcquireError, Decision, Gcra, Quota};

/// A decision, or the failure the layer turns into a 503 (a refusal is a decision).
fn decision(
    quota: Quota,
    r: Result<Decision, RedisLimitError>,
) -> Result<Decision, RedisLimitError> {
    match r {
        Err(RedisLimitError::Limited(AcquireError::RateLimited { retry_after })) => {
            Ok(denied(quota, retry_after))
        }
        // Over the burst, or past the scripts' range: no state to report beyond the limit.
        Err(RedisLimitError::Limited(_)) => Ok(Decision {
            allowed: false,
            limit: quota.burst(),
            remaining: 0,
            retry_after: None,
            reset_after: Duration::ZERO,
        }),
        other => other,
    }
}

/// The Redis limiter, any algorithm it runs, keyed by strings. `acquire_within` is
/// [`try_acquire_for_async`](RedisRateLimiter::try_acquire_for_async), then a `peek` for the
/// headers: with GCRA FIFO across processes, and dropping the wait cancels its reservation;
/// with a window algorithm it decides again after each `retry_after` (not FIFO) and a dropped
/// wait holds nothing.
impl<A: RedisAlgorithm> Backend for RedisRateLimiter<A> {
    type Key = String;
    type Error = RedisLimitError;

    fn quota(&self) -> Quota {
        RedisRateLimiter::quota(self)
    }

    fn window(&self) -> Duration {
        self.span()
    }

    fn check(
        &self,
        key: &String,
        cost: u64,
    ) -> Answer<
        Result<Decision, RedisLimitError>,
        impl Future<Output = Result<Decision, RedisLimitError>> + Send + 'static,
    > {
        let (limiter, key) = (self.clone(), key.clone());
        Answer::<Result<Decision, RedisLimitError>, _>::Later(async move {
            let quota = limiter.quota();
            decision(quota, limiter.check_n(&key, cost).await)
        })
    }

    async fn acquire_within<'a>(
        &'a self,
        key: &'a String,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, RedisLimitError> {
        let quota = RedisRateLimiter::quota(self);
        match self.try_acquire_for_async(key, cost, max_wait).await {
            Ok(_) => self.peek(key).await.map(|mut d| {
                d.allowed = true;
                d
            }),
            Err(e) => decision(quota, Err(e)),
        }
    }
}

/// `reserve` is [`reserve`](RedisRateLimiter::reserve), cancelled at once if it is not ready
/// now; `refund` is [`RedisReservation::cancel`], which gives the permits back only while the
/// reservation is still the latest on its key (Redis keeps no holes): under concurrent
/// requests on one key some refunds give nothing back, which only ever counts more.
impl RefundBackend for RedisRateLimiter<Gcra> {
    type Reservation<'a> = RedisReservation;

    async fn reserve<'a>(
        &'a self,
        key: &'a String,
        cost: u64,
    ) -> Result<(Decision, Option<RedisReservation>), RedisLimitError> {
        let quota = RedisRateLimiter::quota(self);
        if cost > quota.burst() {
            return Ok((never(quota, self.peek(key).await?), None));
        }
        let r = match RedisRateLimiter::reserve(self, key, cost).await {
            Ok(r) => r,
            Err(e) => return decision(quota, Err(e)).map(|d| (d, None)),
        };
        if !r.delay().is_zero() {
            let wait = r.delay();
            // A failed cancel leaves the permits taken: stricter, never more.
            let _ = r.cancel().await;
            return Ok((denied(quota, wait), None));
        }
        let d = self.peek(key).await?;
        Ok((d, Some(r)))
    }

    async fn refund(&self, reservation: RedisReservation) {
        // A failed refund leaves the permits taken: stricter, never more.
        let _ = reservation.cancel().await;
    }
}
