//! [`RateLimitLayer`] and its service [`RateLimit`]: decide in `call`, answer 429 or call the
//! inner service and add the headers to its response.
//!
//! All state lives in one `Arc` made by [`build`](super::RateLimitLayerBuilder::build); the
//! layer and every service it makes (axum makes one per route, and clones it per request)
//! share it, so every request meets the same limiters. `poll_ready` only forwards to the inner
//! service: capacity is decided per request, in `call`, never reserved by readiness.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::request::Parts;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::backend::{Answer, Backend};
use super::headers::{HeaderStyle, RateHeaders};
use super::key::{KeyError, KeyExtractor};
use super::policy::{Policy, PolicyTable};
use super::refund::Refunds;
use super::response::{is_grpc, reject, Problem, RejectBody};
use crate::Decision;

/// What the layer does when the key extractor fails (see [`KeyError`]).
///
/// The default, [`Reject`](OnKeyError::Reject), fails closed: a request without a usable key
/// never reaches the handler. [`Allow`](OnKeyError::Allow) fails open: every key error becomes
/// a request with no limit at all.
///
/// ```
/// use tollgate::http::OnKeyError;
/// assert_eq!(OnKeyError::default(), OnKeyError::Reject);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnKeyError {
    /// Answer with the extractor's status: `500` for a server set up wrongly (no peer
    /// address), `400` for a request without what the extractor needs. The default.
    #[default]
    Reject,
    /// Answer with this status instead (say `401` for a missing API key).
    Status(StatusCode),
    /// Let the request through unlimited. Only for keys a client cannot simply leave out:
    /// with a header key, omitting the header would bypass the limit.
    Allow,
}

/// A closure deciding a request's cost in permits.
pub(crate) type CostFn = Box<dyn Fn(&Parts) -> u64 + Send + Sync>;

/// What happens to a request over its limit.
pub(crate) enum Mode<B: Backend> {
    /// Answer 429 at once.
    Reject,
    /// Wait up to this long for the permits, then answer 429.
    Shape(Duration),
    /// Take the permits before the handler; give them back if the response says so.
    Refund(Refunds<B>),
}

/// Everything the layer and its services share.
pub(crate) struct Shared<E, B: Backend, R> {
    pub(crate) extractor: E,
    pub(crate) table: PolicyTable<B>,
    pub(crate) cost: Option<CostFn>,
    pub(crate) mode: Mode<B>,
    pub(crate) style: HeaderStyle,
    pub(crate) body: R,
    pub(crate) on_key_error: OnKeyError,
    pub(crate) never_status: StatusCode,
    pub(crate) grpc: bool,
}

/// What to do with a request once its decision is known.
pub(crate) enum Verdict<ResBody> {
    /// Call the inner service, and add these headers to its response.
    Proceed(Option<RateHeaders>),
    /// Answer with this response instead.
    Reject(Response<ResBody>),
}

