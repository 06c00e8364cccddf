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
    /// Redis, connected, did not answer within the deadline
    /// ([`FailurePolicy::Error`](super::super::FailurePolicy::Error) only): the script was
    /// sent and may still have run, so a permit may have been taken (never one too many
    /// granted). A call that ran out of its deadline waiting for a connection (Redis down
    /// at start, or since the connection was lost) is
    /// [`Unavailable`](Self::Unavailable) instead.
    Timeout {
        /// The per-call deadline in force.
        deadline: Duration,
    },
    /// Redis could not answer: no connection (refused, lost, or none made within the
    /// deadline: kind [`Connection`](super::failure::UnavailableKind::Connection) whether the
    /// call met the refusal or waited for a connection), the cluster down for the key's slot,
    /// loading, a slot migration that did not settle within the deadline
    /// ([`FailurePolicy::Error`](super::super::FailurePolicy::Error) only; the other policies decide).
    /// A connection lost mid-call, or made in the last moments of the call's deadline, may
    /// have carried the script: as with [`Timeout`](Self::Timeout), a permit may have been
    /// taken. On a cluster, whether a connection answered is noted for the whole cluster: with
    /// one node down and the others answering, a call on that node's keys that runs out of
    /// its deadline is a `Timeout`.
    Unavailable(UnavailableError),
    /// Redis answered with an error, or the client refused the call (a wrong-type or
    /// foreign value at a state key, a script error, failed authentication): under every
    /// policy, since admitting or refusing would hide a bug.
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
    /// A [`state_name`](super::super::RedisRateLimiterBuilder::state_name) that is not an ASCII
    /// letter followed by ASCII letters, digits, `_`, `-` or `.`.
    InvalidStateName(String),
    /// A URL given to `connect`, `connect_cluster` or `connect_sentinel` that the redis client
    /// does not read (no scheme, as in `127.0.0.1:6379`; another scheme; a bad database
    /// number; `rediss://` without a TLS feature of the `redis` crate), or no URL at all:
    /// refused before anything is sent. The expected forms are
    /// `redis://[user:password@]host[:port][/db]`, `rediss://...` for TLS and
    /// `redis+unix:///path/to/socket[?db=N]`.
    InvalidUrl {
        /// The URL as given, its password (if any) replaced by `***`; empty when none was
        /// given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The algorithm, as configured, cannot run on Redis (a
    /// [`FixedWindow`](crate::FixedWindow) counted from a clock's origin rather than the
    /// epoch; a [`SlidingWindow`](crate::SlidingWindow) whose sub-windows are not whole
    /// microseconds), or a [`FailurePolicy::Fallback`](super::super::FailurePolicy::Fallback) limiter
    /// runs another algorithm than the one chosen after it.
    Unsupported(&'static str),
    /// Settings of [`local_batches`](super::super::RedisRateLimiterBuilder::local_batches)
    /// that cannot work (a zero refresh interval, a share outside 1 to 100 percent, or one
    /// that caps every batch below 2 permits), reported by `connect`.
    InvalidBatches(&'static str),
    /// The server replied with something no tollgate script returns (another script under the
    /// same SHA1, or a proxy in the way).
    UnexpectedReply(String),
}

/// The forms of URL the redis client reads, as the error shows them.
const EXPECTED_URL: &str = "redis://[user:password@]host[:port][/db], \
    rediss://[user:password@]host[:port][/db] (TLS, with a TLS feature of the redis crate) \
    or redis+unix:///path/to/socket[?db=N]";

impl RedisLimitError {
    pub(crate) fn from_failure(failure: Failure, deadline: Duration) -> RedisLimitError {
        match failure {
            Failure::Timeout => RedisLimitError::Timeout { deadline },
            Failure::Unavailable(e) => RedisLimitError::Unavailable(e),
            Failure::Server(e) => RedisLimitError::Server(e),
        }
    }

    /// `url` read by the redis client's own parser (the one `Client::open` uses), before
    /// anything is sent: what it refuses is [`InvalidUrl`](Self::InvalidUrl).
    pub(crate) fn check_url(url: &str) -> Result<(), RedisLimitError> {
        use ::redis::IntoConnectionInfo;
        match url.into_connection_info() {
            Ok(_) => Ok(()),
            Err(e) => Err(RedisLimitError::invalid_url(url, &e)),
        }
    }

    /// Every URL of a list checked ([`check_url`](Self::check_url)); an empty list names no
    /// `what` (node, sentinel) to connect to.
    pub(crate) fn check_urls(urls: &[String], what: &str) -> Result<(), RedisLimitError> {
        if urls.is_empty() {
            return Err(RedisLimitError::InvalidUrl {
                url: String::new(),
                reason: format!("no {what} URL given"),
            });
        }
        urls.iter().try_for_each(|u| RedisLimitError::check_url(u))
    }

    /// The redis client's refusal of `url` (a configuration error), said in our words.
    pub(crate) fn invalid_url(url: &str, e: &::redis::RedisError) -> RedisLimitError {
        const SCHEMES: [&str; 7] = [
            "redis",
            "rediss",
            "valkey",
            "valkeys",
            "redis+unix",
            "valkey+unix",
            "unix",
        ];
        let reason = match url.split_once("://") {
            None => "no scheme".to_owned(),
            Some((scheme, _)) if !SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)) => {
                format!("unknown scheme {scheme:?}")
            }
            // The client's words, without the kind it appends (`- InvalidClientConfig`).
            _ => e.to_string().replacen(" - InvalidClientConfig", "", 1),
        };
        RedisLimitError::InvalidUrl {
            url: redact(url),
            reason,
        }
    }

    /// A redis client error, classified ([`classify`](super::failure::classify)).
    pub(crate) fn from_redis(e: ::redis::RedisError) -> RedisLimitError {
        RedisLimitError::from_failure(super::failure::classify(e), Duration::ZERO)
    }

    /// Whether Redis could not be reached or did not answer (as opposed to a decision or bad
    /// input).
    ///
    /// What a fail-open caller admits on (the limiter's
    /// [`FailurePolicy`](super::super::FailurePolicy) can do it for every call):
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::redis::RedisLimitError;
    /// use tollgate::AcquireError;
    ///
    /// let admit = |r: Result<(), RedisLimitError>| match r {
    ///     Ok(()) => true,
    ///     Err(e) => e.is_unavailable(), // Redis down: admit rather than refuse everyone
    /// };
    /// assert!(admit(Err(RedisLimitError::Timeout { deadline: Duration::from_millis(50) })));
    /// let limited = AcquireError::RateLimited { retry_after: Duration::from_secs(1) };
    /// assert!(!admit(Err(limited.into())));
    /// assert!(!admit(Err(RedisLimitError::InvalidPrefix("{users}".into()))));
    /// ```
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            RedisLimitError::Timeout { .. } | RedisLimitError::Unavailable(_)
        )
    }

    /// The wait after which retrying could succeed, when the limiter denied.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::redis::RedisLimitError;
    /// use tollgate::AcquireError;
    ///
    /// let limited = RedisLimitError::from(AcquireError::RateLimited { retry_after: Duration::from_secs(3) });
    /// assert_eq!(limited.retry_after(), Some(Duration::from_secs(3)));
    /// // Never grantable, or no decision at all: no wait to suggest.
    /// let too_many = RedisLimitError::from(AcquireError::ExceedsBurst { requested: 20, burst: 10 });
    /// assert_eq!(too_many.retry_after(), None);
    /// assert_eq!(RedisLimitError::Timeout { deadline: Duration::from_millis(50) }.retry_after(), None);
    /// ```
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

