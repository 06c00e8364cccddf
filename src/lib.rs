//! # tollgate
//!
//! An in-process, lock-free rate limiter: one atomic word of state per limited thing (GCRA,
//! the generic cell rate algorithm, by default), updated by a compare-and-swap loop.
//!
//! - [`RateLimiter`]: one shared limit. Non-blocking [`try_acquire`](RateLimiter::try_acquire),
//!   Guava-style blocking [`acquire`](RateLimiter::acquire), timeouts, reservations that can be
//!   cancelled, and a full [`Decision`] for rate-limit response headers: the whole
//!   [method grid](#the-method-grid).
//! - [`KeyedRateLimiter`]: one limit per key (user, IP, `(user, action)`) in a sharded map, the
//!   same method family taking the key first, per-call quotas, a background sweeper that evicts
//!   keys whose state carries no information any more, and an exact
//!   [`max_keys`](KeyedRateLimiterBuilder::max_keys) cap.
//! - [`all_or_none`]: take from several limits together (per user *and* global), or from none;
//!   [`all_or_none_async`] mixes backends (in-process, Redis, your own) through [`Hold`].
//! - [`ConcurrencyLimiter`] and [`KeyedConcurrencyLimiter`]: at most `limit` in flight at once
//!   (per key), permits as RAII guards, FIFO waiters, cancel-safe, idle keys swept
//!   ([guide: concurrency limits](guide::concurrency)).
//! - [`Quota`]: `count` per `period` with a burst, validated at construction.
//! - [`Algorithm`]: what a limiter runs; [`Gcra`] by default (also the leaky and the token
//!   bucket), or [`FixedWindow`], [`SlidingWindow`], [`WeightedWindow`], [`SlidingLog`] through
//!   the builders' `algorithm` ([guide: choosing an algorithm](guide::algorithms)).
//! - [`SmoothRateLimiter`]: Guava's `RateLimiter` (pay later, bursty or warming up), exact to
//!   Guava's microseconds, lock-free.
//! - [`Clock`]: the default [`DefaultClock`] (the TSC where the kernel keeps time with it,
//!   else `Instant`), [`StdClock`] (`Instant`, ordered across threads), [`QuantaClock`], a
//!   [`CoarseClock`] (a cached reading refreshed by a thread: the cheapest read, bursts at the
//!   scale of its tick), a [`ManualClock`] for deterministic tests, and (with the `tokio` feature) a `TokioClock`
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
//! The [`guide`] explains each part in a page of its own (quotas and the method family,
//! per-key limits, algorithms, async, HTTP, Redis, Guava, the exact rules, clocks, testing),
//! and holds the design document.
//!
#![doc = include_str!("../docs/guide/method-grid.md")]
//!
//! The same name means the same thing on every limiter:
//! - `n = 0` always succeeds at once, takes nothing and never waits: `Ok(())`,
//!   `Ok(Duration::ZERO)`, a reservation ready now; `check_n(0)` is `peek`.
//! - A refusal is an [`AcquireError`]: `RateLimited { retry_after }` (not now),
//!   `ExceedsBurst { requested, burst }` (never at once), `Unrepresentable { requested }`
//!   (past the end of the limiter's time). Configuration errors stay per builder
//!   ([`QuotaError`], [`SmoothConfigError`]).
//! - A limit's *window* is the time it refers to: GCRA's tolerance `burst * T`
//!   ([`Quota::tolerance`]), a window algorithm's window `W`.
//! - There are no `_owned` forms, with one exception: guards. For a `'static` future
//!   (`tokio::spawn`), await the method inside an `async move` block that owns an `Arc` of the
//!   limiter (and the key). The concurrency limiters' permits are guards that must outlive the
//!   call, so they alone have tokio's `_owned` forms, on `self: &Arc<Self>`, returning an
//!   [`OwnedPermit`]: `try_acquire_owned`, `try_acquire_n_owned`, `acquire_owned_async`,
//!   `acquire_n_owned_async` (a timeout: wrap the last two in `tokio::time::timeout`, which is
//!   cancel-safe).
//!
//! [`RateLimiter`] has every row (reservations and `throttle` with [`Gcra`]);
//! [`KeyedRateLimiter`] too, with the key first.
//!
//! [`ConcurrencyLimiter`] and [`KeyedConcurrencyLimiter`] (at most `limit` in flight) have the
//! acquire rows, returning a [`Permit`] guard that gives the permits back when dropped:
//! `try_acquire()` is `Option<Permit>` (the `bool` row's), every other form
//! `Result<Permit, AcquireError>`. Their "not now" is `AcquireError::AtCapacity { in_flight,
//! limit }` (no wait to suggest: permits come back when their holders finish; a new key at a
//! keyed limiter's full key cap is `KeyCapReached { retry_after: None }`); more than the
//! limit is `ExceedsBurst` for every form, waiting ones included. Their limit is a count:
//! `limit()`, `set_limit(limit)`, and `in_flight()` / `available()`. No `peek`,
//! `check` or reservations.
//!
//! [`SmoothRateLimiter`] (Guava's) has the acquire rows: `try_acquire(_n)`, `acquire(_n)`,
//! `try_acquire(_n)_for`, `acquire(_n)_async`, `try_acquire(_n)_for_async`, with the same
//! return types (its `acquire` is a `Result` too, though it never refuses: the next caller
//! pays). It has no `peek`, `check` or reservations (Guava has none), and its limit is a rate:
//! `quota() -> f64` and `set_quota(permits_per_second)` (Guava's `getRate`/`setRate`).
//!
//! `redis::RedisRateLimiter` (feature `redis`) is keyed by `&str` and async by nature: every
//! method returns a future for its round trip, and `_async` still marks exactly the methods
//! that wait for permits (`acquire_async`, `acquire_n_async`, `try_acquire_for_async`,
//! `try_acquire_n_for_async`, `check_for_async`, `check_n_for_async`); `peek`, `check(_n)(_with)`, `try_acquire(_n)`, `reserve(_n)`,
//! `try_reserve(_n)_for` and `throttle` are awaited too. Its results are wrapped in
//! `Result<_, RedisLimitError>`, a refusal being `RedisLimitError::Limited(AcquireError)`
//! (`try_acquire` is `Result<bool, _>`). It has no blocking forms (no blocking I/O) and no
//! `set_quota` (the quota selects the state's Redis keys). Its own additions follow the same
//! shapes: `decide(key)`, `decide_n(key, n)`, `decide_with(key, quota)`,
//! `decide_n_with(key, n, quota)` return the decision with the server's time.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::{KeyedRateLimiter, ManualClock, Quota, RateLimiter, SmoothRateLimiter};
//!
//! let q = Quota::per_second(10).unwrap();
//! let direct = RateLimiter::builder(q).clock(ManualClock::new()).build();
//! let keyed = KeyedRateLimiter::<&str>::builder(q).clock(ManualClock::new()).build();
//! let smooth = SmoothRateLimiter::builder(10.0).clock(ManualClock::new()).build().unwrap();
//!
//! assert!(direct.try_acquire() && keyed.try_acquire(&"k") && smooth.try_acquire());
//! assert_eq!(direct.try_acquire_n(0), Ok(()));
//! assert_eq!(keyed.try_acquire_n(&"k", 0), Ok(()));
//! assert_eq!(smooth.try_acquire_n(0), Ok(()));
//! assert!(direct.try_acquire_n_for(2, Duration::from_secs(1)).is_ok());
//! assert!(keyed.try_acquire_n_for(&"k", 2, Duration::from_secs(1)).is_ok());
//! assert!(smooth.try_acquire_n_for(2, Duration::from_secs(1)).is_ok());
//! ```
//!
//! ## Features
//! - `tokio` (default): async acquire (cancel-safe, FIFO, one wake-up per grant),
//!   `TokioClock`, and a tokio-task sweeper.
//! - `serde`: `Serialize`/`Deserialize` for [`Quota`] (as `{ count, period, burst }`, validated
//!   on the way in). With `tower` too: `http::LayerConfig`, the HTTP layer's configuration
//!   from a file, and its run-time reload ([guide](guide::http)).
//! - `redis`: `redis::RedisRateLimiter`, the same algorithms shared across processes and
//!   machines through Redis 7+ or a Redis Cluster (one Lua script per decision, on the server's
//!   clock). Adds the `redis` client crate and tokio networking; needs Rust 1.88.
//! - `tower`: the `http` module, a tower `Layer` for axum, hyper and tonic (turns on `tokio`;
//!   adds the small `http`, `tower-layer`, `tower-service`, `bytes`, `pin-project-lite`).
//! - `axum`: axum's `ConnectInfo<SocketAddr>` as the peer address of the HTTP key extractors
//!   (adds axum without default features; MSRV of current hyper-util: 1.85).
//! - `ipnet`: `From` conversions from the `ipnet` crate's networks into
//!   `http::IpNet`, for trusted proxies and access lists held as `ipnet`
//!   values (adds `ipnet` without default features; turns on `tower`).
//! - `metrics`: every limiter reports decisions, permits, waits and sweeps through the
//!   `metrics` facade, labelled with its builder's `name` ([guide](guide::operations)); adds
//!   the `metrics` crate. Without it the hooks compile to nothing.
//! - `tracing`: a debug event per refusal (target `tollgate`, the limiter's name, never its
//!   key), a `tollgate.wait` span per wait, and from the HTTP layer an error event when it
//!   cannot key requests (its set-up is wrong) or a warning when clients send unusable keys,
//!   each at most once a minute ([guide](guide::operations)); adds `tracing`.
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
mod all_or_none;
mod cell;
mod clock;
mod concurrency;
mod decision;
mod direct;
mod engine;
/// Where the user guide's reference links lead in rustdoc (`src/guide.rs` says why).
#[cfg(any(doc, doctest))]
macro_rules! guide_links {
    () => {
        "[guide]: crate::guide\n\
         [quotas]: crate::guide::quotas_and_methods\n\
         [keyed]: crate::guide::keyed\n\
         [penalties]: crate::guide::penalties\n\
         [algorithms]: crate::guide::algorithms\n\
         [async]: crate::guide::asynchronous\n\
         [http]: crate::guide::http\n\
         [redis]: crate::guide::redis\n\
         [guava]: crate::guide::guava\n\
         [semantics]: crate::guide::semantics\n\
         [clocks]: crate::guide::clocks\n\
         [testing]: crate::guide::testing\n\
         [operations]: crate::guide::operations\n\
         [concurrency]: crate::guide::concurrency\n\
         [design]: crate::guide::design\n\
         [grid]: crate#the-method-grid\n\n"
    };
}
// The user guide, one page per topic (`docs/guide/`), and the design document
// (`docs/design.md`): documentation only, so that every code block in them is a doc test.
#[cfg(any(doc, doctest))]
#[doc = guide_links!()]
#[doc = include_str!("../docs/guide/README.md")]
pub mod guide;
#[cfg(feature = "tower")]
pub mod http;
mod keyed;
mod leased;
mod meter;
mod nanos;
mod quota;
#[cfg(feature = "redis")]
pub mod redis;
mod reservation;
mod smooth;
mod store;
mod sync;

