//! [`Reloader`]: a configuration reloaded into a running layer, keeping the state that still
//! applies.
//!
//! What a reload applies in place: quotas (each limiter's own `set_quota`, so its keys keep
//! their debt in permits and get no fresh burst) and shadow mode (the switches
//! [`set_enforcement`](crate::http::RateLimitLayer::set_enforcement) flips). Anything else
//! (the key, the routes and their names, lists, limiter and response settings) is part of the
//! layer's shape, made once by `build`: a reload that changes it is refused with what differs,
//! and changes nothing.

use std::fmt;

use parking_lot::Mutex;

use super::{ConfigLayer, LayerConfig, QuotaConfig};
use crate::http::{BuildError, Enforcement};

/// Applies new versions of a [`LayerConfig`] to the layer made from the first one: see
/// [`ConfigLayer::reloadable`](crate::http::RateLimitLayer::reloadable).
pub struct Reloader {
    layer: ConfigLayer,
    /// The configuration in force; the lock also keeps two reloads from interleaving.
    config: Mutex<LayerConfig>,
}

/// One thing a reload changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The quota of the policy `policy` changed; its keys kept their state.
    Quota {
        /// The policy's name.
        policy: String,
        /// The quota before.
        from: QuotaConfig,
        /// The quota now.
        to: QuotaConfig,
    },
    /// The policy `policy` was switched to `to`.
    Enforcement {
        /// The policy's name.
        policy: String,
        /// Its mode now.
        to: Enforcement,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Quota { policy, from, to } => {
                write!(f, "policy {policy:?}: quota {from} -> {to}")
            }
            Change::Enforcement { policy, to } => write!(f, "policy {policy:?}: now {to:?}"),
        }
    }
}

/// Why a reload was refused. Either way the layer is as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReloadError {
    /// The new configuration does not build (the builder's reason).
    Invalid(BuildError),
    /// The new configuration changes the layer's shape (these top-level settings, or the
    /// routes' names, patterns or lists): build a new layer for it.
    Shape(Vec<&'static str>),
}

impl fmt::Display for ReloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReloadError::Invalid(e) => write!(f, "invalid configuration: {e}"),
            ReloadError::Shape(what) => write!(
                f,
                "only quotas and shadow policies can change at run time; changed: {}",
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
    /// assert_eq!(layer.limiter("default").unwrap().quota().count(), 20);
    /// ```
    pub fn reloadable(config: &LayerConfig) -> Result<(ConfigLayer, Reloader), BuildError> {
        let layer = config.build()?;
        let reloader = Reloader {
            layer: layer.clone(),
            config: Mutex::new(config.clone()),
        };
        Ok((layer, reloader))
    }
}

impl Reloader {
    /// The configuration in force.
    #[must_use]
    pub fn config(&self) -> LayerConfig {
        self.config.lock().clone()
    }

    /// Applies `new` to the layer, returning what changed (empty if nothing did).
    ///
    /// A policy whose quota changed keeps its limiter and its keys, their debt carried over in
    /// permits ([`KeyedRateLimiter::set_quota`](crate::KeyedRateLimiter::set_quota)): a client
    /// that used its burst does not get a fresh one. Shadow settings that changed are applied
    /// to every policy (overriding switches made at run time since); unchanged ones leave the
    /// switches alone.
    ///
    /// # Errors
    /// [`ReloadError::Invalid`] when `new` does not build, [`ReloadError::Shape`] when it
    /// changes more than quotas and shadow policies. Either way nothing changed.
    pub fn reload(&self, new: &LayerConfig) -> Result<Vec<Change>, ReloadError> {
        let mut current = self.config.lock();
        // Validated whole by the builder first (its limiters are dropped at once), so that a
        // refused configuration changes nothing.
        new.build().map_err(ReloadError::Invalid)?;
        let differs = shape_changes(&current, new);
        if !differs.is_empty() {
            return Err(ReloadError::Shape(differs));
        }
        let mut changes = Vec::new();
        // The same shape: the same policies in the same order as the layer's table.
        for (((name, limiter), (_, from)), (_, to)) in self
            .layer
            .policies()
            .zip(current.quotas())
            .zip(new.quotas())
        {
            if from == to {
                continue;
            }
            let quota = to.quota().map_err(ReloadError::Invalid)?;
            limiter
                .set_quota(quota)
                .map_err(|e| ReloadError::Invalid(BuildError::Quota(e)))?;
            changes.push(Change::Quota {
                policy: name.to_owned(),
                from: *from,
                to: *to,
            });
        }
        if current.shadow != new.shadow {
            let mode = |c: &LayerConfig, name: &str| {
                if c.shadow.all || c.shadow.policies.iter().any(|p| p == name) {
                    Enforcement::Shadow
                } else {
                    Enforcement::Enforce
                }
            };
            let mut names: Vec<&str> = Vec::new();
            for (name, _) in self.layer.policies() {
                // A name shared by routes switches them all at once.
                if names.contains(&name) {
                    continue;
                }
                names.push(name);
                let to = mode(new, name);
                // The name is one of the layer's own, so it is found.
                let _found = self.layer.set_enforcement(name, to);
                if mode(&current, name) != to {
                    changes.push(Change::Enforcement {
                        policy: name.to_owned(),
                        to,
                    });
                }
            }
        }
        new.clone_into(&mut current);
        Ok(changes)
    }
}

impl fmt::Debug for Reloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

/// The top-level settings in which `new` differs from `old` other than the quotas' values and
/// the shadow policies.
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
    check("limiters", old.limiters == new.limiters);
    check("access", old.access == new.access);
    check("shadow.headers", old.shadow.headers == new.shadow.headers);
    check("responses", old.responses == new.responses);
    differs
}
