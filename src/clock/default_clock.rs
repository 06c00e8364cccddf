//! [`DefaultClock`]: the TSC where the kernel itself keeps time with it, `Instant` everywhere
//! else; chosen at runtime from a [`Probe`] of the machine.

use std::fmt;

use super::probe::{Fallback, Probe};
#[cfg(target_arch = "x86_64")]
use super::tsc::TscClock;
use super::{Clock, StdClock};
use crate::Nanos;

/// The clock limiters use unless told otherwise: the TSC where it is safe, [`StdClock`]
/// (`Instant`) everywhere else, decided when the clock is created.
///
/// The TSC is read inline (one `rdtsc`, a subtraction and a multiply, no call) and converted
/// with quanta's calibration against the OS clock, the same conversion as
/// [`QuantaClock`](crate::QuantaClock).
///
/// The TSC is used only when all of these hold (checked once per process):
/// - the target is x86_64;
/// - the CPU reports an invariant TSC (constant rate in every power state) and `rdtscp`
///   (what quanta needs to read the TSC at all);
/// - the kernel's current clocksource is `tsc`
///   (`/sys/devices/system/clocksource/clocksource0/current_clocksource` on Linux): the
///   kernel checked at boot that the cores' TSCs agree, and keeps watching. Where that file
///   cannot be read (other systems), the answer is no.
///
/// Otherwise it is `Instant`, and [`uses_tsc`](DefaultClock::uses_tsc) says so; `{:?}` says
/// why. Why the TSC is safe for GCRA at all is argued in the [design document](crate::guide::design) (section 6): a
/// reading can be up to [`TSC_MAX_SKEW`](crate::TSC_MAX_SKEW) earlier than one that
/// happened-before it on another core, which is inside the read-to-CAS window every decision
/// already has, and the sweeper allows for it ([`Clock::max_skew`]).
///
/// The kernel can demote the TSC at runtime (its clocksource watchdog); a clock created before
/// that keeps reading it. Pass [`StdClock`] to a limiter's builder to rule the TSC out.
///
/// ```
/// use tollgate::{Clock, DefaultClock, Quota, RateLimiter};
///
/// let clock = DefaultClock::new();
/// println!("default clock: {clock:?}"); // which source, or why the fallback
/// let a = clock.now();
/// assert!(clock.now() >= a);
///
/// // Passing it explicitly is the same as the default, and lets a test read the limiter's
/// // own time.
/// let limiter = RateLimiter::builder(Quota::per_second(5).unwrap())
///     .clock(clock.clone())
///     .build();
/// assert!(limiter.try_acquire());
/// ```
#[derive(Clone)]
pub struct DefaultClock {
    pub(super) choice: Choice,
}

/// What a [`DefaultClock`] reads.
#[derive(Clone)]
pub(super) enum Choice {
    #[cfg(target_arch = "x86_64")]
    Tsc(TscClock),
    Std(StdClock, Fallback),
}

impl DefaultClock {
    /// The default clock for this machine (the first call probes it; see the type's docs).
    ///
    /// Every clock of a process makes the same choice, and its
    /// [`max_skew`](Clock::max_skew) follows it:
    ///
    /// ```
    /// use tollgate::{Clock, DefaultClock, TSC_MAX_SKEW};
    ///
    /// let clock = DefaultClock::new();
    /// assert_eq!(clock.uses_tsc(), DefaultClock::new().uses_tsc());
    /// let skew = if clock.uses_tsc() { TSC_MAX_SKEW } else { 0 };
    /// assert_eq!(clock.max_skew(), skew);
    /// ```
    pub fn new() -> DefaultClock {
        DefaultClock::from_probe(Probe::system())
    }

    /// The clock a machine with these facts gets. Tests use it to force the fallback.
    pub(crate) fn from_probe(probe: &Probe) -> DefaultClock {
        let choice = match probe.verdict().and_then(|()| tsc()) {
            #[cfg(target_arch = "x86_64")]
            Ok(tsc) => Choice::Tsc(tsc),
            #[cfg(not(target_arch = "x86_64"))]
            Ok(never) => match never {},
            Err(why) => Choice::Std(StdClock::new(), why),
        };
        DefaultClock { choice }
    }

