//! The lock-free parts, and the contract that runs each algorithm's pure rule on its cell:
//! every CAS loop and every lock an algorithm's state uses lives here, on atomics from
//! `crate::sync` (loom's under `--cfg loom`). The rules themselves (functions of the state,
//! the parameters and `now`) are in `crate::algorithm`, which imports nothing from here.
//!
//! - [`rules::Rules`]: the per-algorithm contract the engine calls (decide, book, cancel,
//!   adjust, migrate, cold time), over the pure half `crate::algorithm::rules::Terms`
//!   (parameters, verdicts); [`Algorithm`], its public face;
//! - [`gcra`]: GCRA's one-word cell (decisions, reservations, cancels with holes, lazy quota
//!   re-scaling) and GCRA's contract;
//! - [`params`]: the sequence lock holding an algorithm's parameters;
//! - [`word`]: a state packed in one atomic word (64 or 128 bits) and its CAS loop, with the
//!   contract of the fixed window and of the weighted window counter on it (one macro, run on
//!   each rule's module);
//! - [`locked`]: a state under a mutex held only for one decision, with [`sliding`]: the
//!   contract of the sliding window and the sliding log on it;
//! - [`semaphore`]: a concurrency limit's permits (one word, lock-free uncontended) and its
//!   FIFO waiter queue under a mutex;
//! - [`lease`]: one shard of a leased limiter (permits taken ahead, used on the core's own
//!   line).
//!
//! Adding an algorithm takes: its rule in `crate::algorithm` (module docs there); its
//! [`rules::Rules`] impl in a module here, on a cell already here (a word under CAS: one
//! `word_rules!` line in [`word`]; a locked state) or a new one with its loom model in
//! `loom-tests/`. The limiters, the method family, the maps (`crate::store`), the sweeper and
//! the HTTP layer need nothing new.

use std::time::Duration;

use crate::algorithm::rules::Terms;
use crate::quota::Quota;

pub(crate) mod gcra;
pub(crate) mod lease;
pub(crate) mod params;
pub(crate) mod semaphore;

pub(crate) mod locked;
pub(crate) mod sliding;
pub(crate) mod word;

/// A rate-limiting algorithm a [`RateLimiter`](crate::RateLimiter) or
/// [`KeyedRateLimiter`](crate::KeyedRateLimiter) can run. Sealed: the crate provides the
/// implementations: [`Gcra`](crate::Gcra) (the default; also the leaky bucket and the token
/// bucket), [`FixedWindow`](crate::FixedWindow), [`SlidingWindow`](crate::SlidingWindow),
/// [`WeightedWindow`](crate::WeightedWindow) and [`SlidingLog`](crate::SlidingLog).
///
/// ```
/// use tollgate::{Gcra, KeyedRateLimiter, Quota, RateLimiter};
///
/// let direct: RateLimiter<Gcra> = RateLimiter::new(Quota::per_second(5).unwrap());
/// let keyed: KeyedRateLimiter<u64, Gcra> = KeyedRateLimiter::new(Quota::per_second(5).unwrap());
/// assert!(direct.try_acquire() && keyed.try_acquire(&1));
/// ```
pub trait Algorithm: rules::Rules {
    /// The window `quota`'s limit refers to under this algorithm: how long a full limit takes
    /// to come back after it was used up. [`Gcra`](crate::Gcra): the tolerance `burst * T`
    /// ([`Quota::tolerance`]); the window algorithms: their window `W` ([`Quota::period`]).
    /// What a backend advertises as the limit's window (the HTTP layer's
    /// `Backend::window`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Algorithm, Gcra, Quota, SlidingLog};
    ///
    /// let q = Quota::per_minute(60).unwrap().with_burst(10).unwrap();
    /// assert_eq!(Gcra::window(&q), Duration::from_secs(10)); // 10 permits, one a second
    /// assert_eq!(SlidingLog::window(&q), Duration::from_secs(60));
    /// ```
    fn window(quota: &Quota) -> Duration
    where
        Self: Sized,
    {
        <Self as Terms>::limit_window(quota)
    }
}

impl<A: rules::Rules> Algorithm for A {}

