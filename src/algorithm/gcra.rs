//! GCRA (the generic cell rate algorithm), the default: [`Gcra`], its pure decision rule
//! ([`rule`]: functions of `(tat, now, n, params)`), the holes cancelled reservations leave
//! ([`holes`]) and its [`Terms`] (parameters, verdicts). GCRA's one-word cell and the
//! contract that runs the rule on it are in `crate::cell::gcra`.
//!
//! **Leaky bucket and token bucket are this algorithm.** As meters they make the same
//! decisions: a bucket of capacity `b` leaking one permit per `T` (water level
//! `(tat - now) / T`), or holding `floor((tau - (tat - now)) / T)` tokens refilled one per `T`.

use std::time::Duration;

use super::rules::Terms;
use crate::decision::{AcquireError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::Nanos;

pub(crate) mod holes;
pub(crate) mod rule;

pub(crate) use rule::{GcraParams, Ticket, Verdict};

/// GCRA, the default algorithm: one `u64` per key (the theoretical arrival time), exact
/// burst and rate, reservations in arrival order that can be cancelled.
///
/// ```
/// use tollgate::{Gcra, Quota, RateLimiter};
/// let limiter: RateLimiter<Gcra> = RateLimiter::new(Quota::per_second(2).unwrap());
/// assert!(limiter.try_acquire() && limiter.try_acquire());
/// assert!(!limiter.try_acquire());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gcra;

impl Terms for Gcra {
    type Params = GcraParams;
    type Verdict = Verdict;
    type Ticket = Ticket;

    fn params(&self, quota: &Quota, now: Nanos) -> Result<GcraParams, QuotaError> {
        Ok(GcraParams::of(quota, 0, quota.t(), now))
    }

    fn next_params(
        &self,
        old: &GcraParams,
        quota: &Quota,
        now: Nanos,
    ) -> Result<GcraParams, QuotaError> {
        Ok(GcraParams::of(
            quota,
            old.generation.wrapping_add(1),
            old.t,
            now,
        ))
    }

    /// Every quota: a [`Quota`] guarantees `T >= 1` and `T * b <= MAX_NANOS`, all GCRA needs.
    fn call_params(&self, base: &GcraParams, quota: &Quota) -> Result<GcraParams, QuotaError> {
        // The key's state stays in the limiter's generation; only T and b are the call's.
        Ok(GcraParams {
            change: base.change,
            ..GcraParams::new(quota.t(), quota.burst(), base.generation, quota.t(), 0)
        })
    }

    fn inert(base: &GcraParams) -> GcraParams {
        // Burst 0: `n >= 1` exceeds it before anything is computed or stored.
        GcraParams {
            burst: 0,
            tau: 0,
            ..*base
        }
    }

    #[inline(always)]
    fn allowed(v: &Verdict) -> bool {
        v.allowed()
    }

    #[inline]
    fn result(v: &Verdict, n: u64) -> Result<(), AcquireError> {
        v.into_result(n)
    }

    #[inline(always)]
    fn decision(v: &Verdict, now: Nanos) -> Decision {
        v.decision(now)
    }

    fn limit(p: &GcraParams) -> u64 {
        p.burst
    }

    /// The tolerance ([`Quota::tolerance`]): a full burst comes back `burst * T` after it
    /// was used up.
    fn limit_window(quota: &Quota) -> Duration {
        quota.tolerance()
    }
}
