//! What a Redis limiter reports beyond its decisions (feature `metrics`: the series in
//! `tollgate::metric_names`; feature `tracing`: failures as warnings, at most one a second per
//! limiter, so an outage cannot flood the logs). Without the features only the counters of
//! `stats()` remain.

use std::sync::atomic::{AtomicU64, Ordering};

use super::failure::{Failure, ServerErrorKind, UnavailableKind};

/// The counters behind `RedisRateLimiter::stats` (and `RedisConcurrencyLimiter::stats`), and the
/// same events reported to `metrics` and `tracing`.
#[derive(Default)]
pub(crate) struct Meter {
    pub(crate) replies: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) script_loads: AtomicU64,
    pub(crate) policy_decisions: AtomicU64,
    #[cfg(feature = "metrics")]
    metrics: Option<Box<handles::Handles>>,
    #[cfg(feature = "tracing")]
    warn: Option<Box<Warn>>,
}

/// The name to log failures under, and the crate's own limiter that keeps them to one a
/// second.
#[cfg(feature = "tracing")]
struct Warn {
    name: String,
    limiter: crate::RateLimiter,
    /// Whether refusal events carry the key (`RedisRateLimiterBuilder::trace_keys`).
    trace_keys: bool,
}

impl Meter {
    /// Counters for the limiter named `name` (`None`: unnamed), registering its series with
    /// the `metrics` recorder installed now.
    pub(crate) fn new(name: Option<&str>, trace_keys: bool) -> Meter {
        let label = name.unwrap_or(crate::metric_names::UNNAMED);
        #[cfg(not(any(feature = "metrics", feature = "tracing")))]
        let _ = label;
        #[cfg(not(feature = "tracing"))]
        let _ = trace_keys;
        Meter {
            #[cfg(feature = "metrics")]
            metrics: Some(Box::new(handles::Handles::register(label))),
            #[cfg(feature = "tracing")]
            warn: Some(Box::new(Warn {
                name: label.to_owned(),
                limiter: crate::RateLimiter::builder(
                    crate::Quota::per_second(1).expect("1 per second is a valid quota"),
                )
                .build(),
                trace_keys,
            })),
            ..Meter::default()
        }
    }

    /// A script call got a reply.
    #[inline]
    pub(crate) fn reply(&self) {
        self.replies.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.replies.increment(1);
        }
    }

    /// A script call failed with `failure`.
    pub(crate) fn failed(&self, failure: &Failure) {
        let counter = match failure {
            Failure::Timeout => &self.timeouts,
            _ => &self.errors,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.failed(failure);
        }
        #[cfg(feature = "tracing")]
        if let Some(w) = &self.warn {
            if w.limiter.try_acquire() {
                tracing::warn!(
                    target: "tollgate",
                    limiter = %w.name,
                    kind = kind_label(failure),
                    error = ?failure,
                    "a Redis call failed"
                );
            }
        }
    }

    /// A decision on `n` permits of `key` that refused (feature `tracing`): a debug event with
    /// the limiter's name and the outcome, and the key only if the builder was told
    /// `trace_keys(true)` (keys may be personal data).
    pub(crate) fn refused(&self, key: &str, n: u64, decision: &crate::Decision) {
        #[cfg(feature = "tracing")]
        if let Some(w) = &self.warn {
            let outcome = if decision.exceeds_burst() {
                crate::metric_names::OUTCOME_EXCEEDS_BURST
            } else {
                crate::metric_names::OUTCOME_DENIED
            };
            if w.trace_keys {
                tracing::debug!(
                    target: "tollgate",
                    limiter = %w.name,
                    outcome,
                    permits = n,
                    key,
                    "refused"
                );
            } else {
                tracing::debug!(
                    target: "tollgate",
                    limiter = %w.name,
                    outcome,
                    permits = n,
                    "refused"
                );
            }
        }
        #[cfg(not(feature = "tracing"))]
        let _ = (key, n, decision);
    }

    /// A script was sent again after `NOSCRIPT`.
    pub(crate) fn script_loaded(&self) {
        self.script_loads.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.script_loads.increment(1);
        }
    }

    /// The failure policy answered instead of Redis.
    pub(crate) fn policy_decided(&self) {
        self.policy_decisions.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.policy_decisions.increment(1);
        }
    }

    /// A cached denial answered a call in this process (the count of `stats()` lives with the
    /// cache; this reports it to `metrics`).
    pub(crate) fn local_denial(&self) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.local_denials.increment(1);
        }
    }

    /// A local batch of `size` permits was taken (its counts in `stats()` live with the
    /// batches; this reports them to `metrics`).
    pub(crate) fn batch_taken(&self, size: u64) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.batches_taken.increment(1);
            // A gauge holds an f64: exact for any batch (at most 2^51 permits).
            m.batch_size.set(size as f64);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = size;
    }

    /// Redis took back `n` unused permits of an ended batch.
    pub(crate) fn permits_returned(&self, n: u64) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.permits_returned.increment(n);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = n;
    }

    /// A call was granted from a local batch.
    pub(crate) fn local_grant(&self) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.local_grants.increment(1);
        }
    }

    /// Counts one event on a counter of `stats()` kept elsewhere.
    pub(crate) fn bump(counter: &AtomicU64) {
        Meter::add(counter, 1);
    }

    /// Adds `n` to a counter of this kind.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A counter's value now.
    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// The `kind` label of a failure: `timeout`, or the kind of an unavailable or server error.
