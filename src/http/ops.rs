//! The layer's running state beside its limiters: allow and deny lists
//! ([`access`](super::access)), each policy's [`Enforcement`](super::Enforcement) switch
//! ([`shadow`](super::shadow)) and outcome counters ([`stats`](super::stats)). Indexed like
//! the policy table (routes in order, then the default), plus counters for requests no policy
//! applies to.

use std::sync::Arc;

use http::request::Parts;

use super::access::{screen, Lists, Screen};
use super::key::{AddrSource, KeyExtractor};
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
        E: KeyExtractor<Key = K>,
    {
        let policy = index.and_then(|i| self.policy(i).lists.as_deref());
        let addr = self.addr.as_deref().or_else(|| extractor.addr_source());
        screen([self.lists.as_ref(), policy], addr, extractor, limited, req)
    }
}
