//! [`RateLimit`], the service made by [`RateLimitLayer`](super::RateLimitLayer), and its
//! [`ResponseFuture`]: decide in `call`, answer 429 or call the inner service and add the
//! headers to its response.
//!
//! `poll_ready` only forwards to the inner service: capacity is decided per request, in
//! `call`, never reserved by readiness. Shaping and refunds wait, so they run as boxed futures
//! ([`shaping`], [`refunding`]). With a concurrency backend the service is the one of
//! [`concurrent`], whose permit rides in the response body.

pub(super) mod concurrent;
mod refunding;
mod shaping;

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::request::Parts;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::access::Screen;
use super::concurrency::backend::NoConcurrency;
use super::key::KeyError;
use super::policy::stats::Outcome;
use super::policy::SlotPolicy;
use super::rate::backend::{Answer, Backend};
use super::responses::headers::RateHeaders;
use super::responses::rejection::{is_grpc, name_reason, reject, Problem, RejectBody};
use super::state::{proceed, Mode, OnKeyError, Shared, Verdict};
use super::state::{Backends, RateLimitLayer};

/// The rate-limiting service made by [`RateLimitLayer`]: the inner service `S` and a clone
/// of its layer `L` (one `Arc`), so every service the layer makes shares its limiters.
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
/// assert_eq!(status[1], (429, Some(tollgate::http::HeaderValue::from_static("60"))));
/// # }
/// ```
pub struct RateLimit<S, L> {
    inner: S,
    layer: L,
}

impl<S: Clone, L: Clone> Clone for RateLimit<S, L> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, L> fmt::Debug for RateLimit<S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, L> RateLimit<S, L> {
    pub(super) fn new(inner: S, layer: L) -> Self {
        RateLimit { inner, layer }
    }

    /// The inner service (for the concurrency mode's `poll_ready`).
    pub(super) fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

/// Without concurrency limits: the response is the inner service's, with the rate-limit
/// headers added.
impl<S, B, R, ReqBody, ResBody> Service<Request<ReqBody>>
    for RateLimit<S, RateLimitLayer<Backends<B>, R>>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Backend,
    R: RejectBody<ResBody>,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // The table of concurrency policies is empty: `admit` is never called (and could not
        // be: there is no `NoConcurrency` value for a policy to hold).
        let admit = |_: &Shared<B, R>,
                     policy: &SlotPolicy<NoConcurrency>,
                     _: &B::Key,
                     _: bool|
         -> Result<Infallible, Response<ResBody>> { match *policy.backend {} };
        self.start(req, admit).0
    }
}

impl<S, B: Backend, R, C: Send + Sync + 'static> RateLimit<S, RateLimitLayer<Backends<B, C>, R>> {
    /// Decides a request: the concurrency policy first (`admit` takes its permit, or answers
    /// for the request: a request refused for concurrency spends no rate permit), then the
    /// rate policy. Returns the response future and the permit, if one was taken and the
    /// request was not refused at once.
    pub(crate) fn start<ReqBody, ResBody, P>(
        &mut self,
        req: Request<ReqBody>,
        admit: impl FnOnce(
            &Shared<B, R, C>,
            &SlotPolicy<C>,
            &B::Key,
            bool,
        ) -> Result<P, Response<ResBody>>,
    ) -> (ResponseFuture<S::Future>, Option<P>)
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        R: RejectBody<ResBody>,
        ReqBody: Send + 'static,
        ResBody: Send + 'static,
    {
        let (parts, body) = req.into_parts();
        let shared = &**self.layer.shared();
        // Without route rules only the defaults apply: no path to look up.
        let (path, template) = if shared.table.routes.is_empty() && shared.slots.routes.is_empty() {
            ("", None)
        } else {
            request_paths(&parts)
        };
        let index = shared.table.find(&parts.method, path, template);
        let slot = shared.slots.find(&parts.method, path, template);
        let grpc = shared.grpc && is_grpc(&parts);
        // The allow and deny lists, before any limiter; one outcome counted per request.
        let limited = index.is_some() || slot.is_some();
        let key = match shared
            .ops
            .screen(&*shared.extractor, index, limited, &parts)
        {
            Screen::Limit(key) => key,
            screen @ (Screen::Pass | Screen::Bypass) => {
                let outcome = match screen {
                    Screen::Bypass => Outcome::Bypassed,
                    _ => Outcome::Allowed,
                };
                shared.ops.record(index, outcome);
                let req = Request::from_parts(parts, body);
                return (ResponseFuture::inner(self.inner.call(req), None), None);
            }
            Screen::Deny => {
                shared.ops.record(index, Outcome::Denied);
                let p = Problem::new(
                    StatusCode::FORBIDDEN,
                    "the request is refused by the rate limiter's deny list",
                );
                let res = reject(&shared.body, &p, grpc, None);
                return (ResponseFuture::ready(res), None);
            }
            Screen::KeyError(e) => match key_error(shared, index, &e, grpc) {
                Some(res) => return (ResponseFuture::ready(res), None),
                None => {
                    let req = Request::from_parts(parts, body);
                    return (ResponseFuture::inner(self.inner.call(req), None), None);
                }
            },
        };
        let permit = match slot {
            Some(i) => match admit(shared, shared.slots.get(i), &key, grpc) {
                Ok(permit) => Some(permit),
                Err(res) => return (ResponseFuture::ready(res), None),
            },
            None => None,
        };
        let Some(index) = index else {
            // A concurrency limit only: no rate policy counts the request.
            shared.ops.record(None, Outcome::Allowed);
            let req = Request::from_parts(parts, body);
            return (ResponseFuture::inner(self.inner.call(req), None), permit);
        };
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(&parts));
        let req = Request::from_parts(parts, body);
        let policy = shared.table.get(index);
        let shadow = shared.is_shadow(index);
        let fut = match (&shared.mode, shadow) {
            (Mode::Shape(max_delay), false) => {
                let (shared, inner) =
                    (Arc::clone(self.layer.shared()), take_ready(&mut self.inner));
                ResponseFuture::boxed(Box::pin(shaping::shaped(
                    shared, index, key, cost, *max_delay, grpc, inner, req,
                )))
            }
            (Mode::Refund(refunds), _) => {
                let refunds = refunds.clone();
                let (shared, inner) =
                    (Arc::clone(self.layer.shared()), take_ready(&mut self.inner));
                ResponseFuture::boxed(Box::pin(refunding::refunding(
                    shared, refunds, index, key, cost, grpc, shadow, inner, req,
                )))
            }
            // Refusing, or shaping in shadow (nothing waits in shadow): decide now.
            (Mode::Reject | Mode::Shape(_), _) => match policy.backend.check_n(&key, cost) {
                Answer::Now(decided) => {
                    match shared.verdict(index, &key, decided, cost, grpc, shadow) {
                        Verdict::Proceed(headers) => {
                            ResponseFuture::inner(self.inner.call(req), headers)
                        }
                        // Refused at once: the concurrency permit goes back now, not after the
                        // 429 is sent.
                        Verdict::Reject(res) => return (ResponseFuture::ready(res), None),
                    }
                }
                Answer::Later(decision) => {
                    let (shared, inner) =
                        (Arc::clone(self.layer.shared()), take_ready(&mut self.inner));
                    ResponseFuture::boxed(Box::pin(async move {
                        let decided = decision.await;
                        let verdict = shared.verdict(index, &key, decided, cost, grpc, shadow);
                        proceed(verdict, inner, req).await
                    }))
                }
            },
        };
        (fut, permit)
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

