//! [`LeasedRateLimiter`]: one hot limit served past one cache line, with a bounded error.

use std::fmt;
use std::num::NonZeroU32;

use crossbeam_utils::CachePadded;

use crate::cell::lease::LeaseCell;
use crate::RateLimiter;

/// A [`RateLimiter`] whose permits are taken from it in leases of `L` per shard (one shard per
/// core by default), so that most calls touch only their own shard's cache line instead of
/// the one shared word. An opt-in for one limit hammered by many cores: it trades exactness
/// for throughput, within a stated bound.
///
/// **The bound.** Every permit it admits was granted by the inner limiter when its lease was
/// taken; a lease only moves grants later. In any window it admits at most what the inner
/// limiter grants in that window plus [`max_over_admission`](Self::max_over_admission) =
/// `shards * (L - 1)` permits (those leased before the window and used in it). Symmetrically,
/// up to that many permits can sit unused in leases, so a call can be refused while another
/// shard still holds permits. `L = 1` is the plain limiter. Why and when it pays:
/// `docs/design.md`, "Past one cache line" (modelled 3.6-3.9x one core's throughput at 4
/// cores with `L = 64`, where one shared word stays at 0.5-0.8x from 2 cores on). A call
/// served from its shard reads no clock: a leased permit does not expire.
///
/// A thread keeps one shard (threads are dealt to shards round robin); a shard takes a new lease only when it is empty,
/// one thread at a time (others meanwhile ask the inner limiter for one permit each). `L` is
/// capped at the inner quota's burst. Only `try_acquire` is leased: use
/// [`inner`](Self::inner) for everything else (its decisions do not see the leased permits).
///
/// ```
/// use std::num::NonZeroU32;
/// use tollgate::{LeasedRateLimiter, ManualClock, Quota, RateLimiter};
///
/// let inner = RateLimiter::builder(Quota::per_second(100).unwrap())
///     .clock(ManualClock::new())
///     .build();
/// let limiter = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(8).unwrap(), 4);
/// assert_eq!(limiter.max_over_admission(), 4 * 7);
/// // All 100 permits of the burst, and no more: one thread uses one shard's leases.
/// let granted = (0..200).filter(|_| limiter.try_acquire()).count();
/// assert_eq!(granted, 100);
/// ```
pub struct LeasedRateLimiter {
    inner: RateLimiter,
    lease: u64,
    shards: Box<[CachePadded<LeaseCell>]>,
}

impl LeasedRateLimiter {
    /// Leases of `lease` permits, one shard per available core
    /// ([`std::thread::available_parallelism`], 1 if unknown).
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_second(1_000_000).unwrap());
    /// let limiter = LeasedRateLimiter::new(inner, NonZeroU32::new(64).unwrap());
    /// assert!(limiter.try_acquire());
    /// ```
    #[must_use]
    pub fn new(inner: RateLimiter, lease: NonZeroU32) -> LeasedRateLimiter {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        LeasedRateLimiter::with_shards(inner, lease, cores)
    }

    /// Leases of `lease` permits over `shards` shards (at least 1). Fewer shards than cores
    /// share a shard's line between cores; more lower nothing but raise the bound.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_second(1_000).unwrap());
    /// let limiter = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(10).unwrap(), 2);
    /// assert_eq!((limiter.lease(), limiter.shards()), (10, 2));
    /// ```
    #[must_use]
    pub fn with_shards(inner: RateLimiter, lease: NonZeroU32, shards: usize) -> LeasedRateLimiter {
        let lease = u64::from(lease.get()).min(inner.quota().burst());
        LeasedRateLimiter {
            inner,
            lease,
            shards: (0..shards.max(1))
                .map(|_| CachePadded::new(LeaseCell::default()))
                .collect(),
        }
    }

    /// Takes one permit if available now: from this thread's shard's lease, else by taking a
    /// new lease (or, at the limit's edge, a single permit) from the inner limiter. Never waits.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_hour(3).unwrap());
    /// let limiter = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(2).unwrap(), 1);
    /// assert!(limiter.try_acquire() && limiter.try_acquire() && limiter.try_acquire());
    /// assert!(!limiter.try_acquire());
    /// ```
    #[inline]
    #[must_use = "a permit may have been denied"]
    pub fn try_acquire(&self) -> bool {
        self.try_acquire_on(shard_of_thread(self.shards.len()))
    }

    /// `try_acquire` on shard `i` (the tests pick shards by hand).
    #[inline]
    pub(crate) fn try_acquire_on(&self, i: usize) -> bool {
        let inner = &self.inner;
        let lease = self.lease;
        self.shards[i].acquire(
            || {
                if inner.try_acquire_n(lease).is_ok() {
                    lease
                } else {
                    // At the limit's edge a whole lease may not fit: take what one call needs.
                    u64::from(inner.try_acquire())
                }
            },
            || inner.try_acquire(),
        )
    }

    /// The most permits it can admit in any window beyond what the inner limiter grants in it:
    /// `shards * (lease - 1)`.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_second(100).unwrap());
    /// let limiter = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(8).unwrap(), 16);
    /// assert_eq!(limiter.max_over_admission(), 16 * 7);
    /// ```
    #[must_use]
    pub fn max_over_admission(&self) -> u64 {
        (self.shards.len() as u64).saturating_mul(self.lease - 1)
    }

    /// Permits per lease (the `lease` given, capped at the burst).
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_second(5).unwrap());
    /// assert_eq!(LeasedRateLimiter::new(inner, NonZeroU32::new(64).unwrap()).lease(), 5);
    /// ```
    #[must_use]
    pub fn lease(&self) -> u64 {
        self.lease
    }

    /// The number of shards.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_second(5).unwrap());
    /// let one = NonZeroU32::new(1).unwrap();
    /// assert_eq!(LeasedRateLimiter::with_shards(inner, one, 0).shards(), 1);
    /// ```
    #[must_use]
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Unused leased permits now, over all shards (at most
    /// [`max_over_admission`](Self::max_over_admission)).
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_hour(100).unwrap());
    /// let limiter = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(8).unwrap(), 1);
    /// assert!(limiter.try_acquire());
    /// assert_eq!(limiter.held(), 7);
    /// ```
    #[must_use]
    pub fn held(&self) -> u64 {
        self.shards.iter().map(|s| s.held()).sum()
    }

    /// The shared limiter the leases are taken from.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use tollgate::{LeasedRateLimiter, Quota, RateLimiter};
    ///
    /// let inner = RateLimiter::new(Quota::per_hour(10).unwrap());
    /// let limiter = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(4).unwrap(), 1);
    /// assert!(limiter.try_acquire());
    /// assert_eq!(limiter.inner().peek().remaining, 6); // one lease of 4 taken
    /// ```
    #[must_use]
    pub fn inner(&self) -> &RateLimiter {
        &self.inner
    }
}

impl fmt::Debug for LeasedRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedRateLimiter")
            .field("inner", &self.inner)
            .field("lease", &self.lease)
            .field("shards", &self.shards.len())
            .field("held", &self.held())
            .finish()
    }
}

/// This thread's shard: threads in the order they first take a permit, round robin.
#[inline]
fn shard_of_thread(shards: usize) -> usize {
    crate::sync::thread_index() % shards
}

#[cfg(all(test, not(loom)))]
mod tests;
