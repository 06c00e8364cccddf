//! The background sweeper: it evicts only cold keys, never loses an update while decisions
//! race with it, and stops when the limiter is dropped.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tollgate::{Clock, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

/// Tests that start sweeper threads run one at a time, so thread counts are unambiguous.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads of this process named like the sweeper.
fn sweeper_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("linux /proc")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "tollgate-sweep")
        .count()
}

/// Polls `cond` for up to 30 s of wall time (generous: only a broken sweeper gets near it).
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

#[test]
fn background_thread_evicts_cold_keys_only() {
    let _serial = serial();
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(clock.clone())
        .sweep_interval(Duration::from_millis(1))
        .build();
    for k in 0..100 {
        assert!(l.try_acquire(&k)); // tat 1 s each
    }
    // Sweeps run, but time is frozen: every key is hot and stays.
    assert!(eventually(|| l.stats().sweeps >= 3));
    assert_eq!(l.len(), 100);
    assert!(!l.try_acquire(&7));
    clock.advance(Duration::from_millis(999));
    let before = l.stats().sweeps;
    assert!(eventually(|| l.stats().sweeps >= before + 2));
    assert_eq!(l.len(), 100, "tat = now + 1 ms is not cold");
    clock.advance(Duration::from_millis(1));
    assert!(eventually(|| l.is_empty()));
    assert_eq!(l.stats().evicted, 100);
    assert!(l.stats().last_sweep >= l.stats().longest_pause);
}

