//! The lock-free parts: every CAS loop and every lock an algorithm's state uses lives here,
//! on atomics from `crate::sync` (loom's under `--cfg loom`).
//!
//! - [`gcra`]: GCRA's one-word cell (decisions, reservations, cancels with holes, lazy quota
//!   re-scaling);
//! - [`params`]: the sequence lock holding an algorithm's parameters;
//! - [`word`]: a state packed in one atomic word (64 or 128 bits) and its CAS loop (the fixed
//!   window, the weighted window counter);
//! - [`semaphore`]: a concurrency limit's permits (one word, lock-free uncontended) and its
//!   FIFO waiter queue under a mutex;
//! - [`lease`]: one shard of a leased limiter (permits taken ahead, used on the core's own
//!   line);
//! - [`locked`]: a state under a mutex held only for one decision (the sliding window's
//!   sub-windows, the sliding log).

pub(crate) mod gcra;
pub(crate) mod lease;
pub(crate) mod params;
pub(crate) mod semaphore;

pub(crate) mod locked;
pub(crate) mod word;
