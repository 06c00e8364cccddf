//! The algorithms a limiter can run, behind one small trait.
//!
//! Every limiter (direct or keyed) is written once over [`Algorithm`]: the method family
//! (`try_acquire`, `check`, `peek`, blocking and async `acquire`, timeouts) only asks an
//! algorithm to decide on one key's cell, to book permits ahead if it can (GCRA), to say when a
//! cell has become equal to a fresh one (the sweeper), and to turn its verdict into a
//! [`Decision`]. Adding an algorithm takes: a module here with its decision rule (pure
//! functions of the state, the parameters and `now`) and its [`rules::Rules`] impl, with
//! tests beside it; a cell for its state in `crate::cell` (a word under CAS or a locked state
//! already there, or a new one with its loom model in `loom-tests/`); its public type
//! re-exported here and in `lib.rs`; and, to run it on Redis, a `RedisAlgorithm` impl and its
//! Lua script in `crate::redis`. The limiters, the method family, the maps (`crate::store`),
//! the sweeper and the HTTP layer need nothing new.

use std::fmt;
use std::time::Duration;

use crate::outcome::{AcquireError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::Nanos;

pub(crate) use adjust::Adjust;

pub(crate) mod adjust;
pub(crate) mod gcra;

pub(crate) mod fixed_window;
pub(crate) mod sliding;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod weighted;
pub(crate) mod window;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use sliding_log::SlidingLog;
pub use sliding_window::SlidingWindow;
pub use weighted::WeightedWindow;

/// A rate-limiting algorithm a [`RateLimiter`](crate::RateLimiter) or
/// [`KeyedRateLimiter`](crate::KeyedRateLimiter) can run. Sealed: the crate provides the
/// implementations: [`Gcra`] (the default; also the leaky bucket and the token bucket),
/// [`FixedWindow`], [`SlidingWindow`], [`WeightedWindow`] and [`SlidingLog`].
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
    /// to come back after it was used up. [`Gcra`]: the tolerance `burst * T`
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
        <Self as rules::Rules>::limit_window(quota)
    }
}

impl<A: rules::Rules> Algorithm for A {}

/// What a booking attempt did (the step under every waiting method).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Booking<T> {
    /// Granted now; nothing to wait for and nothing to cancel.
    Now,
    /// Booked (stored) for `ready_at`, which may be now; `ticket` cancels it.
    Booked { ticket: T, ready_at: Nanos },
    /// Not now, nothing stored: decide again after this long (algorithms that cannot book
    /// ahead). Never more than the caller's `max_wait`.
    Retry(Nanos),
}

/// Where an algorithm's parameters come from on each attempt: the limiter's sequence lock, or a
/// per-call quota layered on it. Read again on every CAS retry (see `cell::gcra`).
pub trait ParamSource<P> {
    /// What a decision needs: the parameters' [hot words](Words::HOT).
    fn load(&self) -> P;
    /// Every word, for the rare state that needs the rest (GCRA: a cell a quota generation
    /// behind).
    fn load_full(&self) -> P {
        self.load()
    }
}

/// A closure gives the parameters in full (tests, and fixed parameters).
impl<P, F: Fn() -> P> ParamSource<P> for F {
    #[inline(always)]
    fn load(&self) -> P {
        self()
    }
}

/// Parameters stored in the limiter's sequence lock, as a fixed number of words.
pub trait Words: Copy {
    /// How many of the leading words a decision reads ([`ParamSource::load`]); the others read
    /// as 0 there and are loaded only by [`ParamSource::load_full`]. All of them by default.
    const HOT: usize = PARAM_WORDS;
    fn to_words(&self) -> [u64; PARAM_WORDS];
    fn from_words(w: [u64; PARAM_WORDS]) -> Self;
}

/// How many `u64`s any algorithm's parameters take in the sequence lock (with its sequence
/// word, one cache line).
pub const PARAM_WORDS: usize = 7;

pub(crate) mod rules {
    use super::*;

    /// The per-algorithm contract (sealed: this module is private).
    pub trait Rules: Clone + Send + Sync + fmt::Debug + 'static {
        /// One key's state. `Default` is a fresh key.
        type Cell: Default + Send + Sync + 'static;
        /// The algorithm's parameters, validated from a [`Quota`].
        type Params: Words + Send + Sync + fmt::Debug + 'static;
        /// What one decision found, before it becomes a bool, a `Result` or a [`Decision`].
        type Verdict: Copy + fmt::Debug;
        /// A booked reservation's receipt, for cancelling it.
        type Ticket: Copy + Send + Sync + fmt::Debug + 'static;

        /// The parameters for `quota` when a limiter is built at `now`.
        fn params(&self, quota: &Quota, now: Nanos) -> Result<Self::Params, QuotaError>;
        /// The parameters replacing `old` by `quota` at `now` (`set_quota`).
        fn next_params(
            &self,
            old: &Self::Params,
            quota: &Quota,
            now: Nanos,
        ) -> Result<Self::Params, QuotaError>;
        /// The parameters of one call made under `quota` on a limiter whose own are `base`
        /// (`check_with`, `throttle`), or why the algorithm cannot run `quota` there: a call
        /// is decided under its own quota or refused, never under another limit. The fixed
        /// window's answer depends on `base` (its word's layout), so it may change with a
        /// concurrent `set_quota` between two loads of one decision.
        fn call_params(
            &self,
            base: &Self::Params,
            quota: &Quota,
        ) -> Result<Self::Params, QuotaError>;
        /// `base` with nothing grantable: under these a decision stores nothing (`n = 0`
        /// looks, `n >= 1` exceeds the limit). What a call decides on while its quota is
        /// refused (`call_params` failed on a reload after a concurrent `set_quota`); the
        /// call then returns the error.
        fn inert(base: &Self::Params) -> Self::Params;

        /// Decides `n` permits at `now` and records them if granted; `n = 0` looks only.
        fn check(
            &self,
            cell: &Self::Cell,
            now: Nanos,
            n: u64,
            p: &impl ParamSource<Self::Params>,
        ) -> Self::Verdict;
        /// [`check`](Rules::check) on a keyed table's cell, one of many and so often not in
        /// cache: a rule may decide there in a form that does not branch on the state (a
        /// mispredicted branch waits for the cache miss before starting over). The same
        /// decisions as `check`; by default `check` itself.
        #[inline(always)]
        fn check_keyed(
            &self,
            cell: &Self::Cell,
            now: Nanos,
            n: u64,
            p: &impl ParamSource<Self::Params>,
        ) -> Self::Verdict {
            self.check(cell, now, n, p)
        }
        /// Whether the verdict granted the permits.
        fn allowed(v: &Self::Verdict) -> bool;
        /// The verdict as a non-waiting acquire's result.
        fn result(v: &Self::Verdict, n: u64) -> Result<(), AcquireError>;
        /// The verdict's full [`Decision`].
        fn decision(v: &Self::Verdict, now: Nanos) -> Decision;

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
        /// The `limit` a [`Decision`] reports under `p`.
        fn limit(p: &Self::Params) -> u64;

        /// The window `quota`'s limit refers to: how long a full limit takes to come back
        /// after it was used up ([`Algorithm::window`], its public face). The window
        /// algorithms' window `W`; GCRA overrides it with the tolerance.
        fn limit_window(quota: &Quota) -> Duration {
            quota.period()
        }
    }
}
