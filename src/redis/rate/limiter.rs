//! [`RedisRateLimiter`]: the method family on Redis, each method one script call (or, waiting,
//! the loop in `wait.rs`), and what it reports ([`RedisDecision`], [`RedisStats`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::Gcra;
use crate::Quota;
use crate::{AcquireError, Decision, ThrottleReply};

use super::super::batch::Batches;
use super::super::connection::error::RedisLimitError;
use super::super::connection::failure::Failure;
use super::super::connection::meter::Meter;
use super::super::scripts::{CheckReply, Params};
use super::algorithm::{state_key, RedisAlgorithm};
use super::policy::FailurePolicy;
use super::reservation::{self, RedisReservation};
use super::shared::SharedLimiter;

/// A [`Decision`] and where it came from.
///
/// ```
/// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
/// let d = limiter.decide("user42").await?;
/// match d.server_time {
///     // An absolute reset time for an `X-RateLimit-Reset` header, on Redis's clock.
///     Some(now) => println!("resets at {} s since the epoch", (now + d.decision.reset_after).as_secs()),
///     None => println!("Redis unavailable; the failure policy decided"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RedisDecision {
    /// The decision.
    pub decision: Decision,
    /// The server's clock when the script decided (since the Unix epoch, whole µs), or `None`
    /// when Redis did not answer and the [`FailurePolicy`] decided.
    pub server_time: Option<Duration>,
}

/// What happened to the limiter's calls so far.
///
/// ```
/// # fn demo(limiter: &tollgate::redis::RedisRateLimiter) {
/// let s = limiter.stats();
/// println!("{} replies, {} timeouts, {} errors", s.replies, s.timeouts, s.errors);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStats {
    /// Script calls that got a reply.
    pub replies: u64,
    /// Calls that hit the deadline.
    pub timeouts: u64,
    /// Calls that failed (connection, or an error reply).
    pub errors: u64,
    /// Scripts sent again after `NOSCRIPT` (a restart, failover or `SCRIPT FLUSH`).
    pub script_loads: u64,
    /// Decisions and waits that the failure policy answered instead of Redis.
    pub policy_decisions: u64,
    /// Checks the local denial cache answered, with no round trip
    /// ([`denial_cache`](super::super::RedisRateLimiterBuilder::denial_cache)).
    pub local_denials: u64,
    /// Checks that went to Redis in one script call with others
    /// ([`coalesce`](super::super::RedisRateLimiterBuilder::coalesce)).
    pub coalesced: u64,
    /// Script calls that decided checks on several keys at once
    /// ([`group_keys`](super::super::RedisRateLimiterBuilder::group_keys)).
    pub group_calls: u64,
    /// Checks that went to Redis in such a call (`grouped / group_calls`: the mean group).
    pub grouped: u64,
    /// Batches taken from the shared state (each one script call)
    /// ([`local_batches`](super::super::RedisRateLimiterBuilder::local_batches)).
    pub batches_taken: u64,
    /// Unused permits of ended batches that Redis took back.
    pub permits_returned: u64,
    /// Calls granted from a local batch, with no round trip.
    pub local_grants: u64,
    /// The size of the last batch taken (0 before the first).
    pub batch_size: u64,
    /// Resets and rewards made elsewhere that the denial cache heard of (each forgets the
    /// key's cached denial, if any).
    pub invalidations: u64,
    /// Times the denial cache's subscription to those was lost after being made (until it
    /// is made again the cache may refuse until its cached `retry_after`, then it starts
    /// afresh).
    pub subscription_losses: u64,
}

