//! What went wrong on the way to Redis, sorted once ([`classify`]) into the two kinds the
//! limiter treats differently: Redis could not answer ([`UnavailableError`], decided by the
//! [`FailurePolicy`](super::super::FailurePolicy)), or it answered with an error
//! ([`ServerError`], returned under every policy: an admission would hide a bug).

use std::fmt;

use ::redis::{ErrorKind, RedisError, ServerErrorKind as RedisKind};

/// Why a call to Redis produced no usable reply (internal): the policy decides the first two.
#[derive(Clone, Debug)]
pub(crate) enum Failure {
    /// No reply within the deadline. The script may still have run.
    Timeout,
    /// Redis could not answer: the failure policy decides.
    Unavailable(UnavailableError),
    /// Redis answered with an error: a typed error under every policy.
    Server(ServerError),
}

impl Failure {
    /// Whether the failure policy decides this failure (Redis could not answer).
    pub(crate) fn policy_decides(&self) -> bool {
        !matches!(self, Failure::Server(_))
    }
}

/// The one classification of a redis-rs error: could Redis answer or not. Every row of the
/// table in the guide (`docs/guide/redis.md`, "When Redis fails") is a line here.
pub(crate) fn classify(e: RedisError) -> Failure {
    use UnavailableKind as U;
    let unavailable = |kind| {
        Failure::Unavailable(UnavailableError {
            kind,
            source: Some(e.clone()),
        })
    };
    match e.kind() {
        // Refused, reset, lost mid-reply, not connected (yet), or no connection to the node
        // owning the slot: nothing answered.
        ErrorKind::Io | ErrorKind::ClusterConnectionNotFound => unavailable(U::Connection),
        ErrorKind::Server(RedisKind::ClusterDown) => unavailable(U::ClusterDown),
        ErrorKind::Server(RedisKind::BusyLoading) => unavailable(U::Loading),
        // A slot in the middle of a migration, or a redirect not settled within the deadline.
        ErrorKind::Server(RedisKind::TryAgain | RedisKind::Ask | RedisKind::Moved) => {
            unavailable(U::TryAgain)
        }
        ErrorKind::Server(RedisKind::MasterDown) => unavailable(U::MasterDown),
        // A failover demoted the server we write to: the primary is elsewhere now.
        ErrorKind::Server(RedisKind::ReadOnly) => unavailable(U::ReadOnly),
        ErrorKind::Extension if e.code() == Some("BUSY") => unavailable(U::Busy),
        ErrorKind::Extension if e.code() == Some("WRONGTYPE") => {
            server(ServerErrorKind::WrongType, e)
        }
        // The scripts' own refusal of a value they did not write (`foreign` in prelude.lua).
        ErrorKind::Extension if e.code() == Some("TOLLGATE") => server(ServerErrorKind::Script, e),
        ErrorKind::Server(RedisKind::NoScript) => server(ServerErrorKind::NoScript, e),
        ErrorKind::Server(RedisKind::ResponseError)
            if e.detail().is_some_and(|d| d.contains("script")) =>
        {
            server(ServerErrorKind::Script, e)
        }
        ErrorKind::Server(_) | ErrorKind::Extension => server(ServerErrorKind::Other, e),
        // Ours or the client's: a configuration it refuses (a URL is checked before, as
        // `InvalidUrl`), failed authentication, a reply that does not parse or has another
        // type.
        _ => server(ServerErrorKind::Client, e),
    }
}

fn server(kind: ServerErrorKind, source: RedisError) -> Failure {
    Failure::Server(ServerError { kind, source })
}

/// What kept Redis from answering; see [`UnavailableError`].
///
/// ```
/// use tollgate::redis::UnavailableKind;
/// assert_ne!(UnavailableKind::Connection, UnavailableKind::Loading);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnavailableKind {
    /// No connection: refused, reset or lost (a reply lost with it), or none made within the
    /// call's deadline (a limiter started during an outage, or one reconnecting: the
    /// connection is retried in the background, 10 ms to 50 ms apart).
    Connection,
    /// The cluster does not serve the key's slot (`CLUSTERDOWN`: a primary down, or a
    /// restarted primary in its first seconds).
    ClusterDown,
    /// The server is loading its data set (`LOADING`).
    Loading,
    /// The key's slot is being migrated (`TRYAGAIN`, or `ASK`/`MOVED` redirects that did not
    /// settle within the deadline).
    TryAgain,
    /// A replica lost its primary (`MASTERDOWN`).
    MasterDown,
    /// The server is a replica now (`READONLY`): a failover moved the primary.
    ReadOnly,
    /// The server is running another script past its busy threshold (`BUSY`).
    Busy,
}

