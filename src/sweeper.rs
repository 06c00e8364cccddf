//! Eviction of cold keys from a keyed limiter: the rule, whole sweeps, and the background
//! sweeper (a thread, or a tokio task).
//!
//! **Why eviction loses nothing.** A key is cold when `tat <= now`: its bucket is full, the same
//! state as a key never seen. The sweeper checks that under the shard's *write* lock, so no
//! decision on that shard is in flight (decisions hold the *read* lock across their CAS). A
//! decision that then finds the key missing reads its `now` after taking the lock the sweeper
//! released, so at least the sweeper's, where the evicted key and a fresh one both give
//! `max(tat, now) = now`. (One that finds the key, re-inserted, may use a `now` read before
//! its lookup: on a stored cell that only makes it stricter; see `keyed::decide_on_shard`.)
//!
//! **Bounded pause.** One shard is locked at a time, so a sweep delays only decisions on the
//! shard being walked, for as long as that shard takes (see
//! [`DEFAULT_SHARDS`](crate::DEFAULT_SHARDS)); [`SweepStats::longest_pause`] reports it.
//!
//! **The `earliest` bound** (used by the key cap to skip useless sweeps): a sweep first sets it
//! to `u64::MAX`, then lowers it with each surviving key's TAT as it walks; inserts and cancels
//! lower it with the TAT they leave. Every key is either walked by the sweep after the reset,
//! or written after its shard was walked, whose own `fetch_min` then comes after the reset; so
//! when a sweep completes, `earliest` is at most every tracked key's TAT (acquires only raise
//! TATs). It is only read under the sweep lock, when no sweep is half done.

use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cell::TatCell;
use crate::keyed::Store;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::Nanos;

/// What a keyed limiter's sweeping has done so far.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
///
/// let clock = ManualClock::new();
/// let limiter = KeyedRateLimiter::<u32>::builder(Quota::per_second(1).unwrap())
///     .clock(clock.clone())
///     .build();
/// for user in 0..3 {
///     assert!(limiter.try_acquire(&user));
/// }
/// clock.advance(Duration::from_secs(1)); // every key is back to a full bucket
/// limiter.sweep_now();
/// let stats = limiter.stats();
/// assert_eq!((stats.keys, stats.sweeps, stats.evicted), (0, 1, 3));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SweepStats {
    /// Keys tracked now.
    pub keys: usize,
    /// Sweeps completed: background, [`sweep_now`](crate::KeyedRateLimiter::sweep_now), and
    /// reclaims at the key cap.
    pub sweeps: u64,
    /// Keys evicted by all sweeps.
    pub evicted: u64,
    /// Wall-clock duration of the last sweep (all shards).
    pub last_sweep: Duration,
    /// The longest time the last sweep held one shard's write lock: the most any decision
    /// waited for it.
    pub longest_pause: Duration,
}

#[derive(Debug, Default)]
pub(crate) struct SweepCounters {
    sweeps: AtomicU64,
    evicted: AtomicU64,
    last_sweep_ns: AtomicU64,
    longest_pause_ns: AtomicU64,
}

