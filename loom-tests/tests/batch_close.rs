//! The Redis batches' close (`src/redis/batch.rs`): dropping the limiter sets `closed`, then
//! drains every shard's entries under the shard's lock and gives their batches back; a take
//! whose reply comes later hands its batch over under its shard's lock, where it reads
//! `closed` and, if set, gives the batch straight back instead of storing it.
//!
//! The Redis backend cannot be built under loom (it needs tokio), so this is a model of the
//! protocol, step for step as `Batches::drop` and `Table::finish_take` write it, with the same
//! orderings: two shards, a take answered on each (one thread each), the drop on the model's
//! thread. A batch is a number; "given back" counts it (the spawned `give` is left out: it
//! only runs what it is handed).
//!
//! Property, in every interleaving: every batch taken is given back exactly once, by the drop's
//! drain or by its take, and nothing is left in the table.
//! Fails with `closed` read before the shard's lock is taken
//! (`closed_read_outside_the_lock_is_caught`): a take can then store its batch in a shard the
//! drop has already drained, where no one gives it back.

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use tollgate_loom_tests::model;

struct Table {
    /// Each shard's held batches (its entries' batches, all keys together).
    shards: [Mutex<Vec<u64>>; 2],
    closed: AtomicBool,
    /// The batches given back, in any order.
    returned: Mutex<Vec<u64>>,
    /// Break the protocol: read `closed` before locking the shard.
    early_read: bool,
}

impl Table {
    /// `finish_take`: `Some(batch)` to give back.
    fn finish_take(&self, shard: usize, batch: u64) -> Option<u64> {
        let early = self.early_read && self.closed.load(Ordering::SeqCst);
        let mut held = self.shards[shard].lock().unwrap();
        let closed = if self.early_read {
            early
        } else {
            self.closed.load(Ordering::SeqCst)
        };
        if closed {
            return Some(batch);
        }
        held.push(batch);
        None
    }

    /// A take answered: `Table::take` after its reply.
    fn take(&self, shard: usize, batch: u64) {
        if let Some(b) = self.finish_take(shard, batch) {
            self.returned.lock().unwrap().push(b);
        }
    }

    /// `Batches::drop`.
    fn close(&self) {
        self.closed.swap(true, Ordering::SeqCst);
        let mut returns = Vec::new();
        for shard in &self.shards {
            returns.append(&mut shard.lock().unwrap());
        }
        self.returned.lock().unwrap().extend(returns);
    }
}

fn race(early_read: bool) {
    model(move || {
        let t = Arc::new(Table {
            shards: [Mutex::new(Vec::new()), Mutex::new(Vec::new())],
            closed: AtomicBool::new(false),
            returned: Mutex::new(Vec::new()),
            early_read,
        });
        let takes: Vec<_> = (0..2)
            .map(|i| {
                let t = t.clone();
                thread::spawn(move || t.take(i, i as u64))
            })
            .collect();
        t.close();
        for h in takes {
            h.join().unwrap();
        }
        let mut returned = t.returned.lock().unwrap().clone();
        returned.sort_unstable();
        assert_eq!(returned, [0, 1], "a batch stranded or given back twice");
        assert!(t.shards.iter().all(|s| s.lock().unwrap().is_empty()));
    });
}

#[test]
fn takes_answered_while_the_limiter_is_dropped() {
    race(false);
}

#[test]
#[should_panic(expected = "stranded")]
fn closed_read_outside_the_lock_is_caught() {
    race(true);
}
