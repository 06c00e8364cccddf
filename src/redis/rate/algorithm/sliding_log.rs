//! The sliding log on Redis: one sorted set per limited thing, one member per permit (score:
//! its stamp in µs). Memory grows with `L` (figures in `benches/BENCHMARKS.md`, "Redis"), and an admission of `n`
//! permits adds `n` members in one script run, so keep `n` and `L` moderate, or use GCRA or
//! the weighted counter. Expired entries are trimmed only by admissions and changes, and the
//! key expires when its newest entry leaves the window. A block or a penalty is one member of
//! many permits whatever its size (scored -1 so that the stamp ranges count grants only; few,
//! since a block drops every entry it outlasts): `"b:<stamp>:<count>"` for a block's entry
//! stamped after every grant and penalty (a *block entry*, which the decision's instant and a
//! grant's stamp do not read, as in process), `"h:<stamp>:<count>"` for the others. A set
//! written before block entries were marked holds only `h:` members and decides at its newest
//! stamp, as it did (it can only under-admit).
//!
//! Under a `state_name` the set holds one more member, scored -2, naming the quota that wrote
//! it (`"q:L:W"`, or `"q:L:W:H:U"` while it holds its entries for a longer window `H` until
//! `U`): another quota decides on the same stamps, counting the writer's longer window while
//! that one still counts (the guide's *Changing a limit in a rolling deploy*).

use super::RedisAlgorithm;
use crate::redis::connection::error::RedisLimitError;
use crate::redis::scripts::{self, script_spec, Params};
use crate::Quota;
use crate::SlidingLog;

/// The sliding log, exact: one sorted-set member per permit.
impl RedisAlgorithm for SlidingLog {
    const NAME: &'static str = "log";

    script_spec!(scripts::SLIDING_LOG, reserves: false, batches: false, adjusts: true);

    fn redis_params(&self, quota: Quota) -> Result<Params, RedisLimitError> {
        Params::window(quota)
    }
}
