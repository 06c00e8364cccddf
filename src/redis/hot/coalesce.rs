//! Exact coalescing: concurrent checks on one state key from this process go to Redis as one
//! script call (the script's `batch` op), which decides them in the order they arrived, one
//! after another at one server time, and replies each one's own fields: what the same checks
//! sent one by one at that instant would get.
//!
//! At most one call per key is in flight. The first check on an idle key goes alone (as
//! without coalescing, so keys without contention pay only a map insert and remove, under two
//! uncontended shard locks, with no allocation: the map's key strings are reused); checks
//! arriving while it is in flight queue up, and when it completes they go as one batch, and so
//! on until the queue is empty. The batches are sent by a spawned task, so a caller that stops
//! waiting (its future dropped, or its deadline passed) strands nobody: the batch goes anyway
//! and its permits are taken, as a single call already sent would take them.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::super::connection::client::ScriptClient;
use super::super::connection::failure::Failure;
use super::super::connection::meter::Meter;
use super::super::scripts::{clamp_i64, Params, Spec};
use super::sharded_map::{Shard, ShardedMap};

/// A check's reply, in the shape of the script's `check` reply.
type Reply = Result<Vec<i64>, Failure>;

struct Waiter {
    n: i64,
    tx: oneshot::Sender<Reply>,
}

/// The most checks one script call decides (a bound on the script's run time).
const MAX_BATCH: usize = 256;

/// Per shard, the most key strings kept for reuse, and the longest key whose string is kept
/// (a bound on the memory they hold).
const MAX_SPARE: usize = 32;
const MAX_SPARE_LEN: usize = 256;

/// One shard: the keys with a call in flight, and key strings to reuse for the next ones.
struct Queues {
    /// Checks waiting for the call in flight on their key (present = a call is in flight).
    waiting: Shard<Vec<Waiter>>,
    spare: Vec<String>,
}

pub(crate) struct Coalescer {
    /// Where the batches go (a spawned batch holds on to the coalescer, so it owns this).
    client: Arc<ScriptClient>,
    queues: ShardedMap<Queues>,
}

impl Coalescer {
    pub(crate) fn new(client: Arc<ScriptClient>) -> Coalescer {
        Coalescer {
            client,
            queues: ShardedMap::new(16, |h| Queues {
                waiting: Shard::with_hasher(h.clone()),
                spare: Vec::new(),
            }),
        }
    }

    /// Checks `n` permits on `state` with `spec`'s script (whose `batch` op decides a list of
    /// checks), coalesced with the other checks on `state` in flight from this process;
    /// `coalesced` counts the checks that went in a batch.
    pub(crate) async fn check(
        self: &Arc<Self>,
        spec: &'static Spec,
        state: &str,
        n: u64,
        p: Params,
        coalesced: &AtomicU64,
    ) -> Reply {
        let hash = self.queues.hash(state);
        let queued = {
            let mut shard = self.queues.lock_hashed(hash);
            let Queues { waiting, spare } = &mut *shard;
            match waiting.get_mut(state) {
                Some(q) => {
                    let (tx, rx) = oneshot::channel();
                    q.push(Waiter { n: p.clamp(n), tx });
                    Some(rx)
                }
                None => {
                    let mut key = spare.pop().unwrap_or_default();
                    key.push_str(state);
                    waiting.insert(key, Vec::new());
                    None
                }
            }
        };
        match queued {
            Some(rx) => {
                Meter::bump(coalesced);
                match tokio::time::timeout(self.client.deadline(), rx).await {
                    Ok(Ok(reply)) => reply,
                    // The sender went without a reply (the runtime is shutting down), or the
                    // queue and the batch together took longer than the deadline (waiting
                    // for a connection, if none is made: as a call of its own would).
                    Ok(Err(_)) | Err(_) => {
                        let failure = self.client.deadline_passed();
                        self.client.meter.failed(&failure);
                        Err(failure)
                    }
                }
            }
            None => {
                // Hands the queue on when this call completes or is dropped.
                let _hand_off = HandOff {
                    coalescer: self,
                    spec,
                    state,
                    hash,
                    params: p,
                };
                spec.check(&self.client, state, n, p).await
            }
        }
    }

