//! # tollgate
//!
//! An in-process, lock-free rate limiter built on GCRA (the generic cell rate algorithm): one
//! atomic word of state per limited thing, updated by a compare-and-swap loop.
//!
//! - [`RateLimiter`]: one shared limit. Non-blocking [`try_acquire`](RateLimiter::try_acquire),
//!   Guava-style blocking [`acquire`](RateLimiter::acquire), timeouts, reservations that can be
//!   cancelled, and a full [`Decision`] for rate-limit response headers.
//! - [`KeyedRateLimiter`]: one limit per key (user, IP, `(user, action)`) in a sharded map, the
//!   same method family taking the key first, per-call quotas, a background sweeper that evicts
//!   keys whose bucket is full again, and an exact [`max_keys`](KeyedRateLimiterBuilder::max_keys)
//!   cap.
//! - [`Quota`]: `count` per `period` with a burst, validated at construction.
//! - [`Clock`]: the default [`DefaultClock`] (the TSC where the kernel keeps time with it,
//!   else `Instant`), [`StdClock`] (`Instant`, ordered across threads), [`QuantaClock`], a
//!   [`ManualClock`] for deterministic tests, and (with the `tokio` feature) a `TokioClock`
//!   that follows `tokio::time::pause()`.
//!
//! ```
//! use tollgate::{Quota, RateLimiter};
//!
//! let limiter = RateLimiter::new(Quota::per_second(5).unwrap());
//! let granted = (0..10).filter(|_| limiter.try_acquire()).count();
//! assert_eq!(granted, 5); // the burst; then one more every 200 ms
//! ```
//!
//! ## Features
//! - `tokio` (default): async acquire (cancel-safe, FIFO, one wake-up per grant),
//!   `TokioClock`, and a tokio-task sweeper.
//!
//! ## Semantics
//! Time is `u64` nanoseconds; all arithmetic is integer and saturating or checked, so no input
//! can panic or wrap. A check of `n` permits computes `new_tat = max(tat, now) + n*T` and allows
//! iff `new_tat - tau <= now`; denials store nothing.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod cell;
mod clock;
mod direct;
mod gcra;
mod keyed;
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_api;
mod outcome;
mod quota;
mod sweeper;
mod sync;
mod wait;

/// Nanoseconds since a clock's origin: the unit of every decision.
pub type Nanos = u64;

#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{Clock, DefaultClock, ManualClock, QuantaClock, StdClock, TSC_MAX_SKEW};
pub use direct::{RateLimiter, RateLimiterBuilder};
pub use keyed::{
    DefaultKeyHasher, KeyedRateLimiter, KeyedRateLimiterBuilder, WhenFull, DEFAULT_SHARDS,
};
pub use outcome::{AcquireError, Decision, ThrottleReply};
pub use quota::{Quota, QuotaError};
pub use sweeper::SweepStats;
pub use wait::Reservation;

/// The README's code blocks, compiled and run as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
