//! A hot key on Redis, and what each script costs the server, measured in one run on loopback
//! against a throwaway `redis-server` this bench starts itself, with redis-cell 0.2.2's native
//! module loaded into the same server as the baseline (in benches/:
//! `cargo bench --features redis --bench redis_hot`; the module is built by
//! `benches/build_redis_cell.sh`, or taken from `TOLLGATE_REDIS_CELL_SO`):
//!
//! - server µs per call of every tollgate script, `CL.THROTTLE` and plain `INCR`, from
//!   `INFO commandstats` (`usec / calls`, after `CONFIG RESETSTAT`);
//! - decisions/s on one multiplexed connection at 1, 16 and 256 tasks, for `CL.THROTTLE`, the
//!   GCRA script, and the GCRA script with the local denial cache, coalescing, both, or
//!   grouping (`group_keys`: checks on different keys in one script call) on, on
//!   a uniform workload (100k keys, mostly admitted) and a hot key (one key, a limit that
//!   denies most calls), with the Redis CPU per decision (every command's `usec` in
//!   commandstats over the decisions made);
//! - what the options cost where they cannot help: each one's decisions/s and this process's
//!   CPU per decision against the plain GCRA script's in the same round (local batches
//!   included: on the uniform workload almost every key is seen once, so none takes a batch);
//! - a hot key that is allowed (a limit far above the load): decisions/s and Redis calls per
//!   decision for `CL.THROTTLE`, the GCRA script and the GCRA script with local batches.
//!
//! Rounds are interleaved (every workload once per round, starting one workload later each
//! round so that none always follows the same one); ratios are medians of per-round ratios
//! against `CL.THROTTLE` (or the GCRA script) in the same round. Writes the tables to stdout
//! and to `target/redis-hot-bench.md`.
//!
//! Options (after `--`): `--quick` (1 round), `--rounds N`, `--uniform` (only the uniform
//! workload at 16 and 256 tasks, and no server-time table: the options' cost where they cannot
//! help, for runs of two builds alternately; also prints each round's ratios, to pool the
//! rounds of several runs), `--group` (only `CL.THROTTLE`, the GCRA script and the GCRA script
//! with `group_keys` on the uniform workload at 1, 16 and 256 tasks, with the mean group size,
//! after the server's cost per call of a trivial script next to the GCRA script's and
//! `CL.THROTTLE`'s: where a script call's time goes), `--fleet` (only the allowed hot key in this process and the fleet:
//! several processes on one key, see `redis_hot/fleet.rs`; `--processes N`, default 4,
//! `--tasks N`, default 16).

#[path = "../tests/redis_support/mod.rs"]
mod redis_support;

#[path = "redis_hot/fleet.rs"]
mod fleet;

use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis_support::RedisServer;
use tollgate::redis::{RedisAlgorithm, RedisRateLimiter};
use tollgate::{FixedWindow, Gcra, Quota, SlidingLog, SlidingWindow, WeightedWindow};

const ROUNDS: usize = 5;
const CONCURRENCY: [usize; 3] = [1, 16, 256];
/// Per measurement: at most this many calls, or this long.
const CALLS: u64 = 200_000;
const BUDGET: Duration = Duration::from_millis(400);
const UNIFORM_KEYS: u64 = 100_000;
/// 100 per second (burst 100): on the hot key almost every call is denied.
const LIMIT: u64 = 100;
/// The allowed hot key's limit: 1M per second (the fastest GCRA rate the Redis scripts hold:
/// their `T` is whole microseconds, rounded up, so 10M per second would decide as 1M) with a
/// burst of 10M, which no run here spends: a 2 s run of a fleet deciding 2M per second draws
/// 2M from it and 2M flow back in.
const ALLOWED: u64 = 1_000_000;
const ALLOWED_BURST: u64 = 10_000_000;
/// Local batches: a refresh of 100 ms, at most 5% of the burst held per process.
const REFRESH: Duration = Duration::from_millis(100);
const SHARE: u8 = 5;

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    Uniform,
    Hot,
    HotAllowed,
}

