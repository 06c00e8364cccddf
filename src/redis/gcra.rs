//! GCRA on Redis: one string key holding the integer TAT in microseconds, and the methods only
//! GCRA has — redis-cell's `throttle`, and reservations.

use std::sync::LazyLock;

use super::algorithm::{Params, RedisAlgorithm, Spec};
use super::client::LuaScript;

/// GCRA, exactly as the in-process limiter decides it (the default): one string key per
/// limited thing holding the theoretical arrival time in µs since the Unix epoch on the
/// server's clock, expiring when the bucket is full again. The interval `T` is rounded up to a
/// whole microsecond.
///
/// Only GCRA has [`throttle`](super::RedisRateLimiter::throttle) (redis-cell's reply) and
/// [`reserve`](super::RedisRateLimiter::reserve); its waits are reservations, so waiters
/// across every process are granted in the order their reservations reached Redis.
///
/// ```
/// use tollgate::redis::{Gcra, RedisAlgorithm};
/// assert_eq!(Gcra::NAME, "gcra");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gcra;

static SPEC: Spec = Spec {
    script: LazyLock::new(|| {
        LuaScript::new(concat!(
            include_str!("prelude.lua"),
            include_str!("gcra.lua")
        ))
    }),
    params: Params::interval,
    reserves: true,
};

impl RedisAlgorithm for Gcra {
    const NAME: &'static str = "gcra";

    fn spec() -> &'static Spec {
        &SPEC
    }
}