impl<E, B: Backend, R> Shared<E, B, R> {
    /// The verdict for `policy`'s decision on a request of `cost`.
    pub(crate) fn verdict<ResBody>(
        &self,
        policy: &Policy<B>,
        decided: Result<Decision, B::Error>,
        cost: u64,
        grpc: bool,
    ) -> Verdict<ResBody>
    where
        R: RejectBody<ResBody>,
    {
        let d = match decided {
            Ok(d) => d,
            Err(_) => {
                let p = Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("rate limit {} could not be checked", policy.label.sf_name()),
                );
                return Verdict::Reject(reject(&self.body, &p, grpc, None));
            }
        };
        let headers = (self.style != HeaderStyle::None || !d.allowed)
            .then(|| RateHeaders::new(self.style, &policy.label, policy.rate(), &d));
        if d.allowed {
            return Verdict::Proceed(headers);
        }
        let p = match d.retry_after {
            Some(_) => Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "rate limit {} exceeded; retry after {} s",
                    policy.label.sf_name(),
                    headers
                        .as_ref()
                        .and_then(RateHeaders::retry_after)
                        .unwrap_or(1)
                ),
            ),
            None => Problem::new(
                self.never_status,
                format!(
                    "a request costing {cost} can never be served under rate limit {} (burst {})",
                    policy.label.sf_name(),
                    d.limit
                ),
            ),
        };
        Verdict::Reject(reject(&self.body, &p, grpc, headers.as_ref()))
    }
}

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
        RateLimit {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The rate-limiting service made by [`RateLimitLayer`].
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
/// let mut service = layer.layer(hello);
/// let mut status = Vec::new();
/// for _ in 0..2 {
///     poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
///     let res = service.call(http::Request::new(Body::empty())).await.unwrap();
///     status.push((res.status().as_u16(), res.headers().get("retry-after").cloned()));
/// }
/// assert_eq!(status[0], (200, None));
/// assert_eq!(status[1], (429, Some(http::HeaderValue::from_static("60"))));
/// # }
/// ```
pub struct RateLimit<S, E, B: Backend, R> {
    inner: S,
    shared: Arc<Shared<E, B, R>>,
}

impl<S: Clone, E, B: Backend, R> Clone for RateLimit<S, E, B, R> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, E, B: Backend, R> fmt::Debug for RateLimit<S, E, B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// A boxed response future, for the paths that wait (shaping, remote backends, refunds).
pub(crate) type BoxResponse<B, Err> =
    Pin<Box<dyn Future<Output = Result<Response<B>, Err>> + Send + 'static>>;

impl<S, E, B, R, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, E, B, R>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    E: KeyExtractor<Key = B::Key>,
    B: Backend,
    R: RejectBody<ResBody>,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let (parts, body) = req.into_parts();
        let shared = &*self.shared;
        // Without route rules only the default applies: no path to look up.
        let (path, template) = if shared.table.routes.is_empty() {
            ("", None)
        } else {
            request_paths(&parts)
        };
        let Some(index) = shared.table.find(&parts.method, path, template) else {
            return ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), None);
        };
        let grpc = shared.grpc && is_grpc(&parts);
        let key = match shared.extractor.extract(&parts) {
            Ok(key) => key,
            Err(e) => match key_error(shared, &e, grpc) {
                Some(res) => return ResponseFuture::ready(res),
                None => {
                    let req = Request::from_parts(parts, body);
                    return ResponseFuture::inner(self.inner.call(req), None);
                }
            },
        };
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(&parts));
        let req = Request::from_parts(parts, body);
        let policy = shared.table.get(index);
        match &shared.mode {
            Mode::Reject => match policy.backend.check(&key, cost) {
                Answer::Now(decided) => match shared.verdict(policy, decided, cost, grpc) {
                    Verdict::Proceed(headers) => {
                        ResponseFuture::inner(self.inner.call(req), headers)
                    }
                    Verdict::Reject(res) => ResponseFuture::ready(res),
                },
                Answer::Later(decision) => {
                    let (shared, inner) = (Arc::clone(&self.shared), take_ready(&mut self.inner));
                    ResponseFuture::boxed(Box::pin(async move {
                        let decided = decision.await;
                        let policy = shared.table.get(index);
                        proceed(shared.verdict(policy, decided, cost, grpc), inner, req).await
                    }))
                }
            },
            Mode::Shape(max_delay) => {
                let (shared, inner) = (Arc::clone(&self.shared), take_ready(&mut self.inner));
                ResponseFuture::boxed(Box::pin(super::shaping::shaped(
                    shared, index, key, cost, *max_delay, grpc, inner, req,
                )))
            }
            Mode::Refund(refunds) => {
                let refunds = refunds.clone();
                let (shared, inner) = (Arc::clone(&self.shared), take_ready(&mut self.inner));
                ResponseFuture::boxed(Box::pin(super::refund::refunding(
                    shared, refunds, index, key, cost, grpc, inner, req,
                )))
            }
        }
    }
}

