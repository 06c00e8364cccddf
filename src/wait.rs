//! Reservations and waiting: a reservation is taken once, in CAS order, and the caller then
//! sleeps until its ready time. No re-checking, so one wake-up per grant and FIFO order.

use std::fmt;
use std::time::Duration;

use crate::cell::TatCell;
use crate::clock::AnyClock;
use crate::gcra::Ticket;
use crate::Nanos;

/// Permits reserved ahead of time: proceed at [`ready_at`](Reservation::ready_at), or give them
/// back with [`cancel`](Reservation::cancel).
///
/// Dropping a reservation keeps it (the permits stay taken, as after a blocking acquire);
/// only `cancel` refunds.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
///     .clock(clock.clone())
///     .build();
/// let first = limiter.reserve(1).unwrap();
/// assert_eq!(first.delay(), Duration::ZERO);
/// let second = limiter.reserve(1).unwrap();
/// assert_eq!(second.delay(), Duration::from_millis(100));
/// second.cancel(); // the latest reservation: fully refunded
/// assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::from_millis(100));
/// ```
#[must_use = "a reservation holds permits: wait for it, or cancel it to give them back"]
pub struct Reservation<'a> {
    ticket: Ticket,
    made_at: Nanos,
    clock: &'a AnyClock,
    target: Target<'a>,
}

/// Where a cancel goes: straight to a cell, or through a lookup (keyed limiters).
pub(crate) enum Target<'a> {
    Cell(&'a TatCell),
    Lookup(LookupCancel<'a>),
}

/// A keyed cancel: finds the key's cell again (it may have been evicted) and cancels there,
/// reading `now` under the shard guard like every keyed decision.
pub(crate) type LookupCancel<'a> = Box<dyn Fn(&Ticket) + Send + Sync + 'a>;

impl<'a> Reservation<'a> {
    pub(crate) fn new(
        ticket: Ticket,
        made_at: Nanos,
        clock: &'a AnyClock,
        target: Target<'a>,
    ) -> Self {
        Reservation {
            ticket,
            made_at,
            clock,
            target,
        }
    }

    /// When the reserved permits may be used, in the limiter clock's nanoseconds.
    pub fn ready_at(&self) -> Nanos {
        self.ticket.ready_at
    }

    /// The wait this reservation was given when it was made (zero if it was ready at once).
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.ticket.wait_from(self.made_at))
    }

    /// The wait left from now.
    pub fn remaining_delay(&self) -> Duration {
        Duration::from_nanos(self.ticket.wait_from(self.clock.now()))
    }

    /// Blocks (through the limiter's clock) until the reservation is ready; returns the time
    /// slept.
    pub fn wait(self) -> Duration {
        block_until_ready(self.clock, self.clock.now(), &self.ticket)
    }

    /// Gives the permits back if this is still the latest reservation and it is not ready yet;
    /// otherwise does nothing, because a later reservation is scheduled behind this one and
    /// lowering the state under it would hand its slot out twice. Cancelling several
    /// reservations latest-first therefore refunds them all.
    pub fn cancel(self) {
        match &self.target {
            Target::Cell(cell) => cell.cancel(self.clock.now(), &self.ticket),
            Target::Lookup(cancel) => cancel(&self.ticket),
        }
    }
}

impl fmt::Debug for Reservation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("ready_at", &self.ticket.ready_at)
            .field("delay", &self.delay())
            .finish()
    }
}

/// Sleeps until `ticket` is ready; returns the time slept (the blocking half of `acquire`).
pub(crate) fn block_until_ready(clock: &AnyClock, now: Nanos, ticket: &Ticket) -> Duration {
    let wait = Duration::from_nanos(ticket.wait_from(now));
    if !wait.is_zero() {
        clock.sleep(wait);
    }
    wait
}

/// Cancels a reservation if dropped before [`disarm`](CancelOnDrop::disarm): what makes a
/// dropped async acquire give its slot back.
#[cfg(feature = "tokio")]
pub(crate) struct CancelOnDrop<F: FnMut()> {
    cancel: Option<F>,
}

#[cfg(feature = "tokio")]
impl<F: FnMut()> CancelOnDrop<F> {
    pub(crate) fn new(cancel: F) -> Self {
        CancelOnDrop {
            cancel: Some(cancel),
        }
    }

    pub(crate) fn disarm(mut self) {
        self.cancel = None;
    }
}

#[cfg(feature = "tokio")]
impl<F: FnMut()> Drop for CancelOnDrop<F> {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.as_mut() {
            cancel();
        }
    }
}

/// The async half of `acquire`: sleep on tokio's timer until `ticket` is ready, cancelling the
/// reservation (refund rule) if the future is dropped first.
#[cfg(feature = "tokio")]
pub(crate) async fn sleep_until_ready(
    now: Nanos,
    ticket: Ticket,
    cancel: impl FnMut(&Ticket),
) -> Duration {
    let wait = Duration::from_nanos(ticket.wait_from(now));
    if !wait.is_zero() {
        let mut cancel = cancel;
        let guard = CancelOnDrop::new(move || cancel(&ticket));
        tokio::time::sleep(wait).await;
        guard.disarm();
    }
    wait
}
