//! Exact coalescing: concurrent checks on one state key from this process go to Redis as one
//! script call (the script's `batch` op), which decides them in the order they arrived, one
//! after another at one server time, and replies each one's own fields: what the same checks
//! sent one by one at that instant would get.
//!
//! At most one call per key is in flight. The first check on an idle key goes alone (as
//! without coalescing); checks arriving while it is in flight queue up, and when it completes
//! they go as one batch, and so on until the queue is empty. The batches are sent by a spawned
//! task, so a caller that stops waiting (its future dropped, or its deadline passed) strands
//! nobody: the batch goes anyway and its permits are taken, as a single call already sent
//! would take them.
//!
//! A check alone on its slot (one of [`SLOTS`], chosen by the key's hash) touches no lock and
//! no map: it claims the slot's word with one compare-and-swap and frees it with another, so
//! keys without contention pay two uncontended atomic operations. Every other check takes the
//! locked path through its shard's map. A check that finds a check of the same slot and tag
//! alone in flight (its own key's, or rarely another key's) queues behind it, and that lone
//! check sends the queue when it ends.

// std's atomics, as everywhere in the Redis backend: it uses the core's public API only
// (`crate::sync` is private to the core), and loom cannot build it (tokio). The slot words'
// protocol is modelled step for step in `loom-tests/tests/coalesce_slots.rs`: change both.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::super::connection::client::ScriptClient;
use super::super::connection::failure::Failure;
use super::super::connection::meter::Meter;
use super::super::scripts::{clamp_i64, Params, Spec};
use super::group::Grouper;
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

/// The map's shards.
const SHARDS: usize = 16;

/// The slots' words (32 KiB). With a few hundred checks in flight, a few percent of checks
/// find their slot taken by another key's and take the locked path, which decides them as
/// before. A multiple of [`SHARDS`], both taken from the same bits of the hash, so that the
/// keys of one slot share one shard and its lock.
const SLOTS: usize = 4096;

/// One check (or map entry) counted on a slot's word: its low 32 bits count the checks in
/// flight on the slot and the map entries of its keys; its high 32 bits hold the tag of the
/// check alone in flight on it, if any (0: none). The count cannot reach 2^32 (as many
/// futures alive at once).
const ONE: u64 = 1;

fn slot_of(hash: u64) -> usize {
    // Bits 32.. choose the shard too (`ShardedMap::lock_hashed`): same slot, same shard.
    ((hash >> 32) % SLOTS as u64) as usize
}

/// `hash`'s tag in a slot's high half: never 0 (no lone check).
fn tag_of(hash: u64) -> u64 {
    u64::from(hash as u32 | 1) << 32
}

/// A key's queue waiting for the lone check of its slot to end (which sends it).
struct Parked<S> {
    slot: usize,
    key: String,
    hash: u64,
    /// How to send it (the check's script and parameters that made the queue).
    send: S,
}

/// One shard: the keys with a call in flight, key strings to reuse for the next ones, and
/// the keys whose queue waits for a lone check.
struct Queues<S> {
    /// Checks waiting for the call in flight on their key (present = a call is in flight, or
    /// the queue is parked).
    waiting: Shard<Vec<Waiter>>,
    spare: Vec<String>,
    parked: Vec<Parked<S>>,
}

/// Where a check goes ([`Entries::enter`]).
enum Entry<'a> {
    /// Alone on its slot: no lock, no map. Its end is [`Entries::leave_alone`].
    Alone,
    /// The call in flight on its key, registered in the map: its end is
    /// [`Entries::take_or_idle`].
    Owner(Counted<'a>),
    /// Queued for a batch.
    Queued(Counted<'a>, oneshot::Receiver<Reply>),
}

/// A check counted on its slot until dropped (finished, or its future dropped).
struct Counted<'a>(&'a AtomicU64);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(ONE, Ordering::AcqRel);
    }
}

