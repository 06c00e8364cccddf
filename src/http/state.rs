//! The state the layer and its services share, and the verdict on a request.
//!
//! All state lives in one `Arc` made by [`build`](super::RateLimitLayerBuilder::build); the
//! layer and every service it makes (axum makes one per route, and clones it per request)
//! share it, so every request meets the same limiters. [`Shared::verdict`] turns a backend's
//! decision into a [`Verdict`], which the service carries out at once and the waiting paths
//! ([shaping](super::service::shaping), [refunds](super::service::refunding)) carry out with
//! [`proceed`].
//!
//! The layer's type, [`RateLimitLayer`] (a handle to that `Arc`), and [`Backends`] are defined
//! here, below the service that names them in its `Service` impls; the layer's methods and its
//! `Layer` impl are in [`layer`](super::layer), above the service.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{HeaderMap, Request, Response, StatusCode};
use tower_service::Service;

use super::concurrency::backend::NoConcurrency;
use super::key::KeyExtractor;
use super::policy::ops::Ops;
use super::policy::stats::Outcome;
use super::policy::{Policy, PolicyTable, SlotPolicy};
use super::rate::backend::Backend;
use super::rate::refunds::Refunds;
use super::responses::headers::{HeaderStyle, RateHeaders};
use super::responses::rejection::{is_grpc, name_reason, reject, NoBody, Problem, RejectBody};
use crate::Decision;

/// The backends of a [`RateLimitLayer`], as one type: `B` decides its rate limits (a
/// [`Backend`]), `C` counts its requests in flight (a
/// [`ConcurrencyBackend`](super::ConcurrencyBackend), or [`NoConcurrency`] without
/// concurrency limits). A name only, never a value: it keeps the layer's type to two
/// parameters.
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::http::{Backends, PeerIp, RateLimitLayer};
/// use tollgate::KeyedRateLimiter;
///
/// let layer: RateLimitLayer<Backends<KeyedRateLimiter<IpAddr>>> =
///     RateLimitLayer::builder(PeerIp::new()).per_second(10).build().unwrap();
/// # let _ = layer;
/// ```
pub struct Backends<B, C = NoConcurrency> {
    _types: PhantomData<fn() -> (B, C)>,
}

impl<B, C> fmt::Debug for Backends<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Backends")
    }
}

mod sealed {
    pub trait Sealed {}
}

/// What [`Backends`] names: the rate backend and the concurrency backend of a
/// [`RateLimitLayer`]. Sealed: [`Backends`] is its only implementation.
///
/// Code generic over a layer's backends bounds its parameter by it, as the layer does, and
/// names each backend through it:
///
/// ```
/// use std::net::IpAddr;
/// use std::sync::Arc;
/// use tollgate::http::{Backends, LayerBackends, PeerIp, RateLimitLayer};
/// use tollgate::KeyedRateLimiter;
///
/// /// An application's state, for a layer of any backends.
/// struct Limits<L: LayerBackends> {
///     layer: RateLimitLayer<L>,
/// }
///
/// type Local = Backends<KeyedRateLimiter<IpAddr>>;
/// let limits: Limits<Local> = Limits {
///     layer: RateLimitLayer::builder(PeerIp::new()).per_second(10).build().unwrap(),
/// };
/// // `Rate` is the rate backend: here the builder's own keyed limiter.
/// let limiter: &Arc<<Local as LayerBackends>::Rate> = limits.layer.limiter("default").unwrap();
/// assert_eq!(limiter.quota().count(), 10);
/// ```
pub trait LayerBackends: sealed::Sealed + 'static {
    /// The rate backend.
    type Rate: Backend;
    /// The concurrency backend ([`NoConcurrency`] for none).
    type Concurrency: Send + Sync + 'static;
}

impl<B, C> sealed::Sealed for Backends<B, C> {}

impl<B: Backend, C: Send + Sync + 'static> LayerBackends for Backends<B, C> {
    type Rate = B;
    type Concurrency = C;
}

/// The state shared by a layer with backends `L` and reject body `R`.
type SharedOf<L, R> = Shared<<L as LayerBackends>::Rate, R, <L as LayerBackends>::Concurrency>;

