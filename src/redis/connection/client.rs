//! The connection (one server or a cluster), the per-call deadline, and script invocation:
//! `EVALSHA`, and `EVAL` when the server answers `NOSCRIPT` (its script cache is empty after a
//! restart, a failover or `SCRIPT FLUSH`). Either way one decision is one script run.
//! Failures are classified in `failure.rs`.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::ConnectionManager;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{Cmd, ErrorKind, RedisError, ServerErrorKind};

use super::cluster;
use super::command::{command_keys, command_keys_in};
use super::error::RedisLimitError;
use super::failure::{classify, Failure, UnavailableError, UnavailableKind};
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
    /// Whether the server answered since the connection was last lost (or was never made):
    /// a call that runs out of its deadline while this is false was waiting for a connection
    /// (`Unavailable`), not for a script's reply (`Timeout`). Relaxed: a hint about the
    /// connection, ordering nothing else.
    answered: AtomicBool,
    pub(crate) meter: Meter,
}

impl Conn {
    /// A `PING`: the first use, which makes the first connection (through Sentinel, after
    /// asking for the primary). `None` when no primary was found.
    async fn ping(self) -> Option<Result<(), RedisError>> {
        let ping = ::redis::cmd("PING");
        Some(match self {
            Conn::Single(mut m) => ping.query_async::<()>(&mut m).await,
            Conn::Cluster(mut c) => ping.query_async::<()>(&mut c).await,
            Conn::Sentinel(s) => match s.resolve().await.ok().and_then(|()| s.current()) {
                Some(mut m) => ping.query_async::<()>(&mut m).await,
                None => return None,
            },
        })
    }
}

/// Whether a failure says the connection is gone or not made (as opposed to a server that
/// answered with an error, or did not answer in time).
fn no_connection(failure: &Failure) -> bool {
    matches!(failure, Failure::Unavailable(u) if u.kind() == UnavailableKind::Connection)
}

impl ScriptClient {
    /// `connected`: whether `conn` is known to be connected (one you made and gave us), or
    /// is yet to be made ([`first_use`](Self::first_use) says when it is).
    pub(crate) fn new(
        conn: Conn,
        deadline: Duration,
        name: Option<&str>,
        trace_keys: bool,
        connected: bool,
    ) -> ScriptClient {
        ScriptClient {
            conn,
            deadline,
            answered: AtomicBool::new(connected),
            meter: Meter::new(name, trace_keys),
        }
    }

    /// The first use of the connection (a `PING` whose answer does not matter), which makes
    /// it; notes when the server answered. A failure notes nothing: it may come after calls
    /// that have since been answered (the ping goes on in the background past `connect`).
    pub(crate) async fn first_use(&self) {
        let answered = match self.conn.clone().ping().await {
            Some(Ok(())) => true,
            Some(Err(e)) => !no_connection(&classify(e)),
            None => false,
        };
        if answered {
            self.note(true);
        }
    }

    /// Notes whether the server answered (else the connection is gone or not made).
    fn note(&self, answered: bool) {
        self.answered.store(answered, Ordering::Relaxed);
    }

