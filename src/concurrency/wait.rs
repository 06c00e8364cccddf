//! How every acquire of a concurrency limiter runs on a cell: a non-waiting attempt, then (for
//! the waiting forms) a place in the cell's FIFO queue, held by a [`Waiter`] until it is
//! served, refused, timed out or dropped. The blocking forms poll the same waiter with a
//! thread-parking waker; the async ones await it.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::cell::semaphore::{Cancelled, Enqueued, SemCell, Take};
use crate::concurrency::permit::Held;
use crate::concurrency::pinned::Pinned;
use crate::concurrency::report::WaitReport;
use crate::decision::AcquireError;
use crate::meter::Meter;

/// The first step of an acquire.
pub(crate) enum Step<'a> {
    /// Decided at once: the permits, or a refusal.
    Done(Result<Held, AcquireError>),
    /// Queued: await (or block on) the waiter.
    Wait(Waiter<'a>),
    /// The cell was evicted under the caller (keyed): look the key up again.
    Closed,
}

/// `n` in the cell's width. The public count is `u64`, the cell's `u32` (two halves of one
/// atomic word); a count past `u32::MAX` is above every limit (`MAX_LIMIT < u32::MAX`), so it
/// saturates to one the cell refuses the same way (`TooMany`, or `Closed` first on an evicted
/// cell). Permits are granted only for a count that fitted, so a grant's count is exact; a
/// refusal names the caller's `n` ([`exceeds`]).
#[inline(always)]
pub(crate) fn cell_count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(crate) fn exceeds(n: u64, limit: u32) -> AcquireError {
    AcquireError::ExceedsBurst {
        requested: n,
        burst: u64::from(limit),
    }
}

/// At capacity with `in_flight` of `limit` held (the cell's counts).
#[inline(always)]
pub(crate) fn busy(in_flight: u32, limit: u32) -> AcquireError {
    AcquireError::AtCapacity {
        in_flight: u64::from(in_flight),
        limit: u64::from(limit),
    }
}

pub(crate) fn at_capacity(cell: &SemCell) -> AcquireError {
    let s = cell.state();
    busy(s.in_flight, s.limit)
}

/// The non-waiting acquire of `n >= 1` permits of `cell`, decided from one take when it is
/// a grant or "at capacity" (the refusal then gives the counts that take saw, with no second
/// look). `None` for the rare rest, which the caller leaves to [`begin`]: more than the
/// limit, or an evicted cell (keyed: look the key up again).
#[inline(always)]
pub(crate) fn take_now(cell: &SemCell, n: u64) -> Option<Result<Held, AcquireError>> {
    debug_assert!(n > 0);
    let k = cell_count(n);
    match cell.try_take(k) {
        Take::Granted(_) => Some(Ok(Held::new(cell, k))),
        Take::Busy { in_flight, limit } => Some(Err(busy(in_flight, limit))),
        // Rare, and out of line in `begin` (which takes again): kept off the hot paths.
        Take::TooMany { .. } | Take::Closed => None,
    }
}

/// Takes `n` permits of `cell` now, or (if `queue`) queues for them. `n = 0` is an empty
/// permit at once; more than the limit is refused at once, waiting or not.
#[inline]
pub(crate) fn begin(cell: &SemCell, n: u64, queue: bool) -> Step<'_> {
    if n == 0 {
        return Step::Done(Ok(Held::new(cell, 0)));
    }
    let k = cell_count(n);
    match cell.try_take(k) {
        Take::Granted(_) => Step::Done(Ok(Held::new(cell, k))),
        Take::TooMany { limit } => Step::Done(Err(exceeds(n, limit))),
        Take::Closed => Step::Closed,
        Take::Busy { in_flight, limit } if !queue => Step::Done(Err(busy(in_flight, limit))),
        Take::Busy { .. } => match cell.enqueue(k, None) {
            Enqueued::Granted => Step::Done(Ok(Held::new(cell, k))),
            Enqueued::TooMany { limit } => Step::Done(Err(exceeds(n, limit))),
            Enqueued::Closed => Step::Closed,
            Enqueued::Waiting(id) => Step::Wait(Waiter {
                cell: Pinned::new(cell),
                id,
                n: k,
                done: false,
                _cell: PhantomData,
            }),
        },
    }
}

/// A queued request for `n` permits of a cell: a future of the permits (or the refusal, if
/// the limit is lowered below `n`). Dropping it before it finished gives its place up, or,
/// if it had been served meanwhile, gives the permits back, so they pass to the next waiter.
pub(crate) struct Waiter<'a> {
    /// Used until the waiter is `done`: while it is queued, served, or refused without having
    /// seen it yet, which keeps a keyed cell from eviction ([`Pinned`]'s rules).
    cell: Pinned<SemCell>,
    id: u64,
    /// Exact: a count past the cell's width is refused before it queues.
    n: u32,
    done: bool,
    _cell: PhantomData<&'a SemCell>,
}

