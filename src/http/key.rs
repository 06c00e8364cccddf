//! Key extractors: which bucket a request is counted in.
//!
//! An extractor sees the request head ([`Parts`]: method, URI, headers, extensions) and returns
//! a key, or a [`KeyError`] saying why it could not. What the layer does with that error is the
//! [`OnKeyError`](super::OnKeyError) policy. The client-IP extractors live in [`client_ip`]
//! (its CIDR networks and forwarded headers under `key/client_ip/`).

pub(super) mod client_ip;

use std::fmt;
use std::net::IpAddr;

use http::request::Parts;
use http::{HeaderName, StatusCode};

/// Turns a request head into the key its rate limit is counted under.
///
/// Implemented by [`GlobalKey`], [`HeaderKey`], [`PeerIp`](super::PeerIp),
/// [`ClientIp`](super::ClientIp) and [`KeyFn`] (any closure). An extractor runs once per
/// request, before the inner service, and must not block.
///
/// ```
/// use tollgate::http::request::Parts;
/// use tollgate::http::{KeyError, KeyExtractor};
///
/// /// One bucket per tenant, from a header set by an authentication layer in front.
/// struct Tenant;
/// impl KeyExtractor for Tenant {
///     type Key = u64;
///     fn extract(&self, req: &Parts) -> Result<u64, KeyError> {
///         // Exactly one line: with two, which one the key is would be a guess.
///         let mut lines = req.headers.get_all("x-tenant-id").iter();
///         match (lines.next(), lines.next()) {
///             (Some(v), None) => v.to_str().ok().and_then(|v| v.parse().ok()),
///             _ => None,
///         }
///         .ok_or(KeyError::bad_request("missing, repeated or invalid x-tenant-id"))
///     }
/// }
///
/// let (parts, ()) = http::Request::get("/").header("x-tenant-id", "42").body(()).unwrap().into_parts();
/// assert_eq!(Tenant.extract(&parts), Ok(42));
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key type (the limiter's key type).
    type Key: Send + Sync + 'static;

    /// The key for this request.
    ///
    /// # Errors
    /// A [`KeyError`] when the request carries no usable key.
    ///
    /// An extractor that wraps another calls its `extract`, and passes its errors on:
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use tollgate::http::request::Parts;
    /// use tollgate::http::{AddrSource, KeyError, KeyExtractor, PeerIp};
    ///
    /// /// The inner extractor's key, per first path segment (`/api/...`, `/static/...`).
    /// struct PerSection<E>(E);
    /// impl<E: KeyExtractor> KeyExtractor for PerSection<E> {
    ///     type Key = (String, E::Key);
    ///     fn extract(&self, req: &Parts) -> Result<Self::Key, KeyError> {
    ///         let section = req.uri.path().split('/').nth(1).unwrap_or_default();
    ///         Ok((section.to_owned(), self.0.extract(req)?))
    ///     }
    ///     fn addr_source(&self) -> Option<&dyn AddrSource> {
    ///         self.0.addr_source() // the network lists match the inner key's address
    ///     }
    /// }
    ///
    /// let by_section = PerSection(PeerIp::new());
    /// let mut req = http::Request::get("/api/users").body(()).unwrap();
    /// req.extensions_mut().insert("192.0.2.7:5000".parse::<SocketAddr>().unwrap());
    /// let (parts, ()) = req.into_parts();
    /// let ip: IpAddr = "192.0.2.7".parse().unwrap();
    /// assert_eq!(by_section.extract(&parts), Ok(("api".to_owned(), ip)));
    ///
    /// // No peer address: the inner extractor's error, a 500 (the server is set up wrongly).
    /// let (parts, ()) = http::Request::get("/api").body(()).unwrap().into_parts();
    /// assert_eq!(by_section.extract(&parts).unwrap_err().status(), 500);
    /// ```
    fn extract(&self, req: &Parts) -> Result<Self::Key, KeyError>;

    /// Where this extractor finds the client's address, if it keys by address: the layer's
    /// network lists ([`AccessList::allow_networks`](super::AccessList::allow_networks))
    /// then match the very address the key comes from. [`PeerIp`](super::PeerIp) and
    /// [`ClientIp`](super::ClientIp) return themselves; the default is `None` (then give the
    /// layer a source with [`access_addr`](super::RateLimitLayerBuilder::access_addr)).
    ///
    /// ```
    /// use tollgate::http::{ClientIp, GlobalKey, KeyExtractor};
    /// assert!(ClientIp::trusted_hops(1).addr_source().is_some());
    /// assert!(GlobalKey.addr_source().is_none());
    /// ```
    fn addr_source(&self) -> Option<&dyn AddrSource> {
        None
    }
}

