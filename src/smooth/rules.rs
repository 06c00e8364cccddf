//! Guava's smooth rate limiting rules on plain values: no atomics, no clock, no map.
//!
//! A line-by-line port of Guava's `SmoothRateLimiter` with its two shapes, `SmoothBursty` and
//! `SmoothWarmingUp`, in Guava's units (microseconds since the limiter was created, `double`
//! permits), so that every wait matches Guava's to the microsecond. Java semantics that differ
//! from Rust's defaults are spelled out:
//! - `Math.min(double, double)` returns NaN if either argument is NaN: [`java_min`] (Rust's
//!   `f64::min` would ignore the NaN and change results at rate `+Inf` or a zero warm-up).
//! - `(long) x` truncates toward zero, saturates, and maps NaN to 0: exactly Rust's `x as i64`.
//! - `LongMath.saturatedAdd` saturates: `i64::saturating_add`.
//!
//! One deliberate deviation: the two `long + long` additions that build a wait
//! (`storedPermitsToWaitTime`, `reserveEarliestAvailable`) wrap in Java when both terms are near
//! `Long.MAX_VALUE` (a wait of more than 146,000 years), which moves Guava's schedule backwards;
//! here they saturate.
//!
//! Each function takes the state and the parameters as values and returns the new state, so the
//! same rules drive the shared lock-free cell (`super::cell`) and could drive one state per key.

/// Microseconds since the limiter was created (Guava's `nowMicros`).
pub(crate) type Micros = i64;

/// `SECONDS.toMicros(1L)` as a `double`.
pub(crate) const MICROS_PER_SECOND: f64 = 1_000_000.0;

/// What a limiter is, fixed at construction: Guava's two subclasses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Shape {
    /// `SmoothBursty(maxBurstSeconds)`: stored permits are free; starts empty.
    Bursty {
        /// Seconds of unused rate that can be saved up (Guava: 1.0).
        max_burst_seconds: f64,
    },
    /// `SmoothWarmingUp(warmupPeriod, coldFactor)`: stored permits above a threshold are slow;
    /// starts cold.
    WarmingUp {
        /// `warmupPeriodMicros`.
        warmup: Micros,
        /// `coldFactor` (Guava: 3.0).
        cold_factor: f64,
    },
}

/// Everything `setRate` derives from a rate: Guava's fields other than the state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Params {
    /// `stableIntervalMicros = 1e6 / permitsPerSecond`.
    pub(crate) stable: f64,
    /// `maxPermits`.
    pub(crate) max: f64,
    /// `thresholdPermits` (warming up only).
    pub(crate) threshold: f64,
    /// `slope` of the interval above the threshold (warming up only).
    pub(crate) slope: f64,
    /// `coolDownIntervalMicros()`: how long it takes to store one permit.
    pub(crate) cool_down: f64,
    /// Whether stored permits cost time (`SmoothWarmingUp`) or not (`SmoothBursty`).
    pub(crate) warming: bool,
}

/// Guava's mutable state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct State {
    /// `storedPermits`: `>= 0`, `+Inf`, or NaN (Guava produces NaN at some infinite rates).
    pub(crate) stored: f64,
    /// `nextFreeTicketMicros`: in `0..=i64::MAX`, never decreasing under these rules.
    pub(crate) next_free: Micros,
}

