//! [`RedisRateLimiterBuilder`]: the quota, the algorithm, the key prefix, the per-call
//! deadline, the failure policy, and the connection.

mod batches;
mod hot_keys;

use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::{ClusterClient, ClusterConfig};
use ::redis::cluster_async::ClusterConnection;
use ::redis::sentinel::{SentinelClient, SentinelServerType};

use crate::{Quota, QuotaError};

use super::super::batch::Batches;
use super::super::connection::client::{Conn, ScriptClient};
use super::super::connection::error::RedisLimitError;
use super::super::connection::sentinel::SentinelConn;
use super::super::connection::subscribe::Source;
use super::super::scripts::Params;
use super::algorithm::{state_key, RedisAlgorithm};
use super::limiter::RedisRateLimiter;
use super::policy::FailurePolicy;
use super::shared::SharedLimiter;
use crate::Gcra;

/// The per-call deadline unless configured: long enough for a loaded loopback or LAN round
/// trip, short enough that a slow Redis cannot stall the service behind it.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(50);

/// Configures a [`RedisRateLimiter`]: the quota, the algorithm, the key prefix, the per-call
/// deadline and the failure policy; then connects.
///
/// ```
/// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
/// use std::time::Duration;
/// use tollgate::redis::{FailurePolicy, RedisRateLimiter};
/// use tollgate::{Quota, SlidingLog};
///
/// let limiter = RedisRateLimiter::builder(Quota::per_minute(100).unwrap())
///     .algorithm(SlidingLog)?
///     .prefix("myapp:rl")
///     .deadline(Duration::from_millis(20))
///     .on_failure(FailurePolicy::Open)
///     .connect("redis://127.0.0.1:6379/")
///     .await?;
/// # let _ = limiter;
/// # Ok(()) }
/// ```
#[must_use = "call .connect(..) to get a limiter"]
#[derive(Debug)]
pub struct RedisRateLimiterBuilder<A: RedisAlgorithm = Gcra> {
    quota: Quota,
    prefix: String,
    deadline: Duration,
    connect_timeout: Duration,
    policy: FailurePolicy<A>,
    algorithm: A,
    /// The `limiter` label of its metrics and its name in logs.
    name: Option<String>,
    /// The name that keys the state instead of the quota (`state_name`).
    state_name: Option<String>,
    /// Whether refusal events carry the key (feature `tracing`).
    trace_keys: bool,
    pub(super) hot: super::super::hot::HotOptions,
    pub(super) batches: Option<super::super::batch::BatchOptions>,
    /// A mistake found while configuring, reported by `connect`.
    error: Option<RedisLimitError>,
}

impl RedisRateLimiterBuilder<Gcra> {
    pub(crate) fn new(quota: Quota) -> Self {
        RedisRateLimiterBuilder {
            quota,
            prefix: "tollgate".to_owned(),
            deadline: DEFAULT_DEADLINE,
            connect_timeout: Duration::from_secs(1),
            policy: FailurePolicy::Error,
            algorithm: Gcra,
            name: None,
            state_name: None,
            trace_keys: false,
            hot: Default::default(),
            batches: None,
            error: None,
        }
    }
}

// Here rather than beside the limiter: the builder is what it starts.
impl RedisRateLimiter {
    /// Starts configuring a limiter with `quota` (GCRA unless
    /// [`algorithm`](RedisRateLimiterBuilder::algorithm) says otherwise).
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap());
    /// # let _ = b;
    /// ```
    pub fn builder(quota: Quota) -> RedisRateLimiterBuilder<Gcra> {
        RedisRateLimiterBuilder::new(quota)
    }
}

