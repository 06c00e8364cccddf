//! What an algorithm on Redis is: the in-process algorithm types that have a script, each with
//! its script, its key tag, and how a [`Quota`] becomes the script's integer parameters. Also
//! the one reply shape every script's check returns.

use std::sync::LazyLock;
use std::time::Duration;

use crate::{Algorithm, Decision, Quota};

use super::client::{LuaScript, ScriptClient};
use super::error::RedisLimitError;
use super::failure::Failure;

/// An algorithm the Redis limiter can run: the in-process algorithm types that have a Lua
/// script, so that `RedisRateLimiter<SlidingLog>` runs the same [`SlidingLog`](crate::SlidingLog)
/// a `KeyedRateLimiter<K, SlidingLog>` runs, with the same decisions and `Decision` fields
/// (see [`RedisRateLimiter`](super::RedisRateLimiter) for the resolution of times):
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

/// The parts of an algorithm (not nameable outside the crate, which seals the trait).
pub struct Spec {
    pub(crate) script: LazyLock<LuaScript>,
    /// GCRA waits by reservation; the windows by deciding again after `retry_after`.
    pub(crate) reserves: bool,
    /// The script has a `batch` op (several checks at one instant): it can coalesce.
    pub(crate) batches: bool,
    /// A check's reply as the script sent it, with the check's (clamped) `n`, to the check
    /// reply every script's caller reads ([`CheckReply`]); GCRA sends less and this fills in
    /// the rest.
    pub(crate) expand: fn(Vec<i64>, i64, Params) -> Vec<i64>,
    /// The script has the ops `block`, `penalize` and `reward` (`adjust.rs`), each replying
    /// in full (the [`CheckReply`] shape, never through `expand`).
    pub(crate) adjusts: bool,
}

impl Spec {
    /// Runs the script's check of `n` permits on `state`: the reply in [`CheckReply`]'s shape.
    pub(crate) async fn check(
        &'static self,
        client: &ScriptClient,
        state: &str,
        n: u64,
        p: Params,
    ) -> Result<Vec<i64>, Failure> {
        let (args, len) = p.check_args(n);
        let reply = client
            .eval(&self.script, state, "check", &args[..len])
            .await?;
        Ok((self.expand)(reply, p.clamp(n), p))
    }
}

/// The `expand` of the scripts that reply a check in full.
pub(crate) fn as_is(reply: Vec<i64>, _n: i64, _p: Params) -> Vec<i64> {
    reply
}

/// `fn spec()` of a [`RedisAlgorithm`] implementation whose script is `$file` (in this
/// directory) after the shared prelude (and the files in `with`, such as `exact.lua`);
/// `$reserves`: it waits by reservation (GCRA); `$batches`: it has the `batch` op; `$expand`:
/// its check reply to the full one ([`Spec::expand`], [`as_is`] unless given); `$adjusts`: it has
/// the `block`, `penalize` and `reward` ops ([`Spec::adjusts`], `false` unless given).
macro_rules! script_spec {
    ($file:literal, reserves: $reserves:literal, batches: $batches:literal, adjusts: $adjusts:literal, with: [$($with:literal),*]) => {
        $crate::redis::algorithm::script_spec!(@full $file, $reserves, $batches, $adjusts, [$($with),*], $crate::redis::algorithm::as_is);
    };
    ($file:literal, reserves: $reserves:literal, batches: $batches:literal, adjusts: $adjusts:literal, with: [$($with:literal),*], expand: $expand:expr) => {
        $crate::redis::algorithm::script_spec!(@full $file, $reserves, $batches, $adjusts, [$($with),*], $expand);
    };
    ($file:literal, reserves: $reserves:literal, batches: $batches:literal) => {
        $crate::redis::algorithm::script_spec!($file, reserves: $reserves, batches: $batches, with: [], expand: $crate::redis::algorithm::as_is);
    };
    ($file:literal, reserves: $reserves:literal, batches: $batches:literal, with: [$($with:literal),*]) => {
        $crate::redis::algorithm::script_spec!($file, reserves: $reserves, batches: $batches, with: [$($with),*], expand: $crate::redis::algorithm::as_is);
    };
    ($file:literal, reserves: $reserves:literal, batches: $batches:literal, with: [$($with:literal),*], expand: $expand:expr) => {
        $crate::redis::algorithm::script_spec!(@full $file, $reserves, $batches, false, [$($with),*], $expand);
    };
    (@full $file:literal, $reserves:literal, $batches:literal, $adjusts:literal, [$($with:literal),*], $expand:expr) => {
        fn spec() -> &'static $crate::redis::algorithm::Spec {
            static SPEC: $crate::redis::algorithm::Spec = $crate::redis::algorithm::Spec {
                script: ::std::sync::LazyLock::new(|| {
                    $crate::redis::client::LuaScript::new(concat!(
                        include_str!("prelude.lua"),
                        $(include_str!($with),)*
                        include_str!($file)
                    ))
                }),
                reserves: $reserves,
                batches: $batches,
                expand: $expand,
                adjusts: $adjusts,
            };
            &SPEC
        }
    };
}

