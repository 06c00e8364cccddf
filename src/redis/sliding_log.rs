//! The sliding log on Redis: one sorted set per limited thing, one member per permit (score:
//! its stamp in µs). Memory grows with `L` (see the README's figures), and an admission of `n`
//! permits adds `n` members in one script run, so keep `n` and `L` moderate, or use GCRA or
//! the weighted counter. Expired entries are trimmed only by admissions, and the key expires
//! when its newest entry leaves the window.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;
use super::policy::RedisLimitError;
use crate::quota::Quota;
use crate::SlidingLog;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("sliding_log.lua")
        ))
    }),
    reserves: false,
};

/// The sliding log, exact: one sorted-set member per permit.
impl RedisAlgorithm for SlidingLog {
    const NAME: &'static str = "log";

    fn spec() -> &'static Spec {
        &SPEC
    }

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        Params::window(quota)
    }
}
