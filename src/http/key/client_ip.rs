//! Client IP addresses as keys: the TCP peer ([`PeerIp`]), or the client behind proxies you
//! trust ([`ClientIp`]).
//!
//! A forwarding header is a list every proxy appends to, so only its right end is written by
//! proxies you run; everything to the left of what your nearest trusted proxy appended came
//! from the client and can be anything. [`ClientIp`] therefore walks the chain *from the
//! right*: the peer first, then the header's entries right to left, skipping addresses it
//! trusts, and keys the request by the first one it does not. The leftmost entry, which is what
//! naive extractors take, is only reached when every address to its right is trusted.
//!
//! IPv6 clients usually control a whole /64 (and often far more), so IPv6 keys are masked to a
//! prefix, /64 by default; IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, as dual-stack sockets
//! report IPv4 peers) are keyed as the IPv4 address.

mod cidr;
mod forwarded;

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;

use super::{AddrSource, KeyError, KeyExtractor};
pub(crate) use cidr::canonical;
use cidr::mask;
pub use cidr::{IpNet, IpNetError};
pub use forwarded::ForwardedHeader;
use forwarded::{entries_from_right, Entry};

/// How much of an address is the key: /32 for IPv4 and /64 for IPv6 by default.
#[derive(Clone, Copy, Debug)]
struct KeyPrefix {
    v4: u8,
    v6: u8,
}

impl Default for KeyPrefix {
    fn default() -> Self {
        KeyPrefix { v4: 32, v6: 64 }
    }
}

impl KeyPrefix {
    fn key(&self, ip: IpAddr) -> IpAddr {
        let ip = canonical(ip);
        match ip {
            IpAddr::V4(_) => mask(ip, self.v4),
            IpAddr::V6(_) => mask(ip, self.v6),
        }
    }
}

