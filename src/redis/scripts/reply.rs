//! [`CheckReply`]: the reply of every script's check.

use std::time::Duration;

use crate::Decision;

use super::super::connection::error::RedisLimitError;

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
}
