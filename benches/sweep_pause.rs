//! The worst pause a hot-path call sees while a sweep evicts 1M, then 10M, cold keys (`u64`,
//! then `String`).
//!
//! One thread calls `try_acquire` on a hot key in a loop and records each call's latency;
//! the main thread runs `sweep_now()` over the cold keys (the same code the background sweeper
//! runs), which walks each shard in chunks, one write-lock hold per chunk, and lets waiting
//! decisions in between chunks.
//!
//! The noise floor is measured the same way with the sweep replaced by a thread that only
//! spins for as long: both cores are busy exactly as during a sweep, so preemption by other
//! processes on this shared 2-core machine hits the hot loop as often. The sweep's figure must
//! be read against that one, not against an idle machine. The sweeper's own figure
//! (`stats().longest_pause`, the longest single hold of a shard's write lock) is reported too.
//!
//! Run (in benches/): `cargo bench --bench sweep_pause` (or `bash benches/run.sh`;
//! `-- --quick` for 1M `u64` keys only). Prints markdown.

use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate::{KeyedRateLimiter, Quota};

mod support;
use support::{median, quick, string_key};

/// Latency stats of the hot loop while it ran.
struct Loop {
    calls: u64,
    max: Duration,
    /// The slowest call during which the thread was not preempted (no involuntary context
    /// switch): what the call itself waited, on a lock or otherwise, with the time other
    /// processes took from it left out.
    max_own: Duration,
    over_100us: u64,
    /// Calls over 500 us that were not preempted.
    own_over_500us: u64,
    /// Of those, the calls that blocked (a voluntary context switch: the thread parked, waiting
    /// for the shard lock).
    own_over_500us_blocked: u64,
}

/// The calling thread's context switches so far: (voluntary, involuntary). Involuntary ones
/// are preemptions; voluntary ones are waits (parking on a lock).
fn switches() -> (i64, i64) {
    // SAFETY: getrusage only writes the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        (u.ru_nvcsw, u.ru_nivcsw)
    }
}

/// Calls `try_acquire(hot)` until `stop`, timing each call.
fn hot_loop<K, Q>(limiter: &KeyedRateLimiter<K>, hot: &Q, stop: &AtomicBool) -> Loop
where
    K: Hash + Eq + Send + Sync + std::borrow::Borrow<Q> + 'static,
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
{
    let mut l = Loop {
        calls: 0,
        max: Duration::ZERO,
        max_own: Duration::ZERO,
        over_100us: 0,
        own_over_500us: 0,
        own_over_500us_blocked: 0,
    };
    while !stop.load(Ordering::Relaxed) {
        let before = switches();
        let t0 = Instant::now();
        std::hint::black_box(limiter.try_acquire(hot));
        let d = t0.elapsed();
        l.calls += 1;
        l.max = l.max.max(d);
        if d > Duration::from_micros(100) {
            l.over_100us += 1;
            let after = switches();
            if after.1 == before.1 {
                l.max_own = l.max_own.max(d);
                if d > Duration::from_micros(500) {
                    l.own_over_500us += 1;
                    l.own_over_500us_blocked += u64::from(after.0 != before.0);
                }
            }
        } else {
            l.max_own = l.max_own.max(d);
        }
    }
    l
}

struct Round {
    sweep: Duration,
    /// The longest single hold of a shard's write lock (the sweeper's own figure, `stats()`).
    longest_hold: Duration,
    /// How often the sweeping thread was preempted during the sweep (while holding a shard
    /// lock or between chunks).
    sweeper_preempted: i64,
    evicted: usize,
    during: Loop,
    noise: Loop,
}

/// Runs the hot loop while `work` runs on the main thread; returns what `work` returned.
fn with_hot_loop<K, Q, R>(
    limiter: &KeyedRateLimiter<K>,
    hot: &Q,
    work: impl FnOnce() -> R,
) -> (R, Loop)
where
    K: Hash + Eq + Send + Sync + std::borrow::Borrow<Q> + 'static,
    Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
{
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| hot_loop(limiter, hot, &stop));
        std::thread::sleep(Duration::from_millis(20)); // the hot loop is running and warm
        let r = work();
        std::thread::sleep(Duration::from_millis(2));
        stop.store(true, Ordering::Relaxed);
        (r, h.join().unwrap())
    })
}

