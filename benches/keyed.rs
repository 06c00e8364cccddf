//! Keyed `try_acquire` under criterion: tollgate vs governor's default keyed limiter (DashMap,
//! SipHash, quanta) vs the floor (DashMap with tollgate's hasher + clock read + CAS), on one
//! hot key, 10k and 1M random keys, u64 and short String keys. Every key is present before
//! timing; all contenders replay the same pre-generated key sequence.
//!
//! The summary table with same-run ratios comes from `benches/compare.rs` (interleaved
//! rounds, robust to a noisy machine); this is the per-contender detail.
//!
//! Run (in benches/): `cargo bench --bench keyed`.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tollgate::{DefaultClock, KeyedRateLimiter, Quota};

mod support;
use support::{random_u64_keys, string_key, KeyedFloor};

const FAST: u64 = 1_000_000_000;
const SEQ: usize = 1 << 20;

fn keyed(c: &mut Criterion) {
    let tq = Quota::per_second(FAST).unwrap();
    let gq = governor::Quota::per_second(NonZeroU32::new(FAST as u32).unwrap());
    for universe in [1u64, 10_000, 1_000_000] {
        let seq: Vec<u64> = if universe == 1 {
            vec![0; SEQ]
        } else {
            random_u64_keys(universe, SEQ, 0x5EED)
        };
        let label = match universe {
            1 => "hot",
            10_000 => "10k",
            _ => "1M",
        };

        let mut g = c.benchmark_group(format!("keyed_u64/{label}"));
        let tg = KeyedRateLimiter::<u64>::new(tq);
        let gov = governor::RateLimiter::<u64, _, _>::keyed(gq);
        let fl =
            KeyedFloor::<u64, foldhash::fast::RandomState, _>::new(DefaultClock::new(), 1, FAST);
        for k in 0..universe {
            let _ = (tg.try_acquire(&k), gov.check_key(&k), fl.try_acquire(&k));
        }
        let mut i = 0usize;
        let mut next = || {
            i = (i + 1) & (SEQ - 1);
            seq[i]
        };
        g.bench_function(BenchmarkId::from_parameter("floor"), |b| {
            b.iter(|| fl.try_acquire(&next()))
        });
        g.bench_function(BenchmarkId::from_parameter("tollgate"), |b| {
            b.iter(|| tg.try_acquire(&next()))
        });
        g.bench_function(BenchmarkId::from_parameter("governor"), |b| {
            b.iter(|| gov.check_key(&next()).is_ok())
        });
        g.finish();
        drop((tg, gov, fl));

        let names: Vec<String> = (0..universe).map(string_key).collect();
        let mut g = c.benchmark_group(format!("keyed_string/{label}"));
        let tg = KeyedRateLimiter::<String>::new(tq);
        let gov = governor::RateLimiter::<String, _, _>::keyed(gq);
        let fl =
            KeyedFloor::<String, foldhash::fast::RandomState, _>::new(DefaultClock::new(), 1, FAST);
        for k in &names {
            let _ = (
                tg.try_acquire(k.as_str()),
                gov.check_key(k),
                fl.try_acquire(k.as_str()),
            );
        }
        let mut i = 0usize;
        let mut next = || {
            i = (i + 1) & (SEQ - 1);
            &names[seq[i] as usize]
        };
        g.bench_function(BenchmarkId::from_parameter("floor"), |b| {
            b.iter(|| fl.try_acquire(black_box(next().as_str())))
        });
        g.bench_function(BenchmarkId::from_parameter("tollgate"), |b| {
            b.iter(|| tg.try_acquire(black_box(next().as_str())))
        });
        g.bench_function(BenchmarkId::from_parameter("governor"), |b| {
            b.iter(|| gov.check_key(black_box(next())).is_ok())
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = keyed
}
criterion_main!(benches);
