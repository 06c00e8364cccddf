//! [`ConcurrencyBackend`]: what the HTTP layer's concurrency mode needs from a keyed
//! concurrency limiter (at most `limit` requests in flight per key), [`Busy`] (its "not now"),
//! and [`NoConcurrency`] (a layer without that mode).
//!
//! Kept small on purpose, as [`Backend`](super::super::Backend) is for rate limits, so that
//! any keyed semaphore can sit behind the layer: take a permit for a key now or refuse, and say
//! the limit.
//! The permit is a `'static` guard the layer keeps until the response body is finished or
//! dropped (see [`PermitBody`](super::super::PermitBody)); dropping it gives the slot back.

use std::fmt;
use std::sync::Arc;

/// A keyed concurrency limiter the HTTP layer can run: at most [`limit`](Self::limit)
/// requests in flight per key. Implement it for your own limiter (say, a `tokio::sync::Semaphore`
/// per key); the layer takes one permit per request with
/// [`try_acquire_n_owned`](Self::try_acquire_n_owned) and holds it until the response body
/// ends or is dropped.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::{Arc, Mutex};
/// use tollgate::http::{Busy, ConcurrencyBackend};
///
/// /// Per-key counters under one lock.
/// struct Counters {
///     limit: u64,
///     held: Mutex<HashMap<String, u64>>,
/// }
///
/// /// One slot of a key, given back on drop.
/// struct Slot(Arc<Counters>, String, u64);
///
/// impl Drop for Slot {
///     fn drop(&mut self) {
///         let mut held = self.0.held.lock().unwrap();
///         let n = held.get_mut(&self.1).expect("a slot's key is tracked");
///         *n -= self.2;
///         if *n == 0 {
///             held.remove(&self.1); // nothing in flight: forget the key
///         }
///     }
/// }
///
/// impl ConcurrencyBackend for Counters {
///     type Key = String;
///     type Permit = Slot;
///
///     fn limit(&self) -> u64 {
///         self.limit
///     }
///
///     fn keys_bounded(&self) -> bool {
///         true // a key is tracked only while it holds a slot
///     }
///
///     fn try_acquire_n_owned(self: &Arc<Self>, key: &String, n: u64) -> Result<Slot, Busy> {
///         let mut held = self.held.lock().unwrap();
///         let in_flight = held.entry(key.clone()).or_insert(0);
///         if self.limit.saturating_sub(*in_flight) < n {
///             if *in_flight == 0 {
///                 held.remove(key);
///             }
///             return Err(Busy::new(self.limit));
///         }
///         *in_flight += n;
///         Ok(Slot(Arc::clone(self), key.clone(), n))
///     }
/// }
///
/// let c = Arc::new(Counters { limit: 1, held: Mutex::new(HashMap::new()) });
/// let first = c.try_acquire_n_owned(&"alice".to_owned(), 1).unwrap();
/// assert_eq!(c.try_acquire_n_owned(&"alice".to_owned(), 1).err(), Some(Busy::new(1)));
/// assert!(c.try_acquire_n_owned(&"bob".to_owned(), 1).is_ok()); // keys are independent
/// drop(first);
/// assert!(c.try_acquire_n_owned(&"alice".to_owned(), 1).is_ok());
/// ```
pub trait ConcurrencyBackend: Send + Sync + 'static {
    /// The key type (the layer's key extractor must produce it).
    type Key: Send + Sync + 'static;
    /// A held slot: dropping it gives the slot back. `'static`, since the layer moves it into
    /// the response body, which outlives the call.
    type Permit: Send + 'static;

    /// The most permits one key may hold at once (the limit in force; it may change live).
    /// [`build`](super::super::RateLimitLayerBuilder::build) refuses a backend whose limit is 0
    /// ([`BuildError::ZeroConcurrency`](super::super::BuildError::ZeroConcurrency)): it would
    /// refuse every request.
    ///
    /// ```
    /// use tollgate::http::ConcurrencyBackend;
    /// use tollgate::KeyedConcurrencyLimiter;
    ///
    /// let limiter = KeyedConcurrencyLimiter::<u8>::new(4).unwrap();
    /// assert_eq!(ConcurrencyBackend::limit(&limiter), 4);
    /// limiter.set_limit(8).unwrap();
    /// assert_eq!(ConcurrencyBackend::limit(&limiter), 8);
    /// ```
    fn limit(&self) -> u64;

    /// Whether the memory this backend keeps for keys stays bounded however many distinct keys
    /// arrive (a key cap, or keys forgotten once they hold nothing and nobody waits, within a
    /// bound). As for rate limits ([`Backend::keys_bounded`](super::super::Backend::keys_bounded)),
    /// [`build`](super::super::RateLimitLayerBuilder::build) refuses a backend that says no unless
    /// [`allow_unbounded_keys`](super::super::RateLimitLayerBuilder::allow_unbounded_keys) is set.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tollgate::http::ConcurrencyBackend;
    /// use tollgate::KeyedConcurrencyLimiter;
    ///
    /// assert!(!KeyedConcurrencyLimiter::<String>::new(4).unwrap().keys_bounded());
    /// let capped = KeyedConcurrencyLimiter::<String>::builder(4)
    ///     .unwrap()
    ///     .max_keys(NonZeroUsize::new(100_000).unwrap())
    ///     .build();
    /// assert!(capped.keys_bounded());
    /// ```
    fn keys_bounded(&self) -> bool;

    /// Takes `n` permits for `key` if that many are free now, or refuses at once with
    /// [`Busy`] (never waits). The layer asks for `n = 1` per request.
    ///
    /// # Errors
    /// [`Busy`] when `key` has fewer than `n` permits free.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::{Busy, ConcurrencyBackend};
    /// use tollgate::KeyedConcurrencyLimiter;
    ///
    /// let limiter = Arc::new(KeyedConcurrencyLimiter::<u8>::new(2).unwrap());
    /// let permit = ConcurrencyBackend::try_acquire_n_owned(&limiter, &1, 2).unwrap();
    /// let refused = ConcurrencyBackend::try_acquire_n_owned(&limiter, &1, 1);
    /// assert_eq!(refused.err(), Some(Busy::new(2)));
    /// // `'static`: the permit can outlive the call (the layer moves it into the body).
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert!(ConcurrencyBackend::try_acquire_n_owned(&limiter, &1, 2).is_ok());
    /// ```
    fn try_acquire_n_owned(self: &Arc<Self>, key: &Self::Key, n: u64)
        -> Result<Self::Permit, Busy>;
}

