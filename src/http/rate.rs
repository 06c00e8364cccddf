//! Rate limits behind the layer: [`Backend`](backend::Backend), what the layer needs from a
//! keyed rate limiter, with its in-process implementation ([`backend`]) and the Redis one
//! ([`redis_backend`], feature `redis`), and [`Refunds`](refunds::Refunds), a backend's
//! reserve and refund captured for response-aware limits ([`refunds`]). The request paths that
//! wait or refund are the service's (`service/shaping.rs`, `service/refunding.rs`).

pub(super) mod backend;
#[cfg(feature = "redis")]
pub(super) mod redis_backend;
pub(super) mod refunds;