/// Java's `Math.min(double, double)`: NaN if either is NaN, and `-0.0` below `+0.0`.
#[inline]
pub(crate) fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() {
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

/// Guava's precondition on a rate: `permitsPerSecond > 0.0 && !isNaN` (`+Inf` is allowed).
pub(crate) fn valid_rate(permits_per_second: f64) -> bool {
    permits_per_second > 0.0
}

impl Shape {
    /// The parameters before the first `setRate`: Java's field defaults (`0.0`), which the first
    /// `setRate` sees as the "old" rate. (Bursty's cool-down is the stable interval, `0.0`;
    /// warming up's is `warmupPeriodMicros / 0.0`.)
    pub(crate) fn unset(&self) -> Params {
        let (cool_down, warming) = match *self {
            Shape::Bursty { .. } => (0.0, false),
            Shape::WarmingUp { warmup, .. } => (warmup as f64 / 0.0, true),
        };
        Params {
            stable: 0.0,
            max: 0.0,
            threshold: 0.0,
            slope: 0.0,
            cool_down,
            warming,
        }
    }

    /// `doSetRate(permitsPerSecond, stableIntervalMicros)` of this shape: the new parameters.
    pub(crate) fn params(&self, permits_per_second: f64) -> Params {
        let stable = MICROS_PER_SECOND / permits_per_second;
        match *self {
            Shape::Bursty { max_burst_seconds } => Params {
                stable,
                max: max_burst_seconds * permits_per_second,
                threshold: 0.0,
                slope: 0.0,
                cool_down: stable,
                warming: false,
            },
            Shape::WarmingUp {
                warmup,
                cold_factor,
            } => {
                let warmup = warmup as f64;
                let cold = stable * cold_factor;
                let threshold = 0.5 * warmup / stable;
                let max = threshold + 2.0 * warmup / (stable + cold);
                Params {
                    stable,
                    max,
                    threshold,
                    slope: (cold - stable) / (max - threshold),
                    cool_down: warmup / max,
                    warming: true,
                }
            }
        }
    }

    /// The stored permits after `setRate` changed `maxPermits` from `old_max` to `new_max`.
    fn rescale(&self, stored: f64, old_max: f64, new_max: f64) -> f64 {
        // Guava special-cases an infinite old max (else `stored * max / inf` is NaN) and a zero
        // one (the first setRate: bursty starts empty, warming up starts cold).
        let (from_infinite, from_zero) = match self {
            Shape::Bursty { .. } => (new_max, 0.0),
            Shape::WarmingUp { .. } => (0.0, new_max),
        };
        if old_max == f64::INFINITY {
            from_infinite
        } else if old_max == 0.0 {
            from_zero
        } else {
            stored * new_max / old_max
        }
    }
}

impl Params {
    /// `getRate()`: `1e6 / stableIntervalMicros` (so `0.0` for a rate whose interval is `+Inf`).
    pub(crate) fn rate(&self) -> f64 {
        MICROS_PER_SECOND / self.stable
    }

    /// `permitsToTime(permits)`: the interval at `permits` stored permits.
    #[inline]
    fn permits_to_time(&self, permits: f64) -> f64 {
        self.stable + permits * self.slope
    }

    /// `storedPermitsToWaitTime(storedPermits, permitsToTake)`: bursty 0; warming up the area
    /// under the interval curve from `stored - take` to `stored` (a trapezoid above the
    /// threshold, a rectangle below), each part truncated to whole microseconds as Guava does.
    #[inline]
    fn stored_permits_to_wait_time(&self, stored: f64, take: f64) -> Micros {
        if !self.warming {
            return 0;
        }
        let above_threshold = stored - self.threshold;
        let mut take = take;
        let mut micros: Micros = 0;
        if above_threshold > 0.0 {
            let take_above = java_min(above_threshold, take);
            let length = self.permits_to_time(above_threshold)
                + self.permits_to_time(above_threshold - take_above);
            micros = (take_above * length / 2.0) as Micros;
            take -= take_above;
        }
        micros.saturating_add((self.stable * take) as Micros)
    }
}

/// `resync(nowMicros)`: time since `nextFree` turns into stored permits (up to `maxPermits`),
/// and `nextFree` catches up with `now`.
#[inline]
pub(crate) fn resync(s: State, p: &Params, now: Micros) -> State {
    if now > s.next_free {
        let new_permits = now.saturating_sub(s.next_free) as f64 / p.cool_down;
        State {
            stored: java_min(p.max, s.stored + new_permits),
            next_free: now,
        }
    } else {
        s
    }
}

/// `reserveEarliestAvailable(requiredPermits, nowMicros)`: returns the new state and the moment
/// the caller may proceed (the old `nextFree`: pay later, the next caller waits for this one's
/// cost). Stored permits are spent first; fresh ones cost the stable interval each.
#[inline]
pub(crate) fn reserve(s: State, p: &Params, now: Micros, permits: u64) -> (State, Micros) {
    let s = resync(s, p, now);
    let moment = s.next_free;
    let required = permits as f64;
    let spend = java_min(required, s.stored);
    let fresh = required - spend;
    let wait = p
        .stored_permits_to_wait_time(s.stored, spend)
        .saturating_add((fresh * p.stable) as Micros);
    let next = State {
        stored: s.stored - spend,
        next_free: s.next_free.saturating_add(wait),
    };
    (next, moment)
}

/// `canAcquire(nowMicros, timeoutMicros)`: `nextFree - timeout <= now`, a subtraction so that
/// a huge timeout cannot overflow (`next_free >= 0`, `timeout >= 0`). Independent of the
/// number of permits: pay later.
#[inline]
pub(crate) fn can_acquire(next_free: Micros, now: Micros, timeout: Micros) -> bool {
    next_free.saturating_sub(timeout) <= now
}

/// `reserveAndGetWaitLength`: how long a caller whose moment is `moment` sleeps.
#[inline]
pub(crate) fn wait_micros(moment: Micros, now: Micros) -> Micros {
    moment.saturating_sub(now).max(0)
}

/// `doSetRate(permitsPerSecond, nowMicros)`: resync at the old rate, then rescale the stored
/// permits to the new `maxPermits`. `nextFree` is untouched: debt booked at the old rate is
/// still paid.
pub(crate) fn set_rate(shape: &Shape, s: State, old: &Params, new: &Params, now: Micros) -> State {
    let s = resync(s, old, now);
    State {
        stored: shape.rescale(s.stored, old.max, new.max),
        next_free: s.next_free,
    }
}

/// A new limiter at time 0: Guava's constructor followed by its first `setRate`.
pub(crate) fn start(shape: &Shape, permits_per_second: f64) -> (State, Params) {
    let params = shape.params(permits_per_second);
    let zero = State {
        stored: 0.0,
        next_free: 0,
    };
    (set_rate(shape, zero, &shape.unset(), &params, 0), params)
}

#[cfg(all(test, not(loom)))]
mod tests;
