//! GCRA on Redis: one string key holding the integer TAT in microseconds, expiring when the
//! bucket is full again; while the key has holes (stretches given back by reservations
//! cancelled out of order, the in-process rule of `algorithm::gcra::holes`), the same value
//! carries them after the TAT (`scripts/gcra.lua`). The methods only GCRA has (redis-cell's
//! `throttle`, reservations, blocks, penalties and rewards) are in `super`,
//! `super::super::reservation` and `super::super::adjust`.

use super::RedisAlgorithm;
use crate::redis::connection::error::RedisLimitError;
use crate::redis::scripts::{self, clamp_i64, script_spec, Params};
use crate::Gcra;
use crate::Quota;

/// GCRA as the in-process limiter decides it, on the server's clock: the interval `T` rounded
/// up to a whole microsecond, the burst. Its waits are reservations, so waiters across every
/// process are granted in the order their reservations reached Redis.
impl RedisAlgorithm for Gcra {
    const NAME: &'static str = "gcra";

    script_spec!(scripts::GCRA, reserves: true, batches: true, adjusts: true, expand: expand);

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        Params::interval(quota)
    }
}

/// The script's check reply `{now, e}` (and each check of a batch, `{now, e_i}`) to the full
/// `{now, status, remaining, retry_after or -1, reset_after}`: `e >= 0` is the debt (TAT - now,
/// at least 0) after the check (admitted, a peek, or over the burst), `e < 0` a denial with
/// debt `-1 - e`. The rest follows from `n`, `b` and `T` exactly as the script would compute it
/// (two fewer reply elements cost Redis measurably less per call). Another shape is returned
/// as it is: the full five-element reply (a key with holes, whose `remaining` and
/// `retry_after` the debt alone does not give) for the parser to read, anything else for it to
/// reject.
pub(crate) fn expand(reply: Vec<i64>, n: i64, p: Params) -> Vec<i64> {
    let &[now, e] = reply.as_slice() else {
        return reply;
    };
    let (b, t) = (p.limit, p.span_us);
    // At most 2^51 (Params::interval), so neither product overflows.
    let tau = b.saturating_mul(t);
    let n = u64::try_from(n).unwrap_or(0);
    let denied = e < 0;
    // -1 - e for e < 0 is in 0..=i64::MAX.
    let debt = u64::try_from(if denied { -1 - e } else { e }).unwrap_or(0);
    let status = match () {
        _ if denied => 0,
        _ if n > b => 2,
        _ => 1,
    };
    let retry = if denied {
        clamp_i64(debt.saturating_add(n.saturating_mul(t)).saturating_sub(tau))
    } else {
        -1
    };
    let remaining = if tau > debt {
        ((tau - debt) / t).min(b)
    } else {
        0
    };
    let full = [now, status, clamp_i64(remaining), retry, clamp_i64(debt)];
    // In the reply's own buffer: the reply's integers are usually collected in place from
    // the connection's list of values, which leaves room for five.
    let mut reply = reply;
    reply.clear();
    reply.extend_from_slice(&full);
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_replies_expand_to_the_full_check_reply() {
        // b = 3, T = 100: tau = 300.
        let p = Params::interval(
            Quota::from_interval(std::time::Duration::from_micros(100))
                .unwrap()
                .with_burst(3)
                .unwrap(),
        )
        .unwrap();
        // Admitted, debt 150 after: 1 left.
        assert_eq!(expand(vec![9, 150], 1, p), vec![9, 1, 1, -1, 150]);
        // Denied with debt 250 for n = 1: retry 250 + 100 - 300 = 50, nothing left.
        assert_eq!(expand(vec![9, -251], 1, p), vec![9, 0, 0, 50, 250]);
        // Denied for n = 2 with debt 150: 1 left, retry 150 + 200 - 300 = 50.
        assert_eq!(expand(vec![9, -151], 2, p), vec![9, 0, 1, 50, 150]);
        // Over the burst (n clamped to b + 1), a peek, a full bucket.
        assert_eq!(expand(vec![9, 0], 4, p), vec![9, 2, 3, -1, 0]);
        assert_eq!(expand(vec![9, 0], 0, p), vec![9, 1, 3, -1, 0]);
        // Other shapes are left for the parser to reject.
        assert_eq!(expand(vec![9, 1, 2], 1, p), vec![9, 1, 2]);
        assert_eq!(expand(vec![9, i64::MIN], 1, p)[4], i64::MAX);
    }
}
