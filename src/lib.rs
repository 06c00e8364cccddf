//! # tollgate
//!
//! An in-process, lock-free rate limiter: one atomic word of state per limited thing (GCRA,
//! the generic cell rate algorithm, by default), updated by a compare-and-swap loop.
//!
//! - [`RateLimiter`]: one shared limit. Non-blocking [`try_acquire`](RateLimiter::try_acquire),
//!   Guava-style blocking [`acquire`](RateLimiter::acquire), timeouts, reservations that can be
//!   cancelled, and a full [`Decision`] for rate-limit response headers.
//! - [`KeyedRateLimiter`]: one limit per key (user, IP, `(user, action)`) in a sharded map, the
//!   same method family taking the key first, per-call quotas, a background sweeper that evicts
//!   keys whose state carries no information any more, and an exact
//!   [`max_keys`](KeyedRateLimiterBuilder::max_keys) cap.
//! - [`all_or_none`]: take from several limits together (per user *and* global), or from none.
//! - [`Quota`]: `count` per `period` with a burst, validated at construction.
//! - [`Algorithm`]: what a limiter runs; [`Gcra`] by default (also the leaky and the token
//!   bucket), or [`FixedWindow`], [`SlidingWindow`], [`WeightedWindow`], [`SlidingLog`] through
//!   the builders' `algorithm` (README: "Choosing an algorithm").
//! - [`SmoothRateLimiter`]: Guava's `RateLimiter` (pay later, bursty or warming up), exact to
//!   Guava's microseconds, lock-free.
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
//! - `serde`: `Serialize`/`Deserialize` for [`Quota`] (as `{ count, period, burst }`, validated
//!   on the way in).
//! - `redis`: `redis::RedisRateLimiter`, the same algorithms shared across processes and
//!   machines through Redis 7+ or a Redis Cluster (one Lua script per decision, on the server's
//!   clock). Adds the `redis` client crate and tokio networking; needs Rust 1.88.
//! - `tower`: the `http` module, a tower `Layer` for axum, hyper and tonic (turns on `tokio`;
//!   adds the small `http`, `tower-layer`, `tower-service`, `bytes`, `pin-project-lite`).
//! - `axum`: axum's `ConnectInfo<SocketAddr>` as the peer address of the HTTP key extractors
//!   (adds axum without default features; MSRV of current hyper-util: 1.85).
//!
//! ## Semantics
//! Time is `u64` nanoseconds since the clock's origin, up to [`MAX_NANOS`] (about 146 years);
//! all arithmetic is integer and saturating or checked, so no input can panic or wrap. A GCRA
//! check of `n` permits computes `new_tat = max(tat, now) + n*T` and allows iff
//! `new_tat - tau <= now`; denials store nothing.

#![deny(missing_docs)]
// Every `unsafe` block states why it is sound (`// SAFETY:`), and an `unsafe fn`'s body is
// not one implicit block: each operation in it is marked and argued.
#![deny(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod algorithm;
mod cell;
mod clock;
mod compose;
mod direct;
mod engine;
#[cfg(feature = "tower")]
pub mod http;
mod keyed;
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_api;
mod outcome;
mod quota;
#[cfg(feature = "redis")]
pub mod redis;
mod smooth;
mod store;
mod sweeper;
mod sync;
mod wait;

/// Nanoseconds since a clock's origin: the unit of every decision.
pub type Nanos = u64;

pub use algorithm::{Algorithm, Gcra};
pub use algorithm::{FixedWindow, SlidingLog, SlidingWindow, WeightedWindow};
#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{Clock, DefaultClock, ManualClock, QuantaClock, StdClock, TSC_MAX_SKEW};
pub use compose::all_or_none;
pub use direct::{RateLimiter, RateLimiterBuilder};
pub use keyed::{DefaultKeyHasher, KeyedRateLimiter, KeyedRateLimiterBuilder, DEFAULT_SHARDS};
pub use outcome::{AcquireError, Decision, ThrottleReply};
pub use quota::{Quota, QuotaError, MAX_NANOS};
#[cfg(feature = "redis")]
pub use redis::RedisRateLimiter;
#[cfg(loom)]
#[doc(hidden)]
pub use smooth::loom_api::SmoothTicket;
pub use smooth::{SmoothConfigError, SmoothRateLimiter, SmoothRateLimiterBuilder};
pub use store::keyed::WhenFull;
pub use store::sweep::SweepStats;
pub use wait::Reservation;

/// The README's code blocks, compiled and run as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
