//! The algorithm of a policy in a file ([`AlgorithmConfig`]) and the one limiter type that runs
//! any of them behind a config layer ([`ConfigLimiter`]).

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use serde::de::{self, IgnoredAny, IntoDeserializer, MapAccess, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::super::builder::LimiterSettings;
use super::super::error::BuildError;
use super::super::rate::backend::{Answer, Backend};
use super::{ConfigKey, LimiterConfig, WhenFullConfig};
use crate::{
    Algorithm, Decision, FixedWindow, KeyedRateLimiter, Quota, QuotaError, SlidingLog,
    SlidingWindow, WeightedWindow, WhenFull,
};

/// The algorithm a policy runs (see the guide's "Choosing an algorithm"). Default: GCRA.
///
/// In a file, an algorithm without parameters is its name, and one with parameters is a
/// one-entry table from its name to them (serde's usual form for an enum):
/// `algorithm = "sliding_log"`, `algorithm = { sliding_window = { sub_windows = 10 } }`,
/// `algorithm = { fixed_window = { epoch_aligned = true } }`. Where every parameter has a
/// default the name alone is accepted too (`"fixed_window"`), so the common case reads as a
/// word; `"sliding_window"` alone is refused, since it has no sensible default count. Unknown
/// names and parameters are refused when read, with the names expected; values the algorithm
/// cannot run (a sub-window count outside `2..=64`, a burst other than the count for a window
/// algorithm) are refused by [`LayerConfig::build`](super::LayerConfig::build) as the
/// limiter's builder refuses them ([`BuildError::Quota`]).
///
/// ```
/// use tollgate::http::{AlgorithmConfig, QuotaConfig};
///
/// let q: QuotaConfig =
///     toml::from_str("count = 100\nper = 'minute'\nalgorithm = { sliding_window = { sub_windows = 10 } }")
///         .unwrap();
/// assert_eq!(q.algorithm, AlgorithmConfig::SlidingWindow { sub_windows: 10 });
/// let q: QuotaConfig = toml::from_str("count = 100\nper = 'minute'").unwrap();
/// assert_eq!(q.algorithm, AlgorithmConfig::Gcra);
/// let err = toml::from_str::<QuotaConfig>("count = 1\nper = 'minute'\nalgorithm = 'token_bucket'")
///     .unwrap_err();
/// assert!(err.message().contains("unknown variant `token_bucket`"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AlgorithmConfig {
    /// [`Gcra`](crate::Gcra): `"gcra"`.
    #[default]
    Gcra,
    /// [`FixedWindow`]: `"fixed_window"`, or `{ fixed_window = { epoch_aligned = true } }`.
    FixedWindow {
        /// Windows aligned on the Unix epoch ([`FixedWindow::epoch_aligned`]) rather than
        /// on the limiter's start ([`FixedWindow::new`]). Default `false`.
        epoch_aligned: bool,
    },
    /// [`SlidingWindow`]: `{ sliding_window = { sub_windows = 10 } }`.
    SlidingWindow {
        /// The number of sub-windows ([`SlidingWindow::new`]).
        sub_windows: u32,
    },
    /// [`SlidingLog`]: `"sliding_log"`.
    SlidingLog,
    /// [`WeightedWindow`]: `"weighted_window"`.
    WeightedWindow,
}

impl AlgorithmConfig {
    /// Whether this is GCRA, the default (left out when written).
    ///
    /// ```
    /// use tollgate::http::{AlgorithmConfig, QuotaConfig};
    ///
    /// assert!(AlgorithmConfig::default().is_gcra());
    /// assert!(!AlgorithmConfig::SlidingLog.is_gcra());
    /// let q: QuotaConfig = toml::from_str("count = 5\nper = 'second'\nalgorithm = 'gcra'").unwrap();
    /// assert!(!toml::to_string(&q).unwrap().contains("algorithm"));
    /// ```
    #[must_use]
    pub fn is_gcra(&self) -> bool {
        matches!(self, AlgorithmConfig::Gcra)
    }

