//! [`RateLimitLayerBuilder`]: quotas as people say them (or limiters you made), the policy
//! table, and the response settings, validated once by [`build`](RateLimitLayerBuilder::build).

use std::fmt;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::StatusCode;

use super::concurrency::backend::ConcurrencyBackend;
use super::error::BuildError;
use super::key::KeyExtractor;
use super::policy::{sf_name, Policy, PolicyTable, RoutePattern, SlotPolicy};
use super::rate::backend::{Backend, RefundBackend};
use super::rate::refunds::Refunds;
use super::responses::headers::HeaderStyle;
use super::responses::rejection::{NoBody, ProblemJson};
use super::state::{Backends, LayerBackends, RateLimitLayer};
use super::state::{Mode, OnKeyError, Shared};
use crate::{KeyedRateLimiter, KeyedRateLimiterBuilder, Quota, QuotaError, WhenFull};

mod ops_settings;

/// How the builder makes the in-process limiters it creates from quotas.
#[derive(Clone, Copy, Debug)]
pub(super) struct LimiterSettings {
    sweep_interval: Option<Duration>,
    max_keys: Option<NonZeroUsize>,
    when_full: WhenFull,
}

impl Default for LimiterSettings {
    fn default() -> Self {
        LimiterSettings {
            sweep_interval: Some(DEFAULT_SWEEP_INTERVAL),
            max_keys: Some(DEFAULT_MAX_KEYS),
            when_full: WhenFull::Deny,
        }
    }
}

/// How often limiters made by the builder evict idle keys, unless told otherwise.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(30);
/// The most keys a limiter made by the builder tracks, unless told otherwise: some tens of MB of
/// IP-address keys (measured per key at a million IPv6 keys: `benches/BENCHMARKS.md`, "HTTP
/// layer"); see
/// [`RateLimitLayerBuilder::max_keys`].
pub const DEFAULT_MAX_KEYS: NonZeroUsize = match NonZeroUsize::new(1_000_000) {
    Some(n) => n,
    None => unreachable!(),
};

/// A concurrency limit as given to the builder, with what `build` checks of its backend (read
/// where the backend is known to be a [`ConcurrencyBackend`]).
struct SlotSource<C> {
    name: String,
    backend: Arc<C>,
    keys_bounded: bool,
    limit: u64,
}

impl<C: ConcurrencyBackend> SlotSource<C> {
    fn new(name: &str, backend: Arc<C>) -> Self {
        SlotSource {
            name: name.to_owned(),
            keys_bounded: backend.keys_bounded(),
            limit: backend.limit(),
            backend,
        }
    }
}

/// A limit given as a quota (made into a limiter by `build`) or as a ready backend.
enum Source<B> {
    Quota(Quota),
    Backend(Arc<B>),
}

/// Makes an in-process limiter for a quota, named after its policy.
type MakeFn<B> = fn(Quota, &LimiterSettings, &str) -> B;

fn make_keyed<K>(quota: Quota, s: &LimiterSettings, name: &str) -> KeyedRateLimiter<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    let b = KeyedRateLimiter::builder(quota);
    s.apply(b, name).build()
}

impl LimiterSettings {
    /// The settings of a limiter made from a configuration file: each one it leaves out at
    /// the builder's default (a file can neither lift the key cap nor turn the sweeper off).
    #[cfg(feature = "serde")]
    pub(super) fn of_file(
        sweep_interval: Option<Duration>,
        max_keys: Option<NonZeroUsize>,
        when_full: Option<WhenFull>,
    ) -> LimiterSettings {
        let d = LimiterSettings::default();
        LimiterSettings {
            sweep_interval: sweep_interval.or(d.sweep_interval),
            max_keys: max_keys.or(d.max_keys),
            when_full: when_full.unwrap_or(d.when_full),
        }
    }

    /// `b` with these settings, named `name`: how the builder makes its limiters (and the
    /// configuration file its limiters of any algorithm).
    pub(super) fn apply<K, A>(
        &self,
        b: KeyedRateLimiterBuilder<K, A>,
        name: &str,
    ) -> KeyedRateLimiterBuilder<K, A>
    where
        K: Hash + Eq + Send + Sync + 'static,
        A: crate::Algorithm,
    {
        let b = b.when_full(self.when_full).name(name);
        let b = match self.sweep_interval {
            Some(interval) => b.sweep_interval(interval),
            None => b.no_sweeper(),
        };
        match self.max_keys {
            Some(max) => b.max_keys(max),
            None => b.no_key_cap(),
        }
    }
}

