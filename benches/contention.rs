//! One hot limit on several cores: what two threads on one direct limiter get next to
//! governor, and the cache-line ownership cost model of docs/design.md ("Past one cache line")
//! with its parameters measured here.
//!
//! **Why not the rounds harness's `threaded`.** It runs a fixed number of calls per thread and
//! divides by the slower thread's time. On a loaded 2-core machine the two threads often do not
//! overlap at all (one is descheduled until the other has finished), and then "2 threads"
//! measures one thread's uncontended speed twice. Here every thread runs over one fixed wall
//! window `[t0, t0 + W]` shared by all (they spin until `t0`), counts its own calls, and
//! measures its own CPU time in the window (`CLOCK_THREAD_CPUTIME_ID`). A round counts only if
//! every thread was on a CPU for at least 90% of the window, so the threads really ran at the
//! same time; aggregate ns/op = W / total calls of that round. Contenders are interleaved
//! round by round (rotating order), ratios are medians of per-round ratios over the rounds in
//! which both contenders qualified.
//!
//! Run (in benches/): `cargo bench --bench contention` (`-- --rounds N --window-us N`,
//! `--quick`). Prints markdown.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use tollgate::{Clock, DefaultClock, LeasedRateLimiter, Quota, RateLimiter};

mod support;
use support::{cpu_model, load_average, median, quantile, quick, DirectFloor};

const FAST: u64 = 1_000_000_000;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a timespec; the clock id is a constant the kernel knows.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One round of one contender: each thread's calls, and the least CPU share of any thread.
struct Sample {
    ops: Vec<u64>,
    min_cpu_share: f64,
    window_ns: f64,
}

impl Sample {
    fn ns_per_op(&self) -> f64 {
        self.window_ns / self.ops.iter().sum::<u64>().max(1) as f64
    }
}

/// Runs `op(thread)` on `threads` threads over the same wall window of `window`.
fn window_run(threads: usize, window: Duration, op: &(dyn Fn(usize) + Sync)) -> Sample {
    // Slack for the threads to be created and reach the start line.
    let t0 = Instant::now() + Duration::from_micros(300);
    let end = t0 + window;
    let results: Vec<(u64, f64)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                sc.spawn(move || {
                    while Instant::now() < t0 {
                        std::hint::spin_loop();
                    }
                    let cpu0 = thread_cpu_ns();
                    let mut n = 0u64;
                    loop {
                        for _ in 0..64 {
                            op(t);
                        }
                        n += 64;
                        if Instant::now() >= end {
                            break;
                        }
                    }
                    let share = (thread_cpu_ns() - cpu0) as f64 / window.as_nanos() as f64;
                    (n, share)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    Sample {
        ops: results.iter().map(|r| r.0).collect(),
        min_cpu_share: results.iter().map(|r| r.1).fold(f64::INFINITY, f64::min),
        window_ns: window.as_nanos() as f64,
    }
}

struct Contender<'a> {
    name: String,
    threads: usize,
    op: Box<dyn Fn(usize) + Sync + 'a>,
}

fn contender<'a>(name: &str, threads: usize, op: impl Fn(usize) + Sync + 'a) -> Contender<'a> {
    Contender {
        name: name.to_string(),
        threads,
        op: Box::new(op),
    }
}

struct Settings {
    rounds: usize,
    window: Duration,
}

fn arg(flag: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1)?.parse().ok()
}

/// Attempts per contender and round before the round is dropped for it.
const ATTEMPTS: usize = 50;

