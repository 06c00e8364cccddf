//! The rate limiter on Redis: [`RedisRateLimiter`](super::RedisRateLimiter) and its method
//! family (`limiter.rs`), its builder, its waits, the changes by hand (block, penalize,
//! reward, reset), GCRA's reservations, the failure policy, and each algorithm's glue to its
//! script (`algorithm.rs` and `algorithm/`).

mod adjust;
pub(super) mod algorithm;
pub(super) mod builder;
pub(super) mod limiter;
pub(super) mod policy;
pub(super) mod reservation;
mod shared;
mod wait;