/// How the layer finds a request's client address for its network lists (see
/// [`AccessList`](super::AccessList)): implemented by [`PeerIp`](super::PeerIp) (the TCP
/// peer) and [`ClientIp`](super::ClientIp) (the client behind proxies you trust, read from
/// the right), each returning the full address (IPv4-mapped IPv6 as IPv4), not the key's
/// prefix. Never read a forwarding header a client can write without that trust logic: an
/// allow list matched against a spoofable address lets anyone bypass every limit.
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use tollgate::http::request::Parts;
/// use tollgate::http::{AddrSource, KeyError};
///
/// /// tonic's connection info, which is not a `SocketAddr` extension.
/// struct TonicPeer;
/// impl AddrSource for TonicPeer {
///     fn client_addr(&self, req: &Parts) -> Result<IpAddr, KeyError> {
///         req.extensions
///             .get::<SocketAddr>() // stands for tonic's `TcpConnectInfo` here
///             .map(|a| a.ip())
///             .ok_or(KeyError::misconfigured("no peer address"))
///     }
/// }
///
/// let mut req = http::Request::get("/").body(()).unwrap();
/// req.extensions_mut().insert("192.0.2.1:5".parse::<SocketAddr>().unwrap());
/// let (parts, ()) = req.into_parts();
/// assert_eq!(TonicPeer.client_addr(&parts).unwrap(), "192.0.2.1".parse::<IpAddr>().unwrap());
/// ```
pub trait AddrSource: Send + Sync + 'static {
    /// The client's address.
    ///
    /// # Errors
    /// A [`KeyError`] when the request carries no usable address (as the IP extractors'
    /// errors: `500` no peer address, `400` a forwarding entry that is not an address).
    ///
    /// The full address, where the key may be a prefix of it:
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use tollgate::http::{AddrSource, KeyExtractor, PeerIp};
    ///
    /// let mut req = http::Request::get("/").body(()).unwrap();
    /// req.extensions_mut().insert("[2001:db8:1:2:3:4:5:6]:443".parse::<SocketAddr>().unwrap());
    /// let (parts, ()) = req.into_parts();
    /// let peer = PeerIp::new();
    /// assert_eq!(peer.client_addr(&parts).unwrap(), "2001:db8:1:2:3:4:5:6".parse::<IpAddr>().unwrap());
    /// assert_eq!(peer.extract(&parts).unwrap(), "2001:db8:1:2::".parse::<IpAddr>().unwrap()); // the /64
    /// ```
    fn client_addr(&self, req: &Parts) -> Result<IpAddr, KeyError>;
}

/// Why no key could be taken from a request, and the status the layer answers with under the
/// default [`OnKeyError::Reject`](super::OnKeyError::Reject) policy.
///
/// `500 Internal Server Error` means the server is set up wrongly (for example no peer address
/// because the app was not served with `ConnectInfo`); `400 Bad Request` means the request
/// lacks what the extractor needs (a missing API-key header, a malformed `X-Forwarded-For`).
///
/// The layer never answers a key error silently. Its response names the [`reason`](Self::reason)
/// (the problem+json `detail`, the `Tollgate-Error` header, a gRPC `grpc-message`); it counts
/// it in [`PolicyStats`](super::PolicyStats) and the metrics, as `misconfigured` for a `5xx`
/// error ([`is_misconfiguration`](Self::is_misconfiguration)) and as `key_error` otherwise;
/// and it logs it: with feature `tracing`, an `error` event (a `warn` for a client's `4xx`) at
/// most once a minute per layer, with the number left out since; without it (or with no
/// subscriber for the `tollgate` target) a misconfiguration is written to stderr once per
/// layer. The reason is fixed text, never request data: write it as the fix (`"no peer
/// address: serve with ..."`), since that is what an operator reads.
///
/// ```
/// use tollgate::http::StatusCode;
/// use tollgate::http::KeyError;
///
/// let e = KeyError::bad_request("missing x-api-key header");
/// assert_eq!(e.status(), StatusCode::BAD_REQUEST);
/// assert_eq!(e.reason(), "missing x-api-key header");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyError {
    status: StatusCode,
    reason: &'static str,
}

