//! What a limiter reports to the [`metrics`](https://docs.rs/metrics) facade (feature
//! `metrics`): decisions by outcome, permits granted, waits, keys tracked and sweeps, each
//! labelled with the limiter's name; and to [`tracing`](https://docs.rs/tracing) (feature
//! `tracing`): a debug event per refusal and a span per wait. Without the features a
//! [`Meter`] holds only the name and every call compiles to nothing.
//!
//! Handles are registered once, when the limiter is built, with the recorder installed at that
//! moment (the `metrics` convention: install the exporter first); a decision then costs one
//! branch per counter when no recorder is installed, and the recorder's own increment when one
//! is.

use std::sync::Arc;
use std::time::Duration;

/// Metric names and label keys, shared by the core, the HTTP layer and the Redis backend (the
/// guide's [Operations](crate::guide::operations) page lists what each one counts).
pub mod names {
    /// Counter: decisions, labelled `limiter` and `outcome` (one of the `OUTCOME_` values).
    pub const DECISIONS: &str = "tollgate_decisions_total";
    /// Counter: permits granted (a grant of `n` adds `n`), labelled `limiter`.
    pub const PERMITS: &str = "tollgate_permits_granted_total";
    /// Counter: waits by `event` (`started`, `granted`, `refused`, `cancelled`), labelled
    /// `limiter`.
    pub const WAITS: &str = "tollgate_waits_total";
    /// Histogram: seconds a granted wait slept, labelled `limiter`.
    pub const WAIT_SECONDS: &str = "tollgate_wait_seconds";
    /// Gauge: keys a keyed limiter tracks, labelled `limiter` (set by each sweep).
    pub const KEYS: &str = "tollgate_keys";
    /// Gauge: permits held now, labelled `limiter` (the concurrency limiters: raised on every
    /// grant, lowered on every release; summed over the keys of a keyed limiter; for
    /// `RedisConcurrencyLimiter`, the leases this process holds).
    pub const IN_FLIGHT: &str = "tollgate_in_flight";
    /// Counter: sweeps run, labelled `limiter`.
    pub const SWEEPS: &str = "tollgate_sweeps_total";
    /// Counter: keys evicted by sweeps, labelled `limiter`.
    pub const EVICTED: &str = "tollgate_evicted_total";
    /// Histogram: the longest time one sweep held a shard's write lock, in seconds, labelled
    /// `limiter`.
    pub const SWEEP_PAUSE_SECONDS: &str = "tollgate_sweep_pause_seconds";

    /// Counter: requests through the HTTP layer, labelled `policy` (the policy's name, or
    /// [`HTTP_NO_POLICY`]) and `outcome`: `allowed`, `refused`, `never` (a cost above the
    /// burst), `would_refuse`,
    /// `would_delay` (shadow mode), `bypassed` (an allow list), `denied` (a deny list),
    /// `key_error` (the client's request had no usable key: a `4xx` `KeyError`),
    /// `misconfigured` (the server is set up wrongly, so no request can be keyed: a `5xx`
    /// `KeyError` such as no peer address; alert on any), `unavailable` (the backend failed),
    /// `key_cap_reached` (a new client the limiter's full key table refused: a `503`).
    /// The same counts as `RateLimitLayer::stats`.
    pub const HTTP_REQUESTS: &str = "tollgate_http_requests_total";
    /// The `policy` label of requests no policy applies to.
    pub const HTTP_NO_POLICY: &str = "none";
    /// Label key: an HTTP policy's name.
    pub const POLICY: &str = "policy";

