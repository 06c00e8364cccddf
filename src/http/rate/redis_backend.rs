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
        Err(RedisLimitError::Limited(_)) => Ok(Decision::never(quota.burst(), 0, Duration::ZERO)),
        other => other,
    }
}

/// The Redis limiter, any algorithm it runs, keyed by strings: one script call per decision.
/// The trait's `check_n_for_async` is the limiter's method of the same name
/// ([`check_n_for_async`](RedisRateLimiter::check_n_for_async)),
/// with the headers from the reply that granted it (no second call): with GCRA FIFO across
/// processes, and dropping the wait cancels its reservation; with a window algorithm it
/// decides again after each `retry_after` (not FIFO) and a dropped wait holds nothing.
impl<A: RedisAlgorithm> Backend for RedisRateLimiter<A> {
    type Key = String;
    type Error = RedisLimitError;

    fn quota(&self) -> Quota {
        RedisRateLimiter::quota(self)
    }

    fn window(&self) -> Duration {
        RedisRateLimiter::window(self)
    }

    /// The state is in Redis, each key expiring once it holds nothing.
    fn keys_bounded(&self) -> bool {
        true
    }

    fn check_n(
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

    async fn check_n_for_async<'a>(
        &'a self,
        key: &'a String,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, RedisLimitError> {
        self.check_n_for_async(key, cost, max_wait).await
    }
}

/// `try_reserve_n` is one script call that reserves only if the permits are ready now (a denial
/// writes nothing), with the headers from its reply; `refund` is
/// [`RedisReservation::cancel`], which gives the permits back only while the reservation is
/// still the latest on its key (Redis keeps no holes): under concurrent requests on one key
/// some refunds give nothing back, which only ever counts more.
impl RefundBackend for RedisRateLimiter<Gcra> {
    type Reservation<'a> = RedisReservation;

    async fn try_reserve_n<'a>(
        &'a self,
        key: &'a String,
        cost: u64,
    ) -> Result<(Decision, Option<RedisReservation>), RedisLimitError> {
        let quota = RedisRateLimiter::quota(self);
        if cost > quota.burst() {
            return Ok((never(quota, self.peek(key).await?), None));
        }
        match self.try_reserve_n_for(key, cost, Duration::ZERO).await {
            Ok(r) => Ok((r.granted(), Some(r))),
            Err(e) => decision(quota, Err(e)).map(|d| (d, None)),
        }
    }

    async fn refund(&self, reservation: RedisReservation) {
        // A failed refund leaves the permits taken: stricter, never more.
        let _ = reservation.cancel().await;
    }
}
