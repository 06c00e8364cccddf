//! The semaphore cell against a plain model: every order of takes, enqueues, releases,
//! cancels, polls and limit changes leaves the same state, grants in FIFO order with one
//! wake-up each, and never loses or duplicates a permit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Poll, Wake, Waker};

use proptest::prelude::*;

use super::*;

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    (c.clone(), Waker::from(c))
}

#[test]
fn waiters_are_served_in_order_and_a_large_head_holds_back_small_ones() {
    let cell = SemCell::new(4);
    assert!(matches!(cell.try_take(3), Take::Granted(_)));
    let (big_n, big_w) = counter();
    let (small_n, small_w) = counter();
    let Enqueued::Waiting(big) = cell.enqueue(4, Some(&big_w)) else {
        panic!("4 do not fit beside 3")
    };
    // One permit is free, but the head needs 4: the small one waits behind it.
    let Enqueued::Waiting(small) = cell.enqueue(1, Some(&small_w)) else {
        panic!("FIFO: behind the head")
    };
    assert!(matches!(cell.try_take(1), Take::Busy { .. }));
    cell.release(3);
    assert_eq!(big_n.0.load(Ordering::SeqCst), 1);
    assert_eq!(small_n.0.load(Ordering::SeqCst), 0);
    assert_eq!(cell.poll_waiter(big, &big_w), Poll::Ready(Ok(())));
    assert_eq!(cell.poll_waiter(small, &small_w), Poll::Pending);
    cell.release(4);
    assert_eq!(small_n.0.load(Ordering::SeqCst), 1);
    assert_eq!(cell.poll_waiter(small, &small_w), Poll::Ready(Ok(())));
    assert_eq!(
        cell.state(),
        State {
            in_flight: 1,
            ..State::fresh(4)
        }
    );
}

#[test]
fn a_cancelled_head_lets_the_ones_behind_it_in() {
    let cell = SemCell::new(2);
    assert!(matches!(cell.try_take(1), Take::Granted(_)));
    let Enqueued::Waiting(big) = cell.enqueue(2, None) else {
        panic!()
    };
    let (n, w) = counter();
    let Enqueued::Waiting(small) = cell.enqueue(1, Some(&w)) else {
        panic!()
    };
    assert!(matches!(cell.cancel(big), Cancelled::Removed { .. }));
    assert_eq!(n.0.load(Ordering::SeqCst), 1);
    assert_eq!(cell.cancel(small), Cancelled::Granted); // served before it gave up
    assert_eq!(cell.state().in_flight, 2);
}

#[test]
fn lowering_the_limit_keeps_held_permits_and_refuses_waiters_it_can_never_serve() {
    let cell = SemCell::new(4);
    assert!(matches!(cell.try_take(4), Take::Granted(_)));
    let (n, w) = counter();
    let Enqueued::Waiting(big) = cell.enqueue(3, Some(&w)) else {
        panic!()
    };
    let Enqueued::Waiting(small) = cell.enqueue(1, None) else {
        panic!()
    };
    cell.set_limit(2);
    assert_eq!(n.0.load(Ordering::SeqCst), 1);
    assert_eq!(cell.poll_waiter(big, &w), Poll::Ready(Err(2)));
    let s = cell.state();
    assert_eq!((s.in_flight, s.limit, s.queued), (4, 2, true)); // nothing revoked
    cell.release(2); // 2 in flight of 2: still no room
    assert_eq!(cell.poll_waiter(small, &w), Poll::Pending);
    cell.release(1);
    assert_eq!(cell.poll_waiter(small, &w), Poll::Ready(Ok(())));
    cell.set_limit(10);
    assert_eq!(cell.state().available(), 8);
}

