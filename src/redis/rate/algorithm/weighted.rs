//! The weighted sliding-window counter on Redis: two fixed windows' counts in one string key
//! `"k:cur:prev"`, weighed in exact integer arithmetic inside the script (104-bit products
//! compared in 26-bit limbs, no floats). One short string per key whatever `L`. Under a
//! `state_name`, `"L,W,k:cur:prev"`: another window length moves each count to a window of its
//! own where it weighs at least as much at every instant.

use super::RedisAlgorithm;
use crate::redis::connection::error::RedisLimitError;
use crate::redis::scripts::{self, script_spec, Params};
use crate::Quota;
use crate::WeightedWindow;

/// The weighted counter, its windows aligned to the Unix epoch on the server's clock.
impl RedisAlgorithm for WeightedWindow {
    const NAME: &'static str = "weighted";

    script_spec!(scripts::WEIGHTED, reserves: false, batches: false, adjusts: true);

    /// The in-process counts are 32-bit: a penalty saturates at `u32::MAX` (or at `L`, for a
    /// limit the in-process counter refuses).
    fn most(p: Params) -> u64 {
        p.limit.max(u64::from(u32::MAX))
    }

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        Params::window(quota)
    }
}
