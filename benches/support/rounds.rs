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

/// A single-threaded contender: `op(i)` for `i` in `0..iters`, timed as one batch.
pub fn case<'a>(name: &str, mut op: impl FnMut(u64) + 'a) -> Case<'a> {
    Case {
        name: name.to_string(),
        ops_per_iter: 1,
        run: Box::new(move |iters| {
            let start = Instant::now();
            for i in 0..iters {
                op(i);
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
pub fn threaded<'a>(name: &str, threads: usize, op: impl Fn(usize, u64) + Sync + 'a) -> Case<'a> {
    Case {
        name: name.to_string(),
        ops_per_iter: threads as u64,
        run: Box::new(move |iters| on_threads(threads, iters, &op)),
    }
}

/// How many interleaved rounds a comparison runs.
pub struct Settings {
    pub rounds: usize,
    /// Calls per contender per round, overriding each table's own (`--batch N`): shorter
    /// batches are preempted less often on a loaded machine.
    pub batch: Option<u64>,
}

impl Settings {
    /// `rounds` rounds (5 with `--quick`), or `--rounds N`; `--batch N` as above.
    pub fn from_args(rounds: usize) -> Settings {
        let args: Vec<String> = std::env::args().collect();
        let value = |flag: &str| {
            let i = args.iter().position(|a| a == flag)?;
            args.get(i + 1)?.parse::<u64>().ok()
        };
        Settings {
            rounds: value("--rounds")
                .map_or(if super::quick() { 5 } else { rounds }, |r| r as usize),
            batch: value("--batch"),
        }
    }
}

/// Runs `cases` in interleaved rounds, after one untimed warm-up batch each (fills caches,
/// grows maps, faults pages in); returns `times[case][round]` in ns/op.
pub fn measure(s: &Settings, iters: u64, cases: &mut [Case<'_>]) -> Vec<Vec<f64>> {
    let iters = s.batch.unwrap_or(iters);
    let n = cases.len();
    for c in cases.iter_mut() {
        (c.run)(iters);
    }
    let mut times = vec![Vec::with_capacity(s.rounds); n];
    for round in 0..s.rounds {
        for k in 0..n {
            let i = (k + round) % n;
            let c = &mut cases[i];
            let d = (c.run)(iters);
            times[i].push(d.as_nanos() as f64 / (iters * c.ops_per_iter) as f64);
        }
    }
    times
}

/// Contender `i` against contender `r`: the median over rounds of the paired ratio
/// `times[i][k] / times[r][k]`, and its interquartile range `(median, q1, q3)`.
pub fn paired_ratio(times: &[Vec<f64>], i: usize, r: usize) -> (f64, f64, f64) {
    let mut ratios: Vec<f64> = times[i].iter().zip(&times[r]).map(|(a, b)| a / b).collect();
    let (lo, hi) = (quantile(&mut ratios, 0.25), quantile(&mut ratios, 0.75));
    (median(&mut ratios), lo, hi)
}

/// Runs `cases` in interleaved rounds ([`measure`]); prints one markdown table with the median
/// ns/op and the paired ratio against each contender named in `refs` (median, and in brackets
/// the interquartile range over rounds).
pub fn compare(title: &str, s: &Settings, iters: u64, refs: &[&str], mut cases: Vec<Case<'_>>) {
    let load_before = super::load_average();
    let times = measure(s, iters, &mut cases);
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
         {} rounds of {} calls\n",
        super::cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        s.rounds,
        s.batch.unwrap_or(iters),
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
