//! [`Pinned`]: how permits and waiters point at their limiter's cell (and in-flight gauge)
//! without borrowing it. The one place the concurrency limiters argue that such a pointer
//! stays valid; everything else uses its safe accessor.

use std::ptr::NonNull;

/// A shared reference to a `T` of a concurrency limiter (a `SemCell`, or its meter's
/// in-flight gauge) without the borrow's lifetime: what `Held` (the permits inside a
/// `Permit` or `OwnedPermit`) and `Waiter` keep.
///
/// **Invariant:** the `T` stays alive at its address for as long as a `Pinned` to it is used.
/// Every `Pinned` is made from a `&T` borrowed from a limiter, under two rules:
///
/// 1. *The limiter outlives it, unmoved.* The `Pinned` is kept only in values that do not
///    outlive the limiter's borrow `'a` (`Step<'a>`, `Waiter<'a>`, `Permit<'a>`, and a `Held`
///    on its way from one to another inside the acquiring call), or in an `OwnedPermit`, whose
///    `Arc` owns the limiter. A direct limiter's cell and every meter's gauge are fields of
///    the limiter, so they live as long as it does.
/// 2. *A keyed cell is not freed while it is pointed at.* A keyed limiter's cells are boxed
///    in its store's table (the table moving its entries does not move them), and the store
///    frees one only after closing it (`SemCell::try_close`: nothing in flight, nobody queued
///    or holding a refusal it has not seen yet) under its shard's write guard, and quiescing
///    it (`SemCell::quiesce`). So a `Pinned` to a keyed cell is made only for permits now in
///    flight on it (a `Held` of `n >= 1`) or for a waiter now queued on it, under the
///    shard's guard (`SemStore`'s `begin_on` and `try_now`), and used only until the permits
///    are given back or the waiter has finished (it is served, sees its refusal, or leaves).
pub(crate) struct Pinned<T: Sync> {
    ptr: NonNull<T>,
}

// SAFETY: a `Pinned<T>` is a `&T` in all but its lifetime (it gives out only `&T`, valid by
// the type's invariant), and `&T` is `Send` and `Sync` exactly when `T: Sync`.
unsafe impl<T: Sync> Send for Pinned<T> {}
// SAFETY: as for `Send`, above.
unsafe impl<T: Sync> Sync for Pinned<T> {}

impl<T: Sync> Pinned<T> {
    /// Points at `target`, which must follow the type's rules for as long as this is used.
    #[inline(always)]
    pub(crate) fn new(target: &T) -> Pinned<T> {
        Pinned {
            ptr: NonNull::from(target),
        }
    }

    /// The `T` pointed at.
    #[inline(always)]
    pub(crate) fn get(&self) -> &T {
        // SAFETY: alive and unmoved while this is used (type invariant); only shared access
        // is ever given out.
        unsafe { self.ptr.as_ref() }
    }
}
