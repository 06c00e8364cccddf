//! The concurrency limiters through their public API: the grid's shapes, FIFO and
//! cancel-safety of async waits (driven by hand, poll by poll), owned permits, live limit
//! changes, and the keyed limiter's eviction and key cap.

#[cfg(feature = "tokio")]
use std::future::Future;
use std::num::NonZeroUsize;
#[cfg(feature = "tokio")]
use std::pin::pin;
#[cfg(feature = "tokio")]
use std::sync::Arc;
#[cfg(feature = "tokio")]
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tollgate::{
    AcquireError, ConcurrencyError, ConcurrencyLimiter, KeyedConcurrencyLimiter, WhenFull,
};

#[cfg(feature = "tokio")]
fn noop() -> Waker {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    Waker::from(Arc::new(Noop))
}

/// Polls a future once.
#[cfg(feature = "tokio")]
fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(&noop()))
}

#[test]
fn zero_and_oversized_limits_are_refused() {
    assert_eq!(
        ConcurrencyLimiter::new(0).unwrap_err(),
        ConcurrencyError::Zero
    );
    assert!(matches!(
        KeyedConcurrencyLimiter::<u8>::builder(ConcurrencyLimiter::MAX_LIMIT + 1),
        Err(ConcurrencyError::TooLarge { .. })
    ));
    let l = ConcurrencyLimiter::new(ConcurrencyLimiter::MAX_LIMIT).unwrap();
    assert_eq!(
        l.try_acquire_n(ConcurrencyLimiter::MAX_LIMIT).unwrap().n(),
        ConcurrencyLimiter::MAX_LIMIT
    );
    assert_eq!(l.set_limit(0), Err(ConcurrencyError::Zero));
    assert_eq!(l.limit(), ConcurrencyLimiter::MAX_LIMIT);
}

/// Counts are `u64`, as for every other limiter; the cell holds at most `MAX_LIMIT`, so a
/// larger limit is a typed error (never truncated), and a count past `u32::MAX` is refused as
/// any count above the limit is.
#[test]
fn u64_counts_past_the_cell_are_refused_with_the_usual_errors() {
    let past_u32 = u64::from(u32::MAX) + 1;
    let too_large = ConcurrencyError::TooLarge {
        limit: past_u32,
        max: ConcurrencyLimiter::MAX_LIMIT,
    };
    assert_eq!(ConcurrencyLimiter::new(past_u32).unwrap_err(), too_large);
    assert_eq!(
        ConcurrencyLimiter::builder(past_u32).unwrap_err(),
        too_large
    );
    assert_eq!(
        KeyedConcurrencyLimiter::<u8>::new(past_u32).unwrap_err(),
        too_large
    );
    assert_eq!(
        KeyedConcurrencyLimiter::<u8>::builder(past_u32).unwrap_err(),
        too_large
    );
    let l = ConcurrencyLimiter::new(2).unwrap();
    assert_eq!(l.set_limit(past_u32), Err(too_large));
    assert_eq!(l.limit(), 2, "a refused limit changes nothing");

    let held = l.try_acquire().unwrap(); // busy or not, it is the same refusal
    let too_many = AcquireError::ExceedsBurst {
        requested: u64::MAX,
        burst: 2,
    };
    assert_eq!(l.try_acquire_n(u64::MAX).unwrap_err(), too_many);
    assert_eq!(l.acquire_n(u64::MAX).unwrap_err(), too_many);
    assert_eq!(
        l.try_acquire_n_for(u64::MAX, Duration::from_secs(1))
            .unwrap_err(),
        too_many
    );
    assert_eq!(
        std::sync::Arc::new(ConcurrencyLimiter::new(2).unwrap())
            .try_acquire_n_owned(u64::MAX)
            .unwrap_err(),
        too_many
    );
    assert_eq!((l.in_flight(), l.available()), (1, 1));
    drop(held);

    let k = KeyedConcurrencyLimiter::<u8>::new(2).unwrap();
    assert_eq!(k.set_limit(past_u32), Err(too_large));
    assert_eq!(k.try_acquire_n(&1, u64::MAX).unwrap_err(), too_many); // new key
    let held = k.try_acquire(&1).unwrap();
    assert_eq!(k.try_acquire_n(&1, u64::MAX).unwrap_err(), too_many); // tracked key
    assert_eq!(k.acquire_n(&1, u64::MAX).unwrap_err(), too_many);
    assert_eq!(
        k.try_acquire_n_for(&1, u64::MAX, Duration::from_secs(1))
            .unwrap_err(),
        too_many
    );
    assert_eq!((k.in_flight(&1), k.limit(), held.n()), (1, 2, 1));
}

