//! The policy table: which limit applies to a request, by method and path.
//!
//! Routes are written as people write them in docs, `"POST /login"` or `"/api/*"` (any
//! method), and matched in the order they were added; the first match wins, and a request
//! that matches no route falls back to the default policy, if there is one, or is not limited.

use std::fmt;
use std::sync::Arc;

use http::Method;

use super::backend::Backend;
use super::headers::{PolicyLabel, RatePolicy};

/// A named limit: the name appears in the `RateLimit-Policy` / `RateLimit` headers.
pub(crate) struct Policy<B> {
    pub(crate) label: PolicyLabel,
    pub(crate) backend: Arc<B>,
}

impl<B: Backend> Policy<B> {
    /// A policy named `name` over `backend`.
    pub(crate) fn new(name: &str, backend: Arc<B>) -> Result<Policy<B>, RouteError> {
        // An sf-string without escapes: printable ASCII except `"` and `\`, so the name can go
        // verbatim into headers and JSON.
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\');
        if !valid {
            return Err(RouteError::Name(name.to_owned()));
        }
        let label = PolicyLabel::new(format!("\"{name}\"").into(), rate(&*backend));
        Ok(Policy { label, backend })
    }

    /// What the `RateLimit-Policy` header says of the backend now.
    pub(crate) fn rate(&self) -> RatePolicy {
        rate(&*self.backend)
    }
}

fn rate<B: Backend>(backend: &B) -> RatePolicy {
    RatePolicy::of(&backend.quota())
}

/// `"POST /login"` (one method) or `"/api/*"` (any method): an exact path, or with a final
/// `/*` a path and everything under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RoutePattern {
    method: Option<Method>,
    path: Box<str>,
    prefix: bool,
}

/// A route pattern or a policy name the table cannot use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RouteError {
    Pattern(String),
    Name(String),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::Pattern(p) => write!(
                f,
                "route {p:?}: expected \"METHOD /path\", \"/path\" or \"/path/*\""
            ),
            RouteError::Name(n) => write!(
                f,
                "policy name {n:?}: expected printable ASCII without '\"' or '\\\\'"
            ),
        }
    }
}

impl RoutePattern {
    pub(crate) fn parse(pattern: &str) -> Result<RoutePattern, RouteError> {
        let bad = || RouteError::Pattern(pattern.to_owned());
        let (method, path) = match pattern.trim().split_once(' ') {
            Some((m, p)) => (
                Some(Method::from_bytes(m.as_bytes()).map_err(|_| bad())?),
                p.trim(),
            ),
            None => (None, pattern.trim()),
        };
        if !path.starts_with('/') || path.contains(char::is_whitespace) {
            return Err(bad());
        }
        let (path, prefix) = match path.strip_suffix("/*") {
            Some(p) => (p, true),
            None => (path, false),
        };
        if path.contains('*') {
            return Err(bad());
        }
        Ok(RoutePattern {
            method,
            path: path.into(),
            prefix,
        })
    }

    fn matches(&self, method: &Method, path: &str) -> bool {
        if self.method.as_ref().is_some_and(|m| m != method) {
            return false;
        }
        if !self.prefix {
            return path == &*self.path;
        }
        // "/api/*" covers "/api" and "/api/..." but not "/apis".
        match path.strip_prefix(&*self.path) {
            Some(rest) => rest.is_empty() || rest.starts_with('/') || self.path.ends_with('/'),
            None => false,
        }
    }
}

/// Routes in order, then the default.
pub(crate) struct PolicyTable<B> {
    pub(crate) routes: Vec<(RoutePattern, Policy<B>)>,
    pub(crate) default: Option<Policy<B>>,
}

impl<B> PolicyTable<B> {
    /// The index of the policy for a request, if any applies: a route's position, or
    /// `routes.len()` for the default. Async paths carry the index instead of a borrow.
    #[inline]
    pub(crate) fn find(&self, method: &Method, path: &str) -> Option<usize> {
        match self
            .routes
            .iter()
            .position(|(route, _)| route.matches(method, path))
        {
            Some(i) => Some(i),
            None => self.default.as_ref().map(|_| self.routes.len()),
        }
    }

    /// The policy at an index [`find`](PolicyTable::find) returned.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> &Policy<B> {
        match self.routes.get(index) {
            Some((_, policy)) => policy,
            None => self
                .default
                .as_ref()
                .expect("find returns the default's index only when there is one"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b() -> Arc<crate::KeyedRateLimiter<()>> {
        Arc::new(crate::KeyedRateLimiter::new(
            crate::Quota::per_second(1).unwrap(),
        ))
    }

    fn m(pattern: &str, method: Method, path: &str) -> bool {
        RoutePattern::parse(pattern).unwrap().matches(&method, path)
    }

    #[test]
    fn patterns_match_method_and_path() {
        assert!(m("POST /login", Method::POST, "/login"));
        assert!(!m("POST /login", Method::GET, "/login"));
        assert!(!m("POST /login", Method::POST, "/login/x"));
        assert!(m("/login", Method::GET, "/login"));
        assert!(m("/api/*", Method::GET, "/api"));
        assert!(m("/api/*", Method::GET, "/api/v1/x"));
        assert!(!m("/api/*", Method::GET, "/apis"));
        assert!(m("/*", Method::DELETE, "/anything"));
        assert!(m("/*", Method::DELETE, "/"));
        assert!(m("GET /", Method::GET, "/"));
        assert!(!m("GET /", Method::GET, "/x"));
    }

    #[test]
    fn bad_patterns_and_names_are_errors() {
        for bad in [
            "",
            "login",
            "POST login",
            "/a*",
            "/a/*/b",
            "P@ST /x",
            "GET /a b",
        ] {
            assert!(RoutePattern::parse(bad).is_err(), "{bad:?}");
        }
        for bad in ["", "a\"b", "a\\b", "tab\t", "é"] {
            assert!(Policy::new(bad, b()).is_err(), "{bad:?}");
        }
        assert_eq!(
            Policy::new("per ip", b()).unwrap().label.sf_name(),
            "\"per ip\""
        );
    }

    #[test]
    fn first_match_wins_then_default() {
        let p = |n| Policy::new(n, b()).unwrap();
        let table = PolicyTable {
            routes: vec![
                (RoutePattern::parse("POST /login").unwrap(), p("login")),
                (RoutePattern::parse("/*").unwrap(), p("all")),
            ],
            default: Some(p("default")),
        };
        let name = |m, path| table.find(&m, path).map(|i| table.get(i).label.sf_name());
        assert_eq!(name(Method::POST, "/login"), Some("\"login\""));
        assert_eq!(name(Method::GET, "/login"), Some("\"all\""));
        let table = PolicyTable {
            routes: vec![(RoutePattern::parse("POST /login").unwrap(), p("login"))],
            default: None,
        };
        assert_eq!(table.find(&Method::GET, "/"), None);
    }
}
