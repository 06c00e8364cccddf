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
        f(&mut self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
