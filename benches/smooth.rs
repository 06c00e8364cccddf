//! `SmoothRateLimiter::try_acquire` (Guava semantics, lock-free), bursty and warming up, next to
//! GCRA's `RateLimiter::try_acquire` and next to the same Guava rules behind one `Mutex` (what
//! Guava does: `tests/support/guava_port.rs`), all on one clock, `StdClock`
//! (`Instant`), so that the ratios compare the limiters and not their clocks.
//!
//! Two parts in one run:
//! 1. criterion's ns/op for each contender, allowed path and denied path;
//! 2. a summary table from interleaved rounds (`support/rounds.rs`): each round runs every
//!    contender for a short batch in a rotating order; a contender's figure is its median over rounds, and a ratio is
//!    the median of the per-round paired ratios, so load that changes between rounds (this
//!    machine is shared) cancels out. It includes two threads hammering one limiter.
//!
//! Run (in benches/): `cargo bench --bench smooth` (`-- --quick` for a short run).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use portable_atomic::AtomicU128;

use criterion::Criterion;
use tollgate::{Quota, RateLimiter, SmoothRateLimiter, StdClock};

#[path = "../tests/support/guava_port.rs"]
mod guava_port;
use guava_port::{GuavaPort, MutexGuava};

mod support;
use support::quick;
use support::rounds::{case, compare, threaded, Settings, ROUNDS};

/// Allowed path: 10^12 permits per second, so every permit's cost truncates to 0 us and every
/// call is granted, and every call stores (a saved permit is spent).
const FAST: f64 = 1e12;
/// Denied path: one permit per hour, spent before measuring.
const SLOW: f64 = 1.0 / 3600.0;

/// A named `try_acquire` of one contender.
type Op<'a> = (&'static str, Box<dyn Fn() -> bool + Sync + 'a>);

/// The five contenders for one path.
struct Contenders {
    bursty: SmoothRateLimiter,
    warming: SmoothRateLimiter,
    gcra: RateLimiter,
    mutex: MutexGuava<StdClock>,
    /// The warming-up rules behind the mutex: the reference for `warming` (its rules cost
    /// more than the bursty ones).
    mutex_warming: MutexGuava<StdClock>,
}

impl Contenders {
    fn new(allowed: bool) -> Contenders {
        let rate = if allowed { FAST } else { SLOW };
        let quota = if allowed {
            Quota::per_second(1_000_000_000).unwrap()
        } else {
            Quota::per_hour(1).unwrap()
        };
        let c = Contenders {
            bursty: SmoothRateLimiter::builder(rate)
                .clock(StdClock::new())
                .build()
                .unwrap(),
            warming: SmoothRateLimiter::builder(rate)
                .warmup(Duration::from_secs(1))
                .clock(StdClock::new())
                .build()
                .unwrap(),
            gcra: RateLimiter::builder(quota).clock(StdClock::new()).build(),
            mutex: MutexGuava::new(GuavaPort::bursty(rate, 1.0), StdClock::new()),
            mutex_warming: MutexGuava::new(
                GuavaPort::warming_up(rate, 1_000_000, 3.0),
                StdClock::new(),
            ),
        };
        if !allowed {
            // Spend what there is (pay later: the first request of any size goes through).
            let _ = (c.bursty.try_acquire(), c.warming.try_acquire());
            let _ = (c.gcra.try_acquire(), c.mutex.try_acquire());
            let _ = c.mutex_warming.try_acquire();
        }
        c
    }

    fn ops(&self) -> [Op<'_>; 5] {
        [
            ("smooth bursty", Box::new(|| self.bursty.try_acquire())),
            ("smooth warming", Box::new(|| self.warming.try_acquire())),
            ("gcra", Box::new(|| self.gcra.try_acquire())),
            ("guava mutex port", Box::new(|| self.mutex.try_acquire())),
            (
                "guava mutex port warming",
                Box::new(|| self.mutex_warming.try_acquire()),
            ),
        ]
    }
}

