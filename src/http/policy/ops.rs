//! The layer's running state beside its limiters: allow and deny lists
//! ([`access`](super::super::access)), each policy's [`Enforcement`](super::super::Enforcement)
//! switch ([`shadow`](super::shadow)) and outcome counters ([`stats`](super::stats)). Indexed
//! like the policy table (routes in order, then the default), plus counters for requests no
//! policy applies to.

use std::sync::Arc;

use http::request::Parts;

use super::super::access::{screen, Lists, Screen};
use super::super::key::{AddrSource, KeyExtractor};
use super::shadow::EnforcementFlag;
use super::stats::{Counters, Outcome};

/// One policy's running state.
pub(crate) struct PolicyOps<K> {
    /// The policy's name (as in the headers, unquoted).
    pub(crate) name: Box<str>,
    /// Shared by the policies of one name (routes sharing a limiter).
    pub(crate) lists: Option<Arc<Lists<K>>>,
    pub(crate) enforcement: EnforcementFlag,
    pub(crate) counters: Counters,
}

/// Everything beside the limiters.
pub(crate) struct Ops<K> {
    /// The layer's lists, for every request.
    pub(crate) lists: Option<Lists<K>>,
    /// Per policy, in the policy table's order.
    pub(crate) policies: Box<[PolicyOps<K>]>,
    /// Requests no policy applies to.
    pub(crate) unmatched: Counters,
    /// The client address for the lists' networks, if given to the builder (else the
    /// extractor's).
    pub(crate) addr: Option<Box<dyn AddrSource>>,
    /// Whether policies in shadow send rate-limit headers.
    pub(crate) shadow_headers: bool,
    /// How refusal events show keys (feature `tracing`): `None` unless the builder was told
    /// `trace_keys(true)`, so keys, which may be personal data, are never logged by default.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) trace_key: Option<KeyFmt<K>>,
}

/// How a key is shown in a refusal event: its `Debug`.
pub(crate) type KeyFmt<K> = fn(&K, &mut std::fmt::Formatter<'_>) -> std::fmt::Result;

/// A key shown through its [`KeyFmt`].
#[cfg(feature = "tracing")]
struct Shown<'a, K>(&'a K, KeyFmt<K>);

#[cfg(feature = "tracing")]
impl<K> std::fmt::Debug for Shown<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (self.1)(self.0, f)
    }
}

impl<K> Ops<K> {
    /// The state of the policy at a policy-table index.
    #[inline]
    pub(crate) fn policy(&self, index: usize) -> &PolicyOps<K> {
        &self.policies[index]
    }

    /// Counts what became of a request to the policy at `index` (`None`: no policy applies).
    /// Every request passes here exactly once, with its policy and outcome: the hook for a
    /// metrics recorder (the policy's name is `self.policy(i).name`).
    #[inline]
    pub(crate) fn record(&self, index: Option<usize>, outcome: Outcome) {
        let counters = match index {
            Some(i) => &self.policy(i).counters,
            None => &self.unmatched,
        };
        counters.record(outcome);
    }

    /// A request the policy at `index` refused (or, in shadow, would have): a debug event
    /// (feature `tracing`, target `tollgate`) with the policy's name and the outcome, and the
    /// key only if [`trace_key`](Self::trace_key) is set.
    #[inline]
    pub(crate) fn refused(&self, index: usize, outcome: Outcome, key: &K) {
        #[cfg(feature = "tracing")]
        {
            let policy = &*self.policy(index).name;
            match self.trace_key {
                Some(show) => tracing::debug!(
                    target: "tollgate",
                    policy,
                    outcome = outcome.label(),
                    key = ?Shown(key, show),
                    "request refused"
                ),
                None => tracing::debug!(
                    target: "tollgate",
                    policy,
                    outcome = outcome.label(),
                    "request refused"
                ),
            }
        }
        #[cfg(not(feature = "tracing"))]
        let _ = (index, outcome, key);
    }

    /// The lists' verdict on a request to the rate policy at `index` (its lists apply too),
    /// with its key when a limiter (`limited`: a rate or a concurrency policy) is to decide.
    #[inline]
    pub(crate) fn screen<E>(
        &self,
        extractor: &E,
        index: Option<usize>,
        limited: bool,
        req: &Parts,
    ) -> Screen<K>
    where
        E: KeyExtractor<Key = K> + ?Sized,
    {
        let policy = index.and_then(|i| self.policy(i).lists.as_deref());
        let addr = self.addr.as_deref().or_else(|| extractor.addr_source());
        screen([self.lists.as_ref(), policy], addr, extractor, limited, req)
    }
}
