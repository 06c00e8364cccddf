//! The lock-free parts: every CAS loop and every lock an algorithm's state uses lives here,
//! on atomics from `crate::sync` (loom's under `--cfg loom`).
//!
//! - [`gcra`]: GCRA's one-word cell (decisions, reservations, cancels with holes, lazy quota
//!   re-scaling);
//! - [`params`]: the sequence lock holding an algorithm's parameters.

pub(crate) mod gcra;
pub(crate) mod params;
