//! The weighted sliding-window counter on Redis: two fixed windows' counts in one string key
//! `"k:cur:prev"`, weighed in exact integer arithmetic inside the script.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;

/// Weighted sliding-window counter: with `e` the time into the current window, admit `n` iff
/// `prev * (W - e) + (cur + n) * W <= L * W`, computed exactly (no floats: the script
/// compares 104-bit products in 26-bit limbs). Memory is one short string per key whatever
/// `L`; it approximates the sliding log, assuming the previous window's permits were spread
/// evenly.
///
/// Fields: `remaining` = the largest `m` that would be admitted now,
/// `L - cur - ceil(prev * (W - e) / W)`; `reset_after` = until neither count weighs anything
/// (the end of the next window if `cur > 0`, else of this one); a denial's `retry_after` = the
/// exact earliest time the same request fits if nothing else is admitted meanwhile.
///
/// ```
/// use tollgate::redis::{RedisAlgorithm, SlidingWindowCounter};
/// assert_eq!(SlidingWindowCounter::NAME, "weighted");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlidingWindowCounter;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("sliding_window.lua")
        ))
    }),
    params: Params::window,
    reserves: false,
};

impl RedisAlgorithm for SlidingWindowCounter {
    const NAME: &'static str = "weighted";

    fn spec() -> &'static Spec {
        &SPEC
    }
}
