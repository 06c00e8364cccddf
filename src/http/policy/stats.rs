//! What happened to each request, per policy: one [`Outcome`] per request that reaches a
//! policy (or the layer's lists), counted in the policy's [`Counters`] and read as
//! [`PolicyStats`] through [`RateLimitLayer::stats`](super::super::RateLimitLayer::stats).
//!
//! [`Counters::record`] is the one place every outcome passes through, so a metrics recorder
//! hooks in there, with the policy's name beside it.

// Independent monotonic counters, read only for monitoring: no protocol between them, so
// they use std's atomics with `Relaxed` ordering. The loom facade (`crate::sync`) is for the
// core's lock-free protocols; src/http may use only the crate's public API anyway.
use std::sync::atomic::{AtomicU64, Ordering};

/// What the layer did with one request, as the policy that applied to it saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The limiter allowed it (enforced or in shadow), or no policy applied.
    Allowed,
    /// The limiter refused it for now, and the policy enforces: `429`.
    Refused,
    /// The limiter refused it, but the policy is in shadow: it went through.
    WouldRefuse,
    /// The limiter would have made it wait (shaping), but the policy is in shadow: it went
    /// through at once.
    WouldDelay,
    /// An allow list matched: no limiter ran.
    Bypassed,
    /// A deny list matched: `403`, no limiter ran.
    Denied,
    /// No key (or no client address for a deny list) through the client's fault (a `4xx`
    /// [`KeyError`](super::super::KeyError)): answered per
    /// [`OnKeyError`](super::super::OnKeyError).
    KeyError,
    /// The backend failed (Redis down): `503` when enforcing, through in shadow.
    Unavailable,
    /// The request can never pass (its cost is above the burst), and the policy enforces:
    /// the `never_status` (`429` by default, without `Retry-After`).
    Never,
    /// No key because the server is set up wrongly (a `5xx`
    /// [`KeyError`](super::super::KeyError), such as no peer address): answered per
    /// [`OnKeyError`](super::super::OnKeyError), and logged.
    Misconfigured,
    /// A new key the limiter's full key table refused (`Decision::refused_by` is
    /// `RefusedBy::KeyCap`): the server's capacity, not the client's traffic. `503` with
    /// `Retry-After` when enforcing, through in shadow.
    KeyCapReached,
}

impl Outcome {
    /// Every outcome, in the order of [`Outcome::label`]'s labels.
    #[cfg(any(feature = "metrics", test))]
    const ALL: [Outcome; 11] = [
        Outcome::Allowed,
        Outcome::Refused,
        Outcome::WouldRefuse,
        Outcome::WouldDelay,
        Outcome::Bypassed,
        Outcome::Denied,
        Outcome::KeyError,
        Outcome::Unavailable,
        Outcome::Never,
        Outcome::Misconfigured,
        Outcome::KeyCapReached,
    ];

    /// The `outcome` label of `tollgate_http_requests_total` (and of refusal events).
    #[cfg(any(feature = "metrics", feature = "tracing"))]
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Refused => "refused",
            Outcome::WouldRefuse => "would_refuse",
            Outcome::WouldDelay => "would_delay",
            Outcome::Bypassed => "bypassed",
            Outcome::Denied => "denied",
            Outcome::KeyError => "key_error",
            Outcome::Unavailable => "unavailable",
            Outcome::Never => "never",
            Outcome::Misconfigured => "misconfigured",
            Outcome::KeyCapReached => "key_cap_reached",
        }
    }
}

/// The counters of one policy (and one for requests no policy applies to).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Feature `metrics`: the same counts as `tollgate_http_requests_total{policy, outcome}`,
    /// one handle per outcome, registered when the layer is built.
    #[cfg(feature = "metrics")]
    metrics: Option<Box<[metrics::Counter; 11]>>,
    allowed: AtomicU64,
    refused: AtomicU64,
    would_refuse: AtomicU64,
    would_delay: AtomicU64,
    bypassed: AtomicU64,
    denied: AtomicU64,
    key_errors: AtomicU64,
    unavailable: AtomicU64,
    never: AtomicU64,
    misconfigured: AtomicU64,
    key_cap_reached: AtomicU64,
}