#[derive(Clone)]
enum Workload {
    Cell(ConnectionManager),
    Gcra(RedisRateLimiter<Gcra>),
    GcraCache(RedisRateLimiter<Gcra>),
    GcraCoalesce(RedisRateLimiter<Gcra>),
    GcraHot(RedisRateLimiter<Gcra>),
    GcraBatch(RedisRateLimiter<Gcra>),
    /// Checks on different keys grouped into one script call (`group_keys`).
    GcraGroup(RedisRateLimiter<Gcra>),
    /// `CL.THROTTLE` under [`ALLOWED`], for the allowed hot key.
    CellAllowed(ConnectionManager),
}

impl Workload {
    fn name(&self) -> &'static str {
        match self {
            Workload::Cell(_) => "redis-cell CL.THROTTLE (native)",
            Workload::Gcra(_) => "tollgate GCRA script",
            Workload::GcraCache(_) => "tollgate GCRA + denial cache (no coalescing)",
            Workload::GcraCoalesce(_) => "tollgate GCRA + coalescing (no cache)",
            Workload::GcraHot(_) => "tollgate GCRA + denial cache + coalescing",
            Workload::GcraBatch(_) => "tollgate GCRA + local batches",
            Workload::GcraGroup(_) => "tollgate GCRA + group_keys",
            Workload::CellAllowed(_) => "redis-cell CL.THROTTLE (native)",
        }
    }

    async fn decide(&self, key: &str) -> bool {
        match self {
            Workload::Cell(c) => throttle(c, key, LIMIT, LIMIT).await,
            Workload::CellAllowed(c) => throttle(c, key, ALLOWED_BURST, ALLOWED).await,
            Workload::Gcra(l)
            | Workload::GcraBatch(l)
            | Workload::GcraCache(l)
            | Workload::GcraCoalesce(l)
            | Workload::GcraGroup(l)
            | Workload::GcraHot(l) => l.check(key).await.unwrap().allowed,
        }
    }
}

/// `CL.THROTTLE key burst-1 limit 1 1`: whether it allowed.
async fn throttle(c: &ConnectionManager, key: &str, burst: u64, limit: u64) -> bool {
    let r: Vec<i64> = redis::cmd("CL.THROTTLE")
        .arg(key)
        .arg(burst - 1)
        .arg(limit)
        .arg(1)
        .arg(1)
        .query_async(&mut c.clone())
        .await
        .unwrap();
    r[0] == 0
}

/// `INFO commandstats` as (command, calls, usec).
async fn commandstats(c: &mut ConnectionManager) -> Vec<(String, u64, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c)
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |f: &str| -> Option<u64> {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))?
                    .parse()
                    .ok()
            };
            Some((name.to_owned(), field("calls")?, field("usec")?))
        })
        .collect()
}

async fn reset_stats(c: &mut ConnectionManager) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(c)
        .await
        .unwrap();
}

/// Server usec of the commands that decide: scripts and `CL.THROTTLE` (the commands a script
/// runs inside are counted in its own usec too, so they are left out).
fn deciding_usec(stats: &[(String, u64, u64)]) -> (u64, u64) {
    stats
        .iter()
        .filter(|(n, ..)| matches!(n.as_str(), "evalsha" | "eval" | "cl.throttle" | "incr"))
        .fold((0, 0), |(c, u), s| (c + s.1, u + s.2))
}

struct Sample {
    per_sec: f64,
    /// Redis CPU (commandstats usec) per decision, in µs.
    cpu_us: f64,
    /// This process's CPU (user + system, every thread) per decision, in µs: the client's
    /// cost, which the other processes on a loaded machine disturb less than the throughput.
    client_us: f64,
    /// Deciding commands Redis ran per decision.
    calls: f64,
}

/// This process's CPU time so far (user + system), in µs.
fn process_cpu_us() -> f64 {
    // SAFETY: getrusage writes the struct it is given, which is zeroed and ours.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(u.ru_utime) + us(u.ru_stime)
}