// Not an API: what the loom models (`loom-tests/`) drive, behind an internal name.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom;

pub use algorithm::Gcra;
pub use algorithm::{FixedWindow, SlidingLog, SlidingWindow, WeightedWindow};
pub use all_or_none::{all_or_none, all_or_none_async, CancelFuture, Hold, Refusal};
pub use cell::Algorithm;
#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{
    Clock, CoarseClock, CoarseClockError, DefaultClock, ManualClock, QuantaClock, StdClock,
    TSC_MAX_SKEW,
};
pub use concurrency::{
    ConcurrencyError, ConcurrencyLimiter, ConcurrencyLimiterBuilder, KeyedConcurrencyLimiter,
    KeyedConcurrencyLimiterBuilder, OwnedPermit, Permit,
};
pub use decision::{AcquireError, AdjustError, Decision, RefusedBy, ThrottleReply};
pub use direct::{RateLimiter, RateLimiterBuilder};
pub use keyed::{KeyedRateLimiter, KeyedRateLimiterBuilder};
pub use leased::LeasedRateLimiter;
pub use meter::names as metric_names;
pub use nanos::{Nanos, MAX_NANOS};
pub use quota::{Quota, QuotaError};
#[cfg(feature = "redis")]
pub use redis::RedisRateLimiter;
pub use reservation::Reservation;
pub use smooth::{SmoothConfigError, SmoothRateLimiter, SmoothRateLimiterBuilder};
pub use store::evict::SweepStats;
pub use store::keyed::WhenFull;
pub use store::settings::{DefaultKeyHasher, DEFAULT_SHARDS};

/// The README's code blocks, compiled and run as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
