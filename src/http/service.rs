//! [`RateLimit`], the service made by [`RateLimitLayer`](super::RateLimitLayer) and by the
//! layers of one concern, and its [`ResponseFuture`]: decide in `call`, answer 429 or call the
//! inner service and add the headers to its response.
//!
//! A request's steps are written here once: the screening ([`Shared::screen_request`]), the
//! concurrency step ([`concurrent`]) and the rate step ([`rate_step`]), all on the request's
//! head (the request itself is moved once, into the inner service or a waiting future). The combined layer's
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

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::request::Parts;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::access::Screen;
use super::key::KeyError;
use super::policy::stats::Outcome;
use super::policy::SlotPolicy;
use super::rate::backend::{Answer, Backend};
use super::rate::refunds::Refunds;
use super::responses::headers::RateHeaders;
use super::responses::rejection::{name_reason, reject, Problem, RejectBody};
use super::state::{proceed, Mode, OnKeyError, Shared, Verdict};
use super::state::{Backends, RateLimitLayer};
use crate::Decision;

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
        // Decided on the request's head, which stays where it is: every move of a request
        // (about 240 bytes) costs.
        let (parts, body) = req.into_parts();
        let shared = self.layer.shared();
        let mut headers = None;
        // The screening alone, not `start`: the table of concurrency policies is empty, so no
        // policy is ever found there to admit the request, and what was found is not moved
        // once more through `Started`.
        match shared.screen_request(&parts) {
            Screening::Limit(found) => match rate_step(shared, &parts, &found, &mut headers) {
                RateStep::Proceed => {}
                RateStep::Refused(res) => return ResponseFuture::ready(res),
                RateStep::Wait(waiting) => {
                    let req = Request::from_parts(parts, body);
                    return waiting.future(found.key, shared, &mut self.inner, req);
                }
            },
            Screening::Through => {}
            Screening::Answer(res) => return ResponseFuture::ready(res),
        }
        ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), headers)
    }
}

/// The steps before the rate step, on the request's head, with no hand-off between them: the
/// screening ([`Shared::screen_request`]: routes, lists, key), then the concurrency policy
/// (`admit` takes its permit, or answers for the request: a request refused for concurrency
/// spends no rate permit). The caller then runs the rate step ([`rate_step`]) on what was
/// found, and gives the permit back at once if that refuses the request.
// Always: folded into each `call`, so that nothing it returns is copied through a call.
#[inline(always)]
pub(crate) fn start<B, R, C, ResBody, P>(
    shared: &Shared<B, R, C>,
    parts: &Parts,
    admit: impl FnOnce(
        &Shared<B, R, C>,
        &SlotPolicy<C>,
        &B::Key,
        &Parts,
    ) -> Result<P, Response<ResBody>>,
) -> Started<B::Key, P, ResBody>
where
    B: Backend,
    R: RejectBody<ResBody>,
{
    let found = match shared.screen_request(parts) {
        Screening::Limit(found) => found,
        Screening::Through => return Started::Through,
        Screening::Answer(res) => return Started::Answer(res),
    };
    let permit = match found.slot {
        Some(i) => match admit(shared, shared.slots.get(i), &found.key, parts) {
            Ok(permit) => Some(permit),
            Err(res) => return Started::Answer(res),
        },
        None => None,
    };
    Started::Limit(found, permit)
}

/// What [`start`] made of a request.
pub(crate) enum Started<K, P, ResBody> {
    /// The rate step decides it, with what was found and the concurrency permit taken, if
    /// any.
    Limit(Found<K>, Option<P>),
    /// Through to the inner service, unlimited (counted already).
    Through,
    /// Answered here (counted already).
    Answer(Response<ResBody>),
}

/// What the screening found for a request a limiter is to decide: its key, and the rate and
/// concurrency policies that apply (at least one of them).
pub(crate) struct Found<K> {
    pub(crate) key: K,
    /// The rate policy's index in the policy table.
    pub(crate) index: Option<usize>,
    /// The concurrency policy's index in its table.
    pub(crate) slot: Option<usize>,
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
        // The allow and deny lists, before any limiter; one outcome counted per request.
        let limited = index.is_some() || slot.is_some();
        let screen = if limited && !self.ops.has_lists(index) {
            // No lists (the usual layer): the key is all there is to screen, and goes straight
            // into what was found, not through the lists' verdict (a copy of it per step).
            match self.extractor.extract(parts) {
                Ok(key) => return Screening::Limit(Found { key, index, slot }),
                Err(e) => Screen::KeyError(e),
            }
        } else {
            self.ops.screen(&*self.extractor, index, limited, parts)
        };
        match screen {
            Screen::Limit(key) => Screening::Limit(Found { key, index, slot }),
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
                let grpc = self.is_grpc(&parts.headers);
                Screening::Answer(reject(&self.body, &p, grpc, None))
            }
            Screen::KeyError(e) => match key_error(self, index, &e, parts) {
                Some(res) => Screening::Answer(res),
                None => Screening::Through,
            },
        }
    }
}

