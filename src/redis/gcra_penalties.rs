//! GCRA's blocks, penalties and rewards on Redis: the in-process rule (the guide's
//! [Penalties](crate::guide::penalties) page, `algorithm::gcra::rule::adjust_holey`) run by
//! the script on the server's clock, one call each. [`adjust`] is the GCRA arm a generic
//! method over every algorithm can call; the public methods on `RedisRateLimiter<Gcra>` are
//! below it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Gcra;

use super::algorithm::{clamp_i64, CheckReply, Params, RedisAlgorithm};
use super::error::RedisLimitError;
use super::limiter::{RedisDecision, RedisRateLimiter};
use super::shared::Shared;

/// One change to a GCRA key on Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GcraAdjust {
    /// Refuse until `now + d` on the server's clock (rounded up to whole µs: never shorter).
    Block(Duration),
    /// Charge `n` permits now.
    Penalize(u64),
    /// Give `n` permits back, never above a full bucket.
    Reward(u64),
}

/// The end of time as the script counts it, in µs (`floor(MAX_NANOS / 1000)`): a block longer
/// than this saturates there, so every sum the script forms stays exact.
const MAX_US: u64 = crate::MAX_NANOS / 1000;

impl GcraAdjust {
    /// The script's op and its one argument (clamped to what the script handles exactly).
    fn op(self) -> (&'static str, i64) {
        match self {
            GcraAdjust::Block(d) => {
                let us = d.as_nanos().div_ceil(1000).min(u128::from(MAX_US));
                // At most MAX_US < 2^63.
                ("block", i64::try_from(us).unwrap_or(i64::MAX))
            }
            GcraAdjust::Penalize(n) => ("penalize", clamp_i64(n)),
            GcraAdjust::Reward(n) => ("reward", clamp_i64(n)),
        }
    }
}

/// Applies `op` to the GCRA state `state` under `params` and returns the state it left as the
/// in-process adjustments report it (`allowed` and `retry_after` of a one-permit check,
/// `remaining` and `reset_after` of a peek, taking nothing), with the server time. The script's
/// ops and arguments (`block`/`penalize`/`reward`, then `b`, `T`, the amount) are the window
/// scripts' too, so a generic caller can send them the same way.
///
/// The local denial cache is kept exact: the key's cached denial is replaced by the one this
/// reply states (a block or a penalty makes it longer; a reward may end it), or forgotten if the
/// reply admits one permit.
///
/// Errors are Redis's, whatever the failure policy (an adjustment is Redis state: no policy
/// can make it up).
pub(crate) async fn adjust(
    shared: &Arc<Shared>,
    state: &str,
    params: Params,
    op: GcraAdjust,
) -> Result<RedisDecision, RedisLimitError> {
    let (name, x) = op.op();
    let args = [clamp_i64(params.limit), clamp_i64(params.span_us), x];
    let sent = Instant::now();
    let reply = shared
        .backend
        .eval(&Gcra::spec().script, state, name, &args)
        .await
        .map_err(|f| RedisLimitError::from_failure(f, shared.backend.deadline()))?;
    let r = CheckReply::parse(&reply, params.limit)?;
    if let Some(cache) = &shared.hot.cache {
        cache.forget(state);
        // A one-permit denial with nothing left: exactly the reply a one-permit check would
        // get now (`record` keeps nothing else).
        cache.record(state, 1, sent, &reply);
    }
    Ok(RedisDecision {
        decision: r.decision,
        server_time: Some(Duration::from_micros(r.now_us)),
    })
}

impl RedisRateLimiter<Gcra> {
    /// Refuses every request of `key` for `duration` from now on the server's clock (rounded
    /// up to whole microseconds; zero does nothing), in every process, and returns the key's
    /// state after it, taking nothing: `allowed` and `retry_after` as a check of one permit
    /// would find them now, `remaining` and `reset_after` as [`peek`](Self::peek) reports them,
    /// with the server time it was made at (as [`decide`](Self::decide): "locked until" is
    /// `server_time + retry_after` on the clock every process shares).
    ///
    /// The in-process rule (the guide's [Penalties](crate::guide::penalties) page): `tat =
    /// max(tat, now + duration + tau - T)`, the bucket empty until the block's end and
    /// refilling at the quota's rate from there; it never shortens what the key owes, and it
    /// clears the key's holes. A block past the end of the limiter's time (about the year
    /// 2116 on Redis's clock) refuses for good.
    ///
    /// # Errors
    /// The Redis failure, whatever the [`FailurePolicy`](super::FailurePolicy) (nothing was
    /// recorded, or, after a timeout, perhaps it was).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// use std::time::Duration;
    /// let d = limiter.block("login:{alice}", Duration::from_secs(15 * 60)).await?;
    /// assert!(!d.decision.allowed);
    /// # Ok(()) }
    /// ```
    pub async fn block(
        &self,
        key: &str,
        duration: Duration,
    ) -> Result<RedisDecision, RedisLimitError> {
        self.gcra_adjust(key, GcraAdjust::Block(duration)).await
    }

    /// Charges `key` `n` permits now, even into debt (`tat = max(tat, now) + n*T`, saturating
    /// at the end of the limiter's time: refused for good), and returns the key's state after
    /// it as [`block`](Self::block) does. `n = 0` does nothing; the key's holes are kept.
    ///
    /// # Errors
    /// As [`block`](Self::block).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.penalize("api:{client9}", 5).await?;
    /// println!("{} left, retry after {:?}", d.decision.remaining, d.decision.retry_after);
    /// # Ok(()) }
    /// ```
    pub async fn penalize(&self, key: &str, n: u64) -> Result<RedisDecision, RedisLimitError> {
        self.gcra_adjust(key, GcraAdjust::Penalize(n)).await
    }

    /// Gives `key` `n` permits back, never above a full bucket (`tat = max(tat - n*T, now)`
    /// when the key owes anything; holes the lowered TAT passes are dropped, as they were free
    /// already), and returns the key's state after it as [`block`](Self::block) does.
    ///
    /// # Errors
    /// As [`block`](Self::block).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// limiter.try_acquire_n("upload:{user42}", 3).await?;
    /// let d = limiter.reward("upload:{user42}", 3).await?; // the upload failed: give it back
    /// assert_eq!(d.decision.remaining, d.decision.limit);
    /// # Ok(()) }
    /// ```
    pub async fn reward(&self, key: &str, n: u64) -> Result<RedisDecision, RedisLimitError> {
        self.gcra_adjust(key, GcraAdjust::Reward(n)).await
    }

    async fn gcra_adjust(
        &self,
        key: &str,
        op: GcraAdjust,
    ) -> Result<RedisDecision, RedisLimitError> {
        let params = self.shared.params;
        adjust(&self.shared, &self.key_under(key, params), params, op).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_blocks_up_and_clamp() {
        let op = |a: GcraAdjust| a.op();
        assert_eq!(op(GcraAdjust::Block(Duration::from_nanos(1))), ("block", 1));
        assert_eq!(
            op(GcraAdjust::Block(Duration::from_nanos(1001))),
            ("block", 2)
        );
        assert_eq!(op(GcraAdjust::Block(Duration::ZERO)), ("block", 0));
        assert_eq!(
            op(GcraAdjust::Block(Duration::MAX)),
            ("block", 4_611_686_018_427_387)
        );
        assert_eq!(op(GcraAdjust::Penalize(u64::MAX)), ("penalize", i64::MAX));
        assert_eq!(op(GcraAdjust::Reward(3)), ("reward", 3));
    }
}
