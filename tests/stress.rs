//! Real-thread stress tests: many threads, many calls, and count bounds that hold in every
//! schedule. Never timing assertions.
//!
//! The GCRA guarantee checked everywhere: starting from a full bucket at `t0`, the permits
//! granted with use times up to `t1` number at most `burst + (t1 - t0) / T`. With a real clock,
//! `t0` and `t1` are readings of the limiter's own clock taken before the first call and after
//! the last one (thread spawn and join order them), so the bound is sound whatever the OS does.
//! A clock whose readings can be earlier than one that happened-before them on another thread
//! (the TSC: [`Clock::max_skew`]) widens the bracket by that much on each side.
//!
//! A second, accounting check catches lost updates: every permit moves the stored TAT forward by
//! at least `T` from 0, so `granted * T <= tat`, where `tat <= reading + reset_after` for any
//! clock reading taken after `peek`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tollgate::{Clock, DefaultClock, KeyedRateLimiter, ManualClock, Quota, RateLimiter, StdClock};

#[path = "support/threads.rs"]
mod threads;
use threads::{run, Rng};

const THREADS: usize = 4;

fn quota(t: Duration, burst: u64) -> Quota {
    Quota::from_interval(t).unwrap().with_burst(burst).unwrap()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap()
}

/// Permits a quota allows over `[t0, t1]` from a full bucket.
fn allowed(q: Quota, t0: u64, t1: u64) -> u64 {
    q.burst() + (t1 - t0) / nanos(q.interval())
}

/// No over-admission: `granted <= burst + (t1 - t0) / T`.
fn assert_within_bound(q: Quota, t0: u64, t1: u64, granted: u64) {
    assert!(
        granted <= allowed(q, t0, t1),
        "{granted} granted in {} ns, allowed {}",
        t1 - t0,
        allowed(q, t0, t1)
    );
}

/// `granted * T <= tat`: no grant was lost from the stored state. `clock` must be the limiter's.
fn assert_accounted(limiter: &RateLimiter, clock: &impl Clock, granted: u64) {
    let reset = nanos(limiter.peek().reset_after);
    let after = clock.now() + clock.max_skew();
    let t = nanos(limiter.quota().interval());
    assert!(
        granted * t <= after + reset,
        "lost update: {granted} grants of {t} ns but tat <= {}",
        after + reset
    );
}

/// `try_acquire` hammered by every thread on a real clock, with a short interval so that
/// grants are frequent and contended.
fn real_clock_try_acquire_never_over_admits(clock: impl Clock + Clone) {
    let q = quota(Duration::from_micros(1), 20);
    let limiter = Arc::new(RateLimiter::builder(q).clock(clock.clone()).build());
    let calls = if cfg!(debug_assertions) {
        1_000_000
    } else {
        3_000_000
    };

    let (l, c) = (Arc::clone(&limiter), clock.clone());
    let per_thread = run(THREADS, move |_| {
        // Each thread's own readings bracket its calls, so the earliest first reading and the
        // latest last one bracket every decision (a tighter bound than readings around spawn).
        let first = c.now();
        let granted = (0..calls).filter(|_| l.try_acquire()).count() as u64;
        (first, granted, c.now())
    });
    let skew = clock.max_skew();
    let t0 = per_thread
        .iter()
        .map(|p| p.0)
        .min()
        .unwrap()
        .saturating_sub(skew);
    let granted: u64 = per_thread.iter().map(|p| p.1).sum();
    let t1 = per_thread.iter().map(|p| p.2).max().unwrap() + skew;

    // The first call in CAS order always finds the initial full bucket.
    assert!(granted >= 1);
    assert_within_bound(q, t0, t1, granted);
    assert_accounted(&limiter, &clock, granted);
}

#[test]
fn std_clock_try_acquire_never_over_admits() {
    real_clock_try_acquire_never_over_admits(StdClock::new());
}

/// The default clock (the TSC on most x86_64 machines), passed explicitly so the test can read
/// the limiter's own time.
#[test]
fn default_clock_try_acquire_never_over_admits() {
    real_clock_try_acquire_never_over_admits(DefaultClock::new());
}

