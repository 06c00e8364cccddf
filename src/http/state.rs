//! The state the layer and its services share, and the verdict on a request.
//!
//! All state lives in one `Arc` made by [`build`](super::RateLimitLayerBuilder::build); the
//! layer and every service it makes (axum makes one per route, and clones it per request)
//! share it, so every request meets the same limiters. [`Shared::verdict`] turns a backend's
//! decision into a [`Verdict`], which the service carries out at once and the waiting paths
//! ([shaping](super::service::shaping), [refunds](super::service::refunding)) carry out with
//! [`proceed`].

use std::time::Duration;

use http::request::Parts;
use http::{Request, Response, StatusCode};
use tower_service::Service;

use super::concurrency::backend::NoConcurrency;
use super::policy::ops::Ops;
use super::policy::stats::Outcome;
use super::policy::{Policy, PolicyTable, SlotPolicy};
use super::rate::backend::Backend;
use super::rate::refunds::Refunds;
use super::responses::headers::{HeaderStyle, RateHeaders};
use super::responses::rejection::{reject, Problem, RejectBody};
use crate::Decision;

/// What the layer does when the key extractor fails (see [`KeyError`](super::KeyError)).
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
pub(crate) struct Shared<E, B: Backend, R, C = NoConcurrency> {
    pub(crate) extractor: E,
    pub(crate) table: PolicyTable<Policy<B>>,
    /// The concurrency policies (always empty with [`NoConcurrency`]).
    pub(crate) slots: PolicyTable<SlotPolicy<C>>,
    /// The status of a request refused for its concurrency limit.
    pub(crate) busy_status: StatusCode,
    pub(crate) cost: Option<CostFn>,
    pub(crate) mode: Mode<B>,
    pub(crate) style: HeaderStyle,
    pub(crate) body: R,
    pub(crate) on_key_error: OnKeyError,
    pub(crate) never_status: StatusCode,
    pub(crate) grpc: bool,
    /// Allow and deny lists, shadow switches, outcome counters.
    pub(crate) ops: Ops<B::Key>,
}

/// What to do with a request once its decision is known.
pub(crate) enum Verdict<ResBody> {
    /// Call the inner service, and add these headers to its response.
    Proceed(Option<RateHeaders>),
    /// Answer with this response instead.
    Reject(Response<ResBody>),
}

impl<E, B: Backend, R, C> Shared<E, B, R, C> {
    /// Whether the policy at `index` is in shadow now: read once per request, in `call`, so
    /// that a request is decided and answered under one mode even while it is switched.
    #[inline]
    pub(crate) fn is_shadow(&self, index: usize) -> bool {
        self.ops.policy(index).enforcement.is_shadow()
    }

    /// The verdict for the decision of the policy at `index` on a request of `cost`, and its
    /// count. In `shadow`, every decision proceeds: a refusal counts as `would_refuse` (with
    /// shaping, as `would_delay` when the wait would have fitted the maximum delay), and the
    /// headers are sent only if `shadow_headers` is on, without `Retry-After`.
    pub(crate) fn verdict<ResBody>(
        &self,
        index: usize,
        key: &B::Key,
        decided: Result<Decision, B::Error>,
        cost: u64,
        grpc: bool,
        shadow: bool,
    ) -> Verdict<ResBody>
    where
        R: RejectBody<ResBody>,
    {
        let policy = self.table.get(index);
        let record = |outcome| self.ops.record(Some(index), outcome);
        let d = match decided {
            Ok(d) => d,
            Err(_) => {
                record(Outcome::Unavailable);
                if shadow {
                    return Verdict::Proceed(None);
                }
                let p = Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("rate limit {} could not be checked", policy.label.sf_name()),
                );
                return Verdict::Reject(reject(&self.body, &p, grpc, None));
            }
        };
        let show = !shadow || self.ops.shadow_headers;
        let headers = (show && (self.style != HeaderStyle::None || !d.allowed))
            .then(|| RateHeaders::new(self.style, &policy.label, policy.rate(), &d));
        if d.allowed {
            record(Outcome::Allowed);
            return Verdict::Proceed(headers);
        }
        if shadow {
            let delayed = match (&self.mode, d.retry_after) {
                (Mode::Shape(max), Some(wait)) => wait <= *max,
                _ => false,
            };
            let outcome = if delayed {
                Outcome::WouldDelay
            } else {
                Outcome::WouldRefuse
            };
            record(outcome);
            self.ops.refused(index, outcome, key);
            return Verdict::Proceed(headers.map(RateHeaders::without_retry_after));
        }
        let outcome = match d.retry_after {
            Some(_) => Outcome::Refused,
            None => Outcome::Never,
        };
        record(outcome);
        self.ops.refused(index, outcome, key);
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
