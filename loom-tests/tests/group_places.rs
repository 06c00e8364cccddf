//! The Redis grouper's places (`src/redis/hot/group.rs`, `Grouper`): at most `IN_FLIGHT` calls
//! go at once; a check that claims a place goes alone, one that cannot queues (the push and the
//! length stored under the queue's lock) and pumps; a call that ends gives its place back and
//! pumps; a pump, while checks are queued and a place can be claimed, takes up to `max_keys`
//! of them and sends them as one group from a spawned task, which gives the place back when
//! its call ends (an empty take gives the place back at once and looks again).
//!
//! The Redis backend cannot be built under loom (it needs tokio), so this is a model of the
//! protocol, step for step as `Grouper::{claim, release, pump, take, send, check}` write it,
//! with the same orderings. A "call" is a point where the thread may be preempted; a spawned
//! send is a loom thread (joined by its spawner when the spawner ends, which adds no order to
//! the protocol's steps); a queued check's wait for its reply is left out (the thread goes on,
//! as a future dropped while queued would). Left out too: the branch of `pump` with no runtime
//! to spawn on (it answers the group at once, gives the place back and loops, all on the
//! pumping thread).
//!
//! Three checks, one thread each, the model's own thread running the first (loom allows five
//! threads; the first place is always a lone check's, so at most two checks queue and at most
//! two sends are spawned). The bound is 1 or 2: with 1, two checks can be queued at once, so pumps take groups of one or of two,
//! take what another pump left, and race an ending call for the same place; with 2 (the real
//! `IN_FLIGHT`), one check queues behind two calls whose two ends race to pump it, one of them
//! taking an empty queue. The argument (a check raises the length then claims, a call lowers
//! the count then reads the length, all `SeqCst`) does not depend on the bound.
//!
//! Properties, in every interleaving:
//! - no check is stranded: every queued check is taken (sent in a group) exactly once;
//! - never more calls at once (lone or group) than the bound;
//! - at the end no place is held, the length is 0 and the queue is empty.
//!
//! Fails with a queueing check that does not pump after it queued
//! (`a_queued_check_that_does_not_pump_is_caught`): the call it could not claim a place from
//! can end, and find the length still 0, between its claim and its push.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Mutex;
use loom::thread::JoinHandle;
use tollgate_loom_tests::model;

// std's `Arc` for the grouper, as group.rs has it: loom's cannot be a method receiver
// (`self: &Arc<Self>`), and what the model checks is the counters and the queue, all loom's.

/// The sends a thread spawned, joined when it ends.
type Sends = Vec<JoinHandle<()>>;

/// Which rare paths some interleaving reached (plain std atomics: outside the model).
#[derive(Default)]
struct Seen {
    queued: AtomicBool,
    empty_take: AtomicBool,
    group_of_two: AtomicBool,
}

impl Seen {
    fn mark(flag: &AtomicBool) {
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn get(flag: &AtomicBool) -> bool {
        flag.load(std::sync::atomic::Ordering::Relaxed)
    }
}

struct Grouper {
    /// `IN_FLIGHT`.
    bound: usize,
    max_keys: usize,
    in_flight: AtomicUsize,
    queued: AtomicUsize,
    /// Check ids, oldest first.
    queue: Mutex<Vec<usize>>,
    /// How often each check id was taken for a group.
    taken: Vec<AtomicUsize>,
    /// Calls in progress (lone or group), counted apart from `in_flight`.
    calls: AtomicUsize,
    seen: Arc<Seen>,
    /// The broken protocol: a check that queued leaves the pumping to calls that end.
    no_pump_after_queueing: bool,
}

impl Grouper {
    fn new(bound: usize, max_keys: usize, checks: usize, seen: Arc<Seen>) -> Grouper {
        Grouper {
            bound,
            max_keys,
            in_flight: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            queue: Mutex::new(Vec::new()),
            taken: (0..checks).map(|_| AtomicUsize::new(0)).collect(),
            calls: AtomicUsize::new(0),
            seen,
            no_pump_after_queueing: false,
        }
    }

    /// A call to Redis: never more than `bound` at once.
    fn call(&self) {
        let at_once = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(at_once <= self.bound, "{at_once} calls at once");
        loom::thread::yield_now();
        self.calls.fetch_sub(1, Ordering::SeqCst);
    }

