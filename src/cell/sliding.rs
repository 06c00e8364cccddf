//! The sliding window's and the sliding log's contract on their cell: the shared pure rule
//! (`crate::algorithm::sliding`: the log, `decide`, `adjust`, quota generations) run on a
//! [`LockedCell`], the parameters loaded under the key's lock.

use super::locked::LockedCell;
use super::rules::{window_booking, Rules};
use crate::algorithm::sliding::{adjust, decide, Log, SlidingParams, Stamping};
use crate::algorithm::window::Verdict;
use crate::algorithm::{Adjust, Booking, ParamSource};
use crate::decision::AcquireError;
use crate::Nanos;

impl<S: Stamping> Rules for S {
    type Cell = LockedCell<Log>;

    #[inline]
    fn check(
        &self,
        cell: &Self::Cell,
        now: Nanos,
        n: u64,
        _keyed: bool,
        p: &impl ParamSource<SlidingParams>,
    ) -> Verdict {
        cell.with(|log| decide(log, now, n, &p.load()))
    }

    window_booking!(SlidingParams);

    fn adjust(
        &self,
        cell: &Self::Cell,
        now: Nanos,
        op: Adjust,
        p: &impl ParamSource<SlidingParams>,
    ) -> [Verdict; 2] {
        cell.with(|log| {
            let p = p.load();
            adjust(log, now, op, &p);
            // A one-permit check on a copy: it records the permit if granted.
            let one = decide(&mut log.clone(), now, 1, &p);
            [decide(log, now, 0, &p), one]
        })
    }

    /// The parameters are loaded under the key's lock, here and in `check`: a log is then
    /// never read with parameters older than the generation it is in.
    fn migrate(&self, cell: &Self::Cell, p: &impl ParamSource<SlidingParams>) {
        cell.with(|log| log.enter(&p.load()));
    }

    fn cold_at(&self, cell: &Self::Cell, p: &SlidingParams) -> Nanos {
        cell.with(|log| log.cold_at(p))
    }

    fn is_fresh(&self, cell: &Self::Cell) -> bool {
        cell.with(|log| log.is_empty())
    }
}
