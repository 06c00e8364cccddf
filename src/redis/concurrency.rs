//! [`RedisConcurrencyLimiter`]: at most `limit` permits held per key across every process,
//! each grant a lease with an expiry on the server's clock and a fencing token.

mod builder;
mod keep_alive;
mod lease;
mod report;
mod script;
mod wait;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::AcquireError;

use super::connection::error::RedisLimitError;
use super::connection::failure::Failure;
use super::rate::limiter::{RedisRateLimiter, RedisStats};
use super::rate::policy::FailurePolicy;
use super::scripts::clamp_i64;
use super::waiting::{retry, Detached, Undo};
use script::{AcquireReply, InspectReply};

#[allow(deprecated)]
pub use builder::RedisSemaphoreBuilder;
pub use builder::{RedisConcurrencyLimiterBuilder, DEFAULT_LEASE};
pub use keep_alive::KeepAlive;
pub use lease::{Lease, LeaseId, Released};

/// A keyed concurrency limiter shared through Redis (a distributed semaphore): at most
/// [`limit`](Self::limit) permits per key held at once by every process that uses the same
/// Redis and prefix. The Redis twin of [`KeyedConcurrencyLimiter`](crate::KeyedConcurrencyLimiter).
/// Cheap to clone (one `Arc`).
///
/// Each grant is a [`Lease`] with an id, an expiry on the server's clock
/// ([`lease_duration`](Self::lease_duration) after the grant or the last renewal) and a
/// fencing token (strictly increasing per key). A holder that dies gives its permits back when
/// its lease ends; one that outlives its lease finds out when renewing or releasing
/// (`false`, [`Released::NotHeld`]), and a store it writes to can refuse it by its token.
///
/// The limit is this limiter's, fixed at build and not part of the Redis key: processes
/// configured with different limits share one count, each granting only while the count is
/// within its own limit (lowering it, as in a rolling deploy, revokes nothing: new grants wait
/// until enough leases end).
///
/// The methods follow the crate's [method grid](crate#the-method-grid) with `&str` keys:
/// `try_acquire`, `try_acquire_n`, `acquire_async`, `acquire_n_async`,
/// `try_acquire_for_async`, `try_acquire_n_for_async`; a refusal is
/// [`RedisLimitError::Limited`] with [`AcquireError::RateLimited`] (no permit free; its
/// `retry_after` is when the first current lease ends, a hint) or
/// [`AcquireError::ExceedsBurst`] (`n` above the limit: never). `n = 0` is granted at once
/// (a lease of no permits, with a token). Waiting polls with a growing, jittered back-off and
/// is **not FIFO** across processes: see [`acquire_n_async`](Self::acquire_n_async).
///
/// Every operation is one Lua script run on one Redis key, `<prefix>:sem:<key>` (a sorted set
/// of leases by expiry and the last token), on the server's clock; the key expires with its
/// last lease. One Redis key per limited key, so it works on a Redis Cluster whatever the key.
///
/// ```
/// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
/// use std::time::Duration;
/// use tollgate::redis::RedisConcurrencyLimiter;
///
/// let exports = RedisConcurrencyLimiter::builder(2) // at most 2 exports per account, fleet-wide
///     .lease(Duration::from_secs(30))
///     .connect("redis://127.0.0.1:6379/")
///     .await?;
/// match exports.try_acquire("{acct9}:export").await? {
///     Some(lease) => {
///         let held = lease.keep_alive(); // renewed every 10 s while the export runs
///         // ... export, writing with held.token() as the fencing token ...
///         let _ = held.release().await?;
///     }
///     None => println!("429: 2 exports already running"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisConcurrencyLimiter {
    inner: Arc<Inner>,
}

