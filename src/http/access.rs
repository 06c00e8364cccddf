//! Allow and deny lists: [`AccessList`], networks and predicates checked before any limiter
//! runs, and [`screen`], the rule that applies them to a request.
//!
//! A request that matches a deny list is refused (`403`); one that matches an allow list and
//! no deny list goes through without a limiter; **deny wins over allow**. Addresses come from
//! the layer's [`AddrSource`]: the extractor's own (`PeerIp`, `ClientIp`: the same trusted
//! client address the key comes from) or one given to the builder, never a raw header.
//! Networks are kept as sorted disjoint ranges ([`ip_set`]).

mod ip_set;

use std::fmt;

use http::request::Parts;

use ip_set::IpSet;

use super::error::BuildError;
use super::key::{AddrSource, KeyError, KeyExtractor};
use super::IpNet;

type RequestRule = Box<dyn Fn(&Parts) -> bool + Send + Sync>;
type KeyRule<K> = Box<dyn Fn(&K) -> bool + Send + Sync>;

/// Allow and deny lists for a [`RateLimitLayer`](super::RateLimitLayer) (every policy:
/// [`access`](super::RateLimitLayerBuilder::access)) or for one policy
/// ([`policy_access`](super::RateLimitLayerBuilder::policy_access)): client networks, rules
/// over the request head, and rules over the extracted key.
///
/// - **Deny**: a matching request is answered `403 Forbidden` (a gRPC call:
///   `PERMISSION_DENIED`), with the layer's body ([`problem_json`](super::RateLimitLayerBuilder::problem_json)),
///   and never reaches a limiter or the handler.
/// - **Allow**: a matching request goes to the handler without any limiter running (no
///   permits taken, no rate-limit headers).
/// - **Deny wins over allow**: a request matching both is refused.
/// - Everything is checked before any limiter; a policy's lists add to the layer's.
///
/// Networks are matched against the client address the layer determines: the key
/// extractor's when it keys by address ([`PeerIp`](super::PeerIp); [`ClientIp`](super::ClientIp),
/// the client behind your trusted proxies, read from the right), else the one given to
/// [`access_addr`](super::RateLimitLayerBuilder::access_addr). An IPv4-mapped IPv6 address
/// (`::ffff:192.0.2.1`) matches its IPv4 entries, and an entry written in that form
/// (`::ffff:10.0.0.0/104`) is its IPv4 network (`10.0.0.0/8`); IPv6 networks hold no IPv4
/// client (`::/0` is every IPv6 client only). When the address cannot be determined (a
/// forwarding entry that is not an address where the client is expected), a layer with deny
/// networks answers as for a key error ([`OnKeyError`](super::OnKeyError); it fails closed by
/// default), and allow networks simply do not match.
///
/// An allow list that covers every IPv4 or every IPv6 address (`0.0.0.0/0`, `::/0`, or halves
/// adding up to one) would silently switch every limit off for that family:
/// [`build`](super::RateLimitLayerBuilder::build) refuses it
/// ([`BuildError::AllowsEveryAddress`]) unless [`confirm_allow_all`](Self::confirm_allow_all)
/// says you mean it.
///
/// Key rules see the key the layer's extractor returns; a request without a usable key
/// matches none (and is answered per [`OnKeyError`](super::OnKeyError), unless a request or
/// network rule allowed it).
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::http::{AccessList, ClientIp, IpNet, RateLimitLayer};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let office: IpNet = "203.0.113.0/24".parse()?;
/// let abuser: IpNet = "198.51.100.7".parse()?;
/// let layer = RateLimitLayer::builder(ClientIp::trusted_proxies(["10.0.0.0/8".parse()?]))
///     .per_minute(100)
///     .access(
///         AccessList::new()
///             .allow_networks([office])                              // never limited
///             .allow_if(|req| req.uri.path() == "/healthz")          // nor health checks
///             .deny_networks([abuser])                               // always 403
///             .deny_key(|ip: &IpAddr| ip.is_unspecified()),
///     )
///     .build()?;
/// # let _ = layer;
/// # Ok(()) }
/// ```
#[must_use = "pass the list to `access` or `policy_access`"]
pub struct AccessList<K> {
    allow_networks: Vec<IpNet>,
    deny_networks: Vec<IpNet>,
    allow_if: Vec<RequestRule>,
    deny_if: Vec<RequestRule>,
    allow_key: Vec<KeyRule<K>>,
    deny_key: Vec<KeyRule<K>>,
    allow_all: bool,
}

