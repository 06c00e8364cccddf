//! Where a limiter listens for the changes other processes publish (the denial cache's
//! invalidations, `hot/invalidate.rs`): a RESP3 connection of its own, apart from the one the
//! scripts share, subscribed to one channel, its messages handed to a push sender.
//!
//! One server: that server. A cluster: any one node, tried in turn, since a `PUBLISH` on any
//! node reaches the subscribers of every node. Sentinel: the primary the sentinels name when
//! subscribing, and again when that changes.

use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{AsyncPushSender, MultiplexedConnection};
use ::redis::{
    AsyncConnectionConfig, Client, ConnectionInfo, IntoConnectionInfo, ProtocolVersion, RedisError,
};

use super::sentinel::SentinelConn;

/// Where to subscribe.
enum Target {
    /// The server, or a cluster's nodes (any one will do).
    Nodes(Vec<ConnectionInfo>),
    Sentinel(Arc<SentinelConn>),
}

/// Where to subscribe, and the most a connection attempt or a `PING` waits.
pub(crate) struct Source {
    target: Target,
    timeout: Duration,
}

/// A live subscription: dropping it closes its connection.
pub(crate) struct Subscription {
    conn: MultiplexedConnection,
    /// Through Sentinel, the primary's address when subscribed.
    primary: Option<String>,
}

impl Source {
    /// The server or cluster nodes at `urls` (those a client reads; `None` if none is).
    pub(crate) fn nodes(urls: &[&str], timeout: Duration) -> Option<Source> {
        let nodes: Vec<ConnectionInfo> = urls
            .iter()
            .filter_map(|u| u.into_connection_info().ok())
            .collect();
        (!nodes.is_empty()).then_some(Source {
            target: Target::Nodes(nodes),
            timeout,
        })
    }

    /// The primary `sentinel` finds.
    pub(crate) fn sentinel(sentinel: Arc<SentinelConn>, timeout: Duration) -> Source {
        Source {
            target: Target::Sentinel(sentinel),
            timeout,
        }
    }

    /// Subscribes to `channel` at the place to try on attempt `attempt` (the nodes in turn),
    /// every push of the connection (its messages, and its disconnection) going to `push`.
    pub(crate) async fn subscribe(
        &self,
        attempt: usize,
        channel: &str,
        push: impl AsyncPushSender,
    ) -> Result<Subscription, RedisError> {
        let (info, primary) = match &self.target {
            Target::Nodes(nodes) => (nodes[attempt % nodes.len()].clone(), None),
            Target::Sentinel(s) => {
                s.resolve().await?;
                match s.primary() {
                    Some((addr, info)) => (info, Some(addr)),
                    None => return Err(not_found()),
                }
            }
        };
        // RESP3: pushes come on an ordinary connection, which can also be pinged.
        let redis = info.redis_settings().clone();
        let info = info.set_redis_settings(redis.set_protocol(ProtocolVersion::RESP3));
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_push_sender(push);
        let mut conn = Client::open(info)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        conn.subscribe(channel).await?;
        Ok(Subscription { conn, primary })
    }

    /// Whether `sub` still answers a `PING` and, through Sentinel, is on the primary last
    /// found (else it is subscribed on a server that is no longer the primary).
    pub(crate) async fn alive(&self, sub: &mut Subscription) -> bool {
        if let (Target::Sentinel(s), Some(at)) = (&self.target, &sub.primary) {
            if s.primary().is_none_or(|(addr, _)| addr != *at) {
                return false;
            }
        }
        let cmd = ::redis::cmd("PING");
        let ping = cmd.query_async::<()>(&mut sub.conn);
        matches!(tokio::time::timeout(self.timeout, ping).await, Ok(Ok(())))
    }
}

fn not_found() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "no primary found through sentinel",
    ))
}