/// The former name of [`RedisConcurrencyLimiter`], kept so that code written against it
/// still compiles (with a deprecation warning): the same type, nothing else changed (the Redis
/// keys, `<prefix>:sem:<key>`, and the scripts are the same, so a fleet can mix both names).
///
/// ```
/// # #![allow(deprecated)]
/// # fn demo(old: &tollgate::redis::RedisSemaphore) -> &tollgate::redis::RedisConcurrencyLimiter {
/// old // the same type under both names
/// # }
/// ```
#[deprecated(since = "0.2.0", note = "renamed to RedisConcurrencyLimiter")]
pub type RedisSemaphore = RedisConcurrencyLimiter;

struct Inner {
    /// A rate limiter that is never asked to decide: the connection, deadline, prefix and
    /// counters every Redis call of this crate goes through.
    carrier: RedisRateLimiter,
    limit: u64,
    lease_us: u64,
    policy: FailurePolicy,
    /// Acquires, waits and the leases this process holds (features `metrics`, `tracing`).
    report: report::Report,
}

/// A lease granted, or no room now (with the time until the first lease ends).
type Attempt = Result<Lease, Duration>;

impl RedisConcurrencyLimiter {
    fn new(
        carrier: RedisRateLimiter,
        limit: u64,
        lease_us: u64,
        policy: FailurePolicy,
        name: Option<&str>,
    ) -> Self {
        RedisConcurrencyLimiter {
            inner: Arc::new(Inner {
                carrier,
                limit,
                lease_us,
                policy,
                report: report::Report::new(name),
            }),
        }
    }

    /// A lease of `n` permits this process held has ended (the in-flight gauge).
    pub(super) fn returned(&self, n: u64) {
        self.inner.report.returned(n);
    }

