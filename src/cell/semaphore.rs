//! [`SemCell`]: one concurrency limit's state. An atomic word (in flight, limit, `QUEUED`,
//! `CLOSED`: `word`) for the lock-free fast path, and a mutex around the FIFO waiter queue
//! (`queue`) for the slow path.
//!
//! **The protocol.**
//! - *Take* (fast): one CAS adding `n` to in flight, only if it fits and `QUEUED` is clear
//!   (nobody passes a waiter).
//! - *Release* (fast): while `QUEUED` is clear, one CAS subtracting `n`. With `QUEUED` set, the
//!   release takes the mutex and, in the same CAS, subtracts `n` and adds the needs of the
//!   waiters it serves from the front (the permits pass to them without ever being free).
//! - *Enqueue* (slow): under the mutex, either take the permits (queue empty and they fit) or
//!   set `QUEUED` and join the back of the queue, in one CAS against the word read under the
//!   mutex. A fast release racing it changes the word, so one of the two CASes fails and is
//!   retried against the other's result: either the enqueue sees the freed permits, or the
//!   release sees `QUEUED` and serves the new waiter.
//! - While `QUEUED` is set the word changes only under the mutex (fast takes refuse, fast
//!   releases go to the mutex, eviction needs an idle word), and under the mutex `QUEUED` is
//!   set exactly when the queue is not empty.
//! - *Cancel*, *set_limit*: under the mutex, then the same serving step as a release.
//! - *Close* (a keyed store evicting the cell): under the mutex, with no refusal left unseen
//!   (a refused waiter still reads the cell when it next polls), one CAS from an idle word
//!   (nothing in flight, nobody queued) to `CLOSED`, after which no permit is granted on it. The store frees the
//!   cell only after taking and releasing its mutex ([`quiesce`](SemCell::quiesce)): the last
//!   releaser or canceller may still be unlocking it after its CAS made the word idle.
//!
//! Waiters are woken once, when served or refused, after the mutex is released.

use std::sync::PoisonError;
use std::task::{Poll, Waker};

use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering};

pub(crate) mod queue;
pub(crate) mod word;

use queue::{Queue, Status};
pub(crate) use word::{State, Take, MAX_LIMIT};

/// One limit's permits and waiters.
#[derive(Debug)]
pub(crate) struct SemCell {
    word: AtomicU64,
    slow: Mutex<Slow>,
}

/// What the mutex guards: the queue (allocated only while someone waits, so an idle keyed
/// cell stays small) and the next waiter id.
#[derive(Debug, Default)]
struct Slow {
    next_id: u64,
    queue: Option<Box<Queue>>,
}

/// What an enqueue did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// The permits were free and are taken.
    Granted,
    /// Queued as this waiter.
    Waiting(u64),
    /// More than the limit: refused, nothing queued.
    TooMany {
        /// The limit in force.
        limit: u32,
    },
    /// The cell was evicted (keyed): look the key up again.
    Closed,
}

/// What cancelling a waiter found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// It was still waiting and is gone; the waiters behind it were served if they now fit.
    /// With the cell's count and limit as it left (read under the cell's lock: once it has
    /// left, a keyed cell may be evicted, so the caller must not read the cell again).
    Removed {
        /// Permits in flight as it left.
        in_flight: u32,
        /// The limit as it left.
        limit: u32,
    },
    /// It had been served: its permits are in flight, the caller's to use or release.
    Granted,
    /// It had been refused (the limit was lowered below its request).
    Refused {
        /// The limit that refused it.
        limit: u32,
    },
}

impl SemCell {
    pub(crate) fn new(limit: u32) -> SemCell {
        debug_assert!((1..=MAX_LIMIT).contains(&limit));
        SemCell {
            word: AtomicU64::new(State::fresh(limit).pack()),
            slow: Mutex::new(Slow::default()),
        }
    }

    #[inline(always)]
    pub(crate) fn state(&self) -> State {
        State::unpack(self.word.load(Ordering::Acquire))
    }

