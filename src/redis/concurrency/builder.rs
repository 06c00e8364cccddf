//! [`RedisConcurrencyLimiterBuilder`]: the limit, the lease's length, the failure policy, and the
//! connection (through the rate limiter's builder: the same connecting, deadline and prefix
//! rules, not a second copy).

use std::time::Duration;

use ::redis::aio::ConnectionManager;
use ::redis::cluster_async::ClusterConnection;

use crate::Quota;

use super::super::connection::error::RedisLimitError;
use super::super::rate::builder::RedisRateLimiterBuilder;
use super::super::rate::limiter::RedisRateLimiter;
use super::super::rate::policy::FailurePolicy;
use super::super::scripts::MAX_SPAN_US;
use super::RedisConcurrencyLimiter;

/// A lease's length unless configured: long enough that a renewal every third of it survives
/// a few slow round trips, short enough that a crashed holder's permits come back soon.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The quota of the rate limiter that carries the connection: never used to decide (the
/// concurrency limiter runs its own scripts), only to satisfy its builder.
const CARRIER: Quota = match Quota::per_second(1) {
    Ok(q) => q,
    Err(_) => panic!("1 per second is a valid quota"),
};

/// Configures a [`RedisConcurrencyLimiter`]: the limit, the lease's length, the key prefix, the per-call
/// deadline and the failure policy; then connects.
///
/// ```
/// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
/// use std::time::Duration;
/// use tollgate::redis::{FailurePolicy, RedisConcurrencyLimiter};
///
/// let exports = RedisConcurrencyLimiter::builder(2)
///     .lease(Duration::from_secs(10))
///     .prefix("myapp:sem")
///     .deadline(Duration::from_millis(20))
///     .on_failure(FailurePolicy::Closed { retry_after: Duration::from_secs(1) })
///     .connect("redis://127.0.0.1:6379/")
///     .await?;
/// # let _ = exports;
/// # Ok(()) }
/// ```
#[must_use = "call .connect(..) to get a concurrency limiter"]
#[derive(Debug)]
pub struct RedisConcurrencyLimiterBuilder {
    limit: u64,
    lease: Duration,
    policy: FailurePolicy,
    name: Option<String>,
    carrier: RedisRateLimiterBuilder,
}

/// The former name of [`RedisConcurrencyLimiterBuilder`], kept so that code written against
/// it still compiles (with a deprecation warning): the same type.
///
/// ```
/// # #![allow(deprecated)]
/// let b: tollgate::redis::RedisSemaphoreBuilder =
///     tollgate::redis::RedisConcurrencyLimiter::builder(2);
/// # let _ = b;
/// ```
#[deprecated(since = "0.2.0", note = "renamed to RedisConcurrencyLimiterBuilder")]
pub type RedisSemaphoreBuilder = RedisConcurrencyLimiterBuilder;

impl RedisConcurrencyLimiter {
    /// Starts configuring a concurrency limiter that lets at most `limit` permits per key be held at
    /// once, across every process using the same Redis and prefix.
    ///
    /// ```
    /// let b = tollgate::redis::RedisConcurrencyLimiter::builder(10);
    /// # let _ = b;
    /// ```
    pub fn builder(limit: u64) -> RedisConcurrencyLimiterBuilder {
        RedisConcurrencyLimiterBuilder {
            limit,
            lease: DEFAULT_LEASE,
            policy: FailurePolicy::Error,
            name: None,
            carrier: RedisRateLimiter::builder(CARRIER),
        }
    }
}

impl RedisConcurrencyLimiterBuilder {
    /// How long a lease lasts unless renewed (default [`DEFAULT_LEASE`], 30 s), on the
    /// server's clock: a holder that dies gives its permits back at most this long after its
    /// last grant or renewal. Whole milliseconds from 1 ms (Redis expires keys by the
    /// millisecond); [`Lease::keep_alive`](super::Lease::keep_alive) renews every third of it.
    ///
    /// ```
    /// let b = tollgate::redis::RedisConcurrencyLimiter::builder(1).lease(std::time::Duration::from_secs(5));
    /// # let _ = b;
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Names the limiter: the `limiter` label of its metrics (feature `metrics`: acquires by
    /// outcome, waits, `tollgate_in_flight` for the permits this process holds leases on, and
    /// its Redis calls' replies and errors; unnamed limiters are labelled `unnamed`) and its
    /// name in logs (feature `tracing`, which never logs its keys).
    ///
    /// ```
    /// let b = tollgate::redis::RedisConcurrencyLimiter::builder(4).name("exports");
    /// # let _ = b;
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.carrier = self.carrier.name(name.clone());
        self.name = Some(name);
        self
    }

