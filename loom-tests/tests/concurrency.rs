//! The concurrency limit's cell (`cell::semaphore::SemCell`, through `tollgate::__loom`):
//! its lock-free fast path (one CAS to take, one to release) racing the slow path (the FIFO
//! queue under a mutex, cancels, `set_limit`), eviction racing an acquire and the keyed
//! limiter's `set_limit` racing a new key (both on the real `KeyedConcurrencyLimiter`), and
//! eviction racing a refusal (on a model shard of `Semaphore`s).
//!
//! Properties, in every interleaving:
//! - never more permits held than the limit (a high-water count kept by the holders);
//! - no waiter is stranded: once the permits it needs are free it has been served, and woken
//!   exactly once (a release racing an enqueue either sees `QUEUED` and serves it, or the
//!   enqueue sees the freed permits and takes them);
//! - no permit is lost or duplicated: at the end in flight equals what holders still hold;
//! - eviction claims only idle cells: a permit is never held on a cell that was evicted, and a
//!   cell is not freed while a waiter has a refusal on it still to see;
//! - once the keyed `set_limit` has returned, every key has the new limit, a key inserted
//!   during it too.

use std::collections::BTreeMap;
use std::task::{Poll, Wake, Waker};

use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
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

/// A keyed store's cell as the model keeps it: `Arc`ed (so the model can look at an evicted
/// one), with a mark the sweep sets where the store would free the box, after the quiesce.
/// Whoever still points at the cell (a holder, a waiter) checks the mark before each use.
struct Kept {
    sem: Semaphore,
    freed: AtomicBool,
}

impl Kept {
    /// The cell, for a use that must not come after it was freed.
    fn get(&self, what: &str) -> &Semaphore {
        assert!(!self.freed.load(Ordering::SeqCst), "{what} on a freed cell");
        &self.sem
    }
}

/// One shard of a keyed store behind its lock. An ordered map, so loom replays executions
/// exactly.
type Shard = RwLock<BTreeMap<u64, Arc<Kept>>>;

/// A sweep as `KeyedStore::sweep_locked` runs it with the semaphore cells' rule
/// (`concurrency::sem_store`'s `Idle`): under the write guard, close every idle cell and
/// remove it; then, after the guard, quiesce it and free it.
fn sweep(shard: &Shard) -> usize {
    let mut evicted = Vec::new();
    {
        let mut map = shard.write().unwrap();
        map.retain(|_, cell| {
            if cell.sem.try_close() {
                evicted.push(cell.clone());
                false
            } else {
                true
            }
        });
    }
    for cell in &evicted {
        let st = cell.sem.state();
        assert!(
            st.closed && st.in_flight == 0 && !st.queued,
            "evicted a busy cell: {st:?}"
        );
        cell.sem.quiesce();
        cell.freed.store(true, Ordering::SeqCst);
    }
    evicted.len()
}

/// `try_close`'s rule that a refusal not yet seen keeps the cell: a waiter queued on a key
/// (behind its holder) is refused by the keyed `set_limit`'s walk (under the shard's read
/// guard) while the holder releases and a sweep runs. Once the limit is lowered and the
/// permits are back the word is idle, but the refused waiter still has to poll the cell (its
/// record is the queue): the sweep must keep it until then. The waiter ends served (the
/// release came first) or refused, woken once, on a cell not freed; after it, the key goes.
/// With the queue check dropped from `try_close`, loom finds the sweep that frees the cell
/// under the waiter.
#[test]
fn a_refusal_not_yet_seen_keeps_its_cell() {
    model(|| {
        let cell = Arc::new(Kept {
            sem: Semaphore::new(2),
            freed: AtomicBool::new(false),
        });
        let shard: Arc<Shard> = Arc::new(RwLock::new(BTreeMap::from([(KEY, cell.clone())])));
        let (count, waker) = counting();
        let id = {
            // Both under the read guard, as `SemStore::begin` takes and queues.
            let _map = shard.read().unwrap();
            assert!(matches!(cell.sem.try_take(2), Take::Granted(_)));
            let Enqueued::Waiting(id) = cell.sem.enqueue(2, &waker) else {
                panic!("held")
            };
            id
        };
        // The keyed `set_limit`'s walk, then the holder's release (one thread: the release
        // after the refusal is the order that leaves the word idle with a refusal unseen).
        let other = {
            let (shard, cell) = (shard.clone(), cell.clone());
            loom::thread::spawn(move || {
                for cell in shard.read().unwrap().values() {
                    cell.sem.set_limit(1);
                }
                cell.get("a release").release(2);
            })
        };
        sweep(&shard);
        other.join().unwrap();
        match cell.get("the waiter's poll").poll(id, &waker) {
            Poll::Ready(Ok(())) => cell.get("a release").release(2), // kept over the new limit
            Poll::Ready(Err(limit)) => assert_eq!(limit, 1),
            Poll::Pending => panic!("left waiting for what can never be granted"),
        }
        assert_eq!(wakes(&count), 1);
        // Seen and done: the key is idle and goes.
        assert_eq!(sweep(&shard), 1);
        assert!(shard.read().unwrap().is_empty());
    });
}

/// A keyed limiter of limit 1 on one shard, with a hasher loom can replay (no random seed).
fn one_shard_limiter() -> tollgate::KeyedConcurrencyLimiter<u64, DetHasher> {
    tollgate::KeyedConcurrencyLimiter::<u64>::builder(1)
        .unwrap()
        .hasher(DetHasher::default())
        .shards(1)
        .build()
}

type DetHasher = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// The real keyed limiter: two acquire-and-release rounds on one idle, tracked key race a
/// whole sweep (`sweep_now`: the store's chunked walk, the cells' `Idle` rule, the quiesce),
/// so the acquire starts before, during and after its cell is closed and removed. Each round
/// is granted (one acquirer, limit 1: an acquire meeting an evicted cell looks again and
/// inserts the key afresh, never refuses), and while it holds its permit the key's tracked
/// cell is the one holding it (`in_flight` 1; a permit on a cell evicted from under it reads
/// 0, or would be freed under the holder). At the end nothing is held and the counts agree.
#[test]
fn eviction_races_an_acquire() {
    model(|| {
        let limiter = Arc::new(one_shard_limiter());
        // Tracked and idle, so the sweep may evict it at any point.
        drop(limiter.try_acquire(&KEY).expect("a new key"));
        let acquirer = {
            let limiter = limiter.clone();
            loom::thread::spawn(move || {
                for _ in 0..2 {
                    let permit = limiter
                        .try_acquire(&KEY)
                        .expect("one acquirer, limit 1: always granted");
                    assert_eq!(limiter.in_flight(&KEY), 1, "the permit's cell was evicted");
                    drop(permit);
                }
            })
        };
        let evicted = limiter.sweep_now();
        acquirer.join().unwrap();
        assert_eq!(limiter.in_flight(&KEY), 0);
        assert!(limiter.len() <= 1);
        assert!(evicted <= 1, "one key, tracked once at a time");
        // Idle again, tracked or not: the next sweep leaves nothing.
        limiter.sweep_now();
        assert_eq!(limiter.len(), 0);
        assert!(limiter.try_acquire(&KEY).is_some());
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
