//! The cost of the `metrics` feature on the hottest path: direct `try_acquire`, allowed and
//! denied, against the floor (TSC read + load + CAS) measured in the same run.
//!
//! Built twice by `bash benches/metrics_cost.sh` (without and with this crate's `metrics`
//! feature, which turns on tollgate's) and the two binaries run alternately: each table's
//! `x floor` ratios are comparable across the two builds because the floor is measured in the
//! same rounds. With the feature, a limiter built under a no-op recorder (the facade's default
//! when no exporter is installed) and one under a real recorder (metrics-util's atomic
//! registry) are measured too.
//!
//! The concurrency limiter's uncontended acquire + release too (its in-flight gauge is raised
//! and lowered on that path), against `tokio::sync::Semaphore`'s in the same rounds.

use std::hint::black_box;

use tollgate::{ConcurrencyLimiter, DefaultClock, Quota, RateLimiter};

mod support;
use support::rounds::{case, compare, Settings, ROUNDS};
use support::{quick, DirectFloor};

fn main() {
    let s = Settings::from_args(ROUNDS);
    let iters = if quick() { 200_000 } else { 2_000_000 };
    let build = if cfg!(feature = "metrics") {
        "with the metrics feature"
    } else {
        "without the metrics feature"
    };
    for allowed in [true, false] {
        let (q, t, burst) = if allowed {
            (Quota::per_second(1_000_000_000).unwrap(), 1, 1_000_000_000)
        } else {
            (Quota::per_hour(1).unwrap(), 3_600_000_000_000, 1)
        };
        let floor = DirectFloor::new(DefaultClock::new(), t, burst);
        let plain = RateLimiter::builder(q).name("bench").build();
        #[cfg(feature = "metrics")]
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        #[cfg(feature = "metrics")]
        let recorded = metrics::with_local_recorder(&recorder, || {
            RateLimiter::builder(q).name("bench").build()
        });
        let _ = (floor.try_acquire(), plain.try_acquire());
        #[cfg(feature = "metrics")]
        let _ = recorded.try_acquire();
        #[allow(unused_mut)]
        let mut cases = vec![
            case("floor", |_| {
                black_box(floor.try_acquire());
            }),
            case("tollgate try_acquire (no recorder)", |_| {
                black_box(plain.try_acquire());
            }),
        ];
        #[cfg(feature = "metrics")]
        cases.push(case("tollgate try_acquire (atomic recorder)", |_| {
            black_box(recorded.try_acquire());
        }));
        let path = if allowed { "allowed" } else { "denied" };
        compare(
            &format!("direct try_acquire, {path}, {build}"),
            &s,
            iters,
            &["floor"],
            cases,
        );
    }
    concurrency(&s, iters, build);
}

/// `try_acquire` and dropping the permit, uncontended, against tokio's semaphore.
fn concurrency(s: &Settings, iters: u64, build: &str) {
    const LIMIT: u64 = 64;
    let tokio_sem = tokio::sync::Semaphore::new(LIMIT as usize);
    let plain = ConcurrencyLimiter::builder(LIMIT)
        .unwrap()
        .name("bench")
        .build();
    #[cfg(feature = "metrics")]
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    #[cfg(feature = "metrics")]
    let recorded = metrics::with_local_recorder(&recorder, || {
        ConcurrencyLimiter::builder(LIMIT)
            .unwrap()
            .name("bench")
            .build()
    });
    #[allow(unused_mut)]
    let mut cases = vec![
        case("tokio Semaphore", |_| {
            let p = black_box(&tokio_sem).try_acquire();
            black_box(&p);
        }),
        case("tollgate ConcurrencyLimiter (no recorder)", |_| {
            let p = black_box(&plain).try_acquire();
            black_box(&p);
        }),
    ];
    #[cfg(feature = "metrics")]
    cases.push(case(
        "tollgate ConcurrencyLimiter (atomic recorder)",
        |_| {
            let p = black_box(&recorded).try_acquire();
            black_box(&p);
        },
    ));
    compare(
        &format!("concurrency try_acquire + release, uncontended, {build}"),
        s,
        iters,
        &["tokio Semaphore"],
        cases,
    );
}