/// A keyed rate limiter whose state lives in Redis, shared by every process that uses the same
/// Redis, prefix, algorithm and quota. Cheap to clone (one `Arc`).
///
/// The method family is the in-process [`KeyedRateLimiter`](crate::KeyedRateLimiter)'s (the
/// crate's [method grid](crate#the-method-grid)), taking `&str` keys first. Every method
/// returns a future for its round trip; `_async` marks exactly the methods that wait for
/// permits. `peek`, `check`, `check_n`, `check_with`, `check_n_with`, `try_acquire`,
/// `try_acquire_n`, `acquire_async`, `acquire_n_async`, `try_acquire_for_async`,
/// `try_acquire_n_for_async`, `quota`; with [`Gcra`] also `reserve`, `reserve_n`,
/// `try_reserve_for`, `try_reserve_n_for` and `throttle`; by hand, `reset` (every algorithm)
/// and `block`, `penalize`, `reward` (every algorithm; the guide's
/// [Penalties](crate::guide::penalties) page). No blocking forms (no blocking I/O) and no
/// `set_quota` (the quota selects the state keys). Redis's own: `decide`, `decide_n`,
/// `decide_with`, `decide_n_with` (a decision with the server time), `state_key`,
/// `state_key_with` (the Redis key of a key's state).
///
/// ```
/// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
/// use tollgate::redis::{FailurePolicy, RedisRateLimiter};
/// use tollgate::Quota;
///
/// let limiter = RedisRateLimiter::builder(Quota::per_second(100).unwrap())
///     .on_failure(FailurePolicy::Open)
///     .connect("redis://127.0.0.1:6379/")
///     .await?;
/// if limiter.try_acquire("{tenant7}:search").await? {
///     // serve
/// }
/// # Ok(()) }
/// ```
pub struct RedisRateLimiter<A: RedisAlgorithm = Gcra> {
    pub(crate) shared: Arc<SharedLimiter>,
    pub(super) policy: FailurePolicy<A>,
    pub(super) algorithm: A,
}

impl<A: RedisAlgorithm> Clone for RedisRateLimiter<A> {
    fn clone(&self) -> Self {
        RedisRateLimiter {
            shared: self.shared.clone(),
            policy: self.policy.clone(),
            algorithm: self.algorithm,
        }
    }
}

impl<A: RedisAlgorithm> RedisRateLimiter<A> {
    /// The quota of calls that do not carry their own.
    ///
    /// ```
    /// # fn demo(limiter: &tollgate::redis::RedisRateLimiter) {
    /// println!("{} per {:?}", limiter.quota().burst(), limiter.quota().tolerance());
    /// # }
    /// ```
    pub fn quota(&self) -> Quota {
        self.shared.quota
    }

    /// The window the limit refers to: how long a full limit takes to come back after it was
    /// used up, as the scripts run the quota: GCRA's tolerance (`burst * T`, with `T` in
    /// whole µs), a window algorithm's `W` (rounded up to whole µs). The in-process
    /// [`Algorithm::window`](crate::Algorithm::window) as Redis runs it.
    ///
    /// ```
    /// # fn demo(limiter: &tollgate::redis::RedisRateLimiter) {
    /// println!("the limit comes back in {:?}", limiter.window());
    /// # }
    /// ```
    #[must_use]
    pub fn window(&self) -> Duration {
        let p = self.shared.params;
        // GCRA (the algorithm that reserves) runs an interval; the windows a window.
        let window = if A::spec().reserves {
            p.span_us.saturating_mul(p.limit)
        } else {
            p.span_us
        };
        Duration::from_micros(window)
    }

    /// The Redis key holding `key`'s state under the limiter's quota, for inspection
    /// (`PTTL`, `MEMORY USAGE`) or to reset a key (`DEL`).
    ///
    /// ```
    /// # fn demo(limiter: &tollgate::redis::RedisRateLimiter) {
    /// // With Quota::per_second(10): T = 100_000 µs, burst 10.
    /// assert_eq!(limiter.state_key("{user42}:login"), "tollgate:gcra:100000:10:{user42}:login");
    /// # }
    /// ```
    pub fn state_key(&self, key: &str) -> String {
        self.key_under(key, self.shared.params)
    }

