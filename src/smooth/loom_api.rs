//! Internals the loom models (`loom-tests/tests/smooth.rs`) drive, built only under
//! `--cfg loom` and hidden from the docs: a reservation that is not slept on (so it can be
//! cancelled, as a dropped async waiter's is) and the raw state word. Thin wrappers around the
//! limiter's own code, so the models check the library, not a copy.

use super::cell::Ticket;
use super::SmoothRateLimiter;

/// A reservation made by [`SmoothRateLimiter::loom_reserve`].
#[derive(Clone, Copy, Debug)]
pub struct SmoothTicket(Ticket);

impl SmoothTicket {
    /// Guava's `momentAvailable`, in microseconds since the limiter was built.
    pub fn moment(&self) -> i64 {
        self.0.moment
    }
}

#[doc(hidden)]
impl SmoothRateLimiter {
    /// `acquire_n(permits)` without the sleep.
    pub fn loom_reserve(&self, permits: u64) -> SmoothTicket {
        SmoothTicket(self.reserve_now(permits).1)
    }

    /// What dropping an async waiter does with its reservation.
    pub fn loom_cancel(&self, ticket: &SmoothTicket) {
        self.cell.cancel(&ticket.0)
    }

    /// The state word: stored permits (`f64` bits), `nextFree` (us), and the `LOCKED` bit.
    pub fn loom_state(&self) -> (u64, i64, bool) {
        let w = self.cell.word();
        let s = w.state();
        (s.stored.to_bits(), s.next_free, w.locked())
    }
}
