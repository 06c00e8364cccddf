//! The local denial cache: after Redis denied one permit on a state key, calls for one permit
//! on that key in this process are denied here until the denial's `retry_after` has passed,
//! with the reply Redis would give (no round trip). Bounded: at most `max_keys` entries.
//!
//! Conservative by construction. The elapsed time is counted from the moment the call was
//! *sent*, which is no later than the moment the script ran, so the cached denial ends no later
//! than Redis's own: the cache never refuses a call that Redis, with no other change to the key
//! meanwhile, would admit. Other processes can only take more (which makes Redis's denial
//! longer, never shorter), with one exception: a refund by another process (a cancelled GCRA
//! reservation, a reward) or a reset of the key can make a permit available before the cached
//! `retry_after`. Resets and rewards are published (`invalidate.rs`) and the message forgets
//! the key's entry here ([`invalidate`](DenialCache::invalidate)); other refunds, and any
//! change while the subscription is down, leave the cache refusing until the `retry_after` at
//! worst. This process's own cancels and returned batches forget the key's entry; its own
//! blocks, penalties and rewards replace it with the one-permit denial their reply states, or
//! forget it if the reply leaves a permit.
//!
//! A reply on its way while the key is invalidated may predate the change: every forget bumps
//! a generation, and a reply is recorded only if no forget came between its call's send and
//! the record ([`generation`](DenialCache::generation)), so an invalidation is never undone by
//! a late reply. This protocol, with its callers' order of steps, is modelled step for step in
//! `loom-tests/tests/denial_generation.rs`: change both.
//!
//! Only single-permit denials are cached and only single-permit calls answered: for `n = 1`,
//! `remaining` is 0 for as long as the denial lasts, so the reply is exact: `remaining` 0,
//! `retry_after` and `reset_after` as Redis sent them less the local time elapsed since the
//! call was sent, rounded up to whole microseconds (never longer than Redis would now say).
//!
//! Bounded in time as well as in count: expired denials go when the cache is full, and also in
//! a sweep spread over the calls, one shard every `SWEEP_PERIOD / shards` (at the first lookup
//! due), so that each shard is swept once per `SWEEP_PERIOD` while calls keep coming: an
//! expired denial outlives its `retry_after` by at most that period and the gap to the next
//! call, and a burst of denials on many keys does not stay in memory after it ends.
//!
//! A key with no cached denial, the common case, costs a lookup one hash and one atomic load
//! (the `present` counts), no lock.

use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::super::scripts::clamp_i64;
use super::sharded_map::{Shard, ShardedMap};

/// How often each shard is swept of its expired denials (while calls come).
const SWEEP_PERIOD: Duration = Duration::from_secs(1);

/// The most `present` counts (128 KiB of them).
const MAX_SLOTS: usize = 1 << 16;

/// A cached denial: Redis's reply fields and when the call that got it was sent.
#[derive(Clone, Copy)]
struct Denial {
    /// The key's hash ([`ShardedMap::hash`]), to find its `present` count when it goes.
    hash: u64,
    sent: Instant,
    server_now_us: u64,
    retry_us: u64,
    reset_us: u64,
}

impl Denial {
    /// Whether it still denies at `now`.
    fn live(&self, now: Instant) -> bool {
        elapsed_us_ceil(self.sent, now) < self.retry_us
    }
}

pub(crate) struct DenialCache {
    denials: ShardedMap<Shard<Denial>>,
    /// Per shard; `shards * cap <= max_keys`, so the total is capped exactly.
    cap: usize,
    /// The origin of `next_sweep`.
    epoch: Instant,
    /// Nanoseconds from `epoch` at which the next shard's sweep is due.
    next_sweep: AtomicU64,
    /// Nanoseconds between two sweeps (of two shards): `SWEEP_PERIOD / shards`.
    sweep_every: u64,
    /// Counts the sweeps; the shard swept next is this modulo the shards.
    sweeps: AtomicUsize,
    /// Per slot (a key hash's low bits), how many cached denials hash there: changed with the
    /// map under its shard's lock, read without it, so a lookup finding 0 needs no lock. A
    /// lookup racing a new denial may miss it and ask Redis, as a moment earlier: the counts
    /// can make the cache answer less, never wrongly. They wrap (no panic): past 65535 in one
    /// slot a lookup may miss.
    present: Box<[AtomicU16]>,
    /// Bumped by every forget, before it takes the entry out: a reply to a call sent before a
    /// forget is not recorded (`record` compares under the shard lock).
    generation: AtomicU64,
}

