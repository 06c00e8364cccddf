//! [`RateLimitLayer`]'s methods (monitoring, shadow mode) and its tower [`Layer`] impl, which
//! wraps each inner service in a [`RateLimit`] holding a clone of the layer, and so sharing its
//! state. The type itself, and [`Backends`], are defined in [`state`](super::state), below the
//! service that names them.

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::concurrency::backend::ConcurrencyBackend;
use super::policy::ops::PolicyOps;
use super::policy::shadow::Enforcement;
use super::policy::stats::PolicyStats;
use super::rate::backend::Backend;
use super::service::RateLimit;
use super::state::{
    AccessLayer, Backends, ConcurrencyLimitLayer, LayerBackends, RateLayer, RateLimitLayer,
};

impl<B: Backend, R, C: Send + Sync + 'static> RateLimitLayer<Backends<B, C>, R> {
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
        self.shared()
            .table
            .policies()
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
    /// #     fn limit(&self) -> u64 { 2 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &(), _: u64) -> Result<(), Busy> { Ok(()) }
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
        self.shared()
            .slots
            .policies()
            .find(|policy| policy.name() == name)
            .map(|policy| &policy.backend)
    }
}

/// Shadow mode and counters, per policy name (every policy of that name: routes sharing a
/// limiter share a name). Every clone of the layer, and every service it made, sees the same
/// switches and counters, so an admin endpoint holding a clone can switch them.
impl<B: Backend, R, C: Send + Sync + 'static> RateLimitLayer<Backends<B, C>, R> {
    /// The running state of every policy named `name`, in table order.
    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a PolicyOps<B::Key>> + 'a {
        self.shared()
            .ops
            .policies
            .iter()
            .filter(move |ops| *ops.name == *name)
    }

    /// What happened to the requests of the policies named `name` so far (see
    /// [`PolicyStats`]), or `None` if no policy has that name. In shadow mode,
    /// `would_refuse` is what enforcing would have refused.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use axum::body::Body;
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = RateLimitLayer::builder(GlobalKey).per_minute(2).shadow().build().unwrap();
    /// let hello: axum::routing::MethodRouter = axum::routing::get(|| async { "hello" });
    /// let mut service = layer.layer(hello);
    /// for _ in 0..5 {
    ///     poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
    ///     let res = service.call(http::Request::new(Body::empty())).await.unwrap();
    ///     assert_eq!(res.status(), 200); // shadow: never refused
    /// }
    /// let stats = layer.stats("default").unwrap();
    /// assert_eq!((stats.allowed, stats.would_refuse, stats.refused), (2, 3, 0));
    /// # }
    /// ```
    #[must_use]
    pub fn stats(&self, name: &str) -> Option<PolicyStats> {
        self.named(name)
            .map(|ops| ops.counters.snapshot())
            .reduce(PolicyStats::add)
    }

    /// What happened to requests no policy applies to (no route matched and no default):
    /// `allowed` counts those that went through, `denied` and `bypassed` those the layer's
    /// [lists](super::RateLimitLayerBuilder::access) refused or allowed.
    ///
    /// ```
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    /// use tollgate::Quota;
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .route("login", "POST /login", Quota::per_minute(5).unwrap())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(layer.unmatched_stats().total(), 0);
    /// ```
    #[must_use]
    pub fn unmatched_stats(&self) -> PolicyStats {
        self.shared().ops.unmatched.snapshot()
    }

    /// Whether the policies named `name` enforce or run in shadow, or `None` if no policy
    /// has that name (of several with the name, the first's).
    ///
    /// ```
    /// use tollgate::http::{Enforcement, GlobalKey, RateLimitLayer};
    /// let layer = RateLimitLayer::builder(GlobalKey).per_second(5).build().unwrap();
    /// assert_eq!(layer.enforcement("default"), Some(Enforcement::Enforce));
    /// assert_eq!(layer.enforcement("other"), None);
    /// ```
    #[must_use]
    pub fn enforcement(&self, name: &str) -> Option<Enforcement> {
        self.named(name).next().map(|ops| ops.enforcement.get())
    }

    /// Switches the policies named `name` to `enforcement`, for the requests decided from
    /// now on (a request already deciding finishes under the mode it started with). Returns
    /// `false` if no policy has that name. The shadow rollout: build with
    /// [`shadow`](super::RateLimitLayerBuilder::shadow), watch
    /// [`stats`](Self::stats)`.would_refuse`, then switch to
    /// [`Enforce`](Enforcement::Enforce); the limiter kept counting all along, so the next
    /// request over the limit is refused.
    ///
    /// ```
    /// use tollgate::http::{Enforcement, GlobalKey, RateLimitLayer};
    /// let layer = RateLimitLayer::builder(GlobalKey).per_second(5).shadow().build().unwrap();
    /// let admin = layer.clone(); // say, in an admin endpoint
    /// assert!(admin.set_enforcement("default", Enforcement::Enforce));
    /// assert_eq!(layer.enforcement("default"), Some(Enforcement::Enforce));
    /// assert!(!admin.set_enforcement("nope", Enforcement::Shadow));
    /// ```
    #[must_use = "false means no policy has that name"]
    pub fn set_enforcement(&self, name: &str, enforcement: Enforcement) -> bool {
        let mut found = false;
        for ops in self.named(name) {
            ops.enforcement.set(enforcement);
            found = true;
        }
        found
    }
}

