//! The connection (one server or a cluster), the per-call deadline, and script invocation:
//! `EVALSHA`, and `EVAL` when the server answers `NOSCRIPT` (its script cache is empty after a
//! restart, a failover or `SCRIPT FLUSH`). Either way one decision is one script run.
//! Failures are classified in `failure.rs`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::ConnectionManager;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{ErrorKind, RedisError, ServerErrorKind};

use super::cluster;
use super::command::command;
use super::error::RedisLimitError;
use super::failure::{classify, Failure};
use super::meter::Meter;
use super::sentinel::SentinelConn;

// Plain statistics counters (no protocol between them, `Relaxed`): std atomics, not the core
// cells' loom facade.

/// A Lua script with its SHA1, computed once.
pub(crate) struct LuaScript {
    pub(crate) body: &'static str,
    sha: String,
}

impl LuaScript {
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }

    pub(crate) fn new(body: &'static str) -> LuaScript {
        LuaScript {
            body,
            sha: ::redis::Script::new(body).get_hash().to_owned(),
        }
    }
}

/// Where the scripts run: a reconnecting multiplexed connection to one server, or a cluster
/// connection (routing each call by its one key; redirects are followed in `cluster.rs`).
/// Both are cheap handles over one shared socket per node, so every task clones them.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    /// The primary named by Redis Sentinel, found again after a failover.
    Sentinel(Arc<SentinelConn>),
}

/// The connection, its deadline, and the counters.
pub(crate) struct ScriptClient {
    conn: Conn,
    deadline: Duration,
    pub(crate) meter: Meter,
}

impl Conn {
    /// A `PING` whose answer is ignored: the first use, which makes the first connection
    /// (through Sentinel, after asking for the primary).
    pub(crate) async fn first_use(self) {
        let ping = ::redis::cmd("PING");
        let _ = match self {
            Conn::Single(mut m) => ping.query_async::<()>(&mut m).await,
            Conn::Cluster(mut c) => ping.query_async::<()>(&mut c).await,
            Conn::Sentinel(s) => match s.resolve().await.ok().and_then(|()| s.current()) {
                Some(mut m) => ping.query_async::<()>(&mut m).await,
                None => return,
            },
        };
    }
}

impl ScriptClient {
    pub(crate) fn new(
        conn: Conn,
        deadline: Duration,
        name: Option<&str>,
        trace_keys: bool,
    ) -> ScriptClient {
        ScriptClient {
            conn,
            deadline,
            meter: Meter::new(name, trace_keys),
        }
    }

    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// A failure of this client's call as the error to return.
    pub(crate) fn error(&self, failure: Failure) -> RedisLimitError {
        RedisLimitError::from_failure(failure, self.deadline)
    }

    /// Runs `script` on `key` with `ARGV = [op, args...]`, within the deadline (which covers
    /// a connection still being made, the `NOSCRIPT` fallback and cluster redirects). The
    /// reply is a list of integers; a failure is classified ([`classify`]).
    pub(crate) async fn eval(
        &self,
        script: &LuaScript,
        key: &str,
        op: &str,
        args: &[i64],
    ) -> Result<Vec<i64>, Failure> {
        let call = async {
            match &self.conn {
                Conn::Single(c) => single(c.clone(), script, key, op, args, &self.meter).await,
                Conn::Sentinel(s) => match s.current() {
                    Some(c) => single(c, script, key, op, args, &self.meter).await,
                    None => Err(RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        "no primary found through sentinel yet",
                    ))),
                },
                Conn::Cluster(c) => {
                    cluster::eval(
                        c.clone(),
                        script.sha(),
                        script.body,
                        key,
                        op,
                        args,
                        &self.meter,
                    )
                    .await
                }
            }
        };
        let result = match tokio::time::timeout(self.deadline, call).await {
            Ok(Ok(reply)) => {
                self.meter.reply();
                return Ok(reply);
            }
            Ok(Err(e)) => classify(e),
            Err(_) => Failure::Timeout,
        };
        self.meter.failed(&result);
        if let (Conn::Sentinel(s), true) = (&self.conn, result.policy_decides()) {
            // The primary may have moved: ask the sentinels, in the background.
            s.resolve_soon();
        }
        Err(result)
    }
}

/// `EVALSHA`, and `EVAL` when the server answers `NOSCRIPT`, on one server.
async fn single(
    mut conn: ConnectionManager,
    script: &LuaScript,
    key: &str,
    op: &str,
    args: &[i64],
    meter: &Meter,
) -> Result<Vec<i64>, RedisError> {
    let reply = command("EVALSHA", script.sha(), key, op, args)
        .query_async(&mut conn)
        .await;
    match reply {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            // EVAL also caches the script on that node, so the next call is EVALSHA.
            meter.script_loaded();
            command("EVAL", script.body, key, op, args)
                .query_async(&mut conn)
                .await
        }
        other => other,
    }
}

impl fmt::Debug for ScriptClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The name `Debug` printed before the type was renamed: the output does not change.
        f.debug_struct("Backend")
            .field(
                "conn",
                &match self.conn {
                    Conn::Single(_) => "single server",
                    Conn::Cluster(_) => "cluster",
                    Conn::Sentinel(_) => "sentinel",
                },
            )
            .field("deadline", &self.deadline)
            .finish()
    }
}
