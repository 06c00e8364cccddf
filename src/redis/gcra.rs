//! GCRA on Redis: one string key holding the integer TAT in microseconds, expiring when the
//! bucket is full again. The methods only GCRA has (redis-cell's `throttle`, reservations)
//! are in `super` and `super::reservation`.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;
use super::policy::RedisLimitError;
use crate::quota::Quota;
use crate::Gcra;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("gcra.lua")
        ))
    }),
    reserves: true,
};

/// GCRA as the in-process limiter decides it, on the server's clock: the interval `T` rounded
/// up to a whole microsecond, the burst. Its waits are reservations, so waiters across every
/// process are granted in the order their reservations reached Redis.
impl RedisAlgorithm for Gcra {
    const NAME: &'static str = "gcra";

    fn spec() -> &'static Spec {
        &SPEC
    }

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        Params::interval(quota)
    }
}