    /// The most permits held at once per key (by this limiter's grants).
    ///
    /// ```
    /// # fn demo(sem: &tollgate::redis::RedisConcurrencyLimiter) {
    /// println!("at most {} at once", sem.limit());
    /// # }
    /// ```
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.inner.limit
    }

    /// How long a lease lasts unless renewed.
    ///
    /// ```
    /// # fn demo(sem: &tollgate::redis::RedisConcurrencyLimiter) {
    /// println!("a crashed holder's permits come back within {:?}", sem.lease_duration());
    /// # }
    /// ```
    #[must_use]
    pub fn lease_duration(&self) -> Duration {
        Duration::from_micros(self.inner.lease_us)
    }

    /// The Redis key holding `key`'s leases: `<prefix>:sem:<key>`, for inspection
    /// (`ZRANGE .. WITHSCORES`, `PTTL`) or to reset a key (`DEL`, which also restarts its
    /// tokens from the server's clock).
    ///
    /// ```
    /// # fn demo(sem: &tollgate::redis::RedisConcurrencyLimiter) {
    /// assert_eq!(sem.state_key("{acct9}:export"), "tollgate:sem:{acct9}:export");
    /// # }
    /// ```
    #[must_use]
    pub fn state_key(&self, key: &str) -> String {
        format!("{}:sem:{key}", self.inner.carrier.shared.prefix)
    }

    /// What happened to the calls so far (as [`RedisRateLimiter::stats`]).
    ///
    /// ```
    /// # fn demo(sem: &tollgate::redis::RedisConcurrencyLimiter) {
    /// println!("{} timeouts", sem.stats().timeouts);
    /// # }
    /// ```
    #[must_use]
    pub fn stats(&self) -> RedisStats {
        self.inner.carrier.stats()
    }

    /// Takes one permit for `key` if one is free now.
    ///
    /// # Errors
    /// Under [`FailurePolicy::Error`], the Redis failure; `Ok(None)` when no permit is free
    /// (or, under [`FailurePolicy::Closed`], when Redis failed).
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// match sem.try_acquire("{user42}:export").await? {
    ///     Some(lease) => { let _ = lease.release().await?; }
    ///     None => println!("busy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self, key: &str) -> Result<Option<Lease>, RedisLimitError> {
        match self.try_acquire_n(key, 1).await {
            Ok(lease) => Ok(Some(lease)),
            Err(RedisLimitError::Limited(AcquireError::RateLimited { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Takes `n` permits for `key` at once, as one lease, if they are free now.
    ///
    /// # Errors
    /// [`RedisLimitError::Limited`] with [`AcquireError::RateLimited`] (not enough free; its
    /// `retry_after` is when the first current lease ends, which frees permits unless it is
    /// renewed or released earlier) or [`AcquireError::ExceedsBurst`] (`n` above the limit);
    /// under [`FailurePolicy::Error`] the Redis failure, under [`FailurePolicy::Closed`] its
    /// refusal.
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) {
    /// match sem.try_acquire_n("{user42}:export", 2).await {
    ///     Ok(lease) => drop(lease), // released in the background
    ///     Err(e) => println!("refused: {e}"),
    /// }
    /// # }
    /// ```
    pub async fn try_acquire_n(&self, key: &str, n: u64) -> Result<Lease, RedisLimitError> {
        self.acquire_within(key, n, Some(Duration::ZERO)).await
    }

    /// Takes one permit for `key`, waiting until one is free; see
    /// [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// # Errors
    /// As [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let lease = sem.acquire_async("{acct9}:migration").await?;
    /// # let _ = lease;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_async(&self, key: &str) -> Result<Lease, RedisLimitError> {
        self.acquire_n_async(key, 1).await
    }

    /// Takes `n` permits for `key` as one lease, waiting until they are free.
    ///
    /// Waiting polls Redis: after a refusal the task sleeps a jittered back-off (from 1 ms,
    /// doubling up to 50 ms, never past the first current lease's expiry) and tries again. It
    /// is **not FIFO**: each try competes with every other process's, so a waiter can be
    /// overtaken by later ones, and a large `n` by a stream of small ones. A waiter notices
    /// freed permits within its current back-off (at most 50 ms) plus a round trip.
    ///
    /// # Cancel safety
    /// Cancel-safe: each try runs in its own task, so a waiter dropped while a try is in
    /// flight still learns whether it was granted, and releases that lease in the background.
    ///
    /// # Errors
    /// [`AcquireError::ExceedsBurst`] (as `Limited`) if `n` is above the limit; under
    /// [`FailurePolicy::Error`] the Redis failure, under [`FailurePolicy::Closed`] its refusal.
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let lease = sem.acquire_n_async("{acct9}:workers", 3).await?;
    /// # let _ = lease;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_n_async(&self, key: &str, n: u64) -> Result<Lease, RedisLimitError> {
        self.acquire_within(key, n, None).await
    }

    /// Takes one permit for `key` if one is free within `timeout`; see
    /// [`try_acquire_n_for_async`](Self::try_acquire_n_for_async).
    ///
    /// # Errors
    /// As [`try_acquire_n_for_async`](Self::try_acquire_n_for_async).
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) {
    /// use std::time::Duration;
    /// if let Ok(lease) = sem.try_acquire_for_async("{acct9}:export", Duration::from_secs(1)).await {
    ///     let _ = lease.release().await;
    /// }
    /// # }
    /// ```
    pub async fn try_acquire_for_async(
        &self,
        key: &str,
        timeout: Duration,
    ) -> Result<Lease, RedisLimitError> {
        self.try_acquire_n_for_async(key, 1, timeout).await
    }

    /// Takes `n` permits for `key` as one lease if they are free within `timeout`, polling as
    /// [`acquire_n_async`](Self::acquire_n_async) (not FIFO). It never sleeps past the
    /// timeout: the last try is at the timeout, and nothing is held after giving up.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire_n_async`](Self::acquire_n_async).
    ///
    /// # Errors
    /// [`AcquireError::RateLimited`] (as `Limited`) if no room came within the timeout;
    /// as [`acquire_n_async`](Self::acquire_n_async) otherwise.
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) {
    /// use std::time::Duration;
    /// match sem.try_acquire_n_for_async("{acct9}:workers", 2, Duration::from_millis(200)).await {
    ///     Ok(lease) => drop(lease),
    ///     Err(e) => println!("busy: {e}"),
    /// }
    /// # }
    /// ```
    pub async fn try_acquire_n_for_async(
        &self,
        key: &str,
        n: u64,
        timeout: Duration,
    ) -> Result<Lease, RedisLimitError> {
        self.acquire_within(key, n, Some(timeout)).await
    }

    /// Extends the lease `id` on `key` to a full lease from now if it is still held (for a
    /// lease handed over from another process; a [`Lease`] renews itself with
    /// [`Lease::renew`]). `Ok(None)` if it had ended; else its new expiry (server clock since
    /// the epoch).
    ///
    /// # Errors
    /// The Redis failure, whatever the failure policy.
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter, id: tollgate::redis::LeaseId) -> Result<(), tollgate::redis::RedisLimitError> {
    /// if sem.renew("{acct9}:migration", &id).await?.is_none() {
    ///     println!("lost");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn renew(
        &self,
        key: &str,
        id: &LeaseId,
    ) -> Result<Option<Duration>, RedisLimitError> {
        self.renew_state(&self.state_key(key), id).await
    }

    /// Releases the lease `id` on `key` (for a lease handed over from another process; a
    /// [`Lease`] releases itself). A lease is released at most once: a second release, or one
    /// after the lease expired, is [`Released::NotHeld`] and changes nothing.
    ///
    /// # Errors
    /// The Redis failure, whatever the failure policy.
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter, id: tollgate::redis::LeaseId) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let _ = sem.release("{acct9}:migration", &id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, key: &str, id: &LeaseId) -> Result<Released, RedisLimitError> {
        self.release_state(&self.state_key(key), id).await
    }

    /// Whether a lease carrying fencing `token` is held on `key` now, on the server's clock:
    /// the check a downstream can make before accepting work from a holder (false once the
    /// lease expired or was released). Between this check and the write, the lease can still
    /// end; a store that keeps the largest token seen per resource and refuses smaller ones
    /// closes that gap (see [`Lease::token`]). Reads every live lease of the key: O(leases).
    ///
    /// # Errors
    /// The Redis failure, whatever the failure policy.
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter, token: u64) -> Result<(), tollgate::redis::RedisLimitError> {
    /// if !sem.check_token("{acct9}:migration", token).await? {
    ///     println!("409: stale holder");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check_token(&self, key: &str, token: u64) -> Result<bool, RedisLimitError> {
        if token == 0 {
            return Ok(false); // never granted: tokens start above the server's clock
        }
        Ok(self.inspect(key, token).await?.token_held)
    }

    /// The permits held on `key` now (by leases that have not ended).
    ///
    /// # Errors
    /// The Redis failure, whatever the failure policy.
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// println!("{} in flight", sem.in_flight("{acct9}:export").await?);
    /// # Ok(()) }
    /// ```
    pub async fn in_flight(&self, key: &str) -> Result<u64, RedisLimitError> {
        Ok(self.inspect(key, 0).await?.held)
    }

    async fn inspect(&self, key: &str, token: u64) -> Result<InspectReply, RedisLimitError> {
        let token = clamp_i64(token);
        let reply = self
            .eval(script::inspect(), &self.state_key(key), "inspect", &[token])
            .await?;
        InspectReply::parse(&reply)
    }

    pub(super) async fn renew_state(
        &self,
        state: &str,
        id: &LeaseId,
    ) -> Result<Option<Duration>, RedisLimitError> {
        let [t, nonce, n] = id.args();
        let lease = clamp_i64(self.inner.lease_us);
        let reply = self
            .eval(script::renew(), state, "renew", &[t, nonce, n, lease])
            .await?;
        script::parse_renew(&reply)
    }

    pub(super) async fn release_state(
        &self,
        state: &str,
        id: &LeaseId,
    ) -> Result<Released, RedisLimitError> {
        let reply = self
            .eval(script::release(), state, "release", &id.args())
            .await?;
        Ok(if script::parse_release(&reply)? {
            Released::Returned
        } else {
            Released::NotHeld
        })
    }

    /// A dropped lease's release: in a task, if there is a runtime (else the lease ends at
    /// its expiry).
    pub(super) fn release_in_background(&self, state: String, id: LeaseId) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let sem = self.clone();
            rt.spawn(async move {
                let _ = sem.release_state(&state, &id).await;
            });
        }
    }

    async fn eval(
        &self,
        script: &super::connection::client::LuaScript,
        state: &str,
        op: &str,
        args: &[i64],
    ) -> Result<Vec<i64>, RedisLimitError> {
        let client = &self.inner.carrier.shared.client;
        client
            .eval(script, state, op, args)
            .await
            .map_err(|f| client.error(f))
    }

    /// Tries until granted, refused for good, or past `timeout` (`None`: no bound).
    async fn acquire_within(
        &self,
        key: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<Lease, RedisLimitError> {
        let mut report = self.inner.report.waiting();
        let r = self.acquire_polling(key, n, timeout, &mut report).await;
        report.end(&r, n);
        r
    }

    async fn acquire_polling(
        &self,
        key: &str,
        n: u64,
        timeout: Option<Duration>,
        report: &mut report::Wait<'_>,
    ) -> Result<Lease, RedisLimitError> {
        let state = self.state_key(key);
        let mut poll = wait::Poll::new(timeout);
        retry(
            || self.attempt(&state, n),
            |first_ends| poll.next(first_ends).inspect(|_| report.sleeping()),
        )
        .await
    }

    /// One acquire script run, in its own task (see [`Detached`]); a Redis failure is
    /// decided by the policy.
    async fn attempt(&self, state: &str, n: u64) -> Result<Attempt, RedisLimitError> {
        let limit = self.inner.limit;
        if n > limit {
            return Err(AcquireError::ExceedsBurst {
                requested: n,
                burst: limit,
            }
            .into());
        }
        let nonce = wait::nonce();
        let id = move |token| LeaseId {
            token,
            nonce,
            permits: n,
        };
        let args = [limit, n, self.inner.lease_us, nonce].map(clamp_i64);
        let (client, key) = (self.inner.carrier.shared.client.clone(), state.to_owned());
        let call = async move { client.eval(script::acquire(), &key, "acquire", &args).await };
        // Dropped before the reply (the waiter went away): release what was granted.
        let (sem, key) = (self.clone(), state.to_owned());
        let undo = move |reply: Vec<i64>| -> Undo {
            Box::pin(async move {
                if let Ok(AcquireReply::Granted { token, .. }) = AcquireReply::parse(&reply) {
                    let _ = sem.release_state(&key, &id(token)).await;
                }
            })
        };
        let reply = match Detached::spawn(call, undo).reply().await {
            Ok(reply) => reply,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(Failure::Timeout),
        };
        let reply = match reply {
            Ok(reply) => AcquireReply::parse(&reply)?,
            Err(failure) => {
                let client = &self.inner.carrier.shared.client;
                return match &self.inner.policy {
                    // Only Closed decides (the builder refuses Open and Fallback: a lease
                    // needs Redis), and only when Redis could not answer: an error it
                    // answered with is typed under every policy.
                    FailurePolicy::Closed { retry_after } if failure.policy_decides() => {
                        client.meter.policy_decided();
                        Err(AcquireError::RateLimited {
                            retry_after: *retry_after,
                        }
                        .into())
                    }
                    _ => Err(client.error(failure)),
                };
            }
        };
        match reply {
            AcquireReply::Granted { token, expires_at } => Ok(Ok(Lease {
                sem: self.clone(),
                state: state.to_owned(),
                id: id(token),
                expires_at,
                done: false,
            })),
            AcquireReply::Busy { first_ends } => Ok(Err(first_ends)),
            AcquireReply::Never => Err(AcquireError::ExceedsBurst {
                requested: n,
                burst: limit,
            }
            .into()),
        }
    }
}

impl fmt::Debug for RedisConcurrencyLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConcurrencyLimiter")
            .field("prefix", &self.inner.carrier.shared.prefix)
            .field("limit", &self.inner.limit)
            .field("lease", &self.lease_duration())
            .field("on_failure", &self.inner.policy)
            .finish()
    }
}