/// The layer as one tower layer per concern, for a stack of your own with `ServiceBuilder`:
/// [`access_layer`](Self::access_layer) outermost, then
/// [`concurrency_layer`](Self::concurrency_layer), then [`rate_layer`](Self::rate_layer)
/// (the combined layer's order), any of them left out, other layers between them as you
/// like. They share this layer's state (policies, lists, switches, counters: [`stats`](Self::stats)
/// and [`set_enforcement`](Self::set_enforcement) on this layer see and switch them); the key
/// is extracted once, by the outermost, and each request's outcome is counted once, by the
/// layer that decides it. The stack answers as the combined layer does; the combined layer
/// costs less (one service, no hand-off between layers).
///
/// ```
/// use std::net::IpAddr;
/// use std::num::NonZeroUsize;
/// use std::sync::Arc;
/// use tollgate::http::{AccessList, PeerIp, RateLimitLayer};
/// use tollgate::KeyedConcurrencyLimiter;
/// use tower::ServiceBuilder;
///
/// let in_flight = KeyedConcurrencyLimiter::<IpAddr>::builder(4)
///     .unwrap()
///     .max_keys(NonZeroUsize::new(100_000).unwrap())
///     .build();
/// let layer = RateLimitLayer::builder(PeerIp::new())
///     .per_second(10)
///     .concurrency("in-flight", Arc::new(in_flight))
///     .access(AccessList::new().deny_networks(["192.0.2.0/24".parse().unwrap()]))
///     .build()
///     .unwrap();
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .layer(
///         ServiceBuilder::new()
///             .layer(layer.access_layer())
///             .layer(layer.concurrency_layer())
///             .layer(layer.rate_layer()),
///     );
/// # let _ = app;
/// ```
impl<B: Backend, R, C: Send + Sync + 'static> RateLimitLayer<Backends<B, C>, R> {
    /// The allow and deny lists as a layer of their own (see [`AccessLayer`]).
    ///
    /// It shares the layer's state: the requests it answers are counted where the layer's
    /// are.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::net::SocketAddr;
    /// use axum::body::Body;
    /// use tollgate::http::{AccessList, PeerIp, RateLimitLayer};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .per_second(10)
    ///     .access(AccessList::new().deny_networks(["192.0.2.0/24".parse().unwrap()]))
    ///     .build()
    ///     .unwrap();
    /// let hello: axum::routing::MethodRouter = axum::routing::get(|| async { "hello" });
    /// let mut service = layer.access_layer().layer(hello);
    /// let mut req = http::Request::new(Body::empty());
    /// req.extensions_mut().insert("192.0.2.1:4000".parse::<SocketAddr>().unwrap());
    /// poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
    /// assert_eq!(service.call(req).await.unwrap().status(), 403);
    /// assert_eq!(layer.stats("default").unwrap().denied, 1);
    /// # }
    /// ```
    #[must_use]
    pub fn access_layer(&self) -> AccessLayer<Backends<B, C>, R> {
        AccessLayer::from_layer(self)
    }

    /// The rate limits as a layer of their own (see [`RateLayer`]).
    ///
    /// It decides with the layer's limiters: what it takes, the layer sees.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use axum::body::Body;
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = RateLimitLayer::builder(GlobalKey).per_minute(1).build().unwrap();
    /// let hello: axum::routing::MethodRouter = axum::routing::get(|| async { "hello" });
    /// let mut service = layer.rate_layer().layer(hello);
    /// let mut statuses = Vec::new();
    /// for _ in 0..2 {
    ///     poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
    ///     statuses.push(service.call(http::Request::new(Body::empty())).await.unwrap().status());
    /// }
    /// assert_eq!(statuses, [200, 429]);
    /// assert_eq!(layer.limiter("default").unwrap().peek(&()).remaining, 0);
    /// # }
    /// ```
    #[must_use]
    pub fn rate_layer(&self) -> RateLayer<Backends<B, C>, R> {
        RateLayer::from_layer(self)
    }
}

