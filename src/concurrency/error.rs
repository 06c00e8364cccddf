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
///     ConcurrencyLimiter::new(u32::MAX).unwrap_err(),
///     ConcurrencyError::TooLarge { limit: u32::MAX, max: ConcurrencyLimiter::MAX_LIMIT }
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConcurrencyError {
    /// A limit of zero would grant nothing, ever.
    Zero,
    /// Above [`ConcurrencyLimiter::MAX_LIMIT`](crate::ConcurrencyLimiter::MAX_LIMIT)
    /// (`2^31 - 1`): the count in flight and the limit share one atomic word.
    TooLarge {
        /// The limit asked for.
        limit: u32,
        /// The largest limit.
        max: u32,
    },
}

/// `limit` if it is a valid concurrency limit.
pub(crate) fn check_limit(limit: u32) -> Result<u32, ConcurrencyError> {
    match limit {
        0 => Err(ConcurrencyError::Zero),
        l if l > MAX_LIMIT => Err(ConcurrencyError::TooLarge {
            limit,
            max: MAX_LIMIT,
        }),
        l => Ok(l),
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

    #[test]
    fn limits_from_one_to_the_maximum_are_valid() {
        assert_eq!(check_limit(0), Err(ConcurrencyError::Zero));
        assert_eq!(check_limit(1), Ok(1));
        assert_eq!(check_limit(MAX_LIMIT), Ok(MAX_LIMIT));
        assert_eq!(
            check_limit(MAX_LIMIT + 1),
            Err(ConcurrencyError::TooLarge {
                limit: MAX_LIMIT + 1,
                max: MAX_LIMIT
            })
        );
    }
}
