//! Concurrency limits, same run, interleaved rounds (support/rounds.rs):
//!
//! - uncontended acquire + release: `ConcurrencyLimiter::try_acquire` and dropping the permit,
//!   against `tokio::sync::Semaphore::try_acquire` and dropping its permit;
//! - refused at capacity: `try_acquire` on a limit of 1 whose permit is held, against tokio's
//!   `try_acquire` failing the same way;
//! - 2 threads on one limit (limit 64, so both are granted: the cost is the shared word);
//! - keyed acquire + release at 1 and 10k keys (`u64`): `KeyedConcurrencyLimiter` against the
//!   recipe `DashMap<u64, Arc<Semaphore>>` (look up, else insert; clone the `Arc`;
//!   `try_acquire_owned`), same hasher (foldhash) and tollgate's shard count;
//! - bytes per idle-but-tracked key at 1M keys: RSS growth, each contender in a fresh process
//!   (this binary re-runs itself with `--child NAME`, as memory.rs does).
//!
//! Run (in benches/): `cargo bench --bench concurrency [-- --quick] [--only direct]`. Prints
//! markdown.
//! `-- --hot-loop` instead times 20M keyed and direct `try_acquire` + release on one key in a
//! plain loop (for `perf record`).

use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::Semaphore;
use tollgate::{ConcurrencyLimiter, KeyedConcurrencyLimiter};

mod support;
use support::rounds::{case, compare, threaded, Settings, ROUNDS};
use support::{median, quick, random_u64_keys, rss_bytes};

const LIMIT: u64 = 64;

type Recipe = DashMap<u64, Arc<Semaphore>, foldhash::fast::RandomState>;

fn recipe() -> Recipe {
    DashMap::with_hasher_and_shard_amount(
        foldhash::fast::RandomState::default(),
        tollgate::DEFAULT_SHARDS,
    )
}

/// The recipe's acquire + release of one permit for `key`.
#[inline(always)]
fn recipe_round(map: &Recipe, key: u64) -> bool {
    let sem = match map.get(&key) {
        Some(s) => s.clone(),
        None => map
            .entry(key)
            .or_insert_with(|| Arc::new(Semaphore::new(LIMIT as usize)))
            .clone(),
    };
    let permit = sem.try_acquire_owned();
    black_box(&permit);
    permit.is_ok()
}

/// `try_acquire` and dropping the permit: granted (limit 64, nothing held), or `refused` at
/// capacity (limit 1, its permit held: every call refused).
fn direct(s: &Settings, refused: bool) {
    let limit = if refused { 1 } else { LIMIT };
    let tg = ConcurrencyLimiter::new(limit).unwrap();
    let tokio_sem = Semaphore::new(limit as usize);
    let held = refused.then(|| (tg.try_acquire().unwrap(), tokio_sem.try_acquire().unwrap()));
    let cases = vec![
        case("tollgate ConcurrencyLimiter", |_| {
            let p = black_box(&tg).try_acquire();
            black_box(&p);
        }),
        case("tokio Semaphore", |_| {
            let p = black_box(&tokio_sem).try_acquire();
            black_box(&p);
        }),
    ];
    let title = if refused {
        "uncontended try_acquire refused at capacity"
    } else {
        "uncontended try_acquire + release (drop)"
    };
    compare(title, s, 500_000, &["tokio Semaphore"], cases);
    drop(held);
    assert_eq!(tg.in_flight(), 0);
}

fn direct_threads(s: &Settings) {
    let tg = ConcurrencyLimiter::new(LIMIT).unwrap();
    let tokio_sem = Semaphore::new(LIMIT as usize);
    let cases = vec![
        threaded("tollgate ConcurrencyLimiter, 2 threads", 2, |_, _| {
            let p = black_box(&tg).try_acquire();
            black_box(&p);
        }),
        threaded("tokio Semaphore, 2 threads", 2, |_, _| {
            let p = black_box(&tokio_sem).try_acquire();
            black_box(&p);
        }),
    ];
    compare(
        "2 threads, one limit: try_acquire + release (ns per operation, aggregate)",
        s,
        200_000,
        &["tokio Semaphore, 2 threads"],
        cases,
    );
}