    /// The Redis key holding `key`'s state under `quota`: the one a
    /// [`check_with`](Self::check_with), [`decide_n_with`](Self::decide_n_with) or (with
    /// [`Gcra`]) [`throttle`](RedisRateLimiter::throttle) call with that quota uses (a quota
    /// selects its own state), for inspection or to reset it (`DEL`). For `throttle`'s
    /// arguments, [`Quota::from_throttle`] gives the quota.
    ///
    /// # Errors
    /// What those calls return for a quota the algorithm cannot run
    /// ([`RedisLimitError::QuotaOutOfRange`], [`RedisLimitError::InvalidQuota`],
    /// [`RedisLimitError::Unsupported`]).
    ///
    /// ```
    /// # fn demo(limiter: &tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// use tollgate::Quota;
    /// // CL.THROTTLE's arguments 15 30 60: burst 16, 30 per minute (T = 2 s).
    /// let quota = Quota::from_throttle(15, 30, 60)?;
    /// assert_eq!(
    ///     limiter.state_key_with("user123", quota)?,
    ///     "tollgate:gcra:2000000:16:user123"
    /// );
    /// # Ok(()) }
    /// ```
    pub fn state_key_with(&self, key: &str, quota: Quota) -> Result<String, RedisLimitError> {
        Ok(self.key_under(key, self.params_of(quota)?))
    }

    pub(super) fn key_under(&self, key: &str, params: Params) -> String {
        let s = &self.shared;
        if params == s.params {
            // The user's key comes last: after the limiter's own part, made once.
            let mut state = String::with_capacity(s.own_state.len() + key.len());
            state.push_str(&s.own_state);
            state.push_str(key);
            return state;
        }
        state_key(&s.prefix, A::NAME, params, s.state_name.as_deref(), key)
    }

    /// The scripts' parameters for a per-call `quota`: the limiter's own (its named state,
    /// if it has one) for the limiter's quota; any other quota selects its own state, keyed
    /// by the quota as without a name.
    fn params_of(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        let p = self.algorithm.redis_params(quota)?;
        Ok(if p.same_quota(self.shared.params) {
            self.shared.params
        } else {
            p
        })
    }

    /// What happened to the calls so far.
    ///
    /// ```
    /// # fn demo(limiter: &tollgate::redis::RedisRateLimiter) {
    /// assert_eq!(limiter.stats().script_loads, 0);
    /// # }
    /// ```
    pub fn stats(&self) -> RedisStats {
        let c = &self.shared.client.meter;
        let get = Meter::get;
        RedisStats {
            replies: get(&c.replies),
            timeouts: get(&c.timeouts),
            errors: get(&c.errors),
            script_loads: get(&c.script_loads),
            policy_decisions: get(&c.policy_decisions),
            local_denials: get(&self.shared.hot.local_denials),
            coalesced: get(&self.shared.hot.coalesced),
            group_calls: self.shared.hot.group_counts().0,
            grouped: self.shared.hot.group_counts().1,
            invalidations: self.shared.hot.invalidation_counts().0,
            subscription_losses: self.shared.hot.invalidation_counts().1,
            ..batch_stats(self.shared.batches.as_ref())
        }
    }

    /// Tries one permit for `key` under `quota` for this call, with the server time; see
    /// [`decide_n_with`](Self::decide_n_with).
    ///
    /// # Errors
    /// As [`decide_n_with`](Self::decide_n_with).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let premium = tollgate::Quota::per_second(1000).unwrap();
    /// let d = limiter.decide_with("{acct9}:api", premium).await?;
    /// assert_eq!(d.decision.limit, 1000);
    /// # Ok(()) }
    /// ```
    pub async fn decide_with(
        &self,
        key: &str,
        quota: Quota,
    ) -> Result<RedisDecision, RedisLimitError> {
        self.decide_n_with(key, 1, quota).await
    }

    /// Tries `n` permits for `key` under `quota` for this call (its own state: quotas never
    /// share keys), and reports the decision with the server time it was made at. `n = 0`
    /// peeks.
    ///
    /// # Errors
    /// What [`connect`](super::super::RedisRateLimiterBuilder::connect) returns for a quota the algorithm
    /// cannot run ([`RedisLimitError::QuotaOutOfRange`], [`RedisLimitError::InvalidQuota`],
    /// [`RedisLimitError::Unsupported`]); under [`FailurePolicy::Error`] the Redis failure;
    /// under [`FailurePolicy::Fallback`], [`RedisLimitError::InvalidQuota`] if the fallback
    /// limiter's own `check_n_with` refuses `quota` (a fixed-window count its words cannot
    /// hold).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let premium = tollgate::Quota::per_second(1000).unwrap();
    /// let d = limiter.decide_n_with("{acct9}:api", 3, premium).await?;
    /// assert_eq!(d.decision.limit, 1000);
    /// # Ok(()) }
    /// ```
    pub async fn decide_n_with(
        &self,
        key: &str,
        n: u64,
        quota: Quota,
    ) -> Result<RedisDecision, RedisLimitError> {
        let params = self.params_of(quota)?;
        self.decide_under(key, n, params, Some(quota)).await
    }