    /// The checks queued on `state` (whose hash is `hash`), or `None` after marking the key
    /// idle if there are none.
    fn take_or_idle(&self, state: &str, hash: u64) -> Option<Vec<Waiter>> {
        let mut shard = self.queues.lock_hashed(hash);
        let Queues { waiting, spare } = &mut *shard;
        let q = waiting.get_mut(state)?;
        if q.is_empty() {
            if let Some((mut key, _)) = waiting.remove_entry(state) {
                // Kept only if short: a kept string grows only to hold a key no longer than
                // this, so its capacity stays below about twice it.
                if spare.len() < MAX_SPARE && key.len() <= MAX_SPARE_LEN {
                    key.truncate(0);
                    spare.push(key);
                }
            }
            return None;
        }
        Some(std::mem::take(q))
    }

    /// Sends the queued checks as batches until none are left.
    async fn drive(
        self: Arc<Self>,
        spec: &'static Spec,
        state: String,
        hash: u64,
        p: Params,
        mut waiting: Vec<Waiter>,
    ) {
        loop {
            while !waiting.is_empty() {
                let rest = waiting.split_off(waiting.len().min(MAX_BATCH));
                let batch = std::mem::replace(&mut waiting, rest);
                let mut args = Vec::with_capacity(3 + batch.len());
                args.extend([p.limit_arg(), clamp_i64(p.span_us)]);
                args.push(clamp_i64(batch.len() as u64));
                args.extend(batch.iter().map(|w| w.n));
                let reply = self.client.eval(&spec.script, &state, "batch", &args).await;
                answer(spec, p, batch, reply);
            }
            match self.take_or_idle(&state, hash) {
                Some(more) => waiting = more,
                None => return,
            }
        }
    }
}

/// The end of a call in flight on `state`: the checks queued meanwhile go as the next batch
/// (from a spawned task), or the key becomes idle.
struct HandOff<'a> {
    /// Cloned only to hand a batch on (an idle key's check pays no reference count).
    coalescer: &'a Arc<Coalescer>,
    spec: &'static Spec,
    state: &'a str,
    hash: u64,
    params: Params,
}

impl Drop for HandOff<'_> {
    fn drop(&mut self) {
        let Some(waiting) = self.coalescer.take_or_idle(self.state, self.hash) else {
            return;
        };
        let (coalescer, spec, params) = (self.coalescer.clone(), self.spec, self.params);
        let (state, hash) = (self.state.to_owned(), self.hash);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(coalescer.drive(spec, state, hash, params, waiting));
            }
            Err(_) => {
                // No runtime to send from: the waiters fail as a timeout would.
                for w in waiting {
                    let _ = w.tx.send(Err(Failure::Timeout));
                }
                while let Some(more) = coalescer.take_or_idle(&state, hash) {
                    for w in more {
                        let _ = w.tx.send(Err(Failure::Timeout));
                    }
                }
            }
        }
    }
}

/// Gives each waiter its own reply out of a batch reply `{now, then one element per check}`
/// (what the script's check replies after `now`, expanded as a check's reply is), or `{now,
/// then four per check}` (each check's full reply after `now`: GCRA on a key with holes). A
/// reply of another shape goes whole to every waiter, whose parse rejects it as unexpected.
fn answer(spec: &Spec, p: Params, batch: Vec<Waiter>, reply: Reply) {
    match reply {
        Ok(r) if r.len() == 1 + batch.len() => {
            for (w, &e) in batch.into_iter().zip(&r[1..]) {
                let _ = w.tx.send(Ok((spec.expand)(vec![r[0], e], w.n, p)));
            }
        }
        // A batch is never empty, so the two shapes never have the same length.
        Ok(r) if r.len() == 1 + 4 * batch.len() => {
            for (w, full) in batch.into_iter().zip(r[1..].chunks_exact(4)) {
                let mut one = Vec::with_capacity(5);
                one.push(r[0]);
                one.extend_from_slice(full);
                let _ = w.tx.send(Ok((spec.expand)(one, w.n, p)));
            }
        }
        Ok(r) => {
            for w in batch {
                let _ = w.tx.send(Ok(r.clone()));
            }
        }
        Err(f) => {
            for w in batch {
                let _ = w.tx.send(Err(Clone::clone(&f)));
            }
        }
    }
}
