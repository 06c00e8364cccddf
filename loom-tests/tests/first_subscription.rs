//! The denial cache's subscription start (`src/redis/hot/invalidate.rs`): `Listener::start`
//! makes its `Notified` future and enables it (registered with the `Notify`), then loads
//! `attempted` and waits only if it is still false; the listening task, when its first attempt
//! to subscribe ends (made or not), swaps `attempted` to true and, if it was the first to,
//! calls `notify_waiters`.
//!
//! The Redis backend cannot be built under loom (it needs tokio), so this is a model of the
//! protocol, step for step as `Listener::start` and `Shared::first_attempt_ended` write it,
//! with the same orderings; tokio's `Notify` is modelled by what `enable` and
//! `notify_waiters` do: each takes the waiter list's mutex, `enable` to add the future,
//! `notify_waiters` to wake every future in it. Two starts (a limiter connected from two
//! tasks) and the listening task's first attempt, one thread each; the attempt ends twice
//! (a failed attempt, then a made subscription), as `listen` may.
//!
//! Property, in every interleaving: no start waits forever (a start that found `attempted`
//! false is woken). Fails with `attempted` loaded before the future is enabled
//! (`checking_before_enabling_is_caught`): the task's swap and wake can both fall between the
//! two, and the start waits for a wake that already came.

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use tollgate_loom_tests::model;

struct Shared {
    attempted: AtomicBool,
    /// The `Notify`'s waiter list: each enabled start's id, and whether it was woken.
    waiters: Mutex<Vec<(usize, bool)>>,
    /// Break the protocol: load `attempted` before enabling.
    check_first: bool,
}

impl Shared {
    fn enable(&self, id: usize) {
        self.waiters.lock().unwrap().push((id, false));
    }

    fn notify_waiters(&self) {
        for w in self.waiters.lock().unwrap().iter_mut() {
            w.1 = true;
        }
    }

    /// `Listener::start` after its spawn: whether it waited (then it must be woken).
    fn start(&self, id: usize) -> bool {
        if self.check_first {
            let attempted = self.attempted.load(Ordering::Acquire);
            self.enable(id);
            return !attempted;
        }
        self.enable(id);
        !self.attempted.load(Ordering::Acquire)
    }

    fn first_attempt_ended(&self) {
        if !self.attempted.swap(true, Ordering::AcqRel) {
            self.notify_waiters();
        }
    }

    fn woken(&self, id: usize) -> bool {
        self.waiters
            .lock()
            .unwrap()
            .iter()
            .any(|&(w, woken)| w == id && woken)
    }
}

fn race(check_first: bool) {
    model(move || {
        let s = Arc::new(Shared {
            attempted: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
            check_first,
        });
        let task = {
            let s = s.clone();
            thread::spawn(move || {
                s.first_attempt_ended();
                s.first_attempt_ended();
            })
        };
        let other = {
            let s = s.clone();
            thread::spawn(move || s.start(1))
        };
        let waited = [s.start(0), other.join().unwrap()];
        task.join().unwrap();
        for (id, waited) in waited.into_iter().enumerate() {
            assert!(
                !waited || s.woken(id),
                "start {id} waits for a wake that came before"
            );
        }
    });
}

#[test]
fn starts_race_the_first_attempt() {
    race(false);
}

#[test]
#[should_panic(expected = "waits for a wake")]
fn checking_before_enabling_is_caught() {
    race(true);
}