    /// Counter: Redis script calls that got a reply, labelled `limiter`.
    pub const REDIS_REPLIES: &str = "tollgate_redis_replies_total";
    /// Counter: Redis script calls that failed, labelled `limiter` and `kind`: `timeout`;
    /// Redis could not answer (`connection`, `cluster_down`, `loading`, `try_again`,
    /// `master_down`, `read_only`, `busy`: the failure policy decides); or it answered with an
    /// error (`wrong_type`, `script`, `no_script`, `other`, `client`: a typed error).
    pub const REDIS_ERRORS: &str = "tollgate_redis_errors_total";
    /// Counter: scripts sent again after `NOSCRIPT`, labelled `limiter`.
    pub const REDIS_SCRIPT_LOADS: &str = "tollgate_redis_script_loads_total";
    /// Counter: decisions and waits the failure policy answered instead of Redis, labelled
    /// `limiter`.
    pub const REDIS_POLICY_DECISIONS: &str = "tollgate_redis_policy_decisions_total";
    /// Counter: calls the Redis limiter's denial cache refused in this process, with no
    /// round trip (`denial_cache`), labelled `limiter`.
    pub const REDIS_LOCAL_DENIALS: &str = "tollgate_redis_local_denials_total";
    /// Counter: batches the Redis limiter took from the shared state (`local_batches`),
    /// labelled `limiter`.
    pub const REDIS_BATCHES_TAKEN: &str = "tollgate_redis_batches_taken_total";
    /// Counter: unused permits of ended batches that Redis took back, labelled `limiter`.
    pub const REDIS_PERMITS_RETURNED: &str = "tollgate_redis_permits_returned_total";
    /// Counter: calls granted from a local batch with no round trip, labelled `limiter`.
    pub const REDIS_LOCAL_GRANTS: &str = "tollgate_redis_local_grants_total";
    /// Gauge: the size of the last batch taken, labelled `limiter`.
    pub const REDIS_BATCH_SIZE: &str = "tollgate_redis_batch_size";
    /// Label key: a Redis failure's kind.
    pub const KIND: &str = "kind";

    /// Label key: the limiter's name (`unnamed` when none was given).
    pub const LIMITER: &str = "limiter";
    /// Label key: a decision's outcome.
    pub const OUTCOME: &str = "outcome";
    /// Label key: a wait's event.
    pub const EVENT: &str = "event";

    /// Outcome: granted.
    pub const OUTCOME_ALLOWED: &str = "allowed";
    /// Outcome: refused for now (a retry later could succeed).
    pub const OUTCOME_DENIED: &str = "denied";
    /// Outcome: more permits than the burst, never grantable at once.
    pub const OUTCOME_EXCEEDS_BURST: &str = "exceeds_burst";
    /// Outcome: a concurrency limiter had no permit free (`AcquireError::AtCapacity`; for
    /// `RedisConcurrencyLimiter`, no lease free before the call's timeout).
    pub const OUTCOME_AT_CAPACITY: &str = "at_capacity";
    /// Outcome: refused because granting would pass the end of the limiter's time.
    pub const OUTCOME_UNREPRESENTABLE: &str = "unrepresentable";
    /// Outcome: a new key refused because a keyed limiter's key table is full (`max_keys`
    /// reached with `WhenFull::Deny`; `AcquireError::KeyCapReached`, `RefusedBy::KeyCap`):
    /// the server's capacity, not the client's traffic. Registered by keyed limiters only.
    pub const OUTCOME_KEY_CAP_REACHED: &str = "key_cap_reached";
    /// The `limiter` label of a limiter built without a name.
    pub const UNNAMED: &str = "unnamed";

