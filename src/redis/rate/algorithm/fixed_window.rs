//! The fixed window on Redis: windows `[kW, (k+1)W)` of the server's Unix time, one string key
//! `"k:count"` per limited thing, expiring at the end of its window.

use super::RedisAlgorithm;
use crate::redis::connection::error::RedisLimitError;
use crate::redis::scripts::{self, script_spec, Params, MAX_SPAN_US};
use crate::FixedWindow;
use crate::Quota;

/// The fixed window aligned to the Unix epoch on the server's clock, as
/// [`FixedWindow::epoch_aligned`] is in process. Windows counted from a clock's origin
/// ([`FixedWindow::new`]) would start wherever each process started: refused.
impl RedisAlgorithm for FixedWindow {
    const NAME: &'static str = "fixed";

    script_spec!(scripts::FIXED_WINDOW, reserves: false, batches: false, adjusts: true);

    /// The in-process fixed window's full count for this window on a clock reading Unix time
    /// (the all-ones count beside the largest window index up to `MAX_NANOS`), at most 2^51
    /// (the scripts' exact range: windows over about 26 days saturate there), at least `L`.
    fn most(p: Params) -> u64 {
        let window_ns = p.span_us.saturating_mul(1000).max(1);
        let max_index = crate::MAX_NANOS / window_ns;
        let count_bits = 63 - (u64::BITS - max_index.leading_zeros());
        let full = 1u64.checked_shl(count_bits).map_or(u64::MAX, |b| b - 1);
        full.min(MAX_SPAN_US).max(p.limit)
    }

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        if !self.is_epoch_aligned() {
            return Err(RedisLimitError::Unsupported(
                "a fixed window on Redis is aligned to the Unix epoch: use \
                 FixedWindow::epoch_aligned() (FixedWindow::new() counts windows from each \
                 process's own clock origin)",
            ));
        }
        Params::window(quota)
    }
}