impl Counters {
    /// Counters for the policy named `policy` (`None`: requests no policy applies to), also
    /// reported to the `metrics` recorder installed now (feature `metrics`).
    pub(crate) fn new(policy: Option<&str>) -> Counters {
        #[cfg(feature = "metrics")]
        {
            use crate::metric_names as names;
            let policy = policy.unwrap_or(names::HTTP_NO_POLICY).to_owned();
            let handles = Outcome::ALL.map(|o| {
                metrics::counter!(
                    names::HTTP_REQUESTS,
                    names::POLICY => policy.clone(),
                    names::OUTCOME => o.label()
                )
            });
            Counters {
                metrics: Some(Box::new(handles)),
                ..Counters::default()
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = policy;
            Counters::default()
        }
    }

    /// Counts one request's outcome.
    #[inline]
    pub(crate) fn record(&self, outcome: Outcome) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m[outcome as usize].increment(1);
        }
        let counter = match outcome {
            Outcome::Allowed => &self.allowed,
            Outcome::Refused => &self.refused,
            Outcome::WouldRefuse => &self.would_refuse,
            Outcome::WouldDelay => &self.would_delay,
            Outcome::Bypassed => &self.bypassed,
            Outcome::Denied => &self.denied,
            Outcome::KeyError => &self.key_errors,
            Outcome::Unavailable => &self.unavailable,
            Outcome::Never => &self.never,
            Outcome::Misconfigured => &self.misconfigured,
            Outcome::KeyCapReached => &self.key_cap_reached,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot (each counter read once; they may be mid-update relative to each other).
    pub(crate) fn snapshot(&self) -> PolicyStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PolicyStats {
            allowed: get(&self.allowed),
            refused: get(&self.refused),
            would_refuse: get(&self.would_refuse),
            would_delay: get(&self.would_delay),
            bypassed: get(&self.bypassed),
            denied: get(&self.denied),
            key_errors: get(&self.key_errors),
            unavailable: get(&self.unavailable),
            never: get(&self.never),
            misconfigured: get(&self.misconfigured),
            key_cap_reached: get(&self.key_cap_reached),
        }
    }
}

/// How many requests of a policy ended which way, since the layer was built: read with
/// [`RateLimitLayer::stats`](super::super::RateLimitLayer::stats) (and
/// [`unmatched_stats`](super::super::RateLimitLayer::unmatched_stats) for requests no policy
/// applies to). Each request counts once. Counters only grow (wrapping after 2^64).
///
/// During a shadow rollout, `would_refuse` (and with shaping `would_delay`) is what
/// enforcing would have changed: see [`Enforcement`](super::super::Enforcement).
///
/// ```
/// use tollgate::http::{GlobalKey, PolicyStats, RateLimitLayer};
///
/// let layer = RateLimitLayer::builder(GlobalKey).per_second(5).build().unwrap();
/// let stats: PolicyStats = layer.stats("default").unwrap();
/// assert_eq!(stats, PolicyStats::default()); // nothing seen yet
/// assert_eq!(stats.total(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PolicyStats {
    /// Allowed by the limiter (enforcing or in shadow). For
    /// [`unmatched_stats`](super::super::RateLimitLayer::unmatched_stats): requests that passed
    /// the lists, unlimited.
    pub allowed: u64,
    /// Refused by the limiter for now while enforcing: `429` with `Retry-After`, a gRPC
    /// `RESOURCE_EXHAUSTED`.
    pub refused: u64,
    /// Refused by the limiter while in shadow: let through; enforcing would have refused
    /// them.
    pub would_refuse: u64,
    /// In shadow with [shaping](super::super::RateLimitLayerBuilder::shape): let through at once;
    /// enforcing would have made them wait (at most the maximum delay).
    pub would_delay: u64,
    /// Matched an allow list: no limiter ran.
    pub bypassed: u64,
    /// Matched a deny list: `403`, no limiter ran.
    pub denied: u64,
    /// Had no usable key (or no client address for a deny list) through the client's fault (a
    /// `4xx` [`KeyError`](super::super::KeyError): a missing key header, a forwarding entry
    /// that is not an address): answered per [`OnKeyError`](super::super::OnKeyError).
    pub key_errors: u64,
    /// The limiter could not decide (a Redis failure): `503` while enforcing, let through
    /// in shadow.
    pub unavailable: u64,
    /// Could never pass (a cost above the burst) while enforcing: the
    /// [`never_status`](super::super::RateLimitLayerBuilder::never_status), without `Retry-After`.
    pub never: u64,
    /// Had no usable key because the server is set up wrongly (a `5xx`
    /// [`KeyError`](super::super::KeyError), such as a `PeerIp` layer served without
    /// `ConnectInfo`): answered per [`OnKeyError`](super::super::OnKeyError) (`500` by
    /// default), and logged. Anything above 0 needs a fix on the server.
    pub misconfigured: u64,
    /// New keys the limiter's full key table refused (its
    /// [`max_keys`](crate::KeyedRateLimiterBuilder::max_keys) reached with
    /// [`WhenFull::Deny`](crate::WhenFull::Deny)): `503`
    /// with `Retry-After` (a gRPC `UNAVAILABLE`) while enforcing, let through in shadow. The
    /// server's capacity, not the clients' traffic: anything above 0 means the table is too
    /// small for the clients it serves now.
    pub key_cap_reached: u64,
}

