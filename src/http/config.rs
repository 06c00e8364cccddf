//! The layer's configuration as data (features `serde` and `tower`): [`LayerConfig`], read from
//! any serde format (TOML, YAML, JSON), made into a layer by [`LayerConfig::build`] through
//! [`RateLimitLayer::builder`], so that every refusal is the builder's own [`BuildError`]; and
//! reloaded at run time by a [`Reloader`] (`config/reload.rs`).
//!
//! What a file can name: quotas (the default and per route) with their algorithms, the key (global, peer IP, client
//! IP behind trusted proxies, a header), network allow and deny lists (the layer's and per
//! policy), shadow mode, the limiters' key cap, sweeper and full-table policy, and the response
//! settings (header style, shaping, key-error answer, never status, gRPC). Closures (costs, key
//! and request rules, refunds) and limiters you made stay in code. Every struct refuses unknown
//! fields, so that a misspelt setting is an error rather than a limit silently left out.

use std::fmt;
use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{HeaderName, StatusCode};
use serde::{Deserialize, Serialize};

use super::access::AccessList;
// The builder's methods are what the fields' docs point to.
#[cfg(doc)]
use super::builder::RateLimitLayerBuilder;
use super::error::BuildError;
use super::key::client_ip::{ClientIp, ForwardedHeader, IpNet, PeerIp};
use super::key::{AddrSource, GlobalKey, HeaderKey, KeyError, KeyExtractor};
use super::responses::headers::HeaderStyle;
use super::state::{Backends, OnKeyError, RateLimitLayer};
use crate::Quota;

mod algorithm;
mod reload;
mod text;

pub use algorithm::{AlgorithmConfig, ConfigLimiter};
pub use reload::{Change, ReloadError, ReloadableLayer, Reloader, Reloading};

/// The layer a [`LayerConfig`] builds: in-process limiters keyed by [`ConfigKey`], each
/// running the algorithm its policy names ([`ConfigLimiter`]).
///
/// ```
/// use tollgate::http::{ConfigLayer, LayerConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     default = { count = 100, per = "minute" }
///     routes = [{ name = "login", pattern = "POST /login", quota = { count = 5, per = "minute" } }]
/// "#).unwrap();
/// let layer: ConfigLayer = config.build().unwrap();
/// let names: Vec<&str> = layer.policies().map(|(name, _)| name).collect();
/// assert_eq!(names, ["login", "default"]); // routes first, as they are tried
/// ```
pub type ConfigLayer = RateLimitLayer<Backends<ConfigLimiter>>;

/// A key of a layer built from a [`LayerConfig`]: one type whichever source the file names.
///
/// ```
/// use tollgate::http::{ConfigKey, LayerConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "header", name = "x-api-key" }
///     default = { count = 1, per = "hour" }
/// "#).unwrap();
/// let layer = config.build().unwrap();
/// let limiter = layer.limiter("default").unwrap();
/// // A header-keyed layer counts `ConfigKey::Header` keys, each on its own.
/// assert!(limiter.try_acquire(&ConfigKey::Header("k-1".into())));
/// assert!(!limiter.try_acquire(&ConfigKey::Header("k-1".into())));
/// assert!(limiter.try_acquire(&ConfigKey::Header("k-2".into())));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConfigKey {
    /// Every request shares one limit (`source = "global"`).
    Global,
    /// The client's address (`peer_ip`, `client_ip`; IPv6 by prefix).
    Ip(IpAddr),
    /// A header's value (`header`).
    Header(String),
}

/// A layer's whole configuration, as read from a file: see the guide's "Configuration files"
/// for TOML and YAML examples. Every table refuses unknown fields.
///
/// ```
/// use tollgate::http::LayerConfig;
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "peer_ip" }
///     default = { count = 100, per = "minute" }
///     routes = [{ name = "login", pattern = "POST /login", quota = { count = 5, per = "minute" } }]
/// "#).unwrap();
/// let layer = config.build().unwrap();
/// assert!(layer.limiter("login").is_some());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerConfig {
    /// What requests are keyed by (default: one global key).
    #[serde(default)]
    pub key: KeyConfig,
    /// The limit of requests no route matches (none without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<QuotaConfig>,
    /// The default policy's name in headers (default `"default"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_name: Option<String>,
    /// Routes with their own limits, tried in order (the first match wins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteConfig>,
    /// The settings of the limiters made from the quotas.
    #[serde(default)]
    pub limiters: LimiterConfig,
    /// The layer's network allow and deny lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessConfig>,
    /// Shadow mode: policies that decide and count but never refuse.
    #[serde(default)]
    pub shadow: ShadowConfig,
    /// What limited requests get.
    #[serde(default)]
    pub responses: ResponseConfig,
}