#[test]
fn sweeper_thread_exits_when_the_limiter_is_dropped() {
    let _serial = serial();
    let before = sweeper_threads();
    // An hour between sweeps: only the wake-up on drop can make it exit promptly.
    let l = KeyedRateLimiter::<String>::builder(Quota::per_second(1).unwrap())
        .sweep_interval(Duration::from_secs(3600))
        .build();
    // The thread names itself once it runs.
    assert!(eventually(|| sweeper_threads() == before + 1));
    assert!(l.try_acquire("k"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(l);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("dropping the limiter must not wait out the sweep interval");
    // Drop joins the thread, so it is gone already.
    assert_eq!(sweeper_threads(), before);
}

#[test]
fn sweeper_thread_exits_when_dropped_mid_sweeping() {
    let _serial = serial();
    let before = sweeper_threads();
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(clock.clone())
        .sweep_interval(Duration::ZERO) // the shortest interval: 1 ms
        .build();
    for k in 0..10_000 {
        assert!(l.try_acquire(&k));
    }
    assert!(eventually(|| l.stats().sweeps >= 2));
    assert!(eventually(|| sweeper_threads() == before + 1));
    drop(l);
    assert_eq!(sweeper_threads(), before);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn tokio_task_sweeper_evicts_and_stops() {
    use tollgate::TokioClock;
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(TokioClock::new())
        .sweep_interval(Duration::from_secs(5))
        .sweep_on_tokio(true)
        .build();
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks = metrics.num_alive_tasks();
    assert!(tasks >= 1);
    for k in 0..10 {
        assert!(l.try_acquire(&k)); // tat 1 s
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(l.stats().sweeps, 0, "first sweep is due at 5 s");
    for _ in 0..100 {
        if l.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(l.is_empty());
    assert_eq!(l.stats().evicted, 10);
    drop(l);
    for _ in 0..100 {
        if metrics.num_alive_tasks() < tasks {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        metrics.num_alive_tasks(),
        tasks - 1,
        "the sweeper task ended"
    );
}

/// Rounds with frozen time: the driver advances the clock (sometimes sweeping itself), then
/// every acquirer drains every key until denied, while a sweeper thread and a continuous
/// background sweeper run throughout. With time frozen inside a round, each round admits
/// exactly what a full drain admits, so the totals must equal a reference limiter that is
/// never swept. Any eviction that lost state (a hot key dropped, a racing CAS lost) would
/// admit more.
#[test]
fn racing_sweeps_never_change_any_decision() {
    let _serial = serial();
    const KEYS: u64 = 4;
    const ACQUIRERS: usize = 3;
    const ROUNDS: usize = 1500;
    let steps: [u64; 7] = [300, 1_000, 4_000, 5_000, 700, 9_000, 4_001];
    let q = Quota::from_interval(Duration::from_nanos(1_000))
        .unwrap()
        .with_burst(4)
        .unwrap();
    let clock = ManualClock::new();
    let l = Arc::new(
        KeyedRateLimiter::<u64>::builder(q)
            .clock(clock.clone())
            .sweep_interval(Duration::ZERO)
            .build(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sweeping = {
        let (l, stop) = (l.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                l.sweep_now();
                // Leave the sweep lock free a moment: std's mutex is not fair, and the driver
                // sweeps too.
                std::thread::sleep(Duration::from_micros(50));
            }
        })
    };
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let barrier = Arc::new(Barrier::new(ACQUIRERS + 1));
    let acquirers: Vec<_> = (0..ACQUIRERS)
        .map(|a| {
            let (l, admitted, barrier) = (l.clone(), admitted.clone(), barrier.clone());
            std::thread::spawn(move || {
                for _ in 0..ROUNDS {
                    barrier.wait(); // clock advanced
                    for i in 0..KEYS {
                        let k = (i + a as u64) % KEYS;
                        while l.try_acquire(&k) {
                            admitted[k as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    barrier.wait(); // round drained
                }
            })
        })
        .collect();
    let reference = RateLimiter::builder(q).clock(clock.clone()).build();
    let mut expected = 0u64;
    for round in 0..ROUNDS {
        clock.advance_nanos(steps[round % steps.len()]);
        if round % 3 == 0 {
            l.sweep_now();
        }
        barrier.wait();
        barrier.wait();
        // Same clock, same requests, never swept: what each key must have admitted.
        while reference.try_acquire() {
            expected += 1;
        }
    }
    for a in acquirers {
        a.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    sweeping.join().unwrap();
    for (k, n) in admitted.iter().enumerate() {
        assert_eq!(n.load(Ordering::Relaxed), expected, "key {k}");
    }
    assert!(l.stats().evicted >= (ROUNDS / 3) as u64, "{:?}", l.stats());
}

/// Free-running: the clock moves while decisions and sweeps race. Whatever the interleaving,
/// no key may admit more than `burst + elapsed / T` (the GCRA bound from a full bucket).
#[test]
fn no_key_ever_admits_more_than_burst_plus_elapsed_over_t() {
    let _serial = serial();
    // Many keys, few shards: each key sits untouched long enough to be swept while cold.
    const KEYS: u64 = 64;
    const BURST: u64 = 5;
    const T: u64 = 1_000;
    let q = Quota::from_interval(Duration::from_nanos(T))
        .unwrap()
        .with_burst(BURST)
        .unwrap();
    let clock = ManualClock::new();
    let l = Arc::new(
        KeyedRateLimiter::<u64>::builder(q)
            .clock(clock.clone())
            .shards(4)
            .sweep_interval(Duration::ZERO)
            .build(),
    );
    const OPS: u64 = 200_000;
    let done = Arc::new(AtomicU64::new(0));
    // The clock driver's steps: acquirers wait for a new one every 1000 calls, so clock moves
    // and sweeps are spread through their work however the threads are scheduled (a loaded
    // machine could otherwise let them finish before the clock moved enough to cool any key).
    let steps = Arc::new(AtomicU64::new(0));
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    // A fixed amount of work per acquirer, so the run is bounded however threads are scheduled.
    let mut threads: Vec<_> = (0..2u64)
        .map(|a| {
            let (l, admitted, done) = (l.clone(), admitted.clone(), done.clone());
            let steps = steps.clone();
            std::thread::spawn(move || {
                for (j, i) in (a..).step_by(7).take(OPS as usize).enumerate() {
                    if j % 1000 == 0 {
                        let seen = steps.load(Ordering::Acquire);
                        while steps.load(Ordering::Acquire) == seen {
                            std::thread::yield_now();
                        }
                    }
                    let k = i % KEYS;
                    let n = 1 + i % 2;
                    if l.try_acquire_n(&k, n).is_ok() {
                        admitted[k as usize].fetch_add(n, Ordering::Relaxed);
                    }
                }
                done.fetch_add(1, Ordering::Release);
            })
        })
        .collect();
    threads.push({
        let (l, done) = (l.clone(), done.clone());
        std::thread::spawn(move || {
            while done.load(Ordering::Acquire) < 2 {
                l.sweep_now();
                // Leave the sweep lock free a moment: std's mutex is not fair, and the driver
                // sweeps too.
                std::thread::sleep(Duration::from_micros(50));
            }
        })
    });
    // Steps of up to 7 T while the acquirers run: keys go cold between bursts of traffic, so
    // eviction happens, and decisions race with both the clock and the sweeps.
    let mut step = 0u64;
    while done.load(Ordering::Acquire) < 2 {
        clock.advance_nanos((step * 2_654_435_761) % (7 * T));
        if step % 4 == 0 {
            l.sweep_now(); // right after the jump, while keys are likeliest cold
        }
        std::thread::yield_now();
        step += 1;
        steps.store(step, Ordering::Release);
    }
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = clock.now();
    let bound = BURST + elapsed / T;
    for (k, n) in admitted.iter().enumerate() {
        let n = n.load(Ordering::Relaxed);
        assert!(n <= bound, "key {k}: {n} admitted, bound {bound}");
        assert!(n > 0, "key {k} was never exercised");
    }
    assert!(l.stats().evicted > 0);
}

/// A clock that can freeze one chosen thread inside `now()`, after the reading is taken.
#[derive(Clone, Default)]
struct GateClock(Arc<GateInner>);

#[derive(Default)]
struct GateInner {
    now: AtomicU64,
    // (thread to hold, is it held now, released)
    gate: Mutex<(Option<std::thread::ThreadId>, bool, bool)>,
    cv: std::sync::Condvar,
}

impl Clock for GateClock {
    fn now(&self) -> u64 {
        let now = self.0.now.load(Ordering::SeqCst);
        let mut g = self.0.gate.lock().unwrap();
        if g.0 == Some(std::thread::current().id()) && !g.2 {
            g.1 = true;
            self.0.cv.notify_all();
            while !g.2 {
                g = self.0.cv.wait(g).unwrap();
            }
        }
        now
    }
}

/// A decision that read its time before a sweep evicted its key must not decide on the fresh
/// key with that old time. Here the decider reads t = 0.5 s (held inside that clock reading),
/// the sweep evicts key 1 (tat = 1 s) at t = 1 s, then the decider looks the key up. Had it
/// decided the fresh key at 0.5 s it would store tat = 1.5 s: a permit granted at 0.5 s that
/// the real state (tat = 1 s) refuses until 1 s. The miss path reads the clock again after its
/// lookup, so the decision happens at 1 s, exactly as on the never-swept state.
#[test]
fn a_decision_after_an_eviction_uses_a_time_no_older_than_it() {
    let _serial = serial();
    let clock = GateClock::default();
    let l = Arc::new(
        KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
            .clock(clock.clone())
            .build(),
    );
    assert!(l.try_acquire(&1)); // tat = 1 s
    clock.0.now.store(500_000_000, Ordering::SeqCst);
    let start = Arc::new(Barrier::new(2));
    let decider = {
        let (l, start) = (l.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            l.check(&1)
        })
    };
    // Hold the decider inside its first clock reading (t = 0.5 s).
    clock.0.gate.lock().unwrap().0 = Some(decider.thread().id());
    start.wait();
    let mut g = clock.0.gate.lock().unwrap();
    while !g.1 {
        g = clock.0.cv.wait(g).unwrap();
    }
    drop(g);
    // Time passes; key 1 (tat = 1 s) is cold now, and a sweep evicts it (the decider holds no
    // guard while it reads the clock).
    clock.0.now.store(1_000_000_000, Ordering::SeqCst);
    assert_eq!(l.sweep_now(), 1);
    assert!(l.is_empty());
    {
        let mut g = clock.0.gate.lock().unwrap();
        g.2 = true;
        clock.0.cv.notify_all();
    }
    let decided = decider.join().unwrap();

    // The same decision on a never-swept limiter at 1 s.
    let reference_clock = ManualClock::new();
    let reference = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(reference_clock.clone())
        .build();
    assert!(reference.try_acquire(&1));
    reference_clock.set(1_000_000_000);
    assert_eq!(decided, reference.check(&1));
    assert_eq!(l.peek(&1), reference.peek(&1), "stored state differs");
    assert_eq!(decided.reset_after, Duration::from_secs(1)); // tat 2 s, not 1.5 s
}