    /// A limiter for `quota` running this algorithm, with the file's limiter settings (each
    /// left out one at the layer builder's default, as the builder makes its own), named
    /// after its policy.
    pub(super) fn limiter(
        self,
        quota: Quota,
        settings: &LimiterConfig,
        name: &str,
    ) -> Result<ConfigLimiter, BuildError> {
        Ok(match self {
            AlgorithmConfig::Gcra => {
                ConfigLimiter::Gcra(keyed(quota, crate::Gcra, settings, name)?)
            }
            AlgorithmConfig::FixedWindow { epoch_aligned } => {
                let alg = if epoch_aligned {
                    FixedWindow::epoch_aligned()
                } else {
                    FixedWindow::new()
                };
                ConfigLimiter::FixedWindow {
                    limiter: keyed(quota, alg, settings, name)?,
                    epoch_aligned,
                }
            }
            AlgorithmConfig::SlidingWindow { sub_windows } => ConfigLimiter::SlidingWindow {
                limiter: keyed(quota, SlidingWindow::new(sub_windows), settings, name)?,
                sub_windows,
            },
            AlgorithmConfig::SlidingLog => {
                ConfigLimiter::SlidingLog(keyed(quota, SlidingLog, settings, name)?)
            }
            AlgorithmConfig::WeightedWindow => {
                ConfigLimiter::WeightedWindow(keyed(quota, WeightedWindow, settings, name)?)
            }
        })
    }
}

/// A limiter for `quota` running `alg`, made as the layer builder makes its own
/// ([`LimiterSettings`]), with the file's settings.
fn keyed<A: Algorithm>(
    quota: Quota,
    alg: A,
    s: &LimiterConfig,
    name: &str,
) -> Result<KeyedRateLimiter<ConfigKey, A>, BuildError> {
    let settings = LimiterSettings::of_file(
        s.sweep_interval_ms.map(Duration::from_millis),
        s.max_keys,
        s.when_full.map(|w| match w {
            WhenFullConfig::Deny => WhenFull::Deny,
            WhenFullConfig::AllowUntracked => WhenFull::AllowUntracked,
        }),
    );
    let b = KeyedRateLimiter::builder(quota)
        .algorithm(alg)
        .map_err(BuildError::Quota)?;
    Ok(settings.apply(b, name).build())
}

impl fmt::Display for AlgorithmConfig {
    /// The file's name, with the parameters: `sliding_window (10 sub-windows)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlgorithmConfig::Gcra => f.write_str("gcra"),
            AlgorithmConfig::FixedWindow {
                epoch_aligned: false,
            } => f.write_str("fixed_window"),
            AlgorithmConfig::FixedWindow {
                epoch_aligned: true,
            } => f.write_str("fixed_window (epoch aligned)"),
            AlgorithmConfig::SlidingWindow { sub_windows } => {
                write!(f, "sliding_window ({sub_windows} sub-windows)")
            }
            AlgorithmConfig::SlidingLog => f.write_str("sliding_log"),
            AlgorithmConfig::WeightedWindow => f.write_str("weighted_window"),
        }
    }
}

/// The algorithms' names in a file.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Name {
    Gcra,
    FixedWindow,
    SlidingWindow,
    SlidingLog,
    WeightedWindow,
}

/// The parameters of an algorithm that has none: `{}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedParams {
    #[serde(default)]
    epoch_aligned: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SlidingParams {
    sub_windows: u32,
}

/// The algorithms with parameters, as written: a one-entry table (serde's form of an enum).
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Written {
    FixedWindow { epoch_aligned: bool },
    SlidingWindow { sub_windows: u32 },
}

impl Serialize for AlgorithmConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            AlgorithmConfig::Gcra => s.serialize_str("gcra"),
            AlgorithmConfig::FixedWindow {
                epoch_aligned: false,
            } => s.serialize_str("fixed_window"),
            AlgorithmConfig::SlidingLog => s.serialize_str("sliding_log"),
            AlgorithmConfig::WeightedWindow => s.serialize_str("weighted_window"),
            AlgorithmConfig::FixedWindow {
                epoch_aligned: true,
            } => Written::FixedWindow {
                epoch_aligned: true,
            }
            .serialize(s),
            AlgorithmConfig::SlidingWindow { sub_windows } => {
                Written::SlidingWindow { sub_windows }.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for AlgorithmConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AlgorithmVisitor)
    }
}