pub(crate) mod rules {
    use super::params::Live;
    use crate::algorithm::rules::Terms;
    use crate::algorithm::{Adjust, Booking, ParamSource};
    use crate::decision::AcquireError;
    use crate::Nanos;

    /// The per-algorithm contract (sealed: this module is private): the algorithm's pure
    /// [`Terms`] run on one key's cell.
    pub trait Rules: Terms {
        /// One key's state. `Default` is a fresh key.
        type Cell: Default + Send + Sync + 'static;

        /// Decides `n` permits at `now` and records them if granted; `n = 0` looks only.
        /// `keyed`: the cell is a keyed table's, one of many and so often not in cache, where
        /// a rule may decide in a form that does not branch on the state (a mispredicted
        /// branch waits for the cache miss before starting over); the same decisions either
        /// way. A constant at every call, so the other form is compiled out.
        fn check(
            &self,
            cell: &Self::Cell,
            now: Nanos,
            n: u64,
            keyed: bool,
            p: &impl ParamSource<Self::Params>,
        ) -> Self::Verdict;

        /// Takes `n` permits now, or books them for later if the algorithm can, unless the
        /// wait exceeds `max_wait`.
        fn book(
            &self,
            cell: &Self::Cell,
            now: Nanos,
            n: u64,
            p: &impl ParamSource<Self::Params>,
            max_wait: Option<Nanos>,
        ) -> Result<Booking<Self::Ticket>, AcquireError>;
        /// Gives a booking back (the permits were not used).
        fn cancel(
            &self,
            cell: &Self::Cell,
            ticket: &Self::Ticket,
            now: Nanos,
            p: &impl ParamSource<Self::Params>,
        );
        /// Applies `op` to the cell at `now`, as one CAS step like a decision (so exact under
        /// concurrency), and reports the state it left: `[look, one]`, the verdicts of a look
        /// (`n = 0`) and of a check of one permit, neither taking anything.
        fn adjust(
            &self,
            cell: &Self::Cell,
            now: Nanos,
            op: Adjust,
            p: &impl ParamSource<Self::Params>,
        ) -> [Self::Verdict; 2];
        /// Brings a cell up to the parameters in force after `set_quota` (run on every
        /// tracked cell by the quota change itself).
        fn migrate(&self, cell: &Self::Cell, p: &impl ParamSource<Self::Params>);

        /// From this instant on the cell decides exactly like a fresh one, so evicting it
        /// loses nothing. `p` must be loaded in full ([`ParamSource::load_full`]): a cell a
        /// quota generation behind is judged with words a decision does not read.
        fn cold_at(&self, cell: &Self::Cell, p: &Self::Params) -> Nanos;
        /// Whether the cell holds nothing a fresh cell does not (a decision on a scratch cell
        /// that leaves it fresh needs no insert).
        fn is_fresh(&self, cell: &Self::Cell) -> bool;

        /// [`check`](Rules::check) of one permit, reduced to whether it was granted (the same
        /// decision, recorded the same way), on the limiter's own parameters: an algorithm may
        /// read fewer of their words for it (GCRA: [`Live::first`]).
        #[inline(always)]
        fn allows(
            &self,
            cell: &Self::Cell,
            now: Nanos,
            keyed: bool,
            p: &Live<'_, Self::Params>,
        ) -> bool {
            Self::allowed(&self.check(cell, now, 1, keyed, p))
        }
    }

    /// The [`Rules`] methods every window algorithm shares, inside its `impl Rules`: waiting
    /// by deciding again (nothing booked, so nothing to cancel).
    macro_rules! window_booking {
        ($params:ty) => {
            fn book(
                &self,
                cell: &Self::Cell,
                now: Nanos,
                n: u64,
                p: &impl ParamSource<$params>,
                max_wait: Option<Nanos>,
            ) -> Result<Booking<()>, AcquireError> {
                self.check(cell, now, n, false, p).booking(n, max_wait)
            }

            fn cancel(&self, _: &Self::Cell, _: &(), _: Nanos, _: &impl ParamSource<$params>) {}
        };
    }

    pub(crate) use window_booking;
}
