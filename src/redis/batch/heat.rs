//! Which keys are warm enough to track: a count-min sketch (two rows of atomic counters, each
//! indexed by other bits of the key's hash) of the permits asked for in the current and the
//! previous refresh period. A key seen once costs two atomic updates here and nothing else (no
//! lock, no allocation, no entry); only a key whose count in both rows reached [`WARM`] gets an
//! entry in the batch table. Keys that share a slot add up, which can only make a cold key look
//! warm (it then gets an entry, whose own count decides its batches), never hide a warm one;
//! with two rows that takes a collision in each (measured: one row of 4096 slots made most keys
//! of a uniform 100k-key load look warm, at about 1.3 keys per slot per period).

use std::sync::atomic::{AtomicU64, Ordering};

/// Permits asked for in the current and previous period from which a key gets an entry: the
/// least demand that can size a batch (`entry::batch_size`: half of it, at least 2).
pub(crate) const WARM: u64 = 4;

/// Slots per row (64 KiB each): a load of 10 000 keys per refresh period puts about 1.2 in a
/// slot, and a cold key looks warm only if both its slots reach [`WARM`] (about 0.3% then).
const SLOTS: usize = 8192;

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
    rows: [Box<[AtomicU64]>; 2],
}

impl Heat {
    pub(crate) fn new() -> Heat {
        let row = || (0..SLOTS).map(|_| AtomicU64::new(0)).collect();
        Heat {
            rows: [row(), row()],
        }
    }

    /// Counts `n` permits asked for on the key hashed `h` in `period` (the refresh periods
    /// since the table's start; below 2^40): the key's demand over this period and the
    /// previous one (the smaller of its two slots') if it is [`WARM`], else `None`.
    pub(crate) fn touch(&self, h: u64, n: u64, period: u64) -> Option<u64> {
        // SLOTS is a power of two below 2^32: the indices fit. The rows take the hash's low
        // bits and bits 32 and up (the shard map takes the high half's, and `h` is uniform).
        let a = Self::slot(&self.rows[0][(h as usize) & (SLOTS - 1)], n, period);
        let b = Self::slot(&self.rows[1][((h >> 32) as usize) & (SLOTS - 1)], n, period);
        let demand = a.min(b);
        (demand >= WARM).then_some(demand)
    }

    /// Counts `n` permits in `slot` at `period`; returns its demand over this period and the
    /// previous one. A warm slot is not written: its count only has to say "warm", and hot
    /// keys then cost a load, not a contended update.
    fn slot(slot: &AtomicU64, n: u64, period: u64) -> u64 {
        let mut w = slot.load(Ordering::Relaxed);
        loop {
            let (prev, cur) = demand(w, period);
            if prev + cur >= WARM {
                return prev + cur;
            }
            let next = pack(period, prev, cur.saturating_add(n));
            match slot.compare_exchange_weak(w, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return prev + cur.saturating_add(n).min(COUNT_MAX),
                Err(now) => w = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_warms_after_four_permits_and_cools_after_two_idle_periods() {
        let heat = Heat::new();
        // Row 0 slot 7, row 1 slot 1.
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
        // A key sharing its row-0 slot only does not warm it.
        assert_eq!(heat.touch(7 | (2 << 32), 5, 13), Some(5));
        assert_eq!(heat.touch(key, 1, 13), None);
        // One sharing both slots adds up.
        let twin = key + ((SLOTS as u64) << 32);
        assert_eq!(heat.touch(twin, 2, 13), Some(4));
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