/// Configures a [`RateLimitLayer`]: the key, the limits (a default and per route), what a
/// limited request gets, and the headers. There are two ways in:
///
/// - [`RateLimitLayer::builder`]: limits given as quotas ([`per_second`](Self::per_second),
///   [`route`](Self::route), ...); the builder makes an in-process GCRA
///   [`KeyedRateLimiter`] for each, with a sweeper and a key cap
///   ([`sweep_interval`](Self::sweep_interval), [`max_keys`](Self::max_keys)), which
///   [`RateLimitLayer::limiter`] and [`RateLimitLayer::policies`] reach for monitoring.
/// - [`RateLimitLayer::with_limiters`]: limiters you made, of any [`Backend`](super::Backend)
///   type (a `KeyedRateLimiter` with another algorithm or clock, a `RedisRateLimiter`),
///   passed as `Arc`s ([`limiter`](Self::limiter), [`route_limiter`](Self::route_limiter)).
///
/// Quotas are taken where the layer's rate backend is the builder's own GCRA
/// `KeyedRateLimiter<K>` (the compiler refuses them otherwise); limiters you made are taken
/// either way, and the two may be mixed. The settings for limited requests (cost, shaping,
/// refunds, headers, bodies) are the same on both.
///
/// ```
/// use tollgate::http::{HeaderKey, HeaderName, HeaderStyle, Method, RateLimitLayer};
/// use tollgate::Quota;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
///     .per_minute(600)                                         // every route: 600/min per key
///     .route("login", "POST /login", Quota::per_minute(5)?)    // stricter on one route
///     .route("search", "/search/*", Quota::per_second(2)?)     // and on a subtree
///     .cost(|req| if req.method == Method::POST { 2 } else { 1 })
///     .headers(HeaderStyle::Ietf)
///     .problem_json()
///     .build()?;
/// # Ok(()) }
/// ```
///
/// A limiter of another algorithm takes no quota:
///
/// ```compile_fail
/// use std::sync::Arc;
/// use tollgate::http::{GlobalKey, RateLimitLayer};
/// use tollgate::{KeyedRateLimiter, Quota, SlidingLog};
///
/// let log = KeyedRateLimiter::<()>::builder(Quota::per_minute(5).unwrap())
///     .algorithm(SlidingLog)
///     .unwrap()
///     .build();
/// let _ = RateLimitLayer::with_limiters(GlobalKey)
///     .limiter(Arc::new(log))
///     .per_second(5); // no `per_second` here: the builder makes GCRA limiters only
/// ```
///
/// `L` names the layer's backends ([`Backends`]`<B, C>`: the rate backend, and the
/// concurrency backend, [`NoConcurrency`](super::NoConcurrency) until [`concurrency`](Self::concurrency) or
/// [`route_concurrency`](Self::route_concurrency) sets one); `R` makes the bodies of the
/// layer's own responses ([`NoBody`] until [`problem_json`](Self::problem_json) or
/// [`reject_body`](Self::reject_body)). The key extractor is not part of the type.
///
/// ```
/// use tollgate::http::{Backends, GlobalKey, RateLimitLayer, RateLimitLayerBuilder};
/// use tollgate::KeyedRateLimiter;
/// let b: RateLimitLayerBuilder<Backends<KeyedRateLimiter<()>>> = RateLimitLayer::builder(GlobalKey);
/// # let _ = b;
/// ```
#[must_use = "call .build() to get the layer"]
pub struct RateLimitLayerBuilder<L: LayerBackends, R = NoBody> {
    extractor: Box<dyn KeyExtractor<Key = Key<L>>>,
    default: Option<Source<L::Rate>>,
    default_name: String,
    routes: Vec<(String, String, Source<L::Rate>)>,
    make: Option<MakeFn<L::Rate>>,
    settings: LimiterSettings,
    /// Whether a setting of the limiters made from quotas was given (`build` refuses it when
    /// every limit is a limiter you made: it would apply to none).
    settings_given: bool,
    cost: Option<super::state::CostFn>,
    shape: Option<Duration>,
    refund: Option<Refunds<L::Rate>>,
    style: HeaderStyle,
    body: R,
    on_key_error: OnKeyError,
    never_status: StatusCode,
    grpc: bool,
    allow_unbounded_keys: bool,
    slot_default: Option<SlotSource<L::Concurrency>>,
    slot_routes: Vec<(String, SlotSource<L::Concurrency>)>,
    busy_status: StatusCode,
    error: Option<BuildError>,
    /// Allow and deny lists, shadow mode (`ops_settings.rs`).
    ops: ops_settings::OpsSettings<Key<L>>,
}

/// The key type of a layer with backends `L`.
type Key<L> = <<L as LayerBackends>::Rate as Backend>::Key;

impl<K> RateLimitLayer<Backends<KeyedRateLimiter<K>>>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    /// A builder for limits given as quotas, keyed by what `extractor` returns: for each, the
    /// builder makes an in-process GCRA [`KeyedRateLimiter`] that sweeps idle keys every
    /// [`DEFAULT_SWEEP_INTERVAL`] on a background thread and tracks at most
    /// [`DEFAULT_MAX_KEYS`] keys (see [`sweep_interval`](RateLimitLayerBuilder::sweep_interval)
    /// and [`max_keys`](RateLimitLayerBuilder::max_keys)). For limiters you made, see
    /// [`with_limiters`](RateLimitLayer::with_limiters).
    ///
    /// ```
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    /// let per_ip = RateLimitLayer::builder(PeerIp::new()).per_second(10).build().unwrap();
    /// assert_eq!(per_ip.limiter("default").unwrap().len(), 0); // made by the builder
    /// ```
    pub fn builder<E: KeyExtractor<Key = K>>(
        extractor: E,
    ) -> RateLimitLayerBuilder<Backends<KeyedRateLimiter<K>>> {
        RateLimitLayerBuilder::start(Box::new(extractor))
    }
}