/// Whole microseconds elapsed from `from` to `to`, rounded up (0 if `to` is earlier).
fn elapsed_us_ceil(from: Instant, to: Instant) -> u64 {
    let ns = to.saturating_duration_since(from).as_nanos();
    u64::try_from(ns.div_ceil(1000)).unwrap_or(u64::MAX)
}

impl DenialCache {
    /// A cache of at most `max_keys` denials (at least 1).
    pub(crate) fn new(max_keys: usize) -> DenialCache {
        let max_keys = max_keys.max(1);
        let denials = ShardedMap::new(max_keys.min(16), |h| Shard::with_hasher(h.clone()));
        let shards = denials.shards();
        DenialCache {
            cap: max_keys / shards,
            denials,
            epoch: Instant::now(),
            next_sweep: AtomicU64::new(0),
            // At most 16 shards, so the quotient fits.
            sweep_every: (SWEEP_PERIOD / shards as u32).as_nanos() as u64,
            sweeps: AtomicUsize::new(0),
            // Capped before rounding up: `max_keys` may be up to usize::MAX.
            present: (0..max_keys.min(MAX_SLOTS).next_power_of_two())
                .map(|_| AtomicU16::new(0))
                .collect(),
            generation: AtomicU64::new(0),
        }
    }

    /// The count of forgets so far: read when a call is sent and given to
    /// [`record`](Self::record) with its reply.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// `hash`'s `present` count.
    fn present(&self, hash: u64) -> &AtomicU16 {
        // The length is a power of two; the index fits (below it).
        &self.present[hash as usize & (self.present.len() - 1)]
    }

    /// Counts `e` gone from the map (called under its shard's lock).
    fn gone(&self, e: &Denial) {
        self.present(e.hash).fetch_sub(1, Ordering::Relaxed);
    }

    /// Drops `map`'s denials that have expired by `now`.
    fn drop_expired(&self, map: &mut Shard<Denial>, now: Instant) {
        map.retain(|_, e| {
            let live = e.live(now);
            if !live {
                self.gone(e);
            }
            live
        });
    }

    /// Sweeps the next shard of its expired denials if its turn has come by `now`: one caller
    /// per turn (the one that moves the due time on), one shard (at most `cap` entries) each.
    /// The common case, not due, is one atomic load.
    fn sweep_if_due(&self, now: Instant) {
        let at =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let due = self.next_sweep.load(Ordering::Relaxed);
        if at < due {
            return;
        }
        // Whoever finds the due time still at or before its instant takes the turn; a caller
        // that finds it moved past its instant has lost the race.
        let next = at.saturating_add(self.sweep_every);
        if self.next_sweep.fetch_max(next, Ordering::Relaxed) > at {
            return;
        }
        let i = self.sweeps.fetch_add(1, Ordering::Relaxed) % self.denials.shards();
        self.drop_expired(&mut self.denials.lock_index(i), now);
    }

