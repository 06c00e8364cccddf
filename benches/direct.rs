//! Direct (unkeyed) `try_acquire`: tollgate vs the floor (clock read + load + CAS) vs governor's
//! `check()`, on the allowed and the denied path, with each clock.
//!
//! Contenders, per path:
//! - `floor/default`, `floor/std`, `floor/quanta`: [`support::DirectFloor`] on that clock
//!   (`floor/default` is `tollgate/default`'s floor: the same inline TSC read).
//! - `tollgate/default` (`DefaultClock`: the TSC here), `tollgate/std` (`StdClock`),
//!   `tollgate/quanta` (`QuantaClock`).
//! - `governor/quanta` (governor's default clock), `governor/std` (its `MonotonicClock`, which
//!   reads `Instant` like tollgate's `StdClock`).
//!
//! Run (in benches/): `cargo bench --bench direct` (or `bash benches/run.sh`).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tollgate::{Clock, Quota, RateLimiter, StdClock};

mod support;
use support::{DirectFloor, RawQuanta};

/// Always allowed: T = 1 ns, burst 1e9, while each call takes tens of ns.
const FAST: u64 = 1_000_000_000;

fn tollgate_quota(allowed: bool) -> Quota {
    if allowed {
        Quota::per_second(FAST).unwrap()
    } else {
        Quota::per_hour(1).unwrap()
    }
}

fn governor_quota(allowed: bool) -> governor::Quota {
    if allowed {
        governor::Quota::per_second(NonZeroU32::new(FAST as u32).unwrap())
    } else {
        governor::Quota::per_hour(NonZeroU32::new(1).unwrap())
    }
}

/// (T, burst) of the floor for the same quota.
fn floor_params(allowed: bool) -> (u64, u64) {
    if allowed {
        (1, FAST)
    } else {
        (3_600_000_000_000, 1)
    }
}

fn bench_path(c: &mut Criterion, allowed: bool) {
    let name = if allowed {
        "direct/allowed"
    } else {
        "direct/denied"
    };
    let mut g = c.benchmark_group(name);
    g.throughput(criterion::Throughput::Elements(1));
    let (t, burst) = floor_params(allowed);

    // Each contender starts full; on the denied path the single permit is spent first, and
    // every measured call must then be denied (asserted after the run, outside the timing).
    let floor_default = DirectFloor::new(tollgate::DefaultClock::new(), t, burst);
    let _ = floor_default.try_acquire();
    g.bench_function("floor/default", |b| {
        b.iter(|| black_box(&floor_default).try_acquire())
    });
    assert_eq!(floor_default.try_acquire(), allowed);

    let floor_std = DirectFloor::new(StdClock::new(), t, burst);
    let _ = floor_std.try_acquire();
    g.bench_function("floor/std", |b| {
        b.iter(|| black_box(&floor_std).try_acquire())
    });
    assert_eq!(floor_std.try_acquire(), allowed);

    let floor_q = DirectFloor::new(RawQuanta::new(), t, burst);
    let _ = floor_q.try_acquire();
    g.bench_function("floor/quanta", |b| {
        b.iter(|| black_box(&floor_q).try_acquire())
    });
    assert_eq!(floor_q.try_acquire(), allowed);

    let tg = RateLimiter::new(tollgate_quota(allowed));
    let _ = tg.try_acquire();
    g.bench_function("tollgate/default", |b| {
        b.iter(|| black_box(&tg).try_acquire())
    });
    assert_eq!(tg.try_acquire(), allowed);

    let ts = RateLimiter::builder(tollgate_quota(allowed))
        .clock(StdClock::new())
        .build();
    let _ = ts.try_acquire();
    g.bench_function("tollgate/std", |b| b.iter(|| black_box(&ts).try_acquire()));
    assert_eq!(ts.try_acquire(), allowed);

    {
        let tq = RateLimiter::builder(tollgate_quota(allowed))
            .clock(tollgate::QuantaClock::new())
            .build();
        let _ = tq.try_acquire();
        g.bench_function("tollgate/quanta", |b| {
            b.iter(|| black_box(&tq).try_acquire())
        });
        assert_eq!(tq.try_acquire(), allowed);
    }

    let gq = governor::RateLimiter::direct(governor_quota(allowed));
    let _ = gq.check();
    g.bench_function("governor/quanta", |b| {
        b.iter(|| black_box(&gq).check().is_ok())
    });
    assert_eq!(gq.check().is_ok(), allowed);

    let gs = governor::RateLimiter::direct_with_clock(
        governor_quota(allowed),
        governor::clock::MonotonicClock,
    );
    let _ = gs.check();
    g.bench_function("governor/std", |b| {
        b.iter(|| black_box(&gs).check().is_ok())
    });
    assert_eq!(gs.check().is_ok(), allowed);

    g.finish();
}

fn direct(c: &mut Criterion) {
    bench_path(c, true);
    bench_path(c, false);
}

/// The clock reads alone: the part of every floor no limiter can avoid.
fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    let default_clock = tollgate::DefaultClock::new();
    g.bench_function("default", |b| b.iter(|| black_box(&default_clock).now()));
    let std_clock = StdClock::new();
    g.bench_function("std", |b| b.iter(|| black_box(&std_clock).now()));
    let q = RawQuanta::new();
    g.bench_function("quanta", |b| b.iter(|| black_box(&q).now()));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = direct, clocks
}
criterion_main!(benches);