impl SweepCounters {
    fn record(&self, evicted: usize, took: Duration, longest_pause: Duration) {
        self.sweeps.fetch_add(1, Ordering::Relaxed);
        self.evicted.fetch_add(
            u64::try_from(evicted).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.last_sweep_ns.store(nanos(took), Ordering::Relaxed);
        self.longest_pause_ns
            .store(nanos(longest_pause), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self, keys: usize) -> SweepStats {
        SweepStats {
            keys,
            sweeps: self.sweeps.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            last_sweep: Duration::from_nanos(self.last_sweep_ns.load(Ordering::Relaxed)),
            longest_pause: Duration::from_nanos(self.longest_pause_ns.load(Ordering::Relaxed)),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What sweeping one shard did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShardSweep {
    pub(crate) evicted: usize,
    /// The smallest TAT left in the shard (`u64::MAX` if none).
    pub(crate) min_tat: Nanos,
}

/// The eviction rule for one shard, to be run while holding that shard's write lock: drop
/// every cell with `tat <= now`. `retain` walks the shard's cells and removes those for which
/// `keep` says false (a table's `retain`); the loom models drive the same rule over their own
/// table.
pub(crate) fn evict_cold(
    now: Nanos,
    retain: impl FnOnce(&mut dyn FnMut(&TatCell) -> bool),
) -> ShardSweep {
    let mut evicted = 0usize;
    let mut min_tat = Nanos::MAX;
    retain(&mut |cell| {
        let tat = cell.tat();
        if tat <= now {
            evicted += 1;
            false
        } else {
            min_tat = min_tat.min(tat);
            true
        }
    });
    ShardSweep { evicted, min_tat }
}

impl<K, S> Store<K, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// A whole sweep; `stop` is polled between shards (set when the limiter is dropped).
    pub(crate) fn sweep(&self, stop: &dyn Fn() -> bool) -> usize {
        let _serial = self
            .sweep_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.sweep_locked(stop)
    }

    /// A whole sweep; the caller holds `sweep_lock`.
    pub(crate) fn sweep_locked(&self, stop: &dyn Fn() -> bool) -> usize {
        let started = Instant::now();
        self.earliest.store(Nanos::MAX, Ordering::Release);
        let mut evicted = 0usize;
        let mut longest = Duration::ZERO;
        // Evicted keys are moved here and dropped after the shard lock is released: freeing a
        // million `String`s is most of a sweep's cost, and none of it needs the lock.
        let mut graveyard = Vec::new();
        for shard in self.map.shards() {
            if stop() {
                break;
            }
            let mut table = shard.write();
            let held = Instant::now();
            // Read under the lock: any decision after this one sees a later `now`.
            let now = self.clock.now();
            let swept = evict_cold(now, |keep| {
                // SAFETY: the same walk as hashbrown's `HashMap::retain` and dashmap's
                // `retain`: the iterator does not outlive `table`, which we hold exclusively
                // (write guard) for the whole loop, and removing the bucket just yielded is
                // allowed by `RawIter`.
                unsafe {
                    for bucket in table.iter() {
                        let (_, value) = bucket.as_ref();
                        if !keep(value.get()) {
                            if std::mem::needs_drop::<K>() {
                                graveyard.push(table.remove(bucket).0);
                            } else {
                                table.erase(bucket);
                            }
                        }
                    }
                }
            });
            drop(table);
            longest = longest.max(held.elapsed());
            graveyard.clear();
            if swept.evicted > 0 {
                // After the removal: `slots` never undercounts the map.
                self.slots.fetch_sub(swept.evicted, Ordering::AcqRel);
            }
            self.lower_earliest(swept.min_tat);
            evicted += swept.evicted;
        }
        self.counters.record(evicted, started.elapsed(), longest);
        evicted
    }
}

/// A running background sweeper; dropping it stops it (and, for a thread, joins it: that
/// takes at most the shard being swept, since the stop flag is polled between shards).
pub(crate) struct Sweeper {
    stop: Arc<AtomicBool>,
    runner: Runner,
}

enum Runner {
    Thread(Option<JoinHandle<()>>),
    #[cfg(feature = "tokio")]
    Task(tokio::task::JoinHandle<()>),
}

/// The background thread's name (visible in debuggers and `/proc`).
pub(crate) const THREAD_NAME: &str = "tollgate-sweep";

/// The shortest pause between background sweeps. Back-to-back sweeps would re-take the sweep
/// lock the instant they release it (std's mutex is not fair), starving `sweep_now` callers,
/// and burn a core for nothing: a key cannot turn cold faster than the clock moves.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(1);

impl Sweeper {
    /// Starts sweeping `store` every `interval`, holding only a weak reference to it.
    /// `None` if the OS refused a thread.
    pub(crate) fn start<K, S>(
        store: &Arc<Store<K, S>>,
        interval: Duration,
        on_tokio: bool,
    ) -> Option<Sweeper>
    where
        K: Hash + Eq + Send + Sync + 'static,
        S: BuildHasher + Clone + Send + Sync + 'static,
    {
        let interval = interval.max(MIN_INTERVAL);
        let stop = Arc::new(AtomicBool::new(false));
        let weak = Arc::downgrade(store);
        #[cfg(feature = "tokio")]
        if on_tokio {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let task = rt.spawn(run_task(weak, stop.clone(), interval));
                return Some(Sweeper {
                    stop,
                    runner: Runner::Task(task),
                });
            }
        }
        let _ = on_tokio;
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || run_thread(&weak, &flag, interval))
            .ok()?;
        Some(Sweeper {
            stop,
            runner: Runner::Thread(Some(thread)),
        })
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        match &mut self.runner {
            Runner::Thread(thread) => {
                if let Some(thread) = thread.take() {
                    // Wake it from its interval sleep so it sees the flag now, not a whole
                    // interval later.
                    thread.thread().unpark();
                    let _ = thread.join();
                }
            }
            #[cfg(feature = "tokio")]
            Runner::Task(task) => task.abort(),
        }
    }
}

fn run_thread<K, S>(store: &Weak<Store<K, S>>, stop: &AtomicBool, interval: Duration)
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    loop {
        // Sleep until the deadline; park can wake early (unpark, or spuriously).
        let deadline = Instant::now().checked_add(interval);
        loop {
            if stop.load(Ordering::Acquire) {
                return;
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                break;
            }
            std::thread::park_timeout(left);
        }
        // Upgrade only for the sweep: between sweeps the limiter may go away.
        let Some(store) = store.upgrade() else { return };
        store.sweep(&|| stop.load(Ordering::Acquire));
    }
}

#[cfg(feature = "tokio")]
async fn run_task<K, S>(store: Weak<Store<K, S>>, stop: Arc<AtomicBool>, interval: Duration)
where
    K: Hash + Eq + Send + Sync + 'static,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    loop {
        tokio::time::sleep(interval).await;
        let (store, stop) = (store.clone(), stop.clone());
        // A sweep is CPU work holding shard locks: run it on the blocking pool.
        let swept = tokio::task::spawn_blocking(move || {
            if stop.load(Ordering::Acquire) {
                return false;
            }
            match store.upgrade() {
                Some(store) => {
                    store.sweep(&|| stop.load(Ordering::Acquire));
                    true
                }
                None => false,
            }
        })
        .await;
        if !matches!(swept, Ok(true)) {
            return;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