async fn measure(
    w: &Workload,
    scenario: Scenario,
    tasks: usize,
    m: &mut ConnectionManager,
) -> Sample {
    reset_stats(m).await;
    let issued = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let cpu_start = process_cpu_us();
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (w, issued, done) = (w.clone(), issued.clone(), done.clone());
        handles.push(tokio::spawn(async move {
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
            loop {
                let seq = issued.fetch_add(1, Ordering::Relaxed);
                if seq >= CALLS || start.elapsed() > BUDGET {
                    return;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = match scenario {
                    Scenario::Uniform => format!("{{u{}}}", x % UNIFORM_KEYS),
                    Scenario::Hot => "{hot}".to_owned(),
                    Scenario::HotAllowed => "{ok}".to_owned(),
                };
                std::hint::black_box(w.decide(&key).await);
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let wall = start.elapsed();
    let client_us = process_cpu_us() - cpu_start;
    let decisions = done.load(Ordering::Relaxed);
    let (calls, usec) = deciding_usec(&commandstats(m).await);
    Sample {
        per_sec: decisions as f64 / wall.as_secs_f64(),
        cpu_us: usec as f64 / decisions as f64,
        client_us: client_us / decisions as f64,
        calls: calls as f64 / decisions as f64,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn limiter<A: RedisAlgorithm>(m: &ConnectionManager, alg: A, prefix: &str) -> RedisRateLimiter<A> {
    RedisRateLimiter::builder(Quota::per_second(LIMIT).unwrap())
        .algorithm(alg)
        .unwrap()
        .prefix(prefix)
        .deadline(Duration::from_secs(2))
        .with_connection_manager(m.clone())
        .unwrap()
}

/// A GCRA limiter under `quota`, with local batches if `batches`.
fn gcra(m: &ConnectionManager, quota: Quota, prefix: &str, batches: bool) -> RedisRateLimiter {
    let b = RedisRateLimiter::builder(quota)
        .prefix(prefix)
        .deadline(Duration::from_secs(2));
    let b = if batches {
        b.local_batches(REFRESH, SHARE)
    } else {
        b
    };
    b.with_connection_manager(m.clone()).unwrap()
}

/// Runs `f(key)` `n` times from 16 tasks over 1000 keys; (calls, usec) of the deciding
/// commands on the server.
async fn run_cost<F, Fut>(m: &mut ConnectionManager, n: u64, f: F) -> (u64, u64)
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    reset_stats(m).await;
    let next = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    for _ in 0..16 {
        let (f, next) = (f.clone(), next.clone());
        hs.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                f(i.wrapping_mul(0x9e37_79b9) % 1000).await;
            }
        }));
    }
    for h in hs {
        h.await.unwrap();
    }
    deciding_usec(&commandstats(m).await)
}

/// Server µs per call of each script (and the native command, and `INCR`): 16 tasks over
/// 1000 keys, mostly admissions.
async fn script_costs(m: &mut ConnectionManager, out: &mut String) {
    const N: u64 = 20_000;
    writeln!(
        out,
        "### Server time per call (`INFO commandstats` usec / calls; 16 tasks, 1000 keys, {N} calls each)\n"
    )
    .unwrap();
    writeln!(out, "| command | calls | µs per call |\n|---|---:|---:|").unwrap();
    let mut row = |label: &str, (calls, usec): (u64, u64)| {
        writeln!(
            out,
            "| {label} | {calls} | {:.2} |",
            usec as f64 / calls as f64
        )
        .unwrap();
    };
    let c = m.clone();
    let cost = run_cost(m, N, move |k| {
        let mut c = c.clone();
        async move {
            let _: Vec<i64> = redis::cmd("CL.THROTTLE")
                .arg(format!("{{c{k}}}"))
                .arg(LIMIT - 1)
                .arg(LIMIT)
                .arg(1)
                .arg(1)
                .query_async(&mut c)
                .await
                .unwrap();
        }
    })
    .await;
    row("redis-cell CL.THROTTLE (native)", cost);
    macro_rules! script {
        ($alg:expr, $label:expr) => {{
            let l = limiter(m, $alg, "cost");
            let cost = run_cost(m, N, move |k| {
                let l = l.clone();
                async move {
                    l.check(&format!("{{c{k}}}")).await.unwrap();
                }
            })
            .await;
            row($label, cost);
        }};
    }
    script!(Gcra, "tollgate GCRA script");
    script!(FixedWindow::epoch_aligned(), "tollgate fixed-window script");
    script!(WeightedWindow, "tollgate weighted-window script");
    script!(
        SlidingWindow::new(10),
        "tollgate sliding-window script (k = 10)"
    );
    script!(SlidingLog, "tollgate sliding-log script");
    let c = m.clone();
    let cost = run_cost(m, N, move |k| {
        let mut c = c.clone();
        async move {
            let _: i64 = redis::cmd("INCR")
                .arg(format!("{{i{k}}}"))
                .query_async(&mut c)
                .await
                .unwrap();
        }
    })
    .await;
    row("plain INCR", cost);
}

/// Server µs per call of a script that does nothing (one key, `return 1`), one that only reads
/// its key, and one that reads the clock and its key and writes it (the GCRA check's three
/// commands, without its rule), next to the GCRA check and `CL.THROTTLE`: how much of a script
/// call is Redis's own cost per call (finding the script, setting Lua up, the reply).
async fn call_costs(m: &mut ConnectionManager, out: &mut String) {
    const N: u64 = 20_000;
    writeln!(
        out,
        "### Where a script call's time goes (`INFO commandstats` usec / calls; 16 tasks, 1000 keys, {N} calls each)\n"
    )
    .unwrap();
    writeln!(out, "| command | µs per call |\n|---|---:|").unwrap();
    let bodies = [
        ("EVALSHA `return 1` (one key)", "return 1"),
        (
            "EVALSHA GET of its key",
            "return redis.call('GET', KEYS[1]) and 1 or 0",
        ),
        (
            "EVALSHA TIME, GET, SET (PXAT) of its key",
            "local t = redis.call('TIME') local v = redis.call('GET', KEYS[1]) \
             redis.call('SET', KEYS[1], t[1] * 1000000 + t[2], 'PXAT', t[1] * 1000 + 60000) return 1",
        ),
    ];
    for (label, body) in bodies {
        let script = redis::Script::new(body);
        let _: i64 = script
            .key("{warm}")
            .invoke_async(&mut m.clone())
            .await
            .unwrap();
        let c = m.clone();
        let (calls, usec) = run_cost(m, N, move |k| {
            let (mut c, script) = (c.clone(), script.clone());
            async move {
                let _: i64 = script
                    .key(format!("{{t{k}}}"))
                    .invoke_async(&mut c)
                    .await
                    .unwrap();
            }
        })
        .await;
        writeln!(out, "| {label} | {:.2} |", usec as f64 / calls as f64).unwrap();
    }
    let l = limiter(m, Gcra, "cost");
    let (calls, usec) = run_cost(m, N, move |k| {
        let l = l.clone();
        async move {
            l.check(&format!("{{c{k}}}")).await.unwrap();
        }
    })
    .await;
    writeln!(
        out,
        "| tollgate GCRA check script | {:.2} |",
        usec as f64 / calls as f64
    )
    .unwrap();
    let c = m.clone();
    let (calls, usec) = run_cost(m, N, move |k| {
        let c = c.clone();
        async move {
            throttle(&c, &format!("{{c{k}}}"), LIMIT, LIMIT).await;
        }
    })
    .await;
    writeln!(
        out,
        "| redis-cell CL.THROTTLE (native) | {:.2} |\n",
        usec as f64 / calls as f64
    )
    .unwrap();
}

fn redis_cell_module() -> String {
    if let Ok(p) = std::env::var("TOLLGATE_REDIS_CELL_SO") {
        return p;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/build_redis_cell.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .output()
        .expect("run benches/build_redis_cell.sh");
    assert!(
        out.status.success(),
        "building redis-cell failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The value after `flag`, if given: a positive number.
fn count_arg(args: &[String], flag: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == flag)?;
    let n = args
        .get(i + 1)
        .and_then(|n| n.parse().ok())
        .filter(|&n: &usize| n > 0);
    Some(n.unwrap_or_else(|| panic!("{flag} N, N > 0")))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--fleet-child") {
        return fleet::child(&args[i + 1..]);
    }
    if let Some(i) = args.iter().position(|a| a == "--instructions") {
        return instructions(&args[i + 1..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let group_only = args.iter().any(|a| a == "--group");
    let uniform_only = group_only || args.iter().any(|a| a == "--uniform");
    let rounds = match count_arg(&args, "--rounds") {
        Some(n) => n,
        None if quick => 1,
        None => ROUNDS,
    };
    let concurrency: &[usize] = if uniform_only && !group_only {
        &CONCURRENCY[1..]
    } else {
        &CONCURRENCY
    };
    let module = redis_cell_module();
    let server = RedisServer::start_with(&["--loadmodule", &module]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if args.iter().any(|a| a == "--fleet") {
        let processes = count_arg(&args, "--processes").unwrap_or(4);
        let tasks = count_arg(&args, "--tasks").unwrap_or(16);
        let out = rt.block_on(async {
            let mut stats = ConnectionManager::new(server.client()).await.unwrap();
            let manager = ConnectionManager::new(server.client()).await.unwrap();
            let mut out = String::new();
            allowed_hot_key(&manager, &mut stats, rounds, &CONCURRENCY, &mut out).await;
            fleet::run(
                &server.url(),
                &mut stats,
                rounds,
                processes,
                tasks,
                &mut out,
            )
            .await;
            out
        });
        println!("{out}");
        return;
    }
    let out = rt.block_on(async {
        let mut stats = ConnectionManager::new(server.client()).await.unwrap();
        let manager = ConnectionManager::new(server.client()).await.unwrap();
        let mut out = String::new();
        if !uniform_only {
            script_costs(&mut stats, &mut out).await;
        }
        if group_only {
            call_costs(&mut stats, &mut out).await;
        }

        let hot = RedisRateLimiter::builder(Quota::per_second(LIMIT).unwrap())
            .prefix("hot")
            .deadline(Duration::from_secs(2))
            .denial_cache(NonZeroUsize::new(100_000).unwrap())
            .coalesce()
            .with_connection_manager(manager.clone())
            .unwrap();
        let caching = RedisRateLimiter::builder(Quota::per_second(LIMIT).unwrap())
            .prefix("cache")
            .deadline(Duration::from_secs(2))
            .denial_cache(NonZeroUsize::new(100_000).unwrap())
            .with_connection_manager(manager.clone())
            .unwrap();
        let coalescing = RedisRateLimiter::builder(Quota::per_second(LIMIT).unwrap())
            .prefix("coalesce")
            .deadline(Duration::from_secs(2))
            .coalesce()
            .with_connection_manager(manager.clone())
            .unwrap();
        let grouping = RedisRateLimiter::builder(Quota::per_second(LIMIT).unwrap())
            .prefix("group")
            .deadline(Duration::from_secs(2))
            .group_keys(NonZeroUsize::new(64).unwrap())
            .with_connection_manager(manager.clone())
            .unwrap();
        let mut workloads = vec![
            Workload::Cell(manager.clone()),
            Workload::Gcra(limiter(&manager, Gcra, "plain")),
            Workload::GcraCache(caching),
            Workload::GcraCoalesce(coalescing),
            Workload::GcraHot(hot),
            Workload::GcraBatch(gcra(
                &manager,
                Quota::per_second(LIMIT).unwrap(),
                "batch",
                true,
            )),
            Workload::GcraGroup(grouping.clone()),
        ];
        if group_only {
            workloads.retain(|w| {
                matches!(
                    w,
                    Workload::Cell(_) | Workload::Gcra(_) | Workload::GcraGroup(_)
                )
            });
        }
        // The group workload's (group calls, checks grouped, checks) per concurrency.
        let mut group_sizes = vec![(0u64, 0u64, 0u64); concurrency.len()];
        let scenarios: &[(Scenario, &str)] = if uniform_only {
            &[(Scenario::Uniform, "uniform, 100k keys")]
        } else {
            &[
                (Scenario::Uniform, "uniform, 100k keys"),
                (Scenario::Hot, "hot key (1 key, denies most)"),
            ]
        };
        // samples[scenario][concurrency][workload][round]
        let mut samples: Vec<Vec<Vec<Vec<Sample>>>> = scenarios
            .iter()
            .map(|_| {
                concurrency
                    .iter()
                    .map(|_| workloads.iter().map(|_| Vec::new()).collect())
                    .collect()
            })
            .collect();
        for w in &workloads {
            measure(w, Scenario::Uniform, 16, &mut stats).await; // warm-up: script cache, keys
        }
        for round in 0..rounds {
            for (si, &(s, _)) in scenarios.iter().enumerate() {
                for (ci, &c) in concurrency.iter().enumerate() {
                    for k in 0..workloads.len() {
                        let wi = (round + k) % workloads.len();
                        let before = grouping.stats();
                        let sample = measure(&workloads[wi], s, c, &mut stats).await;
                        if let (Workload::GcraGroup(_), Scenario::Uniform) = (&workloads[wi], s) {
                            let after = grouping.stats();
                            let g = &mut group_sizes[ci];
                            g.0 += after.group_calls - before.group_calls;
                            g.1 += after.grouped - before.grouped;
                            g.2 += after.replies - before.replies + after.grouped
                                - before.grouped
                                - (after.group_calls - before.group_calls);
                        }
                        samples[si][ci][wi].push(sample);
                    }
                }
            }
        }
        writeln!(
            out,
            "\n### Decisions on one multiplexed connection (loopback, {rounds} interleaved rounds, medians)\n"
        )
        .unwrap();
        writeln!(
            out,
            "| workload | scenario | tasks | decisions/s | x CL.THROTTLE | Redis µs per decision | x GCRA script's |\n|---|---|---:|---:|---:|---:|---:|"
        )
        .unwrap();
        for (si, &(_, sname)) in scenarios.iter().enumerate() {
            for (ci, &c) in concurrency.iter().enumerate() {
                let row = &samples[si][ci];
                for (wi, w) in workloads.iter().enumerate() {
                    let s = &row[wi];
                    let ratio =
                        median((0..rounds).map(|r| s[r].per_sec / row[0][r].per_sec).collect());
                    let cpu = median((0..rounds).map(|r| s[r].cpu_us / row[1][r].cpu_us).collect());
                    writeln!(
                        out,
                        "| {} | {sname} | {c} | {:.0} | {ratio:.2} | {:.3} | {cpu:.3} |",
                        w.name(),
                        median(s.iter().map(|x| x.per_sec).collect()),
                        median(s.iter().map(|x| x.cpu_us).collect()),
                    )
                    .unwrap();
                }
            }
        }
        writeln!(
            out,
            "\n### group_keys on the uniform workload: how much was grouped\n\n| tasks | group calls | checks grouped | mean group | share of checks grouped |\n|---:|---:|---:|---:|---:|"
        )
        .unwrap();
        for (ci, &c) in concurrency.iter().enumerate() {
            let (calls, grouped, checks) = group_sizes[ci];
            writeln!(
                out,
                "| {c} | {calls} | {grouped} | {:.1} | {:.2} |",
                grouped as f64 / calls.max(1) as f64,
                grouped as f64 / checks.max(1) as f64,
            )
            .unwrap();
        }
        writeln!(
            out,
            "\n### The options where they cannot help, against the plain GCRA script (uniform, 100k keys; medians of per-round ratios)\n"
        )
        .unwrap();
        writeln!(
            out,
            "| workload | tasks | decisions/s | x GCRA script | client CPU µs per decision | x GCRA script's |\n|---|---:|---:|---:|---:|---:|"
        )
        .unwrap();
        for (ci, &c) in concurrency.iter().enumerate() {
            let row = &samples[0][ci];
            for (wi, w) in workloads.iter().enumerate().skip(1) {
                let ratio =
                    median((0..rounds).map(|r| row[wi][r].per_sec / row[1][r].per_sec).collect());
                let cpu = median(
                    (0..rounds)
                        .map(|r| row[wi][r].client_us / row[1][r].client_us)
                        .collect(),
                );
                writeln!(
                    out,
                    "| {} | {c} | {:.0} | {ratio:.3} | {:.2} | {cpu:.3} |",
                    w.name(),
                    median(row[wi].iter().map(|x| x.per_sec).collect()),
                    median(row[wi].iter().map(|x| x.client_us).collect()),
                )
                .unwrap();
            }
        }
        if !uniform_only {
            allowed_hot_key(&manager, &mut stats, rounds, concurrency, &mut out).await;
        }
        if uniform_only {
            // The per-round ratios, for pooling the rounds of several runs.
            writeln!(out).unwrap();
            for (ci, &c) in concurrency.iter().enumerate() {
                let row = &samples[0][ci];
                for (wi, w) in workloads.iter().enumerate().skip(2) {
                    let ratios: Vec<String> = (0..rounds)
                        .map(|r| format!("{:.4}", row[wi][r].per_sec / row[1][r].per_sec))
                        .collect();
                    writeln!(out, "ratios | {} | {c} | {}", w.name(), ratios.join(" ")).unwrap();
                    let cpu: Vec<String> = (0..rounds)
                        .map(|r| format!("{:.4}", row[wi][r].client_us / row[1][r].client_us))
                        .collect();
                    writeln!(out, "cpu | {} | {c} | {}", w.name(), cpu.join(" ")).unwrap();
                }
            }
        }
        out
    });
    println!("{out}");
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let _ = std::fs::write(format!("{target}/redis-hot-bench.md"), &out);
}

/// The allowed hot key: `CL.THROTTLE`, the GCRA script and the GCRA script with local batches
/// under [`ALLOWED`], in interleaved rounds; decisions/s (and against `CL.THROTTLE` in the
/// same round) and Redis calls per decision.
async fn allowed_hot_key(
    manager: &ConnectionManager,
    stats: &mut ConnectionManager,
    rounds: usize,
    concurrency: &[usize],
    out: &mut String,
) {
    let quota = Quota::per_second(ALLOWED)
        .unwrap()
        .with_burst(ALLOWED_BURST)
        .unwrap();
    let workloads = [
        Workload::CellAllowed(manager.clone()),
        Workload::Gcra(gcra(manager, quota, "okplain", false)),
        Workload::GcraBatch(gcra(manager, quota, "okbatch", true)),
    ];
    // samples[concurrency][workload][round]
    let mut samples: Vec<Vec<Vec<Sample>>> = concurrency
        .iter()
        .map(|_| workloads.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..rounds {
        for (ci, &c) in concurrency.iter().enumerate() {
            for k in 0..workloads.len() {
                let wi = (round + k) % workloads.len();
                let sample = measure(&workloads[wi], Scenario::HotAllowed, c, stats).await;
                samples[ci][wi].push(sample);
            }
        }
    }
    writeln!(
        out,
        "\n### An allowed hot key (one key, {ALLOWED}/s, burst {ALLOWED_BURST}; local batches: refresh {REFRESH:?}, {SHARE}% of the burst; {rounds} interleaved rounds, medians)\n"
    )
    .unwrap();
    writeln!(
        out,
        "| workload | tasks | decisions/s | x CL.THROTTLE | Redis calls per decision | client CPU µs per decision |\n|---|---:|---:|---:|---:|---:|"
    )
    .unwrap();
    for (ci, &c) in concurrency.iter().enumerate() {
        let row = &samples[ci];
        for (wi, w) in workloads.iter().enumerate() {
            let s = &row[wi];
            let ratio = median(
                (0..rounds)
                    .map(|r| s[r].per_sec / row[0][r].per_sec)
                    .collect(),
            );
            writeln!(
                out,
                "| {} | {c} | {:.0} | {ratio:.2} | {:.4} | {:.2} |",
                w.name(),
                median(s.iter().map(|x| x.per_sec).collect()),
                median(s.iter().map(|x| x.calls).collect()),
                median(s.iter().map(|x| x.client_us).collect()),
            )
            .unwrap();
        }
    }
}

/// `on|off|batches|hot-off|hot-batches|cell CALLS TASKS`: see [`instructions_run`].
fn instructions(args: &[String]) {
    const USAGE: &str = "--instructions off|on|batches|hot-off|hot-batches|cell CALLS TASKS";
    // `on`: coalescing; `batches`: local batches (on uniform keys none is ever taken);
    // `hot-*`: every call on the one allowed hot key, without and with local batches;
    // `cell`: the bench's `CL.THROTTLE` contender on the uniform keys: a native command's
    // client cost, the same-run baseline of the script's.
    let option = args.first().map(String::as_str);
    assert!(
        matches!(
            option,
            Some("off" | "on" | "batches" | "hot-off" | "hot-batches" | "cell")
        ),
        "{USAGE}"
    );
    let hot = option.is_some_and(|o| o.starts_with("hot-"));
    let cell = option == Some("cell");
    let arg = |i: usize| -> u64 { args.get(i).and_then(|n| n.parse().ok()).expect(USAGE) };
    let (calls, tasks) = (arg(1), arg(2));
    let server = if cell {
        RedisServer::start_with(&["--loadmodule", &redis_cell_module()])
    } else {
        RedisServer::start()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let workload = rt.block_on(async {
        if cell {
            return Workload::Cell(ConnectionManager::new(server.client()).await.unwrap());
        }
        let quota = if hot {
            let q = Quota::per_second(ALLOWED).unwrap();
            q.with_burst(ALLOWED_BURST).unwrap()
        } else {
            Quota::per_second(LIMIT).unwrap()
        };
        let b = RedisRateLimiter::builder(quota)
            .prefix("i")
            .deadline(Duration::from_secs(10));
        let b = match option {
            Some("on") => b.coalesce(),
            Some("batches") => b.local_batches(REFRESH, SHARE),
            // The longest refresh: no batch ends and no demand period rolls over under
            // valgrind's slowness, so the takes (a few, each about twice the last) and the
            // calls between them depend on the call count only, and almost every call is a
            // local grant.
            Some("hot-batches") => b.local_batches(Duration::from_secs(3600), SHARE),
            _ => b,
        };
        Workload::Gcra(b.connect(&server.url()).await.unwrap())
    });
    // Warm-up (the script loaded, the connection's buffers and the coalescer's key strings
    // grown), the same in every run: it cancels out of the difference of two runs.
    instructions_run(&rt, &workload, calls / 10, tasks, 1, hot);
    instructions_run(&rt, &workload, calls, tasks, 2, hot);
    match &workload {
        Workload::Gcra(redis) => {
            let s = redis.stats();
            println!(
                "{calls} calls, {} replies, {} local grants",
                s.replies, s.local_grants
            );
        }
        _ => println!("{calls} calls"),
    }
}

/// `calls` decisions of `w` over the uniform workload's keys from `tasks` tasks, each its own
/// key sequence (`seed`), or all on one key (`hot`), on `rt`.
fn instructions_run(
    rt: &tokio::runtime::Runtime,
    w: &Workload,
    calls: u64,
    tasks: u64,
    seed: u64,
    hot: bool,
) {
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let w = w.clone();
                tokio::spawn(async move {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (seed << 32 | (t + 1));
                    let mut key = String::new();
                    for _ in 0..calls / tasks {
                        if hot {
                            std::hint::black_box(w.decide("{hot}").await);
                            continue;
                        }
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        key.clear();
                        write!(key, "{{u{}}}", x % UNIFORM_KEYS).unwrap();
                        std::hint::black_box(w.decide(&key).await);
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
}
