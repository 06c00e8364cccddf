//! Response-aware limits: take the permits before the handler runs, give them back when the
//! response says the request should not count (say, count only failed logins).
//!
//! Taking first is what keeps the limit exact under concurrency: a thousand simultaneous
//! login attempts against a burst of 5 reach the handler 5 times, because each admitted one
//! holds its permits while it runs. (Checking first and charging after the response would let
//! all thousand through.)
//!
//! Only a [`RefundBackend`] can give permits back, which the builder's
//! [`refund_if`](super::RateLimitLayerBuilder::refund_if) requires: its reserve and refund are
//! captured there, as [`Refunds`], so the layer (generic over any [`Backend`]) can run them.
//! For the in-process limiter the refund is
//! [`Reservation::cancel`](crate::Reservation::cancel), which makes a cancelled reservation's
//! capacity reusable even when it was ready at once and other requests reserved after it
//! (the core keeps such stretches as holes that later requests fill).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{Request, Response};
use tower_service::Service;

use super::backend::{Backend, RefundBackend};
use super::headers::RateHeaders;
use super::layer::{Shared, Verdict};
use super::response::RejectBody;
use crate::Decision;

/// A closure deciding from the response head whether the permits are given back.
pub(crate) type RefundFn = Arc<dyn Fn(&http::response::Parts) -> bool + Send + Sync>;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The decision on taking permits, and if taken, the refund (not started: it runs only if
/// awaited).
type Taken<'a, Err> = Result<(Decision, Option<BoxFuture<'a, ()>>), Err>;

/// Takes permits on a backend, in a form the layer can give back.
type TakeFn<B> = for<'a> fn(
    &'a B,
    &'a <B as Backend>::Key,
    u64,
) -> BoxFuture<'a, Taken<'a, <B as Backend>::Error>>;

/// Response-aware limits on a backend: the predicate, and the backend's reserve and refund
/// (captured where the backend is known to be a [`RefundBackend`]).
pub(crate) struct Refunds<B: Backend> {
    refund_if: RefundFn,
    take: TakeFn<B>,
}

impl<B: Backend> Clone for Refunds<B> {
    fn clone(&self) -> Self {
        Refunds {
            refund_if: Arc::clone(&self.refund_if),
            take: self.take,
        }
    }
}

impl<B: RefundBackend> Refunds<B> {
    pub(crate) fn new(refund_if: RefundFn) -> Self {
        Refunds {
            refund_if,
            take: take::<B>,
        }
    }
}

fn take<'a, B: RefundBackend>(
    backend: &'a B,
    key: &'a B::Key,
    cost: u64,
) -> BoxFuture<'a, Taken<'a, B::Error>> {
    Box::pin(async move {
        let (decided, reservation) = backend.reserve(key, cost).await?;
        let refund = reservation
            .map(|r| -> BoxFuture<'a, ()> { Box::pin(async move { backend.refund(r).await }) });
        Ok((decided, refund))
    })
}

/// Reserves `cost` permits, calls `inner`, and refunds them if the response head satisfies the
/// layer's refund predicate. An inner service error keeps the permits.
#[allow(clippy::too_many_arguments)] // one call site, each argument a different thing
pub(crate) async fn refunding<S, E, B, R, ReqBody, ResBody>(
    shared: Arc<Shared<E, B, R>>,
    refunds: Refunds<B>,
    index: usize,
    key: B::Key,
    cost: u64,
    grpc: bool,
    mut inner: S,
    req: Request<ReqBody>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    B: Backend,
    R: RejectBody<ResBody>,
{
    let policy = shared.table.get(index);
    let (decided, refund) = match (refunds.take)(&policy.backend, &key, cost).await {
        Ok((d, r)) => (Ok(d), r),
        Err(e) => (Err(e), None),
    };
    let headers: Option<RateHeaders> = match shared.verdict(policy, decided, cost, grpc) {
        Verdict::Proceed(headers) => headers,
        Verdict::Reject(res) => return Ok(res),
    };
    let res = inner.call(req).await?;
    let (mut head, body) = res.into_parts();
    if let Some(refund) = refund {
        if (refunds.refund_if)(&head) {
            refund.await;
        }
    }
    if let Some(h) = headers {
        h.write(&mut head.headers);
    }
    Ok(Response::from_parts(head, body))
}
