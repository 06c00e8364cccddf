//! Why a layer configuration is refused: [`BuildError`] from
//! [`build`](super::RateLimitLayerBuilder::build), and [`RouteError`] for a route pattern that
//! could never match.

use std::fmt;

use http::StatusCode;

use crate::QuotaError;

/// Why [`build`](super::RateLimitLayerBuilder::build) refused a configuration.
///
/// ```
/// use tollgate::http::{BuildError, GlobalKey, RateLimitLayer};
/// let err = RateLimitLayer::builder(GlobalKey).per_second(0).build().unwrap_err();
/// assert!(matches!(err, BuildError::Quota(_)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A quota given as a count was invalid (zero, or too fast for nanosecond resolution).
    Quota(QuotaError),
    /// A route pattern that could never match a request, or that axum 0.8 would read
    /// differently: see [`RouteError`] for each reason, and
    /// [`route`](super::RateLimitLayerBuilder::route) for the syntax.
    Route(RouteError),
    /// A policy name that is empty or not printable ASCII, or holds `"` or `\`.
    PolicyName(String),
    /// Both [`shape`](super::RateLimitLayerBuilder::shape) and
    /// [`refund_if`](super::RateLimitLayerBuilder::refund_if): a request either waits for
    /// its permits or is refunded after its response, not both.
    ShapeAndRefund,
    /// A limiter whose memory for keys has no bound
    /// ([`Backend::keys_bounded`](super::Backend::keys_bounded): a `KeyedRateLimiter` without
    /// a [`max_keys`](crate::KeyedRateLimiterBuilder::max_keys) cap), for the policy of this
    /// name. Give it a cap, or call
    /// [`allow_unbounded_keys`](super::RateLimitLayerBuilder::allow_unbounded_keys).
    UnboundedKeys(String),
    /// A concurrency limiter whose [`limit`](super::ConcurrencyBackend::limit) is 0, for the
    /// concurrency policy of this name: it would refuse every request.
    ZeroConcurrency(String),
    /// A [`busy_status`](super::RateLimitLayerBuilder::busy_status) that is not an error
    /// status (`4xx` or `5xx`): clients would take a refused request for a success.
    BusyStatus(StatusCode),
    /// An allow list whose networks cover every IPv4 or every IPv6 address (`0.0.0.0/0`,
    /// `::/0`, or networks adding up to one), of the layer (`"the layer"`) or of a policy
    /// (`policy "login"`): every such client would bypass every limit. Confirm with
    /// [`AccessList::confirm_allow_all`](super::AccessList::confirm_allow_all) if you mean
    /// it.
    AllowsEveryAddress(String),
    /// Allow or deny networks, but no client address to match them against: the key
    /// extractor does not key by address (it is not `PeerIp` or `ClientIp`) and no
    /// [`access_addr`](super::RateLimitLayerBuilder::access_addr) was given.
    NoClientAddr,
    /// [`policy_access`](super::RateLimitLayerBuilder::policy_access) or
    /// [`shadow_policy`](super::RateLimitLayerBuilder::shadow_policy) named no policy of the
    /// layer.
    UnknownPolicy(String),
    /// Settings of the limiters the builder makes from quotas
    /// ([`max_keys`](super::RateLimitLayerBuilder::max_keys),
    /// [`no_key_cap`](super::RateLimitLayerBuilder::no_key_cap),
    /// [`sweep_interval`](super::RateLimitLayerBuilder::sweep_interval),
    /// [`no_sweeper`](super::RateLimitLayerBuilder::no_sweeper),
    /// [`when_full`](super::RateLimitLayerBuilder::when_full)) on a builder whose every rate
    /// limit is a limiter you made: they would apply to none of them (set them on your
    /// limiters' own builders).
    UnusedLimiterSettings,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Quota(e) => write!(f, "invalid quota: {e}"),
            BuildError::Route(e) => e.fmt(f),
            BuildError::PolicyName(msg) => f.write_str(msg),
            BuildError::UnboundedKeys(name) => write!(
                f,
                "the limiter of policy {name:?} tracks keys without a cap: build it with \
                 max_keys, or call allow_unbounded_keys()"
            ),
            BuildError::ZeroConcurrency(name) => write!(
                f,
                "the concurrency limiter of policy {name:?} has a limit of 0: it would refuse \
                 every request"
            ),
            BuildError::BusyStatus(status) => write!(
                f,
                "busy_status {status} is not an error status (4xx or 5xx): clients would take \
                 a refused request for a success"
            ),
            BuildError::AllowsEveryAddress(owner) => write!(
                f,
                "the allow list of {owner} covers every IPv4 or every IPv6 address, which \
                 disables every limit for them: call confirm_allow_all() if you mean it"
            ),
            BuildError::NoClientAddr => f.write_str(
                "allow or deny networks need a client address: key by PeerIp or ClientIp, \
                 or give one with access_addr()",
            ),
            BuildError::UnknownPolicy(name) => write!(f, "no policy is named {name:?}"),
            BuildError::UnusedLimiterSettings => f.write_str(
                "the settings of limiters made from quotas apply to none: every limit is a \
                 limiter you made (set them on its own builder)",
            ),
            BuildError::ShapeAndRefund => {
                f.write_str("shape() and refund_if() cannot be combined on one layer")
            }
        }
    }
}

