//! Which keys are warm enough to track: a count-min sketch of the permits asked for in the
//! current and the previous refresh period, two counters per key chosen by its hash, both in
//! one cache line (one miss per call, not two). A key seen once costs two atomic updates here
//! and nothing else (no lock, no allocation, no entry); only a key whose two counters both
//! reached [`WARM`] gets an entry in the batch table. Keys that share a counter add up, which
//! can only make a cold key look warm (it then gets an entry, whose own count decides its
//! batches), never hide a warm one; with two counters that takes a collision on each
//! (measured: one counter per key in 4096 made most keys of a uniform 100k-key load look warm,
//! at about 1.3 keys per counter per period).

use std::sync::atomic::{AtomicU64, Ordering};

/// Permits asked for in the current and previous period from which a key gets an entry: the
/// least demand that can size a batch (`entry::batch_size`: half of it, at least 2).
pub(crate) const WARM: u64 = 4;

/// Cache lines of 8 counters (128 KiB in all): a load of 10 000 keys per refresh period puts
/// about 0.6 in a counter, and a cold key looks warm only if both its counters reach [`WARM`].
const LINES: usize = 2048;

#[repr(align(64))]
struct Line([AtomicU64; 8]);

/// A slot's word: the period index (high 40 bits), the previous period's count and the
/// current one's (12 bits each, saturating).
const COUNT_BITS: u32 = 12;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;

fn pack(period: u64, prev: u64, cur: u64) -> u64 {
    (period << (2 * COUNT_BITS)) | (prev.min(COUNT_MAX) << COUNT_BITS) | cur.min(COUNT_MAX)
}

fn unpack(w: u64) -> (u64, u64, u64) {
    (
        w >> (2 * COUNT_BITS),
        (w >> COUNT_BITS) & COUNT_MAX,
        w & COUNT_MAX,
    )
}

/// The demand a slot word shows at `period`: the previous and current periods' counts.
fn demand(w: u64, period: u64) -> (u64, u64) {
    let (p, prev, cur) = unpack(w);
    match period.checked_sub(p) {
        Some(0) => (prev, cur),
        Some(1) => (cur, 0),
        _ => (0, 0),
    }
}

pub(crate) struct Heat {
    lines: Box<[Line]>,
}

impl Heat {
    pub(crate) fn new() -> Heat {
        Heat {
            lines: (0..LINES)
                .map(|_| Line(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// Counts `n` permits asked for on the key hashed `h` in `period` (the refresh periods
    /// since the table's start; below 2^40): the key's demand over this period and the
    /// previous one (the smaller of its two counters') if it is [`WARM`], else `None`.
    pub(crate) fn touch(&self, h: u64, n: u64, period: u64) -> Option<u64> {
        // The line from the hash's low bits, the two counters (never the same one) from bits
        // 32 and up (the shard map takes the high half's too, and `h` is uniform). Masked
        // below 2^32: the indices fit.
        let line = &self.lines[(h as usize) & (LINES - 1)].0;
        let i = ((h >> 32) & 7) as usize;
        let j = (i + 1 + ((h >> 35) % 7) as usize) & 7;
        let a = Self::slot(&line[i], n, period);
        let b = Self::slot(&line[j], n, period);
        let demand = a.min(b);
        (demand >= WARM).then_some(demand)
    }

    /// Counts `n` permits in `slot` at `period`; returns its demand over this period and the
    /// previous one. A warm slot is not written: its count only has to say "warm", and hot
    /// keys then cost a load, not a contended update.
    fn slot(slot: &AtomicU64, n: u64, period: u64) -> u64 {
        // The demand the last attempt saw (warm: unchanged), and after adding `n` (cold).
        let (mut seen, mut after) = (0, 0);
        let updated = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
            // A caller behind the slot's period (its clock read before another caller's
            // write) counts in the slot's period: writing its own would drop that one's counts.
            let at = period.max(unpack(w).0);
            let (prev, cur) = demand(w, at);
            seen = prev + cur;
            after = prev + cur.saturating_add(n).min(COUNT_MAX);
            (seen < WARM).then(|| pack(at, prev, cur.saturating_add(n)))
        });
        if updated.is_ok() {
            after
        } else {
            seen
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_warms_after_four_permits_and_cools_after_two_idle_periods() {
        let heat = Heat::new();
        // Line 7, counters 1 and 2.
        let key = 7 | (1 << 32);
        assert_eq!(heat.touch(key, 1, 10), None);
        assert_eq!(heat.touch(key, 2, 10), None);
        assert_eq!(heat.touch(key, 1, 10), Some(4));
        // Warm: not written any more.
        assert_eq!(heat.touch(key, 100, 10), Some(4));
        // The next period still sees the previous one's count.
        assert_eq!(heat.touch(key, 1, 11), Some(4));
        // Two periods on, it starts from zero.
        assert_eq!(heat.touch(key, 1, 13), None);
        // A key sharing one counter only (line 7, counters 2 and 3) does not warm it.
        assert_eq!(heat.touch(7 | (2 << 32), 5, 13), Some(5));
        assert_eq!(heat.touch(key, 1, 13), None);
        // One sharing both (a line index above the mask, the same counters) adds up.
        let twin = key + LINES as u64;
        assert_eq!(heat.touch(twin, 2, 13), Some(4));
    }

    #[test]
    fn a_caller_a_period_behind_counts_in_the_slots_period() {
        let heat = Heat::new();
        let key = 9 | (3 << 32);
        assert_eq!(heat.touch(key, 3, 10), None);
        // Its clock read before the write above: its permit still adds to period 10's.
        assert_eq!(heat.touch(key, 1, 9), Some(4));
        assert_eq!(heat.touch(key, 1, 10), Some(4));
    }

    #[test]
    fn counts_saturate() {
        assert_eq!(
            unpack(pack(5, u64::MAX, u64::MAX)),
            (5, COUNT_MAX, COUNT_MAX)
        );
        let heat = Heat::new();
        assert_eq!(heat.touch(1, u64::MAX, 0), Some(COUNT_MAX));
    }
}