/// The path the route rules match, and the route template the router matched, if known.
///
/// With the `axum` feature: the path of axum's `OriginalUri` (the request's path before any
/// `nest` stripped a prefix; the outermost `Router` inserts it), else the request's own; and
/// the template of axum's `MatchedPath` (the full template, nest prefix included), present
/// when the layer runs after routing (`Router::layer`, `route_layer`, `MethodRouter::layer`).
/// Without it: the request's path, no template.
#[inline]
fn request_paths(parts: &Parts) -> (&str, Option<&str>) {
    #[cfg(feature = "axum")]
    {
        let path = parts
            .extensions
            .get::<axum::extract::OriginalUri>()
            .map_or(parts.uri.path(), |original| original.0.path());
        let template = parts
            .extensions
            .get::<axum::extract::MatchedPath>()
            .map(axum::extract::MatchedPath::as_str);
        (path, template)
    }
    #[cfg(not(feature = "axum"))]
    (parts.uri.path(), None)
}

/// The response for a key error, or `None` to let the request through.
fn key_error<E, B: Backend, R, ResBody>(
    shared: &Shared<E, B, R>,
    e: &KeyError,
    grpc: bool,
) -> Option<Response<ResBody>>
where
    R: RejectBody<ResBody>,
{
    let status = match shared.on_key_error {
        OnKeyError::Allow => return None,
        OnKeyError::Reject => e.status(),
        OnKeyError::Status(s) => s,
    };
    Some(reject(
        &shared.body,
        &Problem::new(status, e.reason()),
        grpc,
        None,
    ))
}

/// The inner service that `poll_ready` readied, leaving a clone in its place: a future that
/// calls it later must own the very instance that was readied (tower's usual pattern).
pub(crate) fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// Carries out a verdict on the async paths.
pub(crate) async fn proceed<S, ReqBody, ResBody>(
    verdict: Verdict<ResBody>,
    mut inner: S,
    req: Request<ReqBody>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    match verdict {
        Verdict::Proceed(headers) => {
            let mut res = inner.call(req).await?;
            if let Some(h) = headers {
                h.write(res.headers_mut());
            }
            Ok(res)
        }
        Verdict::Reject(res) => Ok(res),
    }
}

pin_project! {
    /// The response future of [`RateLimit`]: the inner service's, with the rate-limit headers
    /// added; a ready rejection; or (shaping, refunds, remote backends) a boxed future.
    pub struct ResponseFuture<F, B, Err> {
        #[pin]
        state: State<F, B, Err>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, Err> {
        Inner { #[pin] fut: F, headers: Option<RateHeaders> },
        Ready { response: Option<Response<B>> },
        Boxed { fut: BoxResponse<B, Err> },
    }
}

impl<F, B, Err> ResponseFuture<F, B, Err> {
    fn inner(fut: F, headers: Option<RateHeaders>) -> Self {
        ResponseFuture {
            state: State::Inner { fut, headers },
        }
    }

    fn ready(response: Response<B>) -> Self {
        ResponseFuture {
            state: State::Ready {
                response: Some(response),
            },
        }
    }

    fn boxed(fut: BoxResponse<B, Err>) -> Self {
        ResponseFuture {
            state: State::Boxed { fut },
        }
    }
}

impl<F, B, Err> Future for ResponseFuture<F, B, Err>
where
    F: Future<Output = Result<Response<B>, Err>>,
{
    type Output = Result<Response<B>, Err>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Inner { fut, headers } => {
                let mut res = ready!(fut.poll(cx))?;
                if let Some(h) = headers.take() {
                    h.write(res.headers_mut());
                }
                Poll::Ready(Ok(res))
            }
            StateProj::Ready { response } => match response.take() {
                Some(res) => Poll::Ready(Ok(res)),
                None => panic!("ResponseFuture polled after completion"),
            },
            StateProj::Boxed { fut } => fut.as_mut().poll(cx),
        }
    }
}

impl<F, B, Err> fmt::Debug for ResponseFuture<F, B, Err> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}