    /// Every series' help text and unit, as exporters show them (Prometheus' `# HELP` and
    /// `# UNIT` lines): `(name, kind, help)`; the kind gives the unit. `describe` (feature
    /// `metrics`) hands them to a recorder.
    pub const DESCRIPTIONS: &[(&str, MetricKind, &str)] = &[
        (
            DECISIONS,
            MetricKind::Counter,
            "Decisions, by limiter and outcome (key_cap_reached: a new key refused because the key table is full; raise max_keys or add capacity).",
        ),
        (
            PERMITS,
            MetricKind::Counter,
            "Permits granted (a grant of n adds n), by limiter.",
        ),
        (
            WAITS,
            MetricKind::Counter,
            "Waits by event (started, granted, refused, cancelled), by limiter.",
        ),
        (
            WAIT_SECONDS,
            MetricKind::Seconds,
            "Seconds a granted wait slept, by limiter.",
        ),
        (
            KEYS,
            MetricKind::Gauge,
            "Keys a keyed limiter tracks (set by each sweep), by limiter.",
        ),
        (
            IN_FLIGHT,
            MetricKind::Gauge,
            "Permits a concurrency limiter holds now, by limiter.",
        ),
        (
            SWEEPS,
            MetricKind::Counter,
            "Sweeps run over a keyed limiter's table, by limiter.",
        ),
        (
            EVICTED,
            MetricKind::Counter,
            "Keys evicted by sweeps, by limiter.",
        ),
        (
            SWEEP_PAUSE_SECONDS,
            MetricKind::Seconds,
            "The longest time one sweep held a shard's write lock, in seconds, by limiter.",
        ),
        (
            HTTP_REQUESTS,
            MetricKind::Counter,
            "Requests through the HTTP layer, by policy and outcome (misconfigured: the server cannot key requests; fix it. key_cap_reached: a new client refused because the key table is full).",
        ),
        (
            REDIS_REPLIES,
            MetricKind::Counter,
            "Redis script calls that got a reply, by limiter.",
        ),
        (
            REDIS_ERRORS,
            MetricKind::Counter,
            "Redis script calls that failed, by limiter and kind.",
        ),
        (
            REDIS_SCRIPT_LOADS,
            MetricKind::Counter,
            "Scripts sent again after NOSCRIPT, by limiter.",
        ),
        (
            REDIS_POLICY_DECISIONS,
            MetricKind::Counter,
            "Decisions and waits the failure policy answered instead of Redis, by limiter.",
        ),
        (
            REDIS_LOCAL_DENIALS,
            MetricKind::Counter,
            "Calls the denial cache refused in this process with no round trip, by limiter.",
        ),
        (
            REDIS_BATCHES_TAKEN,
            MetricKind::Counter,
            "Batches of permits taken from Redis for local grants, by limiter.",
        ),
        (
            REDIS_PERMITS_RETURNED,
            MetricKind::Counter,
            "Unused permits of ended local batches given back to Redis, by limiter.",
        ),
        (
            REDIS_LOCAL_GRANTS,
            MetricKind::Counter,
            "Calls granted from a local batch with no round trip, by limiter.",
        ),
        (
            REDIS_BATCH_SIZE,
            MetricKind::Gauge,
            "The size of the last local batch taken from Redis, by limiter.",
        ),
    ];

    /// What a series is, for its description: its type and unit.
    ///
    /// ```
    /// use tollgate::metric_names::{MetricKind, DECISIONS, DESCRIPTIONS, WAIT_SECONDS};
    ///
    /// // Describing the series to an exporter of your own: the kind says which call, and unit.
    /// let kind = |series: &str| DESCRIPTIONS.iter().find(|(name, ..)| *name == series).map(|d| d.1);
    /// assert_eq!(kind(DECISIONS), Some(MetricKind::Counter));
    /// assert_eq!(kind(WAIT_SECONDS), Some(MetricKind::Seconds));
    /// ```
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum MetricKind {
        /// A counter of events (unit: a count).
        Counter,
        /// A gauge of things held (unit: a count).
        Gauge,
        /// A histogram of durations (unit: seconds).
        Seconds,
    }

    /// Describes every series in [`DESCRIPTIONS`] (help text and unit) to the recorder
    /// installed now (feature `metrics`). Every limiter and the HTTP layer call it when they
    /// are built, with their handles; call it yourself only when the recorder is installed
    /// after the limiters were built. Describing twice is harmless (the recorder keeps one
    /// description per name).
    ///
    /// ```
    /// tollgate::metric_names::describe(); // without a recorder: does nothing
    /// ```
    #[cfg(feature = "metrics")]
    pub fn describe() {
        use metrics::Unit;
        for &(name, kind, help) in DESCRIPTIONS {
            match kind {
                MetricKind::Counter => metrics::describe_counter!(name, Unit::Count, help),
                MetricKind::Gauge => metrics::describe_gauge!(name, Unit::Count, help),
                MetricKind::Seconds => metrics::describe_histogram!(name, Unit::Seconds, help),
            }
        }
    }
}

/// A decision's outcome, as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Allowed,
    Denied,
    ExceedsBurst,
    Unrepresentable,
    AtCapacity,
    KeyCapReached,
}