/// `url` with its password (`user:password@`, or `pass=` in a Unix socket URL's query)
/// replaced by `***`: an error message may end up in logs. The URL is one the client refused,
/// so its parts cannot be trusted to be where a valid URL has them: everything from the first
/// `:` to the last `@` goes (a password holding `/`, `?` or `#` included), at the price of
/// hiding more than the password in a URL with an `@` further on.
fn redact(url: &str) -> String {
    // A `://` counts as the scheme's end only after a valid scheme: in a URL without one it
    // may sit after the password (`:secret@://`), and starting there would skip the password.
    let start = url
        .find("://")
        .filter(|&i| {
            i > 0
                && url[..i]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        })
        .map_or(0, |i| i + 3);
    let (head, rest) = url.split_at(start);
    let mut out = match rest.rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(colon) => format!("{head}{}:***{}", &rest[..colon], &rest[at..]),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    };
    if let Some(q) = out.find('?') {
        let query = out[q + 1..]
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k == "pass" || k == "password" => format!("{k}=***"),
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&");
        out.truncate(q + 1);
        out.push_str(&query);
    }
    out
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
            RedisLimitError::InvalidStateName(n) => write!(
                f,
                "state name {n:?} is not a letter followed by letters, digits, '_', '-' or '.'"
            ),
            RedisLimitError::InvalidUrl { url, reason } => write!(
                f,
                "invalid redis URL {url:?}: {reason}; expected {EXPECTED_URL}"
            ),
            RedisLimitError::Unsupported(why) => f.write_str(why),
            RedisLimitError::InvalidBatches(why) => write!(f, "invalid local batches: {why}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A password never reaches the message, wherever the URL puts it.
    #[test]
    fn passwords_are_redacted() {
        for (url, shown) in [
            ("redis://app:s3cret@h:6379/x", "redis://app:***@h:6379/x"),
            ("redis://:s3cret@h/", "redis://:***@h/"),
            ("app:s3cret@h:6379", "app:***@h:6379"),
            // No scheme, and a `://` after the password.
            (":0aaA0!@://", ":***@://"),
            ("app:pw/x://@h", "app:***@h"),
            ("redis://user@h/", "redis://user@h/"),
            (
                "redis+unix:///run/r.sock?db=x&pass=s3cret",
                "redis+unix:///run/r.sock?db=x&pass=***",
            ),
            ("127.0.0.1:6379", "127.0.0.1:6379"),
            ("redis://app:se/cr?et#x@h:6379", "redis://app:***@h:6379"),
        ] {
            assert_eq!(redact(url), shown);
        }
    }

    use proptest::prelude::*;

    /// Any character a configuration file can hold, weighted towards the URL's separators.
    fn hostile() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                3 => proptest::sample::select(vec![':', '/', '?', '#', '&', '=', '%', '[', ']', ' ', '\n']),
                3 => proptest::char::range(' ', '~'),
                1 => any::<char>(),
            ],
            0..24,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        /// Whatever else the URL holds, a password in its userinfo (any characters but `@`)
        /// or in a `pass=` query value (any but `&`) never reaches the message, and no input
        /// makes the redaction panic.
        #[test]
        fn no_password_survives_redaction(
            scheme in proptest::sample::select(vec!["redis://", "rediss://", "redis+unix://", "", "x://"]),
            user in hostile(),
            secret in "[!-~]{6,20}",
            host in hostile(),
            tail in hostile(),
            in_query: bool,
        ) {
            let user = user.replace('@', "");
            let (url, secret) = if in_query {
                // The query's separators cannot be in a query value.
                let secret = secret.replace(['&', '@', '#'], "x");
                (format!("{scheme}{host}?db=1&pass={secret}"), secret)
            } else {
                let secret = secret.replace('@', "x");
                let host = host.replace('@', "");
                (format!("{scheme}{user}:{secret}@{host}{tail}"), secret)
            };
            let shown = redact(&url);
            // The secret may appear elsewhere by chance only if it is in the other parts.
            let elsewhere = url.replacen(&secret, "", 1).contains(&secret);
            prop_assert!(elsewhere || !shown.contains(&secret), "{url:?} -> {shown:?}");
            let _ = redact(&tail);
        }
    }
}
