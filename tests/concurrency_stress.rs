//! Real threads and tokio tasks on the concurrency limiters: an atomic count of permits held,
//! raised after each grant and lowered before each release, never exceeds the limit (its
//! high-water mark is checked), on one limit and on every one of 10k keys, with random
//! timeouts, cancelled futures and dropped permits; and when everyone is done no permit is
//! lost or left behind. Never timing assertions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tollgate::{AcquireError, ConcurrencyLimiter};

#[path = "support/threads.rs"]
mod threads;
use threads::{run, Rng};

/// Permits held now and the most ever held at once, counted by the holders themselves.
#[derive(Default)]
struct Gauge {
    now: AtomicU64,
    high: AtomicU64,
}

impl Gauge {
    fn enter(&self, n: u64) {
        let now = self.now.fetch_add(n, Ordering::SeqCst) + n;
        self.high.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self, n: u64) {
        self.now.fetch_sub(n, Ordering::SeqCst);
    }
}

const LIMIT: u64 = 3;

fn expected_refusal(e: &AcquireError) -> bool {
    matches!(e, AcquireError::AtCapacity { .. })
}

#[test]
fn threads_never_hold_more_than_the_limit() {
    let limiter = Arc::new(ConcurrencyLimiter::new(LIMIT).unwrap());
    let gauge = Arc::new(Gauge::default());
    let (l, g) = (limiter.clone(), gauge.clone());
    let granted: u64 = run(4, move |i| {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
        let mut granted = 0u64;
        for _ in 0..3_000 {
            let n = 1 + rng.next() % LIMIT;
            let permit = match rng.next() % 3 {
                0 => l.try_acquire_n(n),
                1 => l.try_acquire_n_for(n, Duration::from_micros(rng.next() % 50)),
                _ => l.acquire_n(n),
            };
            match permit {
                Ok(p) => {
                    g.enter(n);
                    // Hold it a while, so that holders overlap.
                    std::thread::yield_now();
                    g.leave(n);
                    drop(p);
                    granted += 1;
                }
                Err(e) => assert!(expected_refusal(&e), "{e}"),
            }
        }
        granted
    })
    .into_iter()
    .sum();
    assert!(granted > 0);
    assert!(gauge.high.load(Ordering::SeqCst) <= LIMIT);
    assert_eq!((limiter.in_flight(), limiter.available()), (0, LIMIT));
}

/// Tasks on a multi-threaded runtime: waits cut short by random timeouts (the future is
/// dropped while queued, or just after being served), permits held across `.await`s and
/// dropped in other tasks (owned permits), and a live `set_limit` that moves between 1 and 3.
#[cfg(feature = "tokio")]
#[test]
fn tasks_with_random_cancels_never_hold_more_than_the_limit() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let limiter = Arc::new(ConcurrencyLimiter::new(LIMIT).unwrap());
        let gauge = Arc::new(Gauge::default());
        let mut tasks = Vec::new();
        for t in 0..32u64 {
            let (l, g) = (limiter.clone(), gauge.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (t + 1));
                for _ in 0..300 {
                    let n = 1 + rng.next() % 2;
                    let wait = Duration::from_micros(rng.next() % 200);
                    let got = match rng.next() % 3 {
                        // A dropped future: cancelled wherever it stands.
                        0 => tokio::time::timeout(wait, l.acquire_n_owned_async(n))
                            .await
                            .unwrap_or(Err(AcquireError::AtCapacity {
                                in_flight: 0,
                                limit: 0,
                            })),
                        1 => l.try_acquire_n_owned(n),
                        _ => match l.try_acquire_n_for_async(n, wait).await {
                            Ok(p) => {
                                g.enter(n);
                                tokio::task::yield_now().await;
                                g.leave(n);
                                drop(p);
                                continue;
                            }
                            Err(e) => Err(e),
                        },
                    };
                    match got {
                        Ok(p) => {
                            g.enter(n);
                            // Held across an await, released in another task.
                            tokio::task::yield_now().await;
                            g.leave(n);
                            tokio::spawn(async move { drop(p) }).await.unwrap();
                        }
                        Err(e) => assert!(expected_refusal(&e), "{e}"),
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert!(gauge.high.load(Ordering::SeqCst) <= LIMIT);
        assert_eq!((limiter.in_flight(), limiter.available()), (0, LIMIT));
        // Nobody is left queued: a fresh request gets every permit at once.
        assert_eq!(limiter.try_acquire_n(LIMIT).unwrap().n(), LIMIT);
    });
}

