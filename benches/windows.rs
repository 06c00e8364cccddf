//! The window algorithms next to GCRA, same run: ns per decision (direct allowed and denied;
//! keyed over 1, 10k and 1M `u64` keys) and bytes per key at 1M keys.
//!
//! The machine is shared and noisy, so each round runs every contender for one batch in a
//! rotating order (`support/rounds.rs`); a time is the median over rounds, and a ratio the
//! median over rounds of the per-round ratio to GCRA. Memory: resident-set growth while 1M keys are inserted, each
//! algorithm in a fresh child process (this binary re-runs itself with `--child`), from
//! `/proc/self/statm` (Linux).
//!
//! Run (in benches/): `cargo bench --bench windows` (`-- --quick` for a smoke run). Prints markdown.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use tollgate::{
    Algorithm, FixedWindow, Gcra, KeyedRateLimiter, Quota, RateLimiter, SlidingLog, SlidingWindow,
    WeightedWindow,
};

mod support;
use support::rounds::{measure_sized, paired_ratio, Case, Settings, ROUNDS};
use support::{median, quick, rss_bytes};

const NAMES: [&str; 5] = [
    "GCRA",
    "FixedWindow",
    "SlidingWindow(8)",
    "WeightedWindow",
    "SlidingLog",
];

/// Always allowed at tens of ns per call: a million per ms (one per ns). The log keeps the
/// last millisecond's grants: tens of thousands of entries on a hot key.
fn allowing() -> Quota {
    Quota::new(1_000_000, Duration::from_millis(1)).unwrap()
}

/// One per hour: after the first, always denied.
fn denying() -> Quota {
    Quota::per_hour(1).unwrap()
}

/// Runs `f` with the contender `i`'s algorithm (a closure generic over the algorithm).
macro_rules! with_alg {
    ($i:expr, $f:ident $(, $arg:expr)*) => {
        match $i {
            0 => $f(Gcra $(, $arg)*),
            1 => $f(FixedWindow::new() $(, $arg)*),
            2 => $f(SlidingWindow::new(8) $(, $arg)*),
            3 => $f(WeightedWindow $(, $arg)*),
            _ => $f(SlidingLog $(, $arg)*),
        }
    };
}

type Op = Box<dyn FnMut(u64) -> Duration>;

fn direct<A: Algorithm>(alg: A, allowed: bool) -> Op {
    let q = if allowed { allowing() } else { denying() };
    let l = RateLimiter::builder(q).algorithm(alg).unwrap().build();
    if !allowed {
        assert!(l.try_acquire());
    }
    Box::new(move |iters| {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(l.try_acquire());
        }
        start.elapsed()
    })
}

/// xorshift64*, seeded: every contender sees the same keys.
fn keys(universe: u64, len: usize) -> Vec<u64> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_F491_4F6C_DD1D) % universe
        })
        .collect()
}

fn keyed<A: Algorithm>(alg: A, universe: u64) -> Op {
    let l = KeyedRateLimiter::<u64>::builder(allowing())
        .algorithm(alg)
        .unwrap()
        .build();
    for k in 0..universe {
        let _ = l.try_acquire(&k); // every key tracked before timing
    }
    let seq = keys(universe, 1 << 20);
    let mut at = 0;
    Box::new(move |iters| {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(l.try_acquire(&seq[at & (seq.len() - 1)]));
            at += 1;
        }
        start.elapsed()
    })
}

/// One table row per case: each contender's median ns/op and its median paired ratio to GCRA
/// (the shared interleaved-rounds harness, laid out one row per case).
fn compare(case: &str, ops: Vec<Op>, s: &Settings, batch: u64) -> String {
    let mut cases: Vec<Case<'_>> = ops
        .into_iter()
        .zip(NAMES)
        .map(|(run, name)| Case {
            name: name.to_string(),
            ops_per_iter: 1,
            run,
        })
        .collect();
    let (times, batches) = measure_sized(s, batch, &mut cases);
    let cells: Vec<String> = (0..times.len())
        .map(|i| {
            let ns = median(&mut times[i].clone());
            if i == 0 {
                format!("{ns:.1}")
            } else {
                format!("{ns:.1} ({:.2}x)", paired_ratio(&times, i, 0).0)
            }
        })
        .collect();
    println!("| {case} | {} |", cells.join(" | "));
    format!("{case} {}", batches.iter().max().unwrap_or(&0))
}

const MEM_KEYS: u64 = 1_000_000;

/// In a child: inserts 1M keys (one grant each, one hour windows so nothing leaves) and prints
/// the resident-set growth per key.
fn child<A: Algorithm>(alg: A) {
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_hour(10).unwrap())
        .algorithm(alg)
        .unwrap()
        .build();
    let before = rss_bytes();
    for k in 0..MEM_KEYS {
        assert!(l.try_acquire(&k));
    }
    let after = rss_bytes();
    assert_eq!(l.len() as u64, MEM_KEYS);
    println!("{:.1}", (after - before) as f64 / MEM_KEYS as f64);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let which: usize = args[i + 1].parse().unwrap();
        with_alg!(which, child);
        return;
    }
    // `--rounds N` / `--batch N` as in `compare`; `--no-memory` skips the bytes-per-key row.
    let s = Settings::from_args(ROUNDS);
    // The warm-up's calls, and the most a time-sized batch takes.
    let (rounds, batch) = (s.rounds, if quick() { 100_000 } else { 400_000 });

    println!("### Window algorithms next to GCRA (same run)");
    println!();
    println!(
        "ns per decision, median of {rounds} interleaved rounds of {}; in brackets the \
         median per-round ratio to GCRA. {}, load average (1 min) {} at start.",
        match s.batch {
            Some(b) => format!("{b} calls"),
            None =>
                "one batch size per row, sized to about 200 us for its slowest contender (below)"
                    .to_string(),
        },
        support::cpu_model(),
        support::load_average()
    );
    println!();
    println!("| case | {} |", NAMES.join(" | "));
    println!("|---|{}", "---:|".repeat(NAMES.len()));
    let all = |make: &dyn Fn(usize) -> Op| (0..NAMES.len()).map(make).collect::<Vec<_>>();
    let mut batches = vec![
        compare(
            "direct, allowed",
            all(&|i| with_alg!(i, direct, true)),
            &s,
            batch,
        ),
        compare(
            "direct, denied",
            all(&|i| with_alg!(i, direct, false)),
            &s,
            batch,
        ),
    ];
    for (name, universe) in [
        ("keyed, 1 key", 1),
        ("keyed, 10k keys", 10_000),
        ("keyed, 1M keys", 1_000_000),
    ] {
        let ops = all(&|i| with_alg!(i, keyed, universe));
        batches.push(compare(name, ops, &s, batch));
    }
    let footnote = || println!("\nCalls per batch: {}.", batches.join("; "));

    if std::env::args().any(|a| a == "--no-memory") {
        footnote();
        return;
    }
    // Bytes per key, each algorithm in a fresh process.
    let exe = std::env::current_exe().unwrap();
    let cells: Vec<String> = (0..NAMES.len())
        .map(|i| {
            let out = Command::new(&exe)
                .args(["--child", &i.to_string()])
                .output()
                .expect("run the memory child");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
        .collect();
    println!(
        "| bytes per key at 1M `u64` keys (RSS) | {} |",
        cells.join(" | ")
    );
    footnote();
}