impl<B: Backend> RateLimitLayer<Backends<B>> {
    /// A builder for limiters you made and share with the layer through `Arc`s, of any
    /// [`Backend`](super::Backend) type (a [`KeyedRateLimiter`] with your own algorithm, clock
    /// or settings; a `RedisRateLimiter`; another store): see
    /// [`limiter`](RateLimitLayerBuilder::limiter) and
    /// [`route_limiter`](RateLimitLayerBuilder::route_limiter). For limits given as quotas,
    /// see [`builder`](RateLimitLayer::builder).
    ///
    /// A `KeyedRateLimiter` needs a [`max_keys`](crate::KeyedRateLimiterBuilder::max_keys) cap
    /// (`build` refuses one without, see
    /// [`allow_unbounded_keys`](RateLimitLayerBuilder::allow_unbounded_keys)), and a
    /// [`sweep_interval`](crate::KeyedRateLimiterBuilder::sweep_interval) keeps it from
    /// sitting at the cap.
    ///
    /// ```
    /// use std::net::IpAddr;
    /// use std::num::NonZeroUsize;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// let limiter: Arc<KeyedRateLimiter<IpAddr>> = Arc::new(
    ///     KeyedRateLimiter::builder(Quota::per_second(5).unwrap())
    ///         .max_keys(NonZeroUsize::new(100_000).unwrap())
    ///         .sweep_interval(Duration::from_secs(30))
    ///         .build(),
    /// );
    /// let layer = RateLimitLayer::with_limiters(PeerIp::new()).limiter(limiter.clone()).build().unwrap();
    /// assert!(Arc::ptr_eq(layer.limiter("default").unwrap(), &limiter)); // shared
    /// ```
    pub fn with_limiters<E: KeyExtractor<Key = B::Key>>(
        extractor: E,
    ) -> RateLimitLayerBuilder<Backends<B>> {
        RateLimitLayerBuilder::start(Box::new(extractor))
    }
}

impl<B: Backend> RateLimitLayerBuilder<Backends<B>> {
    /// The defaults, with no limit yet.
    fn start(extractor: Box<dyn KeyExtractor<Key = B::Key>>) -> Self {
        RateLimitLayerBuilder {
            extractor,
            default: None,
            default_name: DEFAULT_POLICY.to_owned(),
            routes: Vec::new(),
            make: None,
            settings: LimiterSettings::default(),
            settings_given: false,
            cost: None,
            shape: None,
            refund: None,
            style: HeaderStyle::default(),
            body: NoBody,
            on_key_error: OnKeyError::default(),
            never_status: StatusCode::TOO_MANY_REQUESTS,
            grpc: true,
            allow_unbounded_keys: false,
            slot_default: None,
            slot_routes: Vec::new(),
            busy_status: StatusCode::TOO_MANY_REQUESTS,
            error: None,
            ops: ops_settings::OpsSettings::default(),
        }
    }
}

