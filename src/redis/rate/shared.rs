//! What every handle on one Redis limiter shares: the connection, the key prefix and the
//! quota as the scripts run it.

use std::sync::Arc;

use crate::Quota;

use super::super::connection::client::ScriptClient;
use super::super::hot::invalidate;
use super::super::scripts::Params;

/// What every handle on one limiter shares (cancel tasks hold it too).
pub(crate) struct SharedLimiter {
    /// Shared with the coalescer's batches, which a spawned task sends.
    pub(crate) client: Arc<ScriptClient>,
    pub(crate) prefix: String,
    pub(crate) quota: Quota,
    pub(crate) params: Params,
    /// The builder's `state_name`: the key's state is shared by every quota under it.
    pub(crate) state_name: Option<String>,
    /// The state key of the empty key under `params`: every state key under the limiter's
    /// own quota is this followed by the user's key, made once here rather than formatted
    /// (numbers and all) on every call.
    pub(crate) own_state: String,
    pub(crate) hot: super::super::hot::Hot,
    /// The local batches, if on (`local_batches`).
    pub(crate) batches: Option<super::super::batch::Batches>,
}

impl SharedLimiter {
    /// Tells every limiter under the prefix that `state` may admit sooner than their cached
    /// denials say (a reset, a reward, a cancelled reservation). The change is made whatever
    /// happens here: a failure is counted ([`RedisStats::errors`](super::super::RedisStats::errors))
    /// and leaves those caches refusing until their cached `retry_after` at worst.
    pub(crate) async fn publish_loosened(&self, state: &str) {
        let channel = invalidate::channel(&self.prefix);
        if let Err(f) = self.client.publish(&channel, state).await {
            self.client.meter.failed(&f);
        }
    }
}
