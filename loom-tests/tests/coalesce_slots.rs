//! The Redis coalescer's slot words (`src/redis/hot/coalesce.rs`, `Entries`): a check alone on
//! its slot claims the slot's word with one compare-and-swap and skips the shard lock and the
//! map; any other check counts itself on the word and takes the locked path, where it queues
//! behind its key's call in flight, parks behind the slot's lone check if that check carries
//! its tag, or becomes its key's call in flight.
//!
//! The Redis backend cannot be built under loom (it needs tokio), so this is a model of the
//! protocol, step for step as `Entries::{enter, leave_alone, unpark, take_or_idle}` write it,
//! with one slot and one shard (keys of one slot share one shard there too): the word, the
//! shard's map of queues and its parked list. A "call" is a point where the check's thread may
//! be preempted; a queued check's wait for its reply is left out (the thread goes on, as a
//! future dropped while waiting would), and its count is dropped at the end of its thread.
//!
//! Properties, in every interleaving:
//! - no check is stranded: every queued check is taken (sent in a batch) exactly once;
//! - at most one call per key in flight: no two calls (lone, owner or batch) on one key at once;
//! - at the end the word is 0 and the map and parked list are empty.
//!
//! Fails with `leave_alone`'s compare-and-swap made as a load and a store
//! (`a_lone_leave_by_load_and_store_is_caught`): a check that counts itself between them is
//! wiped from the word, parks behind a tag that is gone, and is never sent.

use std::collections::BTreeMap;

use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use tollgate_loom_tests::model;

const ONE: u64 = 1;

/// The shard: queues by key (present = an owner or a parked queue's sender will end it) and
/// the keys parked behind the slot's lone check.
#[derive(Default)]
struct Shard {
    waiting: BTreeMap<&'static str, Vec<usize>>,
    parked: Vec<&'static str>,
}

struct Entries {
    word: AtomicU64,
    shard: Mutex<Shard>,
    /// How often each check id was taken for a batch.
    taken: Vec<AtomicUsize>,
    /// Calls in flight per key (index by `key_index`).
    calls: [AtomicUsize; 2],
    /// The broken protocol: `leave_alone` loads the word and stores 0 if it was its own.
    leave_by_store: bool,
}

fn key_index(key: &str) -> usize {
    usize::from(key != "k")
}

impl Entries {
    fn new(checks: usize, leave_by_store: bool) -> Entries {
        Entries {
            word: AtomicU64::new(0),
            shard: Mutex::new(Shard::default()),
            taken: (0..checks).map(|_| AtomicUsize::new(0)).collect(),
            calls: [AtomicUsize::new(0), AtomicUsize::new(0)],
            leave_by_store,
        }
    }

    /// A call on `key` (a lone check's, an owner's, or a batch): at most one per key at once.
    fn call(&self, key: &str) {
        let c = &self.calls[key_index(key)];
        assert_eq!(
            c.fetch_add(1, Ordering::SeqCst),
            0,
            "two calls on {key} at once"
        );
        loom::thread::yield_now();
        c.fetch_sub(1, Ordering::SeqCst);
    }

    fn batch(&self, key: &str, ids: Vec<usize>) {
        self.call(key);
        for id in ids {
            self.taken[id].fetch_add(1, Ordering::SeqCst);
        }
    }