impl Outcome {
    /// The `outcome` label.
    #[cfg(feature = "tracing")]
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Allowed => names::OUTCOME_ALLOWED,
            Outcome::Denied => names::OUTCOME_DENIED,
            Outcome::ExceedsBurst => names::OUTCOME_EXCEEDS_BURST,
            Outcome::Unrepresentable => names::OUTCOME_UNREPRESENTABLE,
            Outcome::AtCapacity => names::OUTCOME_AT_CAPACITY,
            Outcome::KeyCapReached => names::OUTCOME_KEY_CAP_REACHED,
        }
    }

    /// The outcome of a refusal.
    pub(crate) fn of_error(e: &crate::AcquireError) -> Outcome {
        match e {
            crate::AcquireError::ExceedsBurst { .. } => Outcome::ExceedsBurst,
            crate::AcquireError::Unrepresentable { .. } => Outcome::Unrepresentable,
            crate::AcquireError::AtCapacity { .. } => Outcome::AtCapacity,
            crate::AcquireError::KeyCapReached { .. } => Outcome::KeyCapReached,
            _ => Outcome::Denied,
        }
    }

    /// The outcome a full [`Decision`](crate::Decision) reports.
    pub(crate) fn of_decision(d: &crate::Decision) -> Outcome {
        if d.allowed {
            Outcome::Allowed
        } else if d.is_key_cap_reached() {
            Outcome::KeyCapReached
        } else if d.exceeds_burst() {
            Outcome::ExceedsBurst
        } else if d.retry_after.is_none() {
            Outcome::Unrepresentable
        } else {
            Outcome::Denied
        }
    }
}

/// A wait's event, as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitEvent {
    Started,
    Granted,
    Refused,
    Cancelled,
}

/// A limiter's name and (with the feature) its registered handles.
#[derive(Clone, Default)]
pub(crate) struct Meter {
    name: Option<Arc<str>>,
    #[cfg(feature = "metrics")]
    handles: Option<Arc<handles::Handles>>,
}

impl Meter {
    /// A meter labelled `name` (or [`UNNAMED`](names::UNNAMED)), registering its handles with
    /// the recorder installed now.
    pub(crate) fn new(name: Option<Arc<str>>) -> Meter {
        Meter::of(name, false, false)
    }

    /// A keyed rate limiter's meter: it also counts `key_cap_reached`.
    pub(crate) fn keyed(name: Option<Arc<str>>) -> Meter {
        Meter::of(name, false, true)
    }

    /// A concurrency limiter's meter: its refusals are `at_capacity`, and it has an in-flight
    /// gauge (a rate limiter's meter registers neither series).
    pub(crate) fn concurrency(name: Option<Arc<str>>) -> Meter {
        Meter::of(name, true, false)
    }

    /// A keyed concurrency limiter's meter: as [`concurrency`](Meter::concurrency), and it
    /// also counts `key_cap_reached`.
    pub(crate) fn keyed_concurrency(name: Option<Arc<str>>) -> Meter {
        Meter::of(name, true, true)
    }

    fn of(name: Option<Arc<str>>, concurrency: bool, keyed: bool) -> Meter {
        #[cfg(not(feature = "metrics"))]
        let _ = (concurrency, keyed);
        Meter {
            #[cfg(feature = "metrics")]
            handles: Some(Arc::new(handles::Handles::register(
                name.as_deref().unwrap_or(names::UNNAMED),
                concurrency,
                keyed,
            ))),
            name,
        }
    }

    /// The in-flight gauge (a concurrency limiter's; a no-op handle on a rate limiter's).
    #[cfg(feature = "metrics")]
    #[inline(always)]
    pub(crate) fn in_flight(&self) -> Option<&metrics::Gauge> {
        self.handles.as_deref().map(|h| &h.in_flight)
    }