/// `try_acquire` on a manual clock that the calling threads themselves move forward by small
/// random steps between calls: time only passes while someone is asking, so the limiter is
/// polled at every step and the bound is tight (a single lost update would exceed it).
#[test]
fn manual_clock_advanced_by_callers_is_tight() {
    let q = quota(Duration::from_nanos(1_000), 8);
    let clock = ManualClock::new();
    let limiter = Arc::new(RateLimiter::builder(q).clock(clock.clone()).build());
    let calls = if cfg!(debug_assertions) {
        500_000
    } else {
        2_000_000
    };

    let t0 = clock.now();
    let (l, c) = (Arc::clone(&limiter), clock.clone());
    let granted: u64 = run(THREADS, move |i| {
        let mut rng = Rng(0xA076_1D64_78BD_642F ^ (i as u64 + 1));
        let mut n = 0;
        for _ in 0..calls {
            c.advance_nanos(rng.next() % 200);
            n += u64::from(l.try_acquire());
        }
        n
    })
    .into_iter()
    .sum();
    let t1 = clock.now();

    assert_within_bound(q, t0, t1, granted);
    assert!(granted >= q.burst(), "only {granted} granted");
    assert_accounted(&limiter, &clock, granted);
}

/// `try_acquire` on a manual clock that a driver thread moves forward in small odd steps for
/// as long as the workers hammer the limiter; then, with time stopped, the bucket is drained.
/// Bounds on both sides: no over-admission, and no permit lost to contention (the drained bucket
/// ends at `tat > t1 + tau - T`, which takes at least `burst` grants, and holds every grant).
#[test]
fn manual_clock_driven_try_acquire_is_exact() {
    let q = quota(Duration::from_nanos(1_000), 8);
    let clock = ManualClock::new();
    let limiter = Arc::new(RateLimiter::builder(q).clock(clock.clone()).build());
    let calls = if cfg!(debug_assertions) {
        1_000_000
    } else {
        3_000_000
    };
    let workers_left = Arc::new(AtomicU64::new(THREADS as u64 - 1));

    let t0 = clock.now();
    let (l, c, left) = (
        Arc::clone(&limiter),
        clock.clone(),
        Arc::clone(&workers_left),
    );
    let granted: u64 = run(THREADS, move |i| {
        if i == 0 {
            // The driver: 7 ns steps (decisions land at every phase of an interval) until the
            // workers are done. No sleeping or yielding: all threads stay runnable.
            while left.load(Ordering::Acquire) > 0 {
                c.advance_nanos(7);
            }
            0
        } else {
            let n = (0..calls).filter(|_| l.try_acquire()).count() as u64;
            left.fetch_sub(1, Ordering::AcqRel);
            n
        }
    })
    .into_iter()
    .sum();
    let t1 = clock.now();
    let mut tail = 0;
    while limiter.try_acquire() {
        tail += 1;
    }
    let total = granted + tail;

    assert_within_bound(q, t0, t1, total);
    assert!(total >= q.burst(), "only {total} granted");
    assert!(tail <= q.burst());
    // Time is frozen at t1 and the bucket drained: tat is exact, and every grant is in it.
    let tat = t1 + nanos(limiter.peek().reset_after);
    assert!(tat > t1 + nanos(q.tolerance()) - nanos(q.interval()));
    assert_accounted(&limiter, &clock, total);
}

/// Blocking `acquire` (which sleeps for real) mixed with `try_acquire` on a real clock: every
/// acquire returns with its permit, and everything granted fits the bound.
fn real_clock_blocking_acquire_mix_never_over_admits(clock: impl Clock + Clone) {
    let q = quota(Duration::from_micros(20), 4);
    let limiter = Arc::new(RateLimiter::builder(q).clock(clock.clone()).build());
    let acquires: u64 = if cfg!(debug_assertions) { 1_000 } else { 2_000 };
    let acquirers_left = Arc::new(AtomicU64::new(2));

    let t0 = clock.now().saturating_sub(clock.max_skew());
    let (l, left) = (Arc::clone(&limiter), Arc::clone(&acquirers_left));
    let counts = run(THREADS, move |i| {
        if i < 2 {
            for _ in 0..acquires {
                // Its return means the permit is ours; the wait is not asserted on.
                let _ = l.acquire();
            }
            left.fetch_sub(1, Ordering::AcqRel);
            (acquires, 0)
        } else {
            let mut n = 0;
            while left.load(Ordering::Acquire) > 0 {
                n += u64::from(l.try_acquire());
            }
            (0, n)
        }
    });
    let t1 = clock.now() + clock.max_skew();

    let blocked: u64 = counts.iter().map(|c| c.0).sum();
    let tried: u64 = counts.iter().map(|c| c.1).sum();
    assert_eq!(blocked, 2 * acquires);
    let total = blocked + tried;
    assert_within_bound(q, t0, t1, total);
    assert_accounted(&limiter, &clock, total);
}