impl PolicyStats {
    /// Every request counted.
    ///
    /// ```
    /// let s = tollgate::http::PolicyStats::default();
    /// assert_eq!(s.total(), 0);
    /// ```
    #[must_use]
    pub fn total(&self) -> u64 {
        [
            self.allowed,
            self.refused,
            self.would_refuse,
            self.would_delay,
            self.bypassed,
            self.denied,
            self.key_errors,
            self.unavailable,
            self.never,
            self.misconfigured,
            self.key_cap_reached,
        ]
        .iter()
        .fold(0u64, |sum, n| sum.wrapping_add(*n))
    }

    /// Adds another policy's counts (for policies sharing a name).
    pub(crate) fn add(mut self, o: PolicyStats) -> PolicyStats {
        self.allowed = self.allowed.wrapping_add(o.allowed);
        self.refused = self.refused.wrapping_add(o.refused);
        self.would_refuse = self.would_refuse.wrapping_add(o.would_refuse);
        self.would_delay = self.would_delay.wrapping_add(o.would_delay);
        self.bypassed = self.bypassed.wrapping_add(o.bypassed);
        self.denied = self.denied.wrapping_add(o.denied);
        self.key_errors = self.key_errors.wrapping_add(o.key_errors);
        self.unavailable = self.unavailable.wrapping_add(o.unavailable);
        self.never = self.never.wrapping_add(o.never);
        self.misconfigured = self.misconfigured.wrapping_add(o.misconfigured);
        self.key_cap_reached = self.key_cap_reached.wrapping_add(o.key_cap_reached);
        self
    }
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "metrics")]
    #[test]
    fn metric_handles_are_indexed_by_outcome() {
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i, "{o:?}");
        }
    }

    use super::*;

    #[test]
    fn each_outcome_counts_in_its_own_field() {
        for (i, o) in Outcome::ALL.iter().enumerate() {
            let c = Counters::default();
            for _ in 0..=i {
                c.record(*o);
            }
            let s = c.snapshot();
            let fields = [
                s.allowed,
                s.refused,
                s.would_refuse,
                s.would_delay,
                s.bypassed,
                s.denied,
                s.key_errors,
                s.unavailable,
                s.never,
                s.misconfigured,
                s.key_cap_reached,
            ];
            let want: Vec<u64> = (0..Outcome::ALL.len())
                .map(|j| if j == i { i as u64 + 1 } else { 0 })
                .collect();
            assert_eq!(fields.to_vec(), want, "{o:?}");
            assert_eq!(s.total(), i as u64 + 1);
            assert_eq!(s.add(s).total(), 2 * (i as u64 + 1));
        }
    }
}
