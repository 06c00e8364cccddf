//! The layer's running state beside its limiters: allow and deny lists
//! ([`access`](super::super::access)), each policy's [`Enforcement`](super::super::Enforcement)
//! switch ([`shadow`](super::shadow)) and outcome counters ([`stats`](super::stats)). Indexed
//! like the policy table (routes in order, then the default), plus counters for requests no
//! policy applies to.

#[cfg(any(feature = "tracing", test))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
#[cfg(feature = "tracing")]
use std::time::Instant;

use http::request::Parts;
use http::StatusCode;

use super::super::access::{screen, Lists, Screen};
use super::super::key::{AddrSource, KeyError, KeyExtractor};
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
    /// Whether any list is set, the layer's or a policy's: without, a request's screening
    /// reads no policy's lists.
    pub(crate) any_lists: bool,
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
    /// Keeps the key errors' log lines few.
    pub(crate) key_error_log: KeyErrorLog,
}

/// At most one log event per this many seconds per layer and kind of key error (the server's
/// or the client's): a layer that cannot key any request must not log once per request.
#[cfg(feature = "tracing")]
const KEY_ERROR_LOG_EVERY_SECS: u64 = 60;

/// What keeps a layer's key errors visible but few in the logs: a [`Throttle`] per kind
/// (feature `tracing`), and whether the first misconfiguration was written to stderr.
pub(crate) struct KeyErrorLog {
    #[cfg(feature = "tracing")]
    since: Instant,
    #[cfg(feature = "tracing")]
    misconfigured: Throttle,
    #[cfg(feature = "tracing")]
    bad_key: Throttle,
    told: AtomicBool,
}

impl Default for KeyErrorLog {
    fn default() -> Self {
        KeyErrorLog {
            #[cfg(feature = "tracing")]
            since: Instant::now(),
            #[cfg(feature = "tracing")]
            misconfigured: Throttle::default(),
            #[cfg(feature = "tracing")]
            bad_key: Throttle::default(),
            told: AtomicBool::new(false),
        }
    }
}

impl KeyErrorLog {
    /// Whether this is the first time: true once per layer. Reads before it writes, so that a
    /// flood of errors does not bounce the flag's cache line between cores.
    fn first(&self) -> bool {
        !self.told.load(Ordering::Relaxed) && !self.told.swap(true, Ordering::Relaxed)
    }

    /// Whether to log a key error of this kind now, and how many were left out since the
    /// last one logged.
    #[cfg(feature = "tracing")]
    fn admit(&self, misconfigured: bool) -> Option<u64> {
        let throttle = if misconfigured {
            &self.misconfigured
        } else {
            &self.bad_key
        };
        let now = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        throttle.admit(now, KEY_ERROR_LOG_EVERY_SECS * 1_000_000_000)
    }
}

/// One event per period at most, counting the ones it leaves out (lock-free: the one caller
/// that moves `next` on takes the event, every other caller counts itself out).
///
/// Not the crate's own [`RateLimiter`](crate::RateLimiter), which the Redis limiter's warnings
/// use: it would report each left-out line as a refusal of its own (a debug event and a
/// metric), the very flood this is here to stop, and it cannot say how many it left out.
#[cfg(any(feature = "tracing", test))]
#[derive(Default)]
struct Throttle {
    /// When the next event may be, in nanoseconds since the layer was built (0: at once).
    next: AtomicU64,
    suppressed: AtomicU64,
}