/// A tower [`Layer`](tower_layer::Layer) that rate-limits requests: see the [module docs](super) and
/// [`RateLimitLayer::builder`].
///
/// Cloning is cheap (one `Arc`), and every clone and every service it makes share the same
/// limiters.
///
/// `L` names its backends ([`Backends`]`<B, C>`: the rate backend `B`, and the concurrency
/// backend `C`, [`NoConcurrency`] without concurrency limits; see
/// [`concurrency`](super::RateLimitLayerBuilder::concurrency): with them, the service's
/// response body is the inner one wrapped in a [`PermitBody`](super::PermitBody)); `R` makes
/// the bodies of its own responses ([`NoBody`] by default; see
/// [`RejectBody`](super::RejectBody)). The key extractor is not part of the type.
///
/// ```
/// use tollgate::http::{GlobalKey, RateLimitLayer};
/// use tower_layer::Layer;
///
/// let layer = RateLimitLayer::builder(GlobalKey).per_second(100).build().unwrap();
/// let hello: axum::routing::MethodRouter = axum::routing::get(|| async { "hello" });
/// let service = layer.layer(hello);
/// # let _ = service;
/// ```
pub struct RateLimitLayer<L: LayerBackends, R = NoBody> {
    shared: Arc<SharedOf<L, R>>,
}

impl<B: Backend, R, C: Send + Sync + 'static> RateLimitLayer<Backends<B, C>, R> {
    pub(crate) fn from_shared(shared: Shared<B, R, C>) -> Self {
        RateLimitLayer {
            shared: Arc::new(shared),
        }
    }
}

impl<L: LayerBackends, R> RateLimitLayer<L, R> {
    /// The state the layer's services decide with.
    #[inline]
    pub(crate) fn shared(&self) -> &Arc<SharedOf<L, R>> {
        &self.shared
    }
}

impl<L: LayerBackends, R> Clone for RateLimitLayer<L, R> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Declares a layer of one concern: a handle to the same state as the [`RateLimitLayer`] it
/// came from (one `Arc`), so that the layers of a stack share one policy table, its names,
/// switches and counters.
macro_rules! concern_layer {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name<L: LayerBackends, R = NoBody> {
            shared: Arc<SharedOf<L, R>>,
        }

        impl<L: LayerBackends, R> $name<L, R> {
            pub(crate) fn from_layer(layer: &RateLimitLayer<L, R>) -> Self {
                $name {
                    shared: Arc::clone(layer.shared()),
                }
            }

            /// The state the layer's services decide with.
            #[inline]
            pub(crate) fn shared(&self) -> &Arc<SharedOf<L, R>> {
                &self.shared
            }
        }

        impl<L: LayerBackends, R> Clone for $name<L, R> {
            fn clone(&self) -> Self {
                $name {
                    shared: Arc::clone(&self.shared),
                }
            }
        }

        impl<L: LayerBackends, R> fmt::Debug for $name<L, R> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}

concern_layer! {
    /// The allow and deny lists of a [`RateLimitLayer`] as a tower layer of their own, made by
    /// [`RateLimitLayer::access_layer`]: it screens each request (the policy that applies, the
    /// lists, the key) and answers those the lists deny (`403`) or that have no usable key
    /// (per [`OnKeyError`]); it limits nothing itself.
    ///
    /// The outermost layer of a stack: what it found (the key, extracted once, and the
    /// policies) goes to the [`ConcurrencyLimitLayer`] and [`RateLayer`] of the same
    /// `RateLimitLayer` inside it, and each request's outcome is counted once, by the layer
    /// that decides it. A request it hands to a limiter is counted by that limiter's layer: use
    /// it alone only where no policy limits, or with the limiter layers inside it.
    ///
    /// ```
    /// use tollgate::http::{AccessList, PeerIp, RateLimitLayer};
    ///
    /// let lists = AccessList::new().deny_networks(["192.0.2.0/24".parse().unwrap()]);
    /// let layer = RateLimitLayer::builder(PeerIp::new()).access(lists).build().unwrap();
    /// let app: axum::Router = axum::Router::new()
    ///     .route("/", axum::routing::get(|| async { "hello" }))
    ///     .layer(layer.access_layer()); // 403 for 192.0.2.0/24, nothing limited
    /// # let _ = app;
    /// ```
    AccessLayer
}

