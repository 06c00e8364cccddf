//! The refund mechanism of response-aware limits: a backend's reserve and refund, captured as
//! [`Refunds`] so the layer (generic over any [`Backend`]) can run them. The request path that
//! uses them is [`refunding`](super::super::service::refunding).
//!
//! Only a [`RefundBackend`] can give permits back, which the builder's
//! [`refund_if`](super::super::RateLimitLayerBuilder::refund_if) requires: its reserve and
//! refund are captured there. For the in-process limiter the refund is
//! [`Reservation::cancel`](crate::Reservation::cancel), which makes a cancelled reservation's
//! capacity reusable even when it was ready at once and other requests reserved after it
//! (the core keeps such stretches as holes that later requests fill).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::backend::{Backend, RefundBackend};
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
    pub(crate) refund_if: RefundFn,
    pub(crate) take: TakeFn<B>,
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
        let (decided, reservation) = backend.try_reserve_n(key, cost).await?;
        let refund = reservation
            .map(|r| -> BoxFuture<'a, ()> { Box::pin(async move { backend.refund(r).await }) });
        Ok((decided, refund))
    })
}
