//! The weighted sliding-window counter on Redis: two fixed windows' counts in one string key
//! `"k:cur:prev"`, weighed in exact integer arithmetic inside the script (104-bit products
//! compared in 26-bit limbs, no floats). One short string per key whatever `L`.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;
use super::policy::RedisLimitError;
use crate::quota::Quota;
use crate::WeightedWindow;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("weighted.lua")
        ))
    }),
    reserves: false,
};

/// The weighted counter, its windows aligned to the Unix epoch on the server's clock.
impl RedisAlgorithm for WeightedWindow {
    const NAME: &'static str = "weighted";

    fn spec() -> &'static Spec {
        &SPEC
    }

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        Params::window(quota)
    }
}
