//! The local denial cache: after Redis denied one permit on a state key, calls for one permit
//! on that key in this process are denied here until the denial's `retry_after` has passed,
//! with the reply Redis would give (no round trip). Bounded: at most `max_keys` entries.
//!
//! Conservative by construction. The elapsed time is counted from the moment the call was
//! *sent*, which is no later than the moment the script ran, so the cached denial ends no later
//! than Redis's own: the cache never refuses a call that Redis, with no other change to the key
//! meanwhile, would admit. Other processes can only take more (which makes Redis's denial
//! longer, never shorter), with one exception: a refund by another process (a cancelled GCRA
//! reservation, a reward) or a reset of the key (`DEL`) can make a permit available before the cached
//! `retry_after`, and the cache goes on refusing until then. This process's own cancels forget
//! the key's entry; its own blocks, penalties and rewards (GCRA) replace it with the one-permit
//! denial their reply states, or forget it if the reply leaves a permit.
//!
//! Only single-permit denials are cached and only single-permit calls answered: for `n = 1`,
//! `remaining` is 0 for as long as the denial lasts, so the reply is exact: `remaining` 0,
//! `retry_after` and `reset_after` as Redis sent them less the local time elapsed since the
//! call was sent, rounded up to whole microseconds (never longer than Redis would now say).

use std::time::Instant;

use super::super::scripts::clamp_i64;
use super::sharded_map::ShardedMap;

/// A cached denial: Redis's reply fields and when the call that got it was sent.
#[derive(Clone, Copy)]
struct Denial {
    sent: Instant,
    server_now_us: u64,
    retry_us: u64,
    reset_us: u64,
}

pub(crate) struct DenialCache {
    denials: ShardedMap<Denial>,
    /// Per shard; `shards * cap <= max_keys`, so the total is capped exactly.
    cap: usize,
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
        let denials = ShardedMap::new(max_keys.min(16));
        DenialCache {
            cap: max_keys / denials.shards(),
            denials,
        }
    }

    /// The reply for a call for `n` permits on `key` at `now`, if a cached denial answers it:
    /// `{server time, 0 (denied), 0 (remaining), retry_after, reset_after}`, the script's
    /// check reply, with the server time advanced by the local time elapsed.
    pub(crate) fn lookup(&self, key: &str, n: u64, now: Instant) -> Option<[i64; 5]> {
        if n != 1 {
            return None;
        }
        let mut map = self.denials.lock(key);
        let e = *map.get(key)?;
        let elapsed = elapsed_us_ceil(e.sent, now);
        if elapsed >= e.retry_us {
            // Redis may admit by now: forget it and ask.
            map.remove(key);
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
    /// for `n` permits on `key` sent at `sent`, if it is a denial the cache can answer.
    pub(crate) fn record(&self, key: &str, n: u64, sent: Instant, reply: &[i64]) {
        let &[now, 0, 0, retry, reset] = reply else {
            return;
        };
        let (Ok(server_now_us), Ok(retry_us), Ok(reset_us)) = (
            u64::try_from(now),
            u64::try_from(retry),
            u64::try_from(reset),
        ) else {
            return;
        };
        if n != 1 || retry_us == 0 {
            return;
        }
        let entry = Denial {
            sent,
            server_now_us,
            retry_us,
            reset_us,
        };
        let mut map = self.denials.lock(key);
        if let Some(old) = map.get_mut(key) {
            *old = entry;
            return;
        }
        if map.len() >= self.cap {
            // Full: drop the entries that no longer deny anything; if none, do not cache.
            let now = Instant::now();
            map.retain(|_, e| elapsed_us_ceil(e.sent, now) < e.retry_us);
            if map.len() >= self.cap {
                return;
            }
        }
        map.insert(key.to_owned(), entry);
    }

    /// Forgets `key`'s denial (this process gave permits back on it).
    pub(crate) fn forget(&self, key: &str) {
        self.denials.lock(key).remove(key);
    }

    /// Entries held (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.denials.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A denial reply: `{now, 0, 0, retry_after, reset_after}`.
    fn denied(retry: i64, reset: i64) -> [i64; 5] {
        [1_000_000, 0, 0, retry, reset]
    }

    #[test]
    fn answers_single_permit_calls_until_the_retry_after_from_the_send() {
        let c = DenialCache::new(8);
        let sent = Instant::now();
        c.record("k", 1, sent, &denied(100, 250));
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
        c.record("allowed", 1, sent, &[5, 1, 3, -1, 9]);
        c.record("remaining", 1, sent, &[5, 0, 1, 7, 9]);
        c.record("n2", 2, sent, &denied(100, 100));
        c.record("never", 1, sent, &[5, 2, 0, -1, 9]);
        c.record("zero", 1, sent, &denied(0, 0));
        c.record("short", 1, sent, &[5, 0, 0]);
        assert_eq!(c.len(), 0);
        c.forget("k");
        c.record("k", 1, sent, &denied(100, 100));
        c.forget("k");
        assert_eq!(c.lookup("k", 1, sent), None);
    }

    #[test]
    fn holds_at_most_max_keys_dropping_expired_ones_first() {
        for max in [1, 5, 16, 17, 100] {
            let c = DenialCache::new(max);
            let old = Instant::now() - Duration::from_secs(1);
            for i in 0..3 * max {
                c.record(&format!("old{i}"), 1, old, &denied(10, 10));
            }
            assert!(c.len() <= max, "max {max}: {}", c.len());
            // Expired entries make room for live ones.
            let now = Instant::now();
            let mut live = 0;
            for i in 0..3 * max {
                c.record(&format!("live{i}"), 1, now, &denied(1 << 40, 1 << 40));
                live += usize::from(c.lookup(&format!("live{i}"), 1, now).is_some());
            }
            assert!(c.len() <= max, "max {max}: {}", c.len());
            assert!(live > 0);
        }
    }
}
