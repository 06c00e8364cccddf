//! [`Reloader`]: a configuration reloaded into a running layer, keeping the state that still
//! applies.
//!
//! What a reload applies in place: quotas under the same algorithm (each limiter's own
//! `set_quota`, so its keys keep their debt in permits and get no fresh burst) and shadow mode (the switches
//! [`set_enforcement`](crate::http::RateLimitLayer::set_enforcement) flips). A reload that
//! changes the layer's shape (the key, routes, lists, response settings, a policy added or
//! removed) builds a new layer, handing it every limiter whose policy it keeps (unless its
//! algorithm changed: that policy gets a new limiter, its keys empty), and the
//! [`ReloadableLayer`]'s services change to it at their next `poll_ready`. Only the limiters'
//! own settings (key cap, sweeper, full-table policy) cannot change: they belong to limiters
//! that are kept.
//!
//! The generation its services check (`Current::{get, replace}` and `Reloading::poll_ready`)
//! is modelled step for step in `loom-tests/tests/reload_generation.rs`: change both.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use parking_lot::{Mutex, RwLock};
use tower_layer::Layer;
use tower_service::Service;

use super::{ConfigLayer, ConfigLimiter, LayerConfig, QuotaConfig};
use crate::http::{BuildError, Enforcement, RateLimit};

/// The layer a [`LayerConfig`] builds, kept current by its [`Reloader`]: see
/// [`ConfigLayer::reloadable`](crate::http::RateLimitLayer::reloadable). Its services run the
/// layer in force; after a reload that changed the layer's shape they change to the new one
/// at their next `poll_ready` (a request already started finishes under the layer it started
/// with). Cost per request over the plain layer: one atomic load.
///
/// ```
/// use tollgate::http::{LayerConfig, RateLimitLayer};
///
/// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
/// let (layer, _reloader) = RateLimitLayer::reloadable(&config).unwrap();
/// assert_eq!(layer.current().limiter("default").unwrap().quota().count(), 10);
/// let app: axum::Router = axum::Router::new().layer(layer);
/// ```
#[derive(Clone)]
pub struct ReloadableLayer {
    current: Arc<Current>,
}

/// The layer in force, and how many times it was replaced.
struct Current {
    /// Bumped under `layer`'s write lock after each replacement, so a reader that sees a new
    /// number and then takes the read lock finds the new layer (and reads the number again
    /// under the lock, consistent with it).
    generation: AtomicU64,
    layer: RwLock<ConfigLayer>,
}

impl Current {
    /// The layer in force and its generation, read together.
    fn get(&self) -> (u64, ConfigLayer) {
        let layer = self.layer.read();
        (self.generation.load(Ordering::Acquire), layer.clone())
    }

    fn replace(&self, new: ConfigLayer) {
        let mut layer = self.layer.write();
        *layer = new;
        self.generation.fetch_add(1, Ordering::Release);
    }
}

impl ReloadableLayer {
    /// The layer in force now (a handle on it: its limiters, stats and switches).
    ///
    /// ```
    /// use tollgate::http::{LayerConfig, RateLimitLayer};
    ///
    /// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
    /// let (layer, reloader) = RateLimitLayer::reloadable(&config).unwrap();
    /// let routed: LayerConfig = toml::from_str(
    ///     "default = { count = 10, per = 'second' }\n\
    ///      routes = [{ name = 'login', pattern = 'POST /login', quota = { count = 3, per = 'minute' } }]",
    /// )
    /// .unwrap();
    /// reloader.reload(&routed).unwrap();
    /// assert_eq!(layer.current().policies().count(), 2);
    /// ```
    #[must_use]
    pub fn current(&self) -> ConfigLayer {
        self.current.get().1
    }
}

impl fmt::Debug for ReloadableLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadableLayer").finish_non_exhaustive()
    }
}

impl<S: Clone> Layer<S> for ReloadableLayer {
    type Service = Reloading<S>;

    fn layer(&self, inner: S) -> Reloading<S> {
        let (seen, layer) = self.current.get();
        Reloading {
            service: layer.layer(inner.clone()),
            inner,
            seen,
            current: Arc::clone(&self.current),
        }
    }
}

/// The service of a [`ReloadableLayer`]: the layer in force around `S`.
///
/// ```
/// use tollgate::http::{LayerConfig, RateLimitLayer};
/// use tower::Layer;
///
/// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
/// let (layer, _reloader) = RateLimitLayer::reloadable(&config).unwrap();
/// let _service = layer.layer(tower::service_fn(|_req: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
/// }));
/// ```
pub struct Reloading<S> {
    /// The layer in force when `seen` was read, around a clone of `inner`.
    service: RateLimit<S, ConfigLayer>,
    /// The service as given, wrapped again when the layer changes.
    inner: S,
    seen: u64,
    current: Arc<Current>,
}