impl KeyError {
    /// An error answered with `status` (clamped to 400-599: a key error is never a success).
    ///
    /// ```
    /// use tollgate::http::StatusCode;
    /// let e = tollgate::http::KeyError::new(StatusCode::UNAUTHORIZED, "no credentials");
    /// assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
    /// assert_eq!(tollgate::http::KeyError::new(StatusCode::OK, "x").status(), 500);
    /// ```
    pub fn new(status: StatusCode, reason: &'static str) -> KeyError {
        let status = if status.is_client_error() || status.is_server_error() {
            status
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        KeyError { status, reason }
    }

    /// The request lacks what the extractor needs: `400 Bad Request`.
    ///
    /// ```
    /// assert_eq!(tollgate::http::KeyError::bad_request("no key").status(), 400);
    /// ```
    pub fn bad_request(reason: &'static str) -> KeyError {
        KeyError::new(StatusCode::BAD_REQUEST, reason)
    }

    /// The server is set up wrongly: `500 Internal Server Error`.
    ///
    /// ```
    /// assert_eq!(tollgate::http::KeyError::misconfigured("no peer address").status(), 500);
    /// ```
    pub fn misconfigured(reason: &'static str) -> KeyError {
        KeyError::new(StatusCode::INTERNAL_SERVER_ERROR, reason)
    }

    /// The status the layer answers with by default.
    ///
    /// ```
    /// assert_eq!(tollgate::http::KeyError::bad_request("x").status().as_u16(), 400);
    /// ```
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What was missing or wrong: the problem+json `detail`, the `Tollgate-Error` header and
    /// the log events' `reason`.
    ///
    /// ```
    /// assert_eq!(tollgate::http::KeyError::bad_request("why").reason(), "why");
    /// ```
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// Whether the server, not the client, is at fault: a `5xx` status, as made by
    /// [`misconfigured`](Self::misconfigured). The layer counts these as `misconfigured`
    /// (apart from the clients' `key_error`s) and logs them as errors.
    ///
    /// ```
    /// use tollgate::http::KeyError;
    /// assert!(KeyError::misconfigured("no peer address").is_misconfiguration());
    /// assert!(!KeyError::bad_request("no key").is_misconfiguration());
    /// ```
    pub fn is_misconfiguration(&self) -> bool {
        self.status.is_server_error()
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no rate-limit key ({}): {}", self.status, self.reason)
    }
}

impl std::error::Error for KeyError {}

/// One bucket for every request: a limit on the service as a whole (key `()`).
///
/// ```
/// use tollgate::http::{GlobalKey, KeyExtractor};
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(GlobalKey.extract(&parts), Ok(()));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobalKey;

impl KeyExtractor for GlobalKey {
    type Key = ();

    #[inline]
    fn extract(&self, _: &Parts) -> Result<(), KeyError> {
        Ok(())
    }
}

/// One bucket per value of a request header, typically an API key.
///
/// The value must be visible ASCII and at most [`max_len`](HeaderKey::max_len) bytes (256 by
/// default), because every distinct value is a tracked key: an unbounded value would let one
/// client spend the table's memory. A missing or unacceptable value is a `400` [`KeyError`],
/// and so is a header that appears more than once (two field lines, even with equal values):
/// which line is the key would be a guess, and an authentication layer that checks another
/// line than the limiter counts would let a client rotate the uncounted one for a fresh
/// bucket each time. [`OnKeyError`](super::OnKeyError) decides what the layer answers.
/// Values are client-chosen strings, so see
/// [`DefaultKeyHasher`](crate::DefaultKeyHasher) on hash flooding.
///
/// ```
/// use tollgate::http::HeaderName;
/// use tollgate::http::{HeaderKey, KeyExtractor};
///
/// let by_api_key = HeaderKey::new(HeaderName::from_static("x-api-key"));
/// let (parts, ()) = http::Request::get("/").header("x-api-key", "k-123").body(()).unwrap().into_parts();
/// assert_eq!(by_api_key.extract(&parts).unwrap(), "k-123");
///
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(by_api_key.extract(&parts).unwrap_err().status(), 400);
///
/// // Two lines: ambiguous, refused.
/// let (parts, ()) = http::Request::get("/")
///     .header("x-api-key", "rotated")
///     .header("x-api-key", "k-123")
///     .body(())
///     .unwrap()
///     .into_parts();
/// assert_eq!(by_api_key.extract(&parts).unwrap_err().status(), 400);
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    name: HeaderName,
    max_len: usize,
}

impl HeaderKey {
    /// Keys requests by the value of header `name`.
    ///
    /// ```
    /// use tollgate::http::HeaderName;
    /// let by_api_key = tollgate::http::HeaderKey::new(HeaderName::from_static("x-api-key"));
    /// let by_auth = tollgate::http::HeaderKey::new(http::header::AUTHORIZATION);
    /// ```
    pub fn new(name: HeaderName) -> HeaderKey {
        HeaderKey { name, max_len: 256 }
    }

    /// Refuses values longer than `max_len` bytes (default 256) with `400`.
    ///
    /// ```
    /// use tollgate::http::HeaderName;
    /// use tollgate::http::{HeaderKey, KeyExtractor};
    /// let k = HeaderKey::new(HeaderName::from_static("x-api-key")).max_len(4);
    /// let (parts, ()) = http::Request::get("/").header("x-api-key", "12345").body(()).unwrap().into_parts();
    /// assert!(k.extract(&parts).is_err());
    /// ```
    pub fn max_len(mut self, max_len: usize) -> HeaderKey {
        self.max_len = max_len;
        self
    }
}

