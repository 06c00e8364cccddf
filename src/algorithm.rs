//! The algorithms' pure rules: every decision an algorithm makes is a function here of the
//! key's state, the parameters and `now`, with no atomics and no lock; this module imports
//! nothing from `crate::cell`, `crate::sync` or anything above them. What is here: each
//! algorithm's public type ([`Gcra`], [`FixedWindow`], [`SlidingWindow`], [`WeightedWindow`],
//! [`SlidingLog`]), its parameters and their validation from a [`Quota`], its decision rule,
//! its [`Adjust`] rule, its verdicts and tickets ([`rules::Terms`]: the pure half of the
//! per-algorithm contract), and what every rule shares ([`Booking`], [`ParamSource`],
//! [`Words`]).
//!
//! The cells that hold a key's state, and the contract that runs these rules on them
//! (`crate::cell::rules::Rules`, the trait every limiter is written over through
//! `Algorithm`), are one layer up, in `crate::cell`. Adding an algorithm takes: a module here
//! with its public type, its parameters, its decision and adjust rules (pure functions of the
//! state, the parameters and `now`) and its [`rules::Terms`] impl, with tests beside it; its
//! `Rules` impl in `crate::cell` (module docs there); its public type re-exported here and in
//! `lib.rs`; and, to run it on Redis, a `RedisAlgorithm` impl and its Lua script in
//! `crate::redis`. The limiters, the method family (`try_acquire`, `check`, `peek`, blocking
//! and async `acquire`, timeouts), the maps (`crate::store`), the sweeper and the HTTP layer
//! need nothing new.

use std::fmt;
use std::time::Duration;

use crate::decision::{AcquireError, Decision};
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

/// The outcome of a decision, the same for every algorithm (its verdict adds the numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Granted (and recorded).
    Allow,
    /// `n = 0`: allowed, nothing recorded.
    Peek,
    /// Not yet; the same request is granted if asked again after this many ns (the windows:
    /// if nothing else is admitted meanwhile).
    Deny { retry_after: Nanos },
    /// `n` above the burst (the windows' limit): never grantable as one request.
    ExceedsBurst,
    /// Never grantable: GCRA's schedule would pass [`MAX_NANOS`](crate::MAX_NANOS), or a
    /// window's clock is past it.
    Never,
}

impl Kind {
    #[inline(always)]
    pub(crate) fn allowed(self) -> bool {
        matches!(self, Kind::Allow | Kind::Peek)
    }

    /// The outcome as the result of a non-waiting acquire of `n` under `burst`.
    #[inline]
    pub(crate) fn result(self, n: u64, burst: u64) -> Result<(), AcquireError> {
        match self {
            Kind::Allow | Kind::Peek => Ok(()),
            Kind::Deny { retry_after } => Err(AcquireError::RateLimited {
                retry_after: Duration::from_nanos(retry_after),
            }),
            Kind::ExceedsBurst => Err(AcquireError::ExceedsBurst {
                requested: n,
                burst,
            }),
            Kind::Never => Err(AcquireError::Unrepresentable { requested: n }),
        }
    }
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

    /// The pure half of the per-algorithm contract (sealed: this module is private): how the
    /// algorithm reads a quota (its parameters) and what its verdicts say. The half that runs
    /// on a key's cell is `crate::cell::rules::Rules`, which extends this one.
    pub trait Terms: Clone + Send + Sync + fmt::Debug + 'static {
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

        /// Whether the verdict granted the permits.
        fn allowed(v: &Self::Verdict) -> bool;
        /// The verdict as a non-waiting acquire's result.
        fn result(v: &Self::Verdict, n: u64) -> Result<(), AcquireError>;
        /// The verdict's full [`Decision`].
        fn decision(v: &Self::Verdict, now: Nanos) -> Decision;
        /// The `limit` a [`Decision`] reports under `p`.
        fn limit(p: &Self::Params) -> u64;

        /// The window `quota`'s limit refers to: how long a full limit takes to come back
        /// after it was used up (`Algorithm::window`, its public face). The window
        /// algorithms' window `W`; GCRA overrides it with the tolerance.
        fn limit_window(quota: &Quota) -> Duration {
            quota.period()
        }
    }
}

/// What the algorithms' unit tests share.
#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use crate::{Algorithm, KeyedRateLimiter, ManualClock, Quota, RateLimiter};

    /// A direct and a keyed limiter of `alg` on one clock, for checking that both decide
    /// alike.
    pub(crate) fn direct_and_keyed<A: Algorithm + Clone>(
        q: Quota,
        clock: &ManualClock,
        alg: A,
    ) -> (RateLimiter<A>, KeyedRateLimiter<u8, A>) {
        let direct = RateLimiter::builder(q)
            .clock(clock.clone())
            .algorithm(alg.clone())
            .unwrap()
            .build();
        let keyed = KeyedRateLimiter::<u8>::builder(q)
            .clock(clock.clone())
            .algorithm(alg)
            .unwrap()
            .build();
        (direct, keyed)
    }
}
