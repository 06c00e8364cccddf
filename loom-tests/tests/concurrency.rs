//! The concurrency limit's cell (`cell::semaphore::SemCell`, through `tollgate::__loom`):
//! its lock-free fast path (one CAS to take, one to release) racing the slow path (the FIFO
//! queue under a mutex, cancels, `set_limit`), a keyed store's eviction racing an acquire, and
//! the keyed limiter's `set_limit` racing a new key (the real `KeyedConcurrencyLimiter`).
//!
//! Properties, in every interleaving:
//! - never more permits held than the limit (a high-water count kept by the holders);
//! - no waiter is stranded: once the permits it needs are free it has been served, and woken
//!   exactly once (a release racing an enqueue either sees `QUEUED` and serves it, or the
//!   enqueue sees the freed permits and takes them);
//! - no permit is lost or duplicated: at the end in flight equals what holders still hold;
//! - eviction claims only idle cells: a permit is never held on a cell that was evicted;
//! - once the keyed `set_limit` has returned, every key has the new limit, a key inserted
//!   during it too.

use std::collections::BTreeMap;
use std::task::{Poll, Wake, Waker};

use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom::sync::{Arc, RwLock};
use tollgate::__loom::{Cancelled, Enqueued, Semaphore, Take};
use tollgate_loom_tests::model;

