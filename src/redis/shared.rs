//! What every handle on one Redis limiter shares: the connection, the key prefix and the
//! quota as the scripts run it.

use std::sync::Arc;

use crate::Quota;

use super::connection::client::ScriptClient;
use super::scripts::Params;

/// What every handle on one limiter shares (cancel tasks hold it too).
pub(crate) struct SharedLimiter {
    /// Shared with the coalescer's batches, which a spawned task sends.
    pub(super) client: Arc<ScriptClient>,
    pub(super) prefix: String,
    pub(super) quota: Quota,
    pub(super) params: Params,
    pub(super) hot: super::hot::Hot,
}
