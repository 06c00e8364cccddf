//! Limits shared across processes and machines, decided inside Redis (feature `redis`).
//!
//! [`RedisRateLimiter`] keeps each limited thing's state in one Redis key and decides in one
//! Lua script run per call: atomic, one round trip, on the server's clock (`TIME` inside the
//! script), so client clock skew cannot over-admit. The algorithms are the in-process
//! limiter's own types ([`RedisAlgorithm`]): [`Gcra`](crate::Gcra) (default),
//! [`SlidingLog`](crate::SlidingLog), [`FixedWindow`](crate::FixedWindow) (epoch-aligned),
//! [`WeightedWindow`](crate::WeightedWindow) and [`SlidingWindow`](crate::SlidingWindow)
//! (sub-windows of whole microseconds), with the same [`Decision`](crate::Decision) fields.
//!
//! ```
//! # async fn demo() -> Result<(), tollgate::redis::RedisLimitError> {
//! use tollgate::redis::RedisRateLimiter;
//! use tollgate::{Quota, SlidingLog};
//!
//! let limiter = RedisRateLimiter::builder(Quota::per_second(10).unwrap())
//!     .connect("redis://127.0.0.1:6379/")
//!     .await?;
//! let d = limiter.check("{user42}:login").await?;
//! if !d.allowed {
//!     println!("429, retry after {:?}", d.retry_after);
//! }
//! let log: RedisRateLimiter<SlidingLog> = RedisRateLimiter::builder(Quota::per_minute(60).unwrap())
//!     .algorithm(SlidingLog)?
//!     .connect("redis://127.0.0.1:6379/")
//!     .await?;
//! # let _ = log;
//! # Ok(()) }
//! ```
//!
//! [`RedisConcurrencyLimiter`] (formerly `RedisSemaphore`, a deprecated alias now) bounds how
//! many at once instead of how often, as the in-process
//! [`KeyedConcurrencyLimiter`](crate::KeyedConcurrencyLimiter) does: at most `limit` permits
//! per key held across every process, each grant a [`Lease`] with an expiry on the server's
//! clock (a crashed holder's permits come back when it ends), renewal, exactly-once release
//! and a fencing token ([guide](crate::guide::redis)).
//!
//! # Exactness
//! Lua numbers are doubles, exact for integers below 2^53. The scripts work in integer
//! microseconds since the Unix epoch (about 2^50.7 today), keep every time and count at most
//! 2^51 (quotas beyond that are a [`RedisLimitError::QuotaOutOfRange`]), compare products
//! exactly in 26-bit limbs, and reply integers only. GCRA runs the quota's interval `T` and
//! burst; the windows count `L = count` permits per `W = period`. The interval or window is
//! rounded **up** to a whole microsecond, so Redis never admits more than the quota asks:
//! `Quota::new(3, Duration::from_millis(1))` runs with `T = 334 µs`; a
//! [`SlidingWindow`](crate::SlidingWindow)'s sub-windows are not rounded (that would move
//! their boundaries), so its window must split into `k` whole microseconds, else it is
//! [`RedisLimitError::Unsupported`]. Quotas whose interval or
//! window is a whole number of microseconds decide exactly as the in-process limiter at the
//! same instant, with the same `Decision` fields, but for one difference of resolution: a
//! [`WeightedWindow`](crate::WeightedWindow)'s `retry_after` can fall between two
//! microseconds (where a product of counts and times crosses the limit); the in-process
//! limiter reports it to the nanosecond, Redis rounded up to the next whole microsecond.
//!
//! Windows are aligned to the Unix epoch on the server's clock, the same for every process (in
//! process, [`FixedWindow::epoch_aligned`](crate::FixedWindow::epoch_aligned) does this; the
//! other windows there start at the limiter clock's origin).
//!
//! # Keys
//! A key's state lives at `<prefix>:<algorithm>:<span µs>:<limit>:<your key>`, with the
//! number of sub-windows after the limit for a [`SlidingWindow`](crate::SlidingWindow)
//! (`<prefix>:sliding:<W µs>:<limit>:<k>:<your key>`; see [`RedisRateLimiter::state_key`]):
//! algorithms, quotas and sub-window counts never share state, and your key comes
//! last, so a hash tag in it (`{user42}:login`) decides the cluster slot. One decision touches
//! exactly one key, so every call works on a Redis Cluster. Every key expires (`PXAT` /
//! `PEXPIREAT`) when its state stops carrying information (GCRA: when the bucket is full again;
//! windows: when their counts no longer weigh), so Redis memory stays bounded without a
//! sweeper. A denial or a peek writes nothing.
//!
//! # Failures
//! Every call has a deadline (default 50 ms, [`RedisRateLimiterBuilder::deadline`]). When Redis
//! could not answer (no reply in time, no connection, the cluster down for the key's slot,
//! loading, busy), the [`FailurePolicy`] decides; when it answered with an error (a wrong-type
//! or foreign value at a state key, a script error), every policy returns it as a typed error
//! ([`RedisLimitError::Server`]): an admission would hide a bug. The connection is made in the
//! background, so a limiter can be built while Redis is down, and reconnects in the
//! background; scripts missing from the server's cache (`NOSCRIPT` after a restart, a
//! failover or `SCRIPT FLUSH`) are sent again within the same call, and on a cluster `MOVED`
//! and `ASK` are followed within it (`ASKING` and the script as one pipeline).
//! [`RedisRateLimiter::stats`] counts what happened. Changes by hand (`reset`, and `block`,
//! `penalize`, `reward` on the window algorithms: the guide's
//! [Penalties](crate::guide::penalties) page) are not decisions: every policy returns their
//! failure.
//!
//! # Requirements
//! Redis 7.0 or later (or a compatible server): the scripts call `TIME` before writing, which
//! needs script effects replication, the only mode since 7.0.

mod batch;
mod concurrency;
mod connection;
mod hot;
mod rate;
mod scripts;
mod waiting;

pub use concurrency::{
    KeepAlive, Lease, LeaseId, RedisConcurrencyLimiter, RedisConcurrencyLimiterBuilder, Released,
    DEFAULT_LEASE,
};
pub use connection::error::RedisLimitError;
pub use connection::failure::{ServerError, ServerErrorKind, UnavailableError, UnavailableKind};
pub use rate::algorithm::RedisAlgorithm;
pub use rate::builder::{RedisRateLimiterBuilder, DEFAULT_DEADLINE};
pub use rate::limiter::{RedisDecision, RedisRateLimiter, RedisStats};
pub use rate::policy::FailurePolicy;
pub use rate::reservation::RedisReservation;
// The names before the rename: deprecated aliases of the same types.
#[allow(deprecated)]
pub use concurrency::{RedisSemaphore, RedisSemaphoreBuilder};
