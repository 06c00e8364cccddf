//! [`Adjust`]: the changes an operator makes to a key's state outside its decisions (block,
//! penalize, reward, reset). Each algorithm applies one with a pure function next to its
//! decision rule (`adjust` in its module), run as one step of the cell's CAS loop, so an
//! adjustment is exact under concurrency exactly as a decision is. What each does per
//! algorithm is in the guide's Penalties page (`docs/guide/penalties.md`).

use crate::Nanos;

/// One change to a key's state, applied at the caller's `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adjust {
    /// Refuse every request until this instant (nothing if it is not after `now`). A block
    /// never shortens what the key already owes.
    Block { until: Nanos },
    /// Charge this many permits now, even into debt (saturating at what the state holds).
    Penalize(u64),
    /// Give this many permits back, never above a full limit.
    Reward(u64),
    /// Back to a fresh key's state (the direct limiter; the keyed store removes the key).
    Reset,
}

impl Adjust {
    /// Whether this change can only lower the state's cold time (the keyed store keeps a
    /// lower bound on every key's cold time, which must then be lowered with it).
    pub(crate) fn may_lower(&self) -> bool {
        matches!(self, Adjust::Reward(_) | Adjust::Reset)
    }
}