pub(crate) use script_spec;

/// A quota as the scripts see it: integer microseconds and permits, all at most
/// [`MAX_SPAN_US`], so that every sum the scripts make stays exact in a Lua double.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// The burst (GCRA) or the limit L (windows): `Decision::limit`.
    pub(crate) limit: u64,
    /// GCRA: the interval T. Windows: the window W. Microseconds.
    pub(crate) span_us: u64,
    /// The sliding window's number of sub-windows `k` (dividing `span_us`): one more script
    /// argument and key name segment. `None` for the other algorithms, whose arguments and key
    /// names stay as they were.
    pub(crate) sub_windows: Option<u32>,
}

/// 2^51 µs (about 71 years) and 2^51 permits: with the server's clock at about 2^50.7 µs, every
/// time a script forms stays under 2^53.
pub(crate) const MAX_SPAN_US: u64 = 1 << 51;

impl Params {
    /// GCRA: `T` rounded up to whole microseconds (never admitting more than asked), burst `b`.
    pub(crate) fn interval(q: Quota) -> Result<Params, RedisLimitError> {
        let t = micros_ceil(q.t());
        t.checked_mul(q.burst())
            .filter(|tau| *tau <= MAX_SPAN_US)
            .map(|_| Params {
                limit: q.burst(),
                span_us: t,
                sub_windows: None,
            })
            .ok_or(RedisLimitError::QuotaOutOfRange(q))
    }

    /// Windows: `L = count` permits per `W = period`, rounded up to whole microseconds. A quota
    /// the in-process window algorithms refuse (a burst other than the count) is refused the
    /// same way.
    pub(crate) fn window(q: Quota) -> Result<Params, RedisLimitError> {
        let limit = q.window_limit()?;
        // At most `MAX_NANOS` (a quota's period is validated), so it fits.
        let window = u64::try_from(q.period().as_nanos()).unwrap_or(u64::MAX);
        let w = micros_ceil(window);
        (w <= MAX_SPAN_US && limit <= MAX_SPAN_US)
            .then_some(Params {
                limit,
                span_us: w,
                sub_windows: None,
            })
            .ok_or(RedisLimitError::QuotaOutOfRange(q))
    }

    /// The most permits a check ever needs to send: anything above the limit is refused the
    /// same way, so it is clamped to `limit + 1` (and stays exact in Lua).
    pub(crate) fn clamp(&self, n: u64) -> i64 {
        clamp_i64(n.min(self.limit + 1))
    }

    /// A check's arguments after the op: `L`, the span, `n`, and `k` for the sliding window
    /// (the other scripts get the three they always had).
    pub(crate) fn check_args(&self, n: u64) -> ([i64; 4], usize) {
        let args = [
            clamp_i64(self.limit),
            clamp_i64(self.span_us),
            self.clamp(n),
            self.sub_windows.map_or(0, i64::from),
        ];
        (args, if self.sub_windows.is_some() { 4 } else { 3 })
    }
}

/// An integer for a script's argument: Redis's integers are `i64`, so larger ones saturate.
pub(crate) fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn micros_ceil(ns: u64) -> u64 {
    ns.div_ceil(1000)
}

/// The name of `key`'s state under `algorithm` and `params`: `<prefix>:<algorithm>:<span>:<limit>:<key>`,
/// and `<prefix>:sliding:<span>:<limit>:<k>:<key>` for the sliding window's `k` sub-windows
/// (one layout per algorithm tag, so names never collide). The user's key comes last, so a
/// hash tag in it (`{user42}:login`) is the first `{...}` of the name and decides the cluster
/// slot (the prefix may not contain braces).
pub(crate) fn state_key(prefix: &str, algorithm: &str, p: Params, key: &str) -> String {
    let (span, limit) = (p.span_us, p.limit);
    match p.sub_windows {
        None => format!("{prefix}:{algorithm}:{span}:{limit}:{key}"),
        Some(k) => format!("{prefix}:{algorithm}:{span}:{limit}:{k}:{key}"),
    }
}

/// The reply of every script's check: `{now, status, remaining, retry_after or -1, reset_after}`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CheckReply {
    pub(crate) now_us: u64,
    pub(crate) decision: Decision,
}