/// Redis could not answer: the [`FailurePolicy`](super::super::FailurePolicy) decides, and
/// [`FailurePolicy::Error`](super::super::FailurePolicy::Error) returns this as
/// [`RedisLimitError::Unavailable`](super::super::RedisLimitError::Unavailable). The redis client's
/// error, when there is one, is its [`source`](std::error::Error::source).
///
/// ```
/// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) {
/// use tollgate::redis::{RedisLimitError, UnavailableKind};
/// if let Err(RedisLimitError::Unavailable(e)) = limiter.check("k").await {
///     if e.kind() == UnavailableKind::Loading {
///         println!("redis is restarting: {e}");
///     }
/// }
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct UnavailableError {
    kind: UnavailableKind,
    source: Option<RedisError>,
}

impl UnavailableError {
    pub(crate) fn new(kind: UnavailableKind, source: Option<RedisError>) -> UnavailableError {
        UnavailableError { kind, source }
    }

    /// What kept Redis from answering.
    ///
    /// ```
    /// # fn demo(e: &tollgate::redis::UnavailableError) {
    /// println!("{:?}", e.kind());
    /// # }
    /// ```
    #[must_use]
    pub fn kind(&self) -> UnavailableKind {
        self.kind
    }
}

impl fmt::Display for UnavailableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            UnavailableKind::Connection => "no connection to redis",
            UnavailableKind::ClusterDown => "the redis cluster is down for the key's slot",
            UnavailableKind::Loading => "redis is loading its data set",
            UnavailableKind::TryAgain => "the key's slot is being migrated",
            UnavailableKind::MasterDown => "the redis replica lost its primary",
            UnavailableKind::ReadOnly => "the redis server is a read-only replica",
            UnavailableKind::Busy => "redis is busy running a script",
        };
        match &self.source {
            Some(e) => write!(f, "{what}: {e}"),
            None => f.write_str(what),
        }
    }
}

impl std::error::Error for UnavailableError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

/// What Redis (or the client) answered instead of a decision; see [`ServerError`].
///
/// ```
/// use tollgate::redis::ServerErrorKind;
/// assert_ne!(ServerErrorKind::WrongType, ServerErrorKind::Script);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerErrorKind {
    /// A state key holds another type of value (`WRONGTYPE`): something else wrote there.
    WrongType,
    /// The script failed: a value tollgate did not write at a state key (`"hello"` where a
    /// count belongs, a member or score no script writes in a sorted set; error code
    /// `TOLLGATE`, and nothing was written), or another script under the same SHA1.
    Script,
    /// `NOSCRIPT` that sending the script with `EVAL` did not fix.
    NoScript,
    /// Any other error reply (`ERR`, `NOPERM`, `OOM`, `CROSSSLOT`, ...).
    Other,
    /// The client refused: a configuration it does not accept (a URL given to `connect` is
    /// checked first and refused as
    /// [`RedisLimitError::InvalidUrl`](super::super::RedisLimitError::InvalidUrl)), failed
    /// authentication, or a reply of another type than the scripts return.
    Client,
}

/// Redis answered with an error (or the client refused the call): returned as
/// [`RedisLimitError::Server`](super::super::RedisLimitError::Server) under every
/// [`FailurePolicy`](super::super::FailurePolicy), never an admission or a refusal. The redis
/// client's error is its [`source`](std::error::Error::source).
///
/// ```
/// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) {
/// use tollgate::redis::{RedisLimitError, ServerErrorKind};
/// if let Err(RedisLimitError::Server(e)) = limiter.check("k").await {
///     assert!(e.kind() != ServerErrorKind::WrongType || e.code() == Some("WRONGTYPE"));
/// }
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ServerError {
    kind: ServerErrorKind,
    source: RedisError,
}

impl ServerError {
    /// What kind of error.
    ///
    /// ```
    /// # fn demo(e: &tollgate::redis::ServerError) {
    /// println!("{:?}", e.kind());
    /// # }
    /// ```
    #[must_use]
    pub fn kind(&self) -> ServerErrorKind {
        self.kind
    }

