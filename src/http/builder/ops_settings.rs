//! The builder's settings for running in production: allow and deny lists, and shadow mode.
//! Kept apart from the limits' settings; [`OpsSettings::build`] makes the layer's
//! [`Ops`](crate::http::policy::ops::Ops) once the policy table's names are known.

use std::sync::Arc;

use super::super::access::AccessList;
use super::super::error::BuildError;
use super::super::key::AddrSource;
use super::super::policy::ops::{KeyErrorLog, KeyFmt, Ops, PolicyOps};
use super::super::policy::shadow::{Enforcement, EnforcementFlag};
use super::super::policy::stats::Counters;
use super::super::rate::backend::Backend;
use super::super::state::Backends;
use super::RateLimitLayerBuilder;

/// What the builder was told about lists and shadow mode.
pub(super) struct OpsSettings<K> {
    lists: Option<AccessList<K>>,
    policy_lists: Vec<(String, AccessList<K>)>,
    addr: Option<Box<dyn AddrSource>>,
    shadow_all: bool,
    shadow: Vec<String>,
    shadow_headers: bool,
    trace_key: Option<KeyFmt<K>>,
}

impl<K> Default for OpsSettings<K> {
    fn default() -> Self {
        OpsSettings {
            lists: None,
            policy_lists: Vec::new(),
            addr: None,
            shadow_all: false,
            shadow: Vec::new(),
            shadow_headers: false,
            trace_key: None,
        }
    }
}

impl<K> OpsSettings<K> {
    /// The running state for policies named `names` (the policy table's order), validating
    /// the lists; `extractor_addr` says whether the key extractor provides a client address.
    pub(super) fn build(self, names: &[&str], extractor_addr: bool) -> Result<Ops<K>, BuildError> {
        let networks = self.lists.as_ref().is_some_and(AccessList::has_networks)
            || self.policy_lists.iter().any(|(_, l)| l.has_networks());
        if networks && self.addr.is_none() && !extractor_addr {
            return Err(BuildError::NoClientAddr);
        }
        for name in self.policy_lists.iter().map(|(n, _)| n).chain(&self.shadow) {
            if !names.contains(&name.as_str()) {
                return Err(BuildError::UnknownPolicy(name.clone()));
            }
        }
        let lists = self.lists.map(|l| l.compile("the layer")).transpose()?;
        let mut policy_lists = Vec::with_capacity(self.policy_lists.len());
        for (name, l) in self.policy_lists {
            let compiled = Arc::new(l.compile(&format!("policy {name:?}"))?);
            policy_lists.push((name, compiled));
        }
        let policies = names
            .iter()
            .map(|name| {
                let shadow = self.shadow_all || self.shadow.iter().any(|s| s == name);
                PolicyOps {
                    name: (*name).into(),
                    // The last list given for a name wins (as with other settings).
                    lists: policy_lists
                        .iter()
                        .rev()
                        .find(|(n, _)| n == name)
                        .map(|(_, l)| Arc::clone(l)),
                    enforcement: EnforcementFlag::new(if shadow {
                        Enforcement::Shadow
                    } else {
                        Enforcement::Enforce
                    }),
                    counters: Counters::new(Some(name)),
                }
            })
            .collect();
        Ok(Ops {
            any_lists: lists.is_some() || !policy_lists.is_empty(),
            lists,
            policies,
            unmatched: Counters::new(None),
            addr: self.addr,
            shadow_headers: self.shadow_headers,
            trace_key: self.trace_key,
            key_error_log: KeyErrorLog::default(),
        })
    }
}