    /// The limiter's name, if it was given one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The `limiter` label: the name, or [`UNNAMED`](names::UNNAMED).
    #[cfg(feature = "tracing")]
    fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(names::UNNAMED)
    }

    /// Counts one decision on `n` permits.
    #[inline(always)]
    pub(crate) fn decided(&self, outcome: Outcome, n: u64) {
        #[cfg(feature = "metrics")]
        if let Some(h) = &self.handles {
            h.decided(outcome, n);
        }
        #[cfg(feature = "tracing")]
        if outcome != Outcome::Allowed {
            // Keys are not logged here: they may be personal data (the HTTP layer and the
            // Redis backend log theirs only when asked).
            tracing::debug!(
                target: "tollgate",
                limiter = self.label(),
                outcome = outcome.label(),
                permits = n,
                "refused"
            );
        }
        #[cfg(not(any(feature = "metrics", feature = "tracing")))]
        let _ = (outcome, n);
    }

    /// Counts a decision on `n` permits that ended with `result`.
    #[inline(always)]
    pub(crate) fn decided_result<T>(&self, result: &Result<T, crate::AcquireError>, n: u64) {
        let outcome = result
            .as_ref()
            .map_or_else(Outcome::of_error, |_| Outcome::Allowed);
        self.decided(outcome, n);
    }

    /// Counts a decision of `try_acquire` (one permit).
    #[inline(always)]
    pub(crate) fn decided_one(&self, allowed: bool) {
        let outcome = if allowed {
            Outcome::Allowed
        } else {
            Outcome::Denied
        };
        self.decided(outcome, 1);
    }

    /// Counts a wait's event; `waited` is the time slept by a granted wait.
    pub(crate) fn wait(&self, event: WaitEvent, waited: Duration) {
        #[cfg(feature = "metrics")]
        if let Some(h) = &self.handles {
            h.wait(event, waited);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (event, waited);
    }

    /// Counts a wait that ended with `result` (granted after the time slept, or refused),
    /// and its `n` permits when granted.
    pub(crate) fn wait_ended(&self, result: &Result<Duration, crate::AcquireError>, n: u64) {
        match result {
            Ok(waited) => {
                self.wait(WaitEvent::Granted, *waited);
                self.decided(Outcome::Allowed, n);
            }
            Err(e) => {
                self.wait(WaitEvent::Refused, Duration::ZERO);
                self.decided(Outcome::of_error(e), n);
            }
        }
    }

    /// A waiting call on `n` permits, about to start.
    pub(crate) fn waiting(&self, n: u64) -> WaitMeter<'_> {
        WaitMeter {
            meter: self,
            n,
            slept: false,
            done: false,
            #[cfg(feature = "tracing")]
            span: None,
        }
    }

    /// Reports one sweep: keys evicted, keys left, and its longest lock hold.
    pub(crate) fn swept(&self, evicted: usize, keys: usize, longest_pause: Duration) {
        #[cfg(feature = "metrics")]
        if let Some(h) = &self.handles {
            h.swept(evicted, keys, longest_pause);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (evicted, keys, longest_pause);
    }
}

/// One waiting call: a decision if it never slept, a wait (started, then granted, refused, or
/// cancelled by a drop) if it did.
pub(crate) struct WaitMeter<'a> {
    meter: &'a Meter,
    n: u64,
    slept: bool,
    done: bool,
    /// The wait's span, from its first sleep to its end (a drop closes it as cancelled).
    #[cfg(feature = "tracing")]
    span: Option<tracing::Span>,
}

impl WaitMeter<'_> {
    /// The call is about to sleep (counted once).
    #[inline]
    pub(crate) fn sleeping(&mut self) {
        if !self.slept {
            self.slept = true;
            self.meter.wait(WaitEvent::Started, Duration::ZERO);
            #[cfg(feature = "tracing")]
            {
                self.span = Some(tracing::debug_span!(
                    target: "tollgate",
                    "tollgate.wait",
                    limiter = self.meter.label(),
                    permits = self.n,
                    outcome = "cancelled",
                ));
            }
        }
    }

    /// The call ended with `result`.
    pub(crate) fn record_end(mut self, result: &Result<Duration, crate::AcquireError>) {
        self.done = true;
        #[cfg(feature = "tracing")]
        if let Some(span) = &self.span {
            let outcome = result
                .as_ref()
                .map_or_else(Outcome::of_error, |_| Outcome::Allowed);
            span.record("outcome", outcome.label());
        }
        if self.slept {
            self.meter.wait_ended(result, self.n);
        } else {
            self.meter.decided_result(result, self.n);
        }
    }
}

impl Drop for WaitMeter<'_> {
    fn drop(&mut self) {
        if self.slept && !self.done {
            self.meter.wait(WaitEvent::Cancelled, Duration::ZERO);
        }
    }
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter").field("name", &self.name).finish()
    }
}

