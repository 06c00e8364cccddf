//! [`AnyClock`]: the clock a limiter holds. Built-in clocks inline, anything else behind one
//! `Arc<dyn Clock>`; limiter types stay free of a clock parameter.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::default_clock::{Choice, DefaultClock};
#[cfg(target_arch = "x86_64")]
use super::tsc::TscClock;
use super::{Clock, CoarseClock, ManualClock, QuantaClock, StdClock};
use crate::Nanos;

/// The clock a limiter holds. The TSC variant (the default on most x86_64 machines) is tested
/// first so the hot path pays one predictable branch and no call; only clocks that are not
/// built in go through the `Arc<dyn Clock>`.
///
/// `repr(u8)`: a plain tag, so each test of the variant is one compare (with the niche layout
/// the compiler chose, telling the variants apart took five instructions per decision).
#[derive(Clone)]
#[repr(u8)]
pub(crate) enum AnyClock {
    #[cfg(target_arch = "x86_64")]
    Tsc(TscClock),
    Quanta(QuantaClock),
    Std(StdClock),
    Coarse(CoarseClock),
    Manual(ManualClock),
    #[cfg(feature = "tokio")]
    Tokio(super::TokioClock),
    Custom(Arc<dyn Clock>),
}

impl AnyClock {
    /// The limiter's clock for a clock passed to a builder: a built-in one (including
    /// [`DefaultClock`], whichever source it chose) is stored inline, any other behind an
    /// `Arc`. Clones of built-in clocks share their time (same origin, or same shared state).
    pub(crate) fn custom<C: Clock>(clock: C) -> AnyClock {
        let any: &dyn Any = &clock;
        if let Some(c) = any.downcast_ref::<DefaultClock>() {
            return AnyClock::from(c.clone());
        }
        if let Some(c) = any.downcast_ref::<QuantaClock>() {
            return AnyClock::Quanta(c.clone());
        }
        if let Some(c) = any.downcast_ref::<StdClock>() {
            return AnyClock::Std(*c);
        }
        if let Some(c) = any.downcast_ref::<CoarseClock>() {
            return AnyClock::Coarse(c.clone());
        }
        if let Some(c) = any.downcast_ref::<ManualClock>() {
            return AnyClock::Manual(c.clone());
        }
        #[cfg(feature = "tokio")]
        if let Some(c) = any.downcast_ref::<super::TokioClock>() {
            return AnyClock::Tokio(*c);
        }
        AnyClock::Custom(Arc::new(clock))
    }

    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        match self {
            #[cfg(target_arch = "x86_64")]
            AnyClock::Tsc(c) => c.now(),
            // The default's fallback (and the clock to choose for ordered readings): one call
            // into std, not a second one through `now_other` (16 instructions per decision).
            AnyClock::Std(c) => c.now(),
            // One load: chosen for speed, so it must not pay a call.
            AnyClock::Coarse(c) => c.now(),
            _ => self.now_other(),
        }
    }

    /// Every variant but the TSC and `Instant` (which [`AnyClock::now`] has handled). Out of
    /// line, so that `now` stays small enough to be inlined into every decision (measured: with
    /// all variants inline, `check` called it instead); these clocks cost 25 ns and more anyway.
    #[inline(never)]
    fn now_other(&self) -> Nanos {
        match self {
            #[cfg(target_arch = "x86_64")]
            AnyClock::Tsc(c) => c.now(),
            AnyClock::Quanta(c) => c.now(),
            AnyClock::Std(c) => c.now(),
            AnyClock::Coarse(c) => c.now(),
            AnyClock::Manual(c) => c.now(),
            #[cfg(feature = "tokio")]
            AnyClock::Tokio(c) => c.now(),
            AnyClock::Custom(c) => c.now(),
        }
    }

    pub(crate) fn sleep(&self, d: Duration) {
        match self {
            #[cfg(target_arch = "x86_64")]
            AnyClock::Tsc(c) => c.sleep(d),
            AnyClock::Quanta(c) => c.sleep(d),
            AnyClock::Std(c) => c.sleep(d),
            AnyClock::Coarse(c) => c.sleep(d),
            AnyClock::Manual(c) => c.sleep(d),
            #[cfg(feature = "tokio")]
            AnyClock::Tokio(c) => c.sleep(d),
            AnyClock::Custom(c) => c.sleep(d),
        }
    }

    /// [`Clock::max_skew`] of this clock: how much earlier than a reading that happened-before
    /// it (on another thread) a reading can be. The sweeper evicts a key only when
    /// `tat + max_skew <= now` (`store::evict::is_cold`), the key cap's reclaim and its
    /// suggested wait allow for it, and a cancel gives back nothing below `now + max_skew`.
    pub(crate) fn max_skew(&self) -> Nanos {
        match self {
            #[cfg(target_arch = "x86_64")]
            AnyClock::Tsc(c) => c.max_skew(),
            AnyClock::Quanta(c) => c.max_skew(),
            AnyClock::Std(c) => c.max_skew(),
            AnyClock::Coarse(c) => c.max_skew(),
            AnyClock::Manual(c) => c.max_skew(),
            #[cfg(feature = "tokio")]
            AnyClock::Tokio(c) => c.max_skew(),
            AnyClock::Custom(c) => c.max_skew(),
        }
    }
}

