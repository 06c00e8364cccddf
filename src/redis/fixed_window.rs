//! Fixed window on Redis: windows `[kW, (k+1)W)` of the server's Unix time, one string key
//! `"k:count"` per limited thing, expiring at the end of its window.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;

/// Fixed window: admit `n` iff `count + n <= L` in the current window. Windows are aligned to
/// the Unix epoch on the server's clock, so a per-minute quota counts wall-clock minutes.
/// Up to `2L` can pass within `W` across a boundary. `L` is the quota's count and `W` its
/// period, rounded up to a whole microsecond (`Quota::per_minute(100)`: 100 per minute); the
/// burst plays no part.
///
/// Fields: `remaining = L - count`, `reset_after` = until the window ends, and a denial's
/// `retry_after` = until the window ends.
///
/// ```
/// use tollgate::redis::{FixedWindow, RedisAlgorithm};
/// assert_eq!(FixedWindow::NAME, "fixed");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FixedWindow;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("fixed_window.lua")
        ))
    }),
    params: Params::window,
    reserves: false,
};

impl RedisAlgorithm for FixedWindow {
    const NAME: &'static str = "fixed";

    fn spec() -> &'static Spec {
        &SPEC
    }
}
