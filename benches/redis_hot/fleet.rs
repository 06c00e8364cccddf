//! A fleet: several processes deciding on one key of one server at once (`--fleet`, default 4
//! processes of 16 tasks each; `--processes N`, `--tasks N`), each process this bench's own
//! binary started again as a child. Two scenarios, interleaved over rounds:
//!
//! - an allowed hot key (a limit far above the load): decisions/s of the whole fleet, Redis
//!   calls per decision and the p99 decision latency, for `CL.THROTTLE`, the GCRA script and
//!   the GCRA script with local batches;
//! - a binding limit ([`RATE`]/s, burst [`BURST`], demand far above it): every grant's time
//!   (1 ms buckets on the shared wall clock), summed over the fleet, gives the most granted in
//!   any 10 ms, 100 ms and 1 s window against the exact GCRA bound (`burst + L/T`) and the
//!   local batches' stated one (`burst + (L + refresh)/T`), and the rate granted at steady
//!   demand (after the first half second) against the limit's.
//!
//! The children start together at a wall-clock instant the parent gives them (after their
//! connection and script load), run for [`RUN`], and print one line each.

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionManager;
use tollgate::Quota;

use super::ALLOWED;
use super::{commandstats, deciding_usec, gcra, median, reset_stats, throttle, REFRESH, SHARE};

/// How long the fleet runs in each measurement.
const RUN: Duration = Duration::from_secs(2);
/// The binding limit: 20,000 per second (one permit every 50 µs), burst 200.
const RATE: u64 = 20_000;
const BURST: u64 = 200;
/// The allowed scenario's burst: far above what the fleet can draw in a run. The single
/// process's `ALLOWED_BURST` (10M) is not: a fleet deciding 6M per second spends its 10M and
/// the 2M that flow back in 2 s, and then measures Redis's refusals, not local grants.
const FLEET_BURST: u64 = 1_000_000_000;
/// Latencies are kept for one decision in this many.
const SAMPLE_EVERY: u64 = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cell,
    Plain,
    Batch,
}

const KINDS: [Kind; 3] = [Kind::Cell, Kind::Plain, Kind::Batch];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cell => "redis-cell CL.THROTTLE (native)",
            Kind::Plain => "tollgate GCRA script",
            Kind::Batch => "tollgate GCRA + local batches",
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Kind::Cell => "cell",
            Kind::Plain => "plain",
            Kind::Batch => "batch",
        }
    }

    fn parse(s: &str) -> Kind {
        KINDS
            .into_iter()
            .find(|k| k.arg() == s)
            .expect("a fleet kind")
    }
}

/// Nanoseconds since the Unix epoch on the wall clock every process shares.
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What one child reports.
struct Report {
    decisions: u64,
    /// Sampled decision latencies, in ns.
    latencies: Vec<u64>,
    /// Grants per millisecond from the start (the binding scenario only).
    grants: Vec<u64>,
}

impl Report {
    fn parse(line: &str) -> Report {
        let mut parts = line.split(' ');
        let mut next = |tag: &str| {
            assert_eq!(parts.next(), Some(tag), "child line: {line}");
            parts.next().unwrap_or_default().to_owned()
        };
        let decisions = next("decisions").parse().unwrap();
        let list = |s: String| -> Vec<u64> {
            s.split(',')
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().unwrap())
                .collect()
        };
        let latencies = list(next("latencies"));
        let grants = list(next("grants"));
        Report {
            decisions,
            latencies,
            grants,
        }
    }
}