    /// The error code Redis replied with (`WRONGTYPE`, `ERR`, `NOSCRIPT`, ...), if Redis
    /// replied.
    ///
    /// ```
    /// # fn demo(e: &tollgate::redis::ServerError) {
    /// println!("{:?}", e.code());
    /// # }
    /// ```
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        self.source.code()
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "redis answered with an error: {}", self.source)
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error a server reply line (`-CODE detail`) becomes in the redis client.
    fn reply(line: &str) -> RedisError {
        ::redis::parse_redis_value(format!("-{line}\r\n").as_bytes())
            .and_then(|v| v.extract_error())
            .expect_err("an error reply")
    }

    fn unavailable(e: RedisError) -> Option<UnavailableKind> {
        match classify(e) {
            Failure::Unavailable(u) => Some(u.kind()),
            _ => None,
        }
    }

    fn server(e: RedisError) -> Option<ServerErrorKind> {
        match classify(e) {
            Failure::Server(s) => Some(s.kind()),
            _ => None,
        }
    }

    /// Every row of the guide's table, including those no test server produces reliably
    /// (`LOADING`, `TRYAGAIN`, `NOSCRIPT` after `EVAL`).
    #[test]
    fn every_row_of_the_table() {
        use std::io::{Error, ErrorKind as Io};
        use UnavailableKind as U;
        for io in [
            Io::ConnectionRefused,
            Io::ConnectionReset,
            Io::UnexpectedEof,
            Io::TimedOut,
        ] {
            assert_eq!(unavailable(Error::new(io, "x").into()), Some(U::Connection));
        }
        let rows = [
            ("CLUSTERDOWN Hash slot not served", U::ClusterDown),
            ("LOADING Redis is loading the dataset in memory", U::Loading),
            (
                "TRYAGAIN Multiple keys request during rehashing of slot",
                U::TryAgain,
            ),
            ("ASK 3999 127.0.0.1:6381", U::TryAgain),
            ("MOVED 3999 127.0.0.1:6381", U::TryAgain),
            ("MASTERDOWN Link with MASTER is down", U::MasterDown),
            (
                "READONLY You can't write against a read only replica.",
                U::ReadOnly,
            ),
            ("BUSY Redis is busy running a script.", U::Busy),
        ];
        for (line, kind) in rows {
            assert_eq!(unavailable(reply(line)), Some(kind), "{line}");
        }
        let rows = [
            (
                "WRONGTYPE Operation against a key holding the wrong kind of value script: x",
                ServerErrorKind::WrongType,
            ),
            (
                "ERR user_script:19: attempt to perform arithmetic on a nil value script: x",
                ServerErrorKind::Script,
            ),
            (
                "TOLLGATE the state key holds a value tollgate did not write (x) script: y",
                ServerErrorKind::Script,
            ),
            ("NOSCRIPT No matching script.", ServerErrorKind::NoScript),
            ("ERR unknown command", ServerErrorKind::Other),
            (
                "NOPERM this user has no permissions",
                ServerErrorKind::Other,
            ),
            (
                "OOM command not allowed when used memory > 'maxmemory'.",
                ServerErrorKind::Other,
            ),
            (
                "CROSSSLOT Keys in request don't hash to the same slot",
                ServerErrorKind::Other,
            ),
        ];
        for (line, kind) in rows {
            assert_eq!(server(reply(line)), Some(kind), "{line}");
        }
        let bad_url = ::redis::Client::open("redis://[nope/").unwrap_err();
        assert_eq!(server(bad_url), Some(ServerErrorKind::Client));
        let parse = ::redis::from_redis_value::<Vec<i64>>(::redis::Value::Okay).unwrap_err();
        assert_eq!(server(parse.into()), Some(ServerErrorKind::Client));
    }

    /// The redis client's error is the source, the codes and kinds are ours.
    #[test]
    fn the_client_error_is_the_source() {
        let Failure::Server(s) = classify(reply("WRONGTYPE Operation against a key")) else {
            panic!("not a server error");
        };
        assert_eq!(s.code(), Some("WRONGTYPE"));
        let source = std::error::Error::source(&s).expect("a source");
        assert!(source.to_string().contains("WRONGTYPE"), "{source}");
        assert!(s.to_string().contains("WRONGTYPE"), "{s}");
    }
}