    /// Whether this clock reads the TSC (else it reads `Instant`).
    ///
    /// ```
    /// let clock = tollgate::DefaultClock::new();
    /// if !clock.uses_tsc() {
    ///     println!("no usable TSC here: {clock:?}");
    /// }
    /// ```
    pub fn uses_tsc(&self) -> bool {
        match self.choice {
            #[cfg(target_arch = "x86_64")]
            Choice::Tsc(_) => true,
            Choice::Std(..) => false,
        }
    }
}

impl Default for DefaultClock {
    fn default() -> Self {
        DefaultClock::new()
    }
}

impl Clock for DefaultClock {
    #[inline]
    fn now(&self) -> Nanos {
        match &self.choice {
            #[cfg(target_arch = "x86_64")]
            Choice::Tsc(c) => c.now(),
            Choice::Std(c, _) => c.now(),
        }
    }

    fn max_skew(&self) -> Nanos {
        match &self.choice {
            #[cfg(target_arch = "x86_64")]
            Choice::Tsc(c) => c.max_skew(),
            Choice::Std(c, _) => c.max_skew(),
        }
    }
}

impl fmt::Debug for DefaultClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.choice {
            #[cfg(target_arch = "x86_64")]
            Choice::Tsc(_) => f.write_str("DefaultClock(TSC)"),
            Choice::Std(_, why) => write!(f, "DefaultClock(Instant: {why})"),
        }
    }
}

/// The TSC clock, once the probe said yes.
#[cfg(target_arch = "x86_64")]
fn tsc() -> Result<TscClock, Fallback> {
    TscClock::new().ok_or(Fallback::NotCalibrated)
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc() -> Result<std::convert::Infallible, Fallback> {
    Err(Fallback::NotX86_64)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::probe::CLOCKSOURCE;

    fn usable() -> Probe {
        Probe {
            x86_64: true,
            invariant_tsc: true,
            rdtscp: true,
            clocksource: Some("tsc".into()),
        }
    }

    #[test]
    fn tsc_only_when_every_condition_holds() {
        assert_eq!(usable().verdict(), Ok(()));
        // With every fact in favour, the TSC is used wherever quanta's calibration reads it.
        assert_eq!(
            DefaultClock::from_probe(&usable()).uses_tsc(),
            tsc().is_ok(),
            "{:?}",
            DefaultClock::from_probe(&usable())
        );
        let cases = [
            (
                Probe {
                    x86_64: false,
                    ..usable()
                },
                Fallback::NotX86_64,
            ),
            (
                Probe {
                    invariant_tsc: false,
                    ..usable()
                },
                Fallback::NoInvariantTsc,
            ),
            (
                Probe {
                    rdtscp: false,
                    ..usable()
                },
                Fallback::NoRdtscp,
            ),
            (
                Probe {
                    clocksource: Some("kvm-clock".into()),
                    ..usable()
                },
                Fallback::Clocksource("kvm-clock".into()),
            ),
            (
                Probe {
                    clocksource: None,
                    ..usable()
                },
                Fallback::UnknownClocksource,
            ),
        ];
        for (probe, why) in cases {
            assert_eq!(probe.verdict(), Err(why.clone()));
            let clock = DefaultClock::from_probe(&probe);
            assert!(!clock.uses_tsc(), "{probe:?}");
            assert_eq!(clock.max_skew(), 0);
            assert_eq!(
                format!("{clock:?}"),
                format!("DefaultClock(Instant: {why})")
            );
        }
    }

    #[test]
    fn the_fallback_keeps_time() {
        let clock = DefaultClock::from_probe(&Probe {
            clocksource: Some("hpet".into()),
            ..usable()
        });
        crate::clock::tests::assert_counts_a_sleep(&clock, 2, 2);
    }

    #[test]
    fn this_machine_probe_is_consistent() {
        let probe = Probe::system();
        assert_eq!(probe.x86_64, cfg!(target_arch = "x86_64"));
        assert_eq!(DefaultClock::new().uses_tsc(), probe.verdict().is_ok());
        if let Ok(s) = std::fs::read_to_string(CLOCKSOURCE) {
            assert_eq!(probe.clocksource.as_deref(), Some(s.trim()));
        }
    }
}
