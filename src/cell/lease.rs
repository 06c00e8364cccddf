//! One shard of a leased limiter: the permits a core took from the shared limiter in advance
//! and has not used yet (`LeasedRateLimiter`, docs/design.md "Past one cache line").
//!
//! **The word** is the count of unused leased permits, or [`TAKING`] while one thread takes a
//! new lease. A call takes one permit by CAS (count - 1) on its shard's own line; only a call
//! that finds the shard empty touches the shared limiter.
//!
//! **Take-when-empty, one taker.** A new lease is taken only by the thread that moved the word
//! from 0 to `TAKING`; it stores what it got, minus the permit it uses itself. Every other call
//! that finds the shard empty or `TAKING` goes to the shared limiter for its one permit. So a
//! shard never holds more than `L - 1` permits, which is what bounds the over-admission:
//! in any window, at most what the shared limiter grants in it plus `shards * (L - 1)` (the
//! permits leased before the window and used in it). Permits are conserved: every permit the
//! taker got is either used by it or stored, and every stored one is used at most once.

use crate::sync::{AtomicU64, Ordering};

/// The word while a thread takes a lease.
const TAKING: u64 = u64::MAX;

#[derive(Debug, Default)]
pub(crate) struct LeaseCell {
    word: AtomicU64,
}

impl LeaseCell {
    /// One permit: from the shard if it holds any; else, if this call becomes the shard's taker,
    /// from `lease()` (how many permits the shared limiter granted, `L`, `1` or `0`), keeping
    /// the rest; else from `one()`, the shared limiter directly.
    #[inline]
    pub(crate) fn acquire(&self, lease: impl FnOnce() -> u64, one: impl FnOnce() -> bool) -> bool {
        let mut w = self.word.load(Ordering::Relaxed);
        while w != 0 && w != TAKING {
            // Relaxed: the count carries no other data; the shared limiter's CAS ordered the
            // grant itself.
            match self
                .word
                .compare_exchange_weak(w, w - 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(seen) => w = seen,
            }
        }
        self.refill(lease, one)
    }

    #[cold]
    fn refill(&self, lease: impl FnOnce() -> u64, one: impl FnOnce() -> bool) -> bool {
        if self
            .word
            .compare_exchange(0, TAKING, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return one();
        }
        let got = lease();
        // Only the taker leaves TAKING: no other write can happen meanwhile.
        self.word.store(got.saturating_sub(1), Ordering::Relaxed);
        got > 0
    }

    /// Unused leased permits now (a taker in progress holds none yet).
    pub(crate) fn held(&self) -> u64 {
        match self.word.load(Ordering::Relaxed) {
            TAKING => 0,
            n => n,
        }
    }
}
