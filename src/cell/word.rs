//! [`WordCell`]: a key's state packed in one atomic word (64 or 128 bits), changed only by a
//! compare-and-swap loop. The window algorithms whose state fits a word use it (the fixed
//! window: window index and count in a `u64`; the weighted counter: window index and two counts
//! in a `u128`); what the bits mean is the algorithm's business (`crate::algorithm`). Their
//! contract on it ([`Rules`]) is written once here, in `word_rules!`.
//!
//! **The protocol.** Load the word, load the parameters (after the word, so they are never
//! older than it: a word written under a newer quota generation is never read with older
//! parameters), compute a result and maybe a new word from those two values alone, then CAS.
//! A lost CAS means another decision changed the word: recompute against the value that won,
//! with parameters loaded again. Nothing is stored unless the step says so (denials, peeks), so
//! a decision is linearized at its successful CAS, or at its last load if it stores nothing.

use super::rules::{window_booking, Rules};
use crate::algorithm::window::Verdict;
use crate::algorithm::{fixed_window, weighted};
use crate::algorithm::{Adjust, Booking, FixedWindow, ParamSource, WeightedWindow};
use crate::decision::AcquireError;
use crate::sync::{AtomicU128, AtomicU64, Ordering};
use crate::Nanos;

/// An atomic integer a [`WordCell`] can be made of.
pub trait Atom: Default + Send + Sync + 'static {
    /// The integer it holds.
    type Value: Copy + Eq + std::fmt::Debug;
    fn get(&self) -> Self::Value;
    /// `compare_exchange_weak` with acquire/release ordering: `Err` carries the value seen.
    fn swap_if(&self, current: Self::Value, new: Self::Value) -> Result<(), Self::Value>;
}

impl Atom for AtomicU64 {
    type Value = u64;

    #[inline(always)]
    fn get(&self) -> u64 {
        self.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn swap_if(&self, current: u64, new: u64) -> Result<(), u64> {
        self.compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
    }
}

impl Atom for AtomicU128 {
    type Value = u128;

    #[inline]
    fn get(&self) -> u128 {
        self.load(Ordering::Acquire)
    }

    #[inline]
    fn swap_if(&self, current: u128, new: u128) -> Result<(), u128> {
        self.compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
    }
}

/// One key's state in one atomic word. `Default` is the all-zero word, which every algorithm
/// using it reads as a fresh key.
#[derive(Debug, Default)]
pub struct WordCell<A: Atom> {
    word: A,
}

impl<A: Atom> WordCell<A> {
    /// The CAS loop every operation runs: `step` sees the word and the parameters loaded after
    /// it, and returns its result and the word to store (`None`: store nothing). Runs again on
    /// a lost race, against the value that won.
    #[inline(always)]
    pub(crate) fn update<P, R>(
        &self,
        src: &impl ParamSource<P>,
        mut step: impl FnMut(A::Value, &P) -> (R, Option<A::Value>),
    ) -> R {
        let mut w = self.word.get();
        loop {
            let p = src.load();
            let (result, store) = step(w, &p);
            match store {
                Some(new) if new != w => match self.word.swap_if(w, new) {
                    Ok(()) => return result,
                    Err(seen) => w = seen,
                },
                // Nothing to store, or the same word: linearized at the load.
                _ => return result,
            }
        }
    }

    /// The word as it is now.
    #[inline]
    pub(crate) fn get(&self) -> A::Value {
        self.word.get()
    }
}

/// The [`Rules`] impl of `$alg`, a window whose state is one `$atom` word: the pure steps of
/// `crate::algorithm::$rule` (`current`, `decide`, `pack`, `adjust`, `cold_at`,
/// `is_empty_word`) run as steps of [`WordCell::update`]. `$decide` is the rule's decision,
/// `$keyed` its form for a keyed table's word (often not in cache: the rule may decide there
/// without branching on it). A macro, not an impl over a trait of those steps: that blanket
/// impl would overlap `sliding`'s over `Stamping`.
macro_rules! word_rules {
    ($alg:ty, $atom:ty, $rule:ident, $decide:ident, $keyed:ident) => {
        impl Rules for $alg {
            type Cell = WordCell<$atom>;

            // Always inlined, as GCRA's: a caller that reads one field of the verdict
            // (`try_acquire` reads `allowed`) then computes no other (the weighted counter: a
            // 128-bit division for `remaining`).
            #[inline(always)]
            fn check(
                &self,
                cell: &Self::Cell,
                now: Nanos,
                n: u64,
                keyed: bool,
                p: &impl ParamSource<Self::Params>,
            ) -> Verdict {
                cell.update(
                    p,
                    #[inline(always)]
                    |w, p| {
                        let s = $rule::current(w, p);
                        let (v, store) = if keyed {
                            $rule::$keyed(s, now, n, p)
                        } else {
                            $rule::$decide(s, now, n, p)
                        };
                        (v, store.map(|s| $rule::pack(s, p)))
                    },
                )
            }

            window_booking!(Self::Params);

            fn adjust(
                &self,
                cell: &Self::Cell,
                now: Nanos,
                op: Adjust,
                p: &impl ParamSource<Self::Params>,
            ) -> [Verdict; 2] {
                cell.update(p, |w, p| {
                    let s = $rule::adjust($rule::current(w, p), now, op, p);
                    let look = $rule::decide(s, now, 0, p).0;
                    let one = $rule::decide(s, now, 1, p).0;
                    ([look, one], Some($rule::pack(s, p)))
                })
            }

            fn migrate(&self, cell: &Self::Cell, p: &impl ParamSource<Self::Params>) {
                cell.update(p, |w, p| ((), Some($rule::pack($rule::current(w, p), p))));
            }

            fn cold_at(&self, cell: &Self::Cell, p: &Self::Params) -> Nanos {
                $rule::cold_at($rule::current(cell.get(), p), p)
            }

            fn is_fresh(&self, cell: &Self::Cell) -> bool {
                $rule::is_empty_word(cell.get())
            }
        }
    };
}

word_rules!(
    FixedWindow,
    AtomicU64,
    fixed_window,
    decide,
    decide_by_selects
);
word_rules!(WeightedWindow, AtomicU128, weighted, decide, decide);