/// Lowering and raising the limit live under load: permits held before a change are kept,
/// so the bound is the largest limit in force; afterwards, nothing is lost.
#[test]
fn set_limit_under_load_loses_nothing() {
    let limiter = Arc::new(ConcurrencyLimiter::new(4).unwrap());
    let gauge = Arc::new(Gauge::default());
    let (l, g) = (limiter.clone(), gauge.clone());
    run(4, move |i| {
        let mut rng = Rng(0xA076_1D64_78BD_642F ^ (i as u64 + 1));
        for _ in 0..2_000 {
            if i == 0 && rng.next() % 8 == 0 {
                l.set_limit(1 + rng.next() % 4).unwrap();
                continue;
            }
            let n = 1 + rng.next() % 2;
            match l.try_acquire_n_for(n, Duration::from_micros(rng.next() % 100)) {
                Ok(p) => {
                    g.enter(n);
                    std::thread::yield_now();
                    g.leave(n);
                    drop(p);
                }
                // A waiter for 2 whose limit went down to 1 is refused, not left waiting.
                Err(e) => assert!(
                    expected_refusal(&e) || matches!(e, AcquireError::ExceedsBurst { .. }),
                    "{e}"
                ),
            }
        }
    });
    assert!(gauge.high.load(Ordering::SeqCst) <= 4);
    limiter.set_limit(4).unwrap();
    assert_eq!((limiter.in_flight(), limiter.available()), (0, 4));
}