/// The response for a key error of a request to the policy at `index`, or `None` to let the
/// request through; counted and logged either way. The response names the error's reason.
#[cold]
fn key_error<B: Backend, R, C, ResBody>(
    shared: &Shared<B, R, C>,
    index: Option<usize>,
    e: &KeyError,
    grpc: bool,
) -> Option<Response<ResBody>>
where
    R: RejectBody<ResBody>,
{
    let status = match shared.on_key_error {
        OnKeyError::Allow => None,
        OnKeyError::Reject => Some(e.status()),
        OnKeyError::Status(s) => Some(s),
    };
    shared.ops.key_error(index, e, status);
    let mut res = reject(&shared.body, &Problem::new(status?, e.reason()), grpc, None);
    name_reason(&mut res, e.reason(), grpc);
    Some(res)
}

/// The inner service that `poll_ready` readied, leaving a clone in its place: a future that
/// calls it later must own the very instance that was readied (tower's usual pattern).
pub(crate) fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}
/// A boxed future with `F`'s output, for the paths that wait (shaping, remote backends,
/// refunds).
type BoxOutput<F> = Pin<Box<dyn Future<Output = <F as Future>::Output> + Send + 'static>>;

pin_project! {
    /// The response future of [`RateLimit`]: the inner service's future `F`, with the
    /// rate-limit headers added to its response; a ready rejection; or (shaping, refunds,
    /// remote backends) a boxed future. Its output is `F`'s.
    pub struct ResponseFuture<F: Future> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F: Future> {
        Inner { #[pin] fut: F, headers: Option<RateHeaders> },
        Ready { output: Option<F::Output> },
        Boxed { fut: BoxOutput<F> },
    }
}

impl<F: Future> ResponseFuture<F> {
    fn inner(fut: F, headers: Option<RateHeaders>) -> Self {
        ResponseFuture {
            state: State::Inner { fut, headers },
        }
    }

    fn boxed(fut: BoxOutput<F>) -> Self {
        ResponseFuture {
            state: State::Boxed { fut },
        }
    }
}

impl<F, B, Err> ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, Err>>,
{
    fn ready(response: Response<B>) -> Self {
        ResponseFuture {
            state: State::Ready {
                output: Some(Ok(response)),
            },
        }
    }
}

impl<F, B, Err> Future for ResponseFuture<F>
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
            StateProj::Ready { output } => match output.take() {
                Some(output) => Poll::Ready(output),
                None => panic!("ResponseFuture polled after completion"),
            },
            StateProj::Boxed { fut } => fut.as_mut().poll(cx),
        }
    }
}

impl<F: Future> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}
