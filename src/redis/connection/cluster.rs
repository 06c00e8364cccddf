//! A script call on a Redis Cluster, following `MOVED` and `ASK` ourselves so that nothing can
//! come between `ASKING` and the command it is for.
//!
//! `ASKING` sets a one-shot flag on the connection, consumed by the next command. redis-rs
//! sends it as a request of its own on the node's shared, multiplexed connection, so under
//! concurrency another task's command can consume the flag and the redirected script gets
//! `MOVED` back (measured: hundreds of `ASK` errors during a reshard). Here `ASKING` and the
//! script go to the named node as one pipeline, written together on that connection: the
//! server runs them back to back. Our own cluster connections have redis-rs's retries off
//! (`retries(0)`, see `rate/builder.rs`), so every redirect comes back to this loop; on `MOVED`
//! redis-rs still refreshes its slot map, and the next try routes by the new map.

use std::time::Duration;

use ::redis::cluster_async::ClusterConnection;
use ::redis::cluster_routing::SingleNodeRoutingInfo;
use ::redis::{Cmd, ErrorKind, RedisError, ServerErrorKind, Value};

use super::command::command;
use super::meter::Meter;

/// Where the next try goes.
enum Target {
    /// To the node the slot map names for the key.
    Slot,
    /// To the node an `ASK` named, with `ASKING` in front.
    Asking { host: String, port: u16 },
}

/// Runs the script (`sha`, `body`) on `key` (`EVALSHA`, `EVAL` after `NOSCRIPT`), following
/// redirects until a reply or another error; the caller's deadline bounds the loop.
pub(crate) async fn eval(
    mut conn: ClusterConnection,
    sha: &str,
    body: &str,
    key: &str,
    op: &str,
    args: &[i64],
    meter: &Meter,
) -> Result<Vec<i64>, RedisError> {
    let mut target = Target::Slot;
    let mut send_body = false;
    let mut redirects = 0u32;
    loop {
        let cmd = if send_body {
            command("EVAL", body, key, op, args)
        } else {
            command("EVALSHA", sha, key, op, args)
        };
        let reply = match &target {
            Target::Slot => cmd.query_async::<Value>(&mut conn).await,
            Target::Asking { host, port } => asking(&mut conn, cmd, host, *port).await,
        };
        let e = match reply.and_then(|v| Ok(::redis::from_redis_value::<Vec<i64>>(v)?)) {
            Ok(reply) => return Ok(reply),
            Err(e) => e,
        };
        match e.kind() {
            ErrorKind::Server(ServerErrorKind::NoScript) if !send_body => {
                // EVAL also caches the script on that node, so the next call is EVALSHA.
                meter.script_loaded();
                send_body = true;
                continue;
            }
            ErrorKind::Server(ServerErrorKind::Ask) => match e.redirect_node().and_then(node) {
                Some((host, port)) => target = Target::Asking { host, port },
                None => return Err(e),
            },
            // redis-rs refreshes its slot map on MOVED; requests wait for the refresh.
            ErrorKind::Server(ServerErrorKind::Moved) => target = Target::Slot,
            // A migration in progress (several keys of one slot split between two nodes; not
            // ours, but a proxy may say it): try again shortly.
            ErrorKind::Server(ServerErrorKind::TryAgain) => target = Target::Slot,
            _ => return Err(e),
        }
        redirects += 1;
        // Redirects settle in a round trip or two; past that, the slot is mid-change: back
        // off a little instead of spinning until the deadline.
        if redirects > 2 {
            tokio::time::sleep(Duration::from_millis(u64::from(redirects.min(10)))).await;
        }
    }
}

/// `ASKING` and `cmd` as one pipeline to `host:port`: the script's reply, or its error.
async fn asking(
    conn: &mut ClusterConnection,
    cmd: Cmd,
    host: &str,
    port: u16,
) -> Result<Value, RedisError> {
    let mut pipe = ::redis::pipe();
    pipe.cmd("ASKING").add_command(cmd);
    let route = SingleNodeRoutingInfo::ByAddress {
        host: host.to_owned(),
        port,
    };
    let mut replies = conn.route_pipeline(pipe, 0, 2, route).await?;
    match replies.pop() {
        Some(reply) if replies.len() == 1 => {
            replies.pop().map(Value::extract_error).transpose()?;
            reply.extract_error()
        }
        _ => Err(RedisError::from((
            ErrorKind::Client,
            "ASKING pipeline: not two replies",
        ))),
    }
}

/// `host:port` of a redirect.
fn node((addr, _slot): (&str, u16)) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.to_owned(), port.parse().ok()?))
}