/// `samples[contender][round]`, `None` where some thread was off the CPU in every attempt.
fn measure(s: &Settings, cs: &[Contender<'_>]) -> Vec<Vec<Option<f64>>> {
    let n = cs.len();
    for c in cs {
        let _ = window_run(c.threads, s.window, &*c.op);
    }
    let mut out = vec![Vec::with_capacity(s.rounds); n];
    for round in 0..s.rounds {
        for k in 0..n {
            let i = (k + round) % n;
            // A window in which a thread was preempted is run again (up to `ATTEMPTS` times):
            // short windows make it likely that some attempt has every thread on a CPU.
            let kept = (0..ATTEMPTS).find_map(|_| {
                let smp = window_run(cs[i].threads, s.window, &*cs[i].op);
                (smp.min_cpu_share >= 0.9).then(|| smp.ns_per_op())
            });
            out[i].push(kept);
        }
    }
    out
}

fn ratio(samples: &[Vec<Option<f64>>], i: usize, r: usize) -> (f64, f64, f64, usize) {
    let mut xs: Vec<f64> = samples[i]
        .iter()
        .zip(&samples[r])
        .filter_map(|(a, b)| Some((*a)? / (*b)?))
        .collect();
    let n = xs.len();
    let (lo, hi) = (quantile(&mut xs, 0.25), quantile(&mut xs, 0.75));
    (median(&mut xs), lo, hi, n)
}

fn valid(samples: &[Option<f64>]) -> Vec<f64> {
    samples.iter().flatten().copied().collect()
}

/// Prints one table; returns each contender's median aggregate ns/op.
fn table(title: &str, s: &Settings, refs: &[&str], cs: Vec<Contender<'_>>) -> Vec<f64> {
    let before = load_average();
    let samples = measure(s, &cs);
    println!("\n### {title}\n");
    println!(
        "{}, {} cores; load average (1 min) {before} at start, {} at end; {} rounds of a {} us \
         window; a round counts when every thread was on a CPU >= 90% of the window (a \
         window that fails this is run again, up to {ATTEMPTS} times)\n",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        s.rounds,
        s.window.as_micros()
    );
    print!("| contender | rounds kept | median aggregate ns/op |");
    for r in refs {
        print!(" x {r} |");
    }
    println!();
    print!("|---|---:|---:|");
    for _ in refs {
        print!("---:|");
    }
    println!();
    let ref_idx: Vec<usize> = refs
        .iter()
        .map(|r| cs.iter().position(|c| c.name == *r).expect("ref"))
        .collect();
    let mut medians = Vec::new();
    for (i, c) in cs.iter().enumerate() {
        let mut v = valid(&samples[i]);
        let m = median(&mut v);
        medians.push(m);
        print!("| {} | {}/{} | {m:.2} |", c.name, v.len(), s.rounds);
        for &r in &ref_idx {
            if r == i {
                print!(" 1 |");
            } else {
                let (m, lo, hi, n) = ratio(&samples, i, r);
                print!(" {m:.2} [{lo:.2}-{hi:.2}] (n={n}) |");
            }
        }
        println!();
    }
    medians
}

/// A prototype of a per-thread lease (not the library's): a thread serves calls from its own
/// line while its lease lasts, and takes `l` permits at once from the shared GCRA word (one
/// CAS of `l * T`) when it runs out. The clock is still read on every call (a lease would
/// expire), so only the shared line's traffic changes.
struct LeasePrototype {
    floor: DirectFloor<DefaultClock>,
    local: Vec<CachePadded<AtomicU64>>,
    l: u64,
}

impl LeasePrototype {
    fn new(threads: usize, l: u64) -> Self {
        LeasePrototype {
            floor: DirectFloor::new(DefaultClock::new(), 1, FAST),
            local: (0..threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            l,
        }
    }

    #[inline(always)]
    fn try_acquire(&self, t: usize) -> bool {
        let now = self.floor.clock.now();
        let mine = &self.local[t];
        let left = mine.load(Ordering::Relaxed);
        if left > 0 {
            mine.store(left - 1, Ordering::Relaxed);
            black_box(now);
            return true;
        }
        // Lease `l` permits: one CAS on the shared word, new tat = max(tat, now) + l * T.
        let cell = &self.floor.cell;
        let cur = cell.load(Ordering::Acquire);
        let new = cur.max(now) + self.l * self.floor.t;
        if new.saturating_sub(self.floor.tau) <= now
            && cell
                .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            mine.store(self.l - 1, Ordering::Relaxed);
            return true;
        }
        false
    }
}

fn main() {
    let s = Settings {
        rounds: arg("--rounds").map_or(if quick() { 7 } else { 61 }, |r| r as usize),
        window: Duration::from_micros(arg("--window-us").unwrap_or(200)),
    };
    println!(
        "tollgate contention: fixed wall windows, per-thread counts, CPU share checked; {}",
        cpu_model()
    );
    let tq = Quota::per_second(FAST).unwrap();
    let gq = governor::Quota::per_second(NonZeroU32::new(FAST as u32).unwrap());

    // 1. Two threads on one direct limiter, allowed path (every call stores).
    let tg = RateLimiter::new(tq);
    let gov = governor::RateLimiter::direct(gq);
    let floor = DirectFloor::new(DefaultClock::new(), 1, FAST);
    let leased = |l: u32| {
        LeasedRateLimiter::with_shards(RateLimiter::new(tq), NonZeroU32::new(l).unwrap(), 2)
    };
    let (leased8, leased64) = (leased(8), leased(64));
    let (tg, gov, floor) = (&tg, &gov, &floor);
    let (leased8, leased64) = (&leased8, &leased64);
    table(
        "direct try_acquire, allowed, one limiter shared by 2 threads (aggregate)",
        &s,
        &[
            "governor 2 threads",
            "tollgate 2 threads",
            "tollgate 1 thread",
        ],
        vec![
            contender("tollgate 2 threads", 2, move |_| {
                black_box(tg.try_acquire());
            }),
            contender("governor 2 threads", 2, move |_| {
                black_box(gov.check().is_ok());
            }),
            contender("floor 2 threads", 2, move |_| {
                black_box(floor.try_acquire());
            }),
            contender("tollgate 1 thread", 1, move |_| {
                black_box(tg.try_acquire());
            }),
            contender("LeasedRateLimiter L=8, 2 threads", 2, move |_| {
                black_box(leased8.try_acquire());
            }),
            contender("LeasedRateLimiter L=64, 2 threads", 2, move |_| {
                black_box(leased64.try_acquire());
            }),
            contender("LeasedRateLimiter L=64, 1 thread", 1, move |_| {
                black_box(leased64.try_acquire());
            }),
            contender("governor 1 thread", 1, move |_| {
                black_box(gov.check().is_ok());
            }),
            contender("floor 1 thread", 1, move |_| {
                black_box(floor.try_acquire());
            }),
        ],
    );

    // 2. The model's parameters, and the lease prototype as a check of its amortisation.
    let shared = CachePadded::new(AtomicU64::new(0));
    let own: Vec<CachePadded<AtomicU64>> = (0..2)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let ping = CachePadded::new(AtomicU64::new(0));
    let clock = DefaultClock::new();
    let leases: Vec<LeasePrototype> = [1u64, 8, 64]
        .iter()
        .map(|&l| LeasePrototype::new(2, l))
        .collect();
    let (shared, own, ping, clock) = (&shared, &own, &ping, &clock);
    let cas = |a: &AtomicU64| {
        let cur = a.load(Ordering::Acquire);
        black_box(
            a.compare_exchange(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok(),
        );
    };
    let mut cs = vec![
        contender("c: CAS on own line, 1 thread", 1, move |t| cas(&own[t])),
        contender("s: CAS on one shared line, 2 threads", 2, move |_| {
            cas(shared)
        }),
        contender("clock read, 1 thread", 1, move |_| {
            black_box(clock.now());
        }),
        // Thread 0 turns even to odd, thread 1 odd to even: each call waits for its turn and
        // hands the line over, so the aggregate ns/op is one hand-off (bounded spin: the other
        // thread stops at the window's end).
        contender("ping-pong hand-off (x: one line transfer)", 2, move |t| {
            for _ in 0..1000 {
                let v = ping.load(Ordering::Acquire);
                if (v & 1) as usize == t {
                    ping.store(v + 1, Ordering::Release);
                    return;
                }
                // No `spin_loop` (PAUSE): in a VM a PAUSE loop can exit to the hypervisor,
                // which is what a 1.5 us "hand-off" measured.
            }
        }),
    ];
    for (i, l) in [1u64, 8, 64].iter().enumerate() {
        let lease = &leases[i];
        cs.push(contender(
            &format!("lease prototype L={l}, 2 threads"),
            2,
            move |t| {
                black_box(lease.try_acquire(t));
            },
        ));
        cs.push(contender(
            &format!("lease prototype L={l}, 1 thread"),
            1,
            move |t| {
                black_box(lease.try_acquire(t));
            },
        ));
    }
    cs.push(contender("floor 1 thread (w)", 1, move |_| {
        black_box(floor.try_acquire());
    }));
    cs.push(contender("floor 2 threads", 2, move |_| {
        black_box(floor.try_acquire());
    }));
    let m = table(
        "cost-model parameters and the lease prototype (aggregate ns/op)",
        &s,
        &["floor 2 threads"],
        cs,
    );
    let (c, x, w, s2) = (m[0], m[3] / 2.0, m[m.len() - 2], m[m.len() - 1]);
    // The 2-thread lease rows: 4, 6, 8 (L = 1, 8, 64).
    model(c, x, w, s2, &[(1, m[4]), (8, m[6]), (64, m[8])]);
}

/// The cost model (docs/design.md, "Past one cache line"), from the measured parameters:
/// - `w`: one call's own work on an uncontended line (clock read, load, arithmetic, CAS);
/// - `x`: one transfer of a line between cores: half a ping-pong hand-off (the reader's load
///   pulls the line shared, the writer's store pulls it back exclusive);
/// - `c`: an uncontended CAS;
/// - `s2`: one CAS word measured at 2 threads (the floor's aggregate ns/op).
///
/// Aggregate ns/op at k cores:
/// (i)   one CAS word: w at k = 1, and the line-bound `s2` for every k >= 2 (the line is one
///       serial resource, already saturated at 2: more cores add no throughput, and on a
///       bigger machine their transfers cross more distance, so this is optimistic);
/// (ii)  leases of L: max((w + (x + c) / L) / k, (x + c) / L): one shared update per L calls,
///       each paying a transfer; the other L - 1 calls stay on the core's own line;
/// (iii) combining: max((w + 2x) / k, x / m + r): a client publishes its request and waits for
///       the answer (two transfers of its slot's line); the combiner serves each request for a
///       slot-line miss, overlapping m of them, plus r (the rule's arithmetic, ~ c / 2).
fn model(c: f64, x: f64, w: f64, s2: f64, lease_measured: &[(u64, f64)]) {
    println!(
        "\n### cost model: predicted aggregate ns/op (and throughput x one core) for k cores\n"
    );
    println!(
        "Parameters from the table above (same run): w = {w:.2} ns (floor, 1 thread), x = {x:.2} \
         ns (one line transfer), c = {c:.2} ns (own-line CAS), s2 = {s2:.2} ns (floor, 2 threads \
         on one word). Check of (ii) at k = 2 against the lease prototype:"
    );
    let lease = |k: f64, l: f64| {
        if k == 1.0 {
            w
        } else {
            ((w + (x + c) / l) / k).max((x + c) / l)
        }
    };
    for &(l, measured) in lease_measured {
        println!(
            "L = {l}: predicted {:.2} ns, measured {measured:.2} ns;",
            lease(2.0, l as f64)
        );
    }
    println!();
    let r = c / 2.0;
    println!("| k | (i) one CAS word | (ii) lease L=8 | (ii) lease L=64 | (iii) combining, m=1 | (iii) combining, m=4 | over-admission bound of (ii): k (L - 1), L=8 / 64 |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for k in [1u32, 2, 4, 8, 16, 32, 64] {
        let kf = k as f64;
        let one = if k == 1 { w } else { s2 };
        let comb = |m: f64| {
            if k == 1 {
                w
            } else {
                ((w + 2.0 * x) / kf).max(x / m + r)
            }
        };
        let cell = |ns: f64| format!("{ns:.2} ({:.1}x)", w / ns);
        println!(
            "| {k} | {} | {} | {} | {} | {} | {} / {} permits |",
            cell(one),
            cell(lease(kf, 8.0)),
            cell(lease(kf, 64.0)),
            cell(comb(1.0)),
            cell(comb(4.0)),
            k * 7,
            k * 63
        );
    }
}
