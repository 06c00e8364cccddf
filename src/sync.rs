//! The one place atomics and locks come from.
//!
//! Under `--cfg loom` every primitive is loom's, so the models in `loom-tests/` explore every
//! interleaving of the real protocol code rather than a copy of it.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

pub(crate) use std::sync::TryLockError;

/// A small number for the calling thread, distinct from every other thread's until `usize`
/// wraps: threads numbered in the order they first ask, so consecutive threads land on
/// different shards (`LeasedRateLimiter`). Only a spreading hint, not part of any protocol,
/// hence std's atomic even under loom (a loom atomic cannot be a `static`).
pub(crate) fn thread_index() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local!(static INDEX: usize = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    INDEX.with(|i| *i)
}

// The keyed store's shard locks. parking_lot's: a read lock is one CAS, and a write guard can
// be released *fairly* ([`unlock_fair`]), handing the lock to the readers parked on it.
#[cfg(not(loom))]
pub(crate) use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Releases a write lock fairly: the threads parked on it get the lock before this thread
/// (or any other) can take it again.
#[cfg(not(loom))]
#[inline]
pub(crate) fn unlock_fair<T>(guard: RwLockWriteGuard<'_, T>) {
    RwLockWriteGuard::unlock_fair(guard);
}

#[cfg(loom)]
pub(crate) use self::loom_rwlock::{unlock_fair, RwLock, RwLockReadGuard};

/// loom's `RwLock` with parking_lot's signatures (no poisoning). loom has no fair unlock; a
/// plain release lets loom explore every order of who takes the lock next, fair or not.
#[cfg(loom)]
mod loom_rwlock {
    use std::sync::PoisonError;

    pub(crate) use loom::sync::{RwLockReadGuard, RwLockWriteGuard};

    pub(crate) struct RwLock<T>(loom::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(v: T) -> RwLock<T> {
            RwLock(loom::sync::RwLock::new(v))
        }

        pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
            self.0.read().unwrap_or_else(PoisonError::into_inner)
        }

        pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
            self.0.write().unwrap_or_else(PoisonError::into_inner)
        }
    }

    pub(crate) fn unlock_fair<T>(guard: RwLockWriteGuard<'_, T>) {
        drop(guard);
    }
}
// One 128-bit word: the smooth (Guava-style) limiter's state, the weighted window's counts.
#[cfg(loom)]
pub(crate) use self::loom_u128::AtomicU128;
#[cfg(not(loom))]
pub(crate) use portable_atomic::AtomicU128;

/// loom has no 128-bit atomic. This stand-in is a loom `Mutex<u128>` with the methods the
/// library uses: every call is one step loom schedules around, so the models still explore
/// every interleaving of loads and CASes on the word. A mutex orders more strongly than the
/// real word's Acquire loads and AcqRel CASes, so the models cannot catch a weakened ordering
/// on the word itself (the sequence lock around it uses loom's own atomics).
#[cfg(loom)]
mod loom_u128 {
    use super::{Mutex, Ordering};

    #[derive(Debug, Default)]
    pub struct AtomicU128(Mutex<u128>);

    impl AtomicU128 {
        pub(crate) fn new(v: u128) -> AtomicU128 {
            AtomicU128(Mutex::new(v))
        }

        pub(crate) fn load(&self, _: Ordering) -> u128 {
            *self.0.lock().unwrap()
        }

        pub(crate) fn compare_exchange_weak(
            &self,
            current: u128,
            new: u128,
            success: Ordering,
            failure: Ordering,
        ) -> Result<u128, u128> {
            self.compare_exchange(current, new, success, failure)
        }

        pub(crate) fn compare_exchange(
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