struct AlgorithmVisitor;

impl<'de> Visitor<'de> for AlgorithmVisitor {
    type Value = AlgorithmConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "an algorithm: a name such as \"sliding_log\", or one name with its parameters \
             such as { sliding_window = { sub_windows = 10 } }",
        )
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<AlgorithmConfig, E> {
        let name = Name::deserialize(text.into_deserializer())?;
        Ok(match name {
            Name::Gcra => AlgorithmConfig::Gcra,
            Name::FixedWindow => AlgorithmConfig::FixedWindow {
                epoch_aligned: false,
            },
            Name::SlidingWindow => {
                return Err(E::invalid_value(
                    Unexpected::Str(text),
                    &"sliding_window with its number of sub-windows: \
                      { sliding_window = { sub_windows = 10 } }",
                ))
            }
            Name::SlidingLog => AlgorithmConfig::SlidingLog,
            Name::WeightedWindow => AlgorithmConfig::WeightedWindow,
        })
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<AlgorithmConfig, M::Error> {
        let one = "one algorithm: a table with a single name";
        let Some(name) = map.next_key::<Name>()? else {
            return Err(de::Error::invalid_length(0, &one));
        };
        let alg = match name {
            Name::Gcra => map
                .next_value::<NoParams>()
                .map(|_| AlgorithmConfig::Gcra)?,
            Name::FixedWindow => {
                let p: FixedParams = map.next_value()?;
                AlgorithmConfig::FixedWindow {
                    epoch_aligned: p.epoch_aligned,
                }
            }
            Name::SlidingWindow => {
                let p: SlidingParams = map.next_value()?;
                AlgorithmConfig::SlidingWindow {
                    sub_windows: p.sub_windows,
                }
            }
            Name::SlidingLog => map
                .next_value::<NoParams>()
                .map(|_| AlgorithmConfig::SlidingLog)?,
            Name::WeightedWindow => map
                .next_value::<NoParams>()
                .map(|_| AlgorithmConfig::WeightedWindow)?,
        };
        if map.next_key::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(2, &one));
        }
        Ok(alg)
    }
}

/// The limiter of every policy of a config layer ([`ConfigLayer`](super::ConfigLayer)): an
/// in-process [`KeyedRateLimiter`] keyed by [`ConfigKey`], running the algorithm its policy
/// names ([`AlgorithmConfig`]). It implements the layer's [`Backend`] by handing each call to
/// the limiter it holds (decided at once, without allocating); the methods below are the
/// limiter's own, for monitoring and tests. Match on it for the rest of a limiter's methods
/// (the variants with parameters are matched with `..`: `ConfigLimiter::FixedWindow { limiter,
/// .. }`).
///
/// ```
/// use tollgate::http::{AlgorithmConfig, ConfigKey, ConfigLimiter, LayerConfig};
///
/// let config: LayerConfig =
///     toml::from_str("default = { count = 2, per = 'minute', algorithm = 'sliding_log' }").unwrap();
/// let layer = config.build().unwrap();
/// let limiter = layer.limiter("default").unwrap();
/// assert_eq!(limiter.algorithm(), AlgorithmConfig::SlidingLog);
/// assert!(limiter.try_acquire(&ConfigKey::Global));
/// assert_eq!(limiter.check(&ConfigKey::Global).remaining, 0);
/// assert!(!limiter.try_acquire(&ConfigKey::Global));
/// if let ConfigLimiter::SlidingLog(log) = &**limiter {
///     assert_eq!(log.len(), 1);
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigLimiter {
    /// GCRA (the default).
    Gcra(KeyedRateLimiter<ConfigKey>),
    /// A fixed window.
    #[non_exhaustive]
    FixedWindow {
        /// The limiter.
        limiter: KeyedRateLimiter<ConfigKey, FixedWindow>,
        /// Whether its windows are aligned on the Unix epoch.
        epoch_aligned: bool,
    },
    /// A sliding window of sub-windows.
    #[non_exhaustive]
    SlidingWindow {
        /// The limiter.
        limiter: KeyedRateLimiter<ConfigKey, SlidingWindow>,
        /// Its number of sub-windows.
        sub_windows: u32,
    },
    /// A sliding log.
    SlidingLog(KeyedRateLimiter<ConfigKey, SlidingLog>),
    /// A weighted (two-window) counter.
    WeightedWindow(KeyedRateLimiter<ConfigKey, WeightedWindow>),
}