impl<S: Clone> Clone for Reloading<S> {
    fn clone(&self) -> Self {
        Reloading {
            service: self.service.clone(),
            inner: self.inner.clone(),
            seen: self.seen,
            current: Arc::clone(&self.current),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Reloading<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloading")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Reloading<S>
where
    S: Clone,
    RateLimit<S, ConfigLayer>: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = <RateLimit<S, ConfigLayer> as Service<Request<ReqBody>>>::Error;
    type Future = <RateLimit<S, ConfigLayer> as Service<Request<ReqBody>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Changed here, not in `call`: the service `call` uses is the one made ready.
        if self.current.generation.load(Ordering::Acquire) != self.seen {
            let (seen, layer) = self.current.get();
            self.service = layer.layer(self.inner.clone());
            self.seen = seen;
        }
        self.service.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        self.service.call(req)
    }
}

/// Applies new versions of a [`LayerConfig`] to the layer made from the first one: see
/// [`ConfigLayer::reloadable`](crate::http::RateLimitLayer::reloadable).
///
/// The layer goes into the app; the reloader to whatever learns of new versions (a file
/// watcher, a signal handler, an admin endpoint):
///
/// ```
/// use tollgate::http::{LayerConfig, RateLimitLayer};
///
/// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
/// let (layer, reloader) = RateLimitLayer::reloadable(&config).unwrap();
/// let watcher = std::thread::spawn(move || {
///     // On a change of the file: read it, and apply it.
///     let new: LayerConfig = toml::from_str("default = { count = 50, per = 'second' }").unwrap();
///     reloader.reload(&new).map(|changes| changes.len())
/// });
/// assert_eq!(watcher.join().unwrap(), Ok(1));
/// assert_eq!(layer.current().limiter("default").unwrap().quota().count(), 50);
/// ```
pub struct Reloader {
    current: Arc<Current>,
    /// The configuration in force; the lock also keeps two reloads from interleaving.
    config: Mutex<LayerConfig>,
}

/// One thing a reload changed.
///
/// ```
/// use tollgate::http::{Change, LayerConfig, RateLimitLayer};
///
/// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
/// let (_layer, reloader) = RateLimitLayer::reloadable(&config).unwrap();
/// let new: LayerConfig = toml::from_str(r#"
///     default = { count = 10, per = "second", algorithm = "sliding_log" }
///     routes = [{ name = "login", pattern = "POST /login", quota = { count = 5, per = "minute" } }]
/// "#).unwrap();
/// let changes = reloader.reload(&new).unwrap();
/// assert!(changes.contains(&Change::Added { policy: "login".into() }));
/// assert!(changes.iter().any(|c| matches!(c, Change::Algorithm { policy, .. } if policy == "default")));
/// for change in &changes {
///     println!("{change}"); // e.g. `policy "login": added`
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The quota of the policy `policy` changed under the same algorithm; its keys kept their
    /// state.
    Quota {
        /// The policy's name.
        policy: String,
        /// The quota before.
        from: QuotaConfig,
        /// The quota now.
        to: QuotaConfig,
    },
    /// The algorithm of the policy `policy` changed (and maybe its quota with it): the policy
    /// has a new limiter, whose keys start afresh (each client gets a full limit once).
    Algorithm {
        /// The policy's name.
        policy: String,
        /// The quota and algorithm before.
        from: QuotaConfig,
        /// The quota and algorithm now.
        to: QuotaConfig,
    },
    /// The policy `policy` was switched to `to`.
    Enforcement {
        /// The policy's name.
        policy: String,
        /// Its mode now.
        to: Enforcement,
    },
    /// The layer was built anew for these changed settings (its policies kept their limiters
    /// and keys; run-time switches were replaced by the file's).
    Shape(Vec<&'static str>),
    /// A policy that was not there before, its limiter empty.
    Added {
        /// The policy's name.
        policy: String,
    },
    /// A policy that is no longer there, its limiter and keys dropped.
    Removed {
        /// The policy's name.
        policy: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Quota { policy, from, to } => {
                write!(f, "policy {policy:?}: quota {from} -> {to}")
            }
            Change::Algorithm { policy, from, to } => {
                write!(
                    f,
                    "policy {policy:?}: algorithm {} -> {}",
                    from.algorithm, to.algorithm
                )?;
                // The quota too, where more than its algorithm changed.
                let same_but_algorithm = QuotaConfig {
                    algorithm: to.algorithm,
                    ..*from
                } == *to;
                if !same_but_algorithm {
                    write!(f, ", quota {from} -> {to}")?;
                }
                f.write_str("; its keys start afresh")
            }
            Change::Enforcement { policy, to } => write!(f, "policy {policy:?}: now {to:?}"),
            Change::Shape(what) => write!(f, "layer rebuilt for: {}", what.join(", ")),
            Change::Added { policy } => write!(f, "policy {policy:?}: added"),
            Change::Removed { policy } => write!(f, "policy {policy:?}: removed"),
        }
    }
}