/// What requests are keyed by: `source` names the extractor, the other fields are its own.
///
/// ```
/// use tollgate::http::{ForwardedConfig, KeyConfig, LayerConfig, Trust};
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "client_ip", trust = { hops = 1 }, ipv6_prefix = 56 }
/// "#).unwrap();
/// assert_eq!(config.key, KeyConfig::ClientIp {
///     trust: Trust::Hops(1),
///     header: ForwardedConfig::XForwardedFor,
///     ipv6_prefix: Some(56),
///     ipv4_prefix: None,
/// });
/// assert_eq!(LayerConfig::default().key, KeyConfig::Global);
/// assert!(toml::from_str::<LayerConfig>("key = { source = 'cookie' }").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyConfig {
    /// One key for every request ([`GlobalKey`]).
    #[default]
    Global,
    /// The TCP peer's address ([`PeerIp`]).
    PeerIp {
        /// The IPv6 prefix a client is keyed by (default 64).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ipv6_prefix: Option<u8>,
        /// The IPv4 prefix a client is keyed by (default 32).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ipv4_prefix: Option<u8>,
    },
    /// The client behind proxies you trust, read from the right ([`ClientIp`]).
    ClientIp {
        /// Which proxies are trusted: `{ proxies = ["10.0.0.0/8"] }` or `{ hops = 1 }`.
        trust: Trust,
        /// The forwarding header (default `x_forwarded_for`).
        #[serde(default)]
        header: ForwardedConfig,
        /// The IPv6 prefix a client is keyed by (default 64).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ipv6_prefix: Option<u8>,
        /// The IPv4 prefix a client is keyed by (default 32).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ipv4_prefix: Option<u8>,
    },
    /// A header's value, say an API key ([`HeaderKey`]).
    Header {
        /// The header's name (parsed as an HTTP header name).
        #[serde(with = "text::header_name")]
        name: HeaderName,
        /// The longest value accepted as a key (default: [`HeaderKey`]'s).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_len: Option<usize>,
    },
}

/// Which proxies [`ClientIp`] trusts.
///
/// ```
/// use tollgate::http::{KeyConfig, LayerConfig, Trust};
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "client_ip", trust = { proxies = ["10.0.0.0/8", "2001:db8::/32"] } }
/// "#).unwrap();
/// let KeyConfig::ClientIp { trust, .. } = config.key else { unreachable!() };
/// assert_eq!(trust, Trust::Proxies(vec!["10.0.0.0/8".parse().unwrap(), "2001:db8::/32".parse().unwrap()]));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Trust {
    /// Peers in these networks ([`ClientIp::trusted_proxies`]).
    Proxies(#[serde(with = "text::nets")] Vec<IpNet>),
    /// This many proxies in front of the server ([`ClientIp::trusted_hops`]).
    Hops(usize),
}

/// The forwarding header [`ClientIp`] reads ([`ForwardedHeader`]).
///
/// ```
/// use tollgate::http::{ForwardedConfig, KeyConfig, LayerConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "client_ip", trust = { hops = 1 }, header = "cf_connecting_ip" }
/// "#).unwrap();
/// let KeyConfig::ClientIp { header, .. } = config.key else { unreachable!() };
/// assert_eq!(header, ForwardedConfig::CfConnectingIp);
/// assert_eq!(ForwardedConfig::default(), ForwardedConfig::XForwardedFor);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForwardedConfig {
    /// `X-Forwarded-For`.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded`.
    Forwarded,
    /// Cloudflare's `CF-Connecting-IP`.
    CfConnectingIp,
    /// `True-Client-IP`.
    TrueClientIp,
}

