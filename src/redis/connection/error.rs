//! The typed error of the Redis backend: [`RedisLimitError`].

use std::fmt;
use std::time::Duration;

use crate::AcquireError;
use crate::{Quota, QuotaError};

use super::failure::{Failure, ServerError, UnavailableError};

/// Why the Redis limiter did not grant permits or could not decide.
///
/// ```
/// use std::time::Duration;
/// use tollgate::redis::RedisLimitError;
/// use tollgate::AcquireError;
///
/// let e = RedisLimitError::from(AcquireError::RateLimited { retry_after: Duration::from_secs(2) });
/// assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
/// assert!(!e.is_unavailable());
/// assert!(RedisLimitError::Timeout { deadline: Duration::from_millis(50) }.is_unavailable());
/// ```
///
/// Redis errors come in two kinds: [`Unavailable`](Self::Unavailable) (Redis could not
/// answer: the [`FailurePolicy`](super::super::FailurePolicy) decides, and only
/// [`FailurePolicy::Error`](super::super::FailurePolicy::Error) returns it) and
/// [`Server`](Self::Server) (Redis answered with an error: returned under every policy).
/// Neither exposes the redis client's error type; it is their
/// [`source`](std::error::Error::source).
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisLimitError {
    /// Decided, and not granted: the same error the in-process limiter returns
    /// (`RateLimited`, `ExceedsBurst`, `Unrepresentable`).
    Limited(AcquireError),
    /// Redis did not answer within the deadline
    /// ([`FailurePolicy::Error`](super::super::FailurePolicy::Error) only). The script may still
    /// have run: a permit may have been taken, never one too many granted.
    Timeout {
        /// The per-call deadline in force.
        deadline: Duration,
    },
    /// Redis could not answer: no connection, the cluster down for the key's slot, loading,
    /// a slot migration that did not settle within the deadline
    /// ([`FailurePolicy::Error`](super::super::FailurePolicy::Error) only; the other policies decide).
    Unavailable(UnavailableError),
    /// Redis answered with an error, or the client refused the call (a wrong-type or
    /// foreign value at a state key, a script error, a bad URL): under every policy, since
    /// admitting or refusing would hide a bug.
    Server(ServerError),
    /// A quota whose interval, window or limit does not fit the scripts' exact integer range:
    /// intervals times bursts and windows up to 2^51 µs (about 71 years), limits up to 2^51.
    QuotaOutOfRange(Quota),
    /// A quota the algorithm cannot run: one given with a call (`throttle`, `check_with`, `check_n_with`)
    /// that
    /// is invalid, or a window quota whose burst differs from its count (refused at `connect`,
    /// as in process).
    InvalidQuota(QuotaError),
    /// A key prefix containing `{` or `}`, which would take over your keys' hash tags.
    InvalidPrefix(String),
    /// The algorithm, as configured, cannot run on Redis (a
    /// [`FixedWindow`](crate::FixedWindow) counted from a clock's origin rather than the
    /// epoch; a [`SlidingWindow`](crate::SlidingWindow) whose sub-windows are not whole
    /// microseconds), or a [`FailurePolicy::Fallback`](super::super::FailurePolicy::Fallback) limiter
    /// runs another algorithm than the one chosen after it.
    Unsupported(&'static str),
    /// The server replied with something no tollgate script returns (another script under the
    /// same SHA1, or a proxy in the way).
    UnexpectedReply(String),
}

impl RedisLimitError {
    pub(crate) fn from_failure(failure: Failure, deadline: Duration) -> RedisLimitError {
        match failure {
            Failure::Timeout => RedisLimitError::Timeout { deadline },
            Failure::Unavailable(e) => RedisLimitError::Unavailable(e),
            Failure::Server(e) => RedisLimitError::Server(e),
        }
    }

    /// A redis client error, classified ([`classify`](super::failure::classify)).
    pub(crate) fn from_redis(e: ::redis::RedisError) -> RedisLimitError {
        RedisLimitError::from_failure(super::failure::classify(e), Duration::ZERO)
    }

    /// Whether Redis could not be reached or did not answer (as opposed to a decision or bad
    /// input).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            RedisLimitError::Timeout { .. } | RedisLimitError::Unavailable(_)
        )
    }

    /// The wait after which retrying could succeed, when the limiter denied.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RedisLimitError::Limited(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// For [`all_or_none_async`](crate::all_or_none_async): a wait when the limiter denied; `None`
/// (waiting would not help, and this refusal wins) when the request can never be admitted or
/// Redis did not answer.
impl crate::Refusal for RedisLimitError {
    fn retry_after(&self) -> Option<Duration> {
        RedisLimitError::retry_after(self)
    }
}

impl From<AcquireError> for RedisLimitError {
    fn from(e: AcquireError) -> Self {
        RedisLimitError::Limited(e)
    }
}

impl From<QuotaError> for RedisLimitError {
    fn from(e: QuotaError) -> Self {
        RedisLimitError::InvalidQuota(e)
    }
}

impl fmt::Display for RedisLimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisLimitError::Limited(e) => e.fmt(f),
            RedisLimitError::Timeout { deadline } => {
                write!(f, "redis did not answer within the {deadline:?} deadline")
            }
            RedisLimitError::Unavailable(e) => e.fmt(f),
            RedisLimitError::Server(e) => e.fmt(f),
            RedisLimitError::QuotaOutOfRange(q) => write!(
                f,
                "{q:?} does not fit the redis scripts' integer range (2^51 us, 2^51 permits)"
            ),
            RedisLimitError::InvalidQuota(e) => e.fmt(f),
            RedisLimitError::InvalidPrefix(p) => {
                write!(
                    f,
                    "key prefix {p:?} contains a brace, which would take over hash tags"
                )
            }
            RedisLimitError::Unsupported(why) => f.write_str(why),
            RedisLimitError::UnexpectedReply(r) => write!(f, "unexpected reply from redis: {r}"),
        }
    }
}

impl std::error::Error for RedisLimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisLimitError::Limited(e) => Some(e),
            RedisLimitError::Unavailable(e) => Some(e),
            RedisLimitError::Server(e) => Some(e),
            RedisLimitError::InvalidQuota(e) => Some(e),
            _ => None,
        }
    }
}
