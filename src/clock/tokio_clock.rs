//! `TokioClock`: tokio's time, so `tokio::time::pause()` drives the limiter too.

use super::{duration_to_nanos, Clock};
use crate::Nanos;

/// A clock that reads tokio's time, so `tokio::time::pause()` drives the limiter too.
///
/// With it, async waits under paused time are deterministic: a test can assert that waiters are
/// granted at exact instants.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tollgate::{Clock, TokioClock};
///
/// let clock = TokioClock::new();
/// tokio::time::sleep(Duration::from_millis(10)).await; // paused: returns at once
/// assert_eq!(clock.now(), 10_000_000);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is tokio's now.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tollgate::{Clock, TokioClock};
    ///
    /// let older = TokioClock::new();
    /// tokio::time::advance(Duration::from_millis(10)).await;
    /// let newer = TokioClock::new();
    /// assert_eq!(newer.now(), 0);
    /// assert_eq!(older.now(), 10_000_000);
    /// # }
    /// ```
    pub fn new() -> TokioClock {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Nanos {
        duration_to_nanos(self.origin.elapsed())
    }
}