fn keyed(s: &Settings, universe: u64) {
    let keys = random_u64_keys(universe, 1 << 16, 7);
    let mask = keys.len() - 1;
    let tg = KeyedConcurrencyLimiter::<u64>::new(LIMIT).unwrap();
    let map = recipe();
    let cases = vec![
        case("tollgate KeyedConcurrencyLimiter", |i| {
            let p = tg.try_acquire(&keys[i as usize & mask]);
            black_box(&p);
        }),
        case("DashMap<u64, Arc<Semaphore>>", |i| {
            black_box(recipe_round(&map, keys[i as usize & mask]));
        }),
    ];
    compare(
        &format!("keyed try_acquire + release, {universe} keys (u64)"),
        s,
        200_000,
        &["DashMap<u64, Arc<Semaphore>>"],
        cases,
    );
}

const MEM_KEYS: u64 = 1_000_000;
const MEM_CONTENDERS: &[&str] = &[
    "tollgate KeyedConcurrencyLimiter",
    "DashMap<u64, Arc<Semaphore>>",
];

/// In the child: tracks `MEM_KEYS` idle keys (one acquire + release each, no sweep).
fn child(name: &str) {
    let before;
    let len = match name {
        "tollgate KeyedConcurrencyLimiter" => {
            let l = KeyedConcurrencyLimiter::<u64>::new(LIMIT).unwrap();
            before = rss_bytes();
            (0..MEM_KEYS).for_each(|k| assert!(l.try_acquire(&k).is_some()));
            l.len()
        }
        "DashMap<u64, Arc<Semaphore>>" => {
            let m = recipe();
            before = rss_bytes();
            (0..MEM_KEYS).for_each(|k| assert!(recipe_round(&m, k)));
            m.len()
        }
        other => panic!("unknown contender {other}"),
    };
    assert_eq!(len as u64, MEM_KEYS);
    println!("{}", rss_bytes().saturating_sub(before));
    std::process::exit(0);
}

fn memory() {
    let runs = if quick() { 1 } else { 3 };
    let exe = std::env::current_exe().expect("own path");
    println!("\n### bytes per idle-but-tracked key at 1M keys (RSS growth, own process each, median of {runs})\n");
    println!("| contender | bytes/key | x recipe |");
    println!("|---|---:|---:|");
    let per_key: Vec<f64> = MEM_CONTENDERS
        .iter()
        .map(|name| {
            let mut xs: Vec<f64> = (0..runs)
                .map(|_| {
                    let out = Command::new(&exe)
                        .args(["--child", name])
                        .output()
                        .expect("run child");
                    assert!(out.status.success(), "{name}: {out:?}");
                    let bytes: f64 = String::from_utf8_lossy(&out.stdout)
                        .trim()
                        .parse()
                        .expect("child prints bytes");
                    bytes / MEM_KEYS as f64
                })
                .collect();
            median(&mut xs)
        })
        .collect();
    for (name, b) in MEM_CONTENDERS.iter().zip(&per_key) {
        println!("| {name} | {b:.1} | {:.2} |", b / per_key[1]);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1]);
        return;
    }
    if args.iter().any(|a| a == "--hot-loop") {
        let tg = KeyedConcurrencyLimiter::<u64>::new(LIMIT).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..20_000_000u64 {
            let p = tg.try_acquire(black_box(&0));
            black_box(&p);
        }
        println!("keyed {:?}/op", t.elapsed() / 20_000_000);
        let d = ConcurrencyLimiter::new(LIMIT).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..20_000_000u64 {
            let p = black_box(&d).try_acquire();
            black_box(&p);
        }
        println!("direct {:?}/op", t.elapsed() / 20_000_000);
        return;
    }
    let s = Settings::from_args(ROUNDS);
    println!(
        "tollgate concurrency: {} interleaved rounds; ratios are medians of per-round ratios",
        s.rounds
    );
    // `--only direct`: the single-threaded direct tables alone (granted and refused).
    let only_direct = args
        .windows(2)
        .any(|w| w[0] == "--only" && w[1] == "direct");
    direct(&s, false);
    direct(&s, true);
    if only_direct {
        return;
    }
    direct_threads(&s);
    for universe in [1, 10_000] {
        keyed(&s, universe);
    }
    memory();
}
