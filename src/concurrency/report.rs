//! What an acquire of a concurrency limiter reports to its [`Meter`]: the decision
//! (`allowed`, `at_capacity`, `exceeds_burst`), the permits granted in the in-flight gauge
//! until they are released, and, for a call that queued, its wait (the rate limiters' wait
//! events). Without the features it is the permits unchanged.

use crate::concurrency::permit::Held;
use crate::decision::AcquireError;
use crate::meter::{Meter, WaitMeter};

/// Counts a non-waiting acquire of `n` permits that ended with `r`.
#[inline(always)]
pub(crate) fn decided(
    meter: &Meter,
    r: Result<Held, AcquireError>,
    n: u64,
) -> Result<Held, AcquireError> {
    meter.decided_result(&r, n);
    counted(meter, r)
}

/// The granted permits, counted in the meter's in-flight gauge.
#[inline(always)]
fn counted(meter: &Meter, r: Result<Held, AcquireError>) -> Result<Held, AcquireError> {
    #[cfg(feature = "metrics")]
    let r = r.map(|held| held.counted_in(meter.in_flight()));
    #[cfg(not(feature = "metrics"))]
    let _ = meter;
    r
}

/// A waiting acquire: a decision if it never queued, a wait (started, then granted, refused or
/// cancelled by a drop) if it did.
pub(crate) struct WaitReport<'a> {
    meter: &'a Meter,
    wait: WaitMeter<'a>,
    /// When it queued (the wait's time, for the histogram of time waited).
    #[cfg(feature = "metrics")]
    since: Option<std::time::Instant>,
}

impl<'a> WaitReport<'a> {
    /// An acquire of `n` permits, about to start.
    pub(crate) fn new(meter: &'a Meter, n: u64) -> WaitReport<'a> {
        WaitReport {
            meter,
            wait: meter.waiting(n),
            #[cfg(feature = "metrics")]
            since: None,
        }
    }

    /// The call queued and is about to wait.
    pub(crate) fn queued(&mut self) {
        #[cfg(feature = "metrics")]
        {
            self.since = Some(std::time::Instant::now());
        }
        self.wait.sleeping();
    }

    /// The call ended with `r`.
    pub(crate) fn end(self, r: Result<Held, AcquireError>) -> Result<Held, AcquireError> {
        #[cfg(feature = "metrics")]
        let waited = self.since.map(|t| t.elapsed()).unwrap_or_default();
        #[cfg(not(feature = "metrics"))]
        let waited = std::time::Duration::ZERO;
        let timed = r.as_ref().map(|_| waited).map_err(|e| *e);
        let meter = self.meter;
        self.wait.record_end(&timed);
        counted(meter, r)
    }
}