/// A backend's decision still to come (a remote store's): the future its
/// [`check_n`](Backend::check_n) returned.
pub(crate) trait Later<B: Backend>:
    Future<Output = Result<Decision, B::Error>> + Send + 'static
{
}

impl<B: Backend, F: Future<Output = Result<Decision, B::Error>> + Send + 'static> Later<B> for F {}

/// What the rate step made of a request, decided on the request's head: the caller, which
/// still owns the request, calls the inner service or builds the future that waits. (Moving
/// the request through the step instead cost a copy of it per move.)
pub(crate) enum RateStep<B: Backend, ResBody, L> {
    /// Allowed now (or no rate policy applies): call the inner service with the request and
    /// add the headers the step wrote (if any) to its response. Left to the service's `call`,
    /// so that the inner service's future is made where it stays: every move of a future as
    /// large as a router's cost about as much as a header.
    Proceed,
    /// Refused at once (nothing of the request runs: a permit taken for it can go back now).
    Refused(Response<ResBody>),
    /// Decided by a future, or waiting first (shaping, refunds, remote backends):
    /// [`Waiting::future`].
    Wait(Waiting<B, L>),
}

/// A rate decision that waits: what its future needs besides the request and the key.
pub(crate) struct Waiting<B: Backend, L> {
    index: usize,
    cost: u64,
    shadow: bool,
    how: How<B, L>,
}

/// Why a rate decision waits.
enum How<B: Backend, L> {
    /// Shaping: waits up to this long for the permits.
    Shape(Duration),
    /// Takes the permits before the handler, gives them back if the response says so.
    Refund(Refunds<B>),
    /// The backend decides later (a remote store).
    Later(L),
}

/// The rate step: the decision of the rate policy `found` names for its key (refusing,
/// shaping, refunding; in shadow, deciding and counting only), made on the request's head;
/// without a rate policy (a concurrency limit only), [`RateStep::Proceed`]. Counts the
/// request's outcome when it decides now. The headers of a request allowed now go into
/// `headers` (the caller's, left as they are otherwise), not into the result: moved through
/// each enum on the way, they were copied (96 bytes, even when there are none) at every step.
// Always: folded into each `call`, as the code it replaced was. The key is borrowed from the
// caller, which moves it into the waiting future: the backend's future captures the borrow
// (its type names it) but outlives it (`'static`), so the borrow ends here.
#[inline(always)]
pub(crate) fn rate_step<'s, 'k, B, R, C, ResBody>(
    shared: &'s Shared<B, R, C>,
    parts: &Parts,
    found: &'k Found<B::Key>,
    headers: &mut Option<RateHeaders>,
) -> RateStep<B, ResBody, impl Later<B> + 'static + use<'s, 'k, B, R, C, ResBody>>
where
    B: Backend,
    R: RejectBody<ResBody>,
{
    let Found { ref key, index, .. } = *found;
    let Some(index) = index else {
        // A concurrency limit only: no rate policy counts the request.
        shared.ops.record(None, Outcome::Allowed);
        return RateStep::Proceed;
    };
    let cost = shared.cost.as_ref().map_or(1, |cost| cost(parts));
    let shadow = shared.is_shadow(index);
    let how = match (&shared.mode, shadow) {
        (Mode::Shape(max_delay), false) => How::Shape(*max_delay),
        (Mode::Refund(refunds), _) => How::Refund(refunds.clone()),
        // Refusing, or shaping in shadow (nothing waits in shadow): decide now.
        (Mode::Reject | Mode::Shape(_), _) => {
            match shared.table.get(index).backend.check_n(key, cost) {
                Answer::Now(decided) => {
                    if shared.allowed(index, &decided, shadow, headers) {
                        return RateStep::Proceed;
                    }
                    let req = &parts.headers;
                    return match shared.decide_verdict(index, key, decided, cost, req, shadow) {
                        Verdict::Proceed(allowed) => {
                            *headers = allowed;
                            RateStep::Proceed
                        }
                        Verdict::Reject(res) => RateStep::Refused(res),
                    };
                }
                Answer::Later(decision) => How::Later(decision),
            }
        }
    };
    RateStep::Wait(Waiting {
        index,
        cost,
        shadow,
        how,
    })
}

