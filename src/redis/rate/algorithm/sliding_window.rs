//! The sliding window of `k` sub-windows on Redis: one short string key per limited thing,
//! `"s:c1:c2:...:cj"`, the index `s` of the newest sub-window holding permits and the counts of
//! sub-windows `s`, `s - 1`, ... back to the oldest one still counted (at most `k`, empty ones
//! at the old end dropped), expiring when sub-window `s` leaves the window.
//!
//! Why one string rather than a hash of up to `k` `{sub-window: count}` fields: a decision is
//! one `GET` and, on admission, one `SET ... PXAT` (as the fixed and weighted windows), and
//! sub-windows that left the window disappear by being rewritten, where a hash would need an
//! `HDEL` per stale field; one index for all counts also keeps the string short (a count per
//! sub-window, `0` for an empty one in between: with 8 sub-windows holding permits, 136 bytes
//! against a listpack hash's 168, both `SET`/`HSET` from redis-cli). After one admission
//! at `k = 8` a key takes 120 bytes by `MEMORY USAGE` (`benches/redis.rs`, Redis 7.0), as the
//! fixed window's does; each further sub-window still counted adds its count's digits and a
//! colon (the same strings `SET` from redis-cli: a key whose 64 sub-windows all hold two-digit
//! counts takes 224 bytes more than one holding a single count).
//!
//! A block (`block`) stamps its entry at the block's end less `W`, anywhere in a sub-window, as
//! the in-process window does: until that entry leaves the window, the key is stored as
//! `"=t1:c1:t2:c2:..."`, every entry's stamp (µs) and count, oldest first, and then in the
//! short form again. While the newest `b` entries are *block entries* (a block's entries
//! stamped after every grant and penalty, which the decision's instant and a grant's stamp do
//! not read, as in process), the key is `"=t1:c1:...:tj:cj=b"`. The script reads all three, and
//! decides on the in-process log of `(stamp, count)` entries either way; a key written before
//! block entries were marked has none, and decides at its newest stamp, as it did (it can only
//! under-admit).
//!
//! Under a `state_name` the value starts with the quota that wrote it, `"L,W,k,"` (then
//! `"H,U,"` while it holds its entries for a longer window `H` until `U`): another quota
//! decodes the entries on the writer's grid and decides on the same stamps, as the sliding
//! log does.

use super::RedisAlgorithm;
use crate::redis::connection::error::RedisLimitError;
use crate::redis::scripts::{self, script_spec, Params};
use crate::Quota;
use crate::SlidingWindow;

/// The sliding window with `k` sub-windows, aligned to the Unix epoch on the server's clock.
/// `k` is one of the script's parameters and part of the key name
/// (`<prefix>:sliding:<W µs>:<L>:<k>:<key>`), so limiters with different `k` never share
/// state.
///
/// What the in-process sliding window refuses (`k` outside `2..=64`, or not dividing `W` in
/// nanoseconds) is refused the same way ([`RedisLimitError::InvalidQuota`]). The script counts
/// whole microseconds, so a window that is not a whole number of microseconds divisible by `k`
/// (`Quota::new(10, Duration::from_micros(1001))` with `k = 8`: sub-windows of 125.125 µs) is
/// [`RedisLimitError::Unsupported`]: rounding the window up, as the other windows do, would
/// move every sub-window boundary.
impl RedisAlgorithm for SlidingWindow {
    const NAME: &'static str = "sliding";

    script_spec!(scripts::SLIDING_WINDOW, reserves: false, batches: false, adjusts: true);

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        let p = Params::window(quota)?;
        // What the in-process sliding window refuses, refused the same way.
        self.sub_window(&quota)?;
        let k = self.sub_windows();
        if quota.period().as_nanos() % 1000 != 0 || p.span_us % u64::from(k) != 0 {
            return Err(RedisLimitError::Unsupported(
                "a sliding window on Redis counts whole microseconds: its window must be a \
                 whole number of microseconds that the number of sub-windows divides",
            ));
        }
        Ok(Params {
            sub_windows: Some(k),
            ..p
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::QuotaError;

    fn params(k: u32, q: Quota) -> Result<Params, RedisLimitError> {
        SlidingWindow::new(k).redis_params(q)
    }

    #[test]
    fn whole_microsecond_sub_windows_run_with_k_as_a_parameter() {
        let p = params(6, Quota::per_minute(100).unwrap()).unwrap();
        assert_eq!(
            p,
            Params {
                limit: 100,
                span_us: 60_000_000,
                sub_windows: Some(6),
                keeps_quota: false,
            }
        );
        // 1 ms in 8 sub-windows of 125 µs, and in 64 of 15.625 µs (refused below).
        assert!(params(8, Quota::new(3, Duration::from_millis(1)).unwrap()).is_ok());
    }

    #[test]
    fn what_the_in_process_window_refuses_is_refused_the_same_way() {
        let per_minute = Quota::per_minute(100).unwrap();
        for k in [0, 1, 7, 65] {
            assert!(
                matches!(
                    params(k, per_minute),
                    Err(RedisLimitError::InvalidQuota(QuotaError::Unsupported(_)))
                ),
                "k = {k}"
            );
        }
        let bursty = per_minute.with_burst(3).unwrap();
        assert!(matches!(
            params(6, bursty),
            Err(RedisLimitError::InvalidQuota(QuotaError::Unsupported(_)))
        ));
        let year = Duration::from_secs(365 * 24 * 3600);
        assert!(matches!(
            params(2, Quota::new(1, year * 72).unwrap()),
            Err(RedisLimitError::QuotaOutOfRange(_))
        ));
    }

    #[test]
    fn sub_windows_that_are_not_whole_microseconds_are_unsupported() {
        let unsupported = |k: u32, q: Quota| {
            // In process the sub-windows are whole nanoseconds: only Redis refuses.
            assert!(crate::RateLimiter::builder(q)
                .algorithm(SlidingWindow::new(k))
                .is_ok());
            matches!(params(k, q), Err(RedisLimitError::Unsupported(_)))
        };
        // 1001 µs / 8 = 125.125 µs.
        assert!(unsupported(
            8,
            Quota::new(10, Duration::from_micros(1001)).unwrap()
        ));
        // 1 ms / 64 = 15.625 µs.
        assert!(unsupported(
            64,
            Quota::new(10, Duration::from_millis(1)).unwrap()
        ));
        // A window of 1.5 µs (750 ns sub-windows) would round up to 2 µs.
        assert!(unsupported(
            2,
            Quota::new(1, Duration::from_nanos(1500)).unwrap()
        ));
    }
}
