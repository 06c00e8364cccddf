//! The clock question, measured: what each clock costs, and how far a reading can
//! be *earlier* than a reading that happened-before it on the other core.
//!
//! 1. **Cost of one read** (interleaved rounds, `support/rounds.rs`), and the same read inside
//!    the direct floor (clock + load + CAS), where out-of-order execution can overlap it.
//! 2. **Cross-core order.** Two threads pinned to two cores play ping-pong through one cache
//!    line: a thread waits until it observes the other's last reading (acquire load, or a
//!    locked read-modify-write as a lock acquisition does), reads its own clock, checks it
//!    against the observed one and publishes it (release). Every checked reading therefore
//!    happened-after the one it is compared with. Reported per clock and direction: how many
//!    readings were earlier, the largest backwards step in ns, and the forward gap (the
//!    cross-core hand-off time, for scale).
//! 3. **Start-up.** What the first `tollgate::DefaultClock::new()` of a process takes (the
//!    probe and quanta's TSC calibration), a later one, and a bare `quanta::Clock::new()`.
//!
//! TSC ticks are converted to ns with the TSC frequency measured here against `Instant`.
//!
//! Run (in benches/): `cargo bench --bench clocks` (`-- --quick`: 1M readings per case instead
//! of 10M). Prints markdown. x86_64 only (elsewhere it says so and exits).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use tollgate::{Clock, DefaultClock, QuantaClock, StdClock};

mod support;
use support::rounds::{case, compare, Settings, ROUNDS};
use support::{quantile, quick, DirectFloor, RawQuanta};

#[cfg(target_arch = "x86_64")]
mod tsc {
    use std::arch::x86_64::{__rdtscp, _mm_lfence, _rdtsc};

    /// `rdtsc`: not ordered with earlier loads (nor later instructions).
    #[inline(always)]
    pub fn plain() -> u64 {
        // SAFETY: rdtsc exists on every x86_64 CPU; it only reads the time-stamp counter.
        unsafe { _rdtsc() }
    }

    /// `lfence; rdtsc`: the read starts only after every earlier instruction has completed
    /// locally, so after the load that observed the other core's reading.
    #[inline(always)]
    pub fn lfence() -> u64 {
        // SAFETY: lfence (SSE2, baseline on x86_64) and rdtsc have no memory operands.
        unsafe {
            _mm_lfence();
            _rdtsc()
        }
    }

    /// `rdtscp`: waits for earlier instructions to execute and earlier loads to be globally
    /// visible (later instructions may still start before it).
    #[inline(always)]
    pub fn rdtscp() -> u64 {
        let mut aux = 0u32;
        // SAFETY: rdtscp is present wherever the kernel reports it (checked by the caller);
        // it writes only `aux`, a local.
        unsafe { __rdtscp(&mut aux) }
    }

    /// Whether the CPU has `rdtscp`.
    pub fn has_rdtscp() -> bool {
        raw_cpuid::CpuId::new()
            .get_extended_processor_and_feature_identifiers()
            .is_some_and(|f| f.has_rdtscp())
    }

    /// Nanoseconds per TSC tick, measured against `Instant` over 50 ms.
    pub fn ns_per_tick() -> f64 {
        let (t0, c0) = (std::time::Instant::now(), lfence());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (c1, t1) = (lfence(), std::time::Instant::now());
        (t1 - t0).as_nanos() as f64 / (c1 - c0) as f64
    }
}

/// A clock reading `lfence; rdtsc`, scaled to ns the way quanta scales its raw reads (valid
/// where quanta itself reads the TSC, as on the machine measured): the fenced candidate in a
/// limiter-shaped loop.
#[cfg(target_arch = "x86_64")]
struct FencedTsc {
    clock: quanta::Clock,
    origin: u64,
}

#[cfg(target_arch = "x86_64")]
impl Clock for FencedTsc {
    #[inline(always)]
    fn now(&self) -> tollgate::Nanos {
        self.clock.delta_as_nanos(self.origin, tsc::lfence())
    }
}

/// Pins the calling thread to `cpu`; false if the OS refused (fewer CPUs, a cpuset).
fn pin_to(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it; the call
    // reads `size_of::<cpu_set_t>()` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// How a thread learns that the other core's reading is there.
#[derive(Clone, Copy)]
enum Observe {
    /// An acquire load (a decision loading the TAT another thread's CAS stored).
    Load,
    /// A locked read-modify-write (acquiring a lock the other thread released, as a decision
    /// taking the shard lock after the sweeper released it).
    LockedRmw,
}

/// One direction of the ping-pong: `gaps[i]` = this thread's reading minus the reading it had
/// just observed from the other core (raw units; negative = went backwards).
struct Side {
    gaps: Vec<i64>,
}

/// The shared line: the last reading and its sequence number.
#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    value: AtomicU64,
}

