//! The sweep walk: every shard in chunks of [`SWEEP_CHUNK`] buckets, one write-lock hold per
//! chunk, evicting the keys the cells' rule ([`Evict`]) says may go.

use std::hash::{BuildHasher, Hash};
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use crate::store::evict::{evict_by, Evict};
use crate::store::keyed::KeyedStore;
use crate::sync::{unlock_fair, Ordering};
use crate::Nanos;

/// Buckets a sweep walks per hold of a shard's write lock (at most this many keys; about 1,300
/// at hashbrown's load factor). Measured on 10M cold keys (64 shards of 160k): a hold takes
/// 23 us at the median, 33 us at p99 (`u64` keys; `String` keys 27 / 66 us), whatever the
/// shard's size. Holds of a millisecond or more also occur, about once per 10M-key sweep and
/// with 1024-bucket chunks as often as with 4096: this VM being descheduled (steal time), not
/// the walk.
pub(crate) const SWEEP_CHUNK: usize = 2048;

/// How many times a sweep starts a shard over when inserts moved its keys between chunks.
const SWEEP_RESTARTS: usize = 2;

impl<K, C, S> KeyedStore<K, C, S>
where
    K: Hash + Eq,
    S: BuildHasher,
{
    /// A whole sweep by `rule`; `stop` is polled between chunks.
    pub(crate) fn sweep_all(&self, rule: &impl Evict<C>, stop: &dyn Fn() -> bool) -> usize {
        let _serial = self
            .sweep_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.sweep_locked(rule, stop)
    }

    /// A whole sweep; the caller holds `sweep_lock`.
    ///
    /// Each shard is walked in chunks of [`SWEEP_CHUNK`] buckets, one write-lock hold per
    /// chunk, so a decision waits for at most one chunk however large the table: the pause is
    /// bounded by the chunk, not by the shard. Cells are judged under the lock with what the
    /// rule reads (`now`) read under it, chunk by chunk, so eviction stays lossless
    /// (`store::keyed`'s module docs); each evicted cell is shown to the rule again after the
    /// lock is released (a semaphore cell is quiesced there), then dropped.
    ///
    /// Between two chunks an insert may have moved keys (a resize, or hashbrown's rehash in
    /// place when tombstones use up the free slots). A key moved into the part already walked
    /// would be missed, so the walk starts the shard over when the table's shape changed
    /// (`num_buckets` and `capacity`, read at the end of one chunk and the start of the next; an
    /// insert into a free slot changes neither). After [`SWEEP_RESTARTS`] restarts it goes on
    /// without, and forgets the lower bound on cold times (`earliest`): a missed key is only
    /// kept until a later sweep, and the key cap's reclaim then sweeps rather than skips.
    pub(super) fn sweep_locked(&self, rule: &impl Evict<C>, stop: &dyn Fn() -> bool) -> usize {
        let started = Instant::now();
        self.earliest.store(Nanos::MAX, Ordering::Release);
        let mut evicted = 0usize;
        let mut longest = Duration::ZERO;
        // Evicted keys are moved here and dropped after the shard lock is released: freeing a
        // million `String`s is most of a sweep's cost, and none of it needs the lock.
        // Room for one chunk's keys, allocated before any lock is taken.
        let mut graveyard: Vec<(K, C)> = Vec::with_capacity(SWEEP_CHUNK);
        let mut complete = true;
        'shards: for shard in self.map.shards() {
            let mut pos = 0usize;
            let mut shape = None;
            let mut restarts = 0;
            loop {
                if stop() {
                    break 'shards;
                }
                let mut table = shard.write();
                let held = Instant::now();
                // Read under the lock: any decision after this one sees a later `now` (less
                // the clock's skew, which the rule allows for).
                let at = rule.at();
                if shape.is_some_and(|s| s != (table.num_buckets(), table.capacity())) {
                    if restarts < SWEEP_RESTARTS {
                        restarts += 1;
                        pos = 0;
                    } else {
                        complete = false;
                    }
                }
                let end = table.num_buckets().min(pos.saturating_add(SWEEP_CHUNK));
                let swept = evict_by(
                    |cell| rule.judge(cell, &at),
                    |keep| {
                        // `table` is held exclusively (write guard) for the whole loop.
                        // Removing an entry (hashbrown's `erase`) leaves the other entries in
                        // their buckets, as `HashTable::retain` relies on, so the indices hold.
                        for i in pos..end {
                            let Ok(entry) = table.get_bucket_entry(i) else {
                                continue; // an empty or deleted bucket
                            };
                            if !keep(&entry.get().1) {
                                graveyard.push(entry.remove().0);
                            }
                        }
                    },
                );
                shape = Some((table.num_buckets(), table.capacity()));
                let done = end >= table.num_buckets();
                // Fairly: the decisions parked on this chunk get the lock before the next one.
                unlock_fair(table);
                longest = longest.max(held.elapsed());
                if swept.evicted > 0 {
                    // After the removal: `slots` never undercounts the map.
                    self.slots.fetch_sub(swept.evicted, Ordering::AcqRel);
                }
                for (_, cell) in graveyard.drain(..) {
                    rule.evicted(&cell);
                }
                self.earliest.fetch_min(swept.min_cold_at, Ordering::AcqRel);
                evicted += swept.evicted;
                if done {
                    break;
                }
                pos = end;
            }
        }
        if !complete {
            self.earliest.store(0, Ordering::Release);
        }
        self.counters.record(evicted, started.elapsed(), longest);
        rule.swept(evicted, self.len(), longest);
        evicted
    }
}
