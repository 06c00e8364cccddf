//! Operators' changes to one key on Redis: `reset` (every algorithm: the key's one Redis key is
//! deleted, once the script has found it holds the algorithm's own state) and `block`,
//! `penalize`, `reward` (the algorithms whose script has those ops,
//! [`Spec::adjusts`](super::super::scripts::Spec)): each one script run deciding exactly as the
//! in-process algorithm's `adjust` (the guide's [Penalties](crate::guide::penalties) page), on
//! the server's clock.

use std::time::{Duration, Instant};

use super::super::connection::error::RedisLimitError;
use super::super::scripts::{clamp_i64, CheckReply, MAX_SPAN_US};
use super::algorithm::RedisAlgorithm;
use super::limiter::{RedisDecision, RedisRateLimiter};

/// The latest instant the scripts' clock reaches, in µs since the epoch: `MAX_NANOS` on a clock
/// reading Unix time, as the in-process limiter saturates (a longer block lasts until then).
/// A block's length is sent clamped to it, so `now + length` stays exact in Lua.
const MAX_US: u64 = crate::MAX_NANOS / 1000;

impl<A: RedisAlgorithm> RedisRateLimiter<A> {
    /// Forgets `key`'s state under the limiter's quota (the Redis key
    /// [`state_key`](Self::state_key) names is deleted): its next call in every process is
    /// decided as a fresh key's. Whether there was state. Every algorithm. This process's
    /// cached denial of the key, if any ([`denial_cache`](super::super::RedisRateLimiterBuilder::denial_cache)),
    /// is forgotten too, and the reset is published on the prefix's channel, so that other
    /// processes' caches forget theirs within about a round trip (the guide's
    /// [Redis](crate::guide::redis) page, "A hot key").
    ///
    /// A state under a per-call quota (`check_with`, `throttle`) is another key: delete the one
    /// [`state_key_with`](Self::state_key_with) names.
    ///
    /// # Errors
    /// The Redis failure under every [`FailurePolicy`](super::super::FailurePolicy): a reset is not a
    /// decision, so there is nothing for a policy to admit or refuse. A value tollgate did not
    /// write at the state key is [`RedisLimitError::Server`] (kind `Script`, or `WrongType` for
    /// another Redis type) and is not deleted.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// // An administrator unlocks the account.
    /// if limiter.reset("{user42}:login").await? {
    ///     println!("unlocked");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn reset(&self, key: &str) -> Result<bool, RedisLimitError> {
        let state = self.state_key(key);
        let s = &self.shared;
        // The algorithm's own script, op `reset`: it validates the key's value as every op
        // does (a value it did not write is an error, and stays), then deletes it.
        let (args, len) = s.params.check_args(0);
        let reply = s
            .client
            .eval(&A::spec().script, &state, "reset", &args[..len])
            .await
            .map_err(|f| s.client.error(f))?;
        s.hot.forget(&state);
        if let Some(b) = &s.batches {
            b.forget(&state);
        }
        self.shared.publish_loosened(&state).await;
        match reply.as_slice() {
            [deleted] => Ok(*deleted > 0),
            _ => Err(RedisLimitError::UnexpectedReply(format!("{reply:?}"))),
        }
    }

    /// Refuses every request of `key` for `duration` from now on the server's clock (rounded up
    /// to a whole microsecond; a zero duration does nothing), in every process, and returns the
    /// key's state after it, taking nothing: `allowed` and `retry_after` as a check of one
    /// permit would find them now, `remaining` and `reset_after` as [`peek`](Self::peek)
    /// reports them, with the server time it was made at (as [`decide`](Self::decide): so
    /// "locked until" is `server_time + retry_after` on the clock every process shares). Exactly the in-process [`KeyedRateLimiter::block`](crate::KeyedRateLimiter::block)'s
    /// rule for the algorithm (the guide's [Penalties](crate::guide::penalties) page): a
    /// window algorithm refuses until the block's end (the fixed and weighted windows: until
    /// the window holding it ends), then starts as that page says.
    ///
    /// # Errors
    /// [`RedisLimitError::Unsupported`] for an algorithm whose script has no blocks
    /// ([`Gcra`](crate::Gcra), for now); the Redis failure under every
    /// [`FailurePolicy`](super::super::FailurePolicy) (a change is not a decision).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter<tollgate::SlidingLog>) -> Result<(), tollgate::redis::RedisLimitError> {
    /// use std::time::Duration;
    /// let d = limiter.block("{user42}:login", Duration::from_secs(900)).await?;
    /// assert!(!d.decision.allowed);
    /// assert_eq!(d.decision.retry_after, Some(Duration::from_secs(900)));
    /// # Ok(()) }
    /// ```
    pub async fn block(
        &self,
        key: &str,
        duration: Duration,
    ) -> Result<RedisDecision, RedisLimitError> {
        let us = u64::try_from(duration.as_nanos().div_ceil(1000)).unwrap_or(u64::MAX);
        self.adjust(key, "block", us.min(MAX_US)).await
    }

    /// Charges `key` `n` permits now, even into debt (saturating at what the algorithm's state
    /// holds, which refuses everything until it leaves), and returns the key's state after it
    /// as [`block`](Self::block) does. `n = 0` does nothing. The in-process
    /// [`KeyedRateLimiter::penalize`](crate::KeyedRateLimiter::penalize)'s rule.
    ///
    /// # Errors
    /// As [`block`](Self::block).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter<tollgate::FixedWindow>) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.penalize("{user42}:search", 5).await?;
    /// println!("{} left in this window", d.decision.remaining);
    /// # Ok(()) }
    /// ```
    pub async fn penalize(&self, key: &str, n: u64) -> Result<RedisDecision, RedisLimitError> {
        self.adjust(key, "penalize", n.min(MAX_SPAN_US)).await
    }

    /// Gives `key` `n` permits back, never above a full limit (a key with nothing counted is
    /// left alone), and returns the key's state after it as [`block`](Self::block) does. The
    /// in-process [`KeyedRateLimiter::reward`](crate::KeyedRateLimiter::reward)'s rule. This
    /// process's cached denial of the key, if any, is forgotten, and the reward is published
    /// as [`reset`](Self::reset)'s is, so that other processes' caches forget theirs.
    ///
    /// # Errors
    /// As [`block`](Self::block).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter<tollgate::WeightedWindow>) -> Result<(), tollgate::redis::RedisLimitError> {
    /// // The upstream failed: give the permit back.
    /// let d = limiter.reward("{user42}:search", 1).await?;
    /// # let _ = d;
    /// # Ok(()) }
    /// ```
    pub async fn reward(&self, key: &str, n: u64) -> Result<RedisDecision, RedisLimitError> {
        self.adjust(key, "reward", n.min(MAX_SPAN_US)).await
    }

    /// Runs the script's `op` with `amount` on `key`'s state under the limiter's quota.
    async fn adjust(
        &self,
        key: &str,
        op: &str,
        amount: u64,
    ) -> Result<RedisDecision, RedisLimitError> {
        if !A::spec().adjusts {
            return Err(RedisLimitError::Unsupported(
                "this algorithm's script has no block, penalize or reward",
            ));
        }
        let p = self.shared.params;
        let state = self.state_key(key);
        let args = [
            p.limit_arg(),
            clamp_i64(p.span_us),
            clamp_i64(amount),
            p.sub_windows.map_or(0, i64::from),
            clamp_i64(A::most(p)),
        ];
        let s = &self.shared;
        let sent = Instant::now();
        // Read before the send: a forget from elsewhere (a reset heard of) between the send
        // and the record may postdate this reply, which must then not be cached.
        let before = s.hot.generation();
        let reply = s.client.eval(&A::spec().script, &state, op, &args).await;
        // Whatever happened, this process's cached denial of the key may be wrong now.
        s.hot.forget(&state);
        // What this forget moved the generation to if it was the only one since the send.
        let generation = before.wrapping_add(1);
        let reply = reply.map_err(|f| s.client.error(f))?;
        if op == "reward" {
            // Only a loosening change can make another process's cached denial wrong.
            self.shared.publish_loosened(&state).await;
        }
        let r = CheckReply::parse(&reply, p.limit)?;
        // A one-permit denial with nothing left (a block, a penalty) is exactly what a
        // one-permit check would get now: cache it (`record` keeps nothing else).
        s.hot.record(&state, 1, sent, generation, &reply);
        Ok(RedisDecision {
            decision: r.decision,
            server_time: Some(Duration::from_micros(r.now_us)),
        })
    }
}
