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

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use http::request::Parts;
use http::HeaderMap;

use super::key::{KeyError, KeyExtractor};

/// An IP network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`), or a single address
/// (`192.0.2.7`, meaning /32 or /128).
///
/// ```
/// use tollgate::http::IpNet;
///
/// let net: IpNet = "10.0.0.0/8".parse().unwrap();
/// assert!(net.contains("10.1.2.3".parse().unwrap()));
/// assert!(!net.contains("11.0.0.1".parse().unwrap()));
/// assert!("10.0.0.0/33".parse::<IpNet>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// Why a string is not an [`IpNet`].
///
/// ```
/// let e = "10.0.0.0/40".parse::<tollgate::http::IpNet>().unwrap_err();
/// assert!(e.to_string().contains("prefix"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpNetError(&'static str);

impl fmt::Display for IpNetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for IpNetError {}

impl IpNet {
    /// The network of `addr` with `prefix` leading bits (host bits are cleared).
    ///
    /// # Errors
    /// A prefix longer than the address (32 for IPv4, 128 for IPv6).
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    /// let net = tollgate::http::IpNet::new(Ipv4Addr::new(192, 168, 7, 9).into(), 16).unwrap();
    /// assert_eq!(net.to_string(), "192.168.0.0/16");
    /// ```
    pub fn new(addr: IpAddr, prefix: u8) -> Result<IpNet, IpNetError> {
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if prefix > max {
            return Err(IpNetError("prefix longer than the address"));
        }
        Ok(IpNet {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    /// Whether `ip` is in this network (IPv4-mapped IPv6 addresses count as IPv4).
    ///
    /// ```
    /// let net: tollgate::http::IpNet = "2001:db8::/32".parse().unwrap();
    /// assert!(net.contains("2001:db8:1::5".parse().unwrap()));
    /// ```
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        same_family(ip, self.addr) && mask(ip, self.prefix) == self.addr
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

impl FromStr for IpNet {
    type Err = IpNetError;

    fn from_str(s: &str) -> Result<IpNet, IpNetError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| IpNetError("not an IP address"))?;
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .map_err(|_| IpNetError("prefix is not a number from 0 to 128"))?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        IpNet::new(addr, prefix)
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`: one client, one key, whichever socket family saw it.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The first `prefix` bits of `ip` (prefixes past the width keep every bit).
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let keep = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & keep))
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & keep))
        }
    }
}

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
}

/// Which header your proxies write the forwarding chain to.
///
/// ```
/// use tollgate::http::{ClientIp, ForwardedHeader};
/// let behind_nginx = ClientIp::trusted_hops(1).header(ForwardedHeader::XForwardedFor);
/// let rfc7239 = ClientIp::trusted_hops(1).header(ForwardedHeader::Forwarded);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client;proto=https, for="[2001:db8::1]:4711"`: the `for=`
    /// parameter of each element.
    Forwarded,
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
/// directly can choose its key). An entry that is not an IP address (garbage, `unknown`,
/// obfuscated `_names`) where the client is expected is a `400` [`KeyError`]; entries left of
/// the client are not parsed at all. The peer address comes from the same sources as
/// [`PeerIp`]'s.
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
        let mut furthest = peer;
        let mut position = 0;
        let mut result = Ok(());
        // Called on each address from the right; returns whether to go on leftwards.
        let mut visit = |node: Option<IpAddr>| -> bool {
            position += 1;
            match node {
                Some(ip) => {
                    furthest = ip;
                    self.trust.trusts(position, ip)
                }
                None => {
                    result = Err(KeyError::bad_request(
                        "the forwarding header has an entry that is not an IP address where the client is expected",
                    ));
                    false
                }
            }
        };
        match self.header {
            ForwardedHeader::XForwardedFor => walk_xff(&req.headers, &mut visit),
            ForwardedHeader::Forwarded => walk_forwarded(&req.headers, &mut visit),
        }
        result.map(|()| canonical(furthest))
    }
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;

    fn extract(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        self.client_ip(req).map(|ip| self.prefix.key(ip))
    }
}

/// Calls `visit` on each `X-Forwarded-For` entry from the right (last header line first) until
/// it returns `false`. Empty list elements (`a,,b`) carry nothing and are skipped; a line that
/// is not visible ASCII is one unparseable entry.
fn walk_xff(headers: &HeaderMap, visit: &mut impl FnMut(Option<IpAddr>) -> bool) {
    for line in headers.get_all("x-forwarded-for").iter().rev() {
        let Ok(line) = line.to_str() else {
            visit(None);
            return;
        };
        for entry in line.rsplit(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !visit(parse_node(entry)) {
                return;
            }
        }
    }
}

/// Calls `visit` on the `for=` node of each RFC 7239 `Forwarded` element from the right until
/// it returns `false`. An element without `for=` is one unparseable entry.
fn walk_forwarded(headers: &HeaderMap, visit: &mut impl FnMut(Option<IpAddr>) -> bool) {
    for line in headers.get_all(http::header::FORWARDED).iter().rev() {
        let Ok(line) = line.to_str() else {
            visit(None);
            return;
        };
        // Quoted strings may contain commas, so split with a quote-aware scanner.
        let elements: Vec<&str> = split_unquoted(line, b',').collect();
        for element in elements.iter().map(|e| e.trim()).rev() {
            if element.is_empty() {
                continue;
            }
            let node = split_unquoted(element, b';').find_map(|pair| {
                let (k, v) = pair.trim().split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| unquote(v.trim()))
            });
            if !visit(node.and_then(parse_node)) {
                return;
            }
        }
    }
}

/// Splits `s` at `sep` outside double-quoted strings (with backslash escapes).
fn split_unquoted(s: &str, sep: u8) -> impl Iterator<Item = &str> {
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    let mut quoted = false;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        while i < bytes.len() {
            let b = bytes[i];
            i += 1;
            match b {
                b'\\' if quoted => i += 1,
                b'"' => quoted = !quoted,
                b if b == sep && !quoted => {
                    let part = &s[start..i - 1];
                    start = i;
                    return Some(part);
                }
                _ => {}
            }
        }
        done = true;
        Some(&s[start.min(s.len())..])
    })
}

