//! The interleaved-rounds harness behind every summary table.
//!
//! This machine is shared and noisy, so running contender A for 3 s and then B for 3 s (what a
//! plain criterion group does) lets a neighbour's build land on one of them. Here each round
//! runs every contender for one short batch, in a rotating order; a contender's time is the
//! median over rounds, and a ratio is the median over rounds of the *paired* per-round ratio,
//! so load that changes between rounds cancels out. The spread printed next to a ratio is its
//! interquartile range over the rounds.

use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use super::{median, quantile};

/// One contender: runs `iters` operations and returns the wall time they took.
pub struct Case<'a> {
    pub name: String,
    /// Operations per call of `run` (threads x iters for the multi-threaded cases).
    pub ops_per_iter: u64,
    pub run: Box<dyn FnMut(u64) -> Duration + 'a>,
}

/// A single-threaded contender: `op(i)` for the next `iters` values of `i`, timed as one batch.
/// `i` goes on from batch to batch (a case's key sequence is walked, not restarted: with short
/// batches a restart would replay the same few keys, all in cache, and a 1M-key table would be
/// measured as a hot one).
pub fn case<'a>(name: &str, mut op: impl FnMut(u64) + 'a) -> Case<'a> {
    let mut next = 0u64;
    Case {
        name: name.to_string(),
        ops_per_iter: 1,
        run: Box::new(move |iters| {
            let first = next;
            next = next.wrapping_add(iters);
            let start = Instant::now();
            for k in 0..iters {
                op(first.wrapping_add(k));
            }
            start.elapsed()
        }),
    }
}

/// Runs `op(thread, i)` for `iters` on each of `threads` threads released together by a
/// barrier; returns the longest thread's time (the aggregate's wall time).
pub fn on_threads(threads: usize, iters: u64, op: &(dyn Fn(usize, u64) + Sync)) -> Duration {
    let barrier = Barrier::new(threads);
    let longest = Mutex::new(Duration::ZERO);
    std::thread::scope(|sc| {
        for t in 0..threads {
            let (barrier, longest) = (&barrier, &longest);
            sc.spawn(move || {
                barrier.wait();
                let start = Instant::now();
                for i in 0..iters {
                    op(t, i);
                }
                let d = start.elapsed();
                let mut l = longest.lock().unwrap();
                *l = (*l).max(d);
            });
        }
    });
    longest.into_inner().unwrap()
}

/// A contender run by `threads` threads at once; its ns/op is wall time / total operations.
/// `i` goes on from batch to batch, as in [`case`].
pub fn threaded<'a>(name: &str, threads: usize, op: impl Fn(usize, u64) + Sync + 'a) -> Case<'a> {
    let mut next = 0u64;
    Case {
        name: name.to_string(),
        ops_per_iter: threads as u64,
        run: Box::new(move |iters| {
            let first = next;
            next = next.wrapping_add(iters);
            on_threads(threads, iters, &|t, i| op(t, first.wrapping_add(i)))
        }),
    }
}

/// How many interleaved rounds a comparison runs.
pub struct Settings {
    pub rounds: usize,
    /// Calls per contender per round (`--batch N`). Without it each single-threaded contender's
    /// batch is sized from its warm-up to last about [`BATCH_TIME`]: short enough that most
    /// batches run without a preemption on a loaded machine, whatever the contender costs.
    pub batch: Option<u64>,
}

/// The wall time a single-threaded contender's batch aims at when no `--batch` is given (a
/// scheduler slice is a few ms; a batch much shorter than that is rarely cut by one).
pub const BATCH_TIME: Duration = Duration::from_micros(200);

/// The rounds a table runs unless `--rounds N` says otherwise (21 with `--quick`).
pub const ROUNDS: usize = 201;

impl Settings {
    /// `rounds` rounds (21 with `--quick`), or `--rounds N`; `--batch N` as above.
    pub fn from_args(rounds: usize) -> Settings {
        let args: Vec<String> = std::env::args().collect();
        let value = |flag: &str| {
            let i = args.iter().position(|a| a == flag)?;
            args.get(i + 1)?.parse::<u64>().ok()
        };
        Settings {
            rounds: value("--rounds")
                .map_or(if super::quick() { 21 } else { rounds }, |r| r as usize),
            batch: value("--batch"),
        }
    }
}

