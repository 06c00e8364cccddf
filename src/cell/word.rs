//! [`WordCell`]: a key's state packed in one atomic word (64 or 128 bits), changed only by a
//! compare-and-swap loop. The window algorithms whose state fits a word use it (the fixed
//! window: window index and count in a `u64`; the weighted counter: window index and two counts
//! in a `u128`); what the bits mean is the algorithm's business (`crate::algorithm`).
//!
//! **The protocol.** Load the word, load the parameters (after the word, so they are never
//! older than it: a word written under a newer quota generation is never read with older
//! parameters), compute a result and maybe a new word from those two values alone, then CAS.
//! A lost CAS means another decision changed the word: recompute against the value that won,
//! with parameters loaded again. Nothing is stored unless the step says so (denials, peeks), so
//! a decision is linearized at its successful CAS, or at its last load if it stores nothing.

use crate::algorithm::ParamSource;
use crate::sync::{AtomicU128, AtomicU64, Ordering};

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