proptest::proptest! {
    /// Any `u64` count against the model of a semaphore: above the limit is `ExceedsBurst`
    /// naming that count, waiting or not; otherwise granted exactly if it fits now.
    #[test]
    fn any_u64_count_is_decided_as_the_model_says(
        limit in 1..=16u64,
        held in 0..=16u64,
        n in proptest::prop_oneof![
            0..=20u64,
            proptest::arbitrary::any::<u64>(),
            u64::from(u32::MAX) - 1..=u64::from(u32::MAX) + 1,
        ],
    ) {
        let held = held.min(limit);
        let l = ConcurrencyLimiter::new(limit).unwrap();
        let k = KeyedConcurrencyLimiter::<u8>::new(limit).unwrap();
        let _h = (l.try_acquire_n(held).unwrap(), k.try_acquire_n(&1, held).unwrap());
        let model = if n > limit {
            Err(AcquireError::ExceedsBurst { requested: n, burst: limit })
        } else if n <= limit - held {
            Ok(n)
        } else {
            Err(AcquireError::AtCapacity { in_flight: held, limit })
        };
        proptest::prop_assert_eq!(l.try_acquire_n(n).map(|p| p.n()), model);
        proptest::prop_assert_eq!(k.try_acquire_n(&1, n).map(|p| p.n()), model);
        if n > limit {
            proptest::prop_assert_eq!(l.acquire_n(n).map(|p| p.n()), model);
            proptest::prop_assert_eq!(k.acquire_n(&2, n).map(|p| p.n()), model);
        }
        proptest::prop_assert_eq!((l.in_flight(), l.available()), (held, limit - held));
        proptest::prop_assert_eq!((k.in_flight(&1), k.limit()), (held, limit));
    }
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn u64_counts_past_the_cell_are_refused_when_awaited_too() {
    let too_many = AcquireError::ExceedsBurst {
        requested: u64::MAX,
        burst: 2,
    };
    let l = Arc::new(ConcurrencyLimiter::new(2).unwrap());
    assert_eq!(l.acquire_n_async(u64::MAX).await.unwrap_err(), too_many);
    assert_eq!(
        l.acquire_n_owned_async(u64::MAX).await.unwrap_err(),
        too_many
    );
    let k = Arc::new(KeyedConcurrencyLimiter::<u8>::new(2).unwrap());
    assert_eq!(k.acquire_n_async(&1, u64::MAX).await.unwrap_err(), too_many);
    assert_eq!(
        k.try_acquire_n_for_async(&1, u64::MAX, Duration::from_secs(1))
            .await
            .unwrap_err(),
        too_many
    );
    assert_eq!(
        k.acquire_n_owned_async(&1, u64::MAX).await.unwrap_err(),
        too_many
    );
    assert!(k.is_empty(), "a refused count tracks no key");
}

#[test]
fn zero_permits_succeed_at_once_and_more_than_the_limit_never_waits() {
    let l = ConcurrencyLimiter::new(2).unwrap();
    let held = l.try_acquire_n(2).unwrap();
    assert_eq!(l.try_acquire_n(0).unwrap().n(), 0);
    assert_eq!(l.acquire_n(0).unwrap().n(), 0);
    assert_eq!(
        l.try_acquire_n_for(0, Duration::from_secs(1)).unwrap().n(),
        0
    );
    let too_many = AcquireError::ExceedsBurst {
        requested: 3,
        burst: 2,
    };
    assert_eq!(l.try_acquire_n(3).unwrap_err(), too_many);
    assert_eq!(l.acquire_n(3).unwrap_err(), too_many); // refused, not a wait forever
    assert_eq!(
        l.try_acquire_n_for(3, Duration::from_secs(1)).unwrap_err(),
        too_many
    );
    drop(held);
    let k = KeyedConcurrencyLimiter::<u8>::new(2).unwrap();
    assert_eq!(k.try_acquire_n(&1, 0).unwrap().n(), 0);
    assert_eq!(k.acquire_n(&1, 3).unwrap_err(), too_many);
    assert_eq!(k.len(), 0, "neither tracks the key");
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn async_waiters_are_served_in_arrival_order_with_no_barging() {
    let l = ConcurrencyLimiter::new(2).unwrap();
    let held = l.try_acquire_n(2).unwrap();
    let mut big = pin!(l.acquire_n_async(2));
    let mut small = pin!(l.acquire_n_async(1));
    assert!(poll_once(big.as_mut()).is_pending());
    assert!(poll_once(small.as_mut()).is_pending());
    drop(held);
    // The head (2) is served; the small one behind it still waits; a newcomer does not pass.
    let big = match poll_once(big.as_mut()) {
        Poll::Ready(p) => p.unwrap(),
        Poll::Pending => panic!("the head was not served"),
    };
    assert!(poll_once(small.as_mut()).is_pending());
    assert!(l.try_acquire().is_none());
    drop(big);
    assert!(matches!(poll_once(small.as_mut()), Poll::Ready(Ok(_))));
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn a_large_request_at_the_head_is_not_starved_by_small_ones() {
    let l = ConcurrencyLimiter::new(3).unwrap();
    let one = l.try_acquire().unwrap();
    let mut big = pin!(l.acquire_n_async(3));
    assert!(poll_once(big.as_mut()).is_pending());
    // Two permits are free, but nobody passes the waiting request for three.
    assert!(l.try_acquire().is_none());
    let mut small = pin!(l.acquire_async());
    assert!(poll_once(small.as_mut()).is_pending());
    drop(one);
    let Poll::Ready(Ok(_big)) = poll_once(big.as_mut()) else {
        panic!("the head was not served")
    };
    assert!(poll_once(small.as_mut()).is_pending());
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn a_dropped_waiting_future_gives_its_place_to_the_next() {
    let l = ConcurrencyLimiter::new(1).unwrap();
    let held = l.try_acquire().unwrap();
    let mut next = Box::pin(l.acquire_async());
    {
        let mut first = pin!(l.acquire_async());
        assert!(poll_once(first.as_mut()).is_pending());
        assert!(poll_once(next.as_mut()).is_pending());
    } // `first` dropped while queued
    drop(held);
    assert!(matches!(poll_once(next.as_mut()), Poll::Ready(Ok(_))));
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn a_dropped_future_that_was_already_served_hands_its_permits_on() {
    let l = ConcurrencyLimiter::new(1).unwrap();
    let held = l.try_acquire().unwrap();
    let mut first = Box::pin(l.acquire_async());
    let mut second = Box::pin(l.acquire_async());
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    drop(held); // serves `first`, which is never polled again
    assert_eq!(l.in_flight(), 1);
    drop(first);
    let Poll::Ready(Ok(_second)) = poll_once(second.as_mut()) else {
        panic!("the permits were not handed on")
    };
    assert_eq!(l.in_flight(), 1);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_timed_out_wait_is_refused_and_leaves_the_queue() {
    let l = ConcurrencyLimiter::new(1).unwrap();
    let held = l.try_acquire().unwrap();
    let e = l
        .try_acquire_for_async(Duration::from_millis(5))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        AcquireError::AtCapacity {
            in_flight: 1,
            limit: 1
        }
    );
    drop(held);
    assert!(l.try_acquire().is_some(), "no waiter left queued ahead");
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn lowering_the_limit_refuses_a_waiter_it_can_never_serve() {
    let l = ConcurrencyLimiter::new(3).unwrap();
    let held = l.try_acquire().unwrap();
    let mut big = pin!(l.acquire_n_async(3));
    assert!(poll_once(big.as_mut()).is_pending());
    l.set_limit(2).unwrap();
    assert!(matches!(
        poll_once(big.as_mut()),
        Poll::Ready(Err(AcquireError::ExceedsBurst {
            requested: 3,
            burst: 2
        }))
    ));
    drop(held);
}

#[test]
fn blocking_waiters_are_woken_when_permits_come_back() {
    let l = ConcurrencyLimiter::new(2).unwrap();
    std::thread::scope(|s| {
        let held = l.acquire_n(2).unwrap();
        let waiters: Vec<_> = (0..4).map(|_| s.spawn(|| l.acquire().map(drop))).collect();
        drop(held);
        for w in waiters {
            w.join().unwrap().unwrap();
        }
    });
    assert_eq!(l.available(), 2);
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn owned_permits_move_into_spawned_tasks() {
    let l = Arc::new(ConcurrencyLimiter::new(2).unwrap());
    let a = l.acquire_owned_async().await.unwrap();
    let b = l.try_acquire_owned().unwrap();
    assert!(l.try_acquire_owned().is_none());
    let task = tokio::spawn(async move { (a.n(), b.n()) });
    assert_eq!(task.await.unwrap(), (1, 1));
    assert_eq!(l.in_flight(), 0);
    let k = Arc::new(KeyedConcurrencyLimiter::<String>::new(1).unwrap());
    let p = k.acquire_owned_async("job").await.unwrap();
    let k2 = k.clone();
    tokio::spawn(async move {
        assert_eq!(k2.in_flight("job"), 1);
        drop(p);
    })
    .await
    .unwrap();
    assert_eq!(k.in_flight("job"), 0);
}

#[test]
fn a_forgotten_permit_is_never_given_back() {
    let l = ConcurrencyLimiter::new(2).unwrap();
    l.try_acquire().unwrap().forget();
    assert_eq!((l.in_flight(), l.available()), (1, 1));
    let k = KeyedConcurrencyLimiter::<u8>::new(2).unwrap();
    k.try_acquire(&1).unwrap().forget();
    assert_eq!(k.sweep_now(), 0, "a key holding a permit is never evicted");
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn idle_keys_are_evicted_and_busy_or_awaited_ones_kept() {
    let k = KeyedConcurrencyLimiter::<u32>::new(1).unwrap();
    let busy = k.try_acquire(&1).unwrap();
    drop(k.try_acquire(&2).unwrap());
    assert_eq!(k.len(), 2);
    assert_eq!(k.sweep_now(), 1);
    assert_eq!((k.len(), k.in_flight(&1)), (1, 1));
    // Key 1 with a waiter: kept; its holder gone, the permit passes to the waiter: kept.
    {
        let mut waiter = pin!(k.acquire_async(&1));
        assert!(poll_once(waiter.as_mut()).is_pending());
        drop(busy);
        assert_eq!(k.sweep_now(), 0);
        let Poll::Ready(Ok(p)) = poll_once(waiter.as_mut()) else {
            panic!("served on release")
        };
        assert_eq!(k.sweep_now(), 0);
        drop(p);
    }
    k.sweep_now();
    assert!(k.is_empty());
    assert_eq!(k.stats().evicted, 2);
}

#[test]
fn the_key_cap_is_exact_and_reclaims_idle_keys_before_refusing() {
    let k = KeyedConcurrencyLimiter::<u32>::builder(1)
        .unwrap()
        .max_keys(NonZeroUsize::new(2).unwrap())
        .build();
    let a = k.try_acquire(&1).unwrap();
    drop(k.try_acquire(&2).unwrap()); // tracked, idle
    let c = k
        .try_acquire(&3)
        .expect("the idle key is reclaimed for the new one");
    assert_eq!(k.len(), 2);
    // Refused by the full key table, not by a busy key: no wait to suggest.
    let cap = AcquireError::KeyCapReached { retry_after: None };
    assert_eq!(k.try_acquire_n(&4, 1).unwrap_err(), cap);
    assert_eq!(k.acquire(&4).unwrap_err(), cap);
    drop((a, c));
    assert!(k.try_acquire(&4).is_some());
    assert!(k.len() <= 2);
}

#[test]
fn allow_untracked_grants_a_new_key_at_the_cap_without_counting_it() {
    let k = KeyedConcurrencyLimiter::<u32>::builder(1)
        .unwrap()
        .max_keys(NonZeroUsize::MIN)
        .when_full(WhenFull::AllowUntracked)
        .build();
    let a = k.try_acquire(&1).unwrap();
    let b = k.try_acquire(&2).unwrap();
    assert_eq!((b.n(), k.len(), k.in_flight(&2)), (1, 1, 0));
    assert!(
        k.try_acquire_n(&2, 2).is_err(),
        "still never more than the limit at once"
    );
    drop((a, b));
}

/// A waiter refused by a lowered limit still needs its key's cell until it has seen the
/// refusal (it is polled, or dropped): a sweep must not evict the key meanwhile, even with
/// nothing in flight and nobody waiting any more.
#[cfg(feature = "tokio")]
#[tokio::test]
async fn a_refused_waiter_keeps_its_key_until_it_has_seen_the_refusal() {
    let k = KeyedConcurrencyLimiter::<u32>::new(2).unwrap();
    let held = k.try_acquire_n(&1, 2).unwrap();
    let mut waiter = Box::pin(k.acquire_n_async(&1, 2));
    assert!(poll_once(waiter.as_mut()).is_pending());
    k.set_limit(1).unwrap(); // refuses the waiter, which has not polled since
    drop(held); // nothing in flight, nobody waiting
    let evicted = k.sweep_now();
    if evicted != 0 {
        std::mem::forget(waiter); // its cell is gone: polling or dropping it would use it
        panic!("a key with an unseen refusal was evicted");
    }
    assert!(matches!(
        poll_once(waiter.as_mut()),
        Poll::Ready(Err(AcquireError::ExceedsBurst {
            requested: 2,
            burst: 1
        }))
    ));
    drop(waiter);
    assert_eq!(
        k.sweep_now(),
        1,
        "seen, the refusal no longer keeps the key"
    );
}

/// The keyed `set_limit`: every tracked key's limit changes (held permits kept, waiters on a
/// raised limit served, a waiter above a lowered one refused), new keys start with it.
#[cfg(feature = "tokio")]
#[tokio::test]
async fn keyed_set_limit_changes_every_key_and_new_ones() {
    let k = KeyedConcurrencyLimiter::<u32>::new(2).unwrap();
    let held = k.try_acquire_n(&1, 2).unwrap();
    let mut waiter = pin!(k.acquire_async(&1));
    assert!(poll_once(waiter.as_mut()).is_pending());
    let other = k.try_acquire(&2).unwrap();
    let mut big = pin!(k.acquire_n_async(&2, 2));
    assert!(poll_once(big.as_mut()).is_pending());

    k.set_limit(3).unwrap(); // raised: key 1's waiter is served at once
    assert_eq!(k.limit(), 3);
    let Poll::Ready(Ok(served)) = poll_once(waiter.as_mut()) else {
        panic!("a raised limit serves the waiter")
    };
    assert_eq!(k.in_flight(&1), 3);
    let Poll::Ready(Ok(big_served)) = poll_once(big.as_mut()) else {
        panic!("a raised limit serves key 2's waiter too")
    };
    assert_eq!(k.in_flight(&2), 3);
    drop((big_served, other));

    let mut three = pin!(k.acquire_n_async(&1, 3));
    assert!(poll_once(three.as_mut()).is_pending());
    k.set_limit(1).unwrap(); // lowered: nothing revoked, the waiter for 3 refused
    assert!(matches!(
        poll_once(three.as_mut()),
        Poll::Ready(Err(AcquireError::ExceedsBurst {
            requested: 3,
            burst: 1
        }))
    ));
    assert_eq!(k.in_flight(&1), 3);
    drop(held);
    assert!(k.try_acquire(&1).is_none(), "one still held, limit 1");
    drop(served);
    let again = k.try_acquire(&1).unwrap();
    assert!(k.try_acquire(&1).is_none());
    // Key 2 (tracked, idle) and key 3 (new) both have the new limit.
    assert!(matches!(
        k.try_acquire_n(&2, 2),
        Err(AcquireError::ExceedsBurst {
            requested: 2,
            burst: 1
        })
    ));
    assert!(matches!(
        k.try_acquire_n(&3, 2),
        Err(AcquireError::ExceedsBurst { .. })
    ));
    assert!(matches!(k.set_limit(0), Err(ConcurrencyError::Zero)));
    assert!(matches!(
        k.set_limit(u64::from(u32::MAX)),
        Err(ConcurrencyError::TooLarge { .. })
    ));
    assert_eq!(k.limit(), 1, "a refused limit changes nothing");
    assert!(
        k.try_acquire(&1).is_none(),
        "key 1 still at 1 in flight of 1"
    );
    drop(again);
}