/// 10k keys, threads and tasks, and a thread sweeping idle keys as fast as it can: eviction
/// racing acquires never lets a key exceed its limit, nor loses a permit or a waiter.
#[cfg(feature = "tokio")]
#[test]
fn ten_thousand_keys_with_eviction_racing_never_exceed_the_limit() {
    use tollgate::KeyedConcurrencyLimiter;
    const KEYS: u64 = 10_000;
    let limiter = Arc::new(KeyedConcurrencyLimiter::<u64>::new(2).unwrap());
    let gauges: Arc<Vec<Gauge>> = Arc::new((0..KEYS).map(|_| Gauge::default()).collect());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sweeper = {
        let (l, done) = (limiter.clone(), done.clone());
        std::thread::spawn(move || {
            let mut evicted = 0;
            while !done.load(Ordering::SeqCst) {
                evicted += l.sweep_now();
            }
            evicted
        })
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (l, g) = (limiter.clone(), gauges.clone());
    let tasks = rt.spawn(async move {
        let mut tasks = Vec::new();
        for t in 0..16u64 {
            let (l, g) = (l.clone(), g.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ (t + 1));
                for _ in 0..2_000 {
                    // Half the traffic on 8 hot keys (contended, queued), half spread.
                    let key = if rng.next() % 2 == 0 {
                        rng.next() % 8
                    } else {
                        rng.next() % KEYS
                    };
                    let wait = Duration::from_micros(rng.next() % 100);
                    match tokio::time::timeout(wait, l.acquire_async(&key)).await {
                        Ok(Ok(p)) => {
                            g[key as usize].enter(1);
                            tokio::task::yield_now().await;
                            g[key as usize].leave(1);
                            drop(p);
                        }
                        Ok(Err(e)) => panic!("{e}"),
                        Err(_) => {} // cancelled while queued (or just served: handed on)
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let (l, g) = (limiter.clone(), gauges.clone());
    run(2, move |i| {
        let mut rng = Rng(0x5851_F42D_4C95_7F2D ^ (i as u64 + 1));
        for _ in 0..20_000 {
            let key = rng.next() % KEYS;
            let n = 1 + rng.next() % 2;
            if let Ok(p) = l.try_acquire_n(&key, n) {
                g[key as usize].enter(n);
                g[key as usize].leave(n);
                drop(p);
            }
        }
    });
    rt.block_on(tasks).unwrap();
    done.store(true, Ordering::SeqCst);
    let evicted = sweeper.join().unwrap();
    assert!(evicted > 0, "the sweeper raced the acquires");
    for (k, g) in gauges.iter().enumerate() {
        assert!(g.high.load(Ordering::SeqCst) <= 2, "key {k}");
        assert_eq!(limiter.in_flight(&(k as u64)), 0, "key {k}");
    }
    limiter.sweep_now();
    assert_eq!(limiter.len(), 0, "every key idle, so every key evicted");
}

/// The keyed `set_limit` racing the insert of new keys: after each `set_limit` returns, the
/// keys inserted so far (the newest of them checked, the ones most likely to have been
/// inserted during it) all have its limit, however their inserts interleaved with its walk.
/// (The loom model `keyed_set_limit_races_a_new_key` checks every interleaving of one insert;
/// this runs the real table under real threads.)
#[test]
fn keyed_set_limit_reaches_keys_inserted_during_it() {
    use std::sync::atomic::AtomicBool;
    use tollgate::KeyedConcurrencyLimiter;
    const INSERTERS: usize = 2;
    const MAX_KEYS: u64 = 1_000_000; // per inserter, if the setter's rounds outlast them
    const ROUNDS: u64 = 2_000;
    const CHECKED: u64 = 16; // per inserter and round
    let limiter = Arc::new(KeyedConcurrencyLimiter::<u64>::new(4).unwrap());
    // Keys `i << 32 | j` for `j` below `progress[i]` were inserted (the newest still tracked,
    // unless a round's sweep came after them; an untracked key is checked too: it takes the
    // limit a new key gets).
    let progress: Arc<Vec<AtomicU64>> =
        Arc::new((0..INSERTERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let (l, p, stop) = (limiter.clone(), progress.clone(), stop.clone());
    let results = run(INSERTERS + 1, move |i| {
        if i < INSERTERS {
            let mut j = 0;
            while j < MAX_KEYS && !stop.load(Ordering::SeqCst) {
                let key = (i as u64) << 32 | j;
                assert!(l.try_acquire(&key).is_some(), "a new key, limit 3 or 4");
                j += 1;
                p[i].store(j, Ordering::SeqCst);
            }
            return j;
        }
        // Every inserter under way first, so that the rounds race inserts.
        while p.iter().any(|done| done.load(Ordering::SeqCst) == 0) {
            std::thread::yield_now();
        }
        let mut checked = 0u64;
        for round in 0..ROUNDS {
            let limit = 3 + round % 2;
            l.set_limit(limit).unwrap();
            for (w, done) in p.iter().enumerate() {
                let done = done.load(Ordering::SeqCst);
                for j in done.saturating_sub(CHECKED)..done {
                    let key = (w as u64) << 32 | j;
                    match l.try_acquire_n(&key, limit + 1) {
                        Err(AcquireError::ExceedsBurst { burst, .. }) => {
                            assert_eq!(burst, limit, "key {key:#x} after round {round}")
                        }
                        other => panic!("key {key:#x}: {other:?}"),
                    }
                    checked += 1;
                }
            }
            // Idle keys out, so that the next walk is short and set_limits come often: the
            // race is an insert that read the old limit before a set_limit's store and takes
            // its shard's lock after the walk passed it.
            l.sweep_now();
        }
        stop.store(true, Ordering::SeqCst);
        checked
    });
    assert!(results[INSERTERS] > 0, "no key was checked: {results:?}");
}
