//! A new key refused because the key table is full is told apart from a key refused by its
//! rate: in the decision (`refused_by`), in the error (`AcquireError::KeyCapReached`), for every
//! algorithm and every method that can meet the cap, and for the keyed concurrency limiter.
//! Manual clocks: nothing here depends on timing.

use std::num::NonZeroUsize;
use std::time::Duration;

use tollgate::{
    AcquireError, Algorithm, FixedWindow, Gcra, KeyedConcurrencyLimiter, KeyedRateLimiter,
    ManualClock, Quota, RefusedBy, SlidingLog, SlidingWindow, WeightedWindow, WhenFull,
};

/// One key slot, refusing new keys; key 1 has taken the one permit of its second.
fn full<A: Algorithm>(alg: A) -> (ManualClock, KeyedRateLimiter<u64, A>) {
    let clock = ManualClock::new();
    let l = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
        .clock(clock.clone())
        .max_keys(NonZeroUsize::MIN)
        .when_full(WhenFull::Deny)
        .algorithm(alg)
        .unwrap()
        .build();
    let d = l.check(&1);
    assert!(d.allowed && d.refused_by.is_none(), "{d:?}");
    (clock, l)
}

fn refused_by_the_cap_in_every_method<A: Algorithm>(alg: A) {
    let name = std::any::type_name::<A>();
    let (clock, l) = full(alg);
    // The tracked key: refused by its rate, as before.
    let d = l.check(&1);
    assert!(!d.allowed, "{name}");
    assert_eq!(d.refused_by, Some(RefusedBy::Quota), "{name}: {d:?}");
    assert!(!d.is_key_cap_reached(), "{name}");
    assert!(matches!(
        l.try_acquire_n(&1, 1),
        Err(AcquireError::RateLimited { .. })
    ));
    // A new key: refused by the full table, with a wait.
    for d in [l.check(&2), l.check_n(&2, 1), l.peek(&2)] {
        assert!(!d.allowed, "{name}");
        assert_eq!(d.refused_by, Some(RefusedBy::KeyCap), "{name}: {d:?}");
        assert!(d.is_key_cap_reached() && !d.exceeds_burst(), "{name}");
        assert!(d.retry_after.is_some_and(|w| w > Duration::ZERO), "{name}");
    }
    assert!(!l.try_acquire(&2), "{name}");
    let e = l.try_acquire_n(&2, 1).unwrap_err();
    assert!(
        matches!(e, AcquireError::KeyCapReached { retry_after: Some(w) } if w > Duration::ZERO),
        "{name}: {e:?}"
    );
    assert_eq!(e.retry_after(), l.check(&2).retry_after, "{name}");
    let e = l
        .try_acquire_n_for(&2, 1, Duration::from_millis(1))
        .unwrap_err();
    assert!(
        matches!(
            e,
            AcquireError::KeyCapReached {
                retry_after: Some(_)
            }
        ),
        "{name}: {e:?}"
    );
    // A per-call quota meets the same cap.
    let d = l
        .check_n_with(&2, 1, Quota::per_second(5).unwrap())
        .unwrap();
    assert_eq!(d.refused_by, Some(RefusedBy::KeyCap), "{name}: {d:?}");
    assert_eq!(l.len(), 1, "{name}: nothing stored for the refused key");
    // Once key 1 turns cold, key 2 gets in and is decided by its rate again.
    clock.advance(Duration::from_secs(2));
    let d = l.check(&2);
    assert!(d.allowed && d.refused_by.is_none(), "{name}: {d:?}");
    assert_eq!(
        l.check(&2).refused_by,
        Some(RefusedBy::Quota),
        "{name}: key 2 is tracked now"
    );
}

#[test]
fn gcra_tells_a_full_key_table_from_a_rate_refusal() {
    refused_by_the_cap_in_every_method(Gcra);
}

#[test]
fn fixed_window_tells_a_full_key_table_from_a_rate_refusal() {
    refused_by_the_cap_in_every_method(FixedWindow::new());
}

#[test]
fn sliding_window_tells_a_full_key_table_from_a_rate_refusal() {
    refused_by_the_cap_in_every_method(SlidingWindow::new(8));
}

#[test]
fn weighted_window_tells_a_full_key_table_from_a_rate_refusal() {
    refused_by_the_cap_in_every_method(WeightedWindow);
}