/// The child's part: `--fleet-child KIND binding|allowed URL PREFIX TASKS START_NS`.
pub fn child(args: &[String]) {
    let [kind, scenario, url, prefix, tasks, start] = args else {
        panic!("--fleet-child KIND SCENARIO URL PREFIX TASKS START_NS");
    };
    let kind = Kind::parse(kind);
    let binding = scenario == "binding";
    let tasks: usize = tasks.parse().unwrap();
    let start: u64 = start.parse().unwrap();
    let end = start + RUN.as_nanos() as u64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let line = rt.block_on(async move {
        let client = redis::Client::open(url.as_str()).unwrap();
        let manager = ConnectionManager::new(client).await.unwrap();
        let (rate, burst) = if binding {
            (RATE, BURST)
        } else {
            (ALLOWED, FLEET_BURST)
        };
        let quota = Quota::per_second(rate).unwrap().with_burst(burst).unwrap();
        let limiter =
            (kind != Kind::Cell).then(|| gcra(&manager, quota, prefix, kind == Kind::Batch));
        // The script loaded and the connection up before the start.
        if let Some(l) = &limiter {
            let _ = l.check("{warm}").await.unwrap();
        }
        let key = if binding { "{fleetlim}" } else { "{fleetok}" };
        let cell_key = format!("{prefix}{key}");
        let buckets = RUN.as_millis() as usize + 1;
        let wait = start.saturating_sub(wall_ns());
        tokio::time::sleep(Duration::from_nanos(wait)).await;
        let mut handles = Vec::new();
        for _ in 0..tasks {
            let (limiter, manager, cell_key) = (limiter.clone(), manager.clone(), cell_key.clone());
            handles.push(tokio::spawn(async move {
                let (mut decisions, mut latencies) = (0u64, Vec::new());
                // Each task's own grant buckets, summed at the end: a shared atomic would be
                // written by every grant of every task, a cost the fleet would measure.
                // Only the binding scenario reports them.
                let mut grants = vec![0u64; if binding { buckets } else { 0 }];
                // One clock read per decision: its end is the next one's start (a decision's
                // latency then includes the few instructions of bookkeeping between them).
                let mut before = wall_ns();
                loop {
                    if before >= end {
                        return (decisions, latencies, grants);
                    }
                    let allowed = match &limiter {
                        Some(l) => l.check(key).await.unwrap().allowed,
                        None => throttle(&manager, &cell_key, burst, rate).await,
                    };
                    let after = wall_ns();
                    if allowed && binding {
                        let ms = (after.saturating_sub(start) / 1_000_000) as usize;
                        if let Some(b) = grants.get_mut(ms) {
                            *b += 1;
                        }
                    }
                    if decisions % SAMPLE_EVERY == 0 {
                        latencies.push(after - before);
                    }
                    decisions += 1;
                    before = after;
                }
            }));
        }
        let (mut decisions, mut latencies) = (0, Vec::new());
        let mut grants = vec![0u64; if binding { buckets } else { 0 }];
        for h in handles {
            let (d, l, g) = h.await.unwrap();
            decisions += d;
            latencies.extend(l);
            for (sum, x) in grants.iter_mut().zip(g) {
                *sum += x;
            }
        }
        drop(limiter); // local batches go back
        let join = |v: &mut dyn Iterator<Item = u64>| {
            v.map(|x| x.to_string()).collect::<Vec<_>>().join(",")
        };
        let grants = join(&mut grants.into_iter());
        format!(
            "decisions {decisions} latencies {} grants {grants}",
            join(&mut latencies.into_iter())
        )
    });
    println!("{line}");
}

/// Starts `processes` children on one scenario and collects their reports.
fn run_fleet(
    kind: Kind,
    binding: bool,
    url: &str,
    prefix: &str,
    processes: usize,
    tasks: usize,
) -> Vec<Report> {
    // Time enough for every child to start, connect and load its script.
    let start = wall_ns() + 1_500_000_000;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(&exe)
                .args(["--fleet-child", kind.arg()])
                .arg(if binding { "binding" } else { "allowed" })
                .args([url, prefix, &tasks.to_string(), &start.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "a fleet child failed");
            let text = String::from_utf8(out.stdout).unwrap();
            Report::parse(text.lines().last().unwrap_or_default())
        })
        .collect()
}

fn p99(mut v: Vec<u64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    v[(v.len() * 99 / 100).min(v.len() - 1)] as f64 / 1000.0
}

/// The most granted in any `len` consecutive 1 ms buckets.
fn most_in(buckets: &[u64], len: usize) -> u64 {
    buckets
        .windows(len.min(buckets.len()))
        .map(|w| w.iter().sum())
        .max()
        .unwrap_or(0)
}

