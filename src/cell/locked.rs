//! [`LockedCell`]: a key's state behind a mutex held only while one decision runs on it, never
//! across a sleep or an await (the waiting methods decide, release, then sleep). For states
//! that do not fit a word: the sliding window's sub-window counts and the sliding log.
//!
//! A poisoned lock is taken over as it is: every state change is a single assignment at the
//! end of a decision, so a panic inside one (there are none on any input) could not leave a
//! half-made state.

use crate::sync::{Mutex, MutexGuard};

/// One key's state under a mutex. `Default` is a fresh key.
#[derive(Debug, Default)]
pub struct LockedCell<S> {
    state: Mutex<S>,
}

impl<S> LockedCell<S> {
    /// Runs `f` on the state, holding the lock for exactly that long.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        self.prefetch_tail();
        f(&mut self.lock())
    }

    /// Asks for the cell's last cache line before taking the lock: a cell larger than a line
    /// (the sliding log's in-place entries) would otherwise miss on it only after the lock's
    /// atomic, which waits for its own line and orders every later load behind it.
    #[inline]
    fn prefetch_tail(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let last = std::ptr::from_ref(self)
                .cast::<i8>()
                .wrapping_add(std::mem::size_of::<Self>() - 1);
            // SAFETY: `sse` is part of the x86_64 baseline, and a prefetch is a hint that reads
            // nothing the program can observe, faults on no address and races with no write.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(last) };
        }
    }

    fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
