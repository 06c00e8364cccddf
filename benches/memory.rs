//! Bytes per key at 1M keys: resident-set growth while inserting 1M keys, each contender in a
//! fresh process of its own (this binary re-runs itself with `--child NAME`), so one
//! contender's freed-but-retained heap never counts for another.
//!
//! RSS comes from `/proc/self/statm` (Linux). Keys stay hot (1 per hour) so nothing is swept.
//!
//! Run (in benches/): `cargo bench --bench memory` (or `bash benches/run.sh`). Prints markdown.

use std::num::NonZeroU32;
use std::process::Command;
use std::sync::atomic::AtomicU64;

use tollgate::{KeyedRateLimiter, Quota};

mod support;
use support::{median, quick, rss_bytes, string_key};

const KEYS: u64 = 1_000_000;

const CONTENDERS: &[&str] = &[
    "tollgate u64",
    "governor u64 (default)",
    "floor u64 (DashMap<u64, AtomicU64>)",
    "floor u64, tollgate's shard count",
    "tollgate String",
    "governor String (default)",
    "floor String (DashMap<String, AtomicU64>)",
];

/// In the child: builds one contender, inserts `KEYS` keys, prints the RSS growth per key.
fn child(name: &str) {
    let tq = Quota::per_hour(1).unwrap();
    let gq = governor::Quota::per_hour(NonZeroU32::new(1).unwrap());
    // Strings are made before the baseline reading: only the limiter's own copy counts.
    let strings: Vec<String> = if name.contains("String") {
        (0..KEYS).map(string_key).collect()
    } else {
        Vec::new()
    };
    let before = rss_bytes();
    let len = match name {
        "tollgate u64" => {
            let l = KeyedRateLimiter::<u64>::new(tq);
            (0..KEYS).for_each(|k| assert!(l.try_acquire(&k)));
            report(rss_bytes(), before, l.len())
        }
        "governor u64 (default)" => {
            let l = governor::RateLimiter::<u64, _, _>::keyed(gq);
            (0..KEYS).for_each(|k| assert!(l.check_key(&k).is_ok()));
            report(rss_bytes(), before, l.len())
        }
        "floor u64 (DashMap<u64, AtomicU64>)" => {
            let m = dashmap::DashMap::<u64, AtomicU64, foldhash::fast::RandomState>::default();
            (0..KEYS).for_each(|k| {
                m.insert(k, AtomicU64::new(1));
            });
            report(rss_bytes(), before, m.len())
        }
        "floor u64, tollgate's shard count" => {
            let m = dashmap::DashMap::<u64, AtomicU64, _>::with_hasher_and_shard_amount(
                foldhash::fast::RandomState::default(),
                tollgate::DEFAULT_SHARDS,
            );
            (0..KEYS).for_each(|k| {
                m.insert(k, AtomicU64::new(1));
            });
            report(rss_bytes(), before, m.len())
        }
        "tollgate String" => {
            let l = KeyedRateLimiter::<String>::new(tq);
            strings
                .iter()
                .for_each(|k| assert!(l.try_acquire(k.as_str())));
            report(rss_bytes(), before, l.len())
        }
        "governor String (default)" => {
            let l = governor::RateLimiter::<String, _, _>::keyed(gq);
            strings.iter().for_each(|k| assert!(l.check_key(k).is_ok()));
            report(rss_bytes(), before, l.len())
        }
        "floor String (DashMap<String, AtomicU64>)" => {
            let m = dashmap::DashMap::<String, AtomicU64, foldhash::fast::RandomState>::default();
            strings.iter().for_each(|k| {
                m.insert(k.clone(), AtomicU64::new(1));
            });
            report(rss_bytes(), before, m.len())
        }
        other => panic!("unknown contender {other}"),
    };
    assert_eq!(len as u64, KEYS);
    std::process::exit(0);
}

fn report(after: u64, before: u64, len: usize) -> usize {
    println!("{}", after.saturating_sub(before));
    len
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1]);
        return;
    }
    let runs = if quick() { 1 } else { 3 };
    let exe = std::env::current_exe().expect("own path");
    println!("\n### bytes per key at 1M keys (RSS growth, own process each, median of {runs})\n");
    println!("| contender | bytes/key | x governor (same key type) |");
    println!("|---|---:|---:|");
    let mut per_key = Vec::new();
    for name in CONTENDERS {
        let mut xs: Vec<f64> = (0..runs)
            .map(|_| {
                let out = Command::new(&exe)
                    .args(["--child", name])
                    .output()
                    .expect("run child");
                assert!(out.status.success(), "{name}: {:?}", out);
                let bytes: f64 = String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .expect("child prints bytes");
                bytes / KEYS as f64
            })
            .collect();
        per_key.push(median(&mut xs));
    }
    for (i, name) in CONTENDERS.iter().enumerate() {
        let gov = if i < 4 { per_key[1] } else { per_key[5] };
        println!("| {name} | {:.1} | {:.2} |", per_key[i], per_key[i] / gov);
    }
}