/// `$body` with `$l` bound to the limiter whatever its algorithm.
macro_rules! each {
    ($self:expr, $l:ident => $body:expr) => {
        match $self {
            ConfigLimiter::Gcra($l) => $body,
            ConfigLimiter::FixedWindow { limiter: $l, .. } => $body,
            ConfigLimiter::SlidingWindow { limiter: $l, .. } => $body,
            ConfigLimiter::SlidingLog($l) => $body,
            ConfigLimiter::WeightedWindow($l) => $body,
        }
    };
}

impl ConfigLimiter {
    /// The algorithm it runs, as a file names it.
    ///
    /// ```
    /// use tollgate::http::{AlgorithmConfig, LayerConfig};
    /// let config: LayerConfig = toml::from_str("default = { count = 5, per = 'second' }").unwrap();
    /// let layer = config.build().unwrap();
    /// assert_eq!(layer.limiter("default").unwrap().algorithm(), AlgorithmConfig::Gcra);
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> AlgorithmConfig {
        match self {
            ConfigLimiter::Gcra(_) => AlgorithmConfig::Gcra,
            ConfigLimiter::FixedWindow { epoch_aligned, .. } => AlgorithmConfig::FixedWindow {
                epoch_aligned: *epoch_aligned,
            },
            ConfigLimiter::SlidingWindow { sub_windows, .. } => AlgorithmConfig::SlidingWindow {
                sub_windows: *sub_windows,
            },
            ConfigLimiter::SlidingLog(_) => AlgorithmConfig::SlidingLog,
            ConfigLimiter::WeightedWindow(_) => AlgorithmConfig::WeightedWindow,
        }
    }

