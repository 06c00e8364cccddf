//! The unit of time every decision is made in, and its end: a leaf module (it imports nothing
//! from the crate), so the rules, the cells and the clocks can all use it.

/// Nanoseconds since a clock's origin: the unit of every decision.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, ManualClock, Nanos};
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(1500));
/// let now: Nanos = clock.now();
/// assert_eq!(now, 1_500_000_000);
/// assert_eq!(Duration::from_nanos(now), Duration::from_millis(1500));
/// ```
pub type Nanos = u64;

/// The end of the time a limiter can represent: `2^62 - 1` ns since its clock's origin, about
/// 146 years. Limiter state packs two flag bits beside the time in one `u64`, so quotas, waits
/// and clock readings beyond this are refused or reported as never grantable, never wrapped.
pub const MAX_NANOS: Nanos = (1 << 62) - 1;
