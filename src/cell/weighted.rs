//! The weighted window counter's contract on its cell: its pure rule
//! (`crate::algorithm::weighted`: the word's layout, `decide`, `adjust`, `cold_at`) run as steps
//! of a [`WordCell`]'s CAS loop on a `u128`.

use super::rules::{window_booking, Rules};
use super::word::WordCell;
use crate::algorithm::weighted::{
    adjust, cold_at, current, decide, is_empty_word, pack, WeightedParams,
};
use crate::algorithm::window::Verdict;
use crate::algorithm::{Adjust, Booking, ParamSource, WeightedWindow};
use crate::decision::AcquireError;
use crate::sync::AtomicU128;
use crate::Nanos;

impl Rules for WeightedWindow {
    type Cell = WordCell<AtomicU128>;

    // Always inlined, as GCRA's: a caller that reads one field of the verdict (`try_acquire`
    // reads `allowed`) then computes no other (here: a 128-bit division for `remaining`).
    #[inline(always)]
    fn check(
        &self,
        cell: &Self::Cell,
        now: Nanos,
        n: u64,
        p: &impl ParamSource<WeightedParams>,
    ) -> Verdict {
        cell.update(
            p,
            #[inline(always)]
            |w, p| {
                let (v, store) = decide(current(w, p), now, n, p);
                (v, store.map(|s| pack(s, p)))
            },
        )
    }

    window_booking!(WeightedParams);

    fn adjust(
        &self,
        cell: &Self::Cell,
        now: Nanos,
        op: Adjust,
        p: &impl ParamSource<WeightedParams>,
    ) -> [Verdict; 2] {
        cell.update(p, |w, p| {
            let s = adjust(current(w, p), now, op, p);
            let look = decide(s, now, 0, p).0;
            let one = decide(s, now, 1, p).0;
            ([look, one], Some(pack(s, p)))
        })
    }

    fn migrate(&self, cell: &Self::Cell, p: &impl ParamSource<WeightedParams>) {
        cell.update(p, |w, p| ((), Some(pack(current(w, p), p))));
    }

    fn cold_at(&self, cell: &Self::Cell, p: &WeightedParams) -> Nanos {
        cold_at(current(cell.get(), p), p)
    }

    fn is_fresh(&self, cell: &Self::Cell) -> bool {
        is_empty_word(cell.get())
    }
}