    /// The quota in force ([`KeyedRateLimiter::quota`]).
    ///
    /// ```
    /// use tollgate::http::LayerConfig;
    /// let config: LayerConfig = toml::from_str("default = { count = 5, per = 'second' }").unwrap();
    /// let layer = config.build().unwrap();
    /// assert_eq!(layer.limiter("default").unwrap().quota().count(), 5);
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        each!(self, l => l.quota())
    }

    /// Replaces the quota for every key, each keeping what it used
    /// ([`KeyedRateLimiter::set_quota`]).
    ///
    /// # Errors
    /// [`QuotaError::Unsupported`] if the algorithm cannot run `quota`; nothing changes then.
    ///
    /// ```
    /// use tollgate::http::{ConfigKey, LayerConfig};
    /// use tollgate::Quota;
    /// let config: LayerConfig =
    ///     toml::from_str("default = { count = 1, per = 'hour', algorithm = 'fixed_window' }").unwrap();
    /// let layer = config.build().unwrap();
    /// let limiter = layer.limiter("default").unwrap();
    /// assert!(limiter.try_acquire(&ConfigKey::Global));
    /// limiter.set_quota(Quota::per_hour(2).unwrap()).unwrap();
    /// assert!(limiter.try_acquire(&ConfigKey::Global)); // one used of two
    /// assert!(!limiter.try_acquire(&ConfigKey::Global));
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaError> {
        each!(self, l => l.set_quota(quota))
    }

    /// Takes one permit for `key` if available now ([`KeyedRateLimiter::try_acquire`]).
    ///
    /// ```
    /// use tollgate::http::{ConfigKey, LayerConfig};
    /// let config: LayerConfig = toml::from_str("default = { count = 1, per = 'hour' }").unwrap();
    /// let layer = config.build().unwrap();
    /// assert!(layer.limiter("default").unwrap().try_acquire(&ConfigKey::Global));
    /// assert!(!layer.limiter("default").unwrap().try_acquire(&ConfigKey::Global));
    /// ```
    #[must_use = "a permit may have been denied"]
    pub fn try_acquire(&self, key: &ConfigKey) -> bool {
        each!(self, l => l.try_acquire(key))
    }

    /// Decides one permit for `key`, taking it if allowed ([`KeyedRateLimiter::check`]).
    ///
    /// ```
    /// use tollgate::http::{ConfigKey, LayerConfig};
    /// let config: LayerConfig = toml::from_str("default = { count = 3, per = 'hour' }").unwrap();
    /// let layer = config.build().unwrap();
    /// assert_eq!(layer.limiter("default").unwrap().check(&ConfigKey::Global).remaining, 2);
    /// ```
    pub fn check(&self, key: &ConfigKey) -> Decision {
        each!(self, l => l.check(key))
    }

    /// Decides `n` permits for `key`, taking them if allowed ([`KeyedRateLimiter::check_n`]).
    ///
    /// ```
    /// use tollgate::http::{ConfigKey, LayerConfig};
    /// let config: LayerConfig = toml::from_str("default = { count = 3, per = 'hour' }").unwrap();
    /// let layer = config.build().unwrap();
    /// assert!(layer.limiter("default").unwrap().check_n(&ConfigKey::Global, 4).exceeds_burst());
    /// ```
    pub fn check_n(&self, key: &ConfigKey, n: u64) -> Decision {
        each!(self, l => l.check_n(key, n))
    }

    /// What one permit for `key` would get, taking nothing ([`KeyedRateLimiter::peek`]).
    ///
    /// ```
    /// use tollgate::http::{ConfigKey, LayerConfig};
    /// let config: LayerConfig = toml::from_str("default = { count = 3, per = 'hour' }").unwrap();
    /// let layer = config.build().unwrap();
    /// assert_eq!(layer.limiter("default").unwrap().peek(&ConfigKey::Global).remaining, 3);
    /// ```
    pub fn peek(&self, key: &ConfigKey) -> Decision {
        each!(self, l => l.peek(key))
    }

    /// The number of keys tracked ([`KeyedRateLimiter::len`]).
    ///
    /// ```
    /// use tollgate::http::{ConfigKey, LayerConfig};
    /// let config: LayerConfig = toml::from_str("default = { count = 3, per = 'hour' }").unwrap();
    /// let layer = config.build().unwrap();
    /// let limiter = layer.limiter("default").unwrap();
    /// assert!(limiter.is_empty());
    /// assert!(limiter.try_acquire(&ConfigKey::Header("alice".into())));
    /// assert_eq!(limiter.len(), 1);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        each!(self, l => l.len())
    }

    /// Whether no key is tracked ([`KeyedRateLimiter::is_empty`]).
    ///
    /// ```
    /// use tollgate::http::{ConfigKey, LayerConfig};
    /// let config: LayerConfig = toml::from_str("default = { count = 3, per = 'hour' }").unwrap();
    /// let layer = config.build().unwrap();
    /// let limiter = layer.limiter("default").unwrap();
    /// assert!(limiter.is_empty());
    /// let _ = limiter.check(&ConfigKey::Global);
    /// assert!(!limiter.is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        each!(self, l => l.is_empty())
    }
}

/// Each call goes to the limiter held, whose own [`Backend`] implementation decides it.
impl Backend for ConfigLimiter {
    type Key = ConfigKey;
    type Error = Infallible;

    fn quota(&self) -> Quota {
        ConfigLimiter::quota(self)
    }

    fn window(&self) -> Duration {
        each!(self, l => Backend::window(l))
    }

    fn keys_bounded(&self) -> bool {
        each!(self, l => Backend::keys_bounded(l))
    }

    #[inline]
    fn check_n(
        &self,
        key: &ConfigKey,
        cost: u64,
    ) -> Answer<
        Result<Decision, Infallible>,
        impl Future<Output = Result<Decision, Infallible>> + Send + 'static,
    > {
        let decided = ConfigLimiter::check_n(self, key, cost);
        Answer::<_, std::future::Ready<_>>::Now(Ok(decided))
    }

    async fn check_n_for_async<'a>(
        &'a self,
        key: &'a ConfigKey,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, Infallible> {
        Ok(each!(self, l => l.check_n_for_async(key, cost, max_wait).await))
    }
}
