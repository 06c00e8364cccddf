//! Concurrency limits: at most `limit` permits in flight at once, for one limit
//! ([`ConcurrencyLimiter`]) or per key ([`KeyedConcurrencyLimiter`]). A rate limit bounds how
//! often; these bound how many at once.
//!
//! - `error`: [`ConcurrencyError`], a limit refused;
//! - `permit`: [`Permit`] and [`OwnedPermit`], the guards that give permits back on drop;
//! - `pinned`: `Pinned`, the pointer from permits and waiters to their limiter's cell and
//!   gauge, and the one argument that it stays valid;
//! - `wait`: every acquire's steps on a cell (`crate::cell::semaphore`): take now, or queue
//!   and wait (blocking or async), cancel-safe;
//! - `report`: what an acquire reports to the limiter's meter (decision, in-flight gauge, wait);
//! - `direct` (and its child `builder`): the one-limit limiter;
//! - `sem_store`: `SemStore`, the keyed limiter's cells in the keyed store (`store::keyed`),
//!   its limit, acquire paths and eviction rule for idle keys;
//! - `keyed` (and its child `builder`): the keyed limiter and its builder.

mod direct;
mod error;
mod keyed;
mod permit;
mod pinned;
mod report;
mod sem_store;
mod wait;

pub use direct::{ConcurrencyLimiter, ConcurrencyLimiterBuilder};
pub use error::ConcurrencyError;
pub use keyed::{KeyedConcurrencyLimiter, KeyedConcurrencyLimiterBuilder};
pub use permit::{OwnedPermit, Permit};