#[test]
fn std_clock_blocking_acquire_mix_never_over_admits() {
    real_clock_blocking_acquire_mix_never_over_admits(StdClock::new());
}

#[test]
fn default_clock_blocking_acquire_mix_never_over_admits() {
    real_clock_blocking_acquire_mix_never_over_admits(DefaultClock::new());
}

/// Blocking acquires of random sizes on a manual clock: each "sleep" moves the shared clock, so
/// threads race both on the cell and on time. All permits granted by `t1` fit the bound.
#[test]
fn manual_clock_blocking_acquire_n_never_over_admits() {
    let q = quota(Duration::from_nanos(500), 3);
    let clock = ManualClock::new();
    let limiter = Arc::new(RateLimiter::builder(q).clock(clock.clone()).build());
    let calls = if cfg!(debug_assertions) {
        200_000
    } else {
        500_000
    };

    let t0 = clock.now();
    let l = Arc::clone(&limiter);
    let granted: u64 = run(THREADS, move |i| {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
        let mut n = 0;
        for _ in 0..calls {
            // Sizes 1..=4: some above the burst, which blocking acquires allow.
            let k = 1 + rng.next() % 4;
            l.acquire_n(k).unwrap();
            n += k;
        }
        n
    })
    .into_iter()
    .sum();
    // Each acquire returned after its sleep reached its ready time, so all are used by t1.
    let t1 = clock.now();

    assert_within_bound(q, t0, t1, granted);
    assert_accounted(&limiter, &clock, granted);
}

/// GCRA conformance from the definition (virtual scheduling from a full bucket at time 0): the
/// permits used at these times, `(time, count)` with `count <= burst`, fit quota `q`.
fn assert_conforms(mut grants: Vec<(u64, u64)>, q: Quota) {
    let (t, tau) = (nanos(q.interval()), nanos(q.tolerance()));
    grants.sort_unstable();
    let mut tat = 0u64;
    for (i, &(at, n)) in grants.iter().enumerate() {
        let new_tat = tat.max(at) + n * t;
        assert!(
            new_tat - tau <= at,
            "{n} permit(s) at {at} exceed the quota; grants around it: {:?}",
            &grants[i.saturating_sub(5)..(i + 5).min(grants.len())]
        );
        tat = new_tat;
    }
}

/// Reservations of random sizes, a third of them cancelled, on a frozen clock (so a cancel is
/// always before the ready time): the kept permits, at their ready times, conform to the quota
/// (no slot booked twice: a refund never re-opens a slot a later reservation holds, and no
/// reservation is lost to a racing refund), and the stored TAT accounts for each of them.
#[test]
fn reserve_cancel_mix_conforms() {
    let q = quota(Duration::from_nanos(1_000), 3);
    let clock = ManualClock::new();
    clock.set(1_000_000);
    let limiter = Arc::new(RateLimiter::builder(q).clock(clock.clone()).build());
    let calls = if cfg!(debug_assertions) {
        100_000
    } else {
        300_000
    };

    let t0 = clock.now();
    let l = Arc::clone(&limiter);
    let per_thread = run(THREADS, move |i| {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (i as u64 + 1));
        let (mut kept, mut cancelled) = (Vec::new(), 0u64);
        // Up to four reservations in hand; a random one of them is settled each time, so
        // cancels are often not of the latest reservation (of this thread or any other).
        let mut pending = Vec::new();
        for _ in 0..calls {
            // Sizes up to the burst, 3: a small burst leaves no slack to hide a double booking.
            let k = 1 + rng.next() % 3;
            pending.push((l.reserve_n(k).unwrap(), k));
            if pending.len() == 4 {
                let (r, k) = pending.swap_remove((rng.next() % 4) as usize);
                if rng.next() % 3 == 0 && r.ready_at() > t0 {
                    r.cancel();
                    cancelled += k;
                } else {
                    kept.push((r.ready_at(), k));
                }
            }
        }
        kept.extend(pending.iter().map(|(r, k)| (r.ready_at(), *k)));
        (kept, cancelled)
    });

    let cancelled: u64 = per_thread.iter().map(|p| p.1).sum();
    let kept: Vec<(u64, u64)> = per_thread.into_iter().flat_map(|p| p.0).collect();
    let kept_permits: u64 = kept.iter().map(|g| g.1).sum();
    let t_end = kept.iter().map(|g| g.0).max().unwrap().max(t0);
    assert!(cancelled > 0);
    assert!(
        kept_permits <= allowed(q, t0, t_end),
        "{kept_permits} kept permits ready by {t_end}, allowed {}",
        allowed(q, t0, t_end)
    );
    // Frozen clock: tat >= t0 throughout, and every kept permit is still in it.
    let tat = t0 + nanos(limiter.peek().reset_after);
    let t = nanos(q.interval());
    assert!(
        t0 + kept_permits * t <= tat,
        "kept {kept_permits} permits but tat is {tat}"
    );
    assert!(tat <= t0 + (kept_permits + cancelled) * t);
    assert_conforms(kept, q);
}

