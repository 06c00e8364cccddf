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
//! - [`Clock`]: the default [`StdClock`], a [`ManualClock`] for deterministic tests, and (with
//!   the `tokio` feature) a `TokioClock` that follows `tokio::time::pause()`.
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
//! - `quanta`: `QuantaClock`, a cheaper but cross-core-unordered TSC clock.
//! - `tower`: the `http` module, a tower `Layer` for axum, hyper and tonic (turns on `tokio`;
//!   adds the small `http`, `tower-layer`, `tower-service`, `bytes`, `pin-project-lite`).
//! - `axum`: axum's `ConnectInfo<SocketAddr>` as the peer address of the HTTP key extractors
//!   (adds axum without default features; MSRV of current hyper-util: 1.85).
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
#[cfg(feature = "tower")]
pub mod http;
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

#[cfg(feature = "quanta")]
pub use clock::QuantaClock;
#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{Clock, ManualClock, StdClock};
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
