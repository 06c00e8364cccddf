//! The policy table: which limit applies to a request, by method and path.
//!
//! Routes are written as people write them in docs, `"POST /login"` or `"/api/*"` (any
//! method), and matched in the order they were added; the first match wins, and a request
//! that matches no route falls back to the default policy, if there is one, or is not limited.

use std::sync::Arc;

use http::Method;

use super::backend::Backend;
use super::error::{BuildError, RouteError};
use super::headers::{PolicyLabel, RatePolicy};

/// A named limit: the name appears in the `RateLimit-Policy` / `RateLimit` headers.
pub(crate) struct Policy<B> {
    pub(crate) label: PolicyLabel,
    pub(crate) backend: Arc<B>,
}

impl<B: Backend> Policy<B> {
    /// A policy named `name` over `backend`.
    pub(crate) fn new(name: &str, backend: Arc<B>) -> Result<Policy<B>, BuildError> {
        let label = PolicyLabel::new(sf_name(name)?, rate(&*backend));
        Ok(Policy { label, backend })
    }

    /// What the `RateLimit-Policy` header says of the backend now.
    pub(crate) fn rate(&self) -> RatePolicy {
        rate(&*self.backend)
    }
}

/// A policy name as an sf-string (in quotes), checked to need no escapes: printable ASCII
/// except `"` and `\`, so the name can go verbatim into headers and JSON.
pub(crate) fn sf_name(name: &str) -> Result<Box<str>, BuildError> {
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\');
    if !valid {
        return Err(BuildError::PolicyName(format!(
            "policy name {name:?}: expected printable ASCII without '\"' or '\\\\'"
        )));
    }
    Ok(format!("\"{name}\"").into())
}

/// A named concurrency limit (the layer's concurrency mode): the name appears in its
/// rejections.
pub(crate) struct SlotPolicy<C> {
    pub(crate) sf_name: Box<str>,
    pub(crate) backend: Arc<C>,
}

impl<C> SlotPolicy<C> {
    /// The name as given to the builder (without the sf-string's quotes).
    pub(crate) fn name(&self) -> &str {
        &self.sf_name[1..self.sf_name.len() - 1]
    }
}

fn rate<B: Backend>(backend: &B) -> RatePolicy {
    RatePolicy::of(&backend.quota())
}

/// A route pattern: an optional method and a path in the router's syntax (see
/// [`RateLimitLayerBuilder::route`](super::RateLimitLayerBuilder::route)), parsed once by
/// `build()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RoutePattern {
    method: Option<Method>,
    /// The segments between the path's slashes, before the end; a trailing slash is a last
    /// empty literal, and `"/"` is one empty literal.
    segments: Box<[Segment]>,
    end: End,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// Exactly this text.
    Literal(Box<str>),
    /// `{name}`: one segment; empty only when more of the path follows (`//x` matches
    /// `/{a}/{b}`, `/users/` does not match `/users/{id}`), as axum's router (matchit 0.8)
    /// matches.
    Param,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The path ends after the segments.
    Exact,
    /// `/{*name}`: a slash and at least one more byte, anything (axum's wildcard).
    Wildcard,
    /// `/*`: the path ends after the segments, or goes on with a slash and anything.
    Subtree,
}

/// The methods a pattern may name: RFC 9110's and PATCH, axum's `MethodFilter` set.
const METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::CONNECT,
    Method::OPTIONS,
    Method::TRACE,
    Method::PATCH,
];

