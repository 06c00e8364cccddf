//! `RedisConcurrencyLimiter` (feature `redis`), measured in one run on loopback against a
//! throwaway `redis-server` this bench starts itself (in benches/:
//! `cargo bench --features redis --bench redis_concurrency`):
//!
//! - acquire+release pairs/s and the pair's p50/p99 latency with 1 and 16 concurrent tasks on
//!   one multiplexed connection, against a naive counter semaphore (`INCR`, `DECR` back when
//!   over the limit, `DECR` to release: two round trips, no lease, so a crashed holder's
//!   permit is lost for good) and, for scale, one GCRA rate-limit check (one round trip);
//! - the server's own µs per script call (`INFO commandstats`, `cmdstat_evalsha`), for each
//!   operation on its own: acquire, renew, release, and the fencing check, with 10 leases held
//!   per key.
//!
//! Rounds are interleaved (every workload once per round); ratios are medians of per-round
//! ratios against the naive counter of the same round. Bounded in count and time. Writes the
//! tables to stdout and to `target/redis-concurrency-bench.md`.

#[path = "../tests/redis_support/mod.rs"]
mod redis_support;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis_support::RedisServer;
use tollgate::redis::{RedisConcurrencyLimiter, RedisRateLimiter};
use tollgate::Quota;

const ROUNDS: usize = 5;
const CONCURRENCY: [usize; 2] = [1, 16];
/// Per measurement: at most this many pairs, or this long.
const CALLS: usize = 20_000;
const BUDGET: Duration = Duration::from_millis(400);
/// Uniform over 1000 keys with a limit of 100: every acquire is granted.
const KEYS: u64 = 1000;
const LIMIT: u64 = 100;

#[derive(Clone)]
enum Workload {
    Naive(ConnectionManager),
    Limiter(RedisConcurrencyLimiter),
    Gcra(RedisRateLimiter),
}

impl Workload {
    fn name(&self) -> &'static str {
        match self {
            Workload::Naive(_) => "naive INCR/DECR counter (no lease), acquire+release",
            Workload::Limiter(_) => "tollgate RedisConcurrencyLimiter, acquire+release",
            Workload::Gcra(_) => "(scale) tollgate GCRA check, one call",
        }
    }

    async fn run(&self, key: u64) -> bool {
        let key = format!("{{k{key}}}");
        match self {
            Workload::Naive(c) => {
                let mut c = c.clone();
                let key = format!("naive:{key}");
                let n: u64 = redis::cmd("INCR")
                    .arg(&key)
                    .query_async(&mut c)
                    .await
                    .unwrap();
                let _: i64 = redis::cmd("DECR")
                    .arg(&key)
                    .query_async(&mut c)
                    .await
                    .unwrap();
                n <= LIMIT
            }
            Workload::Limiter(s) => {
                let lease = s.try_acquire(&key).await.unwrap().unwrap();
                let _ = lease.release().await.unwrap();
                true
            }
            Workload::Gcra(l) => l.check(&key).await.unwrap().allowed,
        }
    }
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
                std::hint::black_box(w.run(x % KEYS).await);
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

/// `EVALSHA`'s calls and µs per call since the last `CONFIG RESETSTAT`.
async fn evalsha_stats(m: &mut ConnectionManager) -> (u64, f64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(m)
        .await
        .unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .expect("evalsha in commandstats");
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap()
            .to_owned()
    };
    (
        field("calls").parse().unwrap(),
        field("usec_per_call").parse().unwrap(),
    )
}

async fn reset(m: &mut ConnectionManager) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(m)
        .await
        .unwrap();
}

/// Server µs per call of each operation on its own: 10 leases on each of 1000 keys, renewed,
/// checked, released; `rounds` times, medians.
async fn server_cost(
    sem: &RedisConcurrencyLimiter,
    gcra: &RedisRateLimiter,
    m: &mut ConnectionManager,
    out: &mut String,
) {
    const PER_KEY: usize = 10;
    let mut cost: [Vec<f64>; 5] = Default::default();
    let mut calls = [0u64; 5];
    for _ in 0..ROUNDS {
        reset(m).await;
        for i in 0..PER_KEY as u64 * KEYS {
            let _ = gcra.check(&format!("{{g{}}}", i % KEYS)).await.unwrap();
        }
        let (n, us) = evalsha_stats(m).await;
        cost[4].push(us);
        calls[4] = n;
        reset(m).await;
        let mut leases = Vec::new();
        for i in 0..PER_KEY as u64 * KEYS {
            leases.push(
                sem.try_acquire(&format!("{{c{}}}", i % KEYS))
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        let mut record = |op: usize, (n, us): (u64, f64)| {
            cost[op].push(us);
            calls[op] = n;
        };
        record(0, evalsha_stats(m).await);
        reset(m).await;
        for l in &mut leases {
            assert!(l.renew().await.unwrap());
        }
        record(1, evalsha_stats(m).await);
        reset(m).await;
        for (i, l) in leases.iter().enumerate() {
            assert!(sem
                .check_token(&format!("{{c{}}}", i as u64 % KEYS), l.token())
                .await
                .unwrap());
        }
        record(2, evalsha_stats(m).await);
        reset(m).await;
        for l in leases {
            let _ = l.release().await.unwrap();
        }
        record(3, evalsha_stats(m).await);
    }
    writeln!(
        out,
        "\n### Server cost per call (`INFO commandstats`, `cmdstat_evalsha`; {PER_KEY} leases held on each of {KEYS} keys; {ROUNDS} rounds, medians)\n"
    )
    .unwrap();
    writeln!(
        out,
        "| operation | calls per round | server µs per call |\n|---|---:|---:|"
    )
    .unwrap();
    let ops = [
        "acquire",
        "renew",
        "check_token",
        "release",
        "(scale) a GCRA check",
    ];
    for (i, op) in ops.iter().enumerate() {
        writeln!(
            out,
            "| {op} | {} | {:.2} |",
            calls[i],
            median(cost[i].clone())
        )
        .unwrap();
    }
}

fn main() {
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(async {
        let mut manager = ConnectionManager::new(server.client()).await.unwrap();
        let sem = RedisConcurrencyLimiter::builder(LIMIT)
            .deadline(Duration::from_secs(2))
            .with_connection_manager(manager.clone())
            .unwrap();
        let gcra = RedisRateLimiter::builder(Quota::per_second(1_000_000).unwrap())
            .deadline(Duration::from_secs(2))
            .with_connection_manager(manager.clone())
            .unwrap();
        let workloads = [
            Workload::Naive(manager.clone()),
            Workload::Limiter(sem.clone()),
            Workload::Gcra(gcra.clone()),
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
            "### Acquire+release on one multiplexed connection (loopback, {ROUNDS} interleaved rounds, medians)\n"
        )
        .unwrap();
        writeln!(
            out,
            "| workload | tasks | pairs/s | x naive | p50 µs | p99 µs |\n|---|---:|---:|---:|---:|---:|"
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
        server_cost(&sem, &gcra, &mut manager, &mut out).await;
        out
    });
    println!("{out}");
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let _ = std::fs::write(format!("{target}/redis-concurrency-bench.md"), &out);
}
