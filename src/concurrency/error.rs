//! [`ConcurrencyError`]: a concurrency limit that cannot be built or set.

use std::fmt;

use crate::cell::semaphore::MAX_LIMIT;

/// Why a concurrency limit was refused (by `new`, `builder` or `set_limit`).
///
/// ```
/// use tollgate::{ConcurrencyError, ConcurrencyLimiter};
///
/// assert_eq!(ConcurrencyLimiter::new(0).unwrap_err(), ConcurrencyError::Zero);
/// assert_eq!(
///     ConcurrencyLimiter::new(u64::MAX).unwrap_err(),
///     ConcurrencyError::TooLarge { limit: u64::MAX, max: ConcurrencyLimiter::MAX_LIMIT }
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConcurrencyError {
    /// A limit of zero would grant nothing, ever.
    Zero,
    /// Above [`ConcurrencyLimiter::MAX_LIMIT`](crate::ConcurrencyLimiter::MAX_LIMIT)
    /// (`2^31 - 1`): the count in flight and the limit share one atomic word. The limit is a
    /// `u64` like every count in the crate; any value above the maximum, `u64::MAX` included,
    /// is this error (never truncated to fit).
    TooLarge {
        /// The limit asked for.
        limit: u64,
        /// The largest limit.
        max: u64,
    },
}

/// `limit` in the cell's width, if it is a valid concurrency limit.
pub(crate) fn check_limit(limit: u64) -> Result<u32, ConcurrencyError> {
    if limit == 0 {
        return Err(ConcurrencyError::Zero);
    }
    match u32::try_from(limit) {
        Ok(l) if l <= MAX_LIMIT => Ok(l),
        _ => Err(ConcurrencyError::TooLarge {
            limit,
            max: u64::from(MAX_LIMIT),
        }),
    }
}

impl fmt::Display for ConcurrencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConcurrencyError::Zero => f.write_str("a concurrency limit of zero grants nothing"),
            ConcurrencyError::TooLarge { limit, max } => {
                write!(f, "concurrency limit {limit} is above the maximum {max}")
            }
        }
    }
}

impl std::error::Error for ConcurrencyError {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against the model: a limit is valid iff it is in `1..=MAX_LIMIT`, and a valid one
        /// reaches the cell unchanged (a `u64` is never cut down to fit the `u32` half).
        #[test]
        fn a_u64_limit_is_kept_or_refused_never_truncated(
            limit in prop_oneof![
                any::<u64>(),
                0..=u64::from(MAX_LIMIT) + 2,
                u64::from(u32::MAX) - 2..=u64::from(u32::MAX) + 2,
            ]
        ) {
            let max = u64::from(MAX_LIMIT);
            let model = match limit {
                0 => Err(ConcurrencyError::Zero),
                l if l > max => Err(ConcurrencyError::TooLarge { limit, max }),
                l => Ok(l),
            };
            prop_assert_eq!(check_limit(limit).map(u64::from), model);
        }
    }

    #[test]
    fn limits_from_one_to_the_maximum_are_valid() {
        assert_eq!(check_limit(0), Err(ConcurrencyError::Zero));
        assert_eq!(check_limit(1), Ok(1));
        let max = u64::from(MAX_LIMIT);
        assert_eq!(check_limit(max), Ok(MAX_LIMIT));
        for limit in [
            max + 1,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            u64::MAX,
        ] {
            assert_eq!(
                check_limit(limit),
                Err(ConcurrencyError::TooLarge { limit, max })
            );
        }
    }
}