impl RoutePattern {
    pub(crate) fn parse(pattern: &str) -> Result<RoutePattern, RouteError> {
        let path_error = || RouteError::Path(pattern.to_owned());
        // Exactly one space after a method, and no other whitespace anywhere: a pattern is
        // written once, so a stray space or tab is a mistake to report, not to guess past.
        let (method, path) = match pattern.split_once(' ') {
            Some((m, p)) => {
                // Not a method: a path holding a space, or whitespace before the method.
                if m.is_empty()
                    || m.starts_with('/')
                    || m.chars().any(|c| c.is_whitespace() || c.is_control())
                {
                    return Err(path_error());
                }
                let method = METHODS
                    .iter()
                    .find(|known| known.as_str() == m)
                    .ok_or_else(|| RouteError::Method(pattern.to_owned()))?;
                (Some(method.clone()), p)
            }
            None => (None, pattern),
        };
        let rest = path.strip_prefix('/').ok_or_else(path_error)?;
        if path
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '?' || c == '#')
        {
            return Err(path_error());
        }
        let (rest, subtree) = match rest.strip_suffix("*") {
            Some(r) if r.is_empty() || r.ends_with('/') => (r.strip_suffix('/').unwrap_or(r), true),
            _ => (rest, false),
        };
        let mut segments = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        let mut end = if subtree { End::Subtree } else { End::Exact };
        // "/*" has no segment; the path "/" leaves "", one empty segment, which stands for
        // the root (as a trailing slash does after other segments).
        let pieces: Vec<&str> = if subtree && rest.is_empty() {
            Vec::new()
        } else {
            rest.split('/').collect()
        };
        for (i, seg) in pieces.iter().enumerate() {
            let last = i + 1 == pieces.len();
            let err = |e: fn(String) -> RouteError| e(pattern.to_owned());
            if seg.is_empty() {
                // Only "/" itself or one trailing slash, and not before a subtree end.
                if !last || subtree {
                    return Err(err(RouteError::EmptySegment));
                }
                segments.push(Segment::Literal("".into()));
                continue;
            }
            if seg.starts_with(':') {
                return Err(err(RouteError::OldSyntax));
            }
            if let Some(inner) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                let (name, wildcard) = match inner.strip_prefix('*') {
                    Some(n) => (n, true),
                    None => (inner, false),
                };
                if name.is_empty() || name.contains(['{', '}', '*', ':']) {
                    return Err(err(RouteError::Parameter));
                }
                if names.contains(&name) {
                    return Err(err(RouteError::DuplicateParameter));
                }
                names.push(name);
                if wildcard {
                    if !last || subtree {
                        return Err(err(RouteError::Wildcard));
                    }
                    end = End::Wildcard;
                } else {
                    segments.push(Segment::Param);
                }
                continue;
            }
            if seg.contains(['{', '}']) {
                return Err(err(RouteError::Parameter));
            }
            if seg.contains('*') {
                return Err(err(RouteError::Wildcard));
            }
            segments.push(Segment::Literal((*seg).into()));
        }
        Ok(RoutePattern {
            method,
            segments: segments.into(),
            end,
        })
    }

    /// Whether the rule covers this method: its own, and `HEAD` under a `GET` rule (a server
    /// answers `HEAD` by running `GET`'s handler, RFC 9110 §9.3.2, as axum does).
    fn covers_method(&self, method: &Method) -> bool {
        match &self.method {
            None => true,
            Some(m) => m == method || (*m == Method::GET && *method == Method::HEAD),
        }
    }

    /// Whether the rule covers a request with this method, path (the full path, as the
    /// router matched it) and, when known, the route template the router matched.
    pub(crate) fn matches(&self, method: &Method, path: &str, template: Option<&str>) -> bool {
        self.covers_method(method)
            && (self.matches_path(path, false)
                || template.is_some_and(|t| self.matches_path(t, true)))
    }

    /// Matches `path` byte for byte, segment by segment, as axum's router (matchit) does: no
    /// decoding, no normalisation, so every spelling the router sends to a route is one this
    /// matches. With `template`, `path` is a route template: its `{*name}` segment stands for
    /// any rest of a path, so only a wildcard or subtree end covers it (a `{name}` segment is
    /// covered by a parameter, as any non-empty segment is; it equals no literal, since a
    /// pattern's literals hold no braces).
    fn matches_path(&self, path: &str, template: bool) -> bool {
        let Some(mut rest) = path.strip_prefix('/').map(Some) else {
            return false;
        };
        for segment in self.segments.iter() {
            let Some(text) = rest else {
                return false;
            };
            let (seg, next) = match text.split_once('/') {
                Some((seg, next)) => (seg, Some(next)),
                None => (text, None),
            };
            let wildcard = template && next.is_none() && is_template_wildcard(seg);
            let ok = match segment {
                Segment::Literal(lit) => **lit == *seg && !wildcard,
                Segment::Param => (!seg.is_empty() || next.is_some()) && !wildcard,
            };
            if !ok {
                return false;
            }
            rest = next;
        }
        match self.end {
            End::Exact => rest.is_none(),
            End::Wildcard => rest.is_some_and(|r| !r.is_empty()),
            End::Subtree => true,
        }
    }
}

