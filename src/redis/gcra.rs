//! GCRA on Redis: one string key holding the integer TAT in microseconds, expiring when the
//! bucket is full again. The methods only GCRA has (redis-cell's `throttle`, reservations)
//! are in `super` and `super::reservation`.

use super::algorithm::{script_spec, Params, RedisAlgorithm};
use super::error::RedisLimitError;
use crate::Gcra;
use crate::Quota;

/// GCRA as the in-process limiter decides it, on the server's clock: the interval `T` rounded
/// up to a whole microsecond, the burst. Its waits are reservations, so waiters across every
/// process are granted in the order their reservations reached Redis.
impl RedisAlgorithm for Gcra {
    const NAME: &'static str = "gcra";

    script_spec!("gcra.lua", reserves: true, batches: true);

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        Params::interval(quota)
    }
}