    /// The reply for a call for `n` permits on `key` at `now`, if a cached denial answers it:
    /// `{server time, 0 (denied), 0 (remaining), retry_after, reset_after}`, the script's
    /// check reply, with the server time advanced by the local time elapsed.
    pub(crate) fn lookup(&self, key: &str, n: u64, now: Instant) -> Option<[i64; 5]> {
        self.sweep_if_due(now);
        if n != 1 {
            return None;
        }
        let hash = self.denials.hash(key);
        if self.present(hash).load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut map = self.denials.lock_hashed(hash);
        let e = *map.get(key)?;
        let elapsed = elapsed_us_ceil(e.sent, now);
        if elapsed >= e.retry_us {
            // Redis may admit by now: forget it and ask.
            map.remove(key);
            self.gone(&e);
            return None;
        }
        drop(map);
        Some([
            clamp_i64(e.server_now_us.saturating_add(elapsed)),
            0,
            0,
            clamp_i64(e.retry_us - elapsed),
            clamp_i64(e.reset_us.saturating_sub(elapsed)),
        ])
    }

    /// Records Redis's `reply` (`{now, status, remaining, retry_after, reset_after}`) to a call
    /// for `n` permits on `key` sent at `sent`, when the [`generation`](Self::generation) was
    /// `generation`, if it is a denial the cache can answer and nothing was forgotten since
    /// the send. Whether it was recorded.
    pub(crate) fn record(
        &self,
        key: &str,
        n: u64,
        sent: Instant,
        generation: u64,
        reply: &[i64],
    ) -> bool {
        let &[now, 0, 0, retry, reset] = reply else {
            return false;
        };
        let (Ok(server_now_us), Ok(retry_us), Ok(reset_us)) = (
            u64::try_from(now),
            u64::try_from(retry),
            u64::try_from(reset),
        ) else {
            return false;
        };
        if n != 1 || retry_us == 0 {
            return false;
        }
        let hash = self.denials.hash(key);
        let entry = Denial {
            hash,
            sent,
            server_now_us,
            retry_us,
            reset_us,
        };
        let mut map = self.denials.lock_hashed(hash);
        // Under the lock: a forget bumps the generation before it locks to remove, so either
        // this sees the bump or the forget comes after this insert and removes it.
        if self.generation.load(Ordering::Acquire) != generation {
            return false;
        }
        if let Some(old) = map.get_mut(key) {
            *old = entry;
            return true;
        }
        if map.len() >= self.cap {
            // Full: drop the entries that no longer deny anything; if none, do not cache.
            self.drop_expired(&mut map, Instant::now());
            if map.len() >= self.cap {
                return false;
            }
        }
        map.insert(key.to_owned(), entry);
        self.present(hash).fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Forgets `key`'s denial (permits were given back on it, here or elsewhere, or it was
    /// reset), and every reply to a call sent before.
    pub(crate) fn forget(&self, key: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let hash = self.denials.hash(key);
        if let Some(e) = self.denials.lock_hashed(hash).remove(key) {
            self.gone(&e);
        }
    }

    /// Forgets every denial, and every reply to a call sent before (the subscription that
    /// reports changes made elsewhere was down: any of them may be stale).
    pub(crate) fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        for i in 0..self.denials.shards() {
            let mut map = self.denials.lock_index(i);
            for e in map.values() {
                self.gone(e);
            }
            map.clear();
        }
    }

    /// Entries held (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        (0..self.denials.shards())
            .map(|i| self.denials.lock_index(i).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Every `present` count matches the denials in the map.
    fn counts_match(c: &DenialCache) {
        let slots = c.present.len();
        let mut want = vec![0u16; slots];
        for i in 0..c.denials.shards() {
            for e in c.denials.lock_index(i).values() {
                want[e.hash as usize & (slots - 1)] += 1;
            }
        }
        let got: Vec<u16> = c
            .present
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .collect();
        assert_eq!(got, want);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A denial of `retry` µs on key `k`, sent now.
        Record(u8, u64),
        /// A single-permit lookup on key `k`.
        Lookup(u8),
        Forget(u8),
        /// Every denial forgotten (the subscription was made again).
        Clear,
        /// Time passes (µs).
        Wait(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..12, 1u64..3_000_000).prop_map(|(k, r)| Op::Record(k, r)),
            (0u8..12).prop_map(Op::Lookup),
            (0u8..12).prop_map(Op::Forget),
            Just(Op::Clear),
            (0u64..400_000).prop_map(Op::Wait),
        ]
    }

