//! The one place atomics and locks come from.
//!
//! Under `--cfg loom` every primitive is loom's, so the models in `loom-tests/` explore every
//! interleaving of the real protocol code rather than a copy of it.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

pub(crate) use std::sync::TryLockError;

/// A 128-bit atomic (the weighted window counter's word): portable-atomic's (`cmpxchg16b` on
/// x86-64), or under loom a stand-in whose every operation is one step under a loom mutex, so
/// the models explore the CAS loop around it.
#[cfg(not(loom))]
pub(crate) use portable_atomic::AtomicU128;

#[cfg(loom)]
pub(crate) use loom_u128::AtomicU128;

#[cfg(loom)]
mod loom_u128 {
    use super::Ordering;

    #[derive(Debug, Default)]
    pub struct AtomicU128(loom::sync::Mutex<u128>);

    impl AtomicU128 {
        pub(crate) fn load(&self, _: Ordering) -> u128 {
            *self.0.lock().unwrap()
        }

        pub(crate) fn compare_exchange_weak(
            &self,
            current: u128,
            new: u128,
            _: Ordering,
            _: Ordering,
        ) -> Result<u128, u128> {
            let mut v = self.0.lock().unwrap();
            if *v == current {
                *v = new;
                Ok(current)
            } else {
                Err(*v)
            }
        }
    }
}

/// Busy-wait hint inside retry loops; loom must be told to yield or it explores spins forever.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