#[cfg(feature = "metrics")]
mod handles {
    use std::time::Duration;

    use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};

    use super::names::*;
    use super::{Outcome, WaitEvent};

    /// One handle per series, registered once.
    pub(super) struct Handles {
        allowed: Counter,
        denied: Counter,
        exceeds_burst: Counter,
        unrepresentable: Counter,
        at_capacity: Counter,
        key_cap_reached: Counter,
        permits: Counter,
        waits: [Counter; 4],
        wait_seconds: Histogram,
        keys: Gauge,
        pub(super) in_flight: Gauge,
        sweeps: Counter,
        evicted: Counter,
        sweep_pause: Histogram,
    }

    impl Handles {
        /// The handles of a rate limiter, or (`concurrency`) of a concurrency limiter, with
        /// (`keyed`) a key cap's refusals: each registers only the series it can move, so an
        /// exporter lists no series that stays zero by construction.
        pub(super) fn register(name: &str, concurrency: bool, keyed: bool) -> Handles {
            describe();
            let name = name.to_owned();
            let decision = |outcome: &'static str| counter!(DECISIONS, LIMITER => name.clone(), OUTCOME => outcome);
            let rate = |outcome: &'static str| {
                if concurrency {
                    Counter::noop()
                } else {
                    decision(outcome)
                }
            };
            let wait =
                |event: &'static str| counter!(WAITS, LIMITER => name.clone(), EVENT => event);
            Handles {
                allowed: decision(OUTCOME_ALLOWED),
                denied: rate(OUTCOME_DENIED),
                exceeds_burst: decision(OUTCOME_EXCEEDS_BURST),
                unrepresentable: rate(OUTCOME_UNREPRESENTABLE),
                at_capacity: if concurrency {
                    decision(OUTCOME_AT_CAPACITY)
                } else {
                    Counter::noop()
                },
                key_cap_reached: if keyed {
                    decision(OUTCOME_KEY_CAP_REACHED)
                } else {
                    Counter::noop()
                },
                permits: counter!(PERMITS, LIMITER => name.clone()),
                waits: [
                    wait("started"),
                    wait("granted"),
                    wait("refused"),
                    wait("cancelled"),
                ],
                wait_seconds: histogram!(WAIT_SECONDS, LIMITER => name.clone()),
                keys: gauge!(KEYS, LIMITER => name.clone()),
                in_flight: if concurrency {
                    gauge!(IN_FLIGHT, LIMITER => name.clone())
                } else {
                    Gauge::noop()
                },
                sweeps: counter!(SWEEPS, LIMITER => name.clone()),
                evicted: counter!(EVICTED, LIMITER => name.clone()),
                sweep_pause: histogram!(SWEEP_PAUSE_SECONDS, LIMITER => name),
            }
        }

        #[inline]
        pub(super) fn decided(&self, outcome: Outcome, n: u64) {
            match outcome {
                Outcome::Allowed => {
                    self.allowed.increment(1);
                    self.permits.increment(n);
                }
                Outcome::Denied => self.denied.increment(1),
                Outcome::ExceedsBurst => self.exceeds_burst.increment(1),
                Outcome::Unrepresentable => self.unrepresentable.increment(1),
                Outcome::AtCapacity => self.at_capacity.increment(1),
                Outcome::KeyCapReached => self.key_cap_reached.increment(1),
            }
        }

        pub(super) fn wait(&self, event: WaitEvent, waited: Duration) {
            let i = match event {
                WaitEvent::Started => 0,
                WaitEvent::Granted => 1,
                WaitEvent::Refused => 2,
                WaitEvent::Cancelled => 3,
            };
            self.waits[i].increment(1);
            if event == WaitEvent::Granted {
                self.wait_seconds.record(waited.as_secs_f64());
            }
        }

        pub(super) fn swept(&self, evicted: usize, keys: usize, longest_pause: Duration) {
            self.sweeps.increment(1);
            self.evicted.increment(evicted as u64);
            self.keys.set(keys as f64);
            self.sweep_pause.record(longest_pause.as_secs_f64());
        }
    }
}