    proptest! {
        /// Against a model (a plain map of denials, each answering until its retry_after):
        /// the same answers, whatever the sweeps and the lock-free probe do, and the
        /// `present` counts always match the map.
        #[test]
        fn answers_as_a_plain_map_of_denials(ops in proptest::collection::vec(op(), 1..200)) {
            let c = DenialCache::new(1000);
            let t0 = Instant::now();
            let mut now = t0;
            let mut model: HashMap<u8, (Instant, u64)> = HashMap::new();
            for op in ops {
                match op {
                    Op::Record(k, retry) => {
                        c.record(&format!("k{k}"), 1, now, c.generation(), &[0, 0, 0, retry as i64, retry as i64]);
                        model.insert(k, (now, retry));
                    }
                    Op::Lookup(k) => {
                        let want = match model.get(&k) {
                            Some(&(sent, retry)) if elapsed_us_ceil(sent, now) < retry => {
                                let left = retry - elapsed_us_ceil(sent, now);
                                Some(left as i64)
                            }
                            _ => {
                                model.remove(&k);
                                None
                            }
                        };
                        let got = c.lookup(&format!("k{k}"), 1, now).map(|r| r[3]);
                        prop_assert_eq!(got, want);
                    }
                    Op::Forget(k) => {
                        c.forget(&format!("k{k}"));
                        model.remove(&k);
                    }
                    Op::Clear => {
                        c.clear();
                        model.clear();
                    }
                    Op::Wait(us) => now += Duration::from_micros(us),
                }
                counts_match(&c);
            }
        }
    }

    /// A denial reply: `{now, 0, 0, retry_after, reset_after}`.
    fn denied(retry: i64, reset: i64) -> [i64; 5] {
        [1_000_000, 0, 0, retry, reset]
    }