#[test]
fn only_an_idle_cell_can_be_closed_and_a_closed_one_grants_nothing() {
    let cell = SemCell::new(1);
    assert!(matches!(cell.try_take(1), Take::Granted(_)));
    assert!(!cell.try_close());
    let Enqueued::Waiting(id) = cell.enqueue(1, None) else {
        panic!()
    };
    cell.release(1); // passes to the waiter
    assert!(!cell.try_close());
    assert_eq!(cell.cancel(id), Cancelled::Granted);
    cell.release(1);
    assert!(cell.try_close());
    assert_eq!(cell.try_take(1), Take::Closed);
    assert_eq!(cell.enqueue(1, None), Enqueued::Closed);
    assert!(!cell.try_close());
}

/// One step of a property run.
#[derive(Clone, Debug)]
enum Op {
    /// A non-waiting take of `n`.
    Take(u32),
    /// A waiting acquire of `n` (takes now or queues).
    Enqueue(u32),
    /// Releases the `i`-th holder (modulo the count), if any.
    Release(usize),
    /// Cancels the `i`-th waiter (modulo), if any; a served one releases what it got.
    Cancel(usize),
    /// Polls every waiter.
    PollAll,
    SetLimit(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..6).prop_map(Op::Take),
        (1u32..6).prop_map(Op::Enqueue),
        any::<usize>().prop_map(Op::Release),
        any::<usize>().prop_map(Op::Cancel),
        Just(Op::PollAll),
        (1u32..6).prop_map(Op::SetLimit),
    ]
}

/// The plain model: a counter, a limit and a FIFO list of requests.
#[derive(Debug)]
struct Model {
    limit: u32,
    in_flight: u32,
    /// Waiting requests: (id, need).
    queue: VecDeque<(u64, u32)>,
    /// Ids served, in order.
    served: Vec<u64>,
    refused: Vec<u64>,
}

impl Model {
    fn serve(&mut self) {
        while let Some(&(id, need)) = self.queue.front() {
            if self.in_flight + need > self.limit {
                break;
            }
            self.in_flight += need;
            self.queue.pop_front();
            self.served.push(id);
        }
    }
}