    fn lock(&self) -> MutexGuard<'_, Slow> {
        self.slow.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `n >= 1` permits now, or says why not (the fast path: lock-free).
    #[inline(always)]
    pub(crate) fn try_take(&self, n: u32) -> Take {
        #[cfg(all(test, not(loom)))]
        test_takes::count();
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            match word::take(w, n) {
                Take::Granted(new) => {
                    match self.word.compare_exchange_weak(
                        w,
                        new,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Take::Granted(new),
                        Err(seen) => w = seen,
                    }
                }
                refused => return refused,
            }
        }
    }

    /// Gives back `n >= 1` permits held; serves waiters they let in.
    #[inline(always)]
    pub(crate) fn release(&self, n: u32) {
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            if State::unpack(w).queued {
                return self.release_slow(n);
            }
            match self.word.compare_exchange_weak(
                w,
                word::give_back(w, n),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(seen) => w = seen,
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn release_slow(&self, n: u32) {
        let mut wakers = Vec::new();
        {
            let mut slow = self.lock();
            self.settle(&mut slow, n, None, &mut wakers);
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Under the mutex: subtracts `released` (and sets the limit to `limit`, if given), and
    /// serves the waiters that then fit, from the front, in one CAS; `QUEUED` is left set
    /// exactly when some remain. Frees the queue when no one needs it any more.
    fn settle(&self, slow: &mut Slow, released: u32, limit: Option<u32>, wakers: &mut Vec<Waker>) {
        if let (Some(l), Some(q)) = (limit, slow.queue.as_mut()) {
            q.refuse_over(l, wakers);
        }
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            let mut s = State::unpack(word::give_back(w, released));
            if let Some(l) = limit {
                s.limit = l;
            }
            let (k, queued) = match slow.queue.as_deref() {
                Some(q) if !q.is_empty() => {
                    let (k, in_flight) = q.servable(s.in_flight, s.limit);
                    s.in_flight = in_flight;
                    (k, k < q.len())
                }
                _ => (0, false),
            };
            s.queued = queued;
            match self
                .word
                .compare_exchange_weak(w, s.pack(), Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if let Some(q) = slow.queue.as_mut() {
                        q.serve(k, wakers);
                    }
                    break;
                }
                Err(seen) => w = seen,
            }
        }
        if slow.queue.as_deref().is_some_and(Queue::is_unused) {
            slow.queue = None;
        }
    }

    /// Takes `n >= 1` permits now if nobody waits and they fit, else queues for them (FIFO),
    /// with `waker` to wake when served.
    pub(crate) fn enqueue(&self, n: u32, waker: Option<&Waker>) -> Enqueued {
        let mut slow = self.lock();
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            let s = State::unpack(w);
            if s.closed {
                return Enqueued::Closed;
            }
            if n > s.limit {
                return Enqueued::TooMany { limit: s.limit };
            }
            let new = if !s.queued && s.fits(n) {
                State {
                    in_flight: s.in_flight + n,
                    ..s
                }
            } else {
                State { queued: true, ..s }
            };
            if new != s {
                if let Err(seen) = self.word.compare_exchange_weak(
                    w,
                    new.pack(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    w = seen;
                    continue;
                }
            }
            if new.in_flight != s.in_flight {
                return Enqueued::Granted;
            }
            // Queued: `QUEUED` is set (by this CAS or before), and stays set under the mutex.
            let id = slow.next_id;
            slow.next_id += 1;
            slow.queue
                .get_or_insert_with(Box::default)
                .enqueue(id, n, waker.cloned());
            return Enqueued::Waiting(id);
        }
    }

    /// Whether waiter `id` was served (`Ok`), refused (`Err(limit)`), or waits on (then
    /// `waker` is the one to wake).
    pub(crate) fn poll_waiter(&self, id: u64, waker: &Waker) -> Poll<Result<(), u32>> {
        let mut slow = self.lock();
        let Some(q) = slow.queue.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let r = match q.status(id) {
            Status::Waiting => {
                q.set_waker(id, waker);
                return Poll::Pending;
            }
            Status::Granted => Ok(()),
            Status::Refused { limit } => Err(limit),
        };
        if q.is_unused() {
            slow.queue = None;
        }
        Poll::Ready(r)
    }

    /// Waiter `id` gives up. If it was still waiting it leaves the queue, and whoever it held
    /// up behind it is served; if it had been served, the permits are the caller's.
    pub(crate) fn cancel(&self, id: u64) -> Cancelled {
        let mut wakers = Vec::new();
        let r = {
            let mut slow = self.lock();
            let status = match slow.queue.as_mut() {
                None => Status::Granted,
                Some(q) => match q.status(id) {
                    Status::Waiting => {
                        q.leave(id);
                        Status::Waiting
                    }
                    other => other,
                },
            };
            // A departure from anywhere may empty the queue or unblock the front: settle.
            self.settle(&mut slow, 0, None, &mut wakers);
            match status {
                Status::Waiting => {
                    let s = self.state();
                    Cancelled::Removed {
                        in_flight: s.in_flight,
                        limit: s.limit,
                    }
                }
                Status::Granted => Cancelled::Granted,
                Status::Refused { limit } => Cancelled::Refused { limit },
            }
        };
        wakers.into_iter().for_each(Waker::wake);
        r
    }

    /// Sets the limit (`1..=MAX_LIMIT`). Held permits stay held; waiters are served in order
    /// as soon as they fit under the new limit, and those asking for more than it are refused.
    pub(crate) fn set_limit(&self, limit: u32) {
        debug_assert!((1..=MAX_LIMIT).contains(&limit));
        let mut wakers = Vec::new();
        {
            let mut slow = self.lock();
            self.settle(&mut slow, 0, Some(limit), &mut wakers);
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Claims an idle cell for eviction: after this returns `true` no permit is ever granted
    /// on it, and nobody holds or waits for one, nor holds a refusal it has not seen yet.
    pub(crate) fn try_close(&self) -> bool {
        let mut w = self.word.load(Ordering::Acquire);
        if !State::unpack(w).is_idle() {
            return false; // busy: decided without the mutex
        }
        // A refused waiter leaves the queue (and the word idle) before it polls: its record
        // keeps the queue, and the cell it will read, until then. The mutex keeps a refusal
        // from being made between this look and the CAS.
        let slow = self.lock();
        if slow.queue.is_some() {
            return false;
        }
        loop {
            let s = State::unpack(w);
            if !s.is_idle() {
                return false;
            }
            let closed = State { closed: true, ..s };
            match self.word.compare_exchange_weak(
                w,
                closed.pack(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(seen) => w = seen,
            }
        }
    }

    /// Waits out whoever still holds the mutex (a closed cell's last releaser or canceller,
    /// unlocking after its CAS left the word idle), so that the cell can be freed.
    pub(crate) fn quiesce(&self) {
        drop(self.lock());
    }
}

/// Counts [`SemCell::try_take`] calls on this thread (unit tests only): how the limiters'
/// tests check that a non-waiting acquire decides from one take.
#[cfg(all(test, not(loom)))]
pub(crate) mod test_takes {
    use std::cell::Cell;

    thread_local!(static TAKES: Cell<u64> = const { Cell::new(0) });

    pub(super) fn count() {
        TAKES.with(|t| t.set(t.get() + 1));
    }

    /// The takes `f` ran on this thread.
    pub(crate) fn during(f: impl FnOnce()) -> u64 {
        let before = TAKES.with(Cell::get);
        f();
        TAKES.with(Cell::get) - before
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