/// The fleet's figures, appended to `out` as two tables.
pub async fn run(
    url: &str,
    stats: &mut ConnectionManager,
    rounds: usize,
    processes: usize,
    tasks: usize,
    out: &mut String,
) {
    // allowed[kind][round] = (decisions/s, calls per decision, p99 µs)
    let mut allowed: Vec<Vec<(f64, f64, f64)>> = KINDS.iter().map(|_| Vec::new()).collect();
    // binding[kind] = the fleet's grants per ms, summed, one per round
    let mut binding: Vec<Vec<Vec<u64>>> = KINDS.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for k in 0..KINDS.len() {
            let ki = (round + k) % KINDS.len();
            let kind = KINDS[ki];
            reset_stats(stats).await;
            let prefix = format!("fleet{round}{}", kind.arg());
            let reports = run_fleet(kind, false, url, &prefix, processes, tasks);
            let decisions: u64 = reports.iter().map(|r| r.decisions).sum();
            let (calls, _) = deciding_usec(&commandstats(stats).await);
            let latencies = reports
                .iter()
                .flat_map(|r| r.latencies.iter().copied())
                .collect();
            allowed[ki].push((
                decisions as f64 / RUN.as_secs_f64(),
                calls as f64 / decisions.max(1) as f64,
                p99(latencies),
            ));
            let prefix = format!("fleetb{round}{}", kind.arg());
            let reports = run_fleet(kind, true, url, &prefix, processes, tasks);
            let mut sum = vec![0u64; RUN.as_millis() as usize + 1];
            for r in &reports {
                for (s, g) in sum.iter_mut().zip(&r.grants) {
                    *s += g;
                }
            }
            binding[ki].push(sum);
        }
    }
    writeln!(
        out,
        "\n### A fleet on one allowed hot key ({processes} processes x {tasks} tasks, one key, {ALLOWED}/s, burst {FLEET_BURST}; local batches: refresh {REFRESH:?}, {SHARE}% of the burst; {RUN:?} per run, {rounds} interleaved rounds, medians)\n"
    )
    .unwrap();
    writeln!(
        out,
        "| workload | decisions/s (fleet) | x CL.THROTTLE | x GCRA script | Redis calls per decision | p99 decision latency µs |\n|---|---:|---:|---:|---:|---:|"
    )
    .unwrap();
    for (ki, kind) in KINDS.iter().enumerate() {
        let s = &allowed[ki];
        let ratio =
            |base: usize| median((0..rounds).map(|r| s[r].0 / allowed[base][r].0).collect());
        writeln!(
            out,
            "| {} | {:.0} | {:.2} | {:.2} | {:.4} | {:.0} |",
            kind.name(),
            median(s.iter().map(|x| x.0).collect()),
            ratio(0),
            ratio(1),
            median(s.iter().map(|x| x.1).collect()),
            median(s.iter().map(|x| x.2).collect()),
        )
        .unwrap();
    }
    let t_ns = 1_000_000_000 / RATE;
    let exact = |l_ms: u64| BURST + l_ms * 1_000_000 / t_ns;
    let stated = |l_ms: u64| BURST + (l_ms + REFRESH.as_millis() as u64) * 1_000_000 / t_ns;
    writeln!(
        out,
        "\n### A fleet on a binding limit ({processes} processes x {tasks} tasks, one key, {RATE}/s, burst {BURST}, demand far above it; {rounds} rounds, the worst round)\n"
    )
    .unwrap();
    writeln!(
        out,
        "| workload | most in 10 ms (exact bound {}, stated {}) | most in 100 ms ({}, {}) | most in 1 s ({}, {}) | rate at steady demand / limit (min-max) |\n|---|---:|---:|---:|---:|",
        exact(10),
        stated(10),
        exact(100),
        stated(100),
        exact(1000),
        stated(1000)
    )
    .unwrap();
    for (ki, kind) in KINDS.iter().enumerate() {
        let runs = &binding[ki];
        let most = |l: usize| runs.iter().map(|b| most_in(b, l)).max().unwrap_or(0);
        // Steady demand: from 500 ms (the burst long spent) to 100 ms before the end.
        let steady: Vec<f64> = runs
            .iter()
            .map(|b| {
                let span = &b[500..b.len().saturating_sub(100).max(501)];
                span.iter().sum::<u64>() as f64 / (span.len() as f64 * RATE as f64 / 1000.0)
            })
            .collect();
        let lo = steady.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = steady.iter().copied().fold(0.0, f64::max);
        writeln!(
            out,
            "| {} | {} | {} | {} | {lo:.4}-{hi:.4} |",
            kind.name(),
            most(10),
            most(100),
            most(1000),
        )
        .unwrap();
    }
}