impl std::error::Error for BuildError {}

impl From<RouteError> for BuildError {
    fn from(e: RouteError) -> Self {
        BuildError::Route(e)
    }
}

/// Why [`build`](super::RateLimitLayerBuilder::build) refused a route pattern: a pattern that
/// could never match a request, or that would mean something other than the same text as an
/// axum 0.8 route. Each variant holds the pattern as given.
///
/// ```
/// use tollgate::http::{BuildError, GlobalKey, RateLimitLayer, RouteError};
/// use tollgate::Quota;
///
/// let err = RateLimitLayer::builder(GlobalKey)
///     .route("x", "get /export", Quota::per_hour(1).unwrap())
///     .build()
///     .unwrap_err();
/// assert_eq!(err, BuildError::Route(RouteError::Method("get /export".into())));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteError {
    /// A method other than `GET`, `HEAD`, `POST`, `PUT`, `DELETE`, `CONNECT`, `OPTIONS`,
    /// `TRACE` or `PATCH`, in upper case. Methods are case-sensitive (RFC 9110 §9.1): `get`
    /// is another method, which no axum method router serves.
    Method(String),
    /// A path that is empty, does not start with `/`, or holds whitespace, a control
    /// character, `?` or `#` (the query and fragment are not part of the path matched); or
    /// whitespace around the pattern or other than one space between method and path
    /// (`"POST  /x"`, `" /x"`, `"GET\t/x"`).
    Path(String),
    /// An empty segment (`//`), other than one trailing slash (`"/export/"` is its own route,
    /// as in axum).
    EmptySegment(String),
    /// A brace that does not make a whole segment `{name}` or `{*name}`, or an empty name,
    /// or a name holding `{`, `}`, `*` or `:`. A parameter is a whole segment; literal braces
    /// are not supported.
    Parameter(String),
    /// Two parameters with the same name.
    DuplicateParameter(String),
    /// A `{*name}` wildcard that is not the last segment, or a `*` anywhere else than in
    /// `{*name}` or a final `/*`.
    Wildcard(String),
    /// A segment starting with `:` (axum 0.7's `:id`): axum 0.8 refuses such routes, or with
    /// `without_v07_checks` takes them literally, so the pattern would not mean what it
    /// looks like. Write `{id}`.
    OldSyntax(String),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p, why) = match self {
            RouteError::Method(p) => (
                p,
                "the method must be GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE or \
                 PATCH (upper case)",
            ),
            RouteError::Path(p) => (
                p,
                "the path must start with '/' and hold no whitespace, control character, '?' \
                 or '#'; one space separates a method from the path",
            ),
            RouteError::EmptySegment(p) => (p, "empty segment ('//')"),
            RouteError::Parameter(p) => (
                p,
                "a parameter is a whole segment, {name} or {*name}, with a non-empty name \
                 without '{', '}', '*' or ':'",
            ),
            RouteError::DuplicateParameter(p) => (p, "a parameter name appears twice"),
            RouteError::Wildcard(p) => (
                p,
                "a wildcard ({*name} or a final /*) must be the last segment",
            ),
            RouteError::OldSyntax(p) => (p, "':name' is axum 0.7's syntax; write {name}"),
        };
        write!(f, "route {p:?}: {why}")
    }
}

impl std::error::Error for RouteError {}
