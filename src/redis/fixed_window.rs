//! The fixed window on Redis: windows `[kW, (k+1)W)` of the server's Unix time, one string key
//! `"k:count"` per limited thing, expiring at the end of its window.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;
use super::policy::RedisLimitError;
use crate::quota::Quota;
use crate::FixedWindow;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("fixed_window.lua")
        ))
    }),
    reserves: false,
};

/// The fixed window aligned to the Unix epoch on the server's clock, as
/// [`FixedWindow::epoch_aligned`] is in process. Windows counted from a clock's origin
/// ([`FixedWindow::new`]) would start wherever each process started: refused.
impl RedisAlgorithm for FixedWindow {
    const NAME: &'static str = "fixed";

    fn spec() -> &'static Spec {
        &SPEC
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
