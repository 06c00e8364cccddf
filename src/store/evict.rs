//! Eviction: what the keyed store asks of its cells' rule ([`Evict`]), the rate cells' rule
//! (cold keys, [`verdict`]), and sweep statistics.
//!
//! **Why eviction loses nothing.** A key is cold once the algorithm says its cell decides
//! exactly like a fresh one (`cold_at <= now`; for GCRA `tat <= now`: a full bucket). The keyed
//! store checks that under the shard's *write* lock, so no decision on that shard is in flight
//! (decisions hold the *read* lock across their CAS). A decision that then finds the key missing
//! reads its `now` after taking the lock the sweep released. With a clock ordered across threads
//! that `now` is at least the sweep's; with one whose readings can be up to
//! [`Clock::max_skew`](crate::Clock::max_skew) earlier than a reading that happened-before them
//! (the TSC, the default clock on most x86_64 machines), it is at least the sweep's minus that
//! skew. So the rule evicts only keys cold by `max_skew` already ([`is_cold`]): the recreated
//! key decides at a `now` where the evicted key and a fresh one decide alike. (A decision that
//! finds the key, re-inserted, may use a `now` read before its lookup: on a stored cell that
//! only makes it stricter; see `engine::decide_on_shard`.)

use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};
use crate::Nanos;

/// What the keyed store asks of its cells' rule: may this entry be evicted now. The rate
/// limiters' engine answers it by the cold-time rule ([`verdict`]: a cell cold by the
/// clock's skew already), the keyed concurrency limiter's store for its semaphore cells (an
/// idle cell, closed).
pub(crate) trait Evict<C> {
    /// What [`judge`](Evict::judge) reads once per chunk of a sweep, under its write guard
    /// (a clock reading, the parameters), rather than once per cell.
    type At;
    fn at(&self) -> Self::At;
    /// Under the shard's write guard, `at` read under it: whether `cell` goes now (it is
    /// then removed under the same hold), or stays, with a lower bound on when it may go.
    fn judge(&self, cell: &C, at: &Self::At) -> Verdict;
    /// Told of each evicted cell after the guard is released, before it is dropped.
    fn evicted(&self, _cell: &C) {}
    /// Told after each sweep: keys evicted, keys left, the longest write-lock hold.
    fn swept(&self, _evicted: usize, _keys: usize, _longest: Duration) {}
    /// Whether a sweep now could evict anything, judged from `earliest`, a lower bound on the
    /// bounds [`judge`](Evict::judge) gave the cells kept. By default unknown: it could.
    fn may_evict_any(&self, _earliest: Nanos) -> bool {
        true
    }
}

/// What [`Evict::judge`] says of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Evict,
    /// Keep it; it cannot go before this time (`Nanos::MAX` if the rule keeps no bound).
    Keep(Nanos),
}

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
    /// The longest time the last sweep held a shard's write lock at once (it walks each shard
    /// in chunks, releasing the lock between them): the most any decision waited for it.
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
    pub(crate) fn record(&self, evicted: usize, took: Duration, longest_pause: Duration) {
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
    /// The smallest `cold_at` left in the shard (`u64::MAX` if none).
    pub(crate) min_cold_at: Nanos,
}

/// Whether state that turns cold at `cold_at` may be evicted (or counted as reclaimable) at a
/// reading `now` of a clock with [`Clock::max_skew`](crate::Clock::max_skew) `max_skew`:
/// `cold_at + max_skew <= now`. Any reading that happens after this one is at least
/// `now - max_skew >= cold_at`, so every later decision sees the state cold. Saturating: near
/// the end of time a key is kept rather than judged cold by a wrapped sum.
#[inline]
pub(crate) fn is_cold(cold_at: Nanos, now: Nanos, max_skew: Nanos) -> bool {
    cold_at.checked_add(max_skew).is_some_and(|t| t <= now)
}

/// The cold-time rule: the verdict on state that turns cold at `cold_at`, at a reading `now`
/// of a clock with `max_skew` (evict it if [`is_cold`]; else `cold_at` bounds when it may go).
#[inline]
pub(crate) fn verdict(cold_at: Nanos, now: Nanos, max_skew: Nanos) -> Verdict {
    if is_cold(cold_at, now, max_skew) {
        Verdict::Evict
    } else {
        Verdict::Keep(cold_at)
    }
}