/// The checks in flight, per slot and per key. `S`: how a parked queue is sent.
///
/// Invariant (no check stranded): a queued check is in a map entry, and every map entry has
/// exactly one sender that takes its queue under the shard lock before removing it: the
/// entry's owner ([`take_or_idle`](Self::take_or_idle)) or, for a parked entry, the slot's
/// lone check ([`leave_alone`](Self::leave_alone)), which turns it into a sender's. What
/// makes the lone check a parked entry's sender is that its tag stays in the word until it
/// ends: the tag is set only by a compare-and-swap from 0, which fails while any check or
/// entry is counted; it is cleared without the lock only by a compare-and-swap from "the tag
/// and a count of 1" (so no parked entry exists: each entry holds a count), and otherwise
/// under the shard lock. So a check deciding under the lock to park (seeing the tag, while
/// its own count holds the word above "tag and 1") parks on a lone check that has not yet
/// ended, whose end will take the lock after it and find the entry. The map itself is
/// changed only under the lock, as before the slots: the slots only let a check skip it when
/// nothing else is in flight on its slot.
///
/// At most one call per key in flight: a lone check needs its word at 0 (no entry, no other
/// check on the slot); while it is in flight, a check on its key sees its tag and parks; an
/// owner exists only while its entry does.
struct Entries<S> {
    slots: Box<[AtomicU64]>,
    queues: ShardedMap<Queues<S>>,
}

impl<S> Entries<S> {
    fn new() -> Entries<S> {
        Entries {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            queues: ShardedMap::new(SHARDS, |h| Queues {
                waiting: Shard::with_hasher(h.clone()),
                spare: Vec::new(),
                parked: Vec::new(),
            }),
        }
    }

