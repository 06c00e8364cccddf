//! [`ParamsCell`]: an algorithm's parameters, replaceable at runtime, read without locks and
//! never torn.

use std::marker::PhantomData;

use crate::algorithm::{ParamSource, Words, PARAM_WORDS};
use crate::sync::{spin_hint, AtomicU64, Ordering};

/// A sequence lock over the parameters' words: writers make the sequence odd, store every
/// word, make it even again; readers retry if the sequence was odd or changed while they read.
/// All accesses are acquire/release (free on x86), which is what makes a mixed read impossible
/// to miss: a reader that sees any word of a newer write also sees that write's odd sequence.
///
/// One cache line (the sequence and [`PARAM_WORDS`] words), aligned so that it is not shared
/// with anything a decision writes. A decision reads only the parameters' hot words
/// ([`Words::HOT`]).
#[repr(align(64))]
pub(crate) struct ParamsCell<P> {
    seq: AtomicU64,
    words: [AtomicU64; PARAM_WORDS],
    _params: PhantomData<fn() -> P>,
}

impl<P: Words> ParamsCell<P> {
    pub(crate) fn new(p: P) -> ParamsCell<P> {
        ParamsCell {
            seq: AtomicU64::new(0),
            words: p.to_words().map(AtomicU64::new),
            _params: PhantomData,
        }
    }

    /// The parameters in force, hot words only (the rest read as 0): every word from the same
    /// `store`.
    #[inline(always)]
    pub(crate) fn load(&self) -> P {
        self.read(P::HOT)
    }

    /// The parameters in force, every word from the same `store`.
    #[inline]
    pub(crate) fn load_full(&self) -> P {
        self.read(PARAM_WORDS)
    }

    #[inline(always)]
    fn read(&self, n: usize) -> P {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            let words = std::array::from_fn(|i| {
                if i < n {
                    self.words[i].load(Ordering::Acquire)
                } else {
                    0
                }
            });
            // Unchanged and even, in one compare: an odd `before` (a write under way, whose
            // words are discarded) is never equal to `before & !1`, since the sequence only
            // grows.
            if self.seq.load(Ordering::Acquire) == before & !1 {
                return P::from_words(words);
            }
            spin_hint();
        }
    }

    /// Replaces the parameters; concurrent writers take turns.
    pub(crate) fn store(&self, p: P) {
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
        for (cell, w) in self.words.iter().zip(p.to_words()) {
            cell.store(w, Ordering::Release);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

/// A limiter's parameters as a [`ParamSource`]: read afresh on every load.
#[derive(Clone, Copy)]
pub struct Live<'a, P>(pub(crate) &'a ParamsCell<P>);

impl<P: Words> ParamSource<P> for Live<'_, P> {
    #[inline(always)]
    fn load(&self) -> P {
        self.0.load()
    }

    fn load_full(&self) -> P {
        self.0.load_full()
    }
}

impl<'a, P: Words> Live<'a, P> {
    /// The same parameters read as their first `N` words only (the rest 0), for a decision
    /// that reads no more (GCRA's grant test: `GcraParams::ALLOW_WORDS`). Each word is an
    /// atomic load the compiler cannot drop, even when nothing reads it.
    #[inline(always)]
    pub(crate) fn first<const N: usize>(self) -> First<'a, P, N> {
        First(self.0)
    }
}

/// A limiter's parameters as a [`ParamSource`] whose `load` reads only the first `N` words,
/// every one from the same `store` (`load_full` reads them all): see [`Live::first`].
#[derive(Clone, Copy)]
pub(crate) struct First<'a, P, const N: usize>(&'a ParamsCell<P>);

impl<P: Words, const N: usize> ParamSource<P> for First<'_, P, N> {
    #[inline(always)]
    fn load(&self) -> P {
        self.0.read(N)
    }

    fn load_full(&self) -> P {
        self.0.load_full()
    }
}

impl<P> std::fmt::Debug for ParamsCell<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ParamsCell")
    }
}
