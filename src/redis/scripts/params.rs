//! [`Params`]: a quota as the scripts see it.

use crate::Quota;

use super::super::connection::error::RedisLimitError;

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
    /// A named state (`state_name`): the key holds the quota next
    /// to the state, so a process under another quota converts it. The scripts learn it from a
    /// negative burst argument ([`Params::limit_arg`]).
    pub(crate) keeps_quota: bool,
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
                keeps_quota: false,
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
                keeps_quota: false,
            })
            .ok_or(RedisLimitError::QuotaOutOfRange(q))
    }

    /// The burst or limit as the scripts' first argument: negated for a state that keeps its
    /// quota (`limit >= 1`, so the sign is unambiguous).
    pub(crate) fn limit_arg(&self) -> i64 {
        let l = clamp_i64(self.limit);
        if self.keeps_quota {
            -l
        } else {
            l
        }
    }

    /// Whether `other` is the same quota (whatever `keeps_quota` says).
    pub(crate) fn same_quota(&self, other: Params) -> bool {
        (self.limit, self.span_us, self.sub_windows)
            == (other.limit, other.span_us, other.sub_windows)
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
            self.limit_arg(),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
                keeps_quota: false,
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
                keeps_quota: false,
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
            keeps_quota: false,
        };
        assert_eq!((p.clamp(0), p.clamp(10), p.clamp(u64::MAX)), (0, 10, 11));
        assert_eq!(p.check_args(u64::MAX), ([10, 1, 11, 0], 3));
        let sliding = Params {
            sub_windows: Some(8),
            ..p
        };
        assert_eq!(sliding.check_args(3), ([10, 1, 3, 8], 4));
    }
}