/// A quota as people say it: `{ count = 100, per = "minute" }`, with an optional `burst`
/// (default `count`) and an optional `algorithm` (default GCRA; see [`AlgorithmConfig`]):
/// `{ count = 100, per = "minute", algorithm = "sliding_log" }`. Checked by
/// [`build`](LayerConfig::build) as [`Quota`] and the limiter's builder check it
/// ([`BuildError::Quota`]).
///
/// ```
/// use tollgate::http::{AlgorithmConfig, Per, QuotaConfig};
///
/// let q: QuotaConfig = toml::from_str("count = 100\nper = 'minute'\nburst = 20").unwrap();
/// assert_eq!(q, QuotaConfig { count: 100, per: Per::Minute, burst: Some(20), algorithm: AlgorithmConfig::Gcra });
/// assert_eq!(q.to_string(), "100/minute (burst 20)");
/// assert!(toml::from_str::<QuotaConfig>("count = 100\nper = 'minute'\nbrust = 20").is_err()); // misspelt
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Requests per period.
    pub count: u64,
    /// The period.
    pub per: Per,
    /// The most requests at once (default `count`; the window algorithms take only `count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// The algorithm (default GCRA, left out when written).
    #[serde(default, skip_serializing_if = "AlgorithmConfig::is_gcra")]
    pub algorithm: AlgorithmConfig,
}

/// The period of a [`QuotaConfig`].
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::{Per, QuotaConfig};
///
/// let q: QuotaConfig = toml::from_str("count = 24\nper = 'day'").unwrap();
/// assert_eq!(q.per, Per::Day);
/// assert_eq!(q.quota().unwrap().interval(), Duration::from_secs(3_600)); // one an hour
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    /// One second.
    Second,
    /// One minute.
    Minute,
    /// One hour.
    Hour,
    /// One day.
    Day,
}

impl QuotaConfig {
    /// The quota, as [`Quota::new`] and [`Quota::with_burst`] check it (the algorithm's own
    /// checks come when its limiter is built).
    ///
    /// # Errors
    /// [`BuildError::Quota`] for a count or burst of 0, or a rate too fine for nanoseconds.
    ///
    /// ```
    /// use tollgate::http::{AlgorithmConfig, Per, QuotaConfig};
    /// let algorithm = AlgorithmConfig::Gcra;
    /// let q = QuotaConfig { count: 60, per: Per::Minute, burst: Some(10), algorithm }.quota().unwrap();
    /// assert_eq!((q.count(), q.burst()), (60, 10));
    /// ```
    pub fn quota(&self) -> Result<Quota, BuildError> {
        let secs = match self.per {
            Per::Second => 1,
            Per::Minute => 60,
            Per::Hour => 3_600,
            Per::Day => 86_400,
        };
        let q = Quota::new(self.count, Duration::from_secs(secs)).map_err(BuildError::Quota)?;
        Ok(match self.burst {
            Some(burst) => q.with_burst(burst).map_err(BuildError::Quota)?,
            None => q,
        })
    }

    /// A limiter for this quota and algorithm, with the file's limiter settings, named
    /// `name` (its policy's), as the builder makes one.
    fn limiter(
        &self,
        settings: &LimiterConfig,
        name: &str,
    ) -> Result<Arc<ConfigLimiter>, BuildError> {
        let limiter = self.algorithm.limiter(self.quota()?, settings, name)?;
        Ok(Arc::new(limiter))
    }
}

/// A route with its own limit ([`RateLimitLayerBuilder::route`]).
///
/// ```
/// use tollgate::http::{LayerConfig, RouteConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "peer_ip" }
///     [[routes]]
///     name = "search"
///     pattern = "GET /search/{*rest}"
///     quota = { count = 30, per = "minute" }
///     access = { deny_networks = ["192.0.2.0/24"] }
/// "#).unwrap();
/// let route: &RouteConfig = &config.routes[0];
/// assert_eq!((route.name.as_str(), route.quota.count), ("search", 30));
/// let layer = config.build().unwrap();
/// assert_eq!(layer.limiter("search").unwrap().quota().count(), 30);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The policy's name (in headers, stats and shadow settings).
    pub name: String,
    /// `"METHOD /path"` or `"/path"`, in axum 0.8's syntax.
    pub pattern: String,
    /// The route's quota.
    pub quota: QuotaConfig,
    /// Network lists of this policy alone ([`RateLimitLayerBuilder::policy_access`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessConfig>,
}