/// Quotas, and the settings of the in-process limiters the builder makes from them: where
/// the layer's rate backend is the builder's own GCRA `KeyedRateLimiter<K>`.
impl<K, C, R> RateLimitLayerBuilder<Backends<KeyedRateLimiter<K>, C>, R>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn quota_or_error(mut self, quota: Result<Quota, QuotaError>) -> Self {
        match quota {
            Ok(q) => self.quota(q),
            Err(e) => {
                self.error.get_or_insert(BuildError::Quota(e));
                self
            }
        }
    }

    /// Sets one of the settings of the limiters the builder makes, marking them given (`build`
    /// refuses given settings when every limit is a limiter you made).
    fn setting(mut self, set: impl FnOnce(&mut LimiterSettings)) -> Self {
        set(&mut self.settings);
        self.settings_given = true;
        self
    }

    /// The default limit: `n` requests per second per key, in bursts of up to `n`.
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey).per_second(50).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn per_second(self, n: u64) -> Self {
        self.quota_or_error(Quota::per_second(n))
    }

    /// The default limit: `n` requests per minute per key, in bursts of up to `n`.
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey).per_minute(600).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn per_minute(self, n: u64) -> Self {
        self.quota_or_error(Quota::per_minute(n))
    }

    /// The default limit: `n` requests per hour per key, in bursts of up to `n`.
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey).per_hour(1000).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn per_hour(self, n: u64) -> Self {
        self.quota_or_error(Quota::per_hour(n))
    }

    /// The default limit, as any [`Quota`] (for a burst other than the count).
    ///
    /// ```
    /// use tollgate::Quota;
    /// let q = Quota::per_minute(60).unwrap().with_burst(10).unwrap();
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey).quota(q).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn quota(mut self, quota: Quota) -> Self {
        self.make = Some(make_keyed::<K>);
        self.default = Some(Source::Quota(quota));
        self
    }

    /// A route with its own limit (its own limiter, keyed like the rest). Routes are tried in
    /// the order added, the first match wins, and requests matching none get the default
    /// limit (or none, without one). `name` identifies the policy in the `RateLimit-Policy`
    /// and `RateLimit` headers.
    ///
    /// `pattern` is `"METHOD /path"` or `"/path"` (any method), the path in axum 0.8's
    /// syntax:
    ///
    /// - **Method**: `GET`, `HEAD`, `POST`, `PUT`, `DELETE`, `CONNECT`, `OPTIONS`, `TRACE` or
    ///   `PATCH`, upper case. A `GET` rule also covers `HEAD` (same key, same limiter): a
    ///   server answers `HEAD` with `GET`'s handler (RFC 9110 §9.3.2; axum does). Put a
    ///   `HEAD` rule first to limit `HEAD` apart.
    /// - **Path**: segments matched byte for byte (no case folding, `/export/` is not
    ///   `/export`: as axum's router matches them); `{name}` matches one non-empty segment;
    ///   a final `{*name}` matches a slash and at least one more byte (axum's wildcard); a
    ///   final `/*` matches the path before it and everything under it (`"/api/*"`: `/api`,
    ///   `/api/`, `/api/v1/x`, not `/apis`). A rule also matches the values a handler sees:
    ///   where the route template axum matched has a parameter or a wildcard, both sides are
    ///   compared percent-decoded, so `"GET /users/7/export"` covers `/users/%37/export` on
    ///   the route `/users/{id}/export`. Without a template (the layer runs before routing)
    ///   any segment may be a parameter: percent-encoded spellings may be counted against a
    ///   rule that the router would not send to its handler, and none that it would escapes.
    ///   See the guide's "Route rules".
    /// - **Which path**: the request's full path. With the `axum` feature that is the path
    ///   before any `Router::nest` stripped its prefix (axum's `OriginalUri`), so a rule names
    ///   the full path wherever the layer sits; and where the layer runs after routing
    ///   (`Router::layer`, `route_layer`, a layer on a `MethodRouter`) a rule also matches
    ///   the route template axum matched (`MatchedPath`, e.g. `"/api/users/{id}"`). Without
    ///   it (hyper, tonic): the request's path as received.
    ///
    /// [`build`](RateLimitLayerBuilder::build) refuses ([`BuildError::Route`]) a pattern that
    /// could never match or that axum would read differently: another or lower-case method,
    /// a path not starting with `/`, whitespace other than the one space between method and
    /// path, an empty segment (`//`; one trailing slash is fine),
    /// braces other than a whole-segment `{name}`, a repeated name, a wildcard before the
    /// end, or axum 0.7's `:name` (see [`RouteError`](super::RouteError)).
    ///
    /// ```
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    /// use tollgate::Quota;
    /// let l = RateLimitLayer::builder(PeerIp::new())
    ///     .route("login", "POST /login", Quota::per_minute(5).unwrap())
    ///     .route("user", "GET /users/{id}", Quota::per_second(10).unwrap()) // and HEAD
    ///     .route("files", "/files/{*path}", Quota::per_second(20).unwrap())
    ///     .build(); // other routes are not limited
    /// assert!(l.is_ok());
    /// ```
    pub fn route(mut self, name: &str, pattern: &str, quota: Quota) -> Self {
        self.make = Some(make_keyed::<K>);
        self.routes
            .push((name.to_owned(), pattern.to_owned(), Source::Quota(quota)));
        self
    }

    /// Evicts cold keys in the background every `interval` (at least 1 ms), from each
    /// limiter the builder makes: see
    /// [`KeyedRateLimiterBuilder::sweep_interval`](crate::KeyedRateLimiterBuilder::sweep_interval).
    /// Default here: [`DEFAULT_SWEEP_INTERVAL`]; [`no_sweeper`](Self::no_sweeper) turns
    /// background sweeping off.
    ///
    /// ```
    /// use std::time::Duration;
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .per_second(5)
    ///     .sweep_interval(Duration::from_secs(5))
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn sweep_interval(self, interval: Duration) -> Self {
        self.setting(|s| s.sweep_interval = Some(interval))
    }

    /// No background sweeper: cold keys are evicted only by
    /// [`sweep_now`](crate::KeyedRateLimiter::sweep_now) and by a new key at the
    /// [`max_keys`](Self::max_keys) cap. See
    /// [`KeyedRateLimiterBuilder::no_sweeper`](crate::KeyedRateLimiterBuilder::no_sweeper).
    /// Default here: a sweeper every [`DEFAULT_SWEEP_INTERVAL`].
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .per_second(5)
    ///     .no_sweeper()
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn no_sweeper(self) -> Self {
        self.setting(|s| s.sweep_interval = None)
    }

    /// Caps the number of keys each limiter the builder makes tracks at `max_keys`: see
    /// [`KeyedRateLimiterBuilder::max_keys`](crate::KeyedRateLimiterBuilder::max_keys).
    /// Default here: [`DEFAULT_MAX_KEYS`]. The cap is what bounds memory under a flood of
    /// distinct clients (IPv6 gives one client many /64s); at the cap, cold keys are swept
    /// first, then [`when_full`](Self::when_full) decides. Zero is not a cap: the type rules
    /// it out, and [`no_key_cap`](Self::no_key_cap) says "no cap".
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .per_second(5)
    ///     .max_keys(NonZeroUsize::new(100_000).unwrap())
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    ///
    /// A count read from configuration cannot turn into "no cap" by being zero:
    ///
    /// ```compile_fail
    /// let configured: usize = 0;
    /// let _ = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .max_keys(std::num::NonZeroUsize::new(configured)); // an Option: does not compile
    /// ```
    pub fn max_keys(self, max_keys: NonZeroUsize) -> Self {
        self.setting(|s| s.max_keys = Some(max_keys))
    }

    /// No cap on the keys each limiter the builder makes tracks: see
    /// [`KeyedRateLimiterBuilder::no_key_cap`](crate::KeyedRateLimiterBuilder::no_key_cap).
    /// Default here: [`DEFAULT_MAX_KEYS`]. Clients choose the keys, so [`build`](Self::build)
    /// then refuses ([`BuildError::UnboundedKeys`]) unless
    /// [`allow_unbounded_keys`](Self::allow_unbounded_keys) says you mean it (except for a
    /// key type with one value, `GlobalKey`'s).
    ///
    /// ```
    /// use tollgate::http::{BuildError, PeerIp, RateLimitLayer};
    /// let refused = RateLimitLayer::builder(PeerIp::new()).per_second(5).no_key_cap().build();
    /// assert!(matches!(refused, Err(BuildError::UnboundedKeys(_))));
    /// let l = RateLimitLayer::builder(PeerIp::new())
    ///     .per_second(5)
    ///     .no_key_cap()
    ///     .allow_unbounded_keys()
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn no_key_cap(self) -> Self {
        self.setting(|s| s.max_keys = None)
    }

    /// The policy for new keys when the [`max_keys`](Self::max_keys) cap is reached: see
    /// [`KeyedRateLimiterBuilder::when_full`](crate::KeyedRateLimiterBuilder::when_full).
    /// Default: [`WhenFull::Deny`] (such clients get 429 until keys go cold).
    ///
    /// ```
    /// use tollgate::WhenFull;
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .per_second(5)
    ///     .when_full(WhenFull::AllowUntracked)
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn when_full(self, policy: WhenFull) -> Self {
        self.setting(|s| s.when_full = policy)
    }
}