#[cfg(any(feature = "metrics", feature = "tracing"))]
fn kind_label(failure: &Failure) -> &'static str {
    match failure {
        Failure::Timeout => "timeout",
        Failure::Unavailable(e) => unavailable_label(e.kind()),
        Failure::Server(e) => server_label(e.kind()),
    }
}

#[cfg(any(feature = "metrics", feature = "tracing"))]
fn unavailable_label(kind: UnavailableKind) -> &'static str {
    match kind {
        UnavailableKind::Connection => "connection",
        UnavailableKind::ClusterDown => "cluster_down",
        UnavailableKind::Loading => "loading",
        UnavailableKind::TryAgain => "try_again",
        UnavailableKind::MasterDown => "master_down",
        UnavailableKind::ReadOnly => "read_only",
        UnavailableKind::Busy => "busy",
    }
}

#[cfg(any(feature = "metrics", feature = "tracing"))]
fn server_label(kind: ServerErrorKind) -> &'static str {
    match kind {
        ServerErrorKind::WrongType => "wrong_type",
        ServerErrorKind::Script => "script",
        ServerErrorKind::NoScript => "no_script",
        ServerErrorKind::Other => "other",
        ServerErrorKind::Client => "client",
    }
}

#[cfg(not(any(feature = "metrics", feature = "tracing")))]
const _: fn(UnavailableKind, ServerErrorKind) = |_, _| {};

#[cfg(feature = "metrics")]
mod handles {
    use metrics::{counter, gauge, Counter, Gauge};

    use super::super::failure::Failure;
    use super::kind_label;
    use crate::metric_names as names;

    pub(super) struct Handles {
        pub(super) replies: Counter,
        pub(super) script_loads: Counter,
        pub(super) policy_decisions: Counter,
        pub(super) local_denials: Counter,
        pub(super) batches_taken: Counter,
        pub(super) permits_returned: Counter,
        pub(super) local_grants: Counter,
        pub(super) batch_size: Gauge,
        /// `tollgate_redis_errors_total` by kind, registered on first use of each kind
        /// against the recorder of the build (kept so tests with a local recorder see them).
        errors: Vec<(&'static str, Counter)>,
    }

    impl Handles {
        pub(super) fn register(name: &str) -> Handles {
            let name = name.to_owned();
            names::describe();
            let kinds = [
                "timeout",
                "connection",
                "cluster_down",
                "loading",
                "try_again",
                "master_down",
                "read_only",
                "busy",
                "wrong_type",
                "script",
                "no_script",
                "other",
                "client",
            ];
            // The counters but the errors' carry only the limiter's label.
            let counter = |metric: &'static str| counter!(metric, names::LIMITER => name.clone());
            Handles {
                replies: counter(names::REDIS_REPLIES),
                script_loads: counter(names::REDIS_SCRIPT_LOADS),
                policy_decisions: counter(names::REDIS_POLICY_DECISIONS),
                local_denials: counter(names::REDIS_LOCAL_DENIALS),
                batches_taken: counter(names::REDIS_BATCHES_TAKEN),
                permits_returned: counter(names::REDIS_PERMITS_RETURNED),
                local_grants: counter(names::REDIS_LOCAL_GRANTS),
                batch_size: gauge!(names::REDIS_BATCH_SIZE, names::LIMITER => name.clone()),
                errors: kinds
                    .into_iter()
                    .map(|k| {
                        let c = counter!(
                            names::REDIS_ERRORS,
                            names::LIMITER => name.clone(),
                            names::KIND => k
                        );
                        (k, c)
                    })
                    .collect(),
            }
        }

        pub(super) fn failed(&self, failure: &Failure) {
            let kind = kind_label(failure);
            if let Some((_, c)) = self.errors.iter().find(|(k, _)| *k == kind) {
                c.increment(1);
            }
        }
    }
}