/// The content of a quoted string (escapes are not expected in addresses; any left make the
/// node unparseable), or the token itself.
fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v)
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]` or `[2001:db8::1]:443`. Anything else (`unknown`, `_hidden`, garbage) is
/// `None`.
fn parse_node(s: &str) -> Option<IpAddr> {
    if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let port_ok = after.is_empty()
            || after
                .strip_prefix(':')
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        return port_ok.then(|| v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6))?;
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    s.parse::<SocketAddr>().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn ip_net_parses_and_masks() {
        assert_eq!(
            "10.1.2.3/8".parse::<IpNet>().unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            "10.1.2.3".parse::<IpNet>().unwrap().to_string(),
            "10.1.2.3/32"
        );
        assert_eq!("::1".parse::<IpNet>().unwrap().to_string(), "::1/128");
        assert_eq!(
            "0.0.0.0/0".parse::<IpNet>().unwrap().to_string(),
            "0.0.0.0/0"
        );
        assert!("0.0.0.0/0"
            .parse::<IpNet>()
            .unwrap()
            .contains(ip("8.8.8.8")));
        assert!(!"0.0.0.0/0".parse::<IpNet>().unwrap().contains(ip("::1")));
        assert!("::/0".parse::<IpNet>().unwrap().contains(ip("2001:db8::1")));
        for bad in [
            "",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "x/8",
            "10.0.0.0/-1",
            "10/8",
        ] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad}");
        }
        // A mapped IPv4 address is in an IPv4 network.
        assert!("127.0.0.0/8"
            .parse::<IpNet>()
            .unwrap()
            .contains(ip("::ffff:127.0.0.1")));
    }

    #[test]
    fn masks_every_prefix_without_overflow() {
        for p in 0..=200u8 {
            let _ = mask(ip("255.255.255.255"), p);
            let _ = mask(ip("ffff::ffff"), p);
        }
        assert_eq!(mask(ip("1.2.3.4"), 0), ip("0.0.0.0"));
        assert_eq!(mask(ip("1.2.3.4"), 24), ip("1.2.3.0"));
        assert_eq!(mask(ip("2001:db8:1:2:3:4:5:6"), 64), ip("2001:db8:1:2::"));
        assert_eq!(
            mask(ip("2001:db8:1:2:3:4:5:6"), 128),
            ip("2001:db8:1:2:3:4:5:6")
        );
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

    #[test]
    fn split_unquoted_handles_quotes_and_escapes() {
        let parts: Vec<&str> = split_unquoted(r#"a,"b,c",d\,e,"f\",g""#, b',').collect();
        assert_eq!(parts, vec!["a", r#""b,c""#, r"d\", "e", r#""f\",g""#]);
        assert_eq!(split_unquoted("", b',').collect::<Vec<_>>(), vec![""]);
        assert_eq!(
            split_unquoted("a,", b',').collect::<Vec<_>>(),
            vec!["a", ""]
        );
    }
}