impl CheckReply {
    pub(crate) fn parse(reply: &[i64], limit: u64) -> Result<CheckReply, RedisLimitError> {
        let bad = || RedisLimitError::UnexpectedReply(format!("{reply:?}"));
        let &[now, status, remaining, retry, reset] = reply else {
            return Err(bad());
        };
        let us = |v: i64| u64::try_from(v).map_err(|_| bad());
        let (remaining, reset) = (us(remaining)?, Duration::from_micros(us(reset)?));
        let decision = match status {
            1 => Decision::allowed(limit, remaining, reset),
            2 => Decision::never(limit, remaining, reset),
            0 => Decision::denied(limit, remaining, Duration::from_micros(us(retry)?), reset),
            _ => return Err(bad()),
        };
        Ok(CheckReply {
            now_us: us(now)?,
            decision,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::QuotaError;

    #[test]
    fn intervals_round_up_to_whole_microseconds() {
        let q = Quota::new(3, Duration::from_millis(1)).unwrap(); // T = 333_334 ns
        assert_eq!(
            Params::interval(q).ok(),
            Some(Params {
                limit: 3,
                span_us: 334,
                sub_windows: None,
            })
        );
        let q = Quota::from_interval(Duration::from_nanos(1)).unwrap();
        assert_eq!(Params::interval(q).unwrap().span_us, 1);
        // Windows: L = count per W = period.
        let q = Quota::new(3, Duration::from_nanos(1_000_001)).unwrap();
        assert_eq!(
            Params::window(q).ok(),
            Some(Params {
                limit: 3,
                span_us: 1001,
                sub_windows: None,
            })
        );
    }

    #[test]
    fn windows_refuse_what_the_in_process_windows_refuse() {
        let bursty = Quota::per_second(3).unwrap().with_burst(9).unwrap();
        assert!(matches!(
            Params::window(bursty),
            Err(RedisLimitError::InvalidQuota(QuotaError::Unsupported(_)))
        ));
        assert!(Params::interval(bursty).is_ok());
    }

    #[test]
    fn out_of_range_quotas_are_refused() {
        let year = Duration::from_secs(365 * 24 * 3600);
        let out = |r: Result<Params, RedisLimitError>| {
            matches!(r, Err(RedisLimitError::QuotaOutOfRange(_)))
        };
        assert!(Params::interval(Quota::from_interval(year * 71).unwrap()).is_ok());
        assert!(out(Params::interval(
            Quota::from_interval(year * 72).unwrap()
        )));
        let tiny = Quota::from_interval(Duration::from_nanos(1)).unwrap();
        assert!(out(Params::interval(tiny.with_burst(1 << 52).unwrap())));
        let many = |count: u64| Quota::new(count, Duration::from_nanos(count)).unwrap();
        assert!(Params::window(many(1 << 51)).is_ok());
        assert!(out(Params::window(many((1 << 51) + 1))));
        assert!(out(Params::window(Quota::new(1, year * 72).unwrap())));
    }

    #[test]
    fn checks_clamp_n_above_the_limit() {
        let p = Params {
            limit: 10,
            span_us: 1,
            sub_windows: None,
        };
        assert_eq!((p.clamp(0), p.clamp(10), p.clamp(u64::MAX)), (0, 10, 11));
        assert_eq!(p.check_args(u64::MAX), ([10, 1, 11, 0], 3));
        let sliding = Params {
            sub_windows: Some(8),
            ..p
        };
        assert_eq!(sliding.check_args(3), ([10, 1, 3, 8], 4));
    }

    #[test]
    fn replies_parse_or_fail_typed() {
        let r = CheckReply::parse(&[5, 0, 3, 7, 9], 4).unwrap();
        assert_eq!(r.now_us, 5);
        assert_eq!(r.decision.retry_after, Some(Duration::from_micros(7)));
        assert!(!r.decision.allowed);
        let r = CheckReply::parse(&[5, 2, 3, -1, 9], 4).unwrap();
        assert!(r.decision.exceeds_burst());
        for bad in [&[5, 9, 3, -1, 9][..], &[5, 1, -3, -1, 9], &[1, 2]] {
            assert!(matches!(
                CheckReply::parse(bad, 4),
                Err(RedisLimitError::UnexpectedReply(_))
            ));
        }
    }

    #[test]
    fn state_keys_keep_the_hash_tag_first() {
        let p = Params {
            limit: 10,
            span_us: 100_000,
            sub_windows: None,
        };
        assert_eq!(
            state_key("rl", "gcra", p, "{user42}:login"),
            "rl:gcra:100000:10:{user42}:login"
        );
        // The sliding window's k is one more segment, before the user's key.
        let p = Params {
            sub_windows: Some(4),
            ..p
        };
        assert_eq!(
            state_key("rl", "sliding", p, "{user42}:login"),
            "rl:sliding:100000:10:4:{user42}:login"
        );
    }
}
