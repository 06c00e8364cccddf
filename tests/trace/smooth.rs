//! `SmoothRateLimiter` (Guava's `RateLimiter`), bursty and warming up, on a manual clock.

use std::time::Duration;

use tollgate::{Clock, ManualClock, SmoothRateLimiter, SmoothRateLimiterBuilder, MAX_NANOS};

use crate::harness::{call, seed_of, Rng, Scale, Show, Trace};

/// The rates `set_quota` moves to: valid ones across the range, and refused ones (zero,
/// negative, not a number, infinite) that must leave the rate as it was.
const RATES: [f64; 14] = [
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    33.3,
    1000.0,
    250_000.0,
    0.0,
    -1.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e-300,
];

const EXTREME_RATES: [f64; 6] = [1e-9, 1e-3, 1e9, 1e15, f64::MAX, f64::MIN_POSITIVE];

fn run(
    t: &mut Trace,
    rng: &mut Rng,
    l: &SmoothRateLimiter,
    clock: &ManualClock,
    scale: Scale,
    extreme: bool,
    steps: usize,
) {
    for _ in 0..steps {
        let (op, r) = match rng.below(100) {
            0..=24 => {
                let d = if extreme && rng.chance(5) {
                    rng.pick(&[MAX_NANOS / 2, MAX_NANOS, u64::MAX / 2])
                } else {
                    scale.advance(rng)
                };
                clock.advance_nanos(d);
                (call("advance", &[&d]), format!("now={}", clock.now()))
            }
            25..=39 => ("try_acquire()".to_owned(), l.try_acquire().show()),
            40..=51 => {
                let n = scale.n(rng);
                (call("try_acquire_n", &[&n]), l.try_acquire_n(n).show())
            }
            52..=59 => {
                let r = l.acquire();
                (
                    "acquire()".to_owned(),
                    format!("{} now={}", r.show(), clock.now()),
                )
            }
            60..=67 => {
                let n = if extreme && rng.chance(30) {
                    rng.pick(&[u64::MAX, 1 << 40, 1 << 53, 1 << 62])
                } else {
                    scale.n_wait(rng)
                };
                let r = l.acquire_n(n);
                (
                    call("acquire_n", &[&n]),
                    format!("{} now={}", r.show(), clock.now()),
                )
            }
            68..=75 => {
                let d = wait(rng, scale, extreme);
                let r = l.try_acquire_for(d);
                (
                    call("try_acquire_for", &[&d]),
                    format!("{} now={}", r.show(), clock.now()),
                )
            }
            76..=87 => {
                let n = scale.n(rng);
                let d = wait(rng, scale, extreme);
                let r = l.try_acquire_n_for(n, d);
                (
                    call("try_acquire_n_for", &[&n, &d]),
                    format!("{} now={}", r.show(), clock.now()),
                )
            }
            88..=93 => {
                let rate = if extreme && rng.chance(50) {
                    rng.pick(&EXTREME_RATES)
                } else {
                    rng.pick(&RATES)
                };
                let r = l.set_quota(rate);
                (
                    call("set_quota", &[&rate]),
                    format!("{} quota={}", r.show(), l.quota().show()),
                )
            }
            _ => ("quota()".to_owned(), l.quota().show()),
        };
        t.rec(op, r);
    }
}

fn wait(rng: &mut Rng, scale: Scale, extreme: bool) -> Duration {
    if extreme && rng.chance(30) {
        rng.pick(&[
            Duration::MAX,
            Duration::from_nanos(u64::MAX),
            Duration::from_secs(200 * 365 * 86_400),
        ])
    } else {
        scale.wait(rng)
    }
}

/// A builder's shape: its options other than the rate and the clock.
type Shape = fn(SmoothRateLimiterBuilder) -> SmoothRateLimiterBuilder;

struct Config {
    name: &'static str,
    rate: f64,
    build: Shape,
    extreme: bool,
    steps: usize,
}

/// The `smooth` family.
pub fn smooth(t: &mut Trace) {
    builds(t);
    let configs = [
        Config {
            name: "bursty_5",
            rate: 5.0,
            build: |b| b,
            extreme: false,
            steps: 1000,
        },
        Config {
            name: "bursty_2.5_burst3s",
            rate: 2.5,
            build: |b| b.max_burst_seconds(3.0),
            extreme: false,
            steps: 700,
        },
        Config {
            name: "bursty_1000_burst0.01s",
            rate: 1000.0,
            build: |b| b.max_burst_seconds(0.01),
            extreme: false,
            steps: 500,
        },
        Config {
            name: "warmup_10_2s",
            rate: 10.0,
            build: |b| b.warmup(Duration::from_secs(2)),
            extreme: false,
            steps: 1000,
        },
        Config {
            name: "warmup_4_1.5s_cold5",
            rate: 4.0,
            build: |b| b.warmup(Duration::from_millis(1500)).cold_factor(5.0),
            extreme: false,
            steps: 700,
        },
        Config {
            name: "bursty_3_extreme",
            rate: 3.0,
            build: |b| b,
            extreme: true,
            steps: 200,
        },
        Config {
            name: "warmup_3_extreme",
            rate: 3.0,
            build: |b| b.warmup(Duration::from_secs(3)),
            extreme: true,
            steps: 200,
        },
    ];
    for c in configs {
        let name = format!("smooth/{}", c.name);
        let seed = seed_of(&name);
        let mut rng = Rng::new(seed);
        let clock = ManualClock::new();
        let l = (c.build)(SmoothRateLimiter::builder(c.rate).clock(clock.clone()))
            .build()
            .expect("a valid configuration");
        let interval = (1e9 / c.rate) as u64;
        let scale = Scale {
            interval,
            period: 1_000_000_000,
            limit: (c.rate.ceil() as u64).max(1),
        };
        t.scenario(&name, seed, format!("rate={:?}", c.rate));
        run(t, &mut rng, &l, &clock, scale, c.extreme, c.steps);
    }
}

/// The builder's checks: which configurations build, and the errors of the others.
fn builds(t: &mut Trace) {
    t.scenario("smooth/build", 0, "builder configurations");
    let rates = [5.0, 0.0, -2.0, f64::NAN, f64::INFINITY, 1e-300, 1e300];
    for rate in rates {
        let shapes: [(&str, Shape); 9] = [
            ("bursty", |b| b),
            ("max_burst(2)", |b| b.max_burst_seconds(2.0)),
            ("max_burst(0)", |b| b.max_burst_seconds(0.0)),
            ("max_burst(inf)", |b| b.max_burst_seconds(f64::INFINITY)),
            ("warmup(1s)", |b| b.warmup(Duration::from_secs(1))),
            ("warmup(0)", |b| b.warmup(Duration::ZERO)),
            ("warmup(1s).cold(0.5)", |b| {
                b.warmup(Duration::from_secs(1)).cold_factor(0.5)
            }),
            ("cold(3)", |b| b.cold_factor(3.0)),
            ("warmup(1s).max_burst(1)", |b| {
                b.warmup(Duration::from_secs(1)).max_burst_seconds(1.0)
            }),
        ];
        for (shape, f) in shapes {
            let r = f(SmoothRateLimiter::builder(rate).clock(ManualClock::new())).build();
            t.rec(
                format!("builder({rate:?}).{shape}"),
                match r {
                    Ok(l) => format!(
                        "Ok(quota={:?} try_acquire_n(3)={})",
                        l.quota(),
                        l.try_acquire_n(3).show()
                    ),
                    Err(e) => format!("Err({e:?})"),
                },
            );
        }
    }
}
