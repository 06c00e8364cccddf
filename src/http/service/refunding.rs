//! Response-aware limits: take the permits before the handler runs, give them back when the
//! response says the request should not count (say, count only failed logins).
//!
//! Taking first is what keeps the limit exact under concurrency: a thousand simultaneous
//! login attempts against a burst of 5 reach the handler 5 times, because each admitted one
//! holds its permits while it runs. (Checking first and charging after the response would let
//! all thousand through.) The taking and giving back are the backend's, captured as
//! [`Refunds`] (see [`refund`](super::super::rate::refunds)).

use std::sync::Arc;

use http::{Request, Response};
use tower_service::Service;

use super::super::rate::backend::Backend;
use super::super::rate::refunds::Refunds;
use super::super::responses::headers::RateHeaders;
use super::super::responses::rejection::RejectBody;
use super::super::state::{Shared, Verdict};

/// Reserves `cost` permits, calls `inner`, and refunds them if the response head satisfies the
/// layer's refund predicate. An inner service error keeps the permits. In `shadow`, a refused
/// request is called too (holding nothing).
#[allow(clippy::too_many_arguments)] // one call site, each argument a different thing
pub(crate) async fn refunding<S, B, R, C, ReqBody, ResBody>(
    shared: Arc<Shared<B, R, C>>,
    refunds: Refunds<B>,
    index: usize,
    key: B::Key,
    cost: u64,
    shadow: bool,
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
    // In shadow a refused request proceeds holding nothing (there is nothing to refund).
    let headers: Option<RateHeaders> =
        match shared.verdict(index, &key, decided, cost, req.headers(), shadow) {
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
