//! The fixed window on Redis: windows `[kW, (k+1)W)` of the server's Unix time, one string key
//! `"k:count"` per limited thing, expiring at the end of its window.

use super::algorithm::{script_spec, Params, RedisAlgorithm};
use super::error::RedisLimitError;
use crate::FixedWindow;
use crate::Quota;

/// The fixed window aligned to the Unix epoch on the server's clock, as
/// [`FixedWindow::epoch_aligned`] is in process. Windows counted from a clock's origin
/// ([`FixedWindow::new`]) would start wherever each process started: refused.
impl RedisAlgorithm for FixedWindow {
    const NAME: &'static str = "fixed";

    script_spec!("fixed_window.lua", reserves: false, batches: false);

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