impl KeyExtractor for HeaderKey {
    type Key = String;

    fn extract(&self, req: &Parts) -> Result<String, KeyError> {
        let mut lines = req.headers.get_all(&self.name).iter();
        let value = lines.next().ok_or(KeyError::bad_request(
            "the rate-limit key header is missing",
        ))?;
        // Two lines are two keys: which one counts would be this extractor's guess, and a
        // layer in front that reads the other would let a client rotate this one for a fresh
        // bucket each time.
        if lines.next().is_some() {
            return Err(KeyError::bad_request(
                "the rate-limit key header appears more than once",
            ));
        }
        if value.len() > self.max_len {
            return Err(KeyError::bad_request(
                "the rate-limit key header is too long",
            ));
        }
        // `to_str` accepts visible ASCII only: no control characters in keys or logs.
        match value.to_str() {
            Ok(s) if !s.is_empty() => Ok(s.to_owned()),
            _ => Err(KeyError::bad_request(
                "the rate-limit key header is empty or not visible ASCII",
            )),
        }
    }
}

/// Any closure from the request head to a key: `KeyFn(|req: &Parts| ...)`.
///
/// ```
/// use tollgate::http::request::Parts;
/// use tollgate::http::{KeyError, KeyExtractor, KeyFn};
///
/// // Per (tenant, method): reads a header an authentication layer set.
/// let per_tenant_method = KeyFn(|req: &Parts| {
///     let tenant = req.headers.get("x-tenant").ok_or(KeyError::bad_request("no tenant"))?;
///     Ok((tenant.as_bytes().to_vec(), req.method.clone()))
/// });
/// let (parts, ()) = http::Request::post("/").header("x-tenant", "t1").body(()).unwrap().into_parts();
/// assert_eq!(per_tenant_method.extract(&parts).unwrap(), (b"t1".to_vec(), tollgate::http::Method::POST));
/// ```
#[derive(Clone, Copy)]
pub struct KeyFn<F>(pub F);

impl<F, K> KeyExtractor for KeyFn<F>
where
    F: Fn(&Parts) -> Result<K, KeyError> + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    type Key = K;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<K, KeyError> {
        (self.0)(req)
    }
}

impl<F> fmt::Debug for KeyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyFn")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parts(lines: &[&[u8]]) -> Parts {
        let mut req = http::Request::get("/");
        for line in lines {
            req = req.header("x-api-key", http::HeaderValue::from_bytes(line).unwrap());
        }
        req.body(()).unwrap().into_parts().0
    }

    fn api_key() -> HeaderKey {
        HeaderKey::new(HeaderName::from_static("x-api-key"))
    }

    #[test]
    fn a_repeated_key_header_is_a_key_error() {
        assert_eq!(api_key().extract(&parts(&[b"k"])), Ok("k".to_owned()));
        for lines in [
            &[&b"a"[..], b"b"][..],
            &[b"k", b"k"],
            &[b"k", b""],
            &[b"", b"k"],
        ] {
            let err = api_key().extract(&parts(lines)).unwrap_err();
            assert_eq!(err.status(), StatusCode::BAD_REQUEST, "{lines:?}");
            assert_eq!(
                err.reason(),
                "the rate-limit key header appears more than once"
            );
        }
    }

    proptest! {
        /// Any field lines a client sends: a key only from exactly one line, that line's
        /// value when it is acceptable; never a panic.
        #[test]
        fn a_key_comes_from_exactly_one_line(
            lines in prop::collection::vec(
                prop_oneof![
                    prop::collection::vec(any::<u8>(), 0..40),
                    "[ -~]{0,300}".prop_map(String::into_bytes),
                ],
                0..4,
            ),
        ) {
            let lines: Vec<&[u8]> = lines
                .iter()
                .map(Vec::as_slice)
                .filter(|l| http::HeaderValue::from_bytes(l).is_ok())
                .collect();
            let got = api_key().extract(&parts(&lines));
            match lines.as_slice() {
                // Visible ASCII, space and tab: what `HeaderValue::to_str` accepts.
                [one] if !one.is_empty()
                    && one.len() <= 256
                    && one.iter().all(|b| (0x20..0x7f).contains(b) || *b == b'\t') =>
                {
                    prop_assert_eq!(got, Ok(String::from_utf8(one.to_vec()).unwrap()));
                }
                _ => prop_assert_eq!(got.unwrap_err().status(), StatusCode::BAD_REQUEST),
            }
        }
    }
}