#[cfg(any(feature = "tracing", test))]
impl Throttle {
    /// At `now`, whether to log (with how many were left out since the last event), given at
    /// most one event per `every` nanoseconds.
    fn admit(&self, now: u64, every: u64) -> Option<u64> {
        // A plain load first: under a flood almost every caller is left out, and a read keeps
        // the word's cache line shared between cores.
        let due = now >= self.next.load(Ordering::Relaxed)
            && self
                .next
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                    (now >= next).then(|| now.saturating_add(every))
                })
                .is_ok();
        if !due {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
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

    /// A request to the policy at `index` (`None`: no policy applies) without a usable key,
    /// answered with `status` (`None`: let through, [`OnKeyError::Allow`]): counted as
    /// `misconfigured` when the server is at fault, else as `key_error`, and logged (see
    /// [`KeyError`]: rate-limited events with feature `tracing`, else the first
    /// misconfiguration on stderr). Only the error's fixed reason is logged, never the request.
    ///
    /// [`OnKeyError::Allow`]: super::super::OnKeyError::Allow
    #[cold]
    pub(crate) fn key_error(&self, index: Option<usize>, e: &KeyError, status: Option<StatusCode>) {
        let misconfigured = e.is_misconfiguration();
        let outcome = if misconfigured {
            Outcome::Misconfigured
        } else {
            Outcome::KeyError
        };
        self.record(index, outcome);
        // The status answered ("none": let through).
        let answered = status.as_ref().map_or("none", StatusCode::as_str);
        let policy = index.map_or("none", |i| &*self.policy(i).name);
        #[cfg(feature = "tracing")]
        let heard = {
            let (outcome, reason) = (outcome.label(), e.reason());
            // One event shape, two levels (a tracing level is part of the callsite).
            macro_rules! event {
                ($level:ident, $message:literal) => {
                    if let Some(suppressed) = self.key_error_log.admit(misconfigured) {
                        tracing::$level!(
                            target: "tollgate",
                            policy,
                            outcome,
                            status = answered,
                            reason,
                            suppressed,
                            $message
                        );
                    }
                };
            }
            if misconfigured {
                event!(
                    error,
                    "the rate limiter cannot key requests: the server is set up wrongly"
                );
                tracing::enabled!(target: "tollgate", tracing::Level::ERROR)
            } else {
                // A warning, not an error: a client can cause it at will, so it is kept as
                // rare as the server's own; but a trusted proxy set up wrongly (one that
                // writes `unknown`) makes every client's request one, which only the log says.
                event!(warn, "a request has no usable rate-limit key");
                true
            }
        };
        #[cfg(not(feature = "tracing"))]
        let heard = !misconfigured;
        // Nobody hears the events: a layer answering every request with 500 and saying
        // nothing is worse than a library writing one line to stderr.
        if !heard && self.key_error_log.first() {
            let (action, answered) = match status {
                Some(_) => ("answered ", answered),
                None => ("let through unlimited (OnKeyError::Allow)", ""),
            };
            eprintln!(
                "tollgate: rate-limit policy \"{policy}\" cannot key requests, the server is set up wrongly: {}; such requests are {action}{answered}, counted as outcome \"misconfigured\" (said once per layer)",
                e.reason()
            );
        }
    }

    /// Whether any list applies to a request to the rate policy at `index` (the layer's, or
    /// the policy's own).
    #[inline]
    pub(crate) fn has_lists(&self, index: Option<usize>) -> bool {
        self.any_lists
            && (self.lists.is_some() || index.is_some_and(|i| self.policy(i).lists.is_some()))
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
        let addr = || self.addr.as_deref().or_else(|| extractor.addr_source());
        screen([self.lists.as_ref(), policy], addr, extractor, limited, req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_logs_once_per_period_and_counts_the_rest() {
        let t = Throttle::default();
        assert_eq!(t.admit(0, 10), Some(0));
        assert_eq!(t.admit(0, 10), None);
        assert_eq!(t.admit(9, 10), None);
        assert_eq!(t.admit(10, 10), Some(2));
        assert_eq!(t.admit(15, 10), None);
        assert_eq!(t.admit(1_000, 10), Some(1));
        assert_eq!(t.admit(1_000, 10), None);
        // Saturating at the end of time, never wrapping around.
        assert_eq!(t.admit(u64::MAX, 10), Some(1));
        assert_eq!(t.admit(u64::MAX, 10), Some(0));
    }

    #[test]
    fn the_first_misconfiguration_is_told_once() {
        let log = KeyErrorLog::default();
        assert!(log.first());
        assert!(!log.first());
        assert!(!log.first());
    }
}
