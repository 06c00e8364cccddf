//! Reading a forwarding header (`X-Forwarded-For`, RFC 7239 `Forwarded`) **from the right**,
//! as bytes.
//!
//! Everything left of what your nearest trusted proxy appended was written by the client, and
//! can be any byte a header value may hold (obs-text `0x80..=0xff`, unbalanced quotes, stray
//! backslashes, commas, semicolons). So nothing here reads a line as a whole: field lines are
//! taken last first, each is cut into list elements from its right end, and an element is
//! parsed only when the walk asks for its address. What lies left of the element the walk
//! stops at is never looked at, so it cannot make the request unkeyable.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use http::header::{HeaderName, FORWARDED};
use http::HeaderMap;

/// Which header your proxies write the client's address to: a forwarding chain every proxy
/// appends to (`X-Forwarded-For`, `Forwarded`), or a single address the nearest proxy or CDN
/// sets (`CF-Connecting-IP`, `True-Client-IP`, `Fly-Client-IP`, `X-Real-IP`).
///
/// ```
/// use tollgate::http::{ClientIp, ForwardedHeader};
/// let behind_nginx = ClientIp::trusted_hops(1).header(ForwardedHeader::XForwardedFor);
/// let rfc7239 = ClientIp::trusted_hops(1).header(ForwardedHeader::Forwarded);
/// let cloudflare = ClientIp::trusted_proxies(["173.245.48.0/20".parse().unwrap()])
///     .header(ForwardedHeader::CfConnectingIp);
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
    /// Cloudflare's `CF-Connecting-IP: client`: one address, which Cloudflare sets (replacing
    /// any the client sent). Read only from a trusted peer: trust Cloudflare's published
    /// networks with [`trusted_proxies`](super::ClientIp::trusted_proxies).
    CfConnectingIp,
    /// `True-Client-IP: client` (Akamai, Cloudflare Enterprise): one address, set by the CDN.
    TrueClientIp,
    /// Fly.io's `Fly-Client-IP: client`: one address, set by Fly's proxy.
    FlyClientIp,
    /// `X-Real-IP: client`: one address, as nginx sets it with
    /// `proxy_set_header X-Real-IP $remote_addr`.
    XRealIp,
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const CF_CONNECTING_IP: HeaderName = HeaderName::from_static("cf-connecting-ip");
const TRUE_CLIENT_IP: HeaderName = HeaderName::from_static("true-client-ip");
const FLY_CLIENT_IP: HeaderName = HeaderName::from_static("fly-client-ip");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

impl ForwardedHeader {
    fn name(self) -> HeaderName {
        match self {
            ForwardedHeader::XForwardedFor => X_FORWARDED_FOR,
            ForwardedHeader::Forwarded => FORWARDED,
            ForwardedHeader::CfConnectingIp => CF_CONNECTING_IP,
            ForwardedHeader::TrueClientIp => TRUE_CLIENT_IP,
            ForwardedHeader::FlyClientIp => FLY_CLIENT_IP,
            ForwardedHeader::XRealIp => X_REAL_IP,
        }
    }

    /// Whether the header holds one address that the nearest proxy sets (rather than a list
    /// every proxy appends to).
    pub(super) fn is_single(self) -> bool {
        !matches!(
            self,
            ForwardedHeader::XForwardedFor | ForwardedHeader::Forwarded
        )
    }
}

/// One non-empty list element of a forwarding header, not parsed yet.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry<'a> {
    bytes: &'a [u8],
    header: ForwardedHeader,
}

impl Entry<'_> {
    /// The address the element names, or `None` if it names none: not an IP address
    /// (`unknown`, an obfuscated `_name`, garbage, non-ASCII), or a `Forwarded` element
    /// without exactly one `for=`.
    pub(super) fn addr(&self) -> Option<IpAddr> {
        match self.header {
            ForwardedHeader::Forwarded => parse_node(for_node(self.bytes)?),
            _ => parse_node(self.bytes),
        }
    }
}

/// The elements of every `header` field line, right to left: the last line first, as if the
/// lines were joined in order with commas (RFC 9110, section 5.3), and empty elements skipped
/// (RFC 9110, section 5.6.1). Lazy: an element is cut from its line only when asked for.
pub(super) fn entries_from_right(
    headers: &HeaderMap,
    header: ForwardedHeader,
) -> impl Iterator<Item = Entry<'_>> {
    // `Forwarded` values may be quoted strings, which may hold commas; X-Forwarded-For has none.
    let quotes = header == ForwardedHeader::Forwarded;
    headers
        .get_all(header.name())
        .into_iter()
        .rev()
        .flat_map(move |line| RevSplit::new(line.as_bytes(), b',', quotes))
        .map(trim_ows)
        .filter(|e| !e.is_empty())
        .map(move |bytes| Entry { bytes, header })
}

/// The parts of `s` between `sep` bytes, from the right. With `quotes`, a separator inside a
/// quoted string (`"..."`, with `\` escapes) does not separate. Scanning from the right keeps
/// the quote state exact over everything a proxy wrote: a quote the client left open lies
/// further left, and is never reached unless the walk goes there.
struct RevSplit<'a> {
    /// What is left to cut, or `None` once the leftmost part was given out.
    rest: Option<&'a [u8]>,
    sep: u8,
    quotes: bool,
}