impl<A: RedisAlgorithm> RedisRateLimiterBuilder<A> {
    /// Runs `alg` instead of the current algorithm (GCRA unless chosen), checking at once that
    /// it can run the builder's quota: the refusal comes from the call that causes it. The
    /// same check, error and signature as
    /// [`RateLimiterBuilder::algorithm`](crate::RateLimiterBuilder::algorithm) and
    /// [`KeyedRateLimiterBuilder::algorithm`](crate::KeyedRateLimiterBuilder::algorithm), where
    /// checking here keeps `build` infallible; connecting is fallible anyway, but one name
    /// fails alike on every builder. `alg` is one of the in-process algorithm types that have
    /// a script ([`RedisAlgorithm`]). What only Redis refuses is checked by
    /// [`connect`](Self::connect),
    /// with the rest of the configuration: a quota outside the scripts' range, a
    /// [`FixedWindow`](crate::FixedWindow) not
    /// [`epoch_aligned`](crate::FixedWindow::epoch_aligned), a
    /// [`SlidingWindow`](crate::SlidingWindow) whose sub-windows are not whole microseconds.
    /// Choose it before [`on_failure`](Self::on_failure): a [`FailurePolicy::Fallback`]
    /// limiter must run the same algorithm, else `connect` returns
    /// [`RedisLimitError::Unsupported`].
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] if `alg` cannot run the builder's quota.
    ///
    /// ```
    /// use tollgate::redis::RedisRateLimiter;
    /// use tollgate::{FixedWindow, Quota, QuotaError, SlidingLog};
    /// let b = RedisRateLimiter::builder(Quota::per_hour(1000).unwrap())
    ///     .algorithm(FixedWindow::epoch_aligned())?;
    /// # let _ = b;
    /// // A window's burst is its count: a burst of 10 in a window of 1000 is refused at once.
    /// let q = Quota::per_hour(1000).unwrap().with_burst(10).unwrap();
    /// let refused = RedisRateLimiter::builder(q).algorithm(SlidingLog);
    /// assert!(matches!(refused, Err(QuotaError::Unsupported(_))));
    /// # Ok::<(), QuotaError>(())
    /// ```
    pub fn algorithm<B: RedisAlgorithm>(
        self,
        alg: B,
    ) -> Result<RedisRateLimiterBuilder<B>, QuotaError> {
        alg.params(&self.quota, 0)?;
        let (policy, mismatch) = match self.policy.into_algorithm::<B>() {
            Ok(policy) => (policy, None),
            Err(_) => (
                FailurePolicy::Error,
                Some(RedisLimitError::Unsupported(
                    "the FailurePolicy::Fallback limiter runs another algorithm than the one \
                     chosen after it: call algorithm() before on_failure()",
                )),
            ),
        };
        Ok(RedisRateLimiterBuilder {
            quota: self.quota,
            prefix: self.prefix,
            deadline: self.deadline,
            connect_timeout: self.connect_timeout,
            policy,
            algorithm: alg,
            name: self.name,
            state_name: self.state_name,
            trace_keys: self.trace_keys,
            hot: self.hot,
            batches: self.batches,
            error: self.error.or(mismatch),
        })
    }

    /// Names the limiter: the `limiter` label of its metrics (feature `metrics`: replies,
    /// errors by kind, script reloads, policy decisions; unnamed limiters are labelled
    /// `unnamed`) and its name in the warnings of feature `tracing`.
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .name("api");
    /// # let _ = b;
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Keys the state by `name` and the user's key instead of by the quota
    /// (`<prefix>:gcra:<name>:<key>`), and keeps the quota in the state: processes with
    /// different quotas under one name share each key's state, and one under another quota
    /// than the state's converts it: GCRA keeps the debt in permits, rounded up, as
    /// [`RateLimiter::set_quota`](crate::RateLimiter::set_quota) does; the windows carry
    /// their counts, never releasing a permit earlier than the quota that counted it. So a limit changed in a rolling deploy never admits a fresh burst,
    /// and old and new processes together never admit more than the larger quota's bound (the
    /// guide's *Changing a limit in a rolling deploy*). Without it (the default), each quota
    /// has its own keys, as before.
    ///
    /// Setting it on a limiter that has run without it changes its keys once: every key
    /// starts afresh at that deploy. Per-call quotas (`check_with` and the other `_with`
    /// forms, `throttle`) other than the limiter's own still select their own state, keyed by
    /// the quota. Independent of [`name`](Self::name), the metrics label,
    /// so that renaming a dashboard label never resets limits.
    ///
    /// # Errors
    /// Reported by `connect`: [`RedisLimitError::InvalidStateName`] unless `name` is an ASCII
    /// letter followed by ASCII letters, digits, `_`, `-` or `.` (so it never reads as a
    /// quota's key segment and never contains a hash tag).
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .state_name("login");
    /// # let _ = b;
    /// ```
    pub fn state_name(mut self, name: impl Into<String>) -> Self {
        self.state_name = Some(name.into());
        self
    }

    /// Whether the refusal events of feature `tracing` carry the key (default `false`).
    /// Every decision that refuses (`check`, `decide`, `try_acquire` and their `_n` and
    /// `_with` forms) is a debug event, target `tollgate`, message `refused`, with the fields
    /// `limiter` (the [`name`](Self::name)), `outcome` (`denied` or `exceeds_burst`) and
    /// `permits`; with this on, also `key`. Off by default because keys (user ids, addresses,
    /// API keys) may be personal data or secrets.
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .name("login")
    ///     .trace_keys(true);
    /// # let _ = b;
    /// ```
    pub fn trace_keys(mut self, on: bool) -> Self {
        self.trace_keys = on;
        self
    }

    /// The first part of every key name (default `tollgate`). It may not contain `{` or `}`,
    /// so that a hash tag in your keys decides the cluster slot.
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .prefix("shop:rl");
    /// # let _ = b;
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The most any call waits for Redis (default [`DEFAULT_DEADLINE`], 50 ms), including a
    /// reconnect and a `NOSCRIPT` reload. Past it, the failure policy decides.
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .deadline(std::time::Duration::from_millis(10));
    /// # let _ = b;
    /// ```
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The most each connection attempt waits, and [`connect`](Self::connect) waits for the
    /// first connection (default 1 s).
    ///
    /// ```
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .connect_timeout(std::time::Duration::from_millis(200));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// What to do when Redis fails (default [`FailurePolicy::Error`]). A
    /// [`FailurePolicy::Fallback`] limiter runs the limiter's algorithm.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::redis::{FailurePolicy, RedisRateLimiter};
    /// use tollgate::{KeyedRateLimiter, Quota, WeightedWindow};
    ///
    /// let b = RedisRateLimiter::builder(Quota::per_second(5).unwrap()).on_failure(FailurePolicy::Open);
    /// # let _ = b;
    /// let local = KeyedRateLimiter::<String>::builder(Quota::per_second(2).unwrap())
    ///     .algorithm(WeightedWindow)
    ///     .unwrap()
    ///     .build();
    /// let b = RedisRateLimiter::builder(Quota::per_second(5).unwrap())
    ///     .algorithm(WeightedWindow)
    ///     .unwrap()
    ///     .on_failure(FailurePolicy::Fallback(Arc::new(local)));
    /// # let _ = b;
    /// ```
    pub fn on_failure(mut self, policy: FailurePolicy<A>) -> Self {
        self.policy = policy;
        self
    }

    /// Connects to one Redis server (`redis://host:port/db`, `rediss://` needs redis-rs TLS
    /// features) through a reconnecting, multiplexed connection: every task shares one socket,
    /// and after a disconnect the next calls reconnect in the background.
    ///
    /// Succeeds while the server is unreachable: it waits for the first connection at most
    /// [`connect_timeout`](Self::connect_timeout) (less when connections are refused), then
    /// the connection is made in the background (attempts 10 ms to 50 ms apart), and until it
    /// is made every call is decided by the [`FailurePolicy`] within its deadline. A service
    /// restarted during an outage starts.
    ///
    /// # Errors
    /// [`RedisLimitError::InvalidUrl`] for a URL the redis client does not read (no scheme, as
    /// in `127.0.0.1:6379`; another scheme; a bad database number; `rediss://` without a TLS
    /// feature of the `redis` crate), before anything is sent; and the errors of
    /// [`with_connection_manager`](Self::with_connection_manager).
    ///
    /// ```
    /// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
    /// let limiter = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .connect("redis://127.0.0.1:6379/")
    ///     .await?;
    /// # let _ = limiter;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self, url: &str) -> Result<RedisRateLimiter<A>, RedisLimitError> {
        self.open(|b| {
            RedisLimitError::check_url(url)?;
            let client =
                ::redis::Client::open(url).map_err(|e| RedisLimitError::invalid_url(url, &e))?;
            let manager = ConnectionManager::new_lazy_with_config(client, b.manager_config())
                .map_err(RedisLimitError::from_redis)?;
            let source = Source::nodes(&[url], b.connect_timeout);
            Ok((Conn::Single(manager), source))
        })
        .await
    }

    /// Connects to a Redis Cluster through any of its nodes. Each decision touches one key, so
    /// it runs on the node owning that key's slot; `MOVED` and `ASK` are followed within the
    /// call's deadline, with `ASKING` and the script sent to the named node as one pipeline so
    /// that no other command can take the `ASKING` flag (a reshard costs no errors).
    ///
    /// Like [`connect`](Self::connect), succeeds while no node is reachable (after waiting for
    /// the first connection at most the connect timeout): the connection is made in the
    /// background, and the failure policy decides meanwhile.
    ///
    /// # Errors
    /// As [`connect`](Self::connect) ([`RedisLimitError::InvalidUrl`] also for an empty list
    /// of nodes, or nodes whose URLs differ in TLS or credentials).
    ///
    /// ```
    /// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
    /// let limiter = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .connect_cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"])
    ///     .await?;
    /// # let _ = limiter;
    /// # Ok(()) }
    /// ```
    pub async fn connect_cluster<I, S>(
        self,
        nodes: I,
    ) -> Result<RedisRateLimiter<A>, RedisLimitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.open(|b| {
            let nodes: Vec<String> = nodes.into_iter().map(|n| n.as_ref().to_owned()).collect();
            RedisLimitError::check_urls(&nodes, "node")?;
            // What is left to refuse is the nodes' URLs taken together (TLS or credentials
            // that differ).
            let joined = nodes.join(", ");
            let urls: Vec<&str> = nodes.iter().map(String::as_str).collect();
            let source = Source::nodes(&urls, b.connect_timeout);
            let client = ClusterClient::builder(nodes)
                // Redirects come back to us (connection/cluster.rs): redis-rs's own ASK handling sends ASKING
                // apart from the command. Other retries are within our deadline anyway.
                .retries(0)
                .build()
                .map_err(|e| match e.kind() {
                    ::redis::ErrorKind::InvalidClientConfig => {
                        RedisLimitError::invalid_url(&joined, &e)
                    }
                    _ => RedisLimitError::from_redis(e),
                })?;
            let config = ClusterConfig::new()
                .set_connection_timeout(b.connect_timeout)
                .set_response_timeout(b.deadline);
            Ok((
                Conn::Cluster(client.get_pending_async_connection_with_config(config)),
                source,
            ))
        })
        .await
    }

    /// Connects to the primary that Redis Sentinel names `primary_name`, asking the
    /// `sentinels` (`redis://host:26379/`), and follows it through failovers: when a call
    /// finds Redis unavailable (the primary gone, or demoted and answering `READONLY`), the
    /// sentinels are asked again in the background (at most ten times a second) and calls go
    /// to the new primary once it is found; meanwhile the [`FailurePolicy`] decides each call
    /// within its deadline. Like [`connect`](Self::connect), succeeds while nothing answers.
    ///
    /// # Errors
    /// As [`connect`](Self::connect) ([`RedisLimitError::InvalidUrl`] also for an empty list
    /// of sentinels).
    ///
    /// ```
    /// # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
    /// let limiter = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5).unwrap())
    ///     .connect_sentinel(["redis://127.0.0.1:26379/"], "mymaster")
    ///     .await?;
    /// # let _ = limiter;
    /// # Ok(()) }
    /// ```
    pub async fn connect_sentinel<I, S>(
        self,
        sentinels: I,
        primary_name: &str,
    ) -> Result<RedisRateLimiter<A>, RedisLimitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.open(|b| {
            let urls: Vec<String> = sentinels
                .into_iter()
                .map(|n| n.as_ref().to_owned())
                .collect();
            RedisLimitError::check_urls(&urls, "sentinel")?;
            let primary = primary_name.to_owned();
            let client = SentinelClient::build(urls, primary, None, SentinelServerType::Master)
                .map_err(RedisLimitError::from_redis)?;
            let conn = SentinelConn::new(client, b.manager_config());
            let source = Source::sentinel(conn.clone(), b.connect_timeout);
            Ok((Conn::Sentinel(conn), Some(source)))
        })
        .await
    }

    /// The connect path of every `connect*`: the configuration checked first, then the
    /// connection `conn` makes (lazily: nothing sent yet), its first use awaited at most the
    /// connect timeout, so that the first calls of a normal start find a connection rather
    /// than spend their deadline making one. What the first use answers does not matter (the
    /// policy decides until the background connection is made); it goes on in the background
    /// past the bound. `conn` also says where the denial cache subscribes.
    async fn open(
        mut self,
        conn: impl FnOnce(&Self) -> Result<(Conn, Option<Source>), RedisLimitError>,
    ) -> Result<RedisRateLimiter<A>, RedisLimitError> {
        let params = self.validate()?;
        let (conn, source) = conn(&self)?;
        self.hot.check_conn(&conn)?;
        let connect_timeout = self.connect_timeout;
        let limiter = self.build(conn, source, params, false);
        let client = limiter.shared.client.clone();
        let first = tokio::spawn(async move { client.first_use().await });
        // The denial cache's subscription, made beside the first use: the cache's first
        // denials are then never forgotten by the subscription arriving after them.
        let subscribed = limiter.shared.hot.subscribe();
        // The first use runs in its own task already: awaiting it after the subscription
        // waits for both (no `join!`, which needs tokio's `macros`).
        let _ = tokio::time::timeout(connect_timeout, async {
            subscribed.await;
            let _ = first.await;
        })
        .await;
        Ok(limiter)
    }

    /// The reconnecting connection's settings: each attempt bounded by the connect timeout,
    /// attempts 10 ms to 50 ms apart.
    fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            // The deadline bounds every call; no second, longer timeout underneath.
            .set_response_timeout(None)
            // The delay between attempts bounds recovery after an outage: redis-rs adds up to
            // as much again of jitter, so a 25 ms cap waits at most 50 ms (from the restarted
            // server answering, `recovery_after_short_and_long_outages`: a 100 ms cap gave
            // medians of 73-90 ms, 133 ms worst; 25 ms, 11-26 ms and 39 ms). While the
            // server is down an attempt is a refused connect, costing it nothing; once it is
            // back, each connection connects once, whatever the delay.
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(25))
    }

    /// Uses a connection manager you configured yourself (TLS, credentials, retries).
    ///
    /// The manager's own response timeout (the `redis` crate's default is 500 ms) still
    /// applies under the limiter's [`deadline`](Self::deadline): a second timer on every call.
    /// A manager made with `ConnectionManagerConfig::set_response_timeout(None)` leaves the
    /// deadline alone to bound each call, as [`connect`](Self::connect)'s own manager does.
    ///
    /// # Errors
    /// [`RedisLimitError::QuotaOutOfRange`] if the quota does not fit the scripts' range;
    /// [`RedisLimitError::InvalidQuota`] if the algorithm refuses it in process too (a window
    /// algorithm's burst other than its count); [`RedisLimitError::Unsupported`] for an
    /// algorithm configured in a way Redis cannot run, or a fallback limiter of another
    /// algorithm; [`RedisLimitError::InvalidPrefix`] if the prefix contains `{` or `}`.
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let manager = redis::aio::ConnectionManager::new(client).await?;
    /// let limiter = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5)?)
    ///     .with_connection_manager(manager)?;
    /// # let _ = limiter;
    /// # Ok(()) }
    /// ```
    pub fn with_connection_manager(
        mut self,
        manager: ConnectionManager,
    ) -> Result<RedisRateLimiter<A>, RedisLimitError> {
        let params = self.validate()?;
        Ok(self.build(Conn::Single(manager), None, params, true))
    }

    /// Uses a cluster connection you configured yourself. Build it with
    /// [`ClusterClientBuilder::retries(0)`](::redis::cluster::ClusterClientBuilder::retries):
    /// redirects that surface are followed here (`ASKING` and the script as one pipeline),
    /// while redis-rs's own `ASK` handling sends `ASKING` apart from the command, where
    /// another task's command can take the flag.
    ///
    /// # Errors
    /// As [`with_connection_manager`](Self::with_connection_manager).
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::cluster::ClusterClient::new(vec!["redis://127.0.0.1:7000/"])?;
    /// let conn = client.get_async_connection().await?;
    /// let limiter = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(5)?)
    ///     .with_cluster_connection(conn)?;
    /// # let _ = limiter;
    /// # Ok(()) }
    /// ```
    pub fn with_cluster_connection(
        mut self,
        conn: ClusterConnection,
    ) -> Result<RedisRateLimiter<A>, RedisLimitError> {
        let params = self.validate()?;
        let conn = Conn::Cluster(conn);
        self.hot.check_conn(&conn)?;
        Ok(self.build(conn, None, params, true))
    }

    /// The configuration's first mistake, checked before connecting; else the scripts'
    /// parameters for the quota.
    fn validate(&mut self) -> Result<Params, RedisLimitError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.prefix.contains(['{', '}']) {
            return Err(RedisLimitError::InvalidPrefix(self.prefix.clone()));
        }
        self.hot.check(A::spec())?;
        let mut params = self.algorithm.redis_params(self.quota)?;
        if let Some(name) = &self.state_name {
            if !valid_state_name(name) {
                return Err(RedisLimitError::InvalidStateName(name.clone()));
            }
            params.keeps_quota = true;
        }
        if let Some(b) = &self.batches {
            b.check(A::NAME, params)?;
        }
        Ok(params)
    }

    /// `connected`: a connection you made (until a call finds it gone, a call past its
    /// deadline is a `Timeout`), or one the limiter is making. `source`: where the denial
    /// cache subscribes (none on a connection you made).
    fn build(
        self,
        conn: Conn,
        source: Option<Source>,
        params: Params,
        connected: bool,
    ) -> RedisRateLimiter<A> {
        let client = Arc::new(ScriptClient::new(
            conn,
            self.deadline,
            self.name.as_deref(),
            self.trace_keys,
            connected,
        ));
        let hot = self.hot.build(&client, source, &self.prefix);
        let batches = self.batches.and_then(|b| {
            // validate() checked the settings: `ok()` only drops what it refused.
            let (kind, sizing) = b.check(A::NAME, params).ok()?;
            Some(Batches::new(
                client.clone(),
                A::spec(),
                params,
                kind,
                sizing,
                hot.cache.clone(),
            ))
        });
        let own_state = state_key(
            &self.prefix,
            A::NAME,
            params,
            self.state_name.as_deref(),
            "",
        );
        let shared = Arc::new(SharedLimiter {
            batches,
            hot,
            client,
            prefix: self.prefix,
            quota: self.quota,
            params,
            state_name: self.state_name,
            own_state,
        });
        RedisRateLimiter {
            shared,
            policy: self.policy,
            algorithm: self.algorithm,
        }
    }
}

/// A `state_name`: an ASCII letter, then ASCII letters, digits, `_`, `-` or `.`. Never all
/// digits (a quota's span segment), never a `:` (another name's key), never a brace.
fn valid_state_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}
