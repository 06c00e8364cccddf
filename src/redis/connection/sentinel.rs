//! A primary found through Redis Sentinel, and found again after a failover.
//!
//! The connection manager under it is bound to one address. When a call finds Redis
//! unavailable (the primary gone, or demoted: `READONLY`), a background task asks the
//! sentinels for the primary again (at most one task at a time, at most one start per
//! [`RESOLVE_EVERY`]) and, if it moved, swaps in a connection to the new one. Calls never wait
//! for that: until the swap, the failure policy decides them within their deadline.

// A flag and locks around a connection handle (no lock-free protocol): std's, not the core
// cells' loom facade.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::sentinel::SentinelClient;
use ::redis::{ConnectionInfo, RedisError};

/// The least time between two starts of a resolution: a flood of failing calls asks the
/// sentinels about ten times a second, not once per call.
const RESOLVE_EVERY: Duration = Duration::from_millis(100);

/// The primary last found: its address, the connection to it, and how to connect to it
/// (another connection: the invalidations' subscription).
type Primary = (String, ConnectionManager, ConnectionInfo);

/// The sentinels, the primary's connection, and the resolution in progress.
pub(crate) struct SentinelConn {
    client: tokio::sync::Mutex<SentinelClient>,
    config: ConnectionManagerConfig,
    /// The primary's address, a connection to it and how to make another, once found.
    current: Mutex<Option<Primary>>,
    resolving: AtomicBool,
    last_start: Mutex<Option<Instant>>,
}

impl SentinelConn {
    pub(crate) fn new(client: SentinelClient, config: ConnectionManagerConfig) -> Arc<Self> {
        Arc::new(SentinelConn {
            client: tokio::sync::Mutex::new(client),
            config,
            current: Mutex::new(None),
            resolving: AtomicBool::new(false),
            last_start: Mutex::new(None),
        })
    }

    /// The connection to the primary as last found; `None` before the first is found.
    pub(crate) fn current(&self) -> Option<ConnectionManager> {
        let guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(|(_, c, _)| c.clone())
    }

    /// The primary as last found (its address, and how to connect to it); `None` before the
    /// first is found.
    pub(crate) fn primary(&self) -> Option<(String, ConnectionInfo)> {
        let guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(|(a, _, i)| (a.clone(), i.clone()))
    }

    /// Asks the sentinels for the primary in the background, unless a resolution is running
    /// or started less than [`RESOLVE_EVERY`] ago.
    pub(crate) fn resolve_soon(self: &Arc<Self>) {
        {
            let mut last = self.last_start.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| t.elapsed() < RESOLVE_EVERY) {
                return;
            }
            if self.resolving.swap(true, Ordering::AcqRel) {
                return;
            }
            *last = Some(Instant::now());
        }
        let this = self.clone();
        tokio::spawn(async move {
            let _ = this.resolve().await;
            this.resolving.store(false, Ordering::Release);
        });
    }

    /// Asks the sentinels for the primary (redis-rs checks that it says it is one) and
    /// connects to it if it is not the one connected.
    pub(crate) async fn resolve(&self) -> Result<(), RedisError> {
        let client = self.client.lock().await.async_get_client().await?;
        let addr = client.get_connection_info().addr().to_string();
        let same = {
            let guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
            guard.as_ref().is_some_and(|(a, _, _)| *a == addr)
        };
        if !same {
            let info = client.get_connection_info().clone();
            let manager = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
            let mut guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
            *guard = Some((addr, manager, info));
        }
        Ok(())
    }
}
