//! [`RateLimitLayer`]: the tower layer, which wraps each inner service in a
//! [`RateLimit`] sharing the layer's state (see [`state`](super::state)).

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::backend::Backend;
use super::service::RateLimit;
use super::state::Shared;

/// A tower [`Layer`] that rate-limits requests: see the [module docs](super) and
/// [`RateLimitLayer::builder`].
///
/// Cloning is cheap (one `Arc`), and every clone and every service it makes share the same
/// limiters.
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
pub struct RateLimitLayer<E, B: Backend, R> {
    shared: Arc<Shared<E, B, R>>,
}

impl<E, B: Backend, R> RateLimitLayer<E, B, R> {
    pub(crate) fn from_shared(shared: Shared<E, B, R>) -> Self {
        RateLimitLayer {
            shared: Arc::new(shared),
        }
    }
}

impl<E, B: Backend, R> Clone for RateLimitLayer<E, B, R> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<E, B: Backend, R> fmt::Debug for RateLimitLayer<E, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("routes", &self.shared.table.routes.len())
            .field("default", &self.shared.table.default.is_some())
            .field("style", &self.shared.style)
            .finish_non_exhaustive()
    }
}

impl<S, E, B: Backend, R> Layer<S> for RateLimitLayer<E, B, R> {
    type Service = RateLimit<S, E, B, R>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.shared))
    }
}
