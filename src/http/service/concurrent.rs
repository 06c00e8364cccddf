//! The concurrency mode of [`RateLimit`]: with a [`ConcurrencyBackend`], a request under a
//! concurrency policy takes one permit for its key before anything else, and the permit rides
//! in the response future and then in the response body ([`PermitBody`]) until the body ends
//! or is dropped. Over the limit: the layer's busy status (429 by default), with the layer's
//! body (empty, or `application/problem+json`) and no `Retry-After` (when a slot frees up
//! depends on other requests finishing, which nothing predicts). A new key refused because the
//! backend's key table is full ([`Busy::key_cap_reached`]): `503`, with the reason, also
//! without `Retry-After`.
//!
//! The rate policies still apply after the permit is taken, as without concurrency limits; a
//! request the rate limit refuses at once gives its permit back at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::request::Parts;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::super::concurrency::backend::{Busy, ConcurrencyBackend};
use super::super::concurrency::permit_body::PermitBody;
use super::super::policy::stats::Outcome;
use super::super::policy::SlotPolicy;
use super::super::rate::backend::Backend;
use super::super::responses::rejection::{name_reason, reject, Problem, RejectBody};
use super::super::state::{Backends, ConcurrencyLimitLayer, RateLimitLayer};
use super::super::state::{Shared, KEY_TABLE_FULL};
use super::{
    handoff, rate_step, start, Found, RateLimit, RateStep, ResponseFuture, Screening, Started,
};

service! {
    /// With concurrency limits: the response body is the inner one in a [`PermitBody`],
    /// holding the request's permit (if a concurrency policy applied) until it ends or is
    /// dropped.
    permits RateLimitLayer;
    fn call(&mut self, req) {
        let answer = |res| PermitFuture {
            fut: ResponseFuture::ready(res),
            permit: None,
        };
        // As without concurrency limits: decided on the request's head.
        let (parts, body) = req.into_parts();
        let shared = self.layer.shared();
        let mut headers = None;
        let permit = match start(shared, &parts, acquire) {
            Started::Limit(found, permit) => match rate_step(shared, &parts, &found, &mut headers) {
                RateStep::Proceed => permit,
                // Refused at once: the permit goes back now, not after the 429 is sent.
                RateStep::Refused(res) => return answer(res),
                RateStep::Wait(waiting) => {
                    let req = Request::from_parts(parts, body);
                    let fut = waiting.future(found.key, shared, &mut self.inner, req);
                    return PermitFuture { fut, permit };
                }
            },
            Started::Through => None,
            Started::Answer(res) => return answer(res),
        };
        let fut = ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), headers);
        PermitFuture { fut, permit }
    }
}

service! {
    /// The service of a [`ConcurrencyLimitLayer`]: the concurrency step alone, with what an
    /// [`AccessLayer`](super::super::AccessLayer) outside found, or after screening the
    /// request itself (then handing what it found to the
    /// [`RateLayer`](super::super::RateLayer) inside). The response body is the inner one in a
    /// [`PermitBody`], as with the combined layer.
    permits ConcurrencyLimitLayer;
    fn call(&mut self, req) {
        let (mut parts, body) = req.into_parts();
        let shared = self.layer.shared();
        let owner = handoff::owner(shared);
        let answer = |res| PermitFuture {
            fut: ResponseFuture::ready(res),
            permit: None,
        };
        let (admitted, index, source) = match handoff::peek::<B::Key>(&parts.extensions, owner) {
            Some(Some(found)) => (admit(shared, found, &parts), found.index, Source::Outside),
            Some(None) => (Ok(None), None, Source::Settled),
            None => match shared.screen_request(&parts) {
                Screening::Limit(found) => {
                    let admitted = admit(shared, &found, &parts);
                    (admitted, found.index, Source::Here(found))
                }
                Screening::Through => (Ok(None), None, Source::Settled),
                Screening::Answer(res) => return answer(res),
            },
        };
        let permit = match admitted {
            Ok(permit) => permit,
            Err(res) => return answer(res),
        };
        match (index, source) {
            (Some(_), Source::Here(found)) => {
                handoff::hand_on(&mut parts.extensions, owner, Some(found));
            }
            // Left in place for the rate layer.
            (Some(_), _) => {}
            (None, Source::Settled) => handoff::settle::<B::Key>(&mut parts.extensions, owner),
            (None, _) => {
                // A concurrency limit only: no rate policy counts the request.
                shared.ops.record(None, Outcome::Allowed);
                handoff::settle::<B::Key>(&mut parts.extensions, owner);
            }
        }
        let req = Request::from_parts(parts, body);
        PermitFuture {
            fut: ResponseFuture::inner(self.inner.call(req), None),
            permit,
        }
    }
}

/// Where the concurrency layer's findings came from.
enum Source<K> {
    /// An access layer outside found them, and left them in the request.
    Outside,
    /// This layer's own screening found them.
    Here(Found<K>),
    /// The request is settled: no limiter runs.
    Settled,
}