/// Allow and deny lists, and shadow mode: the same whichever way the builder started.
impl<B: Backend, C: Send + Sync + 'static, R> RateLimitLayerBuilder<Backends<B, C>, R> {
    /// Allow and deny lists for every request through the layer, checked before any limiter
    /// (see [`AccessList`]; deny wins over allow). Requests that match no policy are still
    /// refused by a deny rule. Calling it again replaces the lists.
    ///
    /// ```
    /// use tollgate::http::{AccessList, PeerIp, RateLimitLayer};
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .per_second(10)
    ///     .access(AccessList::new().allow_networks(["10.0.0.0/8".parse().unwrap()]))
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn access(mut self, lists: AccessList<B::Key>) -> Self {
        self.ops.lists = Some(lists);
        self
    }

    /// Allow and deny lists for the policies named `name` only, checked with the layer's
    /// (see [`access`](Self::access)); a request matching a deny rule of either is refused.
    /// [`build`](Self::build) refuses a name no policy has ([`BuildError::UnknownPolicy`]).
    ///
    /// ```
    /// use tollgate::http::{AccessList, PeerIp, RateLimitLayer};
    /// use tollgate::Quota;
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .route("login", "POST /login", Quota::per_minute(5).unwrap())
    ///     .policy_access("login", AccessList::new().allow_networks(["10.0.0.0/8".parse().unwrap()]))
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn policy_access(mut self, name: &str, lists: AccessList<B::Key>) -> Self {
        self.ops.policy_lists.push((name.to_owned(), lists));
        self
    }

    /// Where the lists' networks find the client address, when the key extractor does not
    /// key by address (an API key, [`GlobalKey`](super::super::GlobalKey)): a
    /// [`ClientIp`](super::super::ClientIp) with your trusted proxies, or
    /// [`PeerIp`](super::super::PeerIp). With `PeerIp` or `ClientIp` as the extractor, its
    /// own address is used unless this is given. Networks without any address source are
    /// refused by [`build`](Self::build) ([`BuildError::NoClientAddr`]).
    ///
    /// ```
    /// use tollgate::http::{AccessList, ClientIp, HeaderKey, HeaderName, RateLimitLayer};
    /// let layer = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
    ///     .per_second(10)
    ///     .access_addr(ClientIp::trusted_hops(1))
    ///     .access(AccessList::new().deny_networks(["192.0.2.0/24".parse().unwrap()]))
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn access_addr(mut self, source: impl AddrSource) -> Self {
        self.ops.addr = Some(Box::new(source));
        self
    }

    /// Starts every policy in shadow mode ([`Enforcement::Shadow`]): each decides and takes
    /// permits as usual, but lets every request through at once and counts what enforcing
    /// would have refused ([`RateLimitLayer::stats`](super::super::RateLimitLayer::stats)).
    /// Switch at run time with
    /// [`set_enforcement`](super::super::RateLimitLayer::set_enforcement). Allow and deny
    /// lists are not affected: a deny rule still refuses.
    ///
    /// ```
    /// use tollgate::http::{Enforcement, GlobalKey, RateLimitLayer};
    /// let layer = RateLimitLayer::builder(GlobalKey).per_second(10).shadow().build().unwrap();
    /// assert_eq!(layer.enforcement("default"), Some(Enforcement::Shadow));
    /// ```
    pub fn shadow(mut self) -> Self {
        self.ops.shadow_all = true;
        self
    }

    /// Starts the policies named `name` in shadow mode (see [`shadow`](Self::shadow)); the
    /// others enforce. [`build`](Self::build) refuses a name no policy has
    /// ([`BuildError::UnknownPolicy`]).
    ///
    /// ```
    /// use tollgate::http::{Enforcement, PeerIp, RateLimitLayer};
    /// use tollgate::Quota;
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .per_second(10)
    ///     .route("search", "/search", Quota::per_second(2).unwrap())
    ///     .shadow_policy("search")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(layer.enforcement("search"), Some(Enforcement::Shadow));
    /// assert_eq!(layer.enforcement("default"), Some(Enforcement::Enforce));
    /// ```
    pub fn shadow_policy(mut self, name: &str) -> Self {
        self.ops.shadow.push(name.to_owned());
        self
    }

    /// Whether policies in shadow send their rate-limit headers (default `false`). When on,
    /// the headers say what enforcing would say (`RateLimit: "name";r=0;t=12` on a request
    /// enforcing would refuse), without `Retry-After`, which has no meaning on a response
    /// that is not a refusal. Off by default: clients that pace themselves by the headers
    /// would already slow down for a limit that is not in force, and the limit is not
    /// announced before it is enforced.
    ///
    /// ```
    /// let layer = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey)
    ///     .per_second(10)
    ///     .shadow()
    ///     .shadow_headers(true)
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn shadow_headers(mut self, on: bool) -> Self {
        self.ops.shadow_headers = on;
        self
    }

    /// Whether the refusal events of feature `tracing` carry the request's key, as its
    /// `Debug` (default `false`). Every request a policy refuses (or, in shadow, would refuse
    /// or delay) is a debug event, target `tollgate`, message `request refused`, with the
    /// fields `policy` and `outcome` (`refused`, `would_refuse`, `would_delay`); with this on,
    /// also `key`. Off by default because keys (addresses, user ids, API keys) may be personal
    /// data or secrets: turn it on only where your logs may hold them.
    ///
    /// ```
    /// let layer = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .per_second(10)
    ///     .trace_keys(true)
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn trace_keys(mut self, on: bool) -> Self
    where
        B::Key: std::fmt::Debug,
    {
        self.ops.trace_key = on.then_some(<B::Key as std::fmt::Debug>::fmt as KeyFmt<B::Key>);
        self
    }
}