/// A route template's `{*name}` segment (not an escaped literal `{{*x}}`).
fn is_template_wildcard(seg: &str) -> bool {
    seg.starts_with("{*") && seg.ends_with('}') && !seg.ends_with("}}")
}

/// Routes in order, then the default: of rate policies ([`Policy`]) or of concurrency
/// policies ([`SlotPolicy`]).
pub(crate) struct PolicyTable<P> {
    pub(crate) routes: Vec<(RoutePattern, P)>,
    pub(crate) default: Option<P>,
}

impl<P> PolicyTable<P> {
    /// The index of the policy for a request, if any applies: a route's position, or
    /// `routes.len()` for the default. Async paths carry the index instead of a borrow.
    /// `path` is the request's full path, `template` the route template the router matched,
    /// if known (see [`request_paths`]).
    #[inline]
    pub(crate) fn find(
        &self,
        method: &Method,
        path: &str,
        template: Option<&str>,
    ) -> Option<usize> {
        match self
            .routes
            .iter()
            .position(|(route, _)| route.matches(method, path, template))
        {
            Some(i) => Some(i),
            None => self.default.as_ref().map(|_| self.routes.len()),
        }
    }

    /// The policy at an index [`find`](PolicyTable::find) returned.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> &P {
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
    use proptest::prelude::*;

    fn b() -> Arc<crate::KeyedRateLimiter<()>> {
        Arc::new(crate::KeyedRateLimiter::new(
            crate::Quota::per_second(1).unwrap(),
        ))
    }

    fn m(pattern: &str, method: Method, path: &str) -> bool {
        RoutePattern::parse(pattern)
            .unwrap()
            .matches(&method, path, None)
    }

    fn t(pattern: &str, template: &str) -> bool {
        RoutePattern::parse(pattern)
            .unwrap()
            .matches(&Method::GET, "/-", Some(template))
    }

    #[test]
    fn patterns_match_method_and_path() {
        assert!(m("POST /login", Method::POST, "/login"));
        assert!(!m("POST /login", Method::GET, "/login"));
        assert!(!m("POST /login", Method::POST, "/login/x"));
        assert!(m("/login", Method::GET, "/login"));
        assert!(m("/api/*", Method::GET, "/api"));
        assert!(m("/api/*", Method::GET, "/api/"));
        assert!(m("/api/*", Method::GET, "/api/v1/x"));
        assert!(!m("/api/*", Method::GET, "/apis"));
        assert!(m("/*", Method::DELETE, "/anything"));
        assert!(m("/*", Method::DELETE, "/"));
        assert!(!m("/*", Method::OPTIONS, "*"));
        assert!(m("GET /", Method::GET, "/"));
        assert!(!m("GET /", Method::GET, "/x"));
        assert!(!m("GET /", Method::GET, ""));
    }

    #[test]
    fn whitespace_other_than_one_space_after_the_method_is_refused() {
        for bad in [
            "GET  /x",
            " GET /x",
            "GET /x ",
            "  GET   /x  ",
            " /x",
            "/x ",
            "/a b",
            "GET\t/x",
            "GET /x\t",
            "\tGET /x",
            "GET /x\r\n",
            "GET\n/x",
            "GET /a b",
            "GET\u{a0}/x",
            "GET /\u{2028}x",
        ] {
            let err = RoutePattern::parse(bad).unwrap_err();
            assert_eq!(err, RouteError::Path(bad.to_owned()), "{bad:?}");
        }
        assert!(m("GET /x", Method::GET, "/x"));
    }

    #[test]
    fn head_is_covered_by_get_only() {
        assert!(m("GET /x", Method::HEAD, "/x"));
        assert!(m("HEAD /x", Method::HEAD, "/x"));
        assert!(!m("HEAD /x", Method::GET, "/x"));
        assert!(!m("POST /x", Method::HEAD, "/x"));
    }