/// The settings of the limiters made from the quotas (see [`RateLimitLayerBuilder::max_keys`]
/// and its neighbours). A file cannot lift the key cap: that stays in code.
///
/// ```
/// use std::num::NonZeroUsize;
/// use tollgate::http::{ConfigLimiter, LayerConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     default = { count = 10, per = "second" }
///     limiters = { max_keys = 50000, sweep_interval_ms = 30000 }
/// "#).unwrap();
/// assert_eq!(config.limiters.max_keys, NonZeroUsize::new(50_000));
/// let layer = config.build().unwrap();
/// let ConfigLimiter::Gcra(limiter) = &**layer.limiter("default").unwrap() else { unreachable!() };
/// assert_eq!(limiter.max_keys(), NonZeroUsize::new(50_000));
/// assert!(toml::from_str::<LayerConfig>("limiters = { max_keys = 0 }").is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimiterConfig {
    /// The most keys each limiter tracks (default [`DEFAULT_MAX_KEYS`](super::DEFAULT_MAX_KEYS);
    /// 0 is refused when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_keys: Option<NonZeroUsize>,
    /// How often idle keys are swept, in milliseconds (default
    /// [`DEFAULT_SWEEP_INTERVAL`](super::DEFAULT_SWEEP_INTERVAL)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_interval_ms: Option<u64>,
    /// What a new key gets at the cap (default `deny`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_full: Option<WhenFullConfig>,
}

/// [`WhenFull`](crate::WhenFull) in a file.
///
/// ```
/// use tollgate::http::{ConfigKey, LayerConfig, WhenFullConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "header", name = "x-api-key" }
///     default = { count = 1, per = "hour" }
///     limiters = { max_keys = 1, when_full = "allow_untracked" }
/// "#).unwrap();
/// assert_eq!(config.limiters.when_full, Some(WhenFullConfig::AllowUntracked));
/// let layer = config.build().unwrap();
/// let limiter = layer.limiter("default").unwrap();
/// assert!(limiter.try_acquire(&ConfigKey::Header("a".into())));
/// assert!(limiter.try_acquire(&ConfigKey::Header("b".into()))); // the table is full: untracked
/// assert_eq!(limiter.len(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFullConfig {
    /// [`WhenFull::Deny`](crate::WhenFull::Deny).
    Deny,
    /// [`WhenFull::AllowUntracked`](crate::WhenFull::AllowUntracked).
    AllowUntracked,
}

/// Network allow and deny lists ([`AccessList`]); deny wins over allow.
///
/// ```
/// use tollgate::http::{AccessConfig, BuildError, LayerConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     key = { source = "peer_ip" }
///     default = { count = 10, per = "second" }
///     access = { allow_networks = ["10.0.0.0/8"], deny_networks = ["192.0.2.0/24"] }
/// "#).unwrap();
/// let access: &AccessConfig = config.access.as_ref().unwrap();
/// assert_eq!(access.deny_networks, ["192.0.2.0/24".parse().unwrap()]);
/// assert!(config.build().is_ok());
///
/// // An allow list of every address must be confirmed.
/// let everyone: LayerConfig = toml::from_str(r#"
///     key = { source = "peer_ip" }
///     access = { allow_networks = ["0.0.0.0/0"] }
/// "#).unwrap();
/// assert_eq!(everyone.build().unwrap_err(), BuildError::AllowsEveryAddress("the layer".into()));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// Networks that bypass every limit.
    #[serde(default, with = "text::nets", skip_serializing_if = "Vec::is_empty")]
    pub allow_networks: Vec<IpNet>,
    /// Networks answered `403`.
    #[serde(default, with = "text::nets", skip_serializing_if = "Vec::is_empty")]
    pub deny_networks: Vec<IpNet>,
    /// Accepts an allow list of every address ([`AccessList::confirm_allow_all`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub confirm_allow_all: bool,
}