/// The TCP peer's address, from a `SocketAddr` request extension (plain hyper: insert it per
/// connection) or, with the `axum` feature, axum's `ConnectInfo<SocketAddr>`.
fn peer_addr(req: &Parts) -> Result<IpAddr, KeyError> {
    if let Some(addr) = req.extensions.get::<SocketAddr>() {
        return Ok(addr.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = req
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Ok(info.0.ip());
    }
    Err(KeyError::misconfigured(
        "no peer address: serve with axum's ConnectInfo<SocketAddr> or insert the peer's SocketAddr as a request extension",
    ))
}

/// Keys requests by the TCP peer's IP address (IPv6 masked to /64 by default).
///
/// The address comes from a `SocketAddr` request extension, or with the `axum` feature from
/// `ConnectInfo<SocketAddr>` (serve with `into_make_service_with_connect_info::<SocketAddr>()`).
/// Neither present is a `500` [`KeyError`]: the server is set up wrongly. Behind a reverse
/// proxy every request has the proxy's address; use [`ClientIp`] there.
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use tollgate::http::{KeyExtractor, PeerIp};
///
/// let mut req = http::Request::get("/").body(()).unwrap();
/// req.extensions_mut().insert("[2001:db8:1:2:3:4:5:6]:443".parse::<SocketAddr>().unwrap());
/// let (parts, ()) = req.into_parts();
/// let key = PeerIp::new().extract(&parts).unwrap();
/// assert_eq!(key, "2001:db8:1:2::".parse::<IpAddr>().unwrap()); // the /64
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerIp {
    prefix: KeyPrefix,
}

impl PeerIp {
    /// The peer address, IPv4 whole and IPv6 masked to /64.
    ///
    /// ```
    /// let key = tollgate::http::PeerIp::new();
    /// ```
    pub fn new() -> PeerIp {
        PeerIp::default()
    }

    /// Keys IPv6 clients by their first `bits` bits (default 64; 128 keys each address;
    /// values above 128 mean 128).
    ///
    /// ```
    /// let per_56 = tollgate::http::PeerIp::new().ipv6_prefix(56);
    /// ```
    pub fn ipv6_prefix(mut self, bits: u8) -> PeerIp {
        self.prefix.v6 = bits.min(128);
        self
    }

    /// Keys IPv4 clients by their first `bits` bits (default 32; 24 groups a /24).
    ///
    /// ```
    /// let per_24 = tollgate::http::PeerIp::new().ipv4_prefix(24);
    /// ```
    pub fn ipv4_prefix(mut self, bits: u8) -> PeerIp {
        self.prefix.v4 = bits.min(32);
        self
    }
}

impl KeyExtractor for PeerIp {
    type Key = IpAddr;

    fn extract(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        peer_addr(req).map(|ip| self.prefix.key(ip))
    }

    fn addr_source(&self) -> Option<&dyn AddrSource> {
        Some(self)
    }
}

/// The peer's full address (IPv4-mapped IPv6 as IPv4), not masked to the key's prefix.
impl AddrSource for PeerIp {
    fn client_addr(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        peer_addr(req).map(canonical)
    }
}

/// Which addresses in the chain are your proxies.
#[derive(Clone, Debug)]
enum Trust {
    /// The nearest `n` addresses (the peer is the first).
    Hops(usize),
    /// Addresses in these networks.
    Networks(Vec<IpNet>),
}

impl Trust {
    /// Whether the address at `position` (0 = the peer, 1 = the rightmost header entry, ...)
    /// is a proxy of yours.
    fn trusts(&self, position: usize, ip: IpAddr) -> bool {
        match self {
            Trust::Hops(n) => position < *n,
            Trust::Networks(nets) => nets.iter().any(|net| net.contains(ip)),
        }
    }
}

/// Keys requests by the client's IP address behind reverse proxies you trust, read from the
/// forwarding header **from the right**.
///
/// The chain is the peer address followed by the header's entries, right to left. Addresses
/// you trust are skipped; the first one you do not trust is the client. So:
/// - a request from a peer you do not trust is keyed by the peer, whatever headers it sent;
/// - entries a client wrote itself sit left of what your proxy appended and are never reached
///   unless that appended address is itself trusted: rotating `X-Forwarded-For` does not give
///   a client a new bucket;
/// - if every address is trusted, the leftmost one is the client.
///
/// Trust is explicit: [`trusted_proxies`](ClientIp::trusted_proxies) (networks; exact) or
/// [`trusted_hops`](ClientIp::trusted_hops) (a count; correct only if every request passes
/// through exactly that many of your proxies, so a client that can reach an inner proxy
/// directly can choose its key). The peer address comes from the same sources as
/// [`PeerIp`]'s.
///
/// The header is read as bytes, from its right end. Several field lines of it form one list,
/// in order (RFC 9110 field-line combining: the last line holds the rightmost entries); empty
/// elements and the whitespace around elements are skipped; in `Forwarded`, a comma or a
/// semicolon inside a quoted string does not separate, and the `for=` node may be quoted
/// (`for="[2001:db8::1]:4711"`). Only the entries the walk reaches are parsed:
/// - an entry at or right of the client's position that is not an IP address (garbage,
///   non-ASCII bytes, `unknown`, an obfuscated `_name`, an element without `for=`) is a `400`
///   [`KeyError`]; with `trusted_hops`, the entries of trusted hops are skipped by position
///   without being read, so a proxy that obfuscates itself is fine;
/// - whatever lies left of the client's position is never read: no byte a client writes
///   there (`0xff`, an unclosed quote, a backslash) can make the request unkeyable.
///
/// **Single-address headers** (`CF-Connecting-IP`, `True-Client-IP`, `Fly-Client-IP`,
/// `X-Real-IP`: see [`ForwardedHeader`]) are not lists: a CDN or proxy sets them to the
/// client it saw. They are read only when the peer is trusted (by network, or with
/// `trusted_hops` of at least 1): the key is then the header's one address (the peer if the
/// trusted peer sent none), and a value that is not an address, or more than one value (a
/// second field line or a comma: a proxy that appended to what the client sent), is a `400`
/// [`KeyError`]. From a peer you do not trust the header is ignored and the peer is the key,
/// so trust exactly your CDN's published networks with
/// [`trusted_proxies`](ClientIp::trusted_proxies).
///
/// So a key error means your proxies wrote something that is not an address where the
/// client is expected, or a client inside the networks you trust sent junk (the walk reaches
/// its own entries): trust only your proxies' addresses, and keep the default
/// [`OnKeyError::Reject`](super::super::OnKeyError::Reject), which answers it with `400`.
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use tollgate::http::{ClientIp, KeyExtractor};
///
/// // One load balancer at 10.0.0.5 in front of the app.
/// let client_ip = ClientIp::trusted_proxies(["10.0.0.0/8".parse().unwrap()]);
///
/// let mut req = http::Request::get("/")
///     .header("x-forwarded-for", "6.6.6.6, 203.0.113.9") // client-written, LB-appended
///     .body(())
///     .unwrap();
/// req.extensions_mut().insert("10.0.0.5:40000".parse::<SocketAddr>().unwrap());
/// let (parts, ()) = req.into_parts();
/// assert_eq!(client_ip.extract(&parts).unwrap(), "203.0.113.9".parse::<IpAddr>().unwrap());
///
/// // A byte that is not ASCII in the client's part changes nothing.
/// let mut req = http::Request::get("/")
///     .header("x-forwarded-for", tollgate::http::HeaderValue::from_bytes(b"6.6.6.6\xff, 203.0.113.9").unwrap())
///     .body(())
///     .unwrap();
/// req.extensions_mut().insert("10.0.0.5:40000".parse::<SocketAddr>().unwrap());
/// let (parts, ()) = req.into_parts();
/// assert_eq!(client_ip.extract(&parts).unwrap(), "203.0.113.9".parse::<IpAddr>().unwrap());
/// ```
#[derive(Clone, Debug)]
pub struct ClientIp {
    trust: Trust,
    header: ForwardedHeader,
    prefix: KeyPrefix,
}

impl ClientIp {
    /// Trusts the nearest `hops` addresses: the peer and the rightmost `hops - 1` header
    /// entries (`1` = one proxy in front of the app, which appended the client). `0` keys by
    /// the peer, like [`PeerIp`].
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use tollgate::http::{ClientIp, KeyExtractor};
    ///
    /// let mut req = http::Request::get("/")
    ///     .header("x-forwarded-for", "1.1.1.1, 2.2.2.2, 3.3.3.3")
    ///     .body(())
    ///     .unwrap();
    /// req.extensions_mut().insert("10.0.0.1:1".parse::<SocketAddr>().unwrap());
    /// let (parts, ()) = req.into_parts();
    /// let key = |hops| ClientIp::trusted_hops(hops).extract(&parts).unwrap();
    /// assert_eq!(key(0), "10.0.0.1".parse::<IpAddr>().unwrap());
    /// assert_eq!(key(1), "3.3.3.3".parse::<IpAddr>().unwrap());
    /// assert_eq!(key(2), "2.2.2.2".parse::<IpAddr>().unwrap());
    /// assert_eq!(key(9), "1.1.1.1".parse::<IpAddr>().unwrap()); // all trusted: the leftmost
    /// ```
    pub fn trusted_hops(hops: usize) -> ClientIp {
        ClientIp::with(Trust::Hops(hops))
    }

    /// Trusts addresses in `networks` (your proxies' addresses or subnets).
    ///
    /// ```
    /// use tollgate::http::{ClientIp, IpNet};
    /// let nets: Vec<IpNet> = ["10.0.0.0/8", "fd00::/8"].iter().map(|s| s.parse().unwrap()).collect();
    /// let client_ip = ClientIp::trusted_proxies(nets);
    /// ```
    pub fn trusted_proxies(networks: impl IntoIterator<Item = IpNet>) -> ClientIp {
        ClientIp::with(Trust::Networks(networks.into_iter().collect()))
    }

    fn with(trust: Trust) -> ClientIp {
        ClientIp {
            trust,
            header: ForwardedHeader::default(),
            prefix: KeyPrefix::default(),
        }
    }

    /// Reads `header` (default [`ForwardedHeader::XForwardedFor`]). Only one is read: the one
    /// your proxies write. A client can send the other one freely.
    ///
    /// ```
    /// use tollgate::http::{ClientIp, ForwardedHeader};
    /// let c = ClientIp::trusted_hops(1).header(ForwardedHeader::Forwarded);
    /// ```
    pub fn header(mut self, header: ForwardedHeader) -> ClientIp {
        self.header = header;
        self
    }

    /// As [`PeerIp::ipv6_prefix`] (default 64).
    ///
    /// ```
    /// let c = tollgate::http::ClientIp::trusted_hops(1).ipv6_prefix(48);
    /// ```
    pub fn ipv6_prefix(mut self, bits: u8) -> ClientIp {
        self.prefix.v6 = bits.min(128);
        self
    }

    /// As [`PeerIp::ipv4_prefix`] (default 32).
    ///
    /// ```
    /// let c = tollgate::http::ClientIp::trusted_hops(1).ipv4_prefix(24);
    /// ```
    pub fn ipv4_prefix(mut self, bits: u8) -> ClientIp {
        self.prefix.v4 = bits.min(32);
        self
    }

    /// The client's full address (before prefix masking).
    ///
    /// # Errors
    /// As [`extract`](KeyExtractor::extract): no peer address (`500`), or an entry that is not
    /// an IP address where the client is expected (`400`).
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use tollgate::http::ClientIp;
    ///
    /// let mut req = http::Request::get("/")
    ///     .header("forwarded", r#"for=198.51.100.1, for="[2001:db8::7]:4711";proto=https"#)
    ///     .body(())
    ///     .unwrap();
    /// req.extensions_mut().insert("127.0.0.1:1".parse::<SocketAddr>().unwrap());
    /// let (parts, ()) = req.into_parts();
    /// let c = ClientIp::trusted_hops(1).header(tollgate::http::ForwardedHeader::Forwarded);
    /// assert_eq!(c.client_ip(&parts).unwrap(), "2001:db8::7".parse::<IpAddr>().unwrap());
    /// ```
    pub fn client_ip(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        let peer = peer_addr(req)?;
        if !self.trust.trusts(0, peer) {
            return Ok(peer);
        }
        if self.header.is_single() {
            return single_address(req, self.header)
                .map(|client| canonical(client.unwrap_or(peer)));
        }
        // The last address trusted so far, and, when trusted hops are skipped by position
        // without reading them, the leftmost skipped entry: if the list ends there, it is the
        // client and must be an address after all.
        let mut furthest = peer;
        let mut unread: Option<Entry<'_>> = None;
        for (position, entry) in (1..).zip(entries_from_right(&req.headers, self.header)) {
            if let Trust::Hops(n) = self.trust {
                if position < n {
                    unread = Some(entry);
                    continue;
                }
            }
            let ip = entry.addr().ok_or_else(not_an_address)?;
            if !self.trust.trusts(position, ip) {
                return Ok(canonical(ip));
            }
            (furthest, unread) = (ip, None);
        }
        match unread {
            Some(entry) => entry.addr().map(canonical).ok_or_else(not_an_address),
            None => Ok(canonical(furthest)),
        }
    }
}

/// The one address of a single-value header a trusted peer sent (`None` without the header).
/// More than one value (a second field line, a comma) is refused rather than guessed at: it
/// means the proxy appended to a value the client sent, instead of setting it.
fn single_address(req: &Parts, header: ForwardedHeader) -> Result<Option<IpAddr>, KeyError> {
    let mut values = entries_from_right(&req.headers, header);
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => value.addr().map(Some).ok_or_else(not_an_address),
        (Some(_), Some(_)) => Err(KeyError::bad_request(
            "the client address header holds more than one value: the proxy must set it, not append to it",
        )),
    }
}

