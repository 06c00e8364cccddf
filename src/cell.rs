//! The lock-free parts: the per-key TAT cell and the quota cell. Everything that CASes lives here.

use crate::gcra::{self, Ticket, Verdict};
use crate::outcome::AcquireError;
use crate::quota::Quota;
use crate::sync::{spin_hint, AtomicU64, Ordering};
use crate::Nanos;

/// One GCRA state: the theoretical arrival time in one atomic word. `0` (or anything `<= now`)
/// means a full bucket, so a fresh cell needs no sentinel.
#[derive(Debug, Default)]
pub(crate) struct TatCell {
    tat: AtomicU64,
}

impl TatCell {
    pub(crate) fn new() -> TatCell {
        TatCell::default()
    }

    /// The CAS loop every rule runs through: `step` sees the current TAT and says what to
    /// return and what to store (`None`: store nothing). On a lost race it runs again with the
    /// value that won, so each decision is made against the TAT it replaces.
    #[inline]
    fn update<R>(&self, mut step: impl FnMut(Nanos) -> (R, Option<Nanos>)) -> R {
        let mut current = self.tat.load(Ordering::Acquire);
        loop {
            let (result, store) = step(current);
            let Some(new) = store else { return result };
            match self
                .tat
                .compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return result,
                Err(seen) => current = seen,
            }
        }
    }

    /// Check `n` permits at `now`; stores only when allowed.
    #[inline]
    pub(crate) fn check(&self, now: Nanos, n: u64, q: Quota) -> Verdict {
        self.update(|tat| {
            let v = gcra::check(tat, now, n, q);
            (v, v.store())
        })
    }

    /// Reserve `n` permits at `now`, unless the wait would exceed `max_wait`.
    #[inline]
    pub(crate) fn reserve(
        &self,
        now: Nanos,
        n: u64,
        q: Quota,
        max_wait: Option<Nanos>,
    ) -> Result<Ticket, AcquireError> {
        self.update(|tat| match gcra::reserve(tat, now, n, q, max_wait) {
            Ok(ticket) => (
                Ok(ticket),
                (ticket.new_tat != tat).then_some(ticket.new_tat),
            ),
            Err(e) => (Err(e), None),
        })
    }

    /// Cancel a reservation made on this cell (refund rule in [`gcra::refund`]).
    pub(crate) fn cancel(&self, now: Nanos, ticket: &Ticket) {
        self.update(|tat| ((), gcra::refund(tat, ticket, now)))
    }

    /// The stored TAT (a cell with `tat <= now` is cold: a full bucket, lossless to evict).
    pub(crate) fn tat(&self) -> Nanos {
        self.tat.load(Ordering::Acquire)
    }
}

/// A quota that can be replaced at runtime, read without locks and never torn.
///
/// A sequence lock: writers make the sequence odd, store both halves, make it even again;
/// readers retry if the sequence was odd or changed while they read. All accesses are
/// acquire/release (free on x86), which is what makes a mixed read impossible to miss: a reader
/// that sees any half of a newer write also sees that write's odd sequence number.
#[derive(Debug)]
pub(crate) struct QuotaCell {
    seq: AtomicU64,
    interval: AtomicU64,
    burst: AtomicU64,
}

impl QuotaCell {
    pub(crate) fn new(q: Quota) -> QuotaCell {
        QuotaCell {
            seq: AtomicU64::new(0),
            interval: AtomicU64::new(q.t()),
            burst: AtomicU64::new(q.burst()),
        }
    }

    /// The quota in force: a consistent `(T, b)` pair from one `store`.
    #[inline]
    pub(crate) fn load(&self) -> Quota {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 0 {
                let interval = self.interval.load(Ordering::Acquire);
                let burst = self.burst.load(Ordering::Acquire);
                if self.seq.load(Ordering::Acquire) == before {
                    return Quota::from_parts(interval, burst);
                }
            }
            spin_hint();
        }
    }

    /// Replaces the quota; concurrent writers take turns.
    pub(crate) fn store(&self, q: Quota) {
        let seq = loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq & 1 == 0
                && self
                    .seq
                    .compare_exchange(seq, seq + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                break seq;
            }
            spin_hint();
        };
        self.interval.store(q.t(), Ordering::Release);
        self.burst.store(q.burst(), Ordering::Release);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}