impl<B: Backend, L: Later<B>> Waiting<B, L> {
    /// The future that waits, decides for `key` and calls the inner service (the very
    /// instance that was readied) with `req`, or answers; it counts the request's outcome.
    pub(crate) fn future<S, R, C, ReqBody, ResBody>(
        self,
        key: B::Key,
        shared: &Arc<Shared<B, R, C>>,
        inner: &mut S,
        req: Request<ReqBody>,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        R: RejectBody<ResBody>,
        C: Send + Sync + 'static,
        ReqBody: Send + 'static,
        ResBody: Send + 'static,
    {
        let Waiting {
            index,
            cost,
            shadow,
            how,
        } = self;
        let (shared, inner) = (Arc::clone(shared), take_ready(inner));
        let fut: BoxOutput<S::Future> = match how {
            How::Shape(max_delay) => Box::pin(shaping::shaped(
                shared, index, key, cost, max_delay, inner, req,
            )),
            How::Refund(refunds) => Box::pin(refunding::refunding(
                shared, refunds, index, key, cost, shadow, inner, req,
            )),
            How::Later(decision) => Box::pin(async move {
                let decided = decision.await;
                let verdict = shared.verdict(index, &key, decided, cost, req.headers(), shadow);
                proceed(verdict, inner, req).await
            }),
        };
        ResponseFuture::boxed(fut)
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
    parts: &Parts,
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
    let grpc = shared.is_grpc(&parts.headers);
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
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use axum::body::Body;
    /// use tollgate::http::{GlobalKey, RateLimitLayer, ResponseFuture};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = RateLimitLayer::builder(GlobalKey).per_minute(10).build().unwrap();
    /// let hello: axum::routing::MethodRouter = axum::routing::get(|| async { "hello" });
    /// let mut service = layer.layer(hello);
    /// poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
    /// let future: ResponseFuture<_> = service.call(http::Request::new(Body::empty()));
    /// let res = future.await.unwrap(); // the inner service's output, headers added
    /// assert_eq!(res.status(), 200);
    /// let ratelimit = res.headers()["ratelimit"].to_str().unwrap();
    /// assert!(ratelimit.starts_with(r#""default";r=9;"#), "{ratelimit}"); // 9 of 10 left
    /// # }
    /// ```
    pub struct ResponseFuture<F: Future> {
        // The inner service's future, `None` when answered otherwise. A field of its own
        // rather than a variant of one enum with the others: the inner service's `call` then
        // writes its future (a router's is hundreds of bytes) where it stays, where an enum
        // variant took two copies on every allowed request.
        #[pin]
        fut: Option<F>,
        other: Other<F>,
    }
}

/// The rest of a [`ResponseFuture`]: the headers for the inner service's response, or what
/// answers without it. One enum, not a field each: the future is copied whole where it is
/// boxed (axum boxes every route's), so its size costs on every request.
enum Other<F: Future> {
    /// The inner service's future answers; these headers (if any) go on its response.
    Inner(Option<RateHeaders>),
    /// A response made here, taken by the first poll.
    Ready(Option<F::Output>),
    /// A future that waits first (shaping, refunds, remote backends).
    Boxed(BoxOutput<F>),
}

impl<F: Future> ResponseFuture<F> {
    // Always: made in place, the inner future is not copied through a call (a router's is
    // hundreds of bytes).
    #[inline(always)]
    fn inner(fut: F, headers: Option<RateHeaders>) -> Self {
        ResponseFuture {
            fut: Some(fut),
            other: Other::Inner(headers),
        }
    }

    fn boxed(fut: BoxOutput<F>) -> Self {
        ResponseFuture {
            fut: None,
            other: Other::Boxed(fut),
        }
    }
}

impl<F, B, Err> ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, Err>>,
{
    fn ready(response: Response<B>) -> Self {
        ResponseFuture {
            fut: None,
            other: Other::Ready(Some(Ok(response))),
        }
    }
}

impl<F, B, Err> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, Err>>,
{
    type Output = Result<Response<B>, Err>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(fut) = this.fut.as_pin_mut() {
            // The inner poll's output is moved once at most (a response is 128 bytes): with no
            // headers to add, not at all.
            return match this.other {
                Other::Inner(headers @ Some(_)) => poll_adding(fut, cx, headers),
                _ => fut.poll(cx),
            };
        }
        match this.other {
            Other::Ready(output) => match output.take() {
                Some(output) => Poll::Ready(output),
                None => panic!("ResponseFuture polled after completion"),
            },
            Other::Boxed(fut) => fut.as_mut().poll(cx),
            // Made with the inner service's future only, which is never taken out.
            Other::Inner(_) => unreachable!("ResponseFuture without its inner future"),
        }
    }
}

/// Polls the inner service's future, adding `headers` to its response when it is ready.
// Never inlined: the poll without headers then needs no stack frame of its own.
#[inline(never)]
fn poll_adding<F, B, Err>(
    fut: Pin<&mut F>,
    cx: &mut Context<'_>,
    headers: &mut Option<RateHeaders>,
) -> Poll<Result<Response<B>, Err>>
where
    F: Future<Output = Result<Response<B>, Err>>,
{
    let mut out = fut.poll(cx);
    if let Poll::Ready(Ok(res)) = &mut out {
        if let Some(h) = headers.take() {
            h.write(res.headers_mut());
        }
    }
    out
}

impl<F: Future> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use http::{HeaderMap, Request, Response, StatusCode};
    use tower_layer::Layer;
    use tower_service::Service;