fn criterion_part(c: &mut Criterion) {
    for allowed in [true, false] {
        let contenders = Contenders::new(allowed);
        let path = if allowed { "allowed" } else { "denied" };
        let mut g = c.benchmark_group(format!("smooth/{path}"));
        g.throughput(criterion::Throughput::Elements(1));
        for (name, op) in contenders.ops() {
            g.bench_function(name, |b| b.iter(|| black_box(op())));
        }
        g.finish();
    }
}

/// One markdown table: median ns/op and paired ratios against GCRA and the mutex port.
fn rounds(title: &str, allowed: bool, threads: usize, s: &Settings, iters: u64) {
    let contenders = Contenders::new(allowed);
    let cases = contenders
        .ops()
        .into_iter()
        .map(|(name, op)| {
            threaded(name, threads, move |_, _| {
                black_box(op());
            })
        })
        .collect();
    compare(
        title,
        s,
        iters,
        &["gcra", "guava mutex port", "guava mutex port warming"],
        cases,
    );
}

/// The bare primitives under the granted path, one thread, no clock: a 64-bit load + CAS (what
/// GCRA does), a 128-bit load + CAS (the smooth limiter's word, `portable_atomic::AtomicU128`
/// as the library uses it: `cmpxchg16b`, detected at run time unless the build enables it),
/// and an uncontended `std::sync::Mutex` lock, update, unlock (what the Guava port does); each
/// changes its state on every call, as a grant does.
fn primitives(s: &Settings, iters: u64) {
    let w64 = CachePadded::new(AtomicU64::new(0));
    let w128 = CachePadded::new(AtomicU128::new(0));
    let w64_alone = CachePadded::new(AtomicU64::new(0));
    let w128_alone = CachePadded::new(AtomicU128::new(0));
    let m = CachePadded::new(Mutex::new((0.0f64, 0i64)));
    let w128_hint = CachePadded::new(AtomicU128::new(0));
    let hint = CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let w128_clock = CachePadded::new(AtomicU128::new(0));
    let w128_hint_clock = CachePadded::new(AtomicU128::new(0));
    let hint_clock = CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let m_clock = CachePadded::new(Mutex::new((0.0f64, 0i64)));
    let w128_seq = CachePadded::new(AtomicU128::new(0));
    let params = CachePadded::new((AtomicU64::new(0), [0u64; 5].map(AtomicU64::new)));
    let shared = CachePadded::new((AtomicU128::new(0), [AtomicU64::new(0), AtomicU64::new(0)]));
    let cases = vec![
        case("64-bit load + CAS", |_| {
            let cur = w64.load(Ordering::Acquire);
            black_box(
                w64.compare_exchange(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok(),
            );
        }),
        case("128-bit load + CAS (cmpxchg16b)", |_| {
            let cur = w128.load(Ordering::Acquire);
            black_box(
                w128.compare_exchange(
                    cur,
                    cur + (1 << 64) + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok(),
            );
        }),
        // The expected value kept from the last success (one thread: every CAS succeeds), so
        // the word is not loaded: what a CAS costs without the load before it.
        case("128-bit CAS alone (no load)", {
            let mut last = w128_alone.load(Ordering::Acquire);
            move |_| {
                let new = last + (1 << 64) + 1;
                let ok = w128_alone
                    .compare_exchange(last, new, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                last = new;
                black_box(ok);
            }
        }),
        // A guessed expected value instead of a load: a copy of the last word written, kept
        // in two 64-bit halves beside it and stored after every success (tried in the
        // limiter and reverted: see BENCHMARKS.md).
        case("128-bit CAS from a 2 x 64-bit hint (+ 2 stores)", |_| {
            let guess = u128::from(hint[1].load(Ordering::Acquire)) << 64
                | u128::from(hint[0].load(Ordering::Acquire));
            let new = guess + (1 << 64) + 1;
            let ok = w128_hint
                .compare_exchange(guess, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if ok {
                hint[0].store(new as u64, Ordering::Release);
                hint[1].store((new >> 64) as u64, Ordering::Release);
            }
            black_box(ok);
        }),
        // The same three with a clock read before each, as in `try_acquire`: whether the
        // 16-byte load still costs when the previous CAS is not just before it.
        case("clock + 128-bit load + CAS", |_| {
            black_box(Instant::now());
            let cur = w128_clock.load(Ordering::Acquire);
            black_box(
                w128_clock
                    .compare_exchange(
                        cur,
                        cur + (1 << 64) + 1,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok(),
            );
        }),
        case("clock + 128-bit CAS from the hint", |_| {
            black_box(Instant::now());
            let guess = u128::from(hint_clock[1].load(Ordering::Acquire)) << 64
                | u128::from(hint_clock[0].load(Ordering::Acquire));
            let new = guess + (1 << 64) + 1;
            let ok = w128_hint_clock
                .compare_exchange(guess, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if ok {
                hint_clock[0].store(new as u64, Ordering::Release);
                hint_clock[1].store((new >> 64) as u64, Ordering::Release);
            }
            black_box(ok);
        }),
        // As the limiter laid it out: the hint on the word's cache line.
        case("clock + 128-bit CAS from the hint, same line", |_| {
            black_box(Instant::now());
            let (w, h) = (&shared.0, &shared.1);
            let guess = u128::from(h[1].load(Ordering::Acquire)) << 64
                | u128::from(h[0].load(Ordering::Acquire));
            let new = guess + (1 << 64) + 1;
            let ok = w
                .compare_exchange(guess, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if ok {
                h[0].store(new as u64, Ordering::Release);
                h[1].store((new >> 64) as u64, Ordering::Release);
            }
            black_box(ok);
        }),
        // What the limiter adds around its word: the parameters' sequence lock (an even `seq`,
        // five fields, `seq` again), all Acquire loads of one read-mostly line.
        case("clock + seqlock read + 128-bit load + CAS", |_| {
            black_box(Instant::now());
            let seq = params.0.load(Ordering::Acquire);
            let cur = w128_seq.load(Ordering::Acquire);
            let f = params.1.each_ref().map(|a| a.load(Ordering::Acquire));
            let again = params.0.load(Ordering::Acquire);
            let step = u128::from((f.iter().sum::<u64>() | 1) & 1);
            black_box(
                seq == again
                    && w128_seq
                        .compare_exchange(
                            cur,
                            cur + (step << 64) + step,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok(),
            );
        }),
        case("clock + Mutex lock + update + unlock", |_| {
            black_box(Instant::now());
            let mut g = m_clock.lock().unwrap();
            g.0 += 1.0;
            g.1 += 1;
            black_box(&*g);
        }),
        case("64-bit CAS alone (no load)", {
            let mut last = w64_alone.load(Ordering::Acquire);
            move |_| {
                let ok = w64_alone
                    .compare_exchange(last, last + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                last += 1;
                black_box(ok);
            }
        }),
        case("Mutex lock + update + unlock", |_| {
            let mut g = m.lock().unwrap();
            g.0 += 1.0;
            g.1 += 1;
            black_box(&*g);
        }),
    ];
    println!(
        "\n(`cmpxchg16b` enabled at compile time: {})",
        cfg!(target_feature = "cmpxchg16b")
    );
    compare(
        "primitives of the granted path (1 thread, no clock)",
        s,
        iters,
        &[
            "64-bit load + CAS",
            "Mutex lock + update + unlock",
            "clock + Mutex lock + update + unlock",
        ],
        cases,
    );
}

fn main() {
    // `--table-only` (what `run.sh` passes): the same-run table without the criterion groups.
    if !std::env::args().any(|a| a == "--table-only") {
        let mut c = Criterion::default()
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .configure_from_args();
        criterion_part(&mut c);
        c.final_summary();
    }

    let iters = if quick() { 50_000 } else { 200_000 };
    let s = Settings::from_args(ROUNDS);
    println!(
        "\n## Same-run comparison ({} interleaved rounds, every contender on `StdClock`)",
        s.rounds
    );
    primitives(&s, iters);
    rounds("try_acquire, allowed, 1 thread", true, 1, &s, iters);
    rounds("try_acquire, denied, 1 thread", false, 1, &s, iters);
    let two = "try_acquire, allowed, 2 threads on one limiter";
    rounds(two, true, 2, &s, iters / 2);
}