impl Waiter<'_> {
    fn cell(&self) -> &SemCell {
        self.cell.get()
    }

    /// Stops waiting: the permits if they were granted meanwhile, else the refusal.
    pub(crate) fn give_up(mut self) -> Result<Held, AcquireError> {
        self.done = true;
        let cell = self.cell();
        match cell.cancel(self.id) {
            Cancelled::Granted => Ok(Held::new(cell, self.n)),
            Cancelled::Refused { limit } => Err(exceeds(u64::from(self.n), limit)),
            // Not `at_capacity(cell)`: having left the queue, it may not read the cell again.
            Cancelled::Removed { in_flight, limit } => Err(busy(in_flight, limit)),
        }
    }
}

impl Future for Waiter<'_> {
    type Output = Result<Held, AcquireError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (id, n) = (self.id, self.n);
        let r = match self.cell().poll_waiter(id, cx.waker()) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(())) => Ok(Held::new(self.cell(), n)),
            Poll::Ready(Err(limit)) => Err(exceeds(u64::from(n), limit)),
        };
        self.done = true;
        Poll::Ready(r)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if !self.done {
            let cell = self.cell();
            if cell.cancel(self.id) == Cancelled::Granted {
                cell.release(self.n);
            }
        }
    }
}

/// Wakes a thread parked in [`block`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waiting acquire of `n` permits up to its wait, counted in `meter` as one wait: `begin`
/// (told whether to queue: not for a zero `timeout`, which only tries) decides at once or
/// queues, and `closed` decides instead when the cell was closed under the call. Finish it
/// with [`Acquire::block`] or [`Acquire::wait_async`].
pub(crate) fn start<'m, 'c>(
    meter: &'m Meter,
    n: u64,
    timeout: Option<Duration>,
    begin: impl FnOnce(bool) -> Step<'c>,
    closed: impl FnOnce() -> Result<Held, AcquireError>,
) -> Acquire<'m, 'c> {
    let queue = timeout.is_none_or(|t| !t.is_zero());
    let mut report = WaitReport::new(meter, n);
    let first = match begin(queue) {
        Step::Done(r) => Ok(r),
        Step::Wait(w) => {
            report.queued();
            Err(w)
        }
        Step::Closed => Ok(closed()),
    };
    Acquire {
        report,
        first,
        timeout,
    }
}

/// A waiting acquire begun by [`start`]: decided already, or queued.
pub(crate) struct Acquire<'m, 'c> {
    report: WaitReport<'m>,
    /// The decision made at once, or the waiter to wait on.
    first: Result<Result<Held, AcquireError>, Waiter<'c>>,
    timeout: Option<Duration>,
}

impl Acquire<'_, '_> {
    /// The acquire's result, blocking the thread while it waits.
    pub(crate) fn block(self) -> Result<Held, AcquireError> {
        let timeout = self.timeout;
        self.report
            .end(self.first.unwrap_or_else(|w| block(w, timeout)))
    }

    /// The acquire's result, awaited on tokio's timer while it waits.
    #[cfg(feature = "tokio")]
    pub(crate) async fn wait_async(self) -> Result<Held, AcquireError> {
        let r = match self.first {
            Ok(r) => r,
            Err(w) => wait_async(w, self.timeout).await,
        };
        self.report.end(r)
    }
}

/// Parks the thread until the waiter finishes, or until `timeout` has passed (then gives up).
pub(crate) fn block(mut w: Waiter<'_>, timeout: Option<Duration>) -> Result<Held, AcquireError> {
    // A deadline past `Instant`'s range is no deadline.
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(r) = Pin::new(&mut w).poll(&mut cx) {
            return r;
        }
        match deadline {
            None => std::thread::park(),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return w.give_up();
                }
                std::thread::park_timeout(left);
            }
        }
    }
}

/// Awaits the waiter, for at most `timeout` (then gives up) on tokio's timer.
#[cfg(feature = "tokio")]
pub(crate) async fn wait_async(
    mut w: Waiter<'_>,
    timeout: Option<Duration>,
) -> Result<Held, AcquireError> {
    match timeout {
        None => (&mut w).await,
        Some(t) => match tokio::time::timeout(t, &mut w).await {
            Ok(r) => r,
            Err(_) => w.give_up(),
        },
    }
}
