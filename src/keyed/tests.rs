use std::num::NonZeroUsize;
use std::time::Duration;

use super::*;
use crate::sync::Ordering;
use crate::ManualClock;

fn cap(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

fn limiter(clock: &ManualClock, q: Quota) -> KeyedRateLimiterBuilder<u64> {
    KeyedRateLimiter::<u64>::builder(q).clock(clock.clone())
}

fn map_len<K, A, S>(l: &KeyedRateLimiter<K, A, S>) -> usize
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    l.inner.store.map.len()
}

#[test]
fn decisions_that_store_nothing_never_insert() {
    let clock = ManualClock::new();
    let l = limiter(&clock, Quota::per_second(2).unwrap()).build();
    assert!(l.peek(&1).allowed);
    assert!(l.check_n(&1, 0).allowed);
    assert!(l.check_n(&1, 3).exceeds_burst());
    assert!(l.try_acquire_n(&1, 3).is_err());
    // Needs 500 ms of waiting (n over the burst): past the timeout, so nothing is reserved.
    assert!(l
        .try_acquire_n_for(&1, 3, Duration::from_millis(499))
        .is_err());
    assert!(l.reserve_n(&1, 0).is_ok());
    assert_eq!((map_len(&l), l.len()), (0, 0));
    assert!(l.try_acquire(&1));
    assert_eq!((map_len(&l), l.len()), (1, 1));
}

#[test]
fn slot_count_matches_the_map_and_the_cap_is_exact() {
    let clock = ManualClock::new();
    let l = limiter(&clock, Quota::per_second(1).unwrap())
        .max_keys(cap(5))
        .build();
    for k in 0..50 {
        let _ = l.try_acquire(&k);
        assert!(map_len(&l) <= 5);
        assert_eq!(map_len(&l), l.len());
    }
    assert_eq!(l.len(), 5);
    clock.advance(Duration::from_secs(1));
    assert_eq!(l.sweep_now(), 5);
    assert_eq!((map_len(&l), l.len()), (0, 0));
}

#[test]
fn earliest_is_a_lower_bound_on_every_tat() {
    let clock = ManualClock::new();
    let l = limiter(&clock, Quota::per_second(10).unwrap()).build();
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), u64::MAX);
    clock.advance(Duration::from_millis(50));
    assert!(l.try_acquire(&1)); // tat 150 ms
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), 150_000_000);
    assert!(l.try_acquire_n(&2, 5).is_ok()); // tat 550 ms
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), 150_000_000);
    clock.advance(Duration::from_millis(100)); // now 150 ms: key 1 is cold
    assert_eq!(l.sweep_now(), 1);
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), 550_000_000);
    // A cancel lowers the TAT and the bound with it.
    let r = l.reserve_n(&2, 3).unwrap(); // tat 850 ms
    r.cancel();
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), 550_000_000);
    let r = l.reserve_n(&3, 11).unwrap(); // new key, tat 1250 ms, ready at 250 ms
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), 550_000_000);
    r.cancel(); // before ready: tat back to 150 ms
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), 150_000_000);
}

#[test]
fn reclaim_skips_the_sweep_while_no_key_can_be_cold() {
    let clock = ManualClock::new();
    let l = limiter(&clock, Quota::per_second(1).unwrap())
        .max_keys(cap(3))
        .build();
    for k in 0..3 {
        assert!(l.try_acquire(&k)); // tat 1 s each
    }
    for k in 3..100 {
        assert!(!l.try_acquire(&k));
    }
    assert_eq!(l.stats().sweeps, 0, "hot table: no sweep was worth running");
    clock.advance(Duration::from_secs(1));
    assert!(l.try_acquire(&100)); // all three cold: one reclaim sweep frees them
    assert_eq!(l.stats().sweeps, 1);
    assert_eq!(l.stats().evicted, 3);
    assert_eq!(map_len(&l), 1);
}

#[test]
fn untracked_reservations_cancel_into_nothing() {
    let clock = ManualClock::new();
    let l = limiter(&clock, Quota::per_second(1).unwrap())
        .max_keys(cap(1))
        .when_full(WhenFull::AllowUntracked)
        .build();
    assert!(l.try_acquire(&1));
    let r = l.reserve_n(&2, 3).unwrap(); // untracked: decided as fresh, waits 2 s
    assert_eq!(r.delay(), Duration::from_secs(2));
    assert_eq!(map_len(&l), 1);
    r.cancel();
    assert!(
        !l.try_acquire(&1),
        "the refund must not land on another key"
    );
}