/// The name of the default policy in headers.
const DEFAULT_POLICY: &str = "default";

/// Limiters you made.
impl<B: Backend, C: Send + Sync + 'static, R> RateLimitLayerBuilder<Backends<B, C>, R> {
    /// The default limit: a limiter you made (shared with you through the `Arc`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<()>::builder(Quota::per_second(1).unwrap())
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let l = RateLimitLayer::with_limiters(GlobalKey).limiter(Arc::new(limiter)).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn limiter(mut self, backend: Arc<B>) -> Self {
        self.default = Some(Source::Backend(backend));
        self
    }

    /// A route with its own limiter (see [`route`](Self::route) for `name` and `pattern`).
    /// Several routes may share one limiter (and then should share a name).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use std::sync::Arc;
    /// use tollgate::http::{PeerIp, RateLimitLayer};
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// let auth = Arc::new(
    ///     KeyedRateLimiter::builder(Quota::per_minute(10).unwrap())
    ///         .max_keys(NonZeroUsize::new(100_000).unwrap())
    ///         .build(),
    /// );
    /// let l = RateLimitLayer::with_limiters(PeerIp::new())
    ///     .route_limiter("auth", "POST /login", auth.clone())
    ///     .route_limiter("auth", "POST /password-reset", auth)
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn route_limiter(mut self, name: &str, pattern: &str, backend: Arc<B>) -> Self {
        self.routes.push((
            name.to_owned(),
            pattern.to_owned(),
            Source::Backend(backend),
        ));
        self
    }
}