fn round<K, Q>(cold: u64, key: impl Fn(u64) -> K, hot: &Q) -> Round
where
    K: Hash + Eq + Send + Sync + std::borrow::Borrow<Q> + 'static,
    Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
{
    // T = 1 ms: a key that took one permit is cold 1 ms later. The hot key is drained (its
    // TAT runs a second ahead), so it is never cold and stays in the map throughout.
    let limiter = KeyedRateLimiter::<K>::new(Quota::per_second(1000).unwrap());
    for k in 0..cold {
        let k = key(k);
        let _ = limiter.try_acquire(std::borrow::Borrow::<Q>::borrow(&k));
    }
    while limiter.try_acquire(hot) {}
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(limiter.len() as u64, cold + 1);

    let ((sweep, evicted, sweeper_preempted), during) = with_hot_loop(&limiter, hot, || {
        let before = switches().1;
        let t0 = Instant::now();
        let evicted = limiter.sweep_now();
        (t0.elapsed(), evicted, switches().1 - before)
    });
    assert_eq!(evicted as u64, cold, "every cold key evicted");
    assert_eq!(limiter.len(), 1, "the hot key stays");
    let longest_hold = limiter.stats().longest_pause;

    // The noise floor: the same loop while the main thread spins as long as the sweep took.
    let ((), noise) = with_hot_loop(&limiter, hot, || {
        let t0 = Instant::now();
        while t0.elapsed() < sweep {
            std::hint::spin_loop();
        }
    });
    Round {
        sweep,
        longest_hold,
        sweeper_preempted,
        evicted,
        during,
        noise,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    type Case = (u64, &'static str, &'static str, usize);
    // SWEEP_PAUSE_ONLY=10M-u64 (for instance) runs one case.
    let only = std::env::var("SWEEP_PAUSE_ONLY").ok();
    let cases: &[Case] = if quick() {
        &[(1_000_000, "1M", "u64", 1)]
    } else {
        &[
            (1_000_000, "1M", "u64", 7),
            (10_000_000, "10M", "u64", 5),
            (1_000_000, "1M", "String", 5),
            (10_000_000, "10M", "String", 3),
        ]
    };
    for &(cold, size, kind, rounds) in cases {
        if only
            .as_deref()
            .is_some_and(|o| o != format!("{size}-{kind}"))
        {
            continue;
        }
        let rs: Vec<Round> = (0..rounds)
            .map(|i| match kind {
                // A different hot key (so, shard) each round.
                "u64" => round(cold, |k| k, &(u64::MAX - i as u64)),
                _ => round(cold, string_key, format!("hot{i}").as_str()),
            })
            .collect();
        report(&format!("{size} cold {kind} keys"), &rs);
    }
}

fn report(what: &str, rs: &[Round]) {
    println!(
        "\n### worst hot-path call while sweeping {what} ({} rounds)\n",
        rs.len()
    );
    println!("(\"own\": calls during which the hot thread was not preempted, by getrusage's involuntary context switches: what the call itself waited; \"blocked\": own calls over 500 us in which the hot thread parked, i.e. waited for the shard lock; \"sweeper preempted\": the sweeping thread's involuntary switches during the sweep)\n");
    println!("| round | sweep took (ms) | longest shard lock hold (ms) | sweeper preempted | evicted | hot calls during | worst call during sweep (ms) | worst own call (ms) | calls > 100 us / own > 500 us / blocked | noise floor: worst call / worst own (ms) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, r) in rs.iter().enumerate() {
        println!(
            "| {} | {:.1} | {:.3} | {} | {} | {} | {:.3} | {:.3} | {} / {} / {} | {:.3} / {:.3} |",
            i + 1,
            ms(r.sweep),
            ms(r.longest_hold),
            r.sweeper_preempted,
            r.evicted,
            r.during.calls,
            ms(r.during.max),
            ms(r.during.max_own),
            r.during.over_100us,
            r.during.own_over_500us,
            r.during.own_over_500us_blocked,
            ms(r.noise.max),
            ms(r.noise.max_own),
        );
    }
    let mut during: Vec<f64> = rs.iter().map(|r| ms(r.during.max)).collect();
    let mut own: Vec<f64> = rs.iter().map(|r| ms(r.during.max_own)).collect();
    let mut noise: Vec<f64> = rs.iter().map(|r| ms(r.noise.max_own)).collect();
    let mut holds: Vec<f64> = rs.iter().map(|r| ms(r.longest_hold)).collect();
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!(
        "\n{what}: worst own call during a sweep: median {:.3} ms, max {:.3} ms (all calls: median {:.3}, max {:.3}); noise floor (own): median {:.3} ms, max {:.3} ms; longest lock hold: median {:.3} ms, max {:.3} ms",
        median(&mut own),
        max(&own),
        median(&mut during),
        max(&during),
        median(&mut noise),
        max(&noise),
        median(&mut holds),
        max(&holds),
    );
}
