//! The semaphore's waiter queue: FIFO, one entry per waiting request, used only under the
//! cell's mutex. Pure data: the cell decides with it and the word together.
//!
//! Each waiter gets an id, strictly increasing per cell, so the queue is sorted by id and a
//! waiter finds its entry by binary search. Entries leave the queue in two ways only: served
//! (from the front, by whoever frees permits) or removed by the waiter itself (cancel), so a
//! waiter whose entry is gone was served, unless its id is in `refused` (the limit was lowered
//! below its request: it could never be served).

use std::collections::VecDeque;
use std::task::Waker;

/// One waiting request.
#[derive(Debug)]
struct Entry {
    id: u64,
    need: u32,
    waker: Option<Waker>,
}

/// Where a waiter stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Still queued.
    Waiting,
    /// Served: its permits are counted in flight and are the waiter's.
    Granted,
    /// Refused: it asks for more than the limit, which was lowered below it while it waited.
    Refused { limit: u32 },
}

/// The queue, and the refused waiters that have not looked yet.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    waiting: VecDeque<Entry>,
    refused: Vec<(u64, u32)>,
}

impl Queue {
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Nothing kept for anyone: the queue can be freed.
    pub(crate) fn is_unused(&self) -> bool {
        self.waiting.is_empty() && self.refused.is_empty()
    }

    /// Queues a request for `need` permits at the back, as waiter `id` (greater than every id
    /// queued before: the cell counts them).
    pub(crate) fn enqueue(&mut self, id: u64, need: u32, waker: Option<Waker>) {
        debug_assert!(self.waiting.back().is_none_or(|e| e.id < id));
        self.waiting.push_back(Entry { id, need, waker });
    }

    fn position(&self, id: u64) -> Option<usize> {
        self.waiting.binary_search_by_key(&id, |e| e.id).ok()
    }

    /// Where waiter `id` stands; a refusal is reported once (then forgotten).
    pub(crate) fn status(&mut self, id: u64) -> Status {
        if self.position(id).is_some() {
            return Status::Waiting;
        }
        match self.refused.iter().position(|&(r, _)| r == id) {
            Some(i) => Status::Refused {
                limit: self.refused.swap_remove(i).1,
            },
            None => Status::Granted,
        }
    }

    /// Replaces waiter `id`'s waker (it was polled by another task, or for the first time).
    pub(crate) fn set_waker(&mut self, id: u64, waker: &Waker) {
        if let Some(i) = self.position(id) {
            let e = &mut self.waiting[i];
            if !e.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                e.waker = Some(waker.clone());
            }
        }
    }

    /// Removes waiting request `id` (its waiter gave up); whether it was at the front.
    pub(crate) fn leave(&mut self, id: u64) -> Option<bool> {
        let i = self.position(id)?;
        self.waiting.remove(i);
        Some(i == 0)
    }

    /// How many requests from the front fit, in order, when `in_flight` permits are held of
    /// `limit`, and the permits in flight once they are served. Stops at the first that does
    /// not fit: the ones behind it wait (no small request passes a large one).
    pub(crate) fn servable(&self, mut in_flight: u32, limit: u32) -> (usize, u32) {
        let mut k = 0;
        for e in &self.waiting {
            if u64::from(in_flight) + u64::from(e.need) > u64::from(limit) {
                break;
            }
            in_flight += e.need;
            k += 1;
        }
        (k, in_flight)
    }

    /// Pops the first `k` requests (served), collecting their wakers.
    pub(crate) fn serve(&mut self, k: usize, wakers: &mut Vec<Waker>) {
        wakers.extend(self.waiting.drain(..k).filter_map(|e| e.waker));
    }

    /// Refuses every request for more than `limit` (it could never be served), collecting
    /// their wakers.
    pub(crate) fn refuse_over(&mut self, limit: u32, wakers: &mut Vec<Waker>) {
        let refused = &mut self.refused;
        self.waiting.retain_mut(|e| {
            if e.need <= limit {
                return true;
            }
            refused.push((e.id, limit));
            wakers.extend(e.waker.take());
            false
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn serves_in_order_and_stops_at_the_first_that_does_not_fit() {
        let mut q = Queue::default();
        let a = 1;
        q.enqueue(a, 2, None);
        let b = 2;
        q.enqueue(b, 3, None);
        let c = 3;
        q.enqueue(c, 1, None);
        // 1 in flight of 4: `a` fits (3), `b` does not (6), so `c` waits behind it.
        assert_eq!(q.servable(1, 4), (1, 3));
        q.serve(1, &mut Vec::new());
        assert_eq!(q.status(a), Status::Granted);
        assert_eq!(
            (q.status(b), q.status(c)),
            (Status::Waiting, Status::Waiting)
        );
        assert_eq!(q.servable(0, 4), (2, 4));
    }

    #[test]
    fn a_removed_head_lets_the_next_be_served() {
        let mut q = Queue::default();
        let a = 4;
        q.enqueue(a, 4, None);
        let b = 5;
        q.enqueue(b, 1, None);
        assert_eq!(q.servable(1, 4), (0, 1));
        assert_eq!(q.leave(a), Some(true));
        assert_eq!(q.leave(a), None);
        assert_eq!(q.servable(1, 4), (1, 2));
        assert_eq!(q.leave(b), Some(true));
        assert!(q.is_unused());
    }

    #[test]
    fn refusals_are_reported_once_and_kept_until_then() {
        let mut q = Queue::default();
        let a = 6;
        q.enqueue(a, 5, None);
        let b = 7;
        q.enqueue(b, 2, None);
        q.refuse_over(3, &mut Vec::new());
        assert!(!q.is_unused());
        assert_eq!(q.status(a), Status::Refused { limit: 3 });
        assert_eq!(q.status(b), Status::Waiting);
        q.serve(1, &mut Vec::new());
        assert!(q.is_unused());
    }

    #[test]
    fn servable_saturates_instead_of_wrapping() {
        let mut q = Queue::default();
        q.enqueue(8, u32::MAX, None);
        assert_eq!(q.servable(u32::MAX, u32::MAX), (0, u32::MAX));
    }
}
