//! A plain transliteration of Guava's `RateLimiter` / `SmoothRateLimiter` Java code: mutable
//! fields, one method per Java method, no atomics. It is the reference model of the property
//! tests and, behind a `Mutex` ([`MutexGuava`], what Guava does with `synchronized`), the
//! baseline of `benches/smooth.rs`. Written from the Java, independently of `src/smooth/rules.rs`.
//!
//! Java semantics kept: `Math.min` (NaN wins), `(long)` casts (Rust `as i64`), `saturatedAdd`.
//! Like the library, it saturates the two `long + long` additions of a wait that Java would wrap.

#![allow(dead_code)] // the tests and the bench each use part of it

use std::sync::Mutex;

/// `SmoothBursty` or `SmoothWarmingUp` with their own fields.
#[derive(Clone, Copy, Debug)]
pub enum Subclass {
    Bursty {
        max_burst_seconds: f64,
    },
    WarmingUp {
        warmup_period_micros: i64,
        slope: f64,
        threshold_permits: f64,
        cold_factor: f64,
    },
}

/// `SmoothRateLimiter`'s fields.
#[derive(Clone, Debug)]
pub struct GuavaPort {
    stored_permits: f64,
    max_permits: f64,
    stable_interval_micros: f64,
    next_free_ticket_micros: i64,
    sub: Subclass,
}

/// `java.lang.Math.min(double, double)`.
fn math_min(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        // Java: if (a != a) return a;
        return a;
    }
    if a == 0.0 && b == 0.0 && b.to_bits() == (-0.0f64).to_bits() {
        return b;
    }
    if a <= b {
        a
    } else {
        b
    }
}

impl GuavaPort {
    fn new(sub: Subclass) -> GuavaPort {
        GuavaPort {
            stored_permits: 0.0,
            max_permits: 0.0,
            stable_interval_micros: 0.0,
            next_free_ticket_micros: 0,
            sub,
        }
    }

    /// `new SmoothBursty(stopwatch, maxBurstSeconds)` then `setRate(permitsPerSecond)` at 0.
    pub fn bursty(permits_per_second: f64, max_burst_seconds: f64) -> GuavaPort {
        let mut r = GuavaPort::new(Subclass::Bursty { max_burst_seconds });
        r.set_rate(permits_per_second, 0);
        r
    }

    /// `new SmoothWarmingUp(stopwatch, warmupPeriod, MICROSECONDS, coldFactor)` then
    /// `setRate(permitsPerSecond)` at 0.
    pub fn warming_up(
        permits_per_second: f64,
        warmup_period_micros: i64,
        cold_factor: f64,
    ) -> GuavaPort {
        let mut r = GuavaPort::new(Subclass::WarmingUp {
            warmup_period_micros,
            slope: 0.0,
            threshold_permits: 0.0,
            cold_factor,
        });
        r.set_rate(permits_per_second, 0);
        r
    }

    /// `setRate(permitsPerSecond)` → `doSetRate(permitsPerSecond, nowMicros)`.
    pub fn set_rate(&mut self, permits_per_second: f64, now_micros: i64) {
        assert!(permits_per_second > 0.0 && !permits_per_second.is_nan());
        self.resync(now_micros);
        let stable_interval_micros = 1_000_000.0 /* SECONDS.toMicros(1L) */ / permits_per_second;
        self.stable_interval_micros = stable_interval_micros;
        self.do_set_rate(permits_per_second, stable_interval_micros);
    }

    /// The subclasses' `doSetRate(permitsPerSecond, stableIntervalMicros)`.
    fn do_set_rate(&mut self, permits_per_second: f64, stable_interval_micros: f64) {
        let old_max_permits = self.max_permits;
        match &mut self.sub {
            Subclass::Bursty { max_burst_seconds } => {
                self.max_permits = *max_burst_seconds * permits_per_second;
                if old_max_permits == f64::INFINITY {
                    self.stored_permits = self.max_permits;
                } else {
                    self.stored_permits = if old_max_permits == 0.0 {
                        0.0
                    } else {
                        self.stored_permits * self.max_permits / old_max_permits
                    };
                }
            }
            Subclass::WarmingUp {
                warmup_period_micros,
                slope,
                threshold_permits,
                cold_factor,
            } => {
                let cold_interval_micros = stable_interval_micros * *cold_factor;
                *threshold_permits = 0.5 * *warmup_period_micros as f64 / stable_interval_micros;
                self.max_permits = *threshold_permits
                    + 2.0 * *warmup_period_micros as f64
                        / (stable_interval_micros + cold_interval_micros);
                *slope = (cold_interval_micros - stable_interval_micros)
                    / (self.max_permits - *threshold_permits);
                if old_max_permits == f64::INFINITY {
                    self.stored_permits = 0.0;
                } else {
                    self.stored_permits = if old_max_permits == 0.0 {
                        self.max_permits
                    } else {
                        self.stored_permits * self.max_permits / old_max_permits
                    };
                }
            }
        }
    }