/// A waiter of the real cell, as the test tracks it.
struct Waiting {
    id: u64,
    n: u32,
    wakes: Arc<Count>,
    waker: Waker,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_cell_behaves_as_the_plain_model(limit in 1u32..6, ops in proptest::collection::vec(op(), 1..60)) {
        let cell = SemCell::new(limit);
        let mut m = Model { limit, in_flight: 0, queue: VecDeque::new(), served: Vec::new(), refused: Vec::new() };
        let mut holders: Vec<u32> = Vec::new(); // permits held, by holder
        let mut waiting: Vec<Waiting> = Vec::new();
        let mut served_order: Vec<u64> = Vec::new(); // ids, as the real wakers say
        let mut model_ids: Vec<u64> = Vec::new(); // model id of each real waiter, same index
        let mut next_model_id = 0u64;
        let mut max_limit = limit;
        for op in ops {
            let in_flight_before = m.in_flight;
            match op {
                Op::Take(n) => {
                    let expect = if n == 0 { None } else if n > m.limit { Some(false) }
                        else { Some(m.queue.is_empty() && m.in_flight + n <= m.limit) };
                    if n > 0 {
                        let got = cell.try_take(n);
                        prop_assert_eq!(matches!(got, Take::Granted(_)), expect == Some(true), "{:?}", got);
                        if expect == Some(true) { m.in_flight += n; holders.push(n); }
                        if n > m.limit { prop_assert_eq!(got, Take::TooMany { limit: m.limit }); }
                    }
                }
                Op::Enqueue(n) => {
                    let (wakes, waker) = counter();
                    let got = cell.enqueue(n, Some(&waker));
                    if n > m.limit {
                        prop_assert_eq!(got, Enqueued::TooMany { limit: m.limit });
                    } else if m.queue.is_empty() && m.in_flight + n <= m.limit {
                        prop_assert_eq!(got, Enqueued::Granted);
                        m.in_flight += n;
                        holders.push(n);
                    } else {
                        let Enqueued::Waiting(id) = got else { return Err(TestCaseError::fail(format!("{got:?}"))) };
                        m.queue.push_back((next_model_id, n));
                        model_ids.push(next_model_id);
                        next_model_id += 1;
                        waiting.push(Waiting { id, n, wakes, waker });
                    }
                }
                Op::Release(i) => {
                    if !holders.is_empty() {
                        let n = holders.swap_remove(i % holders.len());
                        cell.release(n);
                        m.in_flight -= n;
                        m.serve();
                    }
                }
                Op::Cancel(i) => {
                    if !waiting.is_empty() {
                        let i = i % waiting.len();
                        let w = waiting.swap_remove(i);
                        let mid = model_ids.swap_remove(i);
                        match cell.cancel(w.id) {
                            Cancelled::Removed { .. } => {
                                let pos = m.queue.iter().position(|&(id, _)| id == mid);
                                prop_assert!(pos.is_some(), "removed but the model served it");
                                m.queue.remove(pos.unwrap());
                                m.serve();
                            }
                            Cancelled::Granted => {
                                prop_assert!(m.served.contains(&mid));
                                served_order.push(mid);
                                // A dropped future that had been served hands its permits on.
                                cell.release(w.n);
                                m.in_flight -= w.n;
                                m.serve();
                            }
                            Cancelled::Refused { limit } => {
                                prop_assert!(m.refused.contains(&mid));
                                prop_assert!(w.n > limit);
                            }
                        }
                    }
                }
                Op::PollAll => {
                    let mut still = Vec::new();
                    let mut still_ids = Vec::new();
                    for (w, mid) in waiting.drain(..).zip(model_ids.drain(..)) {
                        match cell.poll_waiter(w.id, &w.waker) {
                            Poll::Pending => {
                                prop_assert!(m.queue.iter().any(|&(id, _)| id == mid));
                                prop_assert_eq!(w.wakes.0.load(Ordering::SeqCst), 0, "woken while waiting");
                                still.push(w);
                                still_ids.push(mid);
                            }
                            Poll::Ready(Ok(())) => {
                                prop_assert!(m.served.contains(&mid));
                                prop_assert_eq!(w.wakes.0.load(Ordering::SeqCst), 1, "one wake-up per grant");
                                served_order.push(mid);
                                holders.push(w.n);
                            }
                            Poll::Ready(Err(limit)) => {
                                prop_assert!(m.refused.contains(&mid) && w.n > limit);
                                prop_assert_eq!(w.wakes.0.load(Ordering::SeqCst), 1);
                            }
                        }
                    }
                    waiting = still;
                    model_ids = still_ids;
                }
                Op::SetLimit(l) => {
                    cell.set_limit(l);
                    m.limit = l;
                    max_limit = max_limit.max(l);
                    let refused: Vec<u64> = m.queue.iter().filter(|&&(_, n)| n > l).map(|&(id, _)| id).collect();
                    m.queue.retain(|&(_, n)| n <= l);
                    m.refused.extend(refused);
                    m.serve();
                }
            }
            let s = cell.state();
            prop_assert_eq!(s.in_flight, m.in_flight);
            prop_assert_eq!(s.limit, m.limit);
            prop_assert_eq!(s.queued, !m.queue.is_empty());
            // Never more than the limit, except what was held before it was lowered.
            prop_assert!(s.in_flight <= m.limit.max(in_flight_before));
            prop_assert!(s.in_flight <= max_limit);
            // No permit lost or duplicated: what holders, and served waiters not yet polled, hold.
            let unpolled: u32 = waiting.iter().zip(&model_ids)
                .filter(|(_, mid)| m.served.contains(mid)).map(|(w, _)| w.n).sum();
            prop_assert_eq!(holders.iter().sum::<u32>() + unpolled, s.in_flight);
        }
        // FIFO: the model's service order restricted to what the test saw served.
        let seen: Vec<u64> = m.served.iter().copied().filter(|id| served_order.contains(id)).collect();
        let mut sorted = served_order.clone();
        sorted.sort_by_key(|id| m.served.iter().position(|s| s == id));
        prop_assert_eq!(seen, sorted);
    }
}