impl<K> Default for AccessList<K> {
    fn default() -> Self {
        AccessList {
            allow_networks: Vec::new(),
            deny_networks: Vec::new(),
            allow_if: Vec::new(),
            deny_if: Vec::new(),
            allow_key: Vec::new(),
            deny_key: Vec::new(),
            allow_all: false,
        }
    }
}

impl<K> AccessList<K> {
    /// Empty lists: nothing allowed or denied.
    ///
    /// ```
    /// let lists = tollgate::http::AccessList::<String>::new();
    /// ```
    pub fn new() -> Self {
        AccessList::default()
    }

    /// Requests from these networks bypass every limiter (unless a deny rule matches).
    ///
    /// ```
    /// use tollgate::http::{AccessList, IpNet};
    /// let internal: Vec<IpNet> = ["10.0.0.0/8", "fd00::/8"].iter().map(|n| n.parse().unwrap()).collect();
    /// let lists = AccessList::<std::net::IpAddr>::new().allow_networks(internal);
    /// ```
    pub fn allow_networks(mut self, networks: impl IntoIterator<Item = IpNet>) -> Self {
        self.allow_networks.extend(networks);
        self
    }

    /// Requests from these networks are refused with `403`.
    ///
    /// ```
    /// use tollgate::http::AccessList;
    /// let lists = AccessList::<std::net::IpAddr>::new().deny_networks(["192.0.2.0/24".parse().unwrap()]);
    /// ```
    pub fn deny_networks(mut self, networks: impl IntoIterator<Item = IpNet>) -> Self {
        self.deny_networks.extend(networks);
        self
    }

    /// Requests for which `rule` returns `true` bypass every limiter (unless a deny rule
    /// matches). The rule sees the request head: method, URI, headers a client can write,
    /// extensions earlier layers set. Allow on something a client cannot forge (an
    /// extension your authentication layer inserts, a path only reachable internally), not
    /// on a header it can simply send.
    ///
    /// ```
    /// use tollgate::http::AccessList;
    /// let lists = AccessList::<String>::new().allow_if(|req| req.uri.path() == "/healthz");
    /// ```
    pub fn allow_if(mut self, rule: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.allow_if.push(Box::new(rule));
        self
    }

    /// Requests for which `rule` returns `true` are refused with `403`.
    ///
    /// ```
    /// use tollgate::http::AccessList;
    /// let lists = AccessList::<String>::new().deny_if(|req| req.headers.contains_key("x-bad-bot"));
    /// ```
    pub fn deny_if(mut self, rule: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.deny_if.push(Box::new(rule));
        self
    }

    /// Requests whose key (what the layer's extractor returned) satisfies `rule` bypass
    /// every limiter (unless a deny rule matches).
    ///
    /// ```
    /// use tollgate::http::AccessList;
    /// let lists = AccessList::<String>::new().allow_key(|api_key| api_key.starts_with("internal-"));
    /// ```
    pub fn allow_key(mut self, rule: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.allow_key.push(Box::new(rule));
        self
    }

    /// Requests whose key satisfies `rule` are refused with `403`.
    ///
    /// ```
    /// use tollgate::http::AccessList;
    /// let revoked = ["k-123".to_owned()];
    /// let lists = AccessList::<String>::new().deny_key(move |api_key| revoked.contains(api_key));
    /// ```
    pub fn deny_key(mut self, rule: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.deny_key.push(Box::new(rule));
        self
    }

    /// Accepts allow networks that cover every IPv4 or every IPv6 address, which
    /// [`build`](super::RateLimitLayerBuilder::build) refuses otherwise
    /// ([`BuildError::AllowsEveryAddress`]): every client of that family then bypasses
    /// every limit of the layer (or the policy).
    ///
    /// ```
    /// use tollgate::http::{AccessList, BuildError, PeerIp, RateLimitLayer};
    /// let everyone = || AccessList::new().allow_networks(["0.0.0.0/0".parse().unwrap()]);
    /// let refused = RateLimitLayer::builder(PeerIp::new()).per_second(5).access(everyone()).build();
    /// assert!(matches!(refused, Err(BuildError::AllowsEveryAddress(_))));
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .per_second(5)
    ///     .access(everyone().confirm_allow_all())
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn confirm_allow_all(mut self) -> Self {
        self.allow_all = true;
        self
    }