    /// The prefix of the limiter's Redis keys (default `"tollgate"`): a key's state is at
    /// `<prefix>:sem:<your key>`. No braces (they would take over your keys' hash tags).
    ///
    /// ```
    /// let b = tollgate::redis::RedisConcurrencyLimiter::builder(1).prefix("myapp");
    /// # let _ = b;
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.carrier = self.carrier.prefix(prefix);
        self
    }

    /// The most any call waits for Redis (default
    /// [`DEFAULT_DEADLINE`](super::super::DEFAULT_DEADLINE), 50 ms), as for the rate limiter.
    ///
    /// ```
    /// let b = tollgate::redis::RedisConcurrencyLimiter::builder(1).deadline(std::time::Duration::from_millis(10));
    /// # let _ = b;
    /// ```
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.carrier = self.carrier.deadline(deadline);
        self
    }

    /// The most [`connect`](Self::connect) and each reconnect attempt wait (default 1 s).
    ///
    /// ```
    /// let b = tollgate::redis::RedisConcurrencyLimiter::builder(1).connect_timeout(std::time::Duration::from_millis(200));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.carrier = self.carrier.connect_timeout(timeout);
        self
    }

    /// What an acquire does when Redis fails (default [`FailurePolicy::Error`]):
    /// [`FailurePolicy::Error`] returns the failure, [`FailurePolicy::Closed`] refuses (as
    /// [`AcquireError::RateLimited`](crate::AcquireError::RateLimited) with its
    /// `retry_after`). [`FailurePolicy::Open`] and [`FailurePolicy::Fallback`] are refused by
    /// `connect`: a permit granted without Redis would have no lease to renew or release and
    /// no fencing token, and nothing would bound how many are held, which is the one promise
    /// of a concurrency limiter. Renewals, releases and checks always return the failure: a lease whose
    /// release fails ends at its expiry.
    ///
    /// ```
    /// use tollgate::redis::{FailurePolicy, RedisConcurrencyLimiter};
    /// let b = RedisConcurrencyLimiter::builder(1)
    ///     .on_failure(FailurePolicy::Closed { retry_after: std::time::Duration::from_secs(1) });
    /// # let _ = b;
    /// ```
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Connects to one Redis server, as
    /// [`RedisRateLimiterBuilder::connect`](super::super::RedisRateLimiterBuilder::connect).
    ///
    /// # Errors
    /// As [`with_connection_manager`](Self::with_connection_manager), and
    /// [`RedisLimitError::InvalidUrl`] for a URL the redis client does not read (no scheme,
    /// as in `127.0.0.1:6379`), before anything is sent. Redis down is no error here: the
    /// connection is made in the background, and calls meanwhile are
    /// [`RedisLimitError::Unavailable`] (or decided by the policy).
    ///
    /// ```
    /// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
    /// let sem = tollgate::redis::RedisConcurrencyLimiter::builder(3).connect("redis://127.0.0.1:6379/").await?;
    /// # let _ = sem;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self, url: &str) -> Result<RedisConcurrencyLimiter, RedisLimitError> {
        let (checked, carrier) = self.checked()?;
        Ok(checked.limiter(carrier.connect(url).await?))
    }

    /// Connects to a Redis Cluster through any of its nodes. A limited key is one Redis key,
    /// so every call runs on the node owning its slot, whatever your key looks like.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    ///
    /// ```
    /// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
    /// let sem = tollgate::redis::RedisConcurrencyLimiter::builder(3)
    ///     .connect_cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"])
    ///     .await?;
    /// # let _ = sem;
    /// # Ok(()) }
    /// ```
    pub async fn connect_cluster<I, S>(
        self,
        nodes: I,
    ) -> Result<RedisConcurrencyLimiter, RedisLimitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let (checked, carrier) = self.checked()?;
        Ok(checked.limiter(carrier.connect_cluster(nodes).await?))
    }

    /// Uses a connection manager you configured yourself.
    ///
    /// # Errors
    /// [`RedisLimitError::Unsupported`] for a limit outside `1..=2^51`, a lease outside
    /// 1 ms ..= 2^51 µs, or a [`FailurePolicy::Open`] or [`FailurePolicy::Fallback`] policy;
    /// [`RedisLimitError::InvalidPrefix`] if the prefix contains `{` or `}`.
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let manager = redis::aio::ConnectionManager::new(client).await?;
    /// let sem = tollgate::redis::RedisConcurrencyLimiter::builder(3).with_connection_manager(manager)?;
    /// # let _ = sem;
    /// # Ok(()) }
    /// ```
    pub fn with_connection_manager(
        self,
        manager: ConnectionManager,
    ) -> Result<RedisConcurrencyLimiter, RedisLimitError> {
        let (checked, carrier) = self.checked()?;
        Ok(checked.limiter(carrier.with_connection_manager(manager)?))
    }

    /// Uses a cluster connection you configured yourself.
    ///
    /// # Errors
    /// As [`with_connection_manager`](Self::with_connection_manager).
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::cluster::ClusterClient::new(vec!["redis://127.0.0.1:7000/"])?;
    /// let conn = client.get_async_connection().await?;
    /// let sem = tollgate::redis::RedisConcurrencyLimiter::builder(3).with_cluster_connection(conn)?;
    /// # let _ = sem;
    /// # Ok(()) }
    /// ```
    pub fn with_cluster_connection(
        self,
        conn: ClusterConnection,
    ) -> Result<RedisConcurrencyLimiter, RedisLimitError> {
        let (checked, carrier) = self.checked()?;
        Ok(checked.limiter(carrier.with_cluster_connection(conn)?))
    }

    /// The configuration, checked before any connection is made, and the carrier's builder
    /// to connect with.
    fn checked(self) -> Result<(Checked, RedisRateLimiterBuilder), RedisLimitError> {
        let lease_us = self.validate()?;
        let checked = Checked {
            limit: self.limit,
            lease_us,
            policy: self.policy,
            name: self.name,
        };
        Ok((checked, self.carrier))
    }

    /// The lease in whole microseconds, or the configuration's first mistake (the prefix is
    /// checked by the carrier's builder).
    fn validate(&self) -> Result<u64, RedisLimitError> {
        if !(1..=MAX_SPAN_US).contains(&self.limit) {
            return Err(RedisLimitError::Unsupported(
                "a semaphore's limit must be between 1 and 2^51 permits",
            ));
        }
        let lease_us = u64::try_from(self.lease.as_micros()).unwrap_or(u64::MAX);
        if !(1000..=MAX_SPAN_US).contains(&lease_us) {
            return Err(RedisLimitError::Unsupported(
                "a semaphore's lease must be between 1 ms and 2^51 us",
            ));
        }
        match self.policy {
            FailurePolicy::Error | FailurePolicy::Closed { .. } => Ok(lease_us),
            _ => Err(RedisLimitError::Unsupported(
                "a semaphore admits no permit without Redis: FailurePolicy::Open and \
                 Fallback are refused (use Error or Closed)",
            )),
        }
    }
}