/// Shadow mode ([`RateLimitLayerBuilder::shadow`] and neighbours).
///
/// ```
/// use tollgate::http::{Enforcement, LayerConfig};
///
/// let config: LayerConfig = toml::from_str(r#"
///     default = { count = 100, per = "minute" }
///     routes = [{ name = "login", pattern = "POST /login", quota = { count = 5, per = "minute" } }]
///     shadow = { policies = ["login"], headers = true }
/// "#).unwrap();
/// let layer = config.build().unwrap();
/// assert_eq!(layer.enforcement("login"), Some(Enforcement::Shadow));
/// assert_eq!(layer.enforcement("default"), Some(Enforcement::Enforce));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowConfig {
    /// Every policy in shadow.
    #[serde(default, skip_serializing_if = "is_false")]
    pub all: bool,
    /// These policies in shadow (each must name a policy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
    /// Send the rate-limit headers in shadow too.
    #[serde(default, skip_serializing_if = "is_false")]
    pub headers: bool,
}

/// What limited requests get.
///
/// ```
/// use tollgate::http::{HeaderConfig, KeyErrorConfig, LayerConfig, StatusCode};
///
/// let config: LayerConfig = toml::from_str(r#"
///     default = { count = 100, per = "minute" }
///     responses = { headers = "legacy", shape_max_delay_ms = 250, never_status = 413 }
/// "#).unwrap();
/// let r = config.responses;
/// assert_eq!((r.headers, r.shape_max_delay_ms), (HeaderConfig::Legacy, Some(250)));
/// assert_eq!(r.never_status, Some(StatusCode::PAYLOAD_TOO_LARGE));
/// assert_eq!(r.on_key_error, KeyErrorConfig::Reject); // left out: the defaults
/// assert!(r.grpc);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseConfig {
    /// Which rate-limit headers (default `ietf`).
    #[serde(default)]
    pub headers: HeaderConfig,
    /// Shape: wait up to this many milliseconds for the permits ([`RateLimitLayerBuilder::shape`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape_max_delay_ms: Option<u64>,
    /// What a request without a usable key gets: `"reject"`, `"allow"` or `{ status = 401 }`.
    #[serde(default)]
    pub on_key_error: KeyErrorConfig,
    /// The status of a request that can never pass (default 429).
    #[serde(
        default,
        with = "text::status",
        skip_serializing_if = "Option::is_none"
    )]
    pub never_status: Option<StatusCode>,
    /// gRPC statuses for gRPC calls (default `true`).
    #[serde(default = "yes")]
    pub grpc: bool,
}

impl Default for ResponseConfig {
    fn default() -> Self {
        ResponseConfig {
            headers: HeaderConfig::default(),
            shape_max_delay_ms: None,
            on_key_error: KeyErrorConfig::default(),
            never_status: None,
            grpc: true,
        }
    }
}

/// [`HeaderStyle`] in a file.
///
/// ```
/// use tollgate::http::{HeaderConfig, LayerConfig};
///
/// let config: LayerConfig = toml::from_str("responses = { headers = 'x_rate_limit' }").unwrap();
/// assert_eq!(config.responses.headers, HeaderConfig::XRateLimit);
/// assert_eq!(HeaderConfig::default(), HeaderConfig::Ietf);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderConfig {
    /// [`HeaderStyle::Ietf`].
    #[default]
    Ietf,
    /// [`HeaderStyle::Legacy`].
    Legacy,
    /// [`HeaderStyle::XRateLimit`].
    XRateLimit,
    /// [`HeaderStyle::None`].
    None,
}