#[test]
fn sliding_log_tells_a_full_key_table_from_a_rate_refusal() {
    refused_by_the_cap_in_every_method(SlidingLog);
}

/// Reservations (GCRA) meet the cap as the other methods do.
#[test]
fn reservations_at_a_full_key_table_are_refused_by_the_cap() {
    let (_clock, l) = full(Gcra);
    for e in [
        l.reserve_n(&2, 1).unwrap_err(),
        l.try_reserve_n_for(&2, 1, Duration::ZERO).unwrap_err(),
        l.try_reserve_n_for(&2, 1, Duration::from_millis(10))
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                AcquireError::KeyCapReached {
                    retry_after: Some(_)
                }
            ),
            "{e:?}"
        );
    }
    assert!(matches!(
        l.try_reserve_n_for(&1, 1, Duration::ZERO).unwrap_err(),
        AcquireError::RateLimited { .. }
    ));
}

/// The async methods: a wait that the full table makes longer than the timeout is refused by
/// the cap, and so is the decision `check_n_for_async` reports.
#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn async_methods_at_a_full_key_table_are_refused_by_the_cap() {
    let (_clock, l) = full(Gcra);
    let e = l
        .try_acquire_n_for_async(&2, 1, Duration::from_millis(1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            AcquireError::KeyCapReached {
                retry_after: Some(_)
            }
        ),
        "{e:?}"
    );
    let d = l.check_n_for_async(&2, 1, Duration::from_millis(1)).await;
    assert!(!d.allowed);
    assert_eq!(d.refused_by, Some(RefusedBy::KeyCap), "{d:?}");
    assert!(d.retry_after.is_some());
    let d = l.check_n_for_async(&1, 1, Duration::from_millis(1)).await;
    assert_eq!(d.refused_by, Some(RefusedBy::Quota), "{d:?}");
}

/// The keyed concurrency limiter: a new key at a full table of busy keys is refused with
/// `KeyCapReached` (no wait: slots free when permits are released), a tracked key at its limit
/// with `AtCapacity`.
#[test]
fn keyed_concurrency_tells_a_full_key_table_from_a_busy_key() {
    let l = KeyedConcurrencyLimiter::<u64>::builder(1)
        .unwrap()
        .max_keys(NonZeroUsize::MIN)
        .when_full(WhenFull::Deny)
        .build();
    let held = l.try_acquire_n(&1, 1).unwrap();
    assert_eq!(
        l.try_acquire_n(&1, 1).map(drop),
        Err(AcquireError::AtCapacity {
            in_flight: 1,
            limit: 1
        })
    );
    let e = AcquireError::KeyCapReached { retry_after: None };
    let cap = Err(e);
    assert_eq!(l.try_acquire_n(&2, 1).map(drop), cap);
    assert_eq!(
        l.acquire_n(&2, 1).map(drop),
        cap,
        "refused at once, no wait"
    );
    assert_eq!(
        l.try_acquire_n_for(&2, 1, Duration::from_millis(1))
            .map(drop),
        cap
    );
    assert!(l.try_acquire(&2).is_none());
    assert_eq!(e.retry_after(), None);
    assert!(e.to_string().contains("key table is full"), "{e}");
    drop(held);
    assert!(l.try_acquire(&2).is_some(), "key 1 idle: evicted for key 2");
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn keyed_concurrency_async_at_a_full_key_table_is_refused_by_the_cap() {
    let l = std::sync::Arc::new(
        KeyedConcurrencyLimiter::<u64>::builder(1)
            .unwrap()
            .max_keys(NonZeroUsize::MIN)
            .build(),
    );
    let _held = l.acquire_async(&1).await.unwrap();
    let cap = Err(AcquireError::KeyCapReached { retry_after: None });
    assert_eq!(l.acquire_n_async(&2, 1).await.map(drop), cap);
    assert_eq!(
        l.try_acquire_n_for_async(&2, 1, Duration::from_millis(1))
            .await
            .map(drop),
        cap
    );
    assert_eq!(l.try_acquire_n_owned(&2, 1).map(drop), cap);
}

/// `Decision` stays a small `Copy` value: the reason fits beside `allowed`.
#[test]
fn the_reason_does_not_grow_a_decision() {
    assert_eq!(
        std::mem::size_of::<tollgate::Decision>(),
        56,
        "bool + 2 x u64 + Option<Duration> + Duration, the reason in the bool's padding"
    );
}
