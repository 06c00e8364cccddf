//! [`RateLimit`], the service made by [`RateLimitLayer`](super::RateLimitLayer) and by the
//! layers of one concern, and its [`ResponseFuture`]: decide in `call`, answer 429 or call the
//! inner service and add the headers to its response.
//!
//! A request's steps are written here once: the screening ([`Shared::screen_request`]), the
//! concurrency step ([`concurrent`]) and the rate step ([`decide_rate`]). The combined layer's
//! service runs them in turn; the layers of one concern ([`access`], [`concurrent`], [`rate`])
//! run one each, passing what they found on in a request extension ([`handoff`]).
//!
//! `poll_ready` only forwards to the inner service: capacity is decided per request, in
//! `call`, never reserved by readiness. Shaping and refunds wait, so they run as boxed futures
//! ([`shaping`], [`refunding`]). With a concurrency backend the service is the one of
//! [`concurrent`], whose permit rides in the response body.

/// A `Service` impl of [`RateLimit`] over the layer type given (`B` its rate backend, `R` its
/// reject body): every service here takes the same inner services, forwards readiness to
/// them and fails with their errors; what differs is the response, the future and `call`.
/// Two short forms for a layer `L<Backends<B, C>, R>`: `inner L;`, whose response is the
/// inner one's; `permits L;`, whose response body holds a permit of `C`.
macro_rules! service {
    ($(#[$doc:meta])* inner $layer:ident; fn call(&mut $this:ident, $req:ident) $call:block) => {
        service! {
            $(#[$doc])*
            impl<B, R, C> for $layer<Backends<B, C>, R>
            where { C: Send + Sync + 'static, }
            type Response = Response<ResBody>;
            type Future = ResponseFuture<S::Future>;
            fn call(&mut $this, $req) $call
        }
    };
    ($(#[$doc:meta])* permits $layer:ident; fn call(&mut $this:ident, $req:ident) $call:block) => {
        service! {
            $(#[$doc])*
            impl<B, R, C> for $layer<Backends<B, C>, R>
            where { C: ConcurrencyBackend<Key = B::Key>, }
            type Response = Response<PermitBody<ResBody, C::Permit>>;
            type Future = PermitFuture<ResponseFuture<S::Future>, C::Permit>;
            fn call(&mut $this, $req) $call
        }
    };
    (
        $(#[$doc:meta])*
        impl<$($param:ident),*> for $layer:ty
        where { $($bounds:tt)* }
        type Response = $response:ty;
        type Future = $future:ty;
        fn call(&mut $this:ident, $req:ident) $call:block
    ) => {
        $(#[$doc])*
        impl<S, $($param,)* ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, $layer>
        where
            S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
            S::Future: Send + 'static,
            B: Backend,
            R: RejectBody<ResBody>,
            ReqBody: Send + 'static,
            ResBody: Send + 'static,
            $($bounds)*
        {
            type Response = $response;
            type Error = S::Error;
            type Future = $future;

            #[inline]
            fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
                self.inner.poll_ready(cx)
            }

            fn call(&mut $this, $req: Request<ReqBody>) -> Self::Future $call
        }
    };
}

mod access;
pub(super) mod concurrent;
mod handoff;
mod rate;
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

/// The rate-limiting service made by [`RateLimitLayer`], and by its layers of one concern
/// ([`AccessLayer`](super::AccessLayer), [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer),
/// [`RateLayer`](super::RateLayer)): the inner service `S` and a clone of its layer `L` (one
/// `Arc`), so every service the layer makes shares its limiters. What it does is the layer's:
/// its `Service` impl is chosen by `L`.
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
}

service! {
    /// Without concurrency limits: the response is the inner service's, with the rate-limit
    /// headers added.
    impl<B, R> for RateLimitLayer<Backends<B>, R>
    where {}
    type Response = Response<ResBody>;
    type Future = ResponseFuture<S::Future>;
    fn call(&mut self, req) {
        // The table of concurrency policies is empty: `admit` is never called (and could not
        // be: there is no `NoConcurrency` value for a policy to hold).
        let admit = |_: &Shared<B, R>,
                     policy: &SlotPolicy<NoConcurrency>,
                     _: &B::Key,
                     _: bool|
         -> Result<Infallible, Response<ResBody>> { match *policy.backend {} };
        match self.start(req, admit) {
            Started::Call(req, headers, _) => ResponseFuture::inner(self.inner.call(req), headers),
            Started::Future(fut, _) => fut,
        }
    }
}

impl<S, B: Backend, R, C: Send + Sync + 'static> RateLimit<S, RateLimitLayer<Backends<B, C>, R>> {
    /// Decides a request with every concern in turn, with no hand-off between them: the
    /// screening ([`Shared::screen_request`]: routes, lists, key), then the concurrency policy
    /// (`admit` takes its permit, or answers for the request: a request refused for
    /// concurrency spends no rate permit), then the rate policy ([`decide_rate`]). Returns
    /// what to do ([`Started`]) and the permit, if one was taken and the request was not
    /// refused at once.
    pub(crate) fn start<ReqBody, ResBody, P>(
        &mut self,
        req: Request<ReqBody>,
        admit: impl FnOnce(
            &Shared<B, R, C>,
            &SlotPolicy<C>,
            &B::Key,
            bool,
        ) -> Result<P, Response<ResBody>>,
    ) -> Started<S::Future, ReqBody, P>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        R: RejectBody<ResBody>,
        ReqBody: Send + 'static,
        ResBody: Send + 'static,
    {
        let (parts, body) = req.into_parts();
        let shared = self.layer.shared();
        let found = match shared.screen_request(&parts) {
            Screening::Limit(found) => found,
            Screening::Through => {
                return Started::Call(Request::from_parts(parts, body), None, None);
            }
            Screening::Answer(res) => return Started::Future(ResponseFuture::ready(res), None),
        };
        let permit = match found.slot {
            Some(i) => match admit(shared, shared.slots.get(i), &found.key, found.grpc) {
                Ok(permit) => Some(permit),
                Err(res) => return Started::Future(ResponseFuture::ready(res), None),
            },
            None => None,
        };
        match decide_rate(shared, &mut self.inner, parts, body, found) {
            // Refused at once: the concurrency permit goes back now, not after the 429 is sent.
            Decided::Refused(res) => Started::Future(ResponseFuture::ready(res), None),
            Decided::Call(req, headers) => Started::Call(req, headers, permit),
            Decided::Pending(fut) => Started::Future(fut, permit),
        }
    }
}

/// What [`RateLimit::start`] made of a request, with the concurrency permit `P` it took, if
/// any.
#[allow(clippy::large_enum_variant)] // moved once, in `call`; boxing the request would allocate
pub(crate) enum Started<F: Future, ReqBody, P> {
    /// Call the inner service with the request and add these headers to its response (see
    /// [`Decided::Call`]).
    Call(Request<ReqBody>, Option<RateHeaders>, Option<P>),
    /// Answered, or waiting: this future.
    Future(ResponseFuture<F>, Option<P>),
}

/// What the screening found for a request a limiter is to decide: its key, and the rate and
/// concurrency policies that apply (at least one of them).
pub(crate) struct Found<K> {
    pub(crate) key: K,
    /// The rate policy's index in the policy table.
    pub(crate) index: Option<usize>,
    /// The concurrency policy's index in its table.
    pub(crate) slot: Option<usize>,
    /// Whether the request is a gRPC call (answered in gRPC's terms).
    pub(crate) grpc: bool,
}

/// What the screening makes of a request.
pub(crate) enum Screening<K, ResBody> {
    /// A limiter decides it, with what was found.
    Limit(Found<K>),
    /// Through to the inner service unlimited, its outcome counted (no policy, an allow
    /// list, or a key error let through).
    Through,
    /// Answered here (a deny list, a key error), its outcome counted.
    Answer(Response<ResBody>),
}

impl<K, ResBody> Screening<K, ResBody> {
    /// What a layer handing on or deciding needs: what was found (`None`: settled, through),
    /// or the answer.
    #[inline]
    pub(crate) fn found(self) -> Result<Option<Found<K>>, Response<ResBody>> {
        match self {
            Screening::Limit(found) => Ok(Some(found)),
            Screening::Through => Ok(None),
            Screening::Answer(res) => Err(res),
        }
    }
}

impl<B: Backend, R, C> Shared<B, R, C> {
    /// The first step of every request: the policies that apply (by method and path), the
    /// allow and deny lists before any limiter, and the key, extracted once. Counts the
    /// outcome of every request it finishes with; one it hands on ([`Screening::Limit`]) is
    /// counted by the limiter that decides it.
    // Always: folded into the combined service's `call`, as the code it replaced was.
    #[inline(always)]
    pub(crate) fn screen_request<ResBody>(&self, parts: &Parts) -> Screening<B::Key, ResBody>
    where
        R: RejectBody<ResBody>,
    {
        // Without route rules only the defaults apply: no path to look up.
        let (path, template) = if self.table.routes.is_empty() && self.slots.routes.is_empty() {
            ("", None)
        } else {
            request_paths(parts)
        };
        let index = self.table.find(&parts.method, path, template);
        let slot = self.slots.find(&parts.method, path, template);
        let grpc = self.grpc && is_grpc(parts);
        // The allow and deny lists, before any limiter; one outcome counted per request.
        let limited = index.is_some() || slot.is_some();
        match self.ops.screen(&*self.extractor, index, limited, parts) {
            Screen::Limit(key) => Screening::Limit(Found {
                key,
                index,
                slot,
                grpc,
            }),
            Screen::Pass => {
                self.ops.record(index, Outcome::Allowed);
                Screening::Through
            }
            Screen::Bypass => {
                self.ops.record(index, Outcome::Bypassed);
                Screening::Through
            }
            Screen::Deny => {
                self.ops.record(index, Outcome::Denied);
                let p = Problem::new(
                    StatusCode::FORBIDDEN,
                    "the request is refused by the rate limiter's deny list",
                );
                Screening::Answer(reject(&self.body, &p, grpc, None))
            }
            Screen::KeyError(e) => match key_error(self, index, &e, grpc) {
                Some(res) => Screening::Answer(res),
                None => Screening::Through,
            },
        }
    }
}

/// What the rate step made of a request.
#[allow(clippy::large_enum_variant)] // moved once, in `call`; boxing the request would allocate
pub(crate) enum Decided<F: Future, ReqBody, ResBody> {
    /// Refused at once (nothing of the request runs: a permit taken for it can go back now).
    Refused(Response<ResBody>),
    /// Allowed now: call the inner service with the request and add these headers to its
    /// response. Left to the service's `call`, so that the inner service's future is made
    /// where it stays: every move of a future as large as a router's cost about as much as
    /// a header.
    Call(Request<ReqBody>, Option<RateHeaders>),
    /// A future that decides or waits first (shaping, refunds, remote backends).
    Pending(ResponseFuture<F>),
}

/// The rate step: the decision of the rate policy `found` names for its key (refusing,
/// shaping, refunding; in shadow, deciding and counting only), and the inner service called,
/// or not, accordingly; without a rate policy (a concurrency limit only), the inner service
/// called. Counts the request's outcome.
// Always: folded into the combined service's `call`, as the code it replaced was.
#[inline(always)]
pub(crate) fn decide_rate<S, B, R, C, ReqBody, ResBody>(
    shared: &Arc<Shared<B, R, C>>,
    inner: &mut S,
    parts: Parts,
    body: ReqBody,
    found: Found<B::Key>,
) -> Decided<S::Future, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Backend,
    R: RejectBody<ResBody>,
    C: Send + Sync + 'static,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    let Found {
        key, index, grpc, ..
    } = found;
    let Some(index) = index else {
        // A concurrency limit only: no rate policy counts the request.
        shared.ops.record(None, Outcome::Allowed);
        return Decided::Call(Request::from_parts(parts, body), None);
    };
    let cost = shared.cost.as_ref().map_or(1, |cost| cost(&parts));
    let req = Request::from_parts(parts, body);
    let policy = shared.table.get(index);
    let shadow = shared.is_shadow(index);
    let fut = match (&shared.mode, shadow) {
        (Mode::Shape(max_delay), false) => {
            let (shared, inner) = (Arc::clone(shared), take_ready(inner));
            ResponseFuture::boxed(Box::pin(shaping::shaped(
                shared, index, key, cost, *max_delay, grpc, inner, req,
            )))
        }
        (Mode::Refund(refunds), _) => {
            let refunds = refunds.clone();
            let (shared, inner) = (Arc::clone(shared), take_ready(inner));
            ResponseFuture::boxed(Box::pin(refunding::refunding(
                shared, refunds, index, key, cost, grpc, shadow, inner, req,
            )))
        }
        // Refusing, or shaping in shadow (nothing waits in shadow): decide now.
        (Mode::Reject | Mode::Shape(_), _) => match policy.backend.check_n(&key, cost) {
            Answer::Now(decided) => {
                return match shared.verdict(index, &key, decided, cost, grpc, shadow) {
                    Verdict::Proceed(headers) => Decided::Call(req, headers),
                    Verdict::Reject(res) => Decided::Refused(res),
                };
            }
            Answer::Later(decision) => {
                let (shared, inner) = (Arc::clone(shared), take_ready(inner));
                ResponseFuture::boxed(Box::pin(async move {
                    let decided = decision.await;
                    let verdict = shared.verdict(index, &key, decided, cost, grpc, shadow);
                    proceed(verdict, inner, req).await
                }))
            }
        },
    };
    Decided::Pending(fut)
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
    // Always: made in place, the inner future is not copied through a call (a router's is
    // hundreds of bytes).
    #[inline(always)]
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
