//! What the default clock's choice is made from: a [`Probe`] of the machine (the CPU's TSC
//! features and the kernel's clocksource), its verdict, and the [`Fallback`] reason when the
//! TSC may not be used. `default_clock.rs` makes the choice; the TSC's own tests ask the probe
//! whether there is a TSC to test.

use std::fmt;
use std::sync::OnceLock;

/// Why a [`DefaultClock`](super::DefaultClock) reads `Instant` instead of the TSC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fallback {
    NotX86_64,
    NoInvariantTsc,
    NoRdtscp,
    /// The kernel keeps time with another clocksource (named), e.g. after finding the cores'
    /// TSCs out of step.
    Clocksource(String),
    /// The kernel's clocksource could not be read (not Linux, or no sysfs).
    UnknownClocksource,
    /// quanta's calibrated clock does not read the TSC (so its scale does not apply).
    #[cfg(target_arch = "x86_64")]
    NotCalibrated,
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::NotX86_64 => f.write_str("not x86_64"),
            Fallback::NoInvariantTsc => f.write_str("the CPU reports no invariant TSC"),
            Fallback::NoRdtscp => f.write_str("the CPU reports no rdtscp"),
            Fallback::Clocksource(s) => write!(f, "the kernel's clocksource is {s}, not tsc"),
            Fallback::UnknownClocksource => f.write_str("the kernel's clocksource is unknown"),
            #[cfg(target_arch = "x86_64")]
            Fallback::NotCalibrated => f.write_str("quanta does not read the TSC"),
        }
    }
}

/// The facts the choice is made from. [`Probe::system`] gathers them once per process; tests
/// build their own to force either outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) x86_64: bool,
    pub(crate) invariant_tsc: bool,
    pub(crate) rdtscp: bool,
    /// The kernel's current clocksource, if it could be read.
    pub(crate) clocksource: Option<String>,
}

/// Where Linux names the clocksource it keeps time with.
pub(super) const CLOCKSOURCE: &str =
    "/sys/devices/system/clocksource/clocksource0/current_clocksource";

impl Probe {
    /// This machine's facts, probed on first use (a CPUID and one small file read).
    pub(crate) fn system() -> &'static Probe {
        static PROBE: OnceLock<Probe> = OnceLock::new();
        PROBE.get_or_init(|| {
            let (invariant_tsc, rdtscp) = cpu_tsc_features();
            Probe {
                x86_64: cfg!(target_arch = "x86_64"),
                invariant_tsc,
                rdtscp,
                clocksource: std::fs::read_to_string(CLOCKSOURCE)
                    .ok()
                    .and_then(|s| parse_clocksource(&s)),
            }
        })
    }

    /// `Ok` if the TSC may be the default clock, else why not (the first failing condition).
    pub(crate) fn verdict(&self) -> Result<(), Fallback> {
        if !self.x86_64 {
            return Err(Fallback::NotX86_64);
        }
        if !self.invariant_tsc {
            return Err(Fallback::NoInvariantTsc);
        }
        if !self.rdtscp {
            return Err(Fallback::NoRdtscp);
        }
        match self.clocksource.as_deref() {
            Some("tsc") => Ok(()),
            Some(other) => Err(Fallback::Clocksource(other.to_string())),
            None => Err(Fallback::UnknownClocksource),
        }
    }
}

/// The sysfs file's content: one name and a newline. `None` if empty.
fn parse_clocksource(content: &str) -> Option<String> {
    let name = content.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// (invariant TSC, rdtscp) from CPUID: leaf 0x8000_0007 EDX bit 8 and leaf 0x8000_0001 EDX
/// bit 27, read through raw-cpuid (which checks the leaves exist).
#[cfg(target_arch = "x86_64")]
fn cpu_tsc_features() -> (bool, bool) {
    let cpuid = raw_cpuid::CpuId::new();
    let invariant = cpuid
        .get_advanced_power_mgmt_info()
        .is_some_and(|apm| apm.has_invariant_tsc());
    let rdtscp = cpuid
        .get_extended_processor_and_feature_identifiers()
        .is_some_and(|f| f.has_rdtscp());
    (invariant, rdtscp)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_tsc_features() -> (bool, bool) {
    (false, false)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn clocksource_file_parsing() {
        assert_eq!(parse_clocksource("tsc\n").as_deref(), Some("tsc"));
        assert_eq!(
            parse_clocksource(" kvm-clock \n").as_deref(),
            Some("kvm-clock")
        );
        assert_eq!(parse_clocksource("\n"), None);
    }
}