/// One walk over (part of) a shard, run while holding that shard's write lock: drop every
/// cell `judge` evicts. `retain` walks cells and removes those for which `keep` says false (a
/// table's `retain`); the loom model drives it, with the cold-time rule, over its own table.
pub(crate) fn evict_by<C>(
    judge: impl Fn(&C) -> Verdict,
    retain: impl FnOnce(&mut dyn FnMut(&C) -> bool),
) -> ShardSweep {
    let mut evicted = 0usize;
    let mut min_cold_at = Nanos::MAX;
    retain(&mut |cell| match judge(cell) {
        Verdict::Evict => {
            evicted += 1;
            false
        }
        Verdict::Keep(at) => {
            min_cold_at = min_cold_at.min(at);
            true
        }
    });
    ShardSweep {
        evicted,
        min_cold_at,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Drives the cold-time rule over a plain `Vec` of cold times, the way a table's `retain`
    /// would.
    fn sweep_vec(v: &mut Vec<Nanos>, now: Nanos) -> ShardSweep {
        sweep_vec_skewed(v, now, 0)
    }

    fn sweep_vec_skewed(v: &mut Vec<Nanos>, now: Nanos, skew: Nanos) -> ShardSweep {
        evict_by(
            |&at: &Nanos| verdict(at, now, skew),
            |keep| v.retain(|c| keep(c)),
        )
    }

    #[test]
    fn cold_means_cold_at_most_now_exactly() {
        let mut v = vec![0, 99, 100, 101, 500];
        let s = sweep_vec(&mut v, 100);
        assert_eq!(s.evicted, 3); // 0, 99 and cold_at == now
        assert_eq!(s.min_cold_at, 101); // now + 1 stays
        assert_eq!(v, [101, 500]);

        let s = sweep_vec(&mut v, 101);
        assert_eq!((s.evicted, s.min_cold_at), (1, 500));
        let s = sweep_vec(&mut v, 499);
        assert_eq!((s.evicted, s.min_cold_at), (0, 500));
        let s = sweep_vec(&mut v, u64::MAX);
        assert_eq!((s.evicted, s.min_cold_at), (1, u64::MAX));
        assert!(v.is_empty());
    }

    #[test]
    fn a_skewed_clock_evicts_only_what_is_cold_by_its_skew() {
        let mut v = vec![0, 969, 970, 971, 1_000];
        let s = sweep_vec_skewed(&mut v, 1_000, 30);
        assert_eq!((s.evicted, s.min_cold_at), (3, 971)); // 0, 969 and 970 + 30 == now
        assert_eq!(v, [971, 1_000]);
        // Nothing is cold before the skew has passed since the origin.
        let mut v = vec![0];
        assert_eq!(sweep_vec_skewed(&mut v, 29, 30).evicted, 0);
        assert_eq!(sweep_vec_skewed(&mut v, 30, 30).evicted, 1);
    }

    #[test]
    fn coldness_saturates_instead_of_wrapping() {
        assert!(is_cold(970, 1_000, 30));
        assert!(!is_cold(971, 1_000, 30));
        assert!(
            !is_cold(u64::MAX - 10, u64::MAX, 30),
            "no wrap near the end of time"
        );
        assert!(is_cold(u64::MAX - 10, u64::MAX, 10));
        assert!(!is_cold(u64::MAX, u64::MAX, 1));
        assert!(is_cold(1_000, 1_000, 0));
        assert!(!is_cold(1_001, 1_000, 0));
    }

    #[test]
    fn counters_snapshot_reports_what_was_recorded() {
        let c = SweepCounters::default();
        c.record(3, Duration::from_micros(7), Duration::from_micros(2));
        c.record(4, Duration::from_micros(5), Duration::from_micros(1));
        let s = c.snapshot(9);
        assert_eq!((s.keys, s.sweeps, s.evicted), (9, 2, 7));
        assert_eq!(s.last_sweep, Duration::from_micros(5));
        assert_eq!(s.longest_pause, Duration::from_micros(1));
    }
}