/// A refusal from a [`ConcurrencyBackend`]: the key has no free permit now, or (made with
/// [`key_cap_reached`](Busy::key_cap_reached)) the key is new and the backend's key table is
/// full. Carries the limit in force, which the layer states in its rejection
/// (`application/problem+json` detail, gRPC message). The layer answers the first with its
/// busy status (`429` by default), the second with `503 Service Unavailable`: the server's
/// capacity, not the client's.
///
/// ```
/// let busy = tollgate::http::Busy::new(2);
/// assert_eq!(busy.limit(), 2);
/// assert_eq!(busy.to_string(), "concurrency limit reached: 2 in flight");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Busy {
    limit: u64,
    key_cap: bool,
}

impl Busy {
    /// A refusal under a limit of `limit` permits per key.
    ///
    /// ```
    /// assert_eq!(tollgate::http::Busy::new(3).limit(), 3);
    /// ```
    #[must_use]
    pub const fn new(limit: u64) -> Busy {
        Busy {
            limit,
            key_cap: false,
        }
    }

    /// A refusal of a new key because the backend's key table is full (its key cap reached),
    /// under a limit of `limit` permits per key.
    ///
    /// ```
    /// let full = tollgate::http::Busy::key_cap_reached(3);
    /// assert!(full.is_key_cap_reached() && !tollgate::http::Busy::new(3).is_key_cap_reached());
    /// ```
    #[must_use]
    pub const fn key_cap_reached(limit: u64) -> Busy {
        Busy {
            limit,
            key_cap: true,
        }
    }

    /// Whether the key was refused because the key table is full, not because it is busy.
    ///
    /// ```
    /// assert!(tollgate::http::Busy::key_cap_reached(1).is_key_cap_reached());
    /// ```
    #[must_use]
    pub const fn is_key_cap_reached(&self) -> bool {
        self.key_cap
    }

    /// The limit in force when the request was refused.
    ///
    /// ```
    /// assert_eq!(tollgate::http::Busy::new(5).limit(), 5);
    /// ```
    #[must_use]
    pub const fn limit(&self) -> u64 {
        self.limit
    }
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key_cap {
            write!(f, "key table full: no room to track a new key")
        } else {
            write!(f, "concurrency limit reached: {} in flight", self.limit)
        }
    }
}

impl std::error::Error for Busy {}

/// The concurrency type of a layer without concurrency limits (the default of
/// [`Backends`](super::super::Backends)' second type parameter): such a layer keeps the
/// inner service's response type. It has no values; the builder's
/// [`concurrency`](super::super::RateLimitLayerBuilder::concurrency) replaces it with a
/// [`ConcurrencyBackend`].
///
/// ```
/// use tollgate::http::{Backends, GlobalKey, NoBody, NoConcurrency, RateLimitLayer};
/// use tollgate::KeyedRateLimiter;
/// let layer: RateLimitLayer<Backends<KeyedRateLimiter<()>, NoConcurrency>, NoBody> =
///     RateLimitLayer::builder(GlobalKey).per_second(5).build().unwrap();
/// # let _ = layer;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoConcurrency {}

/// The in-process [`KeyedConcurrencyLimiter`](crate::KeyedConcurrencyLimiter) behind the
/// layer's concurrency mode: its permits are [`OwnedPermit`](crate::OwnedPermit)s, its keys
/// bounded when it has a key cap (or a key type with one value). Any refusal is [`Busy`]: a
/// full key cap's ([`AcquireError::KeyCapReached`](crate::AcquireError::KeyCapReached)) is
/// [`Busy::key_cap_reached`]; `n` above the limit cannot happen (the layer asks for one).
impl<K, S> ConcurrencyBackend for crate::KeyedConcurrencyLimiter<K, S>
where
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
    S: std::hash::BuildHasher + Clone + Send + Sync + 'static,
{
    type Key = K;
    type Permit = crate::OwnedPermit;

    fn limit(&self) -> u64 {
        crate::KeyedConcurrencyLimiter::limit(self)
    }

    fn keys_bounded(&self) -> bool {
        // A zero-sized key type has one value: one key at most.
        std::mem::size_of::<K>() == 0 || self.max_keys().is_some()
    }

    fn try_acquire_n_owned(self: &Arc<Self>, key: &K, n: u64) -> Result<crate::OwnedPermit, Busy> {
        crate::KeyedConcurrencyLimiter::try_acquire_n_owned(self, key, n).map_err(|e| {
            let limit = crate::KeyedConcurrencyLimiter::limit(self);
            match e {
                crate::AcquireError::KeyCapReached { .. } => Busy::key_cap_reached(limit),
                _ => Busy::new(limit),
            }
        })
    }
}
