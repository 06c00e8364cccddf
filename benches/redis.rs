//! Redis backend, measured in one run on loopback against a throwaway `redis-server` this
//! bench starts itself (in benches/: `cargo bench --features redis --bench redis`):
//!
//! - decisions/s and p50/p99 latency with 1, 16 and 256 concurrent tasks on one multiplexed
//!   connection, for tollgate's GCRA and sliding log scripts and two common recipes as the
//!   baseline: a naive two-round-trip GET-then-SET (client clock, not atomic) and the
//!   four-command sorted-set pipeline (ZREMRANGEBYSCORE, ZADD, ZCARD, PEXPIRE; not atomic);
//! - Redis memory per key (`MEMORY USAGE`) for each algorithm, and the sliding log's growth
//!   with its limit L.
//!
//! Not criterion: latency percentiles under concurrency need every call's latency. Rounds
//! are interleaved (every workload once per round), and ratios are medians of per-round
//! ratios against the GET-then-SET baseline of the same round. Bounded in count and time.
//! Writes the tables to stdout and to `target/redis-bench.md`.

#[path = "../tests/redis_support/mod.rs"]
mod redis_support;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionManager;
use redis_support::RedisServer;
use tollgate::redis::{RedisAlgorithm, RedisRateLimiter};
use tollgate::{FixedWindow, Gcra, Quota, SlidingLog, SlidingWindow, WeightedWindow};

const ROUNDS: usize = 5;
const CONCURRENCY: [usize; 3] = [1, 16, 256];
/// Per measurement: at most this many calls, or this long.
const CALLS: usize = 20_000;
const BUDGET: Duration = Duration::from_millis(400);
/// 100 per second per key over 1000 keys: mostly admissions, some denials.
const KEYS: u64 = 1000;
const LIMIT: u64 = 100;
const WINDOW_US: u64 = 1_000_000;

#[derive(Clone)]
enum Workload {
    Gcra(RedisRateLimiter<Gcra>),
    Log(RedisRateLimiter<SlidingLog>),
    GetThenSet(ConnectionManager),
    ZsetPipeline(ConnectionManager),
}

impl Workload {
    fn name(&self) -> &'static str {
        match self {
            Workload::Gcra(_) => "tollgate GCRA script",
            Workload::Log(_) => "tollgate sliding-log script",
            Workload::GetThenSet(_) => "naive GET then SET (2 round trips)",
            Workload::ZsetPipeline(_) => "sorted-set 4-command pipeline",
        }
    }

    async fn decide(&self, key: u64, seq: u64) -> bool {
        let key = format!("{{k{key}}}");
        match self {
            Workload::Gcra(l) => l.check(&key).await.unwrap().allowed,
            Workload::Log(l) => l.check(&key).await.unwrap().allowed,
            Workload::GetThenSet(c) => get_then_set(&mut c.clone(), &format!("tat:{key}")).await,
            Workload::ZsetPipeline(c) => {
                zset_pipeline(&mut c.clone(), &format!("zset:{key}"), seq).await
            }
        }
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// GCRA the usual way: read the TAT, decide on the client's clock, write it back.
async fn get_then_set(c: &mut ConnectionManager, key: &str) -> bool {
    let t = WINDOW_US / LIMIT;
    let now = now_us();
    let tat: Option<u64> = redis::cmd("GET").arg(key).query_async(c).await.unwrap();
    let new_tat = tat.unwrap_or(0).max(now) + t;
    if new_tat - t * LIMIT > now {
        return false;
    }
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(new_tat)
        .arg("PX")
        .arg((new_tat - now) / 1000 + 1)
        .query_async(c)
        .await
        .unwrap();
    true
}

/// The sorted-set sliding window as commonly pipelined (not atomic; records denials too).
async fn zset_pipeline(c: &mut ConnectionManager, key: &str, seq: u64) -> bool {
    let now = now_us();
    let (count,): (u64,) = redis::pipe()
        .cmd("ZREMRANGEBYSCORE")
        .arg(key)
        .arg(0)
        .arg(now - WINDOW_US)
        .ignore()
        .cmd("ZADD")
        .arg(key)
        .arg(now)
        .arg(format!("{now}:{seq}"))
        .ignore()
        .cmd("ZCARD")
        .arg(key)
        .cmd("PEXPIRE")
        .arg(key)
        .arg(WINDOW_US / 1000)
        .ignore()
        .query_async(c)
        .await
        .unwrap();
    count <= LIMIT
}

struct Sample {
    per_sec: f64,
    p50_us: f64,
    p99_us: f64,
}

async fn measure(w: &Workload, tasks: usize) -> Sample {
    let issued = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (w, issued) = (w.clone(), issued.clone());
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
            loop {
                let seq = issued.fetch_add(1, Ordering::Relaxed);
                if seq >= CALLS as u64 || start.elapsed() > BUDGET {
                    return lat;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let t0 = Instant::now();
                std::hint::black_box(w.decide(x % KEYS, seq).await);
                lat.push(t0.elapsed());
            }
        }));
    }
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.await.unwrap());
    }
    let wall = start.elapsed();
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
    Sample {
        per_sec: lat.len() as f64 / wall.as_secs_f64(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn limiter<A: RedisAlgorithm>(
    m: &ConnectionManager,
    alg: A,
    q: Quota,
) -> RedisRateLimiter<A> {
    RedisRateLimiter::builder(q)
        .algorithm(alg)
        .unwrap()
        .prefix(format!("mem{}", q.burst()))
        .deadline(Duration::from_secs(2))
        .with_connection_manager(m.clone())
        .unwrap()
}

async fn memory_usage(m: &mut ConnectionManager, key: &str) -> u64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(m)
        .await
        .unwrap()
}

async fn memory_table(m: &ConnectionManager, out: &mut String) {
    let mut conn = m.clone();
    let q = Quota::per_minute(100).unwrap();
    writeln!(out, "\n### Redis memory per key (`MEMORY USAGE`, after one admission, key `{{user42}}:login`)\n").unwrap();
    writeln!(out, "| algorithm | bytes |\n|---|---:|").unwrap();
    macro_rules! one {
        ($alg:expr) => {{
            let l = limiter(m, $alg, q).await;
            l.check("{user42}:login").await.unwrap();
            let bytes = memory_usage(&mut conn, &l.state_key("{user42}:login")).await;
            writeln!(out, "| {} | {bytes} |", name_of(&$alg)).unwrap();
        }};
    }
    one!(Gcra);
    one!(FixedWindow::epoch_aligned());
    one!(WeightedWindow);
    one!(SlidingLog);
    one!(SlidingWindow::new(8));

    writeln!(out, "\n### Sliding log: memory of one full key against L\n").unwrap();
    writeln!(
        out,
        "| L (entries) | bytes | bytes per entry |\n|---:|---:|---:|"
    )
    .unwrap();
    for l in [1u64, 10, 100, 128, 129, 1_000, 10_000] {
        let log = limiter(m, SlidingLog, Quota::per_hour(l).unwrap()).await;
        for _ in 0..l {
            assert!(log.check("full").await.unwrap().allowed);
        }
        let bytes = memory_usage(&mut conn, &log.state_key("full")).await;
        writeln!(out, "| {l} | {bytes} | {:.1} |", bytes as f64 / l as f64).unwrap();
    }
}

fn name_of<A: RedisAlgorithm>(_: &A) -> &'static str {
    A::NAME
}

