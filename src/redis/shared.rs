//! What every handle on one Redis limiter shares: the connection, the key prefix and the
//! quota as the scripts run it.

use crate::Quota;

use super::algorithm::Params;
use super::client::Backend;

/// What every handle on one limiter shares (cancel tasks hold it too).
pub(crate) struct Shared {
    pub(super) backend: Backend,
    pub(super) prefix: String,
    pub(super) quota: Quota,
    pub(super) params: Params,
    pub(super) hot: super::hot::Hot,
}

impl super::coalesce::Via for Shared {
    fn backend(&self) -> &Backend {
        &self.backend
    }

    fn coalescer(&self) -> Option<&super::coalesce::Coalescer> {
        self.hot.coalescer.as_ref()
    }

    fn coalesced(&self) -> &std::sync::atomic::AtomicU64 {
        &self.hot.coalesced
    }
}