concern_layer! {
    /// The concurrency limits of a [`RateLimitLayer`] as a tower layer of their own, made by
    /// [`RateLimitLayer::concurrency_layer`]: a request under a concurrency policy takes a
    /// permit for its key, held in the response body ([`PermitBody`](super::PermitBody)), or
    /// is answered with the busy status. As tower's `ConcurrencyLimitLayer`, but per key and
    /// per route.
    ///
    /// Inside an [`AccessLayer`] of the same `RateLimitLayer`, it uses what that one found;
    /// alone (outermost), it screens the request itself, lists included. A request it admits
    /// under a rate policy goes to the [`RateLayer`] inside it, which counts its outcome.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tollgate::http::{Busy, ConcurrencyBackend};
    /// # struct Slots;
    /// # impl ConcurrencyBackend for Slots {
    /// #     type Key = ();
    /// #     type Permit = ();
    /// #     fn limit(&self) -> u64 { 2 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &(), _: u64) -> Result<(), Busy> { Ok(()) }
    /// # }
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::builder(GlobalKey)
    ///     .concurrency("in-flight", Arc::new(Slots)) // any ConcurrencyBackend
    ///     .build()
    ///     .unwrap();
    /// let app: axum::Router = axum::Router::new()
    ///     .route("/", axum::routing::get(|| async { "hello" }))
    ///     .layer(layer.concurrency_layer());
    /// # let _ = app;
    /// ```
    ConcurrencyLimitLayer
}

concern_layer! {
    /// The rate limits of a [`RateLimitLayer`] as a tower layer of their own, made by
    /// [`RateLimitLayer::rate_layer`]: the rate policy's decision (refuse with `429`, shape,
    /// refund; shadow mode), and the rate-limit headers.
    ///
    /// The innermost layer of a stack: inside an [`AccessLayer`] or a
    /// [`ConcurrencyLimitLayer`] of the same `RateLimitLayer`, it uses what they found; alone,
    /// it screens the request itself, lists included (then it is the `RateLimitLayer` without
    /// its concurrency limits).
    ///
    /// ```
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::builder(PeerIp::new()).per_second(10).build().unwrap();
    /// let app: axum::Router = axum::Router::new()
    ///     .route("/", axum::routing::get(|| async { "hello" }))
    ///     .layer(layer.rate_layer());
    /// # let _ = app;
    /// ```
    RateLayer
}

/// What the layer does when the key extractor fails (see [`KeyError`](super::KeyError)).
///
/// The default, [`Reject`](OnKeyError::Reject), fails closed: a request without a usable key
/// never reaches the handler. [`Allow`](OnKeyError::Allow) fails open: every key error becomes
/// a request with no limit at all.
///
/// Whichever the policy, a key error is never silent: it is counted (`misconfigured` when the
/// server is at fault, `key_error` otherwise), logged (rate-limited), and an answer the layer
/// makes names its [`reason`](super::KeyError::reason) (see [`KeyError`](super::KeyError)).
/// A `PeerIp` layer served without `ConnectInfo` answers every request `500` with
/// `Tollgate-Error: no peer address: serve with axum's ConnectInfo<SocketAddr> ...`.
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
pub(crate) struct Shared<B: Backend, R, C = NoConcurrency> {
    /// Erased, so that no public type names the extractor: one indirect call per request.
    pub(crate) extractor: Box<dyn KeyExtractor<Key = B::Key>>,
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

impl<B: Backend, R, C> Shared<B, R, C> {
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
    #[inline(always)]
    pub(crate) fn verdict<ResBody>(
        &self,
        index: usize,
        key: &B::Key,
        decided: Result<Decision, B::Error>,
        cost: u64,
        req: &HeaderMap,
        shadow: bool,
    ) -> Verdict<ResBody>
    where
        R: RejectBody<ResBody>,
    {
        let mut headers = None;
        if self.allowed(index, &decided, shadow, &mut headers) {
            return Verdict::Proceed(headers);
        }
        self.decide_verdict(index, key, decided, cost, req, shadow)
    }