fn main() {
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(async {
        let manager = ConnectionManager::new(server.client()).await.unwrap();
        let q = Quota::per_second(LIMIT).unwrap();
        let workloads = [
            Workload::GetThenSet(manager.clone()),
            Workload::Gcra(limiter(&manager, Gcra, q).await),
            Workload::Log(limiter(&manager, SlidingLog, q).await),
            Workload::ZsetPipeline(manager.clone()),
        ];
        // samples[workload][concurrency][round]
        let mut samples: Vec<Vec<Vec<Sample>>> = workloads
            .iter()
            .map(|_| CONCURRENCY.iter().map(|_| Vec::new()).collect())
            .collect();
        for w in &workloads {
            measure(w, 16).await; // warm-up: connections, script cache, keys
        }
        for _ in 0..ROUNDS {
            for (ci, &c) in CONCURRENCY.iter().enumerate() {
                for (wi, w) in workloads.iter().enumerate() {
                    samples[wi][ci].push(measure(w, c).await);
                }
            }
        }
        let mut out = String::new();
        writeln!(
            out,
            "### Decisions on one multiplexed connection (loopback, {ROUNDS} interleaved rounds, medians)\n"
        )
        .unwrap();
        writeln!(
            out,
            "| workload | tasks | decisions/s | x GET+SET | p50 µs | p99 µs |\n|---|---:|---:|---:|---:|---:|"
        )
        .unwrap();
        for (ci, &c) in CONCURRENCY.iter().enumerate() {
            for (wi, w) in workloads.iter().enumerate() {
                let s = &samples[wi][ci];
                let ratio = median(
                    (0..ROUNDS)
                        .map(|r| s[r].per_sec / samples[0][ci][r].per_sec)
                        .collect(),
                );
                writeln!(
                    out,
                    "| {} | {c} | {:.0} | {ratio:.2} | {:.0} | {:.0} |",
                    w.name(),
                    median(s.iter().map(|x| x.per_sec).collect()),
                    median(s.iter().map(|x| x.p50_us).collect()),
                    median(s.iter().map(|x| x.p99_us).collect()),
                )
                .unwrap();
            }
        }
        memory_table(&manager, &mut out).await;
        out
    });
    println!("{out}");
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let _ = std::fs::write(format!("{target}/redis-bench.md"), &out);
}