/// A waker that counts its wake-ups.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (std::sync::Arc<Count>, Waker) {
    let c = std::sync::Arc::new(Count(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}

fn wakes(c: &Count) -> usize {
    c.0.load(Ordering::SeqCst)
}

/// Permits held, counted by the holders: raised after a grant, lowered before a release.
struct Held {
    now: AtomicU32,
    limit: u32,
}

impl Held {
    fn enter(&self, n: u32) {
        let now = self.now.fetch_add(n, Ordering::SeqCst) + n;
        assert!(now <= self.limit, "{now} held of {}", self.limit);
    }

    fn leave(&self, n: u32) {
        self.now.fetch_sub(n, Ordering::SeqCst);
    }
}

/// A holder releasing (fast path, or slow if a waiter queued meanwhile), a fast take and a
/// waiting acquire, all at once on a limit of 1 that starts held.
#[test]
fn release_take_and_enqueue_race() {
    model(|| {
        let s = Arc::new(Semaphore::new(1));
        let held = Arc::new(Held {
            now: AtomicU32::new(0),
            limit: 1,
        });
        assert!(matches!(s.try_take(1), Take::Granted(_)));
        held.enter(1);
        let releaser = {
            let (s, held) = (s.clone(), held.clone());
            loom::thread::spawn(move || {
                held.leave(1);
                s.release(1);
            })
        };
        let taker = {
            let (s, held) = (s.clone(), held.clone());
            loom::thread::spawn(move || {
                if let Take::Granted(_) = s.try_take(1) {
                    held.enter(1);
                    held.leave(1);
                    s.release(1);
                }
            })
        };
        let (count, waker) = counting();
        let queued = match s.enqueue(1, &waker) {
            Enqueued::Granted => {
                held.enter(1);
                None
            }
            Enqueued::Waiting(id) => Some(id),
            other => panic!("{other:?}"),
        };
        releaser.join().unwrap();
        taker.join().unwrap();
        // Everyone else is done: a queued waiter must have been served, and woken once.
        if let Some(id) = queued {
            assert_eq!(s.poll(id, &waker), Poll::Ready(Ok(())));
            assert_eq!(wakes(&count), 1);
            held.enter(1);
        } else {
            assert_eq!(wakes(&count), 0);
        }
        let st = s.state();
        assert_eq!((st.in_flight, st.queued), (1, false));
        held.leave(1);
        s.release(1);
        assert_eq!(s.state().in_flight, 0);
    });
}

/// The head waiter gives up while the holder releases: either it leaves the queue and the
/// permit goes to the next waiter, or it had been served and hands the permit on. Either
/// way the next waiter ends up served, once.
#[test]
fn cancel_races_release() {
    model(|| {
        let s = Arc::new(Semaphore::new(1));
        assert!(matches!(s.try_take(1), Take::Granted(_)));
        let (_, first_waker) = counting();
        let (next_count, next_waker) = counting();
        let Enqueued::Waiting(first) = s.enqueue(1, &first_waker) else {
            panic!("held")
        };
        let Enqueued::Waiting(next) = s.enqueue(1, &next_waker) else {
            panic!("held")
        };
        let releaser = {
            let s = s.clone();
            loom::thread::spawn(move || s.release(1))
        };
        let canceller = {
            let s = s.clone();
            loom::thread::spawn(move || {
                if s.cancel(first) == Cancelled::Granted {
                    s.release(1); // a dropped future that had been served
                }
            })
        };
        releaser.join().unwrap();
        canceller.join().unwrap();
        assert_eq!(s.poll(next, &next_waker), Poll::Ready(Ok(())));
        assert_eq!(wakes(&next_count), 1);
        let st = s.state();
        assert_eq!((st.in_flight, st.queued), (1, false));
    });
}

/// `set_limit` lowering the limit below a waiter's request while the holder releases: the
/// waiter is either served (the release came first) or refused, never left waiting; held
/// permits are never revoked.
#[test]
fn set_limit_races_release_and_a_waiter() {
    model(|| {
        let s = Arc::new(Semaphore::new(2));
        assert!(matches!(s.try_take(2), Take::Granted(_)));
        let (count, waker) = counting();
        let Enqueued::Waiting(id) = s.enqueue(2, &waker) else {
            panic!("held")
        };
        let releaser = {
            let s = s.clone();
            loom::thread::spawn(move || s.release(2))
        };
        let setter = {
            let s = s.clone();
            loom::thread::spawn(move || s.set_limit(1))
        };
        releaser.join().unwrap();
        setter.join().unwrap();
        let st = s.state();
        assert_eq!((st.limit, st.queued), (1, false));
        match s.poll(id, &waker) {
            Poll::Ready(Ok(())) => assert_eq!(st.in_flight, 2), // kept over the new limit
            Poll::Ready(Err(limit)) => assert_eq!((limit, st.in_flight), (1, 0)),
            Poll::Pending => panic!("left waiting for what can never be granted"),
        }
        assert_eq!(wakes(&count), 1);
    });
}

const KEY: u64 = 1;

/// One shard of a keyed store: cells boxed (here `Arc`ed, so the model can look at an
/// evicted one) behind the shard's lock. An ordered map, so loom replays executions exactly.
type Shard = RwLock<BTreeMap<u64, Arc<Semaphore>>>;

/// An acquire as `concurrency::sem_store::SemStore::begin` makes it: look the key up and take
/// under the shard's read guard; on a miss, insert under the write guard and take there.
/// Returns the cell the permit is on.
fn acquire(shard: &Shard) -> Option<Arc<Semaphore>> {
    loop {
        {
            let map = shard.read().unwrap();
            if let Some(cell) = map.get(&KEY) {
                match cell.try_take(1) {
                    Take::Granted(_) => return Some(cell.clone()),
                    Take::Closed => continue,
                    _ => return None,
                }
            }
        }
        let mut map = shard.write().unwrap();
        let cell = map
            .entry(KEY)
            .or_insert_with(|| Arc::new(Semaphore::new(1)))
            .clone();
        return match cell.try_take(1) {
            Take::Granted(_) => Some(cell),
            _ => None,
        };
    }
}

/// A sweep as `KeyedStore::sweep_locked` runs it with the semaphore cells' rule
/// (`concurrency::sem_store`'s `Idle`): under the write guard, close every idle cell and
/// remove it; then, after the guard, quiesce it before it is freed.
fn sweep(shard: &Shard) -> usize {
    let mut evicted = Vec::new();
    {
        let mut map = shard.write().unwrap();
        map.retain(|_, cell| {
            if cell.try_close() {
                evicted.push(cell.clone());
                false
            } else {
                true
            }
        });
    }
    for cell in &evicted {
        let st = cell.state();
        assert!(
            st.closed && st.in_flight == 0 && !st.queued,
            "evicted a busy cell: {st:?}"
        );
        cell.quiesce();
    }
    evicted.len()
}

/// Two acquire-and-release rounds on one key race a sweep: the key is evicted only while
/// idle, and a permit is never held on an evicted cell (the cell a holder releases to is the
/// one the map holds for the key the whole time).
#[test]
fn eviction_races_an_acquire() {
    model(|| {
        let shard: Arc<Shard> = Arc::new(RwLock::new(BTreeMap::new()));
        // Start tracked and idle, so the sweep may evict it at any point.
        shard
            .write()
            .unwrap()
            .insert(KEY, Arc::new(Semaphore::new(1)));
        let acquirer = {
            let shard = shard.clone();
            loom::thread::spawn(move || {
                for _ in 0..2 {
                    let cell = acquire(&shard).expect("one acquirer, limit 1: always granted");
                    {
                        let map = shard.read().unwrap();
                        let tracked = map.get(&KEY).expect("a key holding a permit is tracked");
                        assert!(Arc::ptr_eq(tracked, &cell), "the permit's cell was evicted");
                    }
                    assert!(!cell.state().closed);
                    cell.release(1);
                }
            })
        };
        sweep(&shard);
        acquirer.join().unwrap();
        let map = shard.read().unwrap();
        if let Some(cell) = map.get(&KEY) {
            assert_eq!(cell.state().in_flight, 0);
            assert!(!cell.state().closed);
        }
    });
}

/// The keyed limiter's `set_limit` (store, then walk every shard under its read lock) racing
/// the insert of a new key (whose cell reads the limit before the shard's write lock, to build
/// the cell outside it, and again under it): after both, the key has the new limit. With the
/// read under the write lock removed, loom finds the order that keeps the old one (the cell
/// built with 1, the walk done before the insert).
#[test]
fn keyed_set_limit_races_a_new_key() {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::BuildHasherDefault;
    use tollgate::{AcquireError, KeyedConcurrencyLimiter};

    model(|| {
        let limiter = Arc::new(
            KeyedConcurrencyLimiter::<u64>::builder(1)
                .unwrap()
                .hasher(BuildHasherDefault::<DefaultHasher>::default())
                .shards(1)
                .build(),
        );
        let inserter = {
            let limiter = limiter.clone();
            loom::thread::spawn(move || limiter.try_acquire(&KEY).is_some())
        };
        limiter.set_limit(2).unwrap();
        assert!(inserter.join().unwrap(), "a new key, limit 1 or 2: granted");
        match limiter.try_acquire_n(&KEY, 3) {
            Err(AcquireError::ExceedsBurst { burst, .. }) => {
                assert_eq!(burst, 2, "the key kept the old limit")
            }
            other => panic!("3 permits over a limit of 2: {other:?}"),
        }
    });
}