    /// Whether the lists hold networks (and so need a client address).
    pub(crate) fn has_networks(&self) -> bool {
        !self.allow_networks.is_empty() || !self.deny_networks.is_empty()
    }

    /// The lists as the layer runs them; `owner` names the layer or policy in errors.
    pub(crate) fn compile(self, owner: &str) -> Result<Lists<K>, BuildError> {
        let allow_networks = IpSet::new(self.allow_networks);
        if !self.allow_all && allow_networks.covers_a_family() {
            return Err(BuildError::AllowsEveryAddress(owner.to_owned()));
        }
        Ok(Lists {
            allow_networks,
            deny_networks: IpSet::new(self.deny_networks),
            allow_if: self.allow_if,
            deny_if: self.deny_if,
            allow_key: self.allow_key,
            deny_key: self.deny_key,
        })
    }
}

impl<K> fmt::Debug for AccessList<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessList")
            .field("allow_networks", &self.allow_networks)
            .field("deny_networks", &self.deny_networks)
            .field("allow_if", &self.allow_if.len())
            .field("deny_if", &self.deny_if.len())
            .field("allow_key", &self.allow_key.len())
            .field("deny_key", &self.deny_key.len())
            .field("allow_all", &self.allow_all)
            .finish()
    }
}

/// An [`AccessList`] as the layer runs it.
pub(crate) struct Lists<K> {
    allow_networks: IpSet,
    deny_networks: IpSet,
    allow_if: Vec<RequestRule>,
    deny_if: Vec<RequestRule>,
    allow_key: Vec<KeyRule<K>>,
    deny_key: Vec<KeyRule<K>>,
}

impl<K> Lists<K> {
    fn has_networks(&self) -> bool {
        !self.allow_networks.is_empty() || !self.deny_networks.is_empty()
    }

    fn denies_request(&self, req: &Parts, addr: Option<std::net::IpAddr>) -> bool {
        addr.is_some_and(|a| self.deny_networks.contains(a)) || self.deny_if.iter().any(|r| r(req))
    }

    fn allows_request(&self, req: &Parts, addr: Option<std::net::IpAddr>) -> bool {
        addr.is_some_and(|a| self.allow_networks.contains(a))
            || self.allow_if.iter().any(|r| r(req))
    }
}

/// What the lists make of a request.
pub(crate) enum Screen<K> {
    /// No list matched and a limiter applies: decide with this key.
    Limit(K),
    /// No list matched and no limiter applies: through, unlimited.
    Pass,
    /// An allow list matched (no deny list did): through, no limiter.
    Bypass,
    /// A deny list matched: `403`.
    Deny,
    /// No key for the policy, or no client address for a deny list.
    KeyError(KeyError),
}

