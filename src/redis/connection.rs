//! The way to Redis: the connection (one server, a cluster, or the primary Redis Sentinel
//! names), the per-call deadline, script invocation (`EVALSHA`, `EVAL` after `NOSCRIPT`, cluster
//! redirects), how a failure is classified, the typed error, what the calls report, and the
//! subscription that hears other processes' changes.

pub(super) mod client;
mod cluster;
mod command;
pub(super) mod error;
pub(super) mod failure;
pub(super) mod meter;
pub(super) mod sentinel;
pub(super) mod subscribe;