/// [`OnKeyError`] in a file.
///
/// ```
/// use tollgate::http::{KeyErrorConfig, LayerConfig, StatusCode};
///
/// let config: LayerConfig = toml::from_str("responses = { on_key_error = { status = 401 } }").unwrap();
/// assert_eq!(config.responses.on_key_error, KeyErrorConfig::Status(StatusCode::UNAUTHORIZED));
/// let config: LayerConfig = toml::from_str("responses = { on_key_error = 'allow' }").unwrap();
/// assert_eq!(config.responses.on_key_error, KeyErrorConfig::Allow);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyErrorConfig {
    /// [`OnKeyError::Reject`].
    #[default]
    Reject,
    /// [`OnKeyError::Allow`].
    Allow,
    /// [`OnKeyError::Status`].
    Status(#[serde(with = "text::status_code")] StatusCode),
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn yes() -> bool {
    true
}

impl LayerConfig {
    /// Makes the layer through [`RateLimitLayer::builder`].
    ///
    /// # Errors
    /// The builder's [`BuildError`]: a bad quota or route pattern, a policy name that is not
    /// one (or named twice where it must not be), lists that cannot work, shadow or access
    /// settings naming no policy.
    ///
    /// ```
    /// use tollgate::http::{BuildError, LayerConfig};
    /// let config: LayerConfig =
    ///     toml::from_str("shadow = { policies = ['nope'] }\ndefault = { count = 1, per = 'second' }").unwrap();
    /// assert_eq!(config.build().unwrap_err(), BuildError::UnknownPolicy("nope".into()));
    /// ```
    pub fn build(&self) -> Result<ConfigLayer, BuildError> {
        self.build_with(|_, _, _| None)
    }

    /// [`build`](Self::build), with the limiter `reuse(name, is_default, quota)` gives for a
    /// policy (kept as it is: its quota is the caller's to set), or a new one where it gives
    /// none.
    fn build_with(
        &self,
        mut reuse: impl FnMut(&str, bool, &QuotaConfig) -> Option<Arc<ConfigLimiter>>,
    ) -> Result<ConfigLayer, BuildError> {
        // Every limiter is made here rather than by the builder, which makes only GCRA ones
        // from quotas; the builder still checks each (its key bound) as any limiter given.
        let mut b = RateLimitLayer::with_limiters(ConfigExtractor::new(&self.key));
        if let Some(q) = &self.default {
            let name = self.policy_name.as_deref().unwrap_or("default");
            let limiter = match reuse(name, true, q) {
                Some(limiter) => limiter,
                None => q.limiter(&self.limiters, name)?,
            };
            b = b.limiter(limiter);
        }
        if let Some(name) = &self.policy_name {
            b = b.policy_name(name);
        }
        for r in &self.routes {
            let limiter = match reuse(&r.name, false, &r.quota) {
                Some(limiter) => limiter,
                None => r.quota.limiter(&self.limiters, &r.name)?,
            };
            b = b.route_limiter(&r.name, &r.pattern, limiter);
            if let Some(a) = &r.access {
                b = b.policy_access(&r.name, a.lists());
            }
        }
        if let Some(a) = &self.access {
            b = b.access(a.lists());
        }
        if self.shadow.all {
            b = b.shadow();
        }
        for name in &self.shadow.policies {
            b = b.shadow_policy(name);
        }
        let r = &self.responses;
        b = b
            .shadow_headers(self.shadow.headers)
            .headers(r.headers.style())
            .on_key_error(r.on_key_error.policy())
            .grpc(r.grpc);
        if let Some(ms) = r.shape_max_delay_ms {
            b = b.shape(Duration::from_millis(ms));
        }
        if let Some(status) = r.never_status {
            b = b.never_status(status);
        }
        b.build()
    }

    /// The policies' names and quotas in the layer's table order (routes, then the default),
    /// as [`ConfigLayer::policies`](RateLimitLayer::policies) lists them.
    fn quotas(&self) -> impl Iterator<Item = (&str, &QuotaConfig)> {
        let default = self.default.as_ref().map(|q| {
            let name = self.policy_name.as_deref().unwrap_or("default");
            (name, q)
        });
        self.routes
            .iter()
            .map(|r| (r.name.as_str(), &r.quota))
            .chain(default)
    }
}

impl AccessConfig {
    fn lists(&self) -> AccessList<ConfigKey> {
        let mut lists = AccessList::new()
            .allow_networks(self.allow_networks.iter().copied())
            .deny_networks(self.deny_networks.iter().copied());
        if self.confirm_allow_all {
            lists = lists.confirm_allow_all();
        }
        lists
    }
}

impl HeaderConfig {
    fn style(self) -> HeaderStyle {
        match self {
            HeaderConfig::Ietf => HeaderStyle::Ietf,
            HeaderConfig::Legacy => HeaderStyle::Legacy,
            HeaderConfig::XRateLimit => HeaderStyle::XRateLimit,
            HeaderConfig::None => HeaderStyle::None,
        }
    }
}

impl KeyErrorConfig {
    fn policy(self) -> OnKeyError {
        match self {
            KeyErrorConfig::Reject => OnKeyError::Reject,
            KeyErrorConfig::Allow => OnKeyError::Allow,
            KeyErrorConfig::Status(s) => OnKeyError::Status(s),
        }
    }
}

/// The extractor a [`KeyConfig`] names, its key made a [`ConfigKey`].
enum ConfigExtractor {
    Global,
    Peer(PeerIp),
    Client(ClientIp),
    Header(HeaderKey),
}

impl ConfigExtractor {
    fn new(key: &KeyConfig) -> Self {
        match key {
            KeyConfig::Global => ConfigExtractor::Global,
            KeyConfig::PeerIp {
                ipv6_prefix,
                ipv4_prefix,
            } => {
                let mut e = PeerIp::new();
                if let Some(bits) = ipv6_prefix {
                    e = e.ipv6_prefix(*bits);
                }
                if let Some(bits) = ipv4_prefix {
                    e = e.ipv4_prefix(*bits);
                }
                ConfigExtractor::Peer(e)
            }
            KeyConfig::ClientIp {
                trust,
                header,
                ipv6_prefix,
                ipv4_prefix,
            } => {
                let mut e = match trust {
                    Trust::Proxies(nets) => ClientIp::trusted_proxies(nets.iter().copied()),
                    Trust::Hops(n) => ClientIp::trusted_hops(*n),
                };
                e = e.header(match header {
                    ForwardedConfig::XForwardedFor => ForwardedHeader::XForwardedFor,
                    ForwardedConfig::Forwarded => ForwardedHeader::Forwarded,
                    ForwardedConfig::CfConnectingIp => ForwardedHeader::CfConnectingIp,
                    ForwardedConfig::TrueClientIp => ForwardedHeader::TrueClientIp,
                });
                if let Some(bits) = ipv6_prefix {
                    e = e.ipv6_prefix(*bits);
                }
                if let Some(bits) = ipv4_prefix {
                    e = e.ipv4_prefix(*bits);
                }
                ConfigExtractor::Client(e)
            }
            KeyConfig::Header { name, max_len } => {
                let h = HeaderKey::new(name.clone());
                ConfigExtractor::Header(match max_len {
                    Some(n) => h.max_len(*n),
                    None => h,
                })
            }
        }
    }
}

impl KeyExtractor for ConfigExtractor {
    type Key = ConfigKey;

    fn extract(&self, req: &Parts) -> Result<ConfigKey, KeyError> {
        match self {
            ConfigExtractor::Global => GlobalKey.extract(req).map(|()| ConfigKey::Global),
            ConfigExtractor::Peer(e) => e.extract(req).map(ConfigKey::Ip),
            ConfigExtractor::Client(e) => e.extract(req).map(ConfigKey::Ip),
            ConfigExtractor::Header(e) => e.extract(req).map(ConfigKey::Header),
        }
    }

    fn addr_source(&self) -> Option<&dyn AddrSource> {
        match self {
            ConfigExtractor::Peer(e) => e.addr_source(),
            ConfigExtractor::Client(e) => e.addr_source(),
            ConfigExtractor::Global | ConfigExtractor::Header(_) => None,
        }
    }
}

impl fmt::Display for QuotaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = match self.per {
            Per::Second => "second",
            Per::Minute => "minute",
            Per::Hour => "hour",
            Per::Day => "day",
        };
        write!(f, "{}/{per}", self.count)?;
        if let Some(b) = self.burst {
            write!(f, " (burst {b})")?;
        }
        if self.algorithm.is_gcra() {
            return Ok(());
        }
        write!(f, ", {}", self.algorithm)
    }
}

#[cfg(test)]
mod tests;