/// Ping-pong `steps` readings between two threads pinned to CPUs 0 and 1 (see the module
/// docs). Returns the two directions (CPU 1 after CPU 0, CPU 0 after CPU 1) and whether
/// pinning worked.
fn ping_pong<R: Fn() -> u64 + Sync>(read: R, observe: Observe, steps: u64) -> ([Side; 2], bool) {
    let slot = CachePadded::new(Slot::default());
    let (slot, read) = (&slot, &read);
    let run = move |me: u64| {
        let pinned = pin_to(me as usize);
        let mut gaps = Vec::with_capacity((steps / 2) as usize);
        // Thread 0 publishes the even steps, thread 1 the odd ones.
        let mut i = me;
        while i < steps {
            if i > 0 {
                loop {
                    let seen = match observe {
                        Observe::Load => slot.seq.load(Ordering::Acquire),
                        Observe::LockedRmw => slot.seq.fetch_add(0, Ordering::AcqRel),
                    };
                    if seen == i {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
            let before = slot.value.load(Ordering::Relaxed);
            let now = read();
            if i > 0 {
                gaps.push(now.wrapping_sub(before) as i64);
            }
            slot.value.store(now, Ordering::Relaxed);
            slot.seq.store(i + 1, Ordering::Release);
            i += 2;
        }
        (Side { gaps }, pinned)
    };
    let ((a, pa), (b, pb)) = std::thread::scope(|s| {
        let t0 = s.spawn(move || run(0));
        let t1 = s.spawn(move || run(1));
        (t0.join().unwrap(), t1.join().unwrap())
    });
    // Thread 1's readings follow thread 0's, and the other way round.
    ([b, a], pa && pb)
}

/// Prints one row per direction: backwards count, largest step, and quantiles of the gap
/// (this reading minus the observed one; the median is about one cross-core hand-off).
fn report(clock: &str, how: &str, sides: [Side; 2], ns_per_unit: f64) {
    for (dir, side) in ["0 -> 1", "1 -> 0"].iter().zip(sides) {
        let n = side.gaps.len();
        let back: Vec<i64> = side.gaps.iter().copied().filter(|&g| g < 0).collect();
        let worst = back.iter().copied().min().unwrap_or(0);
        let mut fwd: Vec<f64> = side.gaps.iter().map(|&g| g as f64 * ns_per_unit).collect();
        println!(
            "| {clock} | {how} | {dir} | {n} | {} | {:.1} | {:.0} | {:.0} | {:.0} |",
            back.len(),
            worst.unsigned_abs() as f64 * ns_per_unit,
            quantile(&mut fwd, 0.0),
            quantile(&mut fwd, 0.5),
            quantile(&mut fwd, 0.999),
        );
    }
}

fn read_costs(s: &Settings) {
    let std_clock = StdClock::new();
    let quanta_clock = QuantaClock::new();
    let default_clock = DefaultClock::new();
    let raw = quanta::Clock::new();
    #[allow(unused_mut)] // x86_64 adds the raw TSC reads
    let mut cases = vec![
        case("Instant (StdClock::now)", |_| {
            black_box(black_box(&std_clock).now());
        }),
        case("quanta raw + scale (QuantaClock::now)", |_| {
            black_box(black_box(&quanta_clock).now());
        }),
        case("DefaultClock::now", |_| {
            black_box(black_box(&default_clock).now());
        }),
        case("quanta::Clock::raw (no scaling)", |_| {
            black_box(black_box(&raw).raw());
        }),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        cases.push(case("rdtsc", |_| {
            black_box(tsc::plain());
        }));
        cases.push(case("lfence; rdtsc", |_| {
            black_box(tsc::lfence());
        }));
        if tsc::has_rdtscp() {
            cases.push(case("rdtscp", |_| {
                black_box(tsc::rdtscp());
            }));
        }
    }
    compare(
        "one clock read (ns)",
        s,
        1_000_000,
        &[
            "Instant (StdClock::now)",
            "quanta raw + scale (QuantaClock::now)",
        ],
        cases,
    );

    // The same reads where they matter: the direct floor (clock, load, arithmetic, CAS).
    let floor_std = DirectFloor::new(StdClock::new(), 1, 1_000_000_000);
    let floor_q = DirectFloor::new(RawQuanta::new(), 1, 1_000_000_000);
    let floor_default = DirectFloor::new(DefaultClock::new(), 1, 1_000_000_000);
    #[cfg(target_arch = "x86_64")]
    let floor_fenced = {
        let clock = quanta::Clock::new();
        let origin = tsc::lfence();
        DirectFloor::new(FencedTsc { clock, origin }, 1, 1_000_000_000)
    };
    #[allow(unused_mut)] // x86_64 adds the fenced read
    let mut cases = vec![
        case("floor/std", |_| {
            black_box(black_box(&floor_std).try_acquire());
        }),
        case("floor/quanta", |_| {
            black_box(black_box(&floor_q).try_acquire());
        }),
        case("floor/DefaultClock", |_| {
            black_box(black_box(&floor_default).try_acquire());
        }),
    ];
    #[cfg(target_arch = "x86_64")]
    cases.push(case("floor/lfence;rdtsc", |_| {
        black_box(black_box(&floor_fenced).try_acquire());
    }));
    compare(
        "direct floor (clock + load + CAS, allowed path) per clock (ns)",
        s,
        1_000_000,
        &["floor/std", "floor/quanta"],
        cases,
    );
}

#[cfg(target_arch = "x86_64")]
fn cross_core(steps: u64) {
    let ns_per_tick = tsc::ns_per_tick();
    println!(
        "\n### cross-core order: {steps} readings per case, each taken right after observing \
         the other core's previous reading\n"
    );
    println!(
        "TSC: {:.4} ns per tick ({:.0} MHz), measured against Instant.\n",
        ns_per_tick,
        1e3 / ns_per_tick
    );
    println!("| clock | observed by | direction | readings | earlier than the observed one | largest backwards step (ns) | gap: min (ns) | median | p99.9 |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    let std_clock = StdClock::new();
    let quanta_clock = quanta::Clock::new();
    let default_clock = DefaultClock::new();
    let mut pinned = true;
    for (how, observe) in [
        ("acquire load", Observe::Load),
        ("locked RMW", Observe::LockedRmw),
    ] {
        let mut run = |name: &str, sides: ([Side; 2], bool), unit: f64| {
            pinned &= sides.1;
            report(name, how, sides.0, unit);
        };
        run(
            "rdtsc via quanta::Clock::raw (governor, QuantaClock)",
            ping_pong(|| quanta_clock.raw(), observe, steps),
            ns_per_tick,
        );
        run(
            "lfence; rdtsc",
            ping_pong(tsc::lfence, observe, steps),
            ns_per_tick,
        );
        if tsc::has_rdtscp() {
            run(
                "rdtscp",
                ping_pong(tsc::rdtscp, observe, steps),
                ns_per_tick,
            );
        }
        run(
            "Instant (StdClock)",
            ping_pong(|| std_clock.now(), observe, steps),
            1.0,
        );
        run(
            "DefaultClock",
            ping_pong(|| default_clock.now(), observe, steps),
            1.0,
        );
    }
    if !pinned {
        println!("\n(pinning to CPUs 0 and 1 failed: the threads may have shared a core)");
    }
}

fn main() {
    // Before anything else touches quanta: its calibration runs once per process, inside the
    // first DefaultClock::new() (with the CPUID and clocksource probe).
    let t = Instant::now();
    let default_clock = DefaultClock::new();
    let default_first = t.elapsed();
    let t = Instant::now();
    let again = DefaultClock::new();
    let default_again = t.elapsed();
    let t = Instant::now();
    let raw_quanta = quanta::Clock::new();
    let quanta_new = t.elapsed();
    black_box((&again, raw_quanta));

    let quick = quick();
    println!("tollgate clocks: {}", if quick { "quick" } else { "full" });
    println!(
        "\nstart-up: first DefaultClock::new() (CPUID, clocksource file, quanta's TSC \
         calibration) {:.2} ms; a second one {:.2} us; a quanta::Clock::new() after that \
         {:.1} us. DefaultClock here: {:?}",
        ms(default_first),
        default_again.as_nanos() as f64 / 1e3,
        quanta_new.as_nanos() as f64 / 1e3,
        default_clock,
    );

    let s = Settings::from_args(ROUNDS);
    read_costs(&s);
    #[cfg(target_arch = "x86_64")]
    cross_core(if quick { 1_000_000 } else { 10_000_000 });
    #[cfg(not(target_arch = "x86_64"))]
    println!("\n(cross-core TSC order: x86_64 only; tollgate's default is Instant elsewhere)");
}

fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}
