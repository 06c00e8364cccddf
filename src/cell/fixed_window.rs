//! The fixed window's contract on its cell: its pure rule (`crate::algorithm::fixed_window`:
//! the word's layout, `decide`, `adjust`, `cold_at`) run as steps of a [`WordCell`]'s CAS loop
//! on a `u64`.

use super::rules::{window_booking, Rules};
use super::word::WordCell;
use crate::algorithm::fixed_window::{
    adjust, cold_at, current, decide, decide_by_selects, is_empty_word, pack, FixedParams,
};
use crate::algorithm::window::Verdict;
use crate::algorithm::{Adjust, Booking, FixedWindow, ParamSource};
use crate::decision::AcquireError;
use crate::sync::AtomicU64;
use crate::Nanos;

impl Rules for FixedWindow {
    type Cell = WordCell<AtomicU64>;

    // Always inlined, as GCRA's: a caller that reads one field of the verdict (`try_acquire`
    // reads `allowed`) then computes no other.
    #[inline(always)]
    fn check(
        &self,
        cell: &Self::Cell,
        now: Nanos,
        n: u64,
        p: &impl ParamSource<FixedParams>,
    ) -> Verdict {
        cell.update(
            p,
            #[inline(always)]
            |w, p| {
                let (v, store) = decide(current(w, p), now, n, p);
                (v, store.map(|(k, c)| pack(k, c, p)))
            },
        )
    }

    /// `check` with the window in force chosen by selects ([`decide_by_selects`]): a keyed
    /// table's word is often not in cache.
    #[inline(always)]
    fn check_keyed(
        &self,
        cell: &Self::Cell,
        now: Nanos,
        n: u64,
        p: &impl ParamSource<FixedParams>,
    ) -> Verdict {
        cell.update(
            p,
            #[inline(always)]
            |w, p| {
                let (v, store) = decide_by_selects(current(w, p), now, n, p);
                (v, store.map(|(k, c)| pack(k, c, p)))
            },
        )
    }

    window_booking!(FixedParams);

    fn adjust(
        &self,
        cell: &Self::Cell,
        now: Nanos,
        op: Adjust,
        p: &impl ParamSource<FixedParams>,
    ) -> [Verdict; 2] {
        cell.update(p, |w, p| {
            let s = adjust(current(w, p), now, op, p);
            let look = decide(s, now, 0, p).0;
            let one = decide(s, now, 1, p).0;
            ([look, one], Some(pack(s.0, s.1, p)))
        })
    }

    fn migrate(&self, cell: &Self::Cell, p: &impl ParamSource<FixedParams>) {
        cell.update(p, |w, p| {
            let (k, c) = current(w, p);
            ((), Some(pack(k, c, p)))
        });
    }

    fn cold_at(&self, cell: &Self::Cell, p: &FixedParams) -> Nanos {
        cold_at(current(cell.get(), p), p)
    }

    fn is_fresh(&self, cell: &Self::Cell) -> bool {
        is_empty_word(cell.get())
    }
}