    /// Tries one permit for `key` and reports the decision with the server time it was made
    /// at; see [`decide_n`](Self::decide_n).
    ///
    /// # Errors
    /// Under [`FailurePolicy::Error`], the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.decide("user42").await?;
    /// println!("{:?} at {:?}", d.decision, d.server_time);
    /// # Ok(()) }
    /// ```
    pub async fn decide(&self, key: &str) -> Result<RedisDecision, RedisLimitError> {
        self.decide_n(key, 1).await
    }

    /// Tries `n` permits for `key` and reports the decision with the server time it was made
    /// at. `n = 0` peeks.
    ///
    /// # Errors
    /// Under [`FailurePolicy::Error`], the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.decide_n("user42", 2).await?;
    /// println!("{:?} at {:?}", d.decision, d.server_time);
    /// # Ok(()) }
    /// ```
    pub async fn decide_n(&self, key: &str, n: u64) -> Result<RedisDecision, RedisLimitError> {
        // A local grant returns before the call's future to Redis is made (or dropped).
        if let Some(d) = self.local_grant(key, n) {
            return Ok(d);
        }
        self.decide_under(key, n, self.shared.params, None).await
    }

    /// A call for `n` permits on `key` under the limiter's own quota (only those have batches:
    /// a quota selects its state) granted from this process's batches, if on and holding
    /// enough. Peeks always ask Redis. No state key is made: the batches find the key's entry
    /// by the user's key (the state key is the empty key's followed by it).
    fn local_grant(&self, key: &str, n: u64) -> Option<RedisDecision> {
        let batches = self.shared.batches.as_ref().filter(|_| n > 0)?;
        let params = self.shared.params;
        let g = batches.grant(key, n, || self.key_under("", params))?;
        Some(RedisDecision {
            decision: Decision::allowed(params.limit, g.held, Duration::from_micros(g.reset_us)),
            server_time: Some(Duration::from_micros(g.server_us)),
        })
    }

    async fn decide_under(
        &self,
        key: &str,
        n: u64,
        params: Params,
        quota: Option<Quota>,
    ) -> Result<RedisDecision, RedisLimitError> {
        let s = &self.shared;
        let state = self.key_under(key, params);
        match s.hot.check(&s.client, A::spec(), &state, n, params).await {
            Ok(reply) => {
                let r = CheckReply::parse(&reply, params.limit)?;
                if !r.decision.allowed {
                    s.client.meter.refused(key, n, &r.decision);
                }
                Ok(RedisDecision {
                    decision: r.decision,
                    server_time: Some(Duration::from_micros(r.now_us)),
                })
            }
            Err(failure) => {
                let decision = self.policy.decide(
                    failure,
                    s.client.deadline(),
                    &state,
                    n,
                    params.limit,
                    quota,
                )?;
                s.client.meter.policy_decided();
                if !decision.allowed {
                    s.client.meter.refused(key, n, &decision);
                }
                Ok(RedisDecision {
                    decision,
                    server_time: None,
                })
            }
        }
    }

    pub(super) async fn call_check(
        &self,
        state: &str,
        n: u64,
        p: Params,
    ) -> Result<Vec<i64>, Failure> {
        A::spec().check(&self.shared.client, state, n, p).await
    }

    /// Tries one permit for `key` and reports everything about the decision.
    ///
    /// # Errors
    /// Under [`FailurePolicy::Error`], the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.check("user42").await?;
    /// println!("allowed {}, remaining {}", d.allowed, d.remaining);
    /// # Ok(()) }
    /// ```
    pub async fn check(&self, key: &str) -> Result<Decision, RedisLimitError> {
        self.check_n(key, 1).await
    }