/// The keyed limiter under contention, with a thread sweeping all the while: workers hammer two
/// hot keys (polled at every step, so their bound is tight) and now and then touch one of many
/// cold keys (which keeps the sweeper evicting, taking the hot keys' shard locks too). Per hot
/// key, no over-admission: an update lost to a racing insert or eviction (a hot key evicted and
/// re-created full) would exceed the bound. `step` is what a worker does to the clock before
/// each round of calls (a manual clock is moved by the workers themselves).
fn keyed_with_concurrent_sweeps_never_over_admits<C: Clock + Clone>(
    clock: C,
    step: impl Fn(&C, &mut Rng) + Send + Sync + 'static,
) {
    let q = quota(Duration::from_nanos(1_000), 2);
    let limiter = Arc::new(
        KeyedRateLimiter::<u64>::builder(q)
            .clock(clock.clone())
            .build(),
    );
    let calls = if cfg!(debug_assertions) {
        200_000
    } else {
        1_000_000
    };
    let workers_left = Arc::new(AtomicU64::new(THREADS as u64 - 1));
    const HOT: [u64; 2] = [0, 1];

    // Taken before the threads start and after they end: every decision's reading lies within
    // `[t0 - max_skew, t1 + max_skew]`.
    let skew = clock.max_skew();
    let t0 = clock.now().saturating_sub(skew);
    let (l, c, left) = (
        Arc::clone(&limiter),
        clock.clone(),
        Arc::clone(&workers_left),
    );
    let per_thread = run(THREADS, move |i| {
        let mut granted = [0u64; 2];
        if i == 0 {
            // The sweeper, as fast as it can go while the workers run.
            let mut evicted = 0;
            while left.load(Ordering::Acquire) > 0 {
                evicted += l.sweep_now() as u64;
            }
            return (granted, evicted);
        }
        let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ (i as u64 + 1));
        for call in 0..calls {
            step(&c, &mut rng);
            for (g, key) in granted.iter_mut().zip(HOT) {
                *g += u64::from(l.try_acquire(&key));
            }
            if call % 4 == 0 {
                let _ = l.try_acquire(&(2 + rng.next() % 1_000));
            }
        }
        left.fetch_sub(1, Ordering::AcqRel);
        (granted, 0)
    });
    let t1 = clock.now() + skew;

    let evicted: u64 = per_thread.iter().map(|p| p.1).sum();
    assert!(
        evicted > 0,
        "the sweeper never evicted: the race was not exercised"
    );
    for (k, key) in HOT.iter().enumerate() {
        let granted: u64 = per_thread.iter().map(|p| p.0[k]).sum();
        assert!(
            granted <= allowed(q, t0, t1),
            "key {key}: {granted} granted over {} ns, allowed {}",
            t1 - t0,
            allowed(q, t0, t1)
        );
        assert!(granted >= q.burst(), "key {key}: only {granted} granted");
    }
}

#[test]
fn keyed_with_concurrent_sweeps_never_over_admits_manual_clock() {
    keyed_with_concurrent_sweeps_never_over_admits(ManualClock::new(), |c, rng| {
        c.advance_nanos(rng.next() % 100)
    });
}

/// The same on the default clock (the TSC on most x86_64 machines: readings up to
/// `max_skew` early across cores, and a sweeper that allows for it), time moving by itself.
#[test]
fn keyed_with_concurrent_sweeps_never_over_admits_default_clock() {
    keyed_with_concurrent_sweeps_never_over_admits(DefaultClock::new(), |_, _| {});
}