    /// One check `id` on `key` whose hash carries `tag` (the high half, never 0). Returns
    /// whether it stays counted on the word (a queued check: its count is dropped later).
    fn check(&self, key: &'static str, tag: u64, id: usize) -> bool {
        if self
            .word
            .compare_exchange(0, tag | ONE, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            // Alone: the call, then `leave_alone`.
            self.call(key);
            if !self.leave_alone(tag) {
                // `unpark`: under the lock, the tag and its count go, the parked queues are
                // taken and sent, each then driven to its end as an owner's.
                let parked = {
                    let mut s = self.shard.lock().unwrap();
                    self.word.fetch_sub(tag | ONE, Ordering::AcqRel);
                    let keys = std::mem::take(&mut s.parked);
                    keys.into_iter()
                        .map(|k| (k, std::mem::take(s.waiting.get_mut(k).unwrap())))
                        .collect::<Vec<_>>()
                };
                for (k, q) in parked {
                    self.batch(k, q);
                    self.drive(k);
                }
            }
            return false;
        }
        self.word.fetch_add(ONE, Ordering::AcqRel);
        let mut s = self.shard.lock().unwrap();
        if let Some(q) = s.waiting.get_mut(key) {
            q.push(id);
            return true;
        }
        // The entry's own count.
        let seen = self.word.fetch_add(ONE, Ordering::AcqRel);
        if seen & !u64::from(u32::MAX) == tag {
            s.waiting.insert(key, vec![id]);
            s.parked.push(key);
            return true;
        }
        s.waiting.insert(key, Vec::new());
        drop(s);
        // The owner: its call, then the queue handed on until the key is idle (`HandOff`),
        // then its own count (`Counted`, dropped after the hand-off as in `check`).
        self.call(key);
        self.drive(key);
        self.word.fetch_sub(ONE, Ordering::AcqRel);
        false
    }

    /// `leave_alone`'s first step: whether the word still holds only this check (then it is
    /// 0 now); if not, someone counted themselves meanwhile and the caller unparks.
    fn leave_alone(&self, tag: u64) -> bool {
        if self.leave_by_store {
            let alone = self.word.load(Ordering::Acquire) == tag | ONE;
            if alone {
                self.word.store(0, Ordering::Release);
            }
            return alone;
        }
        self.word
            .compare_exchange(tag | ONE, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// `take_or_idle` in a loop: batches of what queued on `key`, until none is left.
    fn drive(&self, key: &'static str) {
        loop {
            let q = {
                let mut s = self.shard.lock().unwrap();
                let q = s.waiting.get_mut(key).unwrap();
                if q.is_empty() {
                    s.waiting.remove(key);
                    self.word.fetch_sub(ONE, Ordering::AcqRel);
                    return;
                }
                std::mem::take(q)
            };
            self.batch(key, q);
        }
    }
}

/// Runs `checks` (key, tag) on one thread each and checks the properties.
fn run(checks: &'static [(&'static str, u64)]) {
    run_with(checks, false);
}

/// [`run`], with `leave_alone` broken if `leave_by_store`.
fn run_with(checks: &'static [(&'static str, u64)], leave_by_store: bool) {
    model(move || {
        let e = Arc::new(Entries::new(checks.len(), leave_by_store));
        let threads: Vec<_> = checks
            .iter()
            .enumerate()
            .map(|(id, &(key, tag))| {
                let e = e.clone();
                loom::thread::spawn(move || {
                    if e.check(key, tag << 32, id) {
                        // A queued check's count, dropped when its future ends.
                        e.word.fetch_sub(ONE, Ordering::AcqRel);
                        true
                    } else {
                        false
                    }
                })
            })
            .collect();
        let queued: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        for (id, q) in queued.iter().enumerate() {
            let taken = e.taken[id].load(Ordering::SeqCst);
            assert_eq!(
                taken,
                usize::from(*q),
                "check {id} queued {q}, taken {taken} times"
            );
        }
        assert_eq!(e.word.load(Ordering::SeqCst), 0);
        let s = e.shard.lock().unwrap();
        assert!(s.waiting.is_empty() && s.parked.is_empty());
    });
}

#[test]
fn checks_on_one_key_are_each_called_or_sent_once() {
    run(&[("k", 1), ("k", 1), ("k", 1)]);
}

#[test]
fn another_key_on_the_slot_goes_on_its_own() {
    run(&[("k", 1), ("k", 1), ("k2", 2)]);
}

#[test]
fn another_key_with_the_same_tag_parks_and_is_still_sent() {
    run(&[("k", 1), ("k2", 1), ("k", 1)]);
}

#[test]
#[should_panic(expected = "taken 0 times")]
fn a_lone_leave_by_load_and_store_is_caught() {
    run_with(&[("k", 1), ("k2", 1), ("k", 1)], true);
}
