//! The semaphore's scripts, one per operation (each after the shared prelude and
//! `common.lua`), and their replies parsed into typed values.

use std::sync::LazyLock;
use std::time::Duration;

use super::super::connection::client::LuaScript;
use super::super::connection::error::RedisLimitError;

/// `fn name() -> &'static LuaScript` for `$file` after the prelude and the semaphore's common
/// part.
macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(super) fn $name() -> &'static LuaScript {
            static SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| {
                LuaScript::new(concat!(
                    include_str!("../scripts/prelude.lua"),
                    include_str!("common.lua"),
                    include_str!($file)
                ))
            });
            &SCRIPT
        }
    };
}

script!(acquire, "acquire.lua");
script!(renew, "renew.lua");
script!(release, "release.lua");
script!(inspect, "inspect.lua");

fn bad(reply: &[i64]) -> RedisLimitError {
    RedisLimitError::UnexpectedReply(format!("{reply:?}"))
}

fn us(reply: &[i64], v: i64) -> Result<u64, RedisLimitError> {
    u64::try_from(v).map_err(|_| bad(reply))
}

/// What `acquire.lua` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AcquireReply {
    Granted {
        token: u64,
        expires_at: Duration,
    },
    /// No room now; the first lease ends after `first_ends` (zero if none is held: the limit
    /// was lowered below what is held, or a race with an expiry).
    Busy {
        first_ends: Duration,
    },
    /// `n` above the limit.
    Never,
}

impl AcquireReply {
    pub(super) fn parse(reply: &[i64]) -> Result<AcquireReply, RedisLimitError> {
        let &[_now, status, token, at, _held] = reply else {
            return Err(bad(reply));
        };
        let at = Duration::from_micros(us(reply, at)?);
        match status {
            1 => Ok(AcquireReply::Granted {
                token: us(reply, token)?,
                expires_at: at,
            }),
            0 => Ok(AcquireReply::Busy { first_ends: at }),
            2 => Ok(AcquireReply::Never),
            _ => Err(bad(reply)),
        }
    }
}

/// `renew.lua`: the new expiry, or `None` if the lease had ended.
pub(super) fn parse_renew(reply: &[i64]) -> Result<Option<Duration>, RedisLimitError> {
    match *reply {
        [_, 1, at] => Ok(Some(Duration::from_micros(us(reply, at)?))),
        [_, 0, _] => Ok(None),
        _ => Err(bad(reply)),
    }
}

/// `release.lua`: whether the lease was held (and is now released).
pub(super) fn parse_release(reply: &[i64]) -> Result<bool, RedisLimitError> {
    match *reply {
        [_, 1] => Ok(true),
        [_, 0] => Ok(false),
        _ => Err(bad(reply)),
    }
}

/// `inspect.lua`: the permits held, and whether the asked token's lease is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct InspectReply {
    pub(super) held: u64,
    pub(super) token_held: bool,
}

impl InspectReply {
    pub(super) fn parse(reply: &[i64]) -> Result<InspectReply, RedisLimitError> {
        let &[_now, held, last, found, _expiry] = reply else {
            return Err(bad(reply));
        };
        us(reply, last)?;
        Ok(InspectReply {
            held: us(reply, held)?,
            token_held: match found {
                0 => false,
                1 => true,
                _ => return Err(bad(reply)),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_or_fail_typed() {
        assert_eq!(
            AcquireReply::parse(&[5, 1, 9, 7, 1]).unwrap(),
            AcquireReply::Granted {
                token: 9,
                expires_at: Duration::from_micros(7)
            }
        );
        assert_eq!(
            AcquireReply::parse(&[5, 0, 0, 3, 2]).unwrap(),
            AcquireReply::Busy {
                first_ends: Duration::from_micros(3)
            }
        );
        assert_eq!(
            AcquireReply::parse(&[5, 2, 0, 0, 0]).unwrap(),
            AcquireReply::Never
        );
        assert_eq!(
            parse_renew(&[5, 1, 8]).unwrap(),
            Some(Duration::from_micros(8))
        );
        assert_eq!(parse_renew(&[5, 0, 0]).unwrap(), None);
        assert!(parse_release(&[5, 1]).unwrap());
        assert!(!parse_release(&[5, 0]).unwrap());
        let i = InspectReply::parse(&[5, 3, 9, 1, 7]).unwrap();
        assert_eq!((i.held, i.token_held), (3, true));
        let unexpected =
            |r: Result<(), RedisLimitError>| matches!(r, Err(RedisLimitError::UnexpectedReply(_)));
        assert!(unexpected(AcquireReply::parse(&[5, 3, 0, 0, 0]).map(drop)));
        assert!(unexpected(AcquireReply::parse(&[5, 1, -1, 0, 0]).map(drop)));
        assert!(unexpected(AcquireReply::parse(&[5, 1]).map(drop)));
        assert!(unexpected(parse_renew(&[5, 2, 0]).map(drop)));
        assert!(unexpected(parse_release(&[5]).map(drop)));
        assert!(unexpected(InspectReply::parse(&[5, -1, 0, 0, 0]).map(drop)));
        assert!(unexpected(InspectReply::parse(&[5, 1, 0, 2, 0]).map(drop)));
    }
}