    use crate::http::{GlobalKey, PeerIp, RateLimitLayer};

    /// The inner service: `200`, empty, ready at once.
    #[derive(Clone)]
    struct Ok200;

    impl Service<Request<()>> for Ok200 {
        type Response = Response<String>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Response<String>, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            std::future::ready(Ok(Response::new(String::new())))
        }
    }

    /// The status and headers of `svc`'s answer to a request (gRPC's content type if `grpc`).
    fn answer<S>(svc: &mut S, grpc: bool) -> (StatusCode, HeaderMap)
    where
        S: Service<Request<()>, Response = Response<String>>,
        S::Error: std::fmt::Debug,
    {
        let mut b = Request::get("/");
        if grpc {
            b = b.header("content-type", "application/grpc+proto");
        }
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(())) = svc.poll_ready(&mut cx) else {
            panic!("not ready")
        };
        let Poll::Ready(res) = pin!(svc.call(b.body(()).unwrap())).poll(&mut cx) else {
            panic!("the answer waited")
        };
        let res = res.unwrap();
        (res.status(), res.headers().clone())
    }

    fn grpc_status(h: &HeaderMap) -> Option<&str> {
        h.get("grpc-status").map(|v| v.to_str().unwrap())
    }

    /// Over a limit of one: the first request allowed, then a gRPC call refused in gRPC's
    /// terms (`RESOURCE_EXHAUSTED`) and a plain request with `429`.
    fn assert_refusals<S>(svc: &mut S)
    where
        S: Service<Request<()>, Response = Response<String>>,
        S::Error: std::fmt::Debug,
    {
        assert_eq!(answer(svc, false).0, StatusCode::OK);
        let (status, h) = answer(svc, true);
        assert_eq!((status, grpc_status(&h)), (StatusCode::OK, Some("8")));
        let (status, h) = answer(svc, false);
        let plain = (StatusCode::TOO_MANY_REQUESTS, None);
        assert_eq!((status, grpc_status(&h)), plain);
    }

    /// Whether a refusal is answered in gRPC's terms is read from the refused request itself,
    /// by the combined layer and by its layers of one concern stacked.
    #[test]
    fn refusals_of_grpc_calls_are_grpc_answers_combined_or_stacked() {
        let one = || {
            RateLimitLayer::builder(GlobalKey)
                .per_minute(1)
                .build()
                .unwrap()
        };
        assert_refusals(&mut one().layer(Ok200));
        let layer = one();
        assert_refusals(&mut layer.access_layer().layer(layer.rate_layer().layer(Ok200)));

        // Without the gRPC mapping, a gRPC call gets the HTTP refusal.
        let layer = RateLimitLayer::builder(GlobalKey)
            .per_minute(1)
            .grpc(false)
            .build()
            .unwrap();
        let mut plain = layer.layer(Ok200);
        answer(&mut plain, true);
        let (status, h) = answer(&mut plain, true);
        assert_eq!(
            (status, grpc_status(&h)),
            (StatusCode::TOO_MANY_REQUESTS, None)
        );
    }

    /// A key error (here: no peer address) of a gRPC call is a gRPC answer too.
    #[test]
    fn key_errors_of_grpc_calls_are_grpc_answers() {
        let layer = RateLimitLayer::builder(PeerIp::new())
            .per_minute(1)
            .build()
            .unwrap();
        let mut svc = layer.layer(Ok200);
        let (status, h) = answer(&mut svc, true);
        assert_eq!((status, grpc_status(&h)), (StatusCode::OK, Some("13")));
        let (status, h) = answer(&mut svc, false);
        assert_eq!(
            (status, grpc_status(&h)),
            (StatusCode::INTERNAL_SERVER_ERROR, None)
        );
    }
}