    #[test]
    fn answers_single_permit_calls_until_the_retry_after_from_the_send() {
        let c = DenialCache::new(8);
        let sent = Instant::now();
        c.record("k", 1, sent, c.generation(), &denied(100, 250));
        // 40 µs later: the same denial, shrunk by 40 µs, at a server time 40 µs on.
        let at = sent + Duration::from_micros(40);
        assert_eq!(c.lookup("k", 1, at), Some([1_000_040, 0, 0, 60, 210]));
        // Part of a microsecond counts as a whole one (the denial ends early, never late).
        let at = sent + Duration::from_nanos(40_001);
        assert_eq!(c.lookup("k", 1, at), Some([1_000_041, 0, 0, 59, 209]));
        // Other counts and peeks ask Redis.
        assert_eq!(c.lookup("k", 2, at), None);
        assert_eq!(c.lookup("k", 0, at), None);
        // From the retry_after on, nothing, and the entry is gone.
        assert_eq!(c.lookup("k", 1, sent + Duration::from_micros(100)), None);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn caches_only_single_permit_denials_with_nothing_left() {
        let c = DenialCache::new(8);
        let sent = Instant::now();
        c.record("allowed", 1, sent, c.generation(), &[5, 1, 3, -1, 9]);
        c.record("remaining", 1, sent, c.generation(), &[5, 0, 1, 7, 9]);
        c.record("n2", 2, sent, c.generation(), &denied(100, 100));
        c.record("never", 1, sent, c.generation(), &[5, 2, 0, -1, 9]);
        c.record("zero", 1, sent, c.generation(), &denied(0, 0));
        c.record("short", 1, sent, c.generation(), &[5, 0, 0]);
        assert_eq!(c.len(), 0);
        c.forget("k");
        c.record("k", 1, sent, c.generation(), &denied(100, 100));
        c.forget("k");
        assert_eq!(c.lookup("k", 1, sent), None);
    }

    #[test]
    fn a_reply_sent_before_a_forget_is_not_recorded() {
        let c = DenialCache::new(8);
        let sent = Instant::now();
        // Sent, then the key is forgotten (a reset heard of) before the reply is recorded:
        // the reply may predate the reset.
        let g = c.generation();
        c.forget("k");
        assert!(!c.record("k", 1, sent, g, &denied(100, 100)));
        assert_eq!(c.lookup("k", 1, sent), None);
        // The same after a clear; a reply sent after either is recorded.
        let g = c.generation();
        c.record("other", 1, sent, g, &denied(100, 100));
        c.clear();
        assert_eq!(c.len(), 0);
        assert!(!c.record("k", 1, sent, g, &denied(100, 100)));
        assert!(c.record("k", 1, sent, c.generation(), &denied(100, 100)));
        assert!(c.lookup("k", 1, sent).is_some());
        counts_match(&c);
    }

    #[test]
    fn a_change_caches_its_reply_only_if_its_own_forget_was_the_only_one_since_the_send() {
        // A block's path (`RedisRateLimiter::adjust`): the generation read before the send,
        // its own forget after the reply, the record with the generation that forget makes.
        let c = DenialCache::new(8);
        let sent = Instant::now();
        let before = c.generation();
        // The key was reset elsewhere and the message heard before the block's reply: the
        // denial may predate the reset.
        c.forget("k");
        c.forget("k");
        assert!(!c.record("k", 1, sent, before.wrapping_add(1), &denied(100, 100)));
        assert_eq!(c.lookup("k", 1, sent), None);
        // Nothing else forgotten meanwhile: the reply is cached.
        let before = c.generation();
        c.forget("k");
        assert!(c.record("k", 1, sent, before.wrapping_add(1), &denied(100, 100)));
        assert!(c.lookup("k", 1, sent).is_some());
    }

    #[test]
    fn takes_any_max_keys() {
        for max in [
            1,
            2,
            3,
            16,
            17,
            MAX_SLOTS + 1,
            usize::MAX / 2 + 2,
            usize::MAX,
        ] {
            let c = DenialCache::new(max);
            let t0 = Instant::now();
            c.record("k", 1, t0, c.generation(), &denied(10, 10));
            assert!(c.lookup("k", 1, t0).is_some(), "max {max}");
            assert!(c.present.len().is_power_of_two() && c.present.len() <= MAX_SLOTS);
        }
    }

    #[test]
    fn drops_expired_denials_over_time_not_only_when_full() {
        let c = DenialCache::new(1000);
        let t0 = Instant::now();
        for i in 0..100 {
            c.record(&format!("gone{i}"), 1, t0, c.generation(), &denied(10, 10));
            c.record(
                &format!("kept{i}"),
                1,
                t0,
                c.generation(),
                &denied(1 << 40, 1 << 40),
            );
        }
        assert_eq!(c.len(), 200);
        // Checks on an unrelated key, 4 s of them: the expired denials go though the cache is
        // far from full and none of their keys is asked about again; the live ones stay.
        for ms in (0..4000).step_by(50) {
            assert_eq!(c.lookup("other", 1, t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(c.len(), 100);
        let late = t0 + Duration::from_secs(4);
        assert!((0..100).all(|i| c.lookup(&format!("kept{i}"), 1, late).is_some()));
    }

    #[test]
    fn holds_at_most_max_keys_dropping_expired_ones_first() {
        for max in [1, 5, 16, 17, 100] {
            let c = DenialCache::new(max);
            let old = Instant::now() - Duration::from_secs(1);
            for i in 0..3 * max {
                c.record(&format!("old{i}"), 1, old, c.generation(), &denied(10, 10));
            }
            assert!(c.len() <= max, "max {max}: {}", c.len());
            // Expired entries make room for live ones.
            let now = Instant::now();
            let mut live = 0;
            for i in 0..3 * max {
                c.record(
                    &format!("live{i}"),
                    1,
                    now,
                    c.generation(),
                    &denied(1 << 40, 1 << 40),
                );
                live += usize::from(c.lookup(&format!("live{i}"), 1, now).is_some());
            }
            assert!(c.len() <= max, "max {max}: {}", c.len());
            assert!(live > 0);
        }
    }
}
