//! Shaping: a request over its limit waits for its permits (up to a maximum delay) instead of
//! being refused.
//!
//! The wait is the backend's [`check_n_for_async`](super::super::Backend::check_n_for_async).
//! With GCRA, a reservation taken at the response future's first poll and one timer sleep
//! until it is ready, so waiters are served in arrival order, each woken once; a request whose
//! wait would exceed the maximum takes nothing and is answered 429 at once. With a window
//! algorithm (which cannot book ahead), the generic acquire: sleep until the permits would fit,
//! decide again, never past the maximum, taking nothing when it gives up; not in arrival order.
//!
//! Cancel safety is what makes this safe under load: when a client disconnects while waiting,
//! the server drops the response future, which drops the wait and cancels its reservation, so
//! the slot goes to the next request instead of to nobody (a window wait holds nothing).

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use tower_service::Service;

use super::super::rate::backend::Backend;
use super::super::responses::rejection::RejectBody;
use super::super::state::{proceed, Shared};

/// Waits for `cost` permits (at most `max_delay`), then calls `inner` or answers 429.
#[allow(clippy::too_many_arguments)] // one call site, each argument a different thing
pub(crate) async fn shaped<S, B, R, C, ReqBody, ResBody>(
    shared: Arc<Shared<B, R, C>>,
    index: usize,
    key: B::Key,
    cost: u64,
    max_delay: Duration,
    inner: S,
    req: Request<ReqBody>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    B: Backend,
    R: RejectBody<ResBody>,
{
    let policy = shared.table.get(index);
    let decided = policy
        .backend
        .check_n_for_async(&key, cost, max_delay)
        .await;
    // Shadow policies never wait: `call` decides them without shaping.
    proceed(
        shared.verdict(index, &key, decided, cost, req.headers(), false),
        inner,
        req,
    )
    .await
}