    /// What a call that ran out of its deadline failed with. While the server has not
    /// answered since the connection was lost (or since the start), the call was waiting for
    /// a connection, being made or retried: Redis could not be reached, one variant with the
    /// refusals met by other calls meanwhile. Else the script was sent, and may have run.
    pub(crate) fn deadline_passed(&self) -> Failure {
        if self.answered.load(Ordering::Relaxed) {
            return Failure::Timeout;
        }
        Failure::Unavailable(UnavailableError::new(
            UnavailableKind::Connection,
            Some(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("none made within the {:?} deadline", self.deadline),
            ))),
        ))
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
        self.eval_keys(script, &[key], op, args).await
    }

    /// [`eval`](Self::eval) on several keys (`KEYS[1..k]`): on a cluster, only keys of one
    /// slot (the call goes to the first key's node).
    pub(crate) async fn eval_keys(
        &self,
        script: &LuaScript,
        keys: &[&str],
        op: &str,
        args: &[i64],
    ) -> Result<Vec<i64>, Failure> {
        let call = async {
            match &self.conn {
                Conn::Single(c) => single(c.clone(), script, keys, op, args, &self.meter).await,
                Conn::Sentinel(s) => match s.current() {
                    Some(c) => single(c, script, keys, op, args, &self.meter).await,
                    None => Err(RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        "no primary found through sentinel yet",
                    ))),
                },
                Conn::Cluster(c) => {
                    // One key per call on a cluster (grouping is refused there at build).
                    debug_assert_eq!(keys.len(), 1);
                    cluster::eval(
                        c.clone(),
                        script.sha(),
                        script.body,
                        keys[0],
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
                self.note(true);
                self.meter.reply();
                return Ok(reply);
            }
            Ok(Err(e)) => {
                let failure = classify(e);
                // An error reply is an answer; an I/O error, a connection gone.
                self.note(!no_connection(&failure));
                failure
            }
            Err(_) => self.deadline_passed(),
        };
        self.meter.failed(&result);
        if let (Conn::Sentinel(s), true) = (&self.conn, result.policy_decides()) {
            // The primary may have moved: ask the sentinels, in the background.
            s.resolve_soon();
        }
        Err(result)
    }
}

impl ScriptClient {
    /// `PUBLISH channel message` within the deadline: on a cluster from any node (each
    /// forwards it to every other).
    pub(crate) async fn publish(&self, channel: &str, message: &str) -> Result<(), Failure> {
        let mut cmd = ::redis::cmd("PUBLISH");
        cmd.arg(channel).arg(message);
        let call = async {
            match &self.conn {
                Conn::Single(c) => cmd.query_async::<()>(&mut c.clone()).await,
                Conn::Sentinel(s) => match s.current() {
                    Some(mut c) => cmd.query_async::<()>(&mut c).await,
                    None => Err(RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        "no primary found through sentinel yet",
                    ))),
                },
                Conn::Cluster(c) => cmd.query_async::<()>(&mut c.clone()).await,
            }
        };
        match tokio::time::timeout(self.deadline, call).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(classify(e)),
            Err(_) => Err(self.deadline_passed()),
        }
    }
}

thread_local! {
    /// An empty command whose buffers the thread's last `EVALSHA` call used: the next call
    /// builds its command in them, two allocations and two frees fewer per call (calls that
    /// overlap on a thread find it taken and allocate, as every call did before).
    static SPARE: Cell<Option<Cmd>> = const { Cell::new(None) };
}

/// `EVALSHA`, and `EVAL` when the server answers `NOSCRIPT`, on one server.
async fn single(
    mut conn: ConnectionManager,
    script: &LuaScript,
    keys: &[&str],
    op: &str,
    args: &[i64],
    meter: &Meter,
) -> Result<Vec<i64>, RedisError> {
    let spare = SPARE.with(Cell::take);
    let mut evalsha = command_keys_in(spare, "EVALSHA", script.sha(), keys, op, args);
    let reply = match query(&mut conn, &evalsha).await {
        // A refused connection sent nothing, and the manager has just begun connecting again:
        // the refusal may be stale (an idle manager keeps its last failed attempt until a
        // call), so one more try, within the caller's deadline.
        Err(e) if e.is_connection_refusal() => query(&mut conn, &evalsha).await,
        other => other,
    };
    // Packed and sent: its buffers serve the thread's next call (a call cancelled before
    // here drops them, and the next allocates anew).
    evalsha.clear();
    SPARE.with(|s| s.set(Some(evalsha)));
    match reply {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            // EVAL also caches the script on that node, so the next call is EVALSHA.
            meter.script_loaded();
            let eval = command_keys("EVAL", script.body, keys, op, args);
            query(&mut conn, &eval).await
        }
        other => other,
    }
}

/// `cmd.query_async(conn)`, step for step (the request, then an error reply as the error,
/// then the list of integers), through the manager's own method: the `ConnectionLike` call
/// that `query_async` makes boxes its future, one more allocation per call.
async fn query(conn: &mut ConnectionManager, cmd: &Cmd) -> Result<Vec<i64>, RedisError> {
    let reply = conn.send_packed_command(cmd).await?;
    Ok(::redis::from_redis_value(reply.extract_error()?)?)
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
