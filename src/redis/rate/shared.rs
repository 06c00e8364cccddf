//! What every handle on one Redis limiter shares: the connection, the key prefix and the
//! quota as the scripts run it.

use std::sync::Arc;

use crate::Quota;

use super::super::connection::client::ScriptClient;
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
    pub(crate) hot: super::super::hot::Hot,
    /// The local batches, if on (`local_batches`).
    pub(crate) batches: Option<super::super::batch::Batches>,
}