/// The permit of the concurrency policy at `found.slot`, if one applies, or the answer to a
/// request over its limit.
fn admit<B, R, C, ResBody>(
    shared: &Shared<B, R, C>,
    found: &Found<B::Key>,
    parts: &Parts,
) -> Result<Option<C::Permit>, Response<ResBody>>
where
    B: Backend,
    R: RejectBody<ResBody>,
    C: ConcurrencyBackend<Key = B::Key>,
{
    found
        .slot
        .map(|i| acquire(shared, shared.slots.get(i), &found.key, parts))
        .transpose()
}

/// A permit of `policy` for `key`, or the answer to the request (its head `parts`) over its
/// limit.
fn acquire<B, R, C, ResBody>(
    shared: &Shared<B, R, C>,
    policy: &SlotPolicy<C>,
    key: &B::Key,
    parts: &Parts,
) -> Result<C::Permit, Response<ResBody>>
where
    B: Backend,
    R: RejectBody<ResBody>,
    C: ConcurrencyBackend<Key = B::Key>,
{
    policy
        .backend
        .try_acquire_n_owned(key, 1)
        .map_err(|busy| refuse(shared, policy, busy, shared.is_grpc(&parts.headers)))
}

/// The answer to a request over its concurrency limit.
fn refuse<B: Backend, R, C, ResBody>(
    shared: &Shared<B, R, C>,
    policy: &SlotPolicy<C>,
    busy: Busy,
    grpc: bool,
) -> Response<ResBody>
where
    R: RejectBody<ResBody>,
{
    if busy.is_key_cap_reached() {
        // The server's capacity, not the client's: as a rate limiter's full key table.
        let p = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("concurrency limit {}: {KEY_TABLE_FULL}", policy.sf_name),
        );
        let mut res = reject(&shared.body, &p, grpc, None);
        name_reason(&mut res, KEY_TABLE_FULL, grpc);
        return res;
    }
    let p = Problem::new(
        shared.busy_status,
        format!(
            "concurrency limit {} reached: at most {} requests in flight per client; retry \
             when one of yours has finished",
            policy.sf_name,
            busy.limit()
        ),
    );
    reject(&shared.body, &p, grpc, None)
}

pin_project! {
    /// The response future of a [`RateLimit`] with concurrency limits: the inner response
    /// future, holding the request's permit while the handler runs (a client that goes away
    /// before the response drops it), then moving it into the response's [`PermitBody`].
    ///
    /// ```
    /// # use std::sync::atomic::{AtomicU32, Ordering};
    /// # use std::sync::Arc;
    /// # use tollgate::http::{Busy, ConcurrencyBackend};
    /// # /// One slot in all.
    /// # #[derive(Default)]
    /// # struct One(AtomicU32);
    /// # struct Slot(Arc<One>);
    /// # impl Drop for Slot {
    /// #     fn drop(&mut self) { self.0 .0.store(0, Ordering::SeqCst); }
    /// # }
    /// # impl ConcurrencyBackend for One {
    /// #     type Key = ();
    /// #     type Permit = Slot;
    /// #     fn limit(&self) -> u64 { 1 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &(), _: u64) -> Result<Slot, Busy> {
    /// #         match self.0.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst) {
    /// #             Ok(_) => Ok(Slot(Arc::clone(self))),
    /// #             Err(_) => Err(Busy::new(1)),
    /// #         }
    /// #     }
    /// # }
    /// use std::future::poll_fn;
    /// use axum::body::Body;
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let layer = RateLimitLayer::builder(GlobalKey)
    ///     .concurrency("one-at-a-time", Arc::new(One::default())) // limit 1
    ///     .build()
    ///     .unwrap();
    /// let hello: axum::routing::MethodRouter = axum::routing::get(|| async { "hello" });
    /// let mut service = layer.layer(hello);
    /// let (mut status, mut first) = (Vec::new(), None);
    /// for i in 0..3 {
    ///     if i == 2 {
    ///         drop(first.take()); // the first body, dropped unread: its permit goes back
    ///     }
    ///     poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut service, cx)).await.unwrap();
    ///     let res = service.call(http::Request::new(Body::empty())).await.unwrap();
    ///     status.push(res.status().as_u16());
    ///     first.get_or_insert(res); // the first response's body holds the permit
    /// }
    /// assert_eq!(status, [200, 429, 200]);
    /// # }
    /// ```
    pub struct PermitFuture<F, P> {
        #[pin]
        fut: F,
        permit: Option<P>,
    }
}

impl<F, B, Err, P> Future for PermitFuture<F, P>
where
    F: Future<Output = Result<Response<B>, Err>>,
{
    type Output = Result<Response<PermitBody<B, P>>, Err>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = ready!(this.fut.poll(cx))?;
        let mut res = res;
        // A refusal the rate layer inside made at once: the permit goes back now.
        let permit = this
            .permit
            .take()
            .filter(|_| !handoff::refused_at_once(&mut res));
        Poll::Ready(Ok(res.map(|body| PermitBody::new(body, permit))))
    }
}

impl<F, P> fmt::Debug for PermitFuture<F, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitFuture")
            .field("holds_permit", &self.permit.is_some())
            .finish_non_exhaustive()
    }
}