impl<B: Backend, R, C: ConcurrencyBackend<Key = B::Key>> RateLimitLayer<Backends<B, C>, R> {
    /// The concurrency limits as a layer of their own (see [`ConcurrencyLimitLayer`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// use tollgate::KeyedConcurrencyLimiter;
    /// use tower::ServiceBuilder;
    ///
    /// let in_flight = Arc::new(KeyedConcurrencyLimiter::<()>::new(8).unwrap());
    /// let layer = RateLimitLayer::builder(GlobalKey)
    ///     .per_second(100)
    ///     .concurrency("in-flight", Arc::clone(&in_flight))
    ///     .build()
    ///     .unwrap();
    /// // Rate first, then the slots: a request refused by rate never holds a slot.
    /// let app: axum::Router = axum::Router::new()
    ///     .route("/", axum::routing::get(|| async { "hello" }))
    ///     .layer(ServiceBuilder::new().layer(layer.rate_layer()).layer(layer.concurrency_layer()));
    /// assert!(Arc::ptr_eq(layer.concurrency_limiter("in-flight").unwrap(), &in_flight));
    /// # let _ = app;
    /// ```
    #[must_use]
    pub fn concurrency_layer(&self) -> ConcurrencyLimitLayer<Backends<B, C>, R> {
        ConcurrencyLimitLayer::from_layer(self)
    }
}

impl<L: LayerBackends, R> fmt::Debug for RateLimitLayer<L, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("routes", &self.shared().table.routes.len())
            .field("default", &self.shared().table.default.is_some())
            .field("concurrency_routes", &self.shared().slots.routes.len())
            .field(
                "concurrency_default",
                &self.shared().slots.default.is_some(),
            )
            .field("style", &self.shared().style)
            .finish_non_exhaustive()
    }
}

/// The combined layer and the layers of one concern: each wraps the inner service in a
/// [`RateLimit`] holding a clone of itself, whose `Service` impl is the layer's.
macro_rules! concern_layer_impl {
    ($($name:ident),*) => {$(
        impl<S, L: LayerBackends, R> Layer<S> for $name<L, R> {
            type Service = RateLimit<S, Self>;

            fn layer(&self, inner: S) -> Self::Service {
                RateLimit::new(inner, self.clone())
            }
        }
    )*};
}

concern_layer_impl!(
    RateLimitLayer,
    AccessLayer,
    ConcurrencyLimitLayer,
    RateLayer
);