/// Runs `cases` in interleaved rounds, after one untimed warm-up batch each (fills caches,
/// grows maps, faults pages in); returns `times[case][round]` in ns/op, and each case's batch
/// (calls per round): `--batch N` if given; else `iters` for a threaded case (its threads
/// start per batch) and, for the single-threaded ones, one count for all of them: as many
/// calls as the slowest one's warm-up says fit in [`BATCH_TIME`] (at least 16, at most
/// `iters`). One count, so every contender replays the
/// same stretch of keys per batch and finds the cache as warm as the others do.
pub fn measure_sized(
    s: &Settings,
    iters: u64,
    cases: &mut [Case<'_>],
) -> (Vec<Vec<f64>>, Vec<u64>) {
    let warm = s.batch.unwrap_or(iters);
    let slowest = cases
        .iter_mut()
        .map(|c| {
            let d = (c.run)(warm);
            d.as_nanos().max(1) as f64 / (warm * c.ops_per_iter) as f64
        })
        .fold(0.0f64, f64::max);
    let sized = ((BATCH_TIME.as_nanos() as f64 / slowest) as u64).clamp(16, iters.max(16));
    let batches: Vec<u64> = cases
        .iter()
        .map(|c| match s.batch {
            Some(b) => b,
            None if c.ops_per_iter > 1 => iters,
            None => sized,
        })
        .collect();
    let n = cases.len();
    let mut times = vec![Vec::with_capacity(s.rounds); n];
    for round in 0..s.rounds {
        for k in 0..n {
            let i = (k + round) % n;
            let c = &mut cases[i];
            let d = (c.run)(batches[i]);
            times[i].push(d.as_nanos() as f64 / (batches[i] * c.ops_per_iter) as f64);
        }
    }
    (times, batches)
}

/// How a table's batches are described: `"20000 calls"`, or the time-sized count.
pub fn describe_batches(s: &Settings, batches: &[u64]) -> String {
    match s.batch {
        Some(b) => format!("{b} calls"),
        None => {
            let (lo, hi) = (batches.iter().min(), batches.iter().max());
            let calls = if lo == hi {
                format!("{} calls", lo.unwrap_or(&0))
            } else {
                format!("{}-{} calls", lo.unwrap_or(&0), hi.unwrap_or(&0))
            };
            format!(
                "{calls} (sized to about {} us for the slowest)",
                BATCH_TIME.as_micros()
            )
        }
    }
}

/// Contender `i` against contender `r`: the median over rounds of the paired ratio
/// `times[i][k] / times[r][k]`, and its interquartile range `(median, q1, q3)`.
pub fn paired_ratio(times: &[Vec<f64>], i: usize, r: usize) -> (f64, f64, f64) {
    let mut ratios: Vec<f64> = times[i].iter().zip(&times[r]).map(|(a, b)| a / b).collect();
    let (lo, hi) = (quantile(&mut ratios, 0.25), quantile(&mut ratios, 0.75));
    (median(&mut ratios), lo, hi)
}

/// Runs `cases` in interleaved rounds ([`measure_sized`]); prints one markdown table with the median
/// ns/op and the paired ratio against each contender named in `refs` (median, and in brackets
/// the interquartile range over rounds).
pub fn compare(title: &str, s: &Settings, iters: u64, refs: &[&str], mut cases: Vec<Case<'_>>) {
    let load_before = super::load_average();
    let (times, batches) = measure_sized(s, iters, &mut cases);
    let load_after = super::load_average();
    let ref_idx: Vec<usize> = refs
        .iter()
        .map(|r| {
            cases
                .iter()
                .position(|c| c.name == *r)
                .unwrap_or_else(|| panic!("no contender {r}"))
        })
        .collect();
    println!("\n### {title}\n");
    println!(
        "{}, {} cores; load average (1 min) {load_before} at start, {load_after} at end; \
         {} rounds of {}\n",
        super::cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        s.rounds,
        describe_batches(s, &batches),
    );
    println!(
        "(x REF = median over rounds of this ns/op / REF ns/op, [interquartile range]; \
         below 1 is faster)\n"
    );
    print!("| contender | median ns/op |");
    for r in refs {
        print!(" x {r} |");
    }
    println!();
    print!("|---|---:|");
    for _ in refs {
        print!("---:|");
    }
    println!();
    for (i, case) in cases.iter().enumerate() {
        print!("| {} | {:.1} |", case.name, median(&mut times[i].clone()));
        for &r in &ref_idx {
            if i == r {
                print!(" 1 |");
            } else {
                let (m, lo, hi) = paired_ratio(&times, i, r);
                print!(" {m:.2} [{lo:.2}-{hi:.2}] |");
            }
        }
        println!();
    }
}