impl<'a> RevSplit<'a> {
    fn new(s: &'a [u8], sep: u8, quotes: bool) -> Self {
        RevSplit {
            rest: Some(s),
            sep,
            quotes,
        }
    }
}

impl<'a> Iterator for RevSplit<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        let mut quoted = false;
        let mut i = rest.len();
        while i > 0 {
            i -= 1;
            match rest[i] {
                // Read leftwards, a quote opens a quoted string, and closes one unless an odd
                // run of backslashes escapes it.
                b'"' if self.quotes && quoted => quoted = escaped(rest, i),
                b'"' if self.quotes => quoted = true,
                b if b == self.sep && !quoted => {
                    self.rest = Some(&rest[..i]);
                    return Some(&rest[i + 1..]);
                }
                _ => {}
            }
        }
        self.rest = None;
        Some(rest)
    }
}

/// Whether the byte at `i` is preceded by an odd number of backslashes.
fn escaped(s: &[u8], i: usize) -> bool {
    s[..i].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

/// Without leading and trailing optional whitespace (SP and HTAB).
fn trim_ows(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(b)).map_or(start, |e| e + 1);
    &s[start..end]
}

/// The `for=` node of one `Forwarded` element (`for=192.0.2.1;proto=https`), unquoted. `None`
/// if the element has no `for=`, has it twice (RFC 7239 allows each parameter once), or its
/// quoted string holds an escape (no address needs one).
fn for_node(element: &[u8]) -> Option<&[u8]> {
    let mut node = None;
    for pair in RevSplit::new(element, b';', true) {
        let pair = trim_ows(pair);
        let Some(eq) = pair.iter().position(|&b| b == b'=') else {
            continue;
        };
        if trim_ows(&pair[..eq]).eq_ignore_ascii_case(b"for") {
            if node.is_some() {
                return None;
            }
            node = Some(unquote(trim_ows(&pair[eq + 1..]))?);
        }
    }
    node
}

/// The content of a quoted string, or a token as it is; `None` for a quoted string that is
/// unterminated or holds an escape.
fn unquote(v: &[u8]) -> Option<&[u8]> {
    match v.strip_prefix(b"\"") {
        Some(inner) => {
            let inner = inner.strip_suffix(b"\"")?;
            (!inner.iter().any(|&b| b == b'\\' || b == b'"')).then_some(inner)
        }
        None => Some(v),
    }
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]` or `[2001:db8::1]:443`. Anything else (`unknown`, `_hidden`, garbage,
/// non-ASCII bytes) is `None`.
fn parse_node(node: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(node).ok()?;
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

    fn split(s: &str, sep: u8, quotes: bool) -> Vec<&str> {
        RevSplit::new(s.as_bytes(), sep, quotes)
            .map(|p| std::str::from_utf8(p).unwrap())
            .collect()
    }

    #[test]
    fn rev_split_cuts_from_the_right_outside_quotes() {
        assert_eq!(split("a,b,,c", b',', false), ["c", "", "b", "a"]);
        assert_eq!(split("", b',', false), [""]);
        assert_eq!(split("a,", b',', true), ["", "a"]);
        assert_eq!(
            split(r#"a,"b,c",d\,e,"f\",g""#, b',', true),
            [r#""f\",g""#, "e", r"d\", r#""b,c""#, "a"]
        );
        // An even run of backslashes escapes nothing: the quote before `,x` closes.
        assert_eq!(split(r#""a\\",x"#, b',', true), ["x", r#""a\\""#]);
        // Read from the right, an unclosed quote on the left holds up only what lies left of
        // it: every part right of it is cut as written.
        assert_eq!(
            split(r#"for="6.6.6.6, for=1.1.1.1, for="[::1]:80""#, b',', true),
            [r#" for="[::1]:80""#, " for=1.1.1.1", r#"for="6.6.6.6"#]
        );
        assert_eq!(split("a;b", b';', true), ["b", "a"]);
    }

    #[test]
    fn trims_only_spaces_and_tabs() {
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(trim_ows(b" \t "), b"");
        assert_eq!(trim_ows(b"\xa0a\xa0"), b"\xa0a\xa0");
    }

    #[test]
    fn nodes_and_for_parameters() {
        assert_eq!(
            parse_node(b"192.0.2.1:80"),
            Some("192.0.2.1".parse().unwrap())
        );
        assert_eq!(parse_node(b"[::1]:80"), Some("::1".parse().unwrap()));
        for bad in [
            &b"unknown"[..],
            b"_hidden",
            b"192.0.2.1\xff",
            b"[::1",
            b"[::1]:",
            b"",
        ] {
            assert_eq!(parse_node(bad), None, "{bad:?}");
        }
        assert_eq!(for_node(b"for=a"), Some(&b"a"[..]));
        assert_eq!(for_node(br#"by="x;for=y";for="z""#), Some(&b"z"[..]));
        assert_eq!(for_node(b"for=a;for=b"), None);
        assert_eq!(for_node(b"proto=http"), None);
        assert_eq!(for_node(br#"for="a"#), None);
        assert_eq!(for_node(br#"for="a\"b""#), None);
    }
}