    /// Tries `n` permits for `key` at once; `n = 0` is [`peek`](Self::peek).
    ///
    /// # Errors
    /// Under [`FailurePolicy::Error`], the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let d = limiter.check_n("upload:{user42}", 5).await?;
    /// # let _ = d;
    /// # Ok(()) }
    /// ```
    pub async fn check_n(&self, key: &str, n: u64) -> Result<Decision, RedisLimitError> {
        Ok(self.decide_n(key, n).await?.decision)
    }

    /// Like [`check`](Self::check) under `quota` for this call only; see
    /// [`check_n_with`](Self::check_n_with).
    ///
    /// # Errors
    /// As [`check_n_with`](Self::check_n_with).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let free = tollgate::Quota::per_minute(10).unwrap();
    /// let d = limiter.check_with("{user42}:search", free).await?;
    /// # let _ = d;
    /// # Ok(()) }
    /// ```
    pub async fn check_with(&self, key: &str, quota: Quota) -> Result<Decision, RedisLimitError> {
        self.check_n_with(key, 1, quota).await
    }

    /// Like [`check_n`](Self::check_n) under `quota` for this call only (its own state).
    ///
    /// # Errors
    /// What [`connect`](super::super::RedisRateLimiterBuilder::connect) returns for a quota the algorithm
    /// cannot run ([`RedisLimitError::QuotaOutOfRange`], [`RedisLimitError::InvalidQuota`],
    /// [`RedisLimitError::Unsupported`]); under [`FailurePolicy::Error`] the Redis failure;
    /// under [`FailurePolicy::Fallback`], [`RedisLimitError::InvalidQuota`] if the fallback
    /// limiter's own `check_n_with` refuses `quota` (a fixed-window count its words cannot
    /// hold).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let free = tollgate::Quota::per_minute(10).unwrap();
    /// let d = limiter.check_n_with("{user42}:search", 2, free).await?;
    /// # let _ = d;
    /// # Ok(()) }
    /// ```
    pub async fn check_n_with(
        &self,
        key: &str,
        n: u64,
        quota: Quota,
    ) -> Result<Decision, RedisLimitError> {
        Ok(self.decide_n_with(key, n, quota).await?.decision)
    }

