//! What an algorithm on Redis is: the in-process algorithm types that have a script, each with
//! its script ([`Spec`]), its key tag, and how a [`Quota`] becomes the script's integer
//! parameters; and the name of a key's state.

mod fixed_window;
mod gcra;
mod sliding_log;
mod sliding_window;
mod weighted;

use crate::{Algorithm, Quota};

use super::super::connection::error::RedisLimitError;
use super::super::scripts::{Params, Spec, MAX_SPAN_US};

/// An algorithm the Redis limiter can run: the in-process algorithm types that have a Lua
/// script, so that `RedisRateLimiter<SlidingLog>` runs the same [`SlidingLog`](crate::SlidingLog)
/// a `KeyedRateLimiter<K, SlidingLog>` runs, with the same decisions and `Decision` fields
/// (see [`RedisRateLimiter`](super::super::RedisRateLimiter) for the resolution of times):
///
/// | algorithm | on Redis |
/// |---|---|
/// | [`Gcra`](crate::Gcra) (default) | one string key: the TAT |
/// | [`FixedWindow`](crate::FixedWindow) | epoch-aligned only ([`FixedWindow::epoch_aligned`](crate::FixedWindow::epoch_aligned)); `FixedWindow::new()` counts windows from a clock's origin, which processes do not share, so it is refused ([`RedisLimitError::Unsupported`]) |
/// | [`WeightedWindow`](crate::WeightedWindow) | one string key: the window index and two counts |
/// | [`SlidingLog`](crate::SlidingLog) | one sorted set: one member per permit |
/// | [`SlidingWindow`](crate::SlidingWindow) (sub-windows) | one string key: the newest sub-window's index and up to `k` counts; `W / k` must be whole microseconds, else refused ([`RedisLimitError::Unsupported`]) |
///
/// Windows of every algorithm are aligned to the Unix epoch on the server's clock. Sealed: each
/// implementation is a script written for exact integer arithmetic.
///
/// ```
/// use tollgate::redis::RedisAlgorithm;
/// use tollgate::{FixedWindow, SlidingLog, SlidingWindow};
/// fn tag<A: RedisAlgorithm>(_: A) -> &'static str { A::NAME }
/// assert_eq!(tag(SlidingLog), "log");
/// assert_eq!(tag(FixedWindow::epoch_aligned()), "fixed");
/// assert_eq!(tag(SlidingWindow::new(8)), "sliding");
/// ```
pub trait RedisAlgorithm: Algorithm + Copy {
    /// The tag in the algorithm's key names (`<prefix>:<NAME>:...`).
    const NAME: &'static str;

    #[doc(hidden)]
    fn spec() -> &'static Spec;

    /// The script's parameters for `quota`, or why this algorithm (as configured) cannot run
    /// it on Redis.
    #[doc(hidden)]
    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError>;

    /// The most a key's count holds under `p`: a block or a penalty saturates there, as the
    /// in-process algorithm's state does (the script's `most` argument; scripts without
    /// adjustments ignore it).
    #[doc(hidden)]
    fn most(_p: Params) -> u64 {
        MAX_SPAN_US
    }
}

/// The name of `key`'s state under `algorithm` and `params`: `<prefix>:<algorithm>:<span>:<limit>:<key>`,
/// and `<prefix>:sliding:<span>:<limit>:<k>:<key>` for the sliding window's `k` sub-windows
/// (one layout per algorithm tag, so names never collide). A state that keeps its quota
/// (`params.keeps_quota`, a limiter's `state_name`) is `<prefix>:<algorithm>:<name>:<key>`
/// instead: no quota in it, so processes under different quotas share it; the name starts
/// with a letter and has no `:` (builder), so it never reads as a span or as another name.
/// The user's key comes last, so a hash tag in it (`{user42}:login`) is the first `{...}` of
/// the name and decides the cluster slot (the prefix may not contain braces).
pub(crate) fn state_key(
    prefix: &str,
    algorithm: &str,
    p: Params,
    name: Option<&str>,
    key: &str,
) -> String {
    let (span, limit) = (p.span_us, p.limit);
    match (name.filter(|_| p.keeps_quota), p.sub_windows) {
        (Some(name), _) => format!("{prefix}:{algorithm}:{name}:{key}"),
        (None, None) => format!("{prefix}:{algorithm}:{span}:{limit}:{key}"),
        (None, Some(k)) => format!("{prefix}:{algorithm}:{span}:{limit}:{k}:{key}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_keep_the_hash_tag_first() {
        let p = Params {
            limit: 10,
            span_us: 100_000,
            sub_windows: None,
            keeps_quota: false,
        };
        assert_eq!(
            state_key("rl", "gcra", p, None, "{user42}:login"),
            "rl:gcra:100000:10:{user42}:login"
        );
        // The sliding window's k is one more segment, before the user's key.
        let p = Params {
            sub_windows: Some(4),
            ..p
        };
        assert_eq!(
            state_key("rl", "sliding", p, None, "{user42}:login"),
            "rl:sliding:100000:10:4:{user42}:login"
        );
        // A named state: the name instead of the quota.
        let named = Params {
            sub_windows: None,
            keeps_quota: true,
            ..p
        };
        assert_eq!(
            state_key("rl", "gcra", named, Some("login"), "{user42}:x"),
            "rl:gcra:login:{user42}:x"
        );
    }
}
