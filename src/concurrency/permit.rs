//! [`Permit`] and [`OwnedPermit`]: permits held, given back when dropped.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::cell::semaphore::SemCell;
use crate::concurrency::pinned::Pinned;

/// Permits of a concurrency limiter, held until dropped (RAII): dropping the permit gives them
/// back, and the first waiter they let in is served.
///
/// An empty permit (`n = 0`, or a key the cap left untracked) gives nothing back.
///
/// ```
/// use tollgate::ConcurrencyLimiter;
///
/// let limiter = ConcurrencyLimiter::new(2).unwrap();
/// let permit = limiter.try_acquire_n(2).unwrap();
/// assert_eq!((permit.n(), limiter.in_flight()), (2, 2));
/// drop(permit);
/// assert_eq!(limiter.in_flight(), 0);
/// ```
#[must_use = "a permit is given back as soon as it is dropped"]
pub struct Permit<'a> {
    held: Held,
    _limiter: PhantomData<&'a SemCell>,
}

/// A `'static` [`Permit`]: it keeps its limiter alive (through the `Arc` it was acquired from)
/// and can move into `tokio::spawn` or `std::thread::spawn`.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::ConcurrencyLimiter;
///
/// let limiter = Arc::new(ConcurrencyLimiter::new(1).unwrap());
/// let permit = limiter.try_acquire_owned().unwrap();
/// std::thread::spawn(move || {
///     let _held = permit; // given back when the thread ends
/// })
/// .join()
/// .unwrap();
/// assert_eq!(limiter.in_flight(), 0);
/// ```
#[must_use = "a permit is given back as soon as it is dropped"]
pub struct OwnedPermit {
    held: Held,
    _owner: Arc<dyn Send + Sync>,
}

/// `n` permits of `cell` (none if `cell` is `None`): in flight on it until dropped, which is
/// what keeps a keyed cell from eviction ([`Pinned`]'s rules).
pub(crate) struct Held {
    cell: Option<Pinned<SemCell>>,
    /// In the cell's width: only a count no larger than a limit is ever granted.
    n: u32,
    /// The limiter's in-flight gauge, lowered by `n` on release (feature `metrics`): in the
    /// limiter's meter, so it outlives the permits by [`Pinned`]'s first rule.
    #[cfg(feature = "metrics")]
    gauge: Option<Pinned<metrics::Gauge>>,
}

impl Held {
    /// `n` permits now in flight on `cell`. A zero `n` holds nothing.
    pub(crate) fn new(cell: &SemCell, n: u32) -> Held {
        Held {
            cell: (n > 0).then(|| Pinned::new(cell)),
            n,
            #[cfg(feature = "metrics")]
            gauge: None,
        }
    }

    /// `n` permits counted nowhere (a key left untracked by a full key cap).
    pub(crate) fn untracked(n: u32) -> Held {
        Held {
            cell: None,
            n,
            #[cfg(feature = "metrics")]
            gauge: None,
        }
    }

    /// Counts these permits in `gauge` until they are released: the limiter's own meter's
    /// (see `gauge`).
    #[cfg(feature = "metrics")]
    #[inline(always)]
    pub(crate) fn counted_in(mut self, gauge: Option<&metrics::Gauge>) -> Held {
        if let (Some(g), true) = (gauge, self.n > 0) {
            g.increment(f64::from(self.n));
            self.gauge = Some(Pinned::new(g));
        }
        self
    }

    fn forget(&mut self) {
        // Forgotten permits stay in flight for good, in the cell and in the gauge.
        self.cell = None;
        #[cfg(feature = "metrics")]
        {
            self.gauge = None;
        }
    }
}

impl Drop for Held {
    #[inline]
    fn drop(&mut self) {
        if let Some(cell) = &self.cell {
            cell.get().release(self.n);
        }
        #[cfg(feature = "metrics")]
        if let Some(gauge) = &self.gauge {
            gauge.get().decrement(f64::from(self.n));
        }
    }
}

impl<'a> Permit<'a> {
    pub(crate) fn new(held: Held) -> Permit<'a> {
        Permit {
            held,
            _limiter: PhantomData,
        }
    }

    /// How many permits this holds.
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(3).unwrap();
    /// assert_eq!(limiter.try_acquire_n(2).unwrap().n(), 2);
    /// ```
    pub fn n(&self) -> u64 {
        u64::from(self.held.n)
    }

    /// Keeps the permits taken forever: they are never given back (the limit is lowered for
    /// good by `n`, and a keyed limiter's key is never evicted).
    ///
    /// ```
    /// let limiter = tollgate::ConcurrencyLimiter::new(3).unwrap();
    /// limiter.try_acquire().unwrap().forget();
    /// assert_eq!(limiter.available(), 2);
    /// ```
    pub fn forget(mut self) {
        self.held.forget();
    }
}

impl OwnedPermit {
    pub(crate) fn new(held: Held, owner: Arc<dyn Send + Sync>) -> OwnedPermit {
        OwnedPermit {
            held,
            _owner: owner,
        }
    }

    /// How many permits this holds.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::ConcurrencyLimiter::new(3).unwrap());
    /// assert_eq!(limiter.try_acquire_n_owned(2).unwrap().n(), 2);
    /// ```
    pub fn n(&self) -> u64 {
        u64::from(self.held.n)
    }

    /// Keeps the permits taken forever, as [`Permit::forget`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// let limiter = Arc::new(tollgate::ConcurrencyLimiter::new(3).unwrap());
    /// limiter.try_acquire_owned().unwrap().forget();
    /// assert_eq!(limiter.available(), 2);
    /// ```
    pub fn forget(mut self) {
        self.held.forget();
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("n", &self.held.n).finish()
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("n", &self.held.n)
            .finish()
    }
}
