//! The concurrency mode of [`RateLimit`]: with a [`ConcurrencyBackend`], a request under a
//! concurrency policy takes one permit for its key before anything else, and the permit rides
//! in the response future and then in the response body ([`PermitBody`]) until the body ends
//! or is dropped. Over the limit: the layer's busy status (429 by default), with the layer's
//! body (empty, or `application/problem+json`) and no `Retry-After` (when a slot frees up
//! depends on other requests finishing, which nothing predicts).
//!
//! The rate policies still apply after the permit is taken, as without concurrency limits; a
//! request the rate limit refuses at once gives its permit back at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::backend::Backend;
use super::concurrency_backend::{Busy, ConcurrencyBackend};
use super::key::KeyExtractor;
use super::permit_body::PermitBody;
use super::policy::SlotPolicy;
use super::rejection::{reject, Problem, RejectBody};
use super::service::{RateLimit, ResponseFuture};
use super::state::Shared;

/// With concurrency limits: the response body is the inner one in a [`PermitBody`], holding
/// the request's permit (if a concurrency policy applied) until it ends or is dropped.
impl<S, E, B, R, C, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, E, B, R, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    E: KeyExtractor<Key = B::Key>,
    B: Backend,
    R: RejectBody<ResBody>,
    C: ConcurrencyBackend<Key = B::Key>,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<PermitBody<ResBody, C::Permit>>;
    type Error = S::Error;
    type Future = PermitFuture<ResponseFuture<S::Future, ResBody, S::Error>, C::Permit>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<Request<ReqBody>>::poll_ready(self.inner_mut(), cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let (fut, permit) = self.start(req, |shared, policy, key, grpc| {
            policy
                .backend
                .try_acquire_n_owned(key, 1)
                .map_err(|busy| refuse(shared, policy, busy, grpc))
        });
        PermitFuture { fut, permit }
    }
}

/// The answer to a request over its concurrency limit.
fn refuse<E, B: Backend, R, C, ResBody>(
    shared: &Shared<E, B, R, C>,
    policy: &SlotPolicy<C>,
    busy: Busy,
    grpc: bool,
) -> Response<ResBody>
where
    R: RejectBody<ResBody>,
{
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
        let permit = this.permit.take();
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
