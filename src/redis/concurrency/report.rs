//! What a [`RedisConcurrencyLimiter`](super::RedisConcurrencyLimiter) reports beyond its Redis
//! calls (those are the rate limiter's `Meter`): acquires by outcome, waits, and the permits this process
//! holds leases on, in the series the in-process concurrency limiters use
//! (`tollgate::metric_names`: `tollgate_decisions_total`, `tollgate_permits_granted_total`,
//! `tollgate_waits_total`, `tollgate_wait_seconds`, `tollgate_in_flight`), with the same
//! outcome and event labels. Feature `tracing`: a debug event per refusal, with the name,
//! never the key. Without the features it holds nothing and every call compiles to nothing.

use crate::AcquireError;

use super::super::connection::error::RedisLimitError;

pub(super) struct Report {
    #[cfg(feature = "metrics")]
    metrics: Option<Box<handles::Handles>>,
    #[cfg(feature = "tracing")]
    name: Option<Box<str>>,
}

impl Report {
    pub(super) fn new(name: Option<&str>) -> Report {
        let label = name.unwrap_or(crate::metric_names::UNNAMED);
        #[cfg(not(any(feature = "metrics", feature = "tracing")))]
        let _ = label;
        Report {
            #[cfg(feature = "metrics")]
            metrics: Some(Box::new(handles::Handles::register(label))),
            #[cfg(feature = "tracing")]
            name: Some(label.into()),
        }
    }

    /// Counts an acquire of `n` permits that ended with `r` (a failure of Redis is no
    /// decision: the `Meter` counts it by kind).
    pub(super) fn decided<T>(&self, r: &Result<T, RedisLimitError>, n: u64) {
        let outcome = match r {
            Ok(_) => crate::metric_names::OUTCOME_ALLOWED,
            Err(RedisLimitError::Limited(AcquireError::ExceedsBurst { .. })) => {
                crate::metric_names::OUTCOME_EXCEEDS_BURST
            }
            Err(RedisLimitError::Limited(_)) => crate::metric_names::OUTCOME_AT_CAPACITY,
            Err(_) => return,
        };
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.decided(outcome, n);
        }
        #[cfg(feature = "tracing")]
        if r.is_err() {
            tracing::debug!(
                target: "tollgate",
                limiter = self.name.as_deref().unwrap_or(crate::metric_names::UNNAMED),
                outcome,
                permits = n,
                "refused"
            );
        }
        #[cfg(not(any(feature = "metrics", feature = "tracing")))]
        let _ = (outcome, n);
    }

    /// A lease of `n` permits ended in this process (released, dropped).
    pub(super) fn returned(&self, n: u64) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.in_flight.decrement(n as f64);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = n;
    }

    /// An acquire about to start: it counts a wait once it sleeps.
    pub(super) fn waiting(&self) -> Wait<'_> {
        Wait {
            report: self,
            since: None,
        }
    }

    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn wait_event(&self, event: usize, waited: Option<std::time::Duration>) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.waits[event].increment(1);
            if let Some(w) = waited {
                m.wait_seconds.record(w.as_secs_f64());
            }
        }
    }
}

/// The wait events, as indexes of `Handles::waits`.
const STARTED: usize = 0;
const GRANTED: usize = 1;
const REFUSED: usize = 2;
const CANCELLED: usize = 3;

/// One acquire: a wait from its first sleep (started) to its end (granted or refused), or
/// cancelled if dropped while waiting.
pub(super) struct Wait<'a> {
    report: &'a Report,
    since: Option<tokio::time::Instant>,
}

impl Wait<'_> {
    /// The acquire is about to sleep (counted once).
    pub(super) fn sleeping(&mut self) {
        if self.since.is_none() {
            self.since = Some(tokio::time::Instant::now());
            self.report.wait_event(STARTED, None);
        }
    }

    /// The acquire of `n` permits ended with `r`: its decision, its wait if it slept, and the
    /// permits in the in-flight gauge if granted.
    pub(super) fn end<T>(mut self, r: &Result<T, RedisLimitError>, n: u64) {
        self.report.decided(r, n);
        if let Some(since) = self.since.take() {
            match r {
                Ok(_) => self.report.wait_event(GRANTED, Some(since.elapsed())),
                Err(_) => self.report.wait_event(REFUSED, None),
            }
        }
        #[cfg(feature = "metrics")]
        if let (Ok(_), Some(m)) = (r, &self.report.metrics) {
            m.in_flight.increment(n as f64);
        }
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if self.since.is_some() {
            self.report.wait_event(CANCELLED, None);
        }
    }
}

#[cfg(feature = "metrics")]
mod handles {
    use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};

    use crate::metric_names as names;

    pub(super) struct Handles {
        allowed: Counter,
        at_capacity: Counter,
        exceeds_burst: Counter,
        permits: Counter,
        pub(super) waits: [Counter; 4],
        pub(super) wait_seconds: Histogram,
        pub(super) in_flight: Gauge,
    }

    impl Handles {
        pub(super) fn register(name: &str) -> Handles {
            let name = name.to_owned();
            let decision = |o: &'static str| counter!(names::DECISIONS, names::LIMITER => name.clone(), names::OUTCOME => o);
            let wait = |e: &'static str| counter!(names::WAITS, names::LIMITER => name.clone(), names::EVENT => e);
            Handles {
                allowed: decision(names::OUTCOME_ALLOWED),
                at_capacity: decision(names::OUTCOME_AT_CAPACITY),
                exceeds_burst: decision(names::OUTCOME_EXCEEDS_BURST),
                permits: counter!(names::PERMITS, names::LIMITER => name.clone()),
                waits: [
                    wait("started"),
                    wait("granted"),
                    wait("refused"),
                    wait("cancelled"),
                ],
                wait_seconds: histogram!(names::WAIT_SECONDS, names::LIMITER => name.clone()),
                in_flight: gauge!(names::IN_FLIGHT, names::LIMITER => name),
            }
        }

        pub(super) fn decided(&self, outcome: &str, n: u64) {
            if outcome == names::OUTCOME_ALLOWED {
                self.allowed.increment(1);
                self.permits.increment(n);
            } else if outcome == names::OUTCOME_EXCEEDS_BURST {
                self.exceeds_burst.increment(1);
            } else {
                self.at_capacity.increment(1);
            }
        }
    }
}