/// What a limited request gets, and `build`: the same whichever way the builder started.
impl<B: Backend, C: Send + Sync + 'static, R> RateLimitLayerBuilder<Backends<B, C>, R> {
    /// Accepts limiters whose memory for keys has no bound ([`Backend::keys_bounded`] is
    /// false: a `KeyedRateLimiter` without a
    /// [`max_keys`](crate::KeyedRateLimiterBuilder::max_keys) cap, or
    /// [`no_key_cap`](Self::no_key_cap) on this builder), which [`build`](Self::build) refuses otherwise: clients choose the keys,
    /// so such a table grows as far as a flood of distinct keys takes it. For keys a client
    /// cannot invent (say, authenticated user IDs you bound elsewhere).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::{BuildError, PeerIp, RateLimitLayer};
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// let uncapped = Arc::new(KeyedRateLimiter::new(Quota::per_second(5).unwrap()));
    /// let refused = RateLimitLayer::with_limiters(PeerIp::new()).limiter(uncapped.clone()).build();
    /// assert!(matches!(refused, Err(BuildError::UnboundedKeys(_))));
    /// let l = RateLimitLayer::with_limiters(PeerIp::new())
    ///     .limiter(uncapped)
    ///     .allow_unbounded_keys()
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn allow_unbounded_keys(mut self) -> Self {
        self.allow_unbounded_keys = true;
        self
    }

    /// Renames the default policy (default `"default"`), to tell stacked layers apart in the
    /// `RateLimit` headers.
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .per_second(5)
    ///     .policy_name("per-ip")
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn policy_name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.default_name);
        self
    }

    /// Each request's cost in permits (default 1), for instance by route or by declared size.
    /// A cost above a policy's burst can never pass: such requests get the
    /// [`never_status`](Self::never_status), without `Retry-After`. A cost of 0 is never
    /// limited.
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .per_second(100)
    ///     .cost(|req| if req.uri.path().starts_with("/export") { 20 } else { 1 })
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.cost = Some(Box::new(cost));
        self
    }

    /// Shaping: a request over its limit waits for its permits, up to `max_delay`, then
    /// proceeds; it is answered 429 when the wait would be longer, having taken nothing. Needs
    /// a tokio runtime. How it waits is the backend's
    /// [`check_n_for_async`](super::Backend::check_n_for_async):
    ///
    /// - GCRA books the slot: waiters are served in arrival order, each woken once, a request
    ///   whose wait would exceed `max_delay` is refused at once, and a client that
    ///   disconnects while waiting gives its slot to the next one.
    /// - A window algorithm books nothing: a waiter sleeps until its permits would fit and
    ///   decides again, so newcomers may be served first, and a request can be refused after
    ///   waiting (when the next wait would pass `max_delay`), never later than `max_delay`. A
    ///   client that disconnects holds nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey)
    ///     .per_second(10)
    ///     .shape(Duration::from_secs(2))
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn shape(mut self, max_delay: Duration) -> Self {
        self.shape = Some(max_delay);
        self
    }

    /// Which rate-limit headers to send (default [`HeaderStyle::Ietf`]).
    ///
    /// ```
    /// use tollgate::http::{GlobalKey, HeaderStyle, RateLimitLayer};
    /// let l = RateLimitLayer::builder(GlobalKey).per_second(5).headers(HeaderStyle::XRateLimit).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.style = style;
        self
    }

    /// The status for requests that can never pass (cost above the burst; default 429
    /// without `Retry-After`). `413 Payload Too Large` suits costs that are sizes.
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey)
    ///     .per_second(5)
    ///     .never_status(tollgate::http::StatusCode::PAYLOAD_TOO_LARGE)
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn never_status(mut self, status: StatusCode) -> Self {
        self.never_status = status;
        self
    }

    /// The status of a request refused for its concurrency limit (see
    /// [`concurrency`](RateLimitLayerBuilder::concurrency)). Default `429 Too Many
    /// Requests`: the limit is the client's own (its key's), which it can keep to by waiting
    /// for its other requests, so it is a client error, like a rate limit. `503 Service
    /// Unavailable` suits a limit that protects the server (a global key), where proxies and
    /// clients read it as "try another instance, or later". gRPC calls get
    /// `RESOURCE_EXHAUSTED` for 429 and `UNAVAILABLE` for 503. `build` refuses a status that
    /// is not an error (`4xx` or `5xx`,
    /// [`BuildError::BusyStatus`](super::BuildError::BusyStatus)): a refusal a client would
    /// take for success.
    ///
    /// ```
    /// use tollgate::http::{BuildError, GlobalKey, RateLimitLayer, StatusCode};
    /// let l = RateLimitLayer::builder(GlobalKey).per_second(5).busy_status(StatusCode::OK).build();
    /// assert_eq!(l.unwrap_err(), BuildError::BusyStatus(StatusCode::OK));
    /// ```
    pub fn busy_status(mut self, status: StatusCode) -> Self {
        self.busy_status = status;
        self
    }

    /// What to do when the key extractor fails (default [`OnKeyError::Reject`]).
    ///
    /// ```
    /// use tollgate::http::{GlobalKey, OnKeyError, RateLimitLayer, StatusCode};
    /// let l = RateLimitLayer::builder(GlobalKey)
    ///     .per_second(5)
    ///     .on_key_error(OnKeyError::Status(StatusCode::UNAUTHORIZED))
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn on_key_error(mut self, policy: OnKeyError) -> Self {
        self.on_key_error = policy;
        self
    }

    /// Whether gRPC calls (`content-type: application/grpc...`) get gRPC statuses (default
    /// `true`): `RESOURCE_EXHAUSTED` for a limited call, as a trailers-only response.
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey)
    ///     .per_second(5)
    ///     .grpc(false)
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn grpc(mut self, grpc: bool) -> Self {
        self.grpc = grpc;
        self
    }

    /// Answers with `application/problem+json` bodies (RFC 9457) instead of empty ones. The
    /// inner service's response body must be `From<Bytes>` (axum's `Body`,
    /// `http_body_util::Full<Bytes>`).
    ///
    /// ```
    /// let l = tollgate::http::RateLimitLayer::builder(tollgate::http::GlobalKey)
    ///     .per_second(5)
    ///     .problem_json()
    ///     .build();
    /// assert!(l.is_ok());
    /// ```
    pub fn problem_json(self) -> RateLimitLayerBuilder<Backends<B, C>, ProblemJson> {
        self.reject_body(ProblemJson)
    }

    /// Makes the bodies of the layer's own responses with `body` (see
    /// [`RejectBody`](super::RejectBody)).
    ///
    /// ```
    /// use tollgate::http::{GlobalKey, NoBody, RateLimitLayer};
    /// let l = RateLimitLayer::builder(GlobalKey).per_second(5).reject_body(NoBody).build();
    /// assert!(l.is_ok());
    /// ```
    pub fn reject_body<R2>(self, body: R2) -> RateLimitLayerBuilder<Backends<B, C>, R2> {
        RateLimitLayerBuilder {
            extractor: self.extractor,
            default: self.default,
            default_name: self.default_name,
            routes: self.routes,
            make: self.make,
            settings: self.settings,
            settings_given: self.settings_given,
            cost: self.cost,
            shape: self.shape,
            refund: self.refund,
            style: self.style,
            body,
            on_key_error: self.on_key_error,
            never_status: self.never_status,
            grpc: self.grpc,
            allow_unbounded_keys: self.allow_unbounded_keys,
            slot_default: self.slot_default,
            slot_routes: self.slot_routes,
            busy_status: self.busy_status,
            error: self.error,
            ops: self.ops,
        }
    }

    /// Validates everything and makes the layer (and the limiters given as quotas).
    ///
    /// # Errors
    /// The first [`BuildError`] found: an invalid quota, route pattern or policy name, a
    /// limiter without a key cap (unless [`allow_unbounded_keys`](Self::allow_unbounded_keys)),
    /// shaping combined with refunds, or lists or shadow settings that cannot work (an allow
    /// list of every address, networks without a client address, an unknown policy name).
    ///
    /// ```
    /// use tollgate::http::{BuildError, GlobalKey, RateLimitLayer, RouteError};
    /// use tollgate::Quota;
    /// let err = RateLimitLayer::builder(GlobalKey)
    ///     .route("x", "login", Quota::per_second(1).unwrap())
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, BuildError::Route(RouteError::Path(_))));
    /// ```
    pub fn build(self) -> Result<RateLimitLayer<Backends<B, C>, R>, BuildError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let sources = || {
            self.routes
                .iter()
                .map(|(_, _, source)| source)
                .chain(&self.default)
        };
        if self.settings_given
            && sources().next().is_some()
            && !sources().any(|source| matches!(source, Source::Quota(_)))
        {
            return Err(BuildError::UnusedLimiterSettings);
        }
        let mode = match (self.shape, self.refund) {
            (Some(_), Some(_)) => return Err(BuildError::ShapeAndRefund),
            (Some(max), None) => Mode::Shape(max),
            (None, Some(f)) => Mode::Refund(f),
            (None, None) => Mode::Reject,
        };
        let (make, settings) = (self.make, self.settings);
        let backend = |source: Source<B>, name: &str| match source {
            Source::Backend(b) => b,
            // Quotas are only accepted by methods that also set `make`.
            Source::Quota(q) => Arc::new(make.expect("quota sources come with a maker")(
                q, &settings, name,
            )),
        };
        let allow_unbounded = self.allow_unbounded_keys;
        let bounded = |name: &str, b: Arc<B>| {
            if allow_unbounded || b.keys_bounded() {
                Ok(b)
            } else {
                Err(BuildError::UnboundedKeys(name.to_owned()))
            }
        };
        let mut routes = Vec::with_capacity(self.routes.len());
        for (name, pattern, source) in self.routes {
            let pattern = RoutePattern::parse(&pattern)?;
            let b = bounded(&name, backend(source, &name))?;
            routes.push((pattern, Policy::new(&name, b)?));
        }
        let default = match self.default {
            Some(source) => {
                let b = bounded(&self.default_name, backend(source, &self.default_name))?;
                Some(Policy::new(&self.default_name, b)?)
            }
            None => None,
        };
        let busy_status = self.busy_status;
        if !(busy_status.is_client_error() || busy_status.is_server_error()) {
            return Err(BuildError::BusyStatus(busy_status));
        }
        let slot = |source: SlotSource<C>| {
            if !(allow_unbounded || source.keys_bounded) {
                return Err(BuildError::UnboundedKeys(source.name));
            }
            if source.limit == 0 {
                return Err(BuildError::ZeroConcurrency(source.name));
            }
            Ok(SlotPolicy {
                sf_name: sf_name(&source.name)?,
                backend: source.backend,
            })
        };
        let mut slot_routes = Vec::with_capacity(self.slot_routes.len());
        for (pattern, source) in self.slot_routes {
            let pattern = RoutePattern::parse(&pattern)?;
            slot_routes.push((pattern, slot(source)?));
        }
        let slot_default = self.slot_default.map(slot).transpose()?;
        let table = PolicyTable { routes, default };
        let names: Vec<&str> = table.policies().map(|p| p.label.name()).collect();
        let ops = self
            .ops
            .build(&names, self.extractor.addr_source().is_some())?;
        Ok(RateLimitLayer::from_shared(Shared {
            extractor: self.extractor,
            table,
            slots: PolicyTable {
                routes: slot_routes,
                default: slot_default,
            },
            busy_status,
            cost: self.cost,
            mode,
            style: self.style,
            body: self.body,
            on_key_error: self.on_key_error,
            never_status: self.never_status,
            grpc: self.grpc,
            ops,
        }))
    }
}