    /// The verdict on a decision that allowed the request, the common case: `true`, the
    /// request counted and its headers (if any are sent) written into `headers`; `false`
    /// for any other decision, left to [`decide_verdict`](Self::decide_verdict).
    // Always: folded into each `call`, so that neither the decision nor the headers are
    // copied through a call, nor the headers through a `Verdict` (96 bytes, even when there
    // are none).
    #[inline(always)]
    pub(crate) fn allowed(
        &self,
        index: usize,
        decided: &Result<Decision, B::Error>,
        shadow: bool,
        headers: &mut Option<RateHeaders>,
    ) -> bool {
        let Ok(d) = decided else { return false };
        if !d.allowed || d.is_key_cap_reached() {
            return false;
        }
        if (!shadow || self.ops.shadow_headers) && self.style != HeaderStyle::None {
            let policy = self.table.get(index);
            *headers = Some(RateHeaders::new(
                self.style,
                &policy.label,
                policy.rate(),
                d,
            ));
        }
        self.ops.record(Some(index), Outcome::Allowed);
        true
    }

    /// [`verdict`](Self::verdict) of a decision [`allowed`](Self::allowed) did not take: an
    /// error, a key cap reached, or a refusal (each caller asks `allowed` first).
    pub(crate) fn decide_verdict<ResBody>(
        &self,
        index: usize,
        key: &B::Key,
        decided: Result<Decision, B::Error>,
        cost: u64,
        req: &HeaderMap,
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
                return Verdict::Reject(reject(&self.body, &p, self.is_grpc(req), None));
            }
        };
        if d.is_key_cap_reached() {
            return self.key_cap_reached(index, key, &d, req, shadow);
        }
        debug_assert!(!d.allowed, "an allowed decision is `allowed`'s");
        // A refusal's headers are sent whatever the style (`Retry-After` at least).
        let show = !shadow || self.ops.shadow_headers;
        let headers = show.then(|| RateHeaders::new(self.style, &policy.label, policy.rate(), &d));
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
        Verdict::Reject(reject(&self.body, &p, self.is_grpc(req), headers))
    }

    /// The verdict for a new key the limiter's full key table refused: the server's capacity,
    /// not the client's traffic, so `503` (gRPC `UNAVAILABLE`) with `Retry-After` (when a slot
    /// may free) and the reason, but no rate-limit fields (the client used none of its limit).
    /// Counted as `key_cap_reached` in shadow too, where the request goes through.
    #[cold]
    fn key_cap_reached<ResBody>(
        &self,
        index: usize,
        key: &B::Key,
        d: &Decision,
        req: &HeaderMap,
        shadow: bool,
    ) -> Verdict<ResBody>
    where
        R: RejectBody<ResBody>,
    {
        self.ops.record(Some(index), Outcome::KeyCapReached);
        self.ops.refused(index, Outcome::KeyCapReached, key);
        if shadow {
            return Verdict::Proceed(None);
        }
        let policy = self.table.get(index);
        let headers = RateHeaders::new(HeaderStyle::None, &policy.label, policy.rate(), d);
        let p = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "rate limit {}: {KEY_TABLE_FULL}; retry after {} s",
                policy.label.sf_name(),
                headers.retry_after().unwrap_or(1)
            ),
        );
        let grpc = self.is_grpc(req);
        let mut res = reject(&self.body, &p, grpc, Some(headers));
        name_reason(&mut res, KEY_TABLE_FULL, grpc);
        Verdict::Reject(res)
    }

    /// Whether a request with the headers `req` is answered in gRPC's terms: a gRPC call, with
    /// gRPC answers on. Asked only when answering, not of every request.
    pub(crate) fn is_grpc(&self, req: &HeaderMap) -> bool {
        self.grpc && is_grpc(req)
    }
}

/// The reason a key-cap refusal states (its `Tollgate-Error` header, and in its detail).
pub(crate) const KEY_TABLE_FULL: &str =
    "the limiter's key table is full (key cap reached): no room to track a new client";

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