/// A shard far larger than one sweep chunk: every cold key goes, every hot key stays, and the
/// longest lock hold is one chunk's (counted in chunks: the stop flag is polled before each).
#[test]
fn a_sweep_walks_big_shards_in_chunks() {
    use crate::store::walk::SWEEP_CHUNK;
    let clock = ManualClock::new();
    let l = limiter(&clock, Quota::per_second(1).unwrap())
        .shards(2)
        .build();
    let keys = 8 * SWEEP_CHUNK as u64;
    for k in 0..keys {
        assert!(l.try_acquire(&k)); // tat 1 s
    }
    clock.set(500_000_000);
    for k in (0..keys).step_by(3) {
        assert!(l.try_acquire_n(&k, 0).is_ok());
        let _ = l
            .check_n_with(&k, 1, Quota::per_second(2).unwrap())
            .unwrap(); // hot: tat 1.5 s
    }
    clock.set(1_000_000_000);
    let polls = std::cell::Cell::new(0u64);
    let evicted = l.inner.sweep_all(&|| {
        polls.set(polls.get() + 1);
        false
    });
    let hot = (0..keys).step_by(3).count();
    assert_eq!(evicted as u64, keys - hot as u64);
    assert_eq!((l.len(), map_len(&l)), (hot, hot));
    for k in 0..keys {
        assert_eq!(l.contains_key(&k), k % 3 == 0, "key {k}");
    }
    let buckets = l.inner.store.map.num_buckets();
    assert!(
        polls.get() as usize >= buckets / SWEEP_CHUNK,
        "{} polls",
        polls.get()
    );
}

/// Inserts between two chunks of a sweep (here from the stop poll, which runs with no lock
/// held, as a concurrent decision could) grow and rehash the table under the walk: the sweep
/// starts the shard over, and still evicts every key that was cold before it began and no
/// hot one; if the table keeps moving it gives up on the lower bound of cold times instead.
#[test]
fn keys_moved_between_sweep_chunks_are_not_missed() {
    let clock = ManualClock::new();
    let l = limiter(&clock, Quota::per_second(1).unwrap())
        .shards(2)
        .build();
    let cold = 6 * crate::store::walk::SWEEP_CHUNK as u64;
    for k in 0..cold {
        assert!(l.try_acquire(&k)); // tat 1 s
    }
    clock.set(1_000_000_000); // all cold
    let next = std::cell::Cell::new(cold);
    let grow = |n: u64| {
        for _ in 0..n {
            assert!(l.try_acquire(&next.get())); // hot: tat 2 s
            next.set(next.get() + 1);
        }
    };
    // One burst of inserts after the first chunk: enough to resize both shards once.
    let polls = std::cell::Cell::new(0);
    let evicted = l.inner.sweep_all(&|| {
        polls.set(polls.get() + 1);
        if polls.get() == 2 {
            grow(4 * cold);
        }
        false
    });
    assert_eq!(evicted as u64, cold, "every cold key evicted");
    assert_eq!(l.len() as u64, 4 * cold);
    assert!((0..cold).all(|k| !l.contains_key(&k)));
    assert_ne!(
        l.inner.store.earliest.load(Ordering::Acquire),
        0,
        "restarted, not given up"
    );

    // The table moving before every chunk: the sweep gives up restarting, and says so.
    clock.set(3_000_000_000); // everything so far is cold
    let before = l.len() as u64;
    let evicted = l.inner.sweep_all(&|| {
        grow(2_000);
        false
    });
    assert!(evicted as u64 <= before);
    assert_eq!(l.inner.store.earliest.load(Ordering::Acquire), 0);
    // A later sweep finds what that one missed.
    let all = next.get();
    clock.set(10_000_000_000);
    l.sweep_now();
    assert_eq!(l.len(), 0, "{all} keys inserted, all cold");
}

/// `check_n_for_async` reports what the HTTP layer used to assemble from
/// `try_acquire_n_for_async` and a `peek` after it: the state after a grant, the wait needed,
/// or no retry-after when the count can never be granted within the timeout. With a zero
/// timeout (no sleeping) on a manual clock, against a second limiter driven the old way.
#[cfg(feature = "tokio")]
#[test]
fn check_n_for_async_reports_what_acquire_then_peek_did() {
    fn run<A: crate::Algorithm>(alg: A) {
        let q = Quota::per_second(4).unwrap();
        let clock = ManualClock::new();
        let build = || {
            KeyedRateLimiter::<u8>::builder(q)
                .clock(clock.clone())
                .algorithm(alg.clone())
                .unwrap()
                .build()
        };
        let (new, old) = (build(), build());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for (step, n) in [1u64, 2, 0, 1, 5, 1, 3, 1, 1, 1].into_iter().enumerate() {
            if step == 6 {
                clock.advance(Duration::from_millis(600));
            }
            let got = rt.block_on(new.check_n_for_async(&1, n, Duration::ZERO));
            let least = n.saturating_mul(q.t()).saturating_sub(q.tau());
            let want = if least > 0 {
                let s = old.peek(&1);
                Decision::never(q.burst(), s.remaining, s.reset_after)
            } else {
                match rt.block_on(old.try_acquire_n_for_async(&1, n, Duration::ZERO)) {
                    Ok(_) => {
                        let s = old.peek(&1);
                        Decision::allowed(s.limit, s.remaining, s.reset_after)
                    }
                    Err(AcquireError::RateLimited { retry_after }) => {
                        Decision::denied(q.burst(), 0, retry_after, retry_after)
                    }
                    Err(_) => {
                        let s = old.peek(&1);
                        Decision::never(q.burst(), s.remaining, s.reset_after)
                    }
                }
            };
            assert_eq!(got, want, "step {step}, n = {n}");
        }
    }
    run(crate::Gcra);
    run(crate::SlidingLog);
    run(crate::FixedWindow::new());
}