/// Why a reload was refused. Either way the layer is as it was.
///
/// ```
/// use tollgate::http::{BuildError, LayerConfig, RateLimitLayer, ReloadError};
///
/// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
/// let (layer, reloader) = RateLimitLayer::reloadable(&config).unwrap();
///
/// let capped: LayerConfig =
///     toml::from_str("default = { count = 10, per = 'second' }\nlimiters = { max_keys = 5 }").unwrap();
/// assert_eq!(reloader.reload(&capped), Err(ReloadError::Shape(vec!["limiters"])));
///
/// let zero: LayerConfig = toml::from_str("default = { count = 0, per = 'second' }").unwrap();
/// assert!(matches!(reloader.reload(&zero), Err(ReloadError::Invalid(BuildError::Quota(_)))));
/// assert_eq!(layer.current().limiter("default").unwrap().quota().count(), 10); // unchanged
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReloadError {
    /// The new configuration does not build (the builder's reason).
    Invalid(BuildError),
    /// The new configuration changes what cannot change at run time (the limiters' own
    /// settings: key cap, sweeper, full-table policy): build a new layer for it.
    Shape(Vec<&'static str>),
}

impl fmt::Display for ReloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReloadError::Invalid(e) => write!(f, "invalid configuration: {e}"),
            ReloadError::Shape(what) => write!(
                f,
                "the limiters' settings cannot change at run time; changed: {}",
                what.join(", ")
            ),
        }
    }
}

impl std::error::Error for ReloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReloadError::Invalid(e) => Some(e),
            ReloadError::Shape(_) => None,
        }
    }
}

impl ConfigLayer {
    /// The layer `config` builds, and a [`Reloader`] that applies later versions of it.
    ///
    /// # Errors
    /// As [`LayerConfig::build`].
    ///
    /// ```
    /// use tollgate::http::{LayerConfig, RateLimitLayer};
    ///
    /// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
    /// let (layer, reloader) = RateLimitLayer::reloadable(&config).unwrap();
    /// let faster: LayerConfig = toml::from_str("default = { count = 20, per = 'second' }").unwrap();
    /// let changes = reloader.reload(&faster).unwrap();
    /// assert_eq!(changes[0].to_string(), r#"policy "default": quota 10/second -> 20/second"#);
    /// assert_eq!(layer.current().limiter("default").unwrap().quota().count(), 20);
    /// ```
    pub fn reloadable(config: &LayerConfig) -> Result<(ReloadableLayer, Reloader), BuildError> {
        let current = Arc::new(Current {
            generation: AtomicU64::new(0),
            layer: RwLock::new(config.build()?),
        });
        let reloader = Reloader {
            current: Arc::clone(&current),
            config: Mutex::new(config.clone()),
        };
        Ok((ReloadableLayer { current }, reloader))
    }
}

/// A policy's limiter in the layer in force, with what the configuration in force says of it.
struct Kept<'a> {
    name: &'a str,
    is_default: bool,
    quota: &'a QuotaConfig,
    limiter: Arc<ConfigLimiter>,
    /// Whether the new configuration keeps it.
    taken: bool,
}

impl Reloader {
    /// The configuration in force: the last one applied (a refused reload leaves it).
    ///
    /// ```
    /// use tollgate::http::{LayerConfig, RateLimitLayer};
    ///
    /// let config: LayerConfig = toml::from_str("default = { count = 10, per = 'second' }").unwrap();
    /// let (_layer, reloader) = RateLimitLayer::reloadable(&config).unwrap();
    /// assert_eq!(reloader.config(), config);
    /// let bad: LayerConfig = toml::from_str("default = { count = 0, per = 'second' }").unwrap();
    /// assert!(reloader.reload(&bad).is_err());
    /// assert_eq!(reloader.config(), config);
    /// ```
    #[must_use]
    pub fn config(&self) -> LayerConfig {
        self.config.lock().clone()
    }