    #[test]
    fn parameters_and_wildcards() {
        assert!(m("/users/{id}", Method::GET, "/users/7"));
        assert!(m("/users/{id}", Method::GET, "/users/%7B"));
        assert!(!m("/users/{id}", Method::GET, "/users/"));
        assert!(m("/users/{id}/x", Method::GET, "/users//x"));
        assert!(m("/{a}/{b}", Method::GET, "//x"));
        assert!(!m("/{a}/{b}", Method::GET, "//"));
        assert!(!m("/users/{id}", Method::GET, "/users"));
        assert!(!m("/users/{id}", Method::GET, "/users/7/x"));
        assert!(m("/users/{id}/", Method::GET, "/users/7/"));
        assert!(m("/users/{id}/*", Method::GET, "/users/7"));
        assert!(m("/users/{id}/*", Method::GET, "/users/7/a/b"));
        assert!(m("/files/{*rest}", Method::GET, "/files/a"));
        assert!(m("/files/{*rest}", Method::GET, "/files/a/b/"));
        assert!(m("/files/{*rest}", Method::GET, "/files//"));
        assert!(!m("/files/{*rest}", Method::GET, "/files/"));
        assert!(!m("/files/{*rest}", Method::GET, "/files"));
        assert!(m("/{*rest}", Method::GET, "/x"));
        assert!(!m("/{*rest}", Method::GET, "/"));
        // Byte for byte, as axum routes.
        assert!(!m("/export", Method::GET, "/export/"));
        assert!(!m("/export", Method::GET, "//export"));
        assert!(!m("/export", Method::GET, "/%65xport"));
        assert!(!m("/export", Method::GET, "/EXPORT"));
    }

    #[test]
    fn templates_are_covered_by_what_covers_all_their_paths() {
        assert!(t("/users/{id}", "/users/{id}"));
        assert!(t("/users/{user}", "/users/{id}"));
        assert!(t("/users/*", "/users/{id}"));
        assert!(t("/users/{*rest}", "/users/{id}"));
        assert!(!t("/users/7", "/users/{id}"));
        assert!(t("/files/{*p}", "/files/{*rest}"));
        assert!(t("/files/*", "/files/{*rest}"));
        assert!(!t("/files/{p}", "/files/{*rest}"));
        // An escaped literal "{x}" segment is a literal to axum: a parameter covers it.
        assert!(t("/a/{p}", "/a/{{x}}"));
        assert!(t("/api/login", "/api/login"));
    }

