//! Where cells live: the keyed store (a sharded map with a key cap), and the eviction rule
//! that keeps it bounded. The direct limiter needs no store: its one cell sits inline.

pub(crate) mod keyed;
pub(crate) mod sweep;
