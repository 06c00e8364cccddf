//! [`ConcurrencyLimiterBuilder`]: a concurrency limiter's configuration (its name).

use std::fmt;
use std::sync::Arc;

use super::ConcurrencyLimiter;
use crate::concurrency::error::{check_limit, ConcurrencyError};
use crate::meter::Meter;

/// Configures a [`ConcurrencyLimiter`]: its [`name`](Self::name), then [`build`](Self::build).
/// [`ConcurrencyLimiter::new`] is `builder(limit)?.build()`.
///
/// ```
/// use tollgate::ConcurrencyLimiter;
///
/// let db = ConcurrencyLimiter::builder(10)?.name("db-pool").build();
/// let permit = db.try_acquire().unwrap();
/// assert_eq!(db.in_flight(), 1);
/// # drop(permit);
/// # Ok::<(), tollgate::ConcurrencyError>(())
/// ```
#[must_use = "call .build() to get a limiter"]
pub struct ConcurrencyLimiterBuilder {
    limit: u32,
    name: Option<Arc<str>>,
}

impl ConcurrencyLimiterBuilder {
    pub(super) fn new(limit: u64) -> Result<Self, ConcurrencyError> {
        Ok(ConcurrencyLimiterBuilder {
            limit: check_limit(limit)?,
            name: None,
        })
    }

    /// Names the limiter: the `limiter` label of its metrics (feature `metrics`: acquires by
    /// outcome, waits, the `tollgate_in_flight` gauge; unnamed limiters are labelled
    /// `unnamed`) and its name in logs (feature `tracing`).
    ///
    /// ```
    /// let l = tollgate::ConcurrencyLimiter::builder(4)?.name("exports").build();
    /// assert_eq!(l.name(), Some("exports"));
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The limiter. Its metrics' handles are registered now, with the recorder installed now
    /// (install the exporter first).
    ///
    /// ```
    /// let l = tollgate::ConcurrencyLimiter::builder(2)?.build();
    /// assert_eq!(l.limit(), 2);
    /// # Ok::<(), tollgate::ConcurrencyError>(())
    /// ```
    #[must_use]
    pub fn build(self) -> ConcurrencyLimiter {
        ConcurrencyLimiter::with(self.limit, Meter::concurrency(self.name))
    }
}

impl fmt::Debug for ConcurrencyLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimiterBuilder")
            .field("limit", &self.limit)
            .field("name", &self.name)
            .finish()
    }
}
