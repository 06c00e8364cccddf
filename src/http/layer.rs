//! [`RateLimitLayer`]: the tower layer, which wraps each inner service in a
//! [`RateLimit`] sharing the layer's state (see [`state`](super::state)).

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::backend::Backend;
use super::concurrency_backend::NoConcurrency;
use super::service::RateLimit;
use super::state::Shared;

/// A tower [`Layer`] that rate-limits requests: see the [module docs](super) and
/// [`RateLimitLayer::builder`].
///
/// Cloning is cheap (one `Arc`), and every clone and every service it makes share the same
/// limiters.
///
/// `C` is the type of its concurrency limits ([`NoConcurrency`] without any; see
/// [`concurrency`](super::RateLimitLayerBuilder::concurrency)): with them, the service's
/// response body is the inner one wrapped in a [`PermitBody`](super::PermitBody).
///
/// ```
/// use tollgate::http::{GlobalKey, RateLimitLayer};
/// use tower_layer::Layer;
///
/// let layer = RateLimitLayer::builder(GlobalKey).per_second(100).build().unwrap();
/// let hello: axum::routing::MethodRouter = axum::routing::get(|| async { "hello" });
/// let service = layer.layer(hello);
/// # let _ = service;
/// ```
pub struct RateLimitLayer<E, B: Backend, R, C = NoConcurrency> {
    shared: Arc<Shared<E, B, R, C>>,
}

impl<E, B: Backend, R, C> RateLimitLayer<E, B, R, C> {
    pub(crate) fn from_shared(shared: Shared<E, B, R, C>) -> Self {
        RateLimitLayer {
            shared: Arc::new(shared),
        }
    }

    /// The limiter of the policy named `name` (the first, if several share the name): the
    /// very one the layer decides with, for monitoring ([`len`](crate::KeyedRateLimiter::len),
    /// [`stats`](crate::KeyedRateLimiter::stats)) and upkeep
    /// ([`sweep_now`](crate::KeyedRateLimiter::sweep_now)). The default policy is named
    /// `"default"` unless [`policy_name`](super::RateLimitLayerBuilder::policy_name) renamed
    /// it; a route's is the name given to [`route`](super::RateLimitLayerBuilder::route).
    /// `None` if no policy has that name.
    ///
    /// ```
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    /// use tollgate::Quota;
    ///
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .per_second(10)
    ///     .route("login", "POST /login", Quota::per_minute(5).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let login = layer.limiter("login").unwrap();
    /// assert_eq!(login.len(), 0); // no client seen yet
    /// login.sweep_now();
    /// assert!(layer.limiter("search").is_none());
    /// ```
    #[must_use]
    pub fn limiter(&self, name: &str) -> Option<&Arc<B>> {
        self.policies()
            .find(|&(n, _)| n == name)
            .map(|(_, limiter)| limiter)
    }

    /// Every policy's name and limiter, in the order the layer tries them: the routes in the
    /// order added, then the default. Each route appears once, also where routes share one
    /// limiter (the same `Arc` then appears under each).
    ///
    /// ```
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    /// use tollgate::Quota;
    ///
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .per_second(10)
    ///     .route("login", "POST /login", Quota::per_minute(5).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let names: Vec<&str> = layer.policies().map(|(name, _)| name).collect();
    /// assert_eq!(names, ["login", "default"]);
    /// let tracked: usize = layer.policies().map(|(_, limiter)| limiter.len()).sum();
    /// assert_eq!(tracked, 0);
    /// ```
    pub fn policies(&self) -> impl Iterator<Item = (&str, &Arc<B>)> + '_ {
        let table = &self.shared.table;
        table
            .routes
            .iter()
            .map(|(_, policy)| policy)
            .chain(&table.default)
            .map(|policy| (policy.label.name(), &policy.backend))
    }

    /// The concurrency limiter of the concurrency policy named `name` (the first, if several
    /// share the name), for monitoring: the very one the layer takes permits from. `None` if
    /// no concurrency policy has that name. See
    /// [`concurrency`](super::RateLimitLayerBuilder::concurrency).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tollgate::http::{Busy, ConcurrencyBackend};
    /// # struct Slots;
    /// # impl ConcurrencyBackend for Slots {
    /// #     type Key = ();
    /// #     type Permit = ();
    /// #     fn limit(&self) -> u32 { 2 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &(), _: u32) -> Result<(), Busy> { Ok(()) }
    /// # }
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    ///
    /// let exports = Arc::new(Slots); // any ConcurrencyBackend
    /// let layer = RateLimitLayer::builder(GlobalKey)
    ///     .route_concurrency("exports", "GET /export", exports.clone())
    ///     .build()
    ///     .unwrap();
    /// assert!(Arc::ptr_eq(layer.concurrency_limiter("exports").unwrap(), &exports));
    /// assert!(layer.concurrency_limiter("default").is_none());
    /// ```
    #[must_use]
    pub fn concurrency_limiter(&self, name: &str) -> Option<&Arc<C>> {
        let slots = &self.shared.slots;
        slots
            .routes
            .iter()
            .map(|(_, policy)| policy)
            .chain(&slots.default)
            .find(|policy| policy.name() == name)
            .map(|policy| &policy.backend)
    }
}

impl<E, B: Backend, R, C> Clone for RateLimitLayer<E, B, R, C> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<E, B: Backend, R, C> fmt::Debug for RateLimitLayer<E, B, R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("routes", &self.shared.table.routes.len())
            .field("default", &self.shared.table.default.is_some())
            .field("concurrency_routes", &self.shared.slots.routes.len())
            .field("concurrency_default", &self.shared.slots.default.is_some())
            .field("style", &self.shared.style)
            .finish_non_exhaustive()
    }
}

impl<S, E, B: Backend, R, C> Layer<S> for RateLimitLayer<E, B, R, C> {
    type Service = RateLimit<S, E, B, R, C>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.shared))
    }
}