    /// `claim`.
    fn claim(&self) -> bool {
        let mut c = self.in_flight.load(Ordering::SeqCst);
        while c < self.bound {
            match self
                .in_flight
                .compare_exchange_weak(c, c + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
        false
    }

    /// `release`.
    fn release(self: &Arc<Self>, sends: &mut Sends) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.pump(sends);
    }

    /// `pump`: each group sent from a spawned thread.
    fn pump(self: &Arc<Self>, sends: &mut Sends) {
        while self.queued.load(Ordering::SeqCst) > 0 && self.claim() {
            let group = self.take();
            if group.is_empty() {
                Seen::mark(&self.seen.empty_take);
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let g = self.clone();
            sends.push(loom::thread::spawn(move || g.send(group)));
        }
    }

    /// `take`.
    fn take(&self) -> Vec<usize> {
        let mut q = self.queue.lock().unwrap();
        let k = q.len().min(self.max_keys);
        let group: Vec<usize> = q.drain(..k).collect();
        self.queued.store(q.len(), Ordering::SeqCst);
        group
    }

    /// `send`, on the spawned thread: the call, each check answered, the place given back.
    fn send(self: Arc<Self>, group: Vec<usize>) {
        if group.len() > 1 {
            Seen::mark(&self.seen.group_of_two);
        }
        self.call();
        for id in group {
            self.taken[id].fetch_add(1, Ordering::SeqCst);
        }
        let mut sends = Sends::new();
        self.release(&mut sends);
        join(sends);
    }

    /// `check` for check `id`: returns whether it queued.
    fn check(self: &Arc<Self>, id: usize, sends: &mut Sends) -> bool {
        if self.claim() {
            // The lone call, then `Place`'s drop.
            self.call();
            self.release(sends);
            return false;
        }
        Seen::mark(&self.seen.queued);
        {
            let mut q = self.queue.lock().unwrap();
            q.push(id);
            self.queued.store(q.len(), Ordering::SeqCst);
        }
        if !self.no_pump_after_queueing {
            self.pump(sends);
        }
        true
    }
}

fn join(sends: Sends) {
    for s in sends {
        s.join().unwrap();
    }
}

/// Runs three checks, one thread each, under `bound` places and groups of at most `max_keys`,
/// checks the properties, and returns which rare paths were reached.
fn run(bound: usize, max_keys: usize) -> Arc<Seen> {
    run_with(bound, max_keys, false)
}

/// [`run`], with the queueing check's pump left out if `no_pump_after_queueing`.
fn run_with(bound: usize, max_keys: usize, no_pump_after_queueing: bool) -> Arc<Seen> {
    const CHECKS: usize = 3;
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    model(move || {
        let g = Arc::new(Grouper {
            no_pump_after_queueing,
            ..Grouper::new(bound, max_keys, CHECKS, s.clone())
        });
        // loom takes a cell's initial value for a non-`SeqCst` store, which a `SeqCst` load may
        // still read after another thread's newer `SeqCst` store it has not synchronized with
        // (C++ forbids it: the initial value happens before that store). Without this, an
        // ending call's pump reads the length as the initial 0 after the queueing check raised
        // it and that check failed to claim: a stranded check no real run can have. The same
        // value stored `SeqCst` before any thread starts closes that gap.
        g.queued.store(0, Ordering::SeqCst);
        let one = |g: &Arc<Grouper>, id| {
            let mut sends = Sends::new();
            let queued = g.check(id, &mut sends);
            join(sends);
            queued
        };
        // The model's own thread is the first check's: five threads in all with two sends.
        let threads: Vec<_> = (1..CHECKS)
            .map(|id| {
                let g = g.clone();
                loom::thread::spawn(move || one(&g, id))
            })
            .collect();
        let mut queued = vec![one(&g, 0)];
        queued.extend(threads.into_iter().map(|t| t.join().unwrap()));
        for (id, q) in queued.iter().enumerate() {
            let taken = g.taken[id].load(Ordering::SeqCst);
            assert_eq!(
                taken,
                usize::from(*q),
                "check {id} queued {q}, taken {taken} times"
            );
        }
        assert_eq!(g.in_flight.load(Ordering::SeqCst), 0, "a place still held");
        assert_eq!(g.queued.load(Ordering::SeqCst), 0, "a length left");
        assert!(g.queue.lock().unwrap().is_empty(), "a check left queued");
    });
    seen
}

#[test]
fn one_place_groups_of_one_each_queued_check_is_sent_once() {
    let seen = run(1, 1);
    assert!(Seen::get(&seen.queued) && Seen::get(&seen.empty_take));
}

#[test]
fn one_place_groups_of_two_each_queued_check_is_sent_once() {
    let seen = run(1, 2);
    assert!(Seen::get(&seen.queued) && Seen::get(&seen.group_of_two));
}

#[test]
fn two_places_each_queued_check_is_sent_once() {
    let seen = run(2, 2);
    assert!(Seen::get(&seen.queued) && Seen::get(&seen.empty_take));
}

#[test]
#[should_panic(expected = "taken 0 times")]
fn a_queued_check_that_does_not_pump_is_caught() {
    run_with(1, 1, true);
}