    /// The key's state right now, taking nothing and writing nothing.
    ///
    /// # Errors
    /// Under [`FailurePolicy::Error`], the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// println!("{} left", limiter.peek("user42").await?.remaining);
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self, key: &str) -> Result<Decision, RedisLimitError> {
        self.check_n(key, 0).await
    }

    /// Takes one permit for `key` if available now.
    ///
    /// # Errors
    /// Under [`FailurePolicy::Error`], the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// if !limiter.try_acquire("user42").await? {
    ///     println!("429");
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use = "a permit may have been denied"]
    pub async fn try_acquire(&self, key: &str) -> Result<bool, RedisLimitError> {
        Ok(self.check(key).await?.allowed)
    }

    /// Takes `n` permits for `key` at once if available now.
    ///
    /// # Errors
    /// [`RedisLimitError::Limited`] with [`AcquireError::RateLimited`] or
    /// [`AcquireError::ExceedsBurst`]; under [`FailurePolicy::Error`] the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) {
    /// if let Err(e) = limiter.try_acquire_n("user42", 3).await {
    ///     println!("refused: {e}, retry after {:?}", e.retry_after());
    /// }
    /// # }
    /// ```
    pub async fn try_acquire_n(&self, key: &str, n: u64) -> Result<(), RedisLimitError> {
        Ok(admitted(&self.check_n(key, n).await?, n)?)
    }

    /// Takes one permit for `key`, waiting asynchronously; see
    /// [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// # Errors
    /// As [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let waited = limiter.acquire_async("crawler:{example.com}").await?;
    /// println!("waited {waited:?}");
    /// # Ok(()) }
    /// ```
    pub async fn acquire_async(&self, key: &str) -> Result<Duration, RedisLimitError> {
        self.acquire_within(key, 1, None).await
    }

    /// Takes `n` permits for `key`, waiting asynchronously until they are granted; returns
    /// the time waited.
    ///
    /// With [`Gcra`], one script call reserves the permits and the task sleeps until they are
    /// ready: waiters in every process are granted in the order their reservations reached
    /// Redis, each woken once, and `n` may exceed the burst. With the windows, it decides, and
    /// after a denial sleeps for `retry_after` and decides again (not FIFO); `n` above the
    /// limit is [`AcquireError::ExceedsBurst`].
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future before it completes cancels a GCRA reservation (see
    /// [`RedisReservation::cancel`]), even while the reserve call is in flight.
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] (as `Limited`) for a wait beyond the scripts' range;
    /// what the failure policy says when Redis fails.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let waited = limiter.acquire_n_async("upload:{user42}", 8).await?;
    /// println!("waited {waited:?}");
    /// # Ok(()) }
    /// ```
    pub async fn acquire_n_async(&self, key: &str, n: u64) -> Result<Duration, RedisLimitError> {
        self.acquire_within(key, n, None).await
    }

    /// Takes one permit for `key` if it can be had within `timeout`, waiting asynchronously;
    /// see [`try_acquire_n_for_async`](Self::try_acquire_n_for_async).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// # Errors
    /// As [`try_acquire_n_for_async`](Self::try_acquire_n_for_async).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) {
    /// use std::time::Duration;
    /// if limiter.try_acquire_for_async("user42", Duration::from_millis(100)).await.is_err() {
    ///     println!("busy");
    /// }
    /// # }
    /// ```
    pub async fn try_acquire_for_async(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Duration, RedisLimitError> {
        self.try_acquire_n_for_async(key, 1, timeout).await
    }

    /// Takes `n` permits for `key` if they can be had within `timeout`, waiting
    /// asynchronously; otherwise returns at once. With [`Gcra`] nothing is reserved when the
    /// wait would exceed the timeout; with the windows it never sleeps past the timeout and
    /// takes nothing after giving up.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] (as `Limited`) with the wait that would be needed; as
    /// [`acquire_n_async`](Self::acquire_n_async) otherwise.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) {
    /// use std::time::Duration;
    /// match limiter.try_acquire_n_for_async("user42", 2, Duration::from_millis(100)).await {
    ///     Ok(waited) => println!("granted after {waited:?}"),
    ///     Err(e) => println!("busy: {e}"),
    /// }
    /// # }
    /// ```
    pub async fn try_acquire_n_for_async(
        &self,
        key: &str,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, RedisLimitError> {
        self.acquire_within(key, n, Some(timeout)).await
    }
}

impl RedisRateLimiter<Gcra> {
    /// redis-cell's `CL.THROTTLE key max_burst count period quantity`, value for value: burst
    /// `max_burst + 1`, `count` per `period_secs` seconds, cost `quantity`. The quota selects
    /// its own state (unlike redis-cell, a key under two quotas is two keys).
    ///
    /// # Errors
    /// [`RedisLimitError::InvalidQuota`] (zero count or period) or
    /// [`RedisLimitError::QuotaOutOfRange`]; under [`FailurePolicy::Error`] the Redis failure.
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// // CL.THROTTLE user123 15 30 60 1 on a fresh key
    /// let reply = limiter.throttle("user123", 15, 30, 60, 1).await?;
    /// assert_eq!(reply.to_array(), [0, 16, 15, -1, 2]);
    /// # Ok(()) }
    /// ```
    pub async fn throttle(
        &self,
        key: &str,
        max_burst: u64,
        count: u64,
        period_secs: u64,
        quantity: u64,
    ) -> Result<ThrottleReply, RedisLimitError> {
        let quota = Quota::from_throttle(max_burst, count, period_secs)?;
        let d = self.check_n_with(key, quantity, quota).await?;
        Ok(ThrottleReply::from_decision(&d))
    }

    /// Reserves one permit for `key` now; see [`reserve_n`](Self::reserve_n).
    ///
    /// # Errors
    /// As [`reserve_n`](Self::reserve_n).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let r = limiter.reserve("job:{tenant7}").await?;
    /// r.wait().await;
    /// # Ok(()) }
    /// ```
    pub async fn reserve(&self, key: &str) -> Result<RedisReservation, RedisLimitError> {
        self.reserve_n(key, 1).await
    }

    /// Reserves `n` permits for `key` now, in the order reservations reach Redis, without
    /// waiting: the reservation says how long to wait, and can be waited for or cancelled.
    /// `n` may exceed the burst (it then waits `(n - burst) * T` from a full bucket).
    ///
    /// # Errors
    /// [`AcquireError::Unrepresentable`] (as `Limited`) beyond the scripts' range; the Redis
    /// failure whatever the policy (a reservation is Redis state).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let r = limiter.reserve_n("batch:{tenant7}", 50).await?;
    /// println!("may start in {:?}", r.delay());
    /// r.wait().await;
    /// # Ok(()) }
    /// ```
    pub async fn reserve_n(&self, key: &str, n: u64) -> Result<RedisReservation, RedisLimitError> {
        self.reserve_upto(key, n, None).await
    }

    /// Reserves one permit for `key` only if it is ready within `max_wait`; see
    /// [`try_reserve_n_for`](Self::try_reserve_n_for).
    ///
    /// # Errors
    /// As [`try_reserve_n_for`](Self::try_reserve_n_for).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// use std::time::Duration;
    /// let r = limiter.try_reserve_for("job:{tenant7}", Duration::ZERO).await?;
    /// assert!(r.delay().is_zero());
    /// # Ok(()) }
    /// ```
    pub async fn try_reserve_for(
        &self,
        key: &str,
        max_wait: Duration,
    ) -> Result<RedisReservation, RedisLimitError> {
        self.try_reserve_n_for(key, 1, max_wait).await
    }

    /// As [`reserve_n`](Self::reserve_n), but only if the permits are ready within
    /// `max_wait`, without sleeping; `Duration::ZERO` reserves only what is available now.
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] (as `Limited`) with the wait that would have been
    /// needed, and nothing is written; others as for [`reserve_n`](Self::reserve_n).
    ///
    /// ```
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// use std::time::Duration;
    /// match limiter.try_reserve_n_for("batch:{tenant7}", 5, Duration::from_millis(200)).await {
    ///     Ok(r) => println!("may start in {:?}", r.delay()),
    ///     Err(e) => println!("not within 200 ms: {e}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_reserve_n_for(
        &self,
        key: &str,
        n: u64,
        max_wait: Duration,
    ) -> Result<RedisReservation, RedisLimitError> {
        self.reserve_upto(key, n, Some(max_wait)).await
    }

    async fn reserve_upto(
        &self,
        key: &str,
        n: u64,
        max_wait: Option<Duration>,
    ) -> Result<RedisReservation, RedisLimitError> {
        let params = self.shared.params;
        let state = self.key_under(key, params);
        match reservation::reserve(&self.shared, state, params, n, max_wait).await {
            Ok(ticket) => Ok(RedisReservation::new(self.shared.clone(), ticket?)),
            Err(f) => Err(self.shared.client.error(f)),
        }
    }
}

impl<A: RedisAlgorithm> fmt::Debug for RedisRateLimiter<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("algorithm", &A::NAME)
            .field("quota", &self.shared.quota)
            .field("prefix", &self.shared.prefix)
            .field("backend", &self.shared.client)
            .field("policy", &self.policy)
            .finish()
    }
}

/// A script's decision as the result of taking `n` permits: granted, refused for now, or never
/// grantable as one request (no `retry_after`).
pub(super) fn admitted(d: &Decision, n: u64) -> Result<(), AcquireError> {
    match d.retry_after {
        _ if d.allowed => Ok(()),
        Some(retry_after) => Err(AcquireError::RateLimited { retry_after }),
        None => Err(AcquireError::ExceedsBurst {
            requested: n,
            burst: d.limit,
        }),
    }
}

/// The batches' counts in [`RedisStats`] (zero without batches).
fn batch_stats(b: Option<&Batches>) -> RedisStats {
    let Some(b) = b else {
        return RedisStats::default();
    };
    let c = b.counts();
    RedisStats {
        batches_taken: Meter::get(&c.taken),
        permits_returned: Meter::get(&c.returned),
        local_grants: b.local_grants(),
        batch_size: Meter::get(&c.size),
        ..RedisStats::default()
    }
}