    #[test]
    fn bad_patterns_and_names_are_errors() {
        type Reason = fn(String) -> RouteError;
        let cases: [(&str, Reason); 26] = [
            ("", RouteError::Path),
            ("login", RouteError::Path),
            ("POST login", RouteError::Path),
            ("GET /a b", RouteError::Path),
            ("/a?b", RouteError::Path),
            ("/a#b", RouteError::Path),
            ("/a\u{7f}", RouteError::Path),
            ("P@ST /x", RouteError::Method),
            ("get /x", RouteError::Method),
            ("PURGE /x", RouteError::Method),
            ("/a*", RouteError::Wildcard),
            ("/a/*/b", RouteError::Wildcard),
            ("/{*a}/b", RouteError::Wildcard),
            ("/{*a}/", RouteError::Wildcard),
            ("/a//b", RouteError::EmptySegment),
            ("//", RouteError::EmptySegment),
            ("/a//*", RouteError::EmptySegment),
            ("/a/{", RouteError::Parameter),
            ("/a/{}", RouteError::Parameter),
            ("/a/{*}", RouteError::Parameter),
            ("/a/x{id}", RouteError::Parameter),
            ("/a/{id}x", RouteError::Parameter),
            ("/a/{i{d}", RouteError::Parameter),
            ("/{a}/{a}", RouteError::DuplicateParameter),
            ("/{a}/{*a}", RouteError::DuplicateParameter),
            ("/users/:id", RouteError::OldSyntax),
        ];
        for (bad, want) in cases {
            assert_eq!(
                RoutePattern::parse(bad),
                Err(want(bad.to_owned())),
                "{bad:?}"
            );
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
        let name = |m, path| {
            table
                .find(&m, path, None)
                .map(|i| table.get(i).label.sf_name())
        };
        assert_eq!(name(Method::POST, "/login"), Some("\"login\""));
        assert_eq!(name(Method::GET, "/login"), Some("\"all\""));
        let table = PolicyTable {
            routes: vec![(RoutePattern::parse("POST /login").unwrap(), p("login"))],
            default: None,
        };
        assert_eq!(table.find(&Method::GET, "/", None), None);
    }

    /// The guide's rule (`docs/guide/http.md`, "Route rules"), written plainly over the
    /// pattern's text: split both paths at every '/'; `{name}` is any segment, empty only if
    /// not the path's last, other segments are equal text; a final `/*` takes the segments
    /// before it and anything after; a final `{*name}` one or more bytes after a slash.
    fn reference(pattern_path: &str, path: &str) -> bool {
        let Some(path) = path.strip_prefix('/') else {
            return false;
        };
        let xs: Vec<&str> = path.split('/').collect();
        let mut ps: Vec<&str> = pattern_path[1..].split('/').collect();
        let seg = |i: usize, p: &str, x: &str| {
            if p.starts_with('{') {
                !x.is_empty() || i + 1 < xs.len()
            } else {
                p == x
            }
        };
        let prefix = |ps: &[&str]| {
            xs.len() >= ps.len()
                && ps
                    .iter()
                    .zip(&xs)
                    .enumerate()
                    .all(|(i, (p, x))| seg(i, p, x))
        };
        match ps.last().copied() {
            Some("*") => {
                ps.pop();
                prefix(&ps)
            }
            Some(last) if last.starts_with("{*") => {
                ps.pop();
                prefix(&ps) && xs.len() > ps.len() && !xs[ps.len()..].join("/").is_empty()
            }
            _ => xs.len() == ps.len() && prefix(&ps),
        }
    }

    /// Methods as the guide says: a rule's own, and HEAD under GET; any without a method.
    fn reference_method(rule: Option<&str>, method: &Method) -> bool {
        match rule {
            None => true,
            Some(m) => m == method.as_str() || (m == "GET" && *method == Method::HEAD),
        }
    }

    /// Patterns in the syntax: literal segments, parameters (distinct names), a trailing
    /// slash, a final wildcard or subtree.
    fn valid_pattern() -> impl Strategy<Value = String> {
        let seg = prop_oneof![
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just("%41".to_owned()),
            Just("..".to_owned()),
            Just("é".to_owned()),
            Just("{}".to_owned()),
        ];
        let method = prop_oneof![Just(""), Just("GET "), Just("HEAD "), Just("POST ")];
        (method, prop::collection::vec(seg, 0..5), 0..4u8).prop_map(|(m, segs, end)| {
            let mut p = String::new();
            for (i, s) in segs.iter().enumerate() {
                p.push('/');
                if s == "{}" {
                    p.push_str(&format!("{{n{i}}}"));
                } else {
                    p.push_str(s);
                }
            }
            match end {
                0 if !p.is_empty() => {}
                1 => p.push('/'),
                2 => p.push_str("/{*rest}"),
                _ => p.push_str("/*"),
            }
            if p.is_empty() {
                p.push('/');
            }
            format!("{m}{p}")
        })
    }

    /// Paths a client may send: the same pieces, empty, dot and percent-encoded segments,
    /// other bytes, very long segments.
    fn hostile_path() -> impl Strategy<Value = String> {
        let seg = prop_oneof![
            Just("a".to_owned()),
            Just("A".to_owned()),
            Just("b".to_owned()),
            Just("%41".to_owned()),
            Just("%61".to_owned()),
            Just("%2F".to_owned()),
            Just("..".to_owned()),
            Just(".".to_owned()),
            Just("é".to_owned()),
            Just(String::new()),
            Just("{n0}".to_owned()),
            Just("*".to_owned()),
            any::<String>(),
            Just("z".repeat(100_000)),
        ];
        (
            prop::collection::vec(seg, 0..6),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(segs, slash, relative)| {
                let mut path = String::new();
                for s in segs {
                    path.push('/');
                    path.push_str(&s);
                }
                if slash || path.is_empty() {
                    path.push('/');
                }
                if relative {
                    path.remove(0);
                }
                path
            })
    }

    fn any_method() -> impl Strategy<Value = Method> {
        prop_oneof![
            Just(Method::GET),
            Just(Method::HEAD),
            Just(Method::POST),
            Just(Method::from_bytes(b"get").unwrap()),
        ]
    }

    /// Splits a pattern as the guide describes: an optional method, one space, the path.
    fn split(pattern: &str) -> (Option<&str>, &str) {
        match pattern.split_once(' ') {
            Some((m, path)) => (Some(m), path),
            None => (None, pattern),
        }
    }

    /// Whitespace and control characters a pattern might hold by mistake or by malice.
    fn hostile_char() -> impl Strategy<Value = char> {
        prop_oneof![
            Just(' '),
            Just('\t'),
            Just('\r'),
            Just('\n'),
            Just('\u{b}'),
            Just('\u{c}'),
            Just('\0'),
            Just('\u{7f}'),
            Just('\u{85}'),
            Just('\u{a0}'),
            Just('\u{2028}'),
            Just('\u{3000}'),
        ]
    }

    proptest! {
        #[test]
        fn valid_patterns_match_as_the_plain_rule_says(
            pattern in valid_pattern(),
            paths in prop::collection::vec((any_method(), hostile_path()), 1..10),
        ) {
            let parsed = RoutePattern::parse(&pattern);
            prop_assert!(parsed.is_ok(), "{:?}: {:?}", pattern, parsed);
            let parsed = parsed.unwrap();
            let (rule_method, rule_path) = split(&pattern);
            for (method, path) in paths {
                prop_assert_eq!(
                    parsed.matches(&method, &path, None),
                    reference_method(rule_method, &method) && reference(rule_path, &path),
                    "{:?} {} {:?}", pattern, method, path
                );
            }
        }

        #[test]
        fn any_pattern_text_is_refused_or_matches_as_the_plain_rule_says(
            pattern in prop_oneof![
                any::<String>(),
                "(GET |get |HEAD |POST | )?[/a{}*: %.?#é\t]{0,16}",
            ],
            paths in prop::collection::vec(hostile_path(), 1..6),
            templates in prop::collection::vec("[/a{}*]{0,12}", 0..3),
        ) {
            let Ok(parsed) = RoutePattern::parse(&pattern) else {
                return Ok(());
            };
            let (_, rule_path) = split(&pattern);
            for path in paths {
                prop_assert_eq!(
                    parsed.matches(&Method::POST, &path, None),
                    parsed.method.as_ref().is_none_or(|m| *m == Method::POST) && reference(rule_path, &path),
                    "{:?} {:?}", pattern, path
                );
            }
            for template in templates {
                // Never panics, and a template only adds matches.
                let _ = parsed.matches(&Method::GET, "/", Some(&template));
            }
        }

        #[test]
        fn accepted_patterns_hold_no_whitespace_but_the_one_space_after_a_method(
            pattern in prop_oneof![valid_pattern(), any::<String>()],
            at in any::<prop::sample::Index>(),
            c in hostile_char(),
        ) {
            let Ok(parsed) = RoutePattern::parse(&pattern) else {
                return Ok(());
            };
            let (method, path) = split(&pattern);
            prop_assert_eq!(method.is_some(), parsed.method.is_some(), "{:?}", pattern);
            prop_assert!(
                !path.chars().any(|c| c.is_whitespace() || c.is_control()),
                "{:?}", pattern
            );
            // Any whitespace or control character added anywhere is refused, with a
            // `RouteError` (a method misspelt by it is a `Method` error, the rest `Path`).
            let mut chars: Vec<char> = pattern.chars().collect();
            let at = at.index(chars.len() + 1);
            chars.insert(at, c);
            let hostile: String = chars.into_iter().collect();
            let err = RoutePattern::parse(&hostile);
            prop_assert!(
                matches!(err, Err(RouteError::Path(_) | RouteError::Method(_))),
                "{:?}: {:?}", hostile, err
            );
            if at >= pattern.len() - path.len() {
                prop_assert_eq!(err, Err(RouteError::Path(hostile.clone())), "{:?}", hostile);
            }
        }
    }
}
