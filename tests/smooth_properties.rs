//! Property tests: random sequences of acquire / try_acquire / try_acquire_n_for / set_quota /
//! quota / time passing on a `ManualClock`, compared step by step, exactly, with a plain
//! transliteration of Guava's Java code (`support/guava_port.rs`). Configurations include the
//! edges: rates `+Inf`, `f64::MIN_POSITIVE` and `1e300`, zero warm-ups, cold factor 1, huge
//! requests and timeouts.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{AcquireError, Clock, ManualClock, SmoothRateLimiter};

#[path = "support/guava_port.rs"]
mod guava_port;
use guava_port::GuavaPort;

#[derive(Clone, Debug)]
enum Config {
    Bursty {
        rate: f64,
        max_burst_seconds: f64,
    },
    WarmingUp {
        rate: f64,
        warmup_micros: u64,
        cold_factor: f64,
    },
}

#[derive(Clone, Debug)]
enum Op {
    Acquire(u64),
    TryAcquire(u64),
    TryAcquireFor(u64, u64),
    SetRate(f64),
    Rate,
    AdvanceNanos(u64),
}

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => (-2.0f64..7.0).prop_map(|e| 10f64.powf(e)),
        4 => (1u32..50).prop_map(f64::from),
        1 => Just(f64::INFINITY),
        1 => Just(f64::MIN_POSITIVE),
        1 => Just(1e300),
    ]
}

fn permits() -> impl Strategy<Value = u64> {
    prop_oneof![
        12 => 1u64..10,
        2 => 1u64..1_000_000,
        1 => Just(u64::MAX),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    let bursty =
        (rate(), prop_oneof![Just(1.0), 0.01f64..5.0]).prop_map(|(rate, max_burst_seconds)| {
            Config::Bursty {
                rate,
                max_burst_seconds,
            }
        });
    let warmup = prop_oneof![4 => 0u64..10_000_000, 1 => Just(0), 1 => Just(u64::MAX)];
    let cold = prop_oneof![Just(3.0), Just(1.0), 1.0f64..20.0];
    let warming =
        (rate(), warmup, cold).prop_map(|(rate, warmup_micros, cold_factor)| Config::WarmingUp {
            rate,
            warmup_micros,
            cold_factor,
        });
    prop_oneof![bursty, warming]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => permits().prop_map(Op::Acquire),
        3 => permits().prop_map(Op::TryAcquire),
        2 => (permits(), prop_oneof![0u64..3_000_000, Just(u64::MAX)])
            .prop_map(|(n, t)| Op::TryAcquireFor(n, t)),
        1 => rate().prop_map(Op::SetRate),
        1 => Just(Op::Rate),
        4 => prop_oneof![0u64..2_000_000_000, 0u64..2_000, Just(u64::MAX / 4)]
            .prop_map(Op::AdvanceNanos),
    ]
}

fn build(c: &Config, clock: &ManualClock) -> (SmoothRateLimiter, GuavaPort) {
    match *c {
        Config::Bursty {
            rate,
            max_burst_seconds,
        } => (
            SmoothRateLimiter::builder(rate)
                .max_burst_seconds(max_burst_seconds)
                .clock(clock.clone())
                .build()
                .unwrap(),
            GuavaPort::bursty(rate, max_burst_seconds),
        ),
        Config::WarmingUp {
            rate,
            warmup_micros,
            cold_factor,
        } => (
            SmoothRateLimiter::builder(rate)
                .warmup(Duration::from_micros(warmup_micros))
                .cold_factor(cold_factor)
                .clock(clock.clone())
                .build()
                .unwrap(),
            // TimeUnit.toMicros saturates at Long.MAX_VALUE.
            GuavaPort::warming_up(rate, warmup_micros.min(i64::MAX as u64) as i64, cold_factor),
        ),
    }
}

fn us(micros: i64) -> Duration {
    Duration::from_micros(micros as u64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_guavas_java_step_by_step(c in config(), ops in prop::collection::vec(op(), 1..60)) {
        let clock = ManualClock::new();
        let (limiter, mut guava) = build(&c, &clock);
        for (i, op) in ops.iter().enumerate() {
            // Guava's readMicros(): the limiter was built at clock time 0.
            let now = (clock.now() / 1_000) as i64;
            match *op {
                Op::Acquire(n) => {
                    let expected = us(guava.reserve(n, now));
                    prop_assert_eq!(limiter.acquire_n(n), Ok(expected), "step {} {:?}", i, op);
                }
                Op::TryAcquire(n) => {
                    let expected = match guava.try_acquire(n, 0, now) {
                        Some(wait) => { prop_assert_eq!(wait, 0); Ok(()) }
                        None => Err(AcquireError::RateLimited {
                            retry_after: us(guava.next_free() - now),
                        }),
                    };
                    prop_assert_eq!(limiter.try_acquire_n(n), expected, "step {} {:?}", i, op);
                }
                Op::TryAcquireFor(n, timeout) => {
                    let timeout_micros = timeout.min(i64::MAX as u64) as i64;
                    let expected = match guava.try_acquire(n, timeout_micros, now) {
                        Some(wait) => Ok(us(wait)),
                        None => Err(AcquireError::RateLimited {
                            retry_after: us(guava.next_free() - now),
                        }),
                    };
                    let got = limiter.try_acquire_n_for(n, Duration::from_micros(timeout));
                    prop_assert_eq!(got, expected, "step {} {:?}", i, op);
                }
                Op::SetRate(r) => {
                    guava.set_rate(r, now);
                    limiter.set_quota(r).unwrap();
                }
                Op::Rate => {
                    prop_assert_eq!(limiter.quota().to_bits(), guava.get_rate().to_bits());
                }
                Op::AdvanceNanos(ns) => clock.advance_nanos(ns),
            }
        }
    }
}
