//! Reservations and waiting. A GCRA reservation is booked once, in CAS order, and the caller
//! then sleeps until its ready time: no re-checking, so one wake-up per grant and FIFO order.

use std::fmt;
use std::time::Duration;

use crate::algorithm::gcra::Ticket;
use crate::clock::AnyClock;
use crate::Nanos;

/// Permits reserved ahead of time (GCRA): proceed at [`ready_at`](Reservation::ready_at), or
/// give them back with [`cancel`](Reservation::cancel) if you will not use them.
///
/// Dropping a reservation keeps it (the permits stay taken, as after a blocking acquire);
/// only `cancel` gives them back. Any cancelled reservation's stretch of the schedule becomes
/// usable by later arrivals, whatever the order of cancels: if it was the latest, the schedule
/// simply moves back over it; otherwise it becomes a *hole* that the next requests fill before
/// extending the schedule (see the guide's [Semantics](crate::guide::semantics)).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
///     .clock(clock.clone())
///     .build();
/// let first = limiter.reserve_n(1).unwrap();
/// assert_eq!(first.delay(), Duration::ZERO);
/// let second = limiter.reserve_n(1).unwrap();
/// let third = limiter.reserve_n(1).unwrap();
/// assert_eq!(second.delay(), Duration::from_millis(100));
/// second.cancel(); // not the latest: its 100 ms slot becomes a hole...
/// assert_eq!(limiter.reserve_n(1).unwrap().delay(), Duration::from_millis(100)); // ...reused
/// # let _ = third;
/// ```
#[must_use = "a reservation holds permits: wait for it, or cancel it to give them back"]
pub struct Reservation<'a> {
    ticket: Ticket,
    made_at: Nanos,
    clock: &'a AnyClock,
    cancel: Canceller<'a>,
}

/// How a reservation is given back: straight to the direct limiter's cell, or through a
/// fresh lookup of the (owned) key.
pub(crate) type Canceller<'a> = Box<dyn FnOnce(&Ticket) + Send + Sync + 'a>;

impl<'a> Reservation<'a> {
    pub(crate) fn new(
        ticket: Ticket,
        made_at: Nanos,
        clock: &'a AnyClock,
        cancel: Canceller<'a>,
    ) -> Self {
        Reservation {
            ticket,
            made_at,
            clock,
            cancel,
        }
    }

    /// The receipt (the loom models inspect its stretch).
    #[cfg(loom)]
    pub(crate) fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    /// When the reserved permits may be used, in the limiter clock's nanoseconds.
    ///
    /// ```
    /// # use tollgate::{ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Quota::per_second(1).unwrap()).clock(ManualClock::new()).build();
    /// assert_eq!(l.reserve_n(2).unwrap().ready_at(), 1_000_000_000);
    /// ```
    pub fn ready_at(&self) -> Nanos {
        self.ticket.ready_at
    }

    /// The wait this reservation was given when it was made (zero if it was ready at once).
    ///
    /// ```
    /// # use tollgate::{ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Quota::per_second(1).unwrap()).clock(ManualClock::new()).build();
    /// assert!(l.reserve_n(1).unwrap().delay().is_zero());
    /// ```
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.ticket.wait_from(self.made_at))
    }

    /// The wait left from now.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let l = RateLimiter::builder(Quota::per_second(1).unwrap()).clock(clock.clone()).build();
    /// let r = l.reserve_n(2).unwrap();
    /// clock.advance(Duration::from_millis(400));
    /// assert_eq!(r.remaining_delay(), Duration::from_millis(600));
    /// ```
    pub fn remaining_delay(&self) -> Duration {
        Duration::from_nanos(self.ticket.wait_from(self.clock.now()))
    }

    /// Blocks (through the limiter's clock) until the reservation is ready; returns the time
    /// slept.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::{ManualClock, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Quota::per_second(1).unwrap()).clock(ManualClock::new()).build();
    /// assert_eq!(l.reserve_n(2).unwrap().wait(), Duration::from_secs(1));
    /// ```
    pub fn wait(self) -> Duration {
        let wait = Duration::from_nanos(self.ticket.wait_from(self.clock.now()));
        if !wait.is_zero() {
            self.clock.sleep(wait);
        }
        wait
    }

    /// Gives the permits back: call it only if you did not (and will not) use them. Their
    /// stretch of the schedule that is still ahead of now becomes available to later arrivals
    /// at once, also if the reservation was ready immediately, and whatever other
    /// reservations were made or cancelled since. (Positions already in the past are gone: a
    /// limiter never grants permits backwards in time.)
    ///
    /// ```
    /// use tollgate::{Quota, RateLimiter};
    /// let l = RateLimiter::new(Quota::per_second(1).unwrap());
    /// let r = l.reserve_n(1).unwrap(); // ready at once...
    /// r.cancel();                    // ...but not used: refunded
    /// assert!(l.try_acquire());
    /// ```
    pub fn cancel(self) {
        (self.cancel)(&self.ticket);
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

/// Runs a cancel if dropped before [`disarm`](CancelOnDrop::disarm): what makes a dropped
/// async acquire give its booking back.
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

/// Sleeps on tokio's timer; a zero wait does not touch the timer at all (so an acquire that is
/// granted at once works even on a runtime without one).
#[cfg(feature = "tokio")]
pub(crate) async fn sleep(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}
