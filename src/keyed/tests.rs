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
    l.store.map.len()
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
        .try_acquire_for(&1, 3, Duration::from_millis(499))
        .is_err());
    assert!(l.reserve(&1, 0).is_ok());
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
    assert_eq!(l.store.earliest.load(Ordering::Acquire), u64::MAX);
    clock.advance(Duration::from_millis(50));
    assert!(l.try_acquire(&1)); // tat 150 ms
    assert_eq!(l.store.earliest.load(Ordering::Acquire), 150_000_000);
    assert!(l.try_acquire_n(&2, 5).is_ok()); // tat 550 ms
    assert_eq!(l.store.earliest.load(Ordering::Acquire), 150_000_000);
    clock.advance(Duration::from_millis(100)); // now 150 ms: key 1 is cold
    assert_eq!(l.sweep_now(), 1);
    assert_eq!(l.store.earliest.load(Ordering::Acquire), 550_000_000);
    // A cancel lowers the TAT and the bound with it.
    let r = l.reserve(&2, 3).unwrap(); // tat 850 ms
    r.cancel();
    assert_eq!(l.store.earliest.load(Ordering::Acquire), 550_000_000);
    let r = l.reserve(&3, 11).unwrap(); // new key, tat 1250 ms, ready at 250 ms
    assert_eq!(l.store.earliest.load(Ordering::Acquire), 550_000_000);
    r.cancel(); // before ready: tat back to 150 ms
    assert_eq!(l.store.earliest.load(Ordering::Acquire), 150_000_000);
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
    let r = l.reserve(&2, 3).unwrap(); // untracked: decided as fresh, waits 2 s
    assert_eq!(r.delay(), Duration::from_secs(2));
    assert_eq!(map_len(&l), 1);
    r.cancel();
    assert!(
        !l.try_acquire(&1),
        "the refund must not land on another key"
    );
}