/// Applies `lists` (the layer's, then the policy's) to a request that a limiter applies to
/// (`limited`; else it passes unless a list refuses it), in this order: deny by address or request; allow by address or
/// request (done, unless a key could still be denied); the key; deny by key; allow by key.
/// So deny wins over allow, and the key is extracted only when it is needed.
///
/// `addr_source` is asked for only when a list holds networks (a layer without lists pays
/// nothing for it).
pub(crate) fn screen<'a, E: KeyExtractor + ?Sized>(
    lists: [Option<&Lists<E::Key>>; 2],
    addr_source: impl FnOnce() -> Option<&'a dyn AddrSource>,
    extractor: &E,
    limited: bool,
    req: &Parts,
) -> Screen<E::Key> {
    let lists = || lists.iter().flatten();
    let extract = || match extractor.extract(req) {
        Ok(key) => Screen::Limit(key),
        Err(e) => Screen::KeyError(e),
    };
    if lists().next().is_none() {
        return if limited { extract() } else { Screen::Pass };
    }
    let mut addr = None;
    if lists().any(|l| l.has_networks()) {
        // `build` makes sure there is a source whenever there are networks.
        match addr_source().map(|s| s.client_addr(req)) {
            Some(Ok(a)) => addr = Some(a),
            // Fail closed: an address that cannot be read might be a denied one.
            Some(Err(e)) if lists().any(|l| !l.deny_networks.is_empty()) => {
                return Screen::KeyError(e)
            }
            _ => {}
        }
    }
    if lists().any(|l| l.denies_request(req, addr)) {
        return Screen::Deny;
    }
    let allowed = lists().any(|l| l.allows_request(req, addr));
    let key_rules = lists().any(|l| !l.deny_key.is_empty())
        || (!allowed && limited && lists().any(|l| !l.allow_key.is_empty()));
    if !key_rules {
        return match (allowed, limited) {
            (true, _) => Screen::Bypass,
            (false, false) => Screen::Pass,
            (false, true) => extract(),
        };
    }
    let key = match extractor.extract(req) {
        Ok(key) => key,
        Err(_) if allowed => return Screen::Bypass,
        Err(_) if !limited => return Screen::Pass,
        Err(e) => return Screen::KeyError(e),
    };
    if lists().any(|l| l.deny_key.iter().any(|r| r(&key))) {
        return Screen::Deny;
    }
    if allowed || lists().any(|l| l.allow_key.iter().any(|r| r(&key))) {
        return Screen::Bypass;
    }
    if limited {
        Screen::Limit(key)
    } else {
        Screen::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{ClientIp, GlobalKey, PeerIp};
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn parts(peer: &str, path: &str, xff: &[&[u8]]) -> Parts {
        let mut req = http::Request::get(path).body(()).unwrap();
        for line in xff {
            req.headers_mut().append(
                "x-forwarded-for",
                http::HeaderValue::from_bytes(line).unwrap(),
            );
        }
        req.extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
        req.into_parts().0
    }

    /// What `screen` said, without the key.
    #[derive(Debug, PartialEq, Eq)]
    enum S {
        Limit(usize),
        Pass,
        Bypass,
        Deny,
        KeyError(u16),
    }

    fn run<E: KeyExtractor>(
        layer: Option<&Lists<E::Key>>,
        policy: Option<&Lists<E::Key>>,
        e: &E,
        index: Option<usize>,
        req: &Parts,
    ) -> S {
        match screen([layer, policy], || e.addr_source(), e, index.is_some(), req) {
            Screen::Limit(_) => S::Limit(index.expect("limited only with a policy")),
            Screen::Pass => S::Pass,
            Screen::Bypass => S::Bypass,
            Screen::Deny => S::Deny,
            Screen::KeyError(e) => S::KeyError(e.status().as_u16()),
        }
    }

    fn compile<K>(l: AccessList<K>) -> Lists<K> {
        l.compile("test").unwrap()
    }

    #[test]
    fn deny_wins_over_allow_whatever_matched() {
        let peer = PeerIp::new();
        let req = parts("10.1.2.3:1", "/healthz", &[]);
        let health = |req: &Parts| req.uri.path() == "/healthz";
        let cases: Vec<(AccessList<IpAddr>, S)> = vec![
            (
                AccessList::new().allow_networks(nets(&["10.0.0.0/8"])),
                S::Bypass,
            ),
            (AccessList::new().allow_if(health), S::Bypass),
            (
                AccessList::new().allow_key(|ip: &IpAddr| ip.is_ipv4()),
                S::Bypass,
            ),
            (
                AccessList::new()
                    .allow_networks(nets(&["10.0.0.0/8"]))
                    .deny_networks(nets(&["10.1.0.0/16"])),
                S::Deny,
            ),
            (
                AccessList::new()
                    .allow_networks(nets(&["10.0.0.0/8"]))
                    .deny_key(|ip: &IpAddr| *ip == IpAddr::from([10, 1, 2, 3])),
                S::Deny,
            ),
            (AccessList::new().allow_if(health).deny_if(health), S::Deny),
            (
                AccessList::new()
                    .allow_key(|_: &IpAddr| true)
                    .deny_networks(nets(&["::ffff:10.0.0.0/104"])),
                S::Deny,
            ),
            (
                AccessList::new().deny_networks(nets(&["11.0.0.0/8"])),
                S::Limit(0),
            ),
        ];
        for (i, (l, want)) in cases.into_iter().enumerate() {
            let l = compile(l);
            assert_eq!(run(Some(&l), None, &peer, Some(0), &req), want, "case {i}");
            // The same list on the policy instead of the layer decides the same.
            assert_eq!(run(None, Some(&l), &peer, Some(0), &req), want, "case {i}");
        }
        // A policy's deny beats the layer's allow, and the other way round.
        let allow = compile(AccessList::new().allow_networks(nets(&["10.0.0.0/8"])));
        let deny = compile(AccessList::new().deny_if(health));
        assert_eq!(
            run(Some(&allow), Some(&deny), &peer, Some(0), &req),
            S::Deny
        );
        assert_eq!(
            run(Some(&deny), Some(&allow), &peer, Some(0), &req),
            S::Deny
        );
    }

    #[test]
    fn requests_without_a_policy_are_only_denied_or_passed() {
        let peer = PeerIp::new();
        let req = parts("10.1.2.3:1", "/", &[]);
        let deny = compile(AccessList::new().deny_networks(nets(&["10.0.0.0/8"])));
        assert_eq!(run(Some(&deny), None, &peer, None, &req), S::Deny);
        let other = compile(AccessList::new().deny_networks(nets(&["11.0.0.0/8"])));
        assert_eq!(run(Some(&other), None, &peer, None, &req), S::Pass);
        assert_eq!(run::<PeerIp>(None, None, &peer, None, &req), S::Pass);
        // A key rule on a request without a key (no peer address) is passed over.
        let no_peer = http::Request::get("/").body(()).unwrap().into_parts().0;
        let by_key = compile(AccessList::new().deny_key(|_: &IpAddr| true));
        assert_eq!(run(Some(&by_key), None, &peer, None, &no_peer), S::Pass);
        assert_eq!(
            run(Some(&by_key), None, &peer, Some(3), &no_peer),
            S::KeyError(500)
        );
    }

    #[test]
    fn an_unreadable_address_fails_closed_only_for_deny_networks() {
        // The trusted proxy wrote something that is not an address where the client is.
        let client_ip = ClientIp::trusted_proxies(nets(&["127.0.0.0/8"]));
        let req = parts("127.0.0.1:1", "/", &[b"unknown"]);
        let deny = compile(AccessList::new().deny_networks(nets(&["192.0.2.0/24"])));
        let allow = compile(AccessList::new().allow_networks(nets(&["192.0.2.0/24"])));
        assert_eq!(
            run(Some(&deny), None, &client_ip, Some(0), &req),
            S::KeyError(400)
        );
        assert_eq!(
            run(Some(&deny), None, &client_ip, None, &req),
            S::KeyError(400)
        );
        // Allow networks just do not match; the key then fails as it would anyway.
        assert_eq!(
            run(Some(&allow), None, &client_ip, Some(0), &req),
            S::KeyError(400)
        );
        // ... unless a request rule allows it: an allowed request needs no key.
        let health = compile(
            AccessList::new()
                .allow_networks(nets(&["192.0.2.0/24"]))
                .allow_if(|_| true),
        );
        assert_eq!(
            run(Some(&health), None, &client_ip, Some(0), &req),
            S::Bypass
        );
    }

    #[test]
    fn key_rules_see_the_extracted_key() {
        let by_key = compile(AccessList::<()>::new().allow_key(|_| true));
        let req = parts("10.1.2.3:1", "/", &[]);
        assert_eq!(
            run(Some(&by_key), None, &GlobalKey, Some(1), &req),
            S::Bypass
        );
        let none = compile(AccessList::<()>::new().deny_key(|_| false));
        assert_eq!(
            run(Some(&none), None, &GlobalKey, Some(1), &req),
            S::Limit(1)
        );
    }

    #[test]
    fn an_allow_list_of_a_whole_family_needs_confirming() {
        for all in ip_set::tests::WHOLE_FAMILY {
            let l = AccessList::<()>::new().allow_networks(nets(all));
            assert_eq!(
                l.compile("the layer").err(),
                Some(BuildError::AllowsEveryAddress("the layer".into())),
                "{all:?}"
            );
            let confirmed = AccessList::<()>::new()
                .allow_networks(nets(all))
                .confirm_allow_all();
            assert!(confirmed.compile("x").is_ok());
        }
        // Denying everyone is no silent bypass: allowed without confirmation.
        assert!(AccessList::<()>::new()
            .deny_networks(nets(&["0.0.0.0/0"]))
            .compile("x")
            .is_ok());
    }

    /// Bytes a client can put in a header value (all `HeaderValue` accepts), weighted towards
    /// list syntax and the allow list's own addresses.
    fn hostile_line() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            3 => proptest::collection::vec(
                prop_oneof![
                    Just(b','), Just(b' '), Just(b'\t'), Just(b'"'), Just(b'['), Just(b']'),
                    Just(b':'), 0x21u8..=0x7e, 0x80u8..=0xff,
                ],
                0..24,
            ),
            2 => Just(b"10.0.0.1".to_vec()),
            2 => Just(b"192.0.2.77".to_vec()),
            1 => Just(b"::ffff:10.9.9.9".to_vec()),
            1 => Just(b"127.0.0.1".to_vec()),
            1 => Just(b"unknown".to_vec()),
        ];
        proptest::collection::vec(piece, 0..5).prop_map(|pieces| pieces.join(&b", "[..]))
    }

    fn client_addr() -> impl Strategy<Value = IpAddr> {
        prop_oneof![
            any::<u32>().prop_map(|v| IpAddr::V4(Ipv4Addr::from(v))),
            (0u32..=255).prop_map(|v| IpAddr::V4(Ipv4Addr::new(10, 0, 0, v as u8))),
            (0u32..=255).prop_map(|v| IpAddr::V4(Ipv4Addr::new(192, 0, 2, v as u8))),
            (0u32..=255).prop_map(|v| IpAddr::V4(Ipv4Addr::new(198, 51, 100, v as u8))),
            any::<u128>().prop_map(|v| IpAddr::V6(v.into())),
            (0u32..=255)
                .prop_map(|v| IpAddr::V6(Ipv4Addr::new(10, 0, 0, v as u8).to_ipv6_mapped())),
        ]
    }

    fn lists() -> (Lists<IpAddr>, Vec<IpNet>, Vec<IpNet>) {
        let allow = nets(&["10.0.0.0/8", "192.0.2.0/25", "2001:db8::/32"]);
        let deny = nets(&["198.51.100.0/24", "192.0.2.64/26"]);
        let l = AccessList::new()
            .allow_networks(allow.clone())
            .deny_networks(deny.clone());
        (compile(l), allow, deny)
    }

    /// The plain rule, over `IpNet::contains` one network at a time.
    fn model(allow: &[IpNet], deny: &[IpNet], ip: IpAddr) -> S {
        if deny.iter().any(|n| n.contains(ip)) {
            S::Deny
        } else if allow.iter().any(|n| n.contains(ip)) {
            S::Bypass
        } else {
            S::Limit(0)
        }
    }

    fn written(ip: IpAddr) -> Vec<u8> {
        match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]:443"),
        }
        .into_bytes()
    }

    proptest! {
        /// Whatever a client writes left of the address the trusted proxy appended (the allow
        /// list's own addresses among it), the lists judge that appended address: writing an
        /// allow-listed address does not bypass the limit, and writing another does not
        /// escape a deny list.
        #[test]
        fn client_written_bytes_never_move_the_lists(
            junk in proptest::collection::vec(hostile_line(), 0..3),
            client in client_addr(),
            own_line: bool,
        ) {
            let (l, allow, deny) = lists();
            let client_ip = ClientIp::trusted_proxies(nets(&["127.0.0.0/8"]));
            prop_assume!(!client_ip_trusted(client));
            let mut lines: Vec<Vec<u8>> = junk;
            match (own_line, lines.last_mut()) {
                (false, Some(last)) => {
                    last.extend_from_slice(b", ");
                    last.extend_from_slice(&written(client));
                }
                _ => lines.push(written(client)),
            }
            let lines: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
            let req = parts("127.0.0.1:1", "/", &lines);
            prop_assert_eq!(run(Some(&l), None, &client_ip, Some(0), &req), model(&allow, &deny, client));
        }

        /// Any bytes in the header the client-IP logic reads, from any peer: no panic, and the
        /// lists judge exactly the address `ClientIp` finds (or fail closed without one).
        #[test]
        fn the_lists_judge_the_trusted_client_address(
            raw in proptest::collection::vec(hostile_line(), 0..4),
            peer in client_addr(),
            trusted_peer: bool,
        ) {
            let (l, allow, deny) = lists();
            let client_ip = ClientIp::trusted_proxies(nets(&["127.0.0.0/8", "10.0.0.0/8"]));
            let peer = if trusted_peer { IpAddr::from([127, 0, 0, 1]) } else { peer };
            let lines: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
            let req = parts(&SocketAddr::new(peer, 1).to_string(), "/", &lines);
            let want = match client_ip.client_ip(&req) {
                Ok(a) => model(&allow, &deny, a),
                Err(e) => S::KeyError(e.status().as_u16()),
            };
            prop_assert_eq!(run(Some(&l), None, &client_ip, Some(0), &req), want);
        }
    }

    fn client_ip_trusted(ip: IpAddr) -> bool {
        nets(&["127.0.0.0/8"]).iter().any(|n| n.contains(ip))
    }
}
