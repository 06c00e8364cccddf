//! The TSC read inline (`rdtsc`), converted with quanta's calibration: what
//! [`DefaultClock`](crate::DefaultClock) reads where the TSC is usable (`default_clock.rs`
//! decides). x86_64 only.
//!
//! Why not through `quanta::Clock::raw`: that is a call into another crate (not inlined) and a
//! match on quanta's clock kind at every read; here the read is one `rdtsc`, a subtraction and
//! a multiply, inlined into the decision. Measured on the direct floor (clock + load + CAS):
//! 0.87x the same floor reading through quanta.

use std::arch::x86_64::{_mm_lfence, _rdtsc};

use super::{quanta_clock, Clock, TSC_MAX_SKEW};
use crate::Nanos;

/// Nanoseconds = (ticks × `mult`) >> `SHIFT`: `mult` is nanoseconds per 2^32 ticks.
const SHIFT: u32 = 32;

/// The TSC since an origin, in nanoseconds. Readings taken on another core just after the
/// origin may be before it; they count as 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TscClock {
    origin: u64,
    mult: u64,
}

impl TscClock {
    /// A TSC clock whose origin is now, if quanta's calibrated clock reads this same counter
    /// (it does wherever the CPU has an invariant TSC and `rdtscp`, which the caller checked;
    /// this makes sure, so that quanta's scale applies to our ticks). `None` otherwise.
    pub(crate) fn new() -> Option<TscClock> {
        let quanta = quanta_clock::calibrated();
        let (before, raw, after) = (fenced(), quanta.raw(), fenced());
        if !(before <= raw && raw <= after) {
            return None;
        }
        let mult = quanta.delta_as_nanos(0, 1 << SHIFT);
        // Sanity: between 1/16 and 16 ns per tick (an invariant TSC runs at 0.06-16 GHz).
        if !(1 << (SHIFT - 4)..1 << (SHIFT + 4)).contains(&mult) {
            return None;
        }
        Some(TscClock {
            origin: read(),
            mult,
        })
    }
}

impl Clock for TscClock {
    #[inline]
    fn now(&self) -> Nanos {
        let ticks = read().saturating_sub(self.origin);
        let ns = (u128::from(ticks) * u128::from(self.mult)) >> SHIFT;
        u64::try_from(ns).unwrap_or(Nanos::MAX)
    }

    #[inline]
    fn max_skew(&self) -> Nanos {
        TSC_MAX_SKEW
    }
}

/// `rdtsc`: not ordered with earlier loads; [`TSC_MAX_SKEW`] says what that costs.
#[inline(always)]
fn read() -> u64 {
    // SAFETY: this module is built for x86_64 only, where rdtsc is baseline; it reads the
    // time-stamp counter and touches no memory. (Where an OS forbids it in user mode it traps:
    // a signal, not undefined behaviour.)
    unsafe { _rdtsc() }
}

/// `lfence; rdtsc; lfence`: ordered with the code around it (used only by the check in `new`).
fn fenced() -> u64 {
    // SAFETY: x86_64 only (this module's cfg): lfence is SSE2 and rdtsc baseline there, and
    // neither touches memory.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::probe::Probe;

    #[test]
    fn agrees_with_quanta_and_the_os_clock() {
        if Probe::system().verdict().is_err() {
            return; // no usable TSC on this machine: nothing to compare
        }
        let tsc = TscClock::new().expect("quanta reads the TSC where the probe says it is usable");
        let std = super::super::StdClock::new();
        let (t0, s0) = (tsc.now(), std.now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (t1, s1) = (tsc.now(), std.now());
        let (dt, ds) = (t1 - t0, s1 - s0);
        // Both measured the same 20+ ms; allow 2% for the calibration and the two reads' gap.
        assert!(
            dt.abs_diff(ds) <= ds / 50 + 100_000,
            "tsc {dt} ns, std {ds} ns"
        );
        assert_eq!(tsc.max_skew(), TSC_MAX_SKEW);
    }
}