/// Concurrency limits: the first one given sets the builder's concurrency type `C`.
impl<B: Backend, R> RateLimitLayerBuilder<Backends<B>, R> {
    /// The default concurrency limit: at most [`limit`](ConcurrencyBackend::limit) requests
    /// in flight per key (the layer's key) for every request the layer sees, counted by
    /// `backend` (shared with you through the `Arc`). A request is in flight from the layer's
    /// call until its response body has been sent or dropped (a streaming download holds its
    /// permit for its whole length; a client that goes away mid-body gives it back).
    ///
    /// A request over the limit is answered with the [`busy_status`](Self::busy_status)
    /// (default `429 Too Many Requests`) and the layer's body (empty, or
    /// [`problem_json`](Self::problem_json)), without `Retry-After`; gRPC calls get
    /// `RESOURCE_EXHAUSTED`. Rate limits of the same layer apply too: the concurrency permit is
    /// taken first, so a request refused for concurrency spends no rate permit, and one the rate
    /// limit refuses gives its permit back at once (a shaped request holds it while it waits).
    /// `name` identifies the policy in rejections and in
    /// [`RateLimitLayer::concurrency_limiter`].
    ///
    /// The service's response body becomes the inner one in a
    /// [`PermitBody`](super::PermitBody), which holds the permit. `build` refuses a backend
    /// whose limit is 0 and (unless [`allow_unbounded_keys`](Self::allow_unbounded_keys)) one
    /// whose keys are unbounded.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tollgate::http::{Busy, ConcurrencyBackend};
    /// # struct PerUser;
    /// # impl ConcurrencyBackend for PerUser {
    /// #     type Key = String;
    /// #     type Permit = ();
    /// #     fn limit(&self) -> u64 { 2 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &Self::Key, _: u64) -> Result<(), Busy> { Ok(()) }
    /// # }
    /// use tollgate::http::{HeaderKey, HeaderName, RateLimitLayer};
    ///
    /// let per_user = Arc::new(PerUser); // any ConcurrencyBackend, limit 2
    /// let layer = RateLimitLayer::builder(HeaderKey::new(HeaderName::from_static("x-user")))
    ///     .per_second(10)                      // a rate limit, and
    ///     .concurrency("in-flight", per_user)  // at most 2 in flight per user
    ///     .problem_json()
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn concurrency<C: ConcurrencyBackend<Key = B::Key>>(
        self,
        name: &str,
        backend: Arc<C>,
    ) -> RateLimitLayerBuilder<Backends<B, C>, R> {
        RateLimitLayerBuilder::<Backends<B, C>, R>::concurrency(self.with_slots(), name, backend)
    }

    /// A route with its own concurrency limit (first match wins, as for
    /// [`route`](Self::route), whose pattern syntax this takes; requests matching no
    /// concurrency route get the default concurrency limit, or none). See
    /// [`concurrency`](Self::concurrency) for what is counted and what a refused request gets.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tollgate::http::{Busy, ConcurrencyBackend};
    /// # struct PerIp;
    /// # impl ConcurrencyBackend for PerIp {
    /// #     type Key = std::net::IpAddr;
    /// #     type Permit = ();
    /// #     fn limit(&self) -> u64 { 2 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &Self::Key, _: u64) -> Result<(), Busy> { Ok(()) }
    /// # }
    /// use tollgate::http::{PeerIp, RateLimitLayer, StatusCode};
    ///
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .route_concurrency("exports", "GET /export/*", Arc::new(PerIp)) // 2 exports per IP
    ///     .busy_status(StatusCode::SERVICE_UNAVAILABLE)
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn route_concurrency<C: ConcurrencyBackend<Key = B::Key>>(
        self,
        name: &str,
        pattern: &str,
        backend: Arc<C>,
    ) -> RateLimitLayerBuilder<Backends<B, C>, R> {
        RateLimitLayerBuilder::<Backends<B, C>, R>::route_concurrency(
            self.with_slots(),
            name,
            pattern,
            backend,
        )
    }