/// A concurrency limiter's configuration once checked, waiting for its connected carrier.
struct Checked {
    limit: u64,
    lease_us: u64,
    policy: FailurePolicy,
    name: Option<String>,
}

impl Checked {
    fn limiter(self, carrier: RedisRateLimiter) -> RedisConcurrencyLimiter {
        let name = self.name.as_deref();
        RedisConcurrencyLimiter::new(carrier, self.limit, self.lease_us, self.policy, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(b: RedisConcurrencyLimiterBuilder) -> bool {
        matches!(b.validate(), Err(RedisLimitError::Unsupported(_)))
    }

    #[test]
    fn configuration_is_checked_before_connecting() {
        let ok = RedisConcurrencyLimiter::builder(1);
        assert_eq!(ok.validate().ok(), Some(30_000_000));
        assert!(refused(RedisConcurrencyLimiter::builder(0)));
        assert!(RedisConcurrencyLimiter::builder(MAX_SPAN_US)
            .validate()
            .is_ok());
        assert!(refused(RedisConcurrencyLimiter::builder(MAX_SPAN_US + 1)));
        assert!(refused(RedisConcurrencyLimiter::builder(u64::MAX)));
        let lease = |d| RedisConcurrencyLimiter::builder(1).lease(d);
        assert!(refused(lease(Duration::from_micros(999))));
        assert!(lease(Duration::from_millis(1)).validate().is_ok());
        assert!(refused(lease(Duration::MAX)));
        assert!(refused(
            RedisConcurrencyLimiter::builder(1).on_failure(FailurePolicy::Open)
        ));
        let closed = FailurePolicy::Closed {
            retry_after: Duration::from_secs(1),
        };
        assert!(RedisConcurrencyLimiter::builder(1)
            .on_failure(closed)
            .validate()
            .is_ok());
    }
}