    /// Registers a check of `n` (clamped) permits on `state`, whose hash is `hash`; `send`
    /// says how to send its queue if it parks one.
    fn enter(&self, state: &str, hash: u64, n: i64, send: S) -> Entry<'_> {
        // The words' orderings are not what keeps the protocol right (the shard lock orders
        // what is decided under it, and each operation reads the latest word): AcqRel only
        // for a margin, free on x86's locked instructions.
        let word = &self.slots[slot_of(hash)];
        let tag = tag_of(hash);
        if word
            .compare_exchange(0, tag | ONE, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return Entry::Alone;
        }
        word.fetch_add(ONE, Ordering::AcqRel);
        let counted = Counted(word);
        let mut shard = self.queues.lock_hashed(hash);
        let Queues {
            waiting,
            spare,
            parked,
        } = &mut *shard;
        if let Some(q) = waiting.get_mut(state) {
            let (tx, rx) = oneshot::channel();
            q.push(Waiter { n, tx });
            return Entry::Queued(counted, rx);
        }
        // The entry's own count, until it is removed: a lone check cannot end without the
        // lock while it exists, nor a new one start.
        let seen = word.fetch_add(ONE, Ordering::AcqRel);
        let mut key = spare.pop().unwrap_or_default();
        key.push_str(state);
        if seen & !u64::from(u32::MAX) == tag {
            let (tx, rx) = oneshot::channel();
            parked.push(Parked {
                slot: slot_of(hash),
                key: key.clone(),
                hash,
                send,
            });
            waiting.insert(key, vec![Waiter { n, tx }]);
            Entry::Queued(counted, rx)
        } else {
            waiting.insert(key, Vec::new());
            Entry::Owner(counted)
        }
    }

    /// Ends the lone check whose hash is `hash`: `None` if nothing is parked behind it (no
    /// lock taken), else the queues parked behind it, each with its checks, now the caller's
    /// to send (their entries stay, ended by [`take_or_idle`](Self::take_or_idle)).
    #[inline]
    fn leave_alone(&self, hash: u64) -> Option<Vec<(Parked<S>, Vec<Waiter>)>> {
        let mine = tag_of(hash) | ONE;
        let word = &self.slots[slot_of(hash)];
        if word
            .compare_exchange(mine, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return None;
        }
        Some(self.unpark(hash))
    }

    /// [`leave_alone`](Self::leave_alone) with other checks or entries counted on the slot.
    #[cold]
    #[inline(never)]
    fn unpark(&self, hash: u64) -> Vec<(Parked<S>, Vec<Waiter>)> {
        let slot = slot_of(hash);
        let mut shard = self.queues.lock_hashed(hash);
        self.slots[slot].fetch_sub(tag_of(hash) | ONE, Ordering::AcqRel);
        let Queues {
            waiting, parked, ..
        } = &mut *shard;
        let mut taken = Vec::new();
        let mut i = 0;
        while i < parked.len() {
            if parked[i].slot == slot {
                let p = parked.swap_remove(i);
                let q = waiting.get_mut(&p.key).map(std::mem::take);
                taken.push((p, q.unwrap_or_default()));
            } else {
                i += 1;
            }
        }
        taken
    }

    /// The checks queued on `state` (whose hash is `hash`), or `None` after marking the key
    /// idle if there are none.
    fn take_or_idle(&self, state: &str, hash: u64) -> Option<Vec<Waiter>> {
        let mut shard = self.queues.lock_hashed(hash);
        let Queues { waiting, spare, .. } = &mut *shard;
        let q = waiting.get_mut(state)?;
        if q.is_empty() {
            if let Some((mut key, _)) = waiting.remove_entry(state) {
                self.slots[slot_of(hash)].fetch_sub(ONE, Ordering::AcqRel);
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
}

pub(crate) struct Coalescer {
    /// Where the batches go (a spawned batch holds on to the coalescer, so it owns this).
    client: Arc<ScriptClient>,
    /// Where a single check goes, if grouping is on (a batch goes as it is: one call already).
    grouper: Option<Arc<Grouper>>,
    entries: Entries<(&'static Spec, Params)>,
}

impl Coalescer {
    pub(crate) fn new(client: Arc<ScriptClient>, grouper: Option<Arc<Grouper>>) -> Coalescer {
        Coalescer {
            client,
            grouper,
            entries: Entries::new(),
        }
    }

    /// A single check's call: through the grouper if on.
    async fn one(self: &Arc<Self>, spec: &'static Spec, state: &str, n: u64, p: Params) -> Reply {
        super::group::check_one(self.grouper.as_ref(), &self.client, spec, state, n, p).await
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
        let hash = self.entries.queues.hash(state);
        match self.entries.enter(state, hash, p.clamp(n), (spec, p)) {
            Entry::Alone => {
                // Sends what parked behind it when this call completes or is dropped.
                let _lone = Lone {
                    coalescer: self,
                    hash,
                };
                self.one(spec, state, n, p).await
            }
            Entry::Owner(_counted) => {
                // Hands the queue on when this call completes or is dropped.
                let _hand_off = HandOff {
                    coalescer: self,
                    spec,
                    state,
                    hash,
                    params: p,
                };
                self.one(spec, state, n, p).await
            }
            Entry::Queued(_counted, rx) => {
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
        }
    }

    /// Sends `waiting`, queued on `state` (whose hash is `hash`), from a spawned task, and
    /// what queues on it meanwhile, until the key is idle.
    fn send_on(
        self: &Arc<Self>,
        spec: &'static Spec,
        state: String,
        hash: u64,
        params: Params,
        waiting: Vec<Waiter>,
    ) {
        let coalescer = self.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(coalescer.drive(spec, state, hash, params, waiting));
            }
            Err(_) => {
                // No runtime to send from: the waiters fail as a timeout would.
                for w in waiting {
                    let _ = w.tx.send(Err(Failure::Timeout));
                }
                while let Some(more) = coalescer.entries.take_or_idle(&state, hash) {
                    for w in more {
                        let _ = w.tx.send(Err(Failure::Timeout));
                    }
                }
            }
        }
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
            match self.entries.take_or_idle(&state, hash) {
                Some(more) => waiting = more,
                None => return,
            }
        }
    }
}

/// The end of a lone check: the queues parked behind it go (from spawned tasks), or its slot
/// is freed.
struct Lone<'a> {
    /// Cloned only to send a parked queue.
    coalescer: &'a Arc<Coalescer>,
    hash: u64,
}