    /// The same builder with concurrency type `C` (there is no concurrency limit yet to carry
    /// over: `NoConcurrency` has no values).
    fn with_slots<C: Send + Sync + 'static>(self) -> RateLimitLayerBuilder<Backends<B, C>, R> {
        RateLimitLayerBuilder {
            extractor: self.extractor,
            default: self.default,
            default_name: self.default_name,
            routes: self.routes,
            make: self.make,
            settings: self.settings,
            settings_given: self.settings_given,
            cost: self.cost,
            shape: self.shape,
            refund: self.refund,
            style: self.style,
            body: self.body,
            on_key_error: self.on_key_error,
            never_status: self.never_status,
            grpc: self.grpc,
            allow_unbounded_keys: self.allow_unbounded_keys,
            slot_default: None,
            slot_routes: Vec::new(),
            busy_status: self.busy_status,
            error: self.error,
            ops: self.ops,
        }
    }
}

/// More concurrency limits, of the type the first one set.
impl<B: Backend, R, C: ConcurrencyBackend<Key = B::Key>> RateLimitLayerBuilder<Backends<B, C>, R> {
    /// Sets (or replaces) the default concurrency limit: see the first call's
    /// [`concurrency`](RateLimitLayerBuilder::concurrency).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tollgate::http::{Busy, ConcurrencyBackend};
    /// # struct Slots(u64);
    /// # impl ConcurrencyBackend for Slots {
    /// #     type Key = ();
    /// #     type Permit = ();
    /// #     fn limit(&self) -> u64 { self.0 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &(), _: u64) -> Result<(), Busy> { Ok(()) }
    /// # }
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// let layer = RateLimitLayer::builder(GlobalKey)
    ///     .route_concurrency("exports", "/export/*", Arc::new(Slots(2)))
    ///     .concurrency("everything", Arc::new(Slots(100)))
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn concurrency(mut self, name: &str, backend: Arc<C>) -> Self {
        self.slot_default = Some(SlotSource::new(name, backend));
        self
    }

    /// Adds a route with its own concurrency limit: see the first call's
    /// [`route_concurrency`](RateLimitLayerBuilder::route_concurrency). Several routes may
    /// share one backend (and then should share a name).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tollgate::http::{Busy, ConcurrencyBackend};
    /// # struct Slots(u64);
    /// # impl ConcurrencyBackend for Slots {
    /// #     type Key = ();
    /// #     type Permit = ();
    /// #     fn limit(&self) -> u64 { self.0 }
    /// #     fn keys_bounded(&self) -> bool { true }
    /// #     fn try_acquire_n_owned(self: &Arc<Self>, _: &(), _: u64) -> Result<(), Busy> { Ok(()) }
    /// # }
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// let heavy = Arc::new(Slots(2));
    /// let layer = RateLimitLayer::builder(GlobalKey)
    ///     .route_concurrency("heavy", "/export/*", heavy.clone())
    ///     .route_concurrency("heavy", "POST /import", heavy)
    ///     .build();
    /// assert!(layer.is_ok());
    /// ```
    pub fn route_concurrency(mut self, name: &str, pattern: &str, backend: Arc<C>) -> Self {
        self.slot_routes
            .push((pattern.to_owned(), SlotSource::new(name, backend)));
        self
    }
}

/// Response-aware limits, for the backends with reservations.
impl<B: RefundBackend, C: Send + Sync + 'static, R> RateLimitLayerBuilder<Backends<B, C>, R> {
    /// Response-aware limits: take the permits before the handler, and give them back when
    /// `refund_if` says so of the response head (status, headers, extensions). Counting only
    /// failed logins is `refund_if(|res| res.status.is_success())`. Only for backends that can
    /// give permits back ([`RefundBackend`]: GCRA, in process or on Redis); with a window
    /// algorithm it does not compile.
    ///
    /// ```
    /// let failed_logins = tollgate::http::RateLimitLayer::builder(tollgate::http::PeerIp::new())
    ///     .route("login", "POST /login", tollgate::Quota::per_minute(5).unwrap())
    ///     .refund_if(|res| res.status.is_success())
    ///     .build();
    /// assert!(failed_logins.is_ok());
    /// ```
    ///
    /// A window algorithm cannot give permits back, so this does not compile:
    ///
    /// ```compile_fail
    /// use std::sync::Arc;
    /// use tollgate::http::{GlobalKey, RateLimitLayer};
    /// use tollgate::{KeyedRateLimiter, Quota, SlidingLog};
    ///
    /// let log = KeyedRateLimiter::<()>::builder(Quota::per_minute(5).unwrap())
    ///     .algorithm(SlidingLog)
    ///     .unwrap()
    ///     .build();
    /// let _ = RateLimitLayer::with_limiters(GlobalKey)
    ///     .limiter(Arc::new(log))
    ///     .refund_if(|res| res.status.is_success()); // no RefundBackend for a sliding log
    /// ```
    pub fn refund_if(
        mut self,
        refund_if: impl Fn(&http::response::Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.refund = Some(Refunds::new(Arc::new(refund_if)));
        self
    }
}

impl<L: LayerBackends, R> fmt::Debug for RateLimitLayerBuilder<L, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayerBuilder")
            .field("routes", &self.routes.len())
            .field(
                "default",
                &self.default.as_ref().map(|_| &self.default_name),
            )
            .field("style", &self.style)
            .finish_non_exhaustive()
    }
}