    /// Applies `new` to the layer, returning what changed (empty if nothing did).
    ///
    /// A policy whose quota changed under the same algorithm keeps its limiter and its keys,
    /// their debt carried over in permits
    /// ([`KeyedRateLimiter::set_quota`](crate::KeyedRateLimiter::set_quota)): a client that
    /// used its burst does not get a fresh one. A policy whose algorithm changed gets a new
    /// limiter ([`Change::Algorithm`]): its keys start afresh, so every client gets a full
    /// limit once; the rest of the layer is made anew around it as for a change of shape
    /// below, but keeps the switches made at run time. Shadow settings that changed are applied
    /// to every policy (overriding switches made at run time since); unchanged ones leave the
    /// switches alone.
    ///
    /// Anything else that changed (the key, routes and their patterns and lists, the layer's
    /// lists, the default policy's presence or name, response settings) makes a new layer, to
    /// which the [`ReloadableLayer`]'s services change at their next `poll_ready`. A policy the
    /// new configuration keeps (a route of the same name, the `n`-th of that name if several;
    /// the default) keeps its limiter, so its keys keep their state; a new one starts empty; a
    /// removed one is dropped with its keys once the last request under the old layer ends.
    /// The new layer's shadow switches are the file's (switches made at run time are not
    /// carried over).
    ///
    /// # Errors
    /// [`ReloadError::Invalid`] when `new` does not build, [`ReloadError::Shape`] when it
    /// changes the limiters' own settings. Either way nothing changed.
    ///
    /// A client's use carries over a change of quota:
    ///
    /// ```
    /// use tollgate::http::{Change, ConfigKey, LayerConfig, RateLimitLayer};
    ///
    /// let config: LayerConfig = toml::from_str("default = { count = 2, per = 'hour' }").unwrap();
    /// let (layer, reloader) = RateLimitLayer::reloadable(&config).unwrap();
    /// let client = ConfigKey::Global;
    /// assert!(layer.current().limiter("default").unwrap().try_acquire(&client));
    ///
    /// let more: LayerConfig = toml::from_str("default = { count = 5, per = 'hour' }").unwrap();
    /// let changes = reloader.reload(&more).unwrap();
    /// assert!(matches!(&changes[..], [Change::Quota { .. }]));
    /// // The one permit used is still used: 4 of the new 5 left.
    /// assert_eq!(layer.current().limiter("default").unwrap().peek(&client).remaining, 4);
    /// assert_eq!(reloader.reload(&more), Ok(vec![])); // nothing changed
    /// ```
    pub fn reload(&self, new: &LayerConfig) -> Result<Vec<Change>, ReloadError> {
        let mut current = self.config.lock();
        // Validated whole by the builder first (its limiters are dropped at once), so that a
        // refused configuration changes nothing.
        new.build().map_err(ReloadError::Invalid)?;
        if current.limiters != new.limiters {
            return Err(ReloadError::Shape(vec!["limiters"]));
        }
        let shape = shape_changes(&current, new);
        let layer = self.current.get().1;
        // A policy's algorithm is its limiter's type: a new one needs a new layer.
        let same_algorithms = current
            .quotas()
            .zip(new.quotas())
            .all(|((_, a), (_, b))| a.algorithm == b.algorithm);
        let changes = if shape.is_empty() && same_algorithms {
            in_place(&layer, &current, new)?
        } else {
            self.rebuild(&layer, &current, new, shape)?
        };
        new.clone_into(&mut current);
        Ok(changes)
    }