    /// `getRate()` → `doGetRate()`.
    pub fn get_rate(&self) -> f64 {
        1_000_000.0 /* SECONDS.toMicros(1L) */ / self.stable_interval_micros
    }

    fn cool_down_interval_micros(&self) -> f64 {
        match self.sub {
            Subclass::Bursty { .. } => self.stable_interval_micros,
            Subclass::WarmingUp {
                warmup_period_micros,
                ..
            } => warmup_period_micros as f64 / self.max_permits,
        }
    }

    fn permits_to_time(&self, permits: f64) -> f64 {
        match self.sub {
            Subclass::WarmingUp { slope, .. } => self.stable_interval_micros + permits * slope,
            Subclass::Bursty { .. } => unreachable!("bursty has no slope"),
        }
    }

    fn stored_permits_to_wait_time(&self, stored_permits: f64, permits_to_take: f64) -> i64 {
        let Subclass::WarmingUp {
            threshold_permits, ..
        } = self.sub
        else {
            return 0;
        };
        let mut permits_to_take = permits_to_take;
        let available_permits_above_threshold = stored_permits - threshold_permits;
        let mut micros: i64 = 0;
        if available_permits_above_threshold > 0.0 {
            let permits_above_threshold_to_take =
                math_min(available_permits_above_threshold, permits_to_take);
            let length = self.permits_to_time(available_permits_above_threshold)
                + self.permits_to_time(
                    available_permits_above_threshold - permits_above_threshold_to_take,
                );
            micros = (permits_above_threshold_to_take * length / 2.0) as i64;
            permits_to_take -= permits_above_threshold_to_take;
        }
        // Java: micros += (long) ...; saturated here, as in the library.
        micros.saturating_add((self.stable_interval_micros * permits_to_take) as i64)
    }

    fn resync(&mut self, now_micros: i64) {
        if now_micros > self.next_free_ticket_micros {
            let new_permits = (now_micros - self.next_free_ticket_micros) as f64
                / self.cool_down_interval_micros();
            self.stored_permits = math_min(self.max_permits, self.stored_permits + new_permits);
            self.next_free_ticket_micros = now_micros;
        }
    }

    fn reserve_earliest_available(&mut self, required_permits: u64, now_micros: i64) -> i64 {
        self.resync(now_micros);
        let return_value = self.next_free_ticket_micros;
        let stored_permits_to_spend = math_min(required_permits as f64, self.stored_permits);
        let fresh_permits = required_permits as f64 - stored_permits_to_spend;
        let wait_micros = self
            .stored_permits_to_wait_time(self.stored_permits, stored_permits_to_spend)
            .saturating_add((fresh_permits * self.stable_interval_micros) as i64);
        self.next_free_ticket_micros = self.next_free_ticket_micros.saturating_add(wait_micros);
        self.stored_permits -= stored_permits_to_spend;
        return_value
    }

    /// `reserve(permits)` → `reserveAndGetWaitLength`: the microseconds `acquire` sleeps.
    pub fn reserve(&mut self, permits: u64, now_micros: i64) -> i64 {
        let moment_available = self.reserve_earliest_available(permits, now_micros);
        (moment_available - now_micros).max(0)
    }

    /// `tryAcquire(permits, timeout, MICROSECONDS)`: the sleep if granted.
    pub fn try_acquire(
        &mut self,
        permits: u64,
        timeout_micros: i64,
        now_micros: i64,
    ) -> Option<i64> {
        let timeout_micros = timeout_micros.max(0);
        // canAcquire: queryEarliestAvailable(nowMicros) - timeoutMicros <= nowMicros
        if self.next_free_ticket_micros - timeout_micros <= now_micros {
            Some(self.reserve(permits, now_micros))
        } else {
            None
        }
    }

    /// The earliest moment a `tryAcquire` with no timeout would succeed.
    pub fn next_free(&self) -> i64 {
        self.next_free_ticket_micros
    }
}

/// What Guava does: one mutex around the state, a stopwatch in microseconds since creation.
pub struct MutexGuava<C> {
    port: Mutex<GuavaPort>,
    clock: C,
    origin: u64,
}

impl<C: tollgate::Clock> MutexGuava<C> {
    pub fn new(port: GuavaPort, clock: C) -> Self {
        let origin = clock.now();
        MutexGuava {
            port: Mutex::new(port),
            clock,
            origin,
        }
    }

    fn now_micros(&self) -> i64 {
        ((self.clock.now() - self.origin) / 1_000) as i64
    }

    /// `tryAcquire()`.
    #[inline]
    pub fn try_acquire(&self) -> bool {
        let mut port = self.port.lock().unwrap();
        let now = self.now_micros();
        port.try_acquire(1, 0, now).is_some()
    }
}
