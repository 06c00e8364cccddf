//! The sliding log on Redis: one sorted set per limited thing, one member per permit.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;

/// Sliding log (exact): admit `n` iff the permits stamped in `(now - W, now]` plus `n` are at
/// most `L`. A sorted set of one member per permit (score: its stamp in µs), so memory grows
/// with `L` (see the README's figures) and an admission of `n` permits adds `n` members in one
/// script run (Redis is busy for all of them: keep `n` and `L` moderate, or use GCRA or the
/// weighted counter). Expired entries are trimmed only by admissions, and the key expires when
/// its newest entry leaves the window.
///
/// Fields: `remaining = L - count`; `reset_after` = until the newest entry leaves; a denial's
/// `retry_after` = until the oldest entries that must leave for `n` to fit have left.
///
/// ```
/// use tollgate::redis::{RedisAlgorithm, SlidingLog};
/// assert_eq!(SlidingLog::NAME, "log");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlidingLog;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("sliding_log.lua")
        ))
    }),
    params: Params::window,
    reserves: false,
};

impl RedisAlgorithm for SlidingLog {
    const NAME: &'static str = "log";

    fn spec() -> &'static Spec {
        &SPEC
    }
}