impl Drop for Lone<'_> {
    fn drop(&mut self) {
        let Some(taken) = self.coalescer.entries.leave_alone(self.hash) else {
            return;
        };
        for (parked, waiting) in taken {
            let (spec, params) = parked.send;
            self.coalescer
                .send_on(spec, parked.key, parked.hash, params, waiting);
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
        let Some(waiting) = self.coalescer.entries.take_or_idle(self.state, self.hash) else {
            return;
        };
        self.coalescer.send_on(
            self.spec,
            self.state.to_owned(),
            self.hash,
            self.params,
            waiting,
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two hashes of one slot: with the same tag (`tag` true) or not.
    fn pair(tag: bool) -> (u64, u64) {
        let h = 0x0123_4567_89ab_cdef;
        (h, if tag { h } else { h ^ 0x10 })
    }

    fn word(e: &Entries<u8>, h: u64) -> u64 {
        e.slots[slot_of(h)].load(Ordering::Relaxed)
    }

    #[test]
    fn a_slot_chooses_the_shard_lock_hashed_takes() {
        for h in [
            0,
            1 << 32,
            0xffff_ffff_0000_0000,
            0x0123_4567_89ab_cdef,
            u64::MAX,
        ] {
            assert_eq!(slot_of(h) % SHARDS, ((h >> 32) % SHARDS as u64) as usize);
        }
    }

    #[test]
    fn a_check_alone_on_its_slot_touches_no_map() {
        let e = Entries::<u8>::new();
        let (h, _) = pair(true);
        assert!(matches!(e.enter("a", h, 1, 0), Entry::Alone));
        assert!(e.queues.lock_hashed(h).waiting.is_empty());
        assert!(e.leave_alone(h).is_none());
        assert_eq!(word(&e, h), 0);
    }

    /// Another key on the slot, another tag: it goes as its key's own call, and both end
    /// with the slot free.
    #[test]
    fn another_key_of_the_slot_goes_on_its_own() {
        let e = Entries::<u8>::new();
        let (ha, hb) = pair(false);
        assert!(matches!(e.enter("a", ha, 1, 0), Entry::Alone));
        let b = e.enter("b", hb, 1, 0);
        assert!(matches!(b, Entry::Owner(_)));
        assert!(e.leave_alone(ha).unwrap().is_empty(), "nothing parked");
        assert!(e.take_or_idle("b", hb).is_none());
        drop(b);
        assert_eq!(word(&e, ha), 0);
    }

    /// Another key with the slot's lone check's tag parks behind it, and that check's end
    /// hands it on: not stranded, even if its own future was dropped meanwhile.
    #[test]
    fn a_key_parked_behind_another_keys_lone_check_is_handed_on() {
        for drop_first in [false, true] {
            let e = Entries::<u8>::new();
            let (ha, hb) = pair(true);
            assert!(matches!(e.enter("a", ha, 1, 0), Entry::Alone));
            let b = e.enter("b", hb, 2, 7);
            assert!(matches!(b, Entry::Queued(..)));
            if drop_first {
                drop(b);
                let taken = e.leave_alone(ha).unwrap();
                assert_eq!(taken.len(), 1);
                assert_eq!((taken[0].0.key.as_str(), taken[0].0.send), ("b", 7));
                assert_eq!(taken[0].1.len(), 1);
            } else {
                let taken = e.leave_alone(ha).unwrap();
                assert_eq!(taken.len(), 1);
                assert_eq!(taken[0].1[0].n, 2);
                drop(b);
            }
            assert!(e.take_or_idle("b", hb).is_none());
            assert_eq!(word(&e, ha), 0);
            assert!(e.queues.lock_hashed(ha).parked.is_empty());
        }
    }

    /// Checks on the lone check's own key queue behind it, in order, as one queue.
    #[test]
    fn checks_on_the_lone_checks_key_queue_behind_it() {
        let e = Entries::<u8>::new();
        let (h, _) = pair(true);
        assert!(matches!(e.enter("a", h, 1, 0), Entry::Alone));
        let q: Vec<_> = (1..=3).map(|n| e.enter("a", h, n, 0)).collect();
        assert!(q.iter().all(|x| matches!(x, Entry::Queued(..))));
        let taken = e.leave_alone(h).unwrap();
        assert_eq!(taken.len(), 1);
        let ns: Vec<i64> = taken[0].1.iter().map(|w| w.n).collect();
        assert_eq!(ns, [1, 2, 3]);
        // While the batch is sent, a new check queues for the next one.
        let late = e.enter("a", h, 4, 0);
        assert!(matches!(late, Entry::Queued(..)));
        assert_eq!(e.take_or_idle("a", h).map(|q| q.len()), Some(1));
        assert!(e.take_or_idle("a", h).is_none());
        drop((q, late));
        assert_eq!(word(&e, h), 0);
    }
}