impl From<DefaultClock> for AnyClock {
    fn from(c: DefaultClock) -> AnyClock {
        match c.choice {
            #[cfg(target_arch = "x86_64")]
            Choice::Tsc(c) => AnyClock::Tsc(c),
            Choice::Std(c, _) => AnyClock::Std(c),
        }
    }
}

impl Default for AnyClock {
    fn default() -> Self {
        AnyClock::from(DefaultClock::new())
    }
}

impl fmt::Debug for AnyClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            #[cfg(target_arch = "x86_64")]
            AnyClock::Tsc(_) => "DefaultClock(TSC)",
            AnyClock::Quanta(_) => "QuantaClock",
            AnyClock::Std(_) => "StdClock",
            AnyClock::Coarse(_) => "CoarseClock",
            AnyClock::Manual(_) => "ManualClock",
            #[cfg(feature = "tokio")]
            AnyClock::Tokio(_) => "TokioClock",
            AnyClock::Custom(_) => "custom clock",
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::probe::Probe;

    struct Fixed(Nanos, Nanos);
    impl Clock for Fixed {
        fn now(&self) -> Nanos {
            self.0
        }
        fn max_skew(&self) -> Nanos {
            self.1
        }
    }

    #[test]
    fn built_in_clocks_are_stored_inline() {
        assert!(matches!(
            AnyClock::custom(QuantaClock::new()),
            AnyClock::Quanta(_)
        ));
        assert!(matches!(
            AnyClock::custom(StdClock::new()),
            AnyClock::Std(_)
        ));
        assert!(matches!(
            AnyClock::custom(CoarseClock::new().unwrap()),
            AnyClock::Coarse(_)
        ));
        assert!(matches!(
            AnyClock::custom(ManualClock::new()),
            AnyClock::Manual(_)
        ));
        #[cfg(feature = "tokio")]
        {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            let _guard = rt.enter();
            assert!(matches!(
                AnyClock::custom(crate::TokioClock::new()),
                AnyClock::Tokio(_)
            ));
        }
        assert!(matches!(AnyClock::custom(Fixed(1, 0)), AnyClock::Custom(_)));
    }

    #[test]
    fn default_clock_is_flattened_to_its_source() {
        let tsc = Probe {
            x86_64: true,
            invariant_tsc: true,
            rdtscp: true,
            clocksource: Some("tsc".into()),
        };
        let fallback = Probe {
            clocksource: Some("hpet".into()),
            ..tsc.clone()
        };
        let d = DefaultClock::from_probe(&tsc);
        let uses_tsc = d.uses_tsc();
        let c = AnyClock::custom(d);
        assert_eq!(matches!(c, AnyClock::Std(_)), !uses_tsc);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(matches!(c, AnyClock::Tsc(_)), uses_tsc);
        let c = AnyClock::custom(DefaultClock::from_probe(&fallback));
        assert!(matches!(c, AnyClock::Std(_)));
        assert_eq!(c.max_skew(), 0);
        // And the limiter's default is the machine's DefaultClock.
        let d = AnyClock::default();
        assert_eq!(
            matches!(d, AnyClock::Std(_)),
            !DefaultClock::new().uses_tsc()
        );
    }

    #[test]
    fn a_manual_clock_passed_in_is_the_same_clock() {
        let m = ManualClock::new();
        let c = AnyClock::custom(m.clone());
        m.advance(Duration::from_nanos(42));
        assert_eq!(c.now(), 42);
        c.sleep(Duration::from_nanos(8));
        assert_eq!(m.now(), 50);
        assert_eq!(m.sleeps(), vec![Duration::from_nanos(8)]);
    }

    #[test]
    fn custom_clocks_report_their_skew() {
        let c = AnyClock::custom(Fixed(1_000, 30));
        assert_eq!((c.now(), c.max_skew()), (1_000, 30));
        assert_eq!(AnyClock::custom(Fixed(0, 0)).max_skew(), 0);
        assert_eq!(
            AnyClock::custom(QuantaClock::new()).max_skew(),
            crate::TSC_MAX_SKEW
        );
    }
}