fn not_an_address() -> KeyError {
    KeyError::bad_request(
        "the forwarding header has an entry that is not an IP address where the client is expected",
    )
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;

    fn extract(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        self.client_ip(req).map(|ip| self.prefix.key(ip))
    }

    fn addr_source(&self) -> Option<&dyn AddrSource> {
        Some(self)
    }
}

/// [`client_ip`](ClientIp::client_ip): the client behind your trusted proxies, the very
/// address the key is taken from, not masked to the key's prefix.
impl AddrSource for ClientIp {
    fn client_addr(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        self.client_ip(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    fn parts(peer: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::get("/");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let mut req = b.body(()).unwrap();
        req.extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
        req.into_parts().0
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn peer_ip_keys_ipv6_by_prefix_and_mapped_ipv4_as_ipv4() {
        let p = parts("[2001:db8:1:2:aaaa::1]:5", &[]);
        assert_eq!(PeerIp::new().extract(&p).unwrap(), ip("2001:db8:1:2::"));
        assert_eq!(
            PeerIp::new().ipv6_prefix(128).extract(&p).unwrap(),
            ip("2001:db8:1:2:aaaa::1")
        );
        assert_eq!(
            PeerIp::new().ipv6_prefix(48).extract(&p).unwrap(),
            ip("2001:db8:1::")
        );
        let p = parts("[::ffff:192.0.2.9]:5", &[]);
        assert_eq!(PeerIp::new().extract(&p).unwrap(), ip("192.0.2.9"));
        assert_eq!(
            PeerIp::new().ipv4_prefix(24).extract(&p).unwrap(),
            ip("192.0.2.0")
        );
    }

    #[test]
    fn no_peer_address_is_a_server_error() {
        let (p, ()) = http::Request::get("/").body(()).unwrap().into_parts();
        assert_eq!(PeerIp::new().extract(&p).unwrap_err().status(), 500);
        assert_eq!(
            ClientIp::trusted_hops(1).extract(&p).unwrap_err().status(),
            500
        );
    }

    #[test]
    fn untrusted_peer_is_the_client_whatever_it_claims() {
        let c = ClientIp::trusted_proxies(nets(&["10.0.0.0/8"]));
        let p = parts(
            "198.51.100.7:1",
            &[("x-forwarded-for", "10.0.0.9, 1.2.3.4")],
        );
        assert_eq!(c.extract(&p).unwrap(), ip("198.51.100.7"));
    }

    #[test]
    fn trusted_networks_walk_from_the_right_to_the_first_untrusted() {
        let c = ClientIp::trusted_proxies(nets(&["10.0.0.0/8", "192.168.0.0/16"]));
        // client-written junk, then the real client appended by the edge proxy, then an
        // inner proxy appended by the LB (the peer).
        let p = parts(
            "10.0.0.1:1",
            &[(
                "x-forwarded-for",
                "garbage, 7.7.7.7, 203.0.113.5, 192.168.1.1",
            )],
        );
        assert_eq!(c.extract(&p).unwrap(), ip("203.0.113.5"));
        // Everything trusted: the leftmost is the client.
        let p = parts("10.0.0.1:1", &[("x-forwarded-for", "10.9.9.9,192.168.0.3")]);
        assert_eq!(c.extract(&p).unwrap(), ip("10.9.9.9"));
        // No header: the trusted peer itself.
        let p = parts("10.0.0.1:1", &[]);
        assert_eq!(c.extract(&p).unwrap(), ip("10.0.0.1"));
        // Garbage where the client is expected.
        let p = parts("10.0.0.1:1", &[("x-forwarded-for", "1.1.1.1, unknown")]);
        assert_eq!(c.extract(&p).unwrap_err().status(), 400);
    }

    #[test]
    fn rotating_the_client_written_part_never_changes_the_key() {
        let hops = ClientIp::trusted_hops(1);
        let nets = ClientIp::trusted_proxies(nets(&["127.0.0.0/8"]));
        for junk in [
            "",
            "1.1.1.1",
            "9.9.9.9, 8.8.8.8",
            "::1",
            "not-an-ip",
            "127.0.0.1",
        ] {
            let xff = if junk.is_empty() {
                "203.0.113.5".to_string()
            } else {
                format!("{junk}, 203.0.113.5")
            };
            let p = parts("127.0.0.1:1", &[("x-forwarded-for", &xff)]);
            assert_eq!(hops.extract(&p).unwrap(), ip("203.0.113.5"), "{xff}");
            assert_eq!(nets.extract(&p).unwrap(), ip("203.0.113.5"), "{xff}");
        }
    }

    #[test]
    fn several_header_lines_form_one_list_in_order() {
        let p = parts(
            "10.0.0.1:1",
            &[
                ("x-forwarded-for", "1.1.1.1, 2.2.2.2"),
                ("x-forwarded-for", "3.3.3.3"),
            ],
        );
        let key = |hops| ClientIp::trusted_hops(hops).extract(&p).unwrap();
        assert_eq!(key(1), ip("3.3.3.3"));
        assert_eq!(key(2), ip("2.2.2.2"));
        assert_eq!(key(3), ip("1.1.1.1"));
    }

    #[test]
    fn entries_with_ports_brackets_and_spaces() {
        let c = ClientIp::trusted_hops(1).ipv6_prefix(128);
        for (entry, want) in [
            ("192.0.2.1:8080", "192.0.2.1"),
            ("  192.0.2.1  ", "192.0.2.1"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("[2001:db8::1]:443", "2001:db8::1"),
            ("2001:db8::1", "2001:db8::1"),
            ("::ffff:192.0.2.1", "192.0.2.1"),
        ] {
            let p = parts("127.0.0.1:1", &[("x-forwarded-for", entry)]);
            assert_eq!(c.extract(&p).unwrap(), ip(want), "{entry}");
        }
        for bad in [
            "[2001:db8::1",
            "[2001:db8::1]:",
            "[2001:db8::1]x",
            "[1.2.3.4]",
            "1.2.3.4:x",
        ] {
            let p = parts("127.0.0.1:1", &[("x-forwarded-for", bad)]);
            assert!(c.extract(&p).is_err(), "{bad}");
        }
    }

    #[test]
    fn forwarded_header_reads_for_from_the_right() {
        let c = ClientIp::trusted_hops(1).header(ForwardedHeader::Forwarded);
        let p = parts(
            "127.0.0.1:1",
            &[(
                "forwarded",
                r#"for="evil, for=6.6.6.6", for=192.0.2.60;proto=http;by=203.0.113.43"#,
            )],
        );
        assert_eq!(c.extract(&p).unwrap(), ip("192.0.2.60"));
        let c2 = ClientIp::trusted_hops(2).header(ForwardedHeader::Forwarded);
        // The quoted comma does not split the element: the next one left is unparseable.
        assert_eq!(c2.extract(&p).unwrap_err().status(), 400);
        let p = parts(
            "127.0.0.1:1",
            &[("forwarded", r#"proto=https;For="[2001:db8:cafe::17]:4711""#)],
        );
        assert_eq!(c.extract(&p).unwrap(), ip("2001:db8:cafe::"));
        for bad in ["for=unknown", "for=_hidden", "proto=https", "for=\"\""] {
            let p = parts("127.0.0.1:1", &[("forwarded", bad)]);
            assert_eq!(c.extract(&p).unwrap_err().status(), 400, "{bad}");
        }
        // X-Forwarded-For is ignored when Forwarded is configured.
        let p = parts("127.0.0.1:1", &[("x-forwarded-for", "1.1.1.1")]);
        assert_eq!(c.extract(&p).unwrap(), ip("127.0.0.1"));
    }

    #[test]
    fn non_ascii_header_is_unparseable_only_where_the_client_is_expected() {
        let c = ClientIp::trusted_hops(1);
        let mut req = http::Request::get("/").body(()).unwrap();
        req.extensions_mut()
            .insert("127.0.0.1:1".parse::<SocketAddr>().unwrap());
        req.headers_mut().append(
            "x-forwarded-for",
            http::HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
        );
        let (p, ()) = req.into_parts();
        assert_eq!(c.extract(&p).unwrap_err().status(), 400);
        assert_eq!(
            ClientIp::trusted_hops(0).extract(&p).unwrap(),
            ip("127.0.0.1")
        );
    }

    fn raw_parts(peer: &str, header: &'static str, lines: &[&[u8]]) -> Parts {
        let mut req = http::Request::get("/").body(()).unwrap();
        for line in lines {
            req.headers_mut()
                .append(header, http::HeaderValue::from_bytes(line).unwrap());
        }
        req.extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
        req.into_parts().0
    }

    #[test]
    fn client_bytes_left_of_the_client_position_are_never_read() {
        let nets = ClientIp::trusted_proxies(nets(&["127.0.0.1/32"]));
        let fwd = nets.clone().header(ForwardedHeader::Forwarded);
        // The reported lines: one line, the proxy's entry appended to the client's.
        let p = raw_parts(
            "127.0.0.1:1",
            "x-forwarded-for",
            &[b"6.6.9.1\xff, 198.51.100.41"],
        );
        assert_eq!(nets.extract(&p).unwrap(), ip("198.51.100.41"));
        let p = raw_parts(
            "127.0.0.1:1",
            "forwarded",
            &[b"for=6.6.9.1\xff, for=198.51.100.50"],
        );
        assert_eq!(fwd.extract(&p).unwrap(), ip("198.51.100.50"));
        // An unclosed quote (read left to right it would swallow the proxy's entry), an
        // escape, a semicolon and a comma inside the client's part.
        for junk in [
            &b"for=\"6.6.9.1"[..],
            b"for=\"a\\",
            b"for=\"a\\\"",
            b"\"",
            b"for=\"x, for=1.1.1.1\";",
            b";;=,=\"\\",
        ] {
            let line = [junk, b", for=\"[2001:db8::5]:80\";proto=https"].concat();
            let p = raw_parts("127.0.0.1:1", "forwarded", &[&line]);
            let got = fwd.clone().ipv6_prefix(128).extract(&p);
            assert_eq!(got.unwrap(), ip("2001:db8::5"), "{line:?}");
            // The same junk on a line of its own, the proxy's entry on the next one.
            let p = raw_parts("127.0.0.1:1", "forwarded", &[junk, b"for=192.0.2.9"]);
            assert_eq!(fwd.extract(&p).unwrap(), ip("192.0.2.9"), "{junk:?}");
        }
        // The same bytes where the client is expected are a key error.
        let p = raw_parts(
            "127.0.0.1:1",
            "x-forwarded-for",
            &[b"198.51.100.41, 6.6.9.1\xff"],
        );
        assert_eq!(nets.extract(&p).unwrap_err().status(), 400);
    }

    #[test]
    fn trusted_hops_are_skipped_without_being_read() {
        // RFC 7239 lets a proxy obfuscate itself: an inner hop's `_name` or `unknown` is fine
        // when trust is by position.
        let c = ClientIp::trusted_hops(3).header(ForwardedHeader::Forwarded);
        let p = parts(
            "10.0.0.1:1",
            &[(
                "forwarded",
                "for=6.6.6.é, for=192.0.2.7, for=_lb2, for=unknown",
            )],
        );
        assert_eq!(c.extract(&p).unwrap(), ip("192.0.2.7"));
        // If the list ends at an unread hop, that entry is the client after all.
        let p = parts("10.0.0.1:1", &[("forwarded", "for=_lb2, for=unknown")]);
        assert_eq!(c.extract(&p).unwrap_err().status(), 400);
        let p = parts("10.0.0.1:1", &[("forwarded", "for=192.0.2.8, for=unknown")]);
        assert_eq!(c.extract(&p).unwrap(), ip("192.0.2.8"));
    }

    #[test]
    fn forwarded_elements_with_odd_but_valid_shapes() {
        let c = ClientIp::trusted_hops(1)
            .header(ForwardedHeader::Forwarded)
            .ipv6_prefix(128);
        for (value, want) in [
            ("for=192.0.2.1", "192.0.2.1"),
            ("FOR=192.0.2.1", "192.0.2.1"),
            ("for=\"192.0.2.1:8080\"", "192.0.2.1"),
            ("for=\"[2001:db8::1]\"", "2001:db8::1"),
            ("for=\"[2001:db8::1]:4711\"", "2001:db8::1"),
            ("for=\"2001:db8::1\"", "2001:db8::1"),
            ("proto=https; for=192.0.2.1 ;by=_proxy", "192.0.2.1"),
            ("by=\"a;b,c\";for=192.0.2.1", "192.0.2.1"),
            ("for=1.1.1.1, ,\t, for=192.0.2.1 , ", "192.0.2.1"),
        ] {
            let p = parts("127.0.0.1:1", &[("forwarded", value)]);
            assert_eq!(c.extract(&p).unwrap(), ip(want), "{value}");
        }
        for bad in [
            "for=192.0.2.1;for=192.0.2.2",
            "for=\"192.0.2.1",
            "for=\"192.0.2\\.1\"",
            "for=[2001:db8::1]x",
            "for=",
            "proto=https",
            ", ,",
        ] {
            let p = parts("127.0.0.1:1", &[("forwarded", bad)]);
            let got = c.extract(&p);
            if bad == ", ," {
                // Only empty elements: no entry, so the trusted peer is the leftmost address.
                assert_eq!(got.unwrap(), ip("127.0.0.1"));
            } else {
                assert_eq!(got.unwrap_err().status(), 400, "{bad}");
            }
        }
    }

    #[test]
    fn single_address_headers_are_read_from_trusted_peers_only() {
        for header in SINGLE {
            let name = header_name(header);
            let c = ClientIp::trusted_proxies(nets(&["10.0.0.0/8", "fd00::/8"]))
                .header(header)
                .ipv6_prefix(128);
            let key = |peer: &str, headers: &[(&str, &str)]| c.extract(&parts(peer, headers));
            // From your proxy or CDN: its one address, in any shape a proxy writes.
            for value in ["203.0.113.9", " 203.0.113.9\t", "203.0.113.9:443"] {
                assert_eq!(
                    key("10.0.0.5:1", &[(name, value)]),
                    Ok(ip("203.0.113.9")),
                    "{name}: {value:?}"
                );
            }
            assert_eq!(
                key("[fd00::1]:1", &[(name, "[2001:db8::7]:80")]),
                Ok(ip("2001:db8::7"))
            );
            assert_eq!(
                key("10.0.0.5:1", &[(name, "::ffff:192.0.2.1")]),
                Ok(ip("192.0.2.1"))
            );
            // From anyone else: the peer, whatever the header says.
            assert_eq!(
                key("198.51.100.7:1", &[(name, "203.0.113.9")]),
                Ok(ip("198.51.100.7"))
            );
            // A trusted peer that sent none: the peer.
            assert_eq!(key("10.0.0.5:1", &[]), Ok(ip("10.0.0.5")));
            // Not an address, or more than one value (a proxy that appended): 400.
            for bad in [
                "unknown",
                "",
                "203.0.113.9, 198.51.100.1",
                "_hidden",
                "1.2.3.4.5",
            ] {
                let got = key("10.0.0.5:1", &[(name, bad)]);
                if bad.is_empty() {
                    assert_eq!(
                        got,
                        Ok(ip("10.0.0.5")),
                        "{name}: an empty value is no value"
                    );
                } else {
                    assert_eq!(
                        got.map_err(|e| e.status()),
                        Err(StatusCode::BAD_REQUEST),
                        "{name}: {bad:?}"
                    );
                }
            }
            let two_lines = key(
                "10.0.0.5:1",
                &[(name, "203.0.113.9"), (name, "198.51.100.1")],
            );
            assert_eq!(
                two_lines.map_err(|e| e.status()),
                Err(StatusCode::BAD_REQUEST)
            );
            // The forwarding lists are not read.
            let got = key(
                "10.0.0.5:1",
                &[
                    (name, "203.0.113.9"),
                    ("x-forwarded-for", "6.6.6.6"),
                    ("forwarded", "for=7.7.7.7"),
                ],
            );
            assert_eq!(got, Ok(ip("203.0.113.9")));
            // By count: one trusted hop trusts the peer; none keys by the peer.
            let hops = |n| {
                ClientIp::trusted_hops(n)
                    .header(header)
                    .extract(&parts("198.51.100.7:1", &[(name, "203.0.113.9")]))
            };
            assert_eq!(hops(1), Ok(ip("203.0.113.9")));
            assert_eq!(hops(0), Ok(ip("198.51.100.7")));
        }
    }

    /// Bytes a client can put in a header value (all `HeaderValue` accepts: HTAB, visible
    /// ASCII, SP, obs-text), weighted towards the ones list and quote parsing care about.
    fn hostile_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            3 => proptest::sample::select(b",;\"\\=[]: \t_".to_vec()),
            1 => Just(b'\t'),
            3 => 0x20u8..=0x7e,
            2 => 0x80u8..=0xff,
        ]
    }

    fn hostile_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(hostile_byte(), 0..max)
    }

    fn any_ip() -> impl Strategy<Value = IpAddr> {
        prop_oneof![
            any::<u32>().prop_map(|v| IpAddr::from(std::net::Ipv4Addr::from(v))),
            any::<u128>().prop_map(|v| IpAddr::from(std::net::Ipv6Addr::from(v))),
        ]
    }

    /// One address as a proxy would write it into `header`, in one of its valid shapes
    /// (`style` picks one; each shape is valid for every address).
    fn written(header: ForwardedHeader, addr: IpAddr, style: u8) -> Vec<u8> {
        let port = 1 + u16::from(style) * 250;
        let node = match (addr, style % 3) {
            (IpAddr::V4(v4), 0) => v4.to_string(),
            (IpAddr::V4(v4), _) => format!("{v4}:{port}"),
            (IpAddr::V6(v6), 0) => v6.to_string(),
            (IpAddr::V6(v6), 1) => format!("[{v6}]"),
            (IpAddr::V6(v6), _) => format!("[{v6}]:{port}"),
        };
        let ows = ["", " ", "\t", "  "][usize::from(style / 3 % 4)];
        let entry = match header {
            ForwardedHeader::Forwarded => {
                let plain = addr.is_ipv4() && style % 3 == 0 && style % 2 == 0;
                let node = if plain { node } else { format!("\"{node}\"") };
                let key = ["for", "For", "FOR"][usize::from(style % 3)];
                match style / 12 % 3 {
                    0 => format!("{key}={node}"),
                    1 => format!("proto=https;{key}={node}"),
                    _ => format!("{key}={node};by=\"[2001:db8::9]:80\";host=\"a,b;c\""),
                }
            }
            _ => node,
        };
        format!("{ows}{entry}{ows}").into_bytes()
    }

    /// Field lines from `parts`: each part joins the previous line (`", "`, as nginx's
    /// `$proxy_add_x_forwarded_for` does) or starts a new one, per `new_line`.
    fn lines(parts: Vec<Vec<u8>>, new_line: &[bool], empties: &[bool]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for (i, part) in parts.into_iter().enumerate() {
            match out.last_mut() {
                Some(line) if !new_line.get(i).copied().unwrap_or(false) => {
                    line.extend_from_slice(b",");
                    if empties.get(i).copied().unwrap_or(false) {
                        line.extend_from_slice(b" ,");
                    }
                    line.extend_from_slice(b" ");
                    line.extend_from_slice(&part);
                }
                _ => out.push(part),
            }
        }
        out
    }

    fn header_name(header: ForwardedHeader) -> &'static str {
        match header {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => "forwarded",
            ForwardedHeader::CfConnectingIp => "cf-connecting-ip",
            ForwardedHeader::TrueClientIp => "true-client-ip",
            ForwardedHeader::FlyClientIp => "fly-client-ip",
            ForwardedHeader::XRealIp => "x-real-ip",
        }
    }

    const SINGLE: [ForwardedHeader; 4] = [
        ForwardedHeader::CfConnectingIp,
        ForwardedHeader::TrueClientIp,
        ForwardedHeader::FlyClientIp,
        ForwardedHeader::XRealIp,
    ];

    fn headers_parts(header: ForwardedHeader, lines: &[Vec<u8>]) -> Parts {
        let name = header_name(header);
        let lines: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        raw_parts("127.0.0.1:1", name, &lines)
    }

    fn header_kind() -> impl Strategy<Value = ForwardedHeader> {
        prop_oneof![
            Just(ForwardedHeader::XForwardedFor),
            Just(ForwardedHeader::Forwarded)
        ]
    }

    fn any_header() -> impl Strategy<Value = ForwardedHeader> {
        prop_oneof![header_kind(), proptest::sample::select(SINGLE.to_vec())]
    }

    use proptest::prelude::*;

    proptest! {
        /// For any bytes a client puts left of what the outermost trusted proxy
        /// appended (on that proxy's line or on lines of its own), the key is the address that
        /// proxy appended: with one or several trusted hops, trusted by network or by count.
        #[test]
        fn any_client_bytes_left_of_the_trusted_entry_leave_the_key_alone(
            header in header_kind(),
            junk in proptest::collection::vec(hostile_bytes(48), 0..3),
            client in any_ip(),
            inner in proptest::collection::vec(any::<u32>(), 0..3),
            styles in proptest::collection::vec(any::<u8>(), 4),
            new_line in proptest::collection::vec(any::<bool>(), 8),
            empties in proptest::collection::vec(any::<bool>(), 8),
            by_count: bool,
        ) {
            let trusted = nets(&["127.0.0.0/8", "10.0.0.0/8"]);
            prop_assume!(!trusted.iter().any(|n| n.contains(client)));
            // The chain left to right: the client's own lines, the client as the outermost
            // proxy saw it, then each inner proxy (10.x.y.z) as the next one saw it.
            let inner: Vec<IpAddr> =
                inner.iter().map(|v| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 | (v & 0x00ff_ffff)))).collect();
            let mut parts = junk.clone();
            parts.push(written(header, client, styles[0]));
            for (i, proxy) in inner.iter().enumerate() {
                parts.push(written(header, *proxy, styles[1 + i]));
            }
            // The client's lines are lines of their own or the start of the proxy's line.
            let mut new_line = new_line;
            new_line[junk.len()] |= junk.is_empty();
            let req = headers_parts(header, &lines(parts, &new_line, &empties));
            let c = if by_count {
                ClientIp::trusted_hops(inner.len() + 1)
            } else {
                ClientIp::trusted_proxies(trusted)
            };
            let got = c.header(header).client_ip(&req);
            prop_assert_eq!(got.ok(), Some(canonical(client)));
        }

        /// Well-formed chains against the plain rule: the peer, then the entries right to
        /// left; the first address not trusted is the client; if all are, the leftmost.
        #[test]
        fn the_key_is_the_first_untrusted_address_from_the_right(
            header in header_kind(),
            chain in proptest::collection::vec((any::<bool>(), any::<u32>(), any::<u8>()), 0..6),
            new_line in proptest::collection::vec(any::<bool>(), 6),
            empties in proptest::collection::vec(any::<bool>(), 6),
        ) {
            let trusted = nets(&["127.0.0.0/8", "10.0.0.0/8"]);
            let addrs: Vec<IpAddr> = chain
                .iter()
                .map(|&(ours, v, _)| {
                    let v = if ours { 0x0a00_0000 | (v & 0x00ff_ffff) } else { v };
                    IpAddr::from(std::net::Ipv4Addr::from(v))
                })
                .collect();
            let model = std::iter::once(ip("127.0.0.1"))
                .chain(addrs.iter().rev().copied())
                .try_fold(ip("127.0.0.1"), |_, a| {
                    if trusted.iter().any(|n| n.contains(a)) { Ok(a) } else { Err(a) }
                })
                .unwrap_or_else(|client| client);
            let written: Vec<Vec<u8>> =
                addrs.iter().zip(&chain).map(|(a, c)| written(header, *a, c.2)).collect();
            let req = headers_parts(header, &lines(written, &new_line, &empties));
            let got = ClientIp::trusted_proxies(trusted).header(header).client_ip(&req);
            prop_assert_eq!(got.ok(), Some(model));
        }

        /// A single-address header with any bytes: from a peer you do not trust, the key is
        /// the peer; from a trusted one, the value's one address if it is exactly one address
        /// as a proxy writes it, else a 400 (never an address taken from part of the value);
        /// forwarding lists sent beside it change nothing.
        #[test]
        fn single_address_headers_take_one_whole_address_or_refuse(
            which in 0usize..4,
            raw in proptest::collection::vec(hostile_bytes(48), 0..3),
            client in any_ip(),
            style: u8,
            valid: bool,
            xff in hostile_bytes(32),
        ) {
            let header = SINGLE[which];
            let mut lines = raw;
            if valid {
                lines = vec![written(header, client, style)];
            }
            let mut req = headers_parts(header, &lines);
            let c = ClientIp::trusted_proxies(nets(&["127.0.0.0/8"])).header(header).ipv6_prefix(128);
            let got = c.client_ip(&req);
            // The model: no value (or only empty ones) keys by the peer; one value must be an
            // address in full.
            let values: Vec<&[u8]> = lines
                .iter()
                .flat_map(|l| l.split(|&b| b == b','))
                .map(|v| v.trim_ascii())
                .filter(|v| !v.is_empty())
                .collect();
            match values.as_slice() {
                [] => prop_assert_eq!(got.ok(), Some(ip("127.0.0.1"))),
                [one] => {
                    let parsed = std::str::from_utf8(one).ok().and_then(|s| {
                        s.parse::<IpAddr>().ok()
                            .or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip()))
                            .or_else(|| s.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
                    });
                    match parsed {
                        Some(addr) => prop_assert_eq!(got.ok(), Some(canonical(addr))),
                        None => prop_assert_eq!(got.map_err(|e| e.status()), Err(StatusCode::BAD_REQUEST)),
                    }
                }
                _ => prop_assert_eq!(got.map_err(|e| e.status()), Err(StatusCode::BAD_REQUEST)),
            }
            if valid {
                prop_assert_eq!(got.ok(), Some(canonical(client)));
            }
            if let Ok(v) = http::HeaderValue::from_bytes(&xff) {
                req.headers.append("x-forwarded-for", v.clone());
                req.headers.append("forwarded", v);
                prop_assert_eq!(c.client_ip(&req), got);
            }
            // From a peer outside the trusted networks: the peer.
            req.extensions.insert("198.51.100.7:1".parse::<SocketAddr>().unwrap());
            prop_assert_eq!(c.client_ip(&req).ok(), Some(ip("198.51.100.7")));
        }

        /// No header content panics, whatever the trust.
        #[test]
        fn no_header_panics(
            header in any_header(),
            raw in proptest::collection::vec(hostile_bytes(64), 0..4),
            hops in 0usize..6,
            by_count: bool,
        ) {
            let req = headers_parts(header, &raw);
            let c = if by_count {
                ClientIp::trusted_hops(hops)
            } else {
                ClientIp::trusted_proxies(nets(&["0.0.0.0/0", "::/0"]))
            };
            let _ = c.header(header).extract(&req);
        }
    }
}