    /// A new layer for `new`, handed the limiters of the policies it keeps.
    fn rebuild(
        &self,
        layer: &ConfigLayer,
        old: &LayerConfig,
        new: &LayerConfig,
        shape: Vec<&'static str>,
    ) -> Result<Vec<Change>, ReloadError> {
        // The same order on both sides: the layer's table and `quotas()` list routes, then
        // the default.
        let mut kept: Vec<Kept<'_>> = layer
            .policies()
            .zip(old.quotas())
            .map(|((name, limiter), (_, quota))| Kept {
                name,
                is_default: false,
                quota,
                limiter: Arc::clone(limiter),
                taken: false,
            })
            .collect();
        if old.default.is_some() {
            if let Some(last) = kept.last_mut() {
                last.is_default = true;
            }
        }
        // Only the algorithms changed (no shape): the run-time switches stay, as in place.
        let keep_switches = shape.is_empty() && old.shadow == new.shadow;
        let mut changes = Vec::new();
        if !shape.is_empty() {
            changes.push(Change::Shape(shape));
        }
        let mut quotas = Vec::new();
        let built = new.build_with(|name, is_default, to| {
            let found = kept
                .iter_mut()
                .find(|k| !k.taken && k.is_default == is_default && (is_default || k.name == name));
            match found {
                Some(k) if k.quota.algorithm != to.algorithm => {
                    k.taken = true;
                    changes.push(Change::Algorithm {
                        policy: name.to_owned(),
                        from: *k.quota,
                        to: *to,
                    });
                    None
                }
                Some(k) => {
                    k.taken = true;
                    if k.quota != to {
                        quotas.push((Arc::clone(&k.limiter), name.to_owned(), *k.quota, *to));
                    }
                    Some(Arc::clone(&k.limiter))
                }
                None => {
                    changes.push(Change::Added {
                        policy: name.to_owned(),
                    });
                    None
                }
            }
        });
        let built = built.map_err(ReloadError::Invalid)?;
        for (limiter, policy, from, to) in quotas {
            set_quota(&limiter, &to)?;
            changes.push(Change::Quota { policy, from, to });
        }
        changes.extend(kept.iter().filter(|k| !k.taken).map(|k| Change::Removed {
            policy: k.name.to_owned(),
        }));
        for name in names(&built) {
            let to = if keep_switches {
                // The name is the old layer's too (the same shape).
                let was = layer.enforcement(name).unwrap_or(Enforcement::Enforce);
                let _found = built.set_enforcement(name, was);
                was
            } else {
                mode(new, name)
            };
            if kept.iter().any(|k| k.name == name) && layer.enforcement(name) != Some(to) {
                changes.push(Change::Enforcement {
                    policy: name.to_owned(),
                    to,
                });
            }
        }
        self.current.replace(built);
        Ok(changes)
    }
}

/// Applies `new`'s quotas and shadow settings to `layer`, whose shape `new` keeps.
fn in_place(
    layer: &ConfigLayer,
    current: &LayerConfig,
    new: &LayerConfig,
) -> Result<Vec<Change>, ReloadError> {
    let mut changes = Vec::new();
    // The same shape: the same policies in the same order as the layer's table.
    for (((name, limiter), (_, from)), (_, to)) in
        layer.policies().zip(current.quotas()).zip(new.quotas())
    {
        if from == to {
            continue;
        }
        set_quota(limiter, to)?;
        changes.push(Change::Quota {
            policy: name.to_owned(),
            from: *from,
            to: *to,
        });
    }
    if current.shadow != new.shadow {
        // A name shared by routes switches them all at once.
        for name in names(layer) {
            let to = mode(new, name);
            // The name is one of the layer's own, so it is found.
            let _found = layer.set_enforcement(name, to);
            if mode(current, name) != to {
                changes.push(Change::Enforcement {
                    policy: name.to_owned(),
                    to,
                });
            }
        }
    }
    Ok(changes)
}

/// The layer's policy names, each once, in its table's order.
fn names(layer: &ConfigLayer) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for (name, _) in layer.policies() {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Gives `limiter` the quota `to` (its keys keep their debt in permits).
fn set_quota(limiter: &ConfigLimiter, to: &QuotaConfig) -> Result<(), ReloadError> {
    let quota = to.quota().map_err(ReloadError::Invalid)?;
    limiter
        .set_quota(quota)
        .map_err(|e| ReloadError::Invalid(BuildError::Quota(e)))
}

/// The mode `config` gives the policy `name`.
fn mode(config: &LayerConfig, name: &str) -> Enforcement {
    if config.shadow.all || config.shadow.policies.iter().any(|p| p == name) {
        Enforcement::Shadow
    } else {
        Enforcement::Enforce
    }
}

impl fmt::Debug for Reloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

/// The top-level settings in which `new` differs from `old` other than the quotas' values, the
/// shadow policies and the limiters' settings (checked first).
fn shape_changes(old: &LayerConfig, new: &LayerConfig) -> Vec<&'static str> {
    let mut differs = Vec::new();
    let mut check = |what, same: bool| {
        if !same {
            differs.push(what);
        }
    };
    check("key", old.key == new.key);
    check("default", old.default.is_some() == new.default.is_some());
    check("policy_name", old.policy_name == new.policy_name);
    check(
        "routes",
        old.routes.len() == new.routes.len()
            && old
                .routes
                .iter()
                .zip(&new.routes)
                .all(|(a, b)| (&a.name, &a.pattern, &a.access) == (&b.name, &b.pattern, &b.access)),
    );
    check("access", old.access == new.access);
    check("shadow.headers", old.shadow.headers == new.shadow.headers);
    check("responses", old.responses == new.responses);
    differs
}
