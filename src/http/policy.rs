//! The policy table: which limit applies to a request, by method and path.
//!
//! Routes are written as people write them in docs, `"POST /login"` or `"/api/*"` (any
//! method), and matched in the order they were added; the first match wins, and a request
//! that matches no route falls back to the default policy, if there is one, or is not limited.
//!
//! Beside the table, each policy's running state: [`ops`] (indexed like the table), its
//! enforcement switch ([`shadow`]) and its counters ([`stats`]).

pub(super) mod ops;
pub(super) mod shadow;
pub(super) mod stats;

use std::sync::Arc;

use http::Method;

use super::error::{BuildError, RouteError};
use super::rate::backend::Backend;
use super::responses::headers::{PolicyLabel, RatePolicy};

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
    /// Whether a literal segment holds a `%`: without one, and without one in the request's
    /// path, decoding changes nothing and the byte-for-byte match decides.
    percent: bool,
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
        let percent = segments
            .iter()
            .any(|s| matches!(s, Segment::Literal(lit) if lit.contains('%')));
        Ok(RoutePattern {
            method,
            segments: segments.into(),
            end,
            percent,
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
    ///
    /// A router matches literal segments byte for byte but percent-decodes parameters, so
    /// `/users/%37/export` reaches the `/users/{id}/export` handler as id `7`, and the rule
    /// `GET /users/7/export` must cover it: with the template the path follows, the rule
    /// matches the values the handler sees ([`matches_units`](Self::matches_units)); without
    /// one, byte for byte ([`matches_path`](Self::matches_path)) or under any reading of
    /// which segments are parameters ([`matches_any_reading`](Self::matches_any_reading)).
    /// Either way a rule that covers the whole template matches.
    pub(crate) fn matches(&self, method: &Method, path: &str, template: Option<&str>) -> bool {
        if !self.covers_method(method) {
            return false;
        }
        if template.is_some_and(|t| self.matches_path(t, true)) {
            return true;
        }
        // Without a `%` on either side decoding changes nothing: every reading is the
        // byte-for-byte one.
        if !self.percent && !path.contains('%') {
            return self.matches_path(path, false);
        }
        let Some(after) = path.strip_prefix('/') else {
            return false;
        };
        match template.and_then(|t| align(after, t)) {
            Some(units) => self.matches_units(&units),
            None => self.matches_path(path, false) || self.matches_any_reading(after),
        }
    }

    /// Without a template the path follows (the layer runs before routing, or there is no
    /// axum router), any segment may be a parameter and any rest a wildcard: the rule
    /// matches (`path` after its leading slash) if it matches with the first `k` segments
    /// decoded one by one and the rest decoded as one value, for some `k`. That counts
    /// percent-encoded spellings a router would not send to the handler too (a 404 then
    /// costs a permit), but lets no spelling of a handler's values past the rule.
    fn matches_any_reading(&self, after: &str) -> bool {
        // Segment starts, as far as the rule's segments reach (and one more): a hostile path
        // of many segments costs no more than a short one.
        let bound = self.segments.len() + 1;
        let mut starts = vec![0];
        while starts.len() <= bound {
            let last = *starts.last().expect("starts with 0");
            match after[last..].find('/') {
                Some(i) => starts.push(last + i + 1),
                None => break,
            }
        }
        // Past the bound, the last start begins everything after the rule's reach: it is
        // only ever the start of a rest.
        let truncated = starts.len() > bound;
        let ks = if truncated {
            starts.len()
        } else {
            starts.len() + 1
        };
        (0..ks).any(|k| {
            let mut units: Vec<Unit<'_>> = Vec::with_capacity(k + 1);
            for j in 0..k {
                let end = starts.get(j + 1).map_or(after.len(), |next| next - 1);
                units.push(Unit::Param(&after[starts[j]..end], ""));
            }
            if let Some(&start) = starts.get(k) {
                units.push(Unit::Wildcard(&after[start..], ""));
            }
            self.matches_units(&units)
        })
    }

    /// The rule over a request's path split into units (see [`align`]): the values a handler
    /// sees. Literal units as written (the router matched them byte for byte), each
    /// parameter percent-decoded, and a wildcard's whole rest decoded and split again at every
    /// `/` (axum decodes the rest as one value, so `%2F` in it is a `/`). The rule's literal
    /// segments are decoded where they meet a parameter or a wildcard, so any two spellings of
    /// the same values meet the rule alike. Bytes are compared, not text: a value that is not
    /// UTF-8 once decoded is refused by axum's `Path` extractor anyway, and equal bytes are
    /// equal values whatever the handler makes of them.
    fn matches_units(&self, units: &[Unit<'_>]) -> bool {
        let segments = &self.segments[..];
        for (u, unit) in units.iter().enumerate() {
            let (raw, prefix) = match *unit {
                Unit::Wildcard(raw, prefix) => {
                    return self.matches_rest(
                        &segments[u.min(segments.len())..],
                        raw,
                        prefix,
                        u >= segments.len(),
                    )
                }
                Unit::Literal(raw) => (raw, None),
                Unit::Param(raw, prefix) => (raw, Some(prefix)),
            };
            let Some(segment) = segments.get(u) else {
                // The rule ends here and the path goes on.
                return match self.end {
                    End::Exact => false,
                    End::Subtree => true,
                    End::Wildcard => !raw.is_empty() || u + 1 < units.len(),
                };
            };
            let more = u + 1 < units.len();
            let ok = match (segment, prefix) {
                (Segment::Param, _) => !raw.is_empty() || more,
                (Segment::Literal(lit), None) => **lit == *raw,
                (Segment::Literal(lit), Some(prefix)) => {
                    lit.strip_prefix(prefix).is_some_and(|l| {
                        decode(l.as_bytes()).eq(decode(&raw.as_bytes()[prefix.len()..]))
                    })
                }
            };
            if !ok {
                return false;
            }
        }
        segments.len() == units.len() && self.end != End::Wildcard
    }

    /// The rule's `segments` (those from where the template's wildcard starts) over the
    /// wildcard's raw rest, whose first `prefix` bytes are the template's literal text:
    /// both decoded and split at every `/`. `ended`: the rule's segments ended before the
    /// wildcard.
    fn matches_rest(&self, segments: &[Segment], raw: &str, prefix: &str, ended: bool) -> bool {
        if ended {
            return match self.end {
                End::Exact => false,
                End::Subtree => true,
                End::Wildcard => !raw.is_empty(),
            };
        }
        let Some(value) = raw.strip_prefix(prefix) else {
            return false;
        };
        // The rule's literals decoded and split the same way (its first one must begin with
        // the template's literal text, which is not decoded); a parameter stays one piece.
        let mut rule: Vec<Option<Vec<u8>>> = Vec::with_capacity(segments.len());
        for (i, segment) in segments.iter().enumerate() {
            match segment {
                Segment::Param => rule.push(None),
                Segment::Literal(lit) => {
                    let lit = if i == 0 {
                        let Some(l) = lit.strip_prefix(prefix) else {
                            return false;
                        };
                        l
                    } else {
                        lit
                    };
                    let mut bytes = if i == 0 {
                        prefix.as_bytes().to_vec()
                    } else {
                        Vec::new()
                    };
                    bytes.extend(decode(lit.as_bytes()));
                    rule.extend(bytes.split(|&b| b == b'/').map(|p| Some(p.to_vec())));
                }
            }
        }
        // The rest decoded only as far as the rule reaches: one piece past it tells every
        // end apart, so a long hostile rest costs no more than that.
        let mut decoded = prefix.as_bytes().to_vec();
        let mut slashes = 0;
        for b in decode(value.as_bytes()) {
            if b == b'/' {
                slashes += 1;
                if slashes > rule.len() {
                    decoded.push(b);
                    break;
                }
            }
            decoded.push(b);
        }
        let pieces: Vec<&[u8]> = decoded.split(|&b| b == b'/').collect();
        if rule.len() > pieces.len() {
            return false;
        }
        let fits = rule
            .iter()
            .zip(&pieces)
            .enumerate()
            .all(|(i, (r, p))| match r {
                None => !p.is_empty() || i + 1 < pieces.len(),
                Some(lit) => lit == p,
            });
        fits && match self.end {
            End::Exact => rule.len() == pieces.len(),
            End::Subtree => true,
            // A slash and at least one more byte.
            End::Wildcard => {
                pieces.len() > rule.len() + 1
                    || pieces.get(rule.len()).is_some_and(|p| !p.is_empty())
            }
        }
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

/// A piece of a request's path, split along the route template the router matched.
#[derive(Clone, Copy, Debug)]
enum Unit<'a> {
    /// A literal segment of the template: the router matched it byte for byte.
    Literal(&'a str),
    /// A parameter's segment, raw, and the template's literal text before the parameter
    /// (`x` of `x{id}`; usually empty), which the segment begins with.
    Param(&'a str, &'a str),
    /// A wildcard's raw rest (every segment to the end), and the literal text before it.
    Wildcard(&'a str, &'a str),
}

/// Splits `path` (after its leading slash) along `template`'s segments: `None` if the path
/// does not follow the template (which a router never hands a layer, but a layer cannot rule
/// out), or the template holds escaped braces (`{{`, `}}`) in a segment that is not a plain
/// literal.
fn align<'a>(path: &'a str, template: &'a str) -> Option<Vec<Unit<'a>>> {
    let template = template.strip_prefix('/')?;
    let mut units = Vec::new();
    let mut rest = Some(path);
    let mut tsegs = template.split('/').peekable();
    while let Some(tseg) = tsegs.next() {
        let text = rest?;
        let (seg, next) = match text.split_once('/') {
            Some((seg, next)) => (seg, Some(next)),
            None => (text, None),
        };
        if is_escaped_literal(tseg) {
            if !literal_eq(tseg, seg) {
                return None;
            }
            units.push(Unit::Literal(seg));
        } else {
            // A parameter, maybe after literal text (`x{id}`); escaped braces in that text
            // are left to the conservative reading.
            let open = tseg.find('{')?;
            let prefix = &tseg[..open];
            if prefix.contains('}') || tseg[open + 1..].starts_with('{') {
                return None;
            }
            if tseg[open..].starts_with("{*") {
                if tsegs.peek().is_some() || !text.starts_with(prefix) {
                    return None;
                }
                units.push(Unit::Wildcard(text, prefix));
                return Some(units);
            }
            if !seg.starts_with(prefix) {
                return None;
            }
            units.push(Unit::Param(seg, prefix));
        }
        rest = next;
    }
    rest.is_none().then_some(units)
}

/// Whether a template segment is a literal: no brace, or only escaped ones (`{{`, `}}`).
fn is_escaped_literal(tseg: &str) -> bool {
    let b = tseg.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' | b'}' if b.get(i + 1) == Some(&b[i]) => i += 2,
            b'{' | b'}' => return false,
            _ => i += 1,
        }
    }
    true
}

/// Whether a path segment is the literal template segment `tseg` (braces escaped as `{{`,
/// `}}`).
fn literal_eq(tseg: &str, seg: &str) -> bool {
    let (t, s) = (tseg.as_bytes(), seg.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < t.len() {
        if j >= s.len() || t[i] != s[j] {
            return false;
        }
        i += if matches!(t[i], b'{' | b'}') { 2 } else { 1 };
        j += 1;
    }
    j == s.len()
}

/// Percent-decoding as axum decodes a parameter (the `percent-encoding` crate): `%` and two
/// hex digits (either case) is that byte; any other `%` is itself.
fn decode(raw: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut i = 0;
    std::iter::from_fn(move || {
        let b = *raw.get(i)?;
        if b == b'%' {
            if let (Some(h), Some(l)) = (
                raw.get(i + 1).and_then(|&b| hex(b)),
                raw.get(i + 2).and_then(|&b| hex(b)),
            ) {
                i += 3;
                // Two hex digits: at most 0xff.
                return Some((h * 16 + l) as u8);
            }
        }
        i += 1;
        Some(b)
    })
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

    /// Every policy in the order [`find`](PolicyTable::find) tries them: the routes, then the
    /// default.
    pub(crate) fn policies(&self) -> impl Iterator<Item = &P> {
        self.routes
            .iter()
            .map(|(_, policy)| policy)
            .chain(&self.default)
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
        assert!(!m("/export", Method::GET, "/EXPORT"));
        // With the route template the router matched: its literal segments byte for byte.
        let d = |pattern: &str, path: &str, template: &str| {
            RoutePattern::parse(pattern)
                .unwrap()
                .matches(&Method::GET, path, Some(template))
        };
        assert!(!d("/%65xport/1", "/export/1", "/export/{id}"));
    }

    #[test]
    fn a_literal_meets_a_parameter_or_wildcard_as_its_decoded_value() {
        let d = |pattern: &str, path: &str, template: Option<&str>| {
            RoutePattern::parse(pattern)
                .unwrap()
                .matches(&Method::GET, path, template)
        };
        let t = Some("/users/{id}/export");
        assert!(d("/users/7/export", "/users/%37/export", t));
        assert!(d("/users/%37/export", "/users/7/export", t));
        assert!(d("/users/%37/export", "/users/%37/export", t));
        assert!(!d("/users/7/export", "/users/%38/export", t));
        // "%" that starts no escape is itself, as axum's extractor reads it.
        assert!(d("/users/%25ZZ/export", "/users/%ZZ/export", t));
        assert!(d("/users/%FF/export", "/users/%ff/export", t));
        // A parameter's `%2F` is part of the one value.
        assert!(d("/users/a%2Fb/export", "/users/a%2fb/export", t));
        // Literal text before a parameter is the router's: matched byte for byte.
        assert!(d("/v7", "/v%37", Some("/v{n}")));
        assert!(!d("/%767", "/v7", Some("/v{n}")));
        // A wildcard's rest is decoded as one value: `%2F` is a `/` there.
        let w = Some("/files/{*rest}");
        assert!(d("/files/a/b", "/files/a%2Fb", w));
        assert!(d("/files/a%2Fb", "/files/a/b", w));
        assert!(d("/files/a/*", "/files/%61%2Fb", w));
        assert!(d("/files/{x}/b", "/files/a%2Fb", w));
        assert!(!d("/files/a", "/files/a%2Fb", w));
        assert!(d("/files/{*r}", "/files/%2F", w));
        // A rule's parameter is one segment of the values: the rest `a/b` is two, however
        // it is spelled.
        assert!(!d("/files/{x}", "/files/a%2Fb", w));
        assert!(!d("/files/{x}", "/files/a/b", w));
        assert!(!d("/{x}", "/%2f", Some("/{*rest}")));
        // The template's literal segments stay literal.
        assert!(!d("/%66iles/a", "/files/a", Some("/files/{x}")));
        // No template: any segment may be a parameter, any rest a wildcard.
        assert!(d("/users/7/export", "/users/%37/export", None));
        assert!(d("/files/a/b", "/files/a%2Fb", None));
        assert!(d("/export", "/%65xport", None));
        assert!(!d("/users/7/export", "/users/%38/export", None));
        assert!(!d("/a/{*r}", "/a%2F", None));
        // A template the path does not follow reads as no template.
        assert!(d("/users/7", "/users/%37", Some("/other")));
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

    /// A template's parameter and wildcard values, spelled two ways that decode alike: each
    /// piece raw or as `%XX` (either case of hex digit). `%Z` is a `%` that starts no escape,
    /// itself raw, as `%25Z` is; `é`, `/` in a parameter and `0xff` are always encoded.
    fn two_spellings() -> impl Strategy<Value = (String, String)> {
        let piece = prop_oneof![
            Just(&b"7"[..]),
            Just(&b"a"[..]),
            Just("é".as_bytes()),
            Just(&b"/"[..]),
            Just(&b"%Z"[..]),
            Just(&b"\xff"[..]),
            Just(&b"-"[..]),
        ];
        let one = |out: &mut String, p: &[u8], encode: bool, lower: bool| {
            let raw_ok = p
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-%/".contains(b));
            if raw_ok && !encode {
                out.push_str(std::str::from_utf8(p).unwrap());
                return;
            }
            for b in p {
                let e = format!("%{b:02X}");
                out.push_str(&if lower { e.to_lowercase() } else { e });
            }
        };
        prop::collection::vec((piece, any::<bool>(), any::<bool>(), any::<bool>()), 1..4).prop_map(
            move |pieces| {
                let (mut x, mut y) = (String::new(), String::new());
                for (p, ex, ey, lower) in pieces {
                    one(&mut x, p, ex, lower);
                    one(&mut y, p, ey, !lower);
                }
                (x, y)
            },
        )
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
                let got = parsed.matches(&method, &path, None);
                let want = reference_method(rule_method, &method) && reference(rule_path, &path);
                // Byte for byte, exactly; percent-encoded spellings may match too.
                prop_assert!(got || !want, "{:?} {} {:?}", pattern, method, path);
                if !pattern.contains('%') && !path.contains('%') {
                    prop_assert_eq!(got, want, "{:?} {} {:?}", pattern, method, path);
                }
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
                let got = parsed.matches(&Method::POST, &path, None);
                let want = parsed.method.as_ref().is_none_or(|m| *m == Method::POST)
                    && reference(rule_path, &path);
                prop_assert!(got || !want, "{:?} {:?}", pattern, path);
                if !pattern.contains('%') && !path.contains('%') {
                    prop_assert_eq!(got, want, "{:?} {:?}", pattern, path);
                }
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

        /// Two spellings of the same values for a template's parameters and wildcard meet
        /// every rule alike, with the template known and without it.
        #[test]
        fn spellings_of_the_same_values_meet_a_rule_alike(
            pattern in valid_pattern(),
            template in valid_pattern(),
            values in prop::collection::vec(two_spellings(), 6),
        ) {
            let parsed = RoutePattern::parse(&pattern).unwrap();
            let (_, template) = split(&template);
            if template.ends_with("/*") {
                return Ok(()); // the crate's subtree form is no axum template
            }
            // The template's parameters and wildcard filled in, one spelling and the other.
            let fill = |second: bool| {
                let mut path = String::new();
                for (i, seg) in template.split('/').skip(1).enumerate() {
                    path.push('/');
                    let (x, y) = &values[i % values.len()];
                    let v = if second { y } else { x };
                    if seg.starts_with("{*") {
                        path.push_str(v);
                    } else if seg.starts_with('{') {
                        // One segment: a raw `/` in the value would split it.
                        path.push_str(&v.replace('/', "%2F"));
                    } else {
                        path.push_str(seg);
                    }
                }
                path
            };
            let (a, b) = (fill(false), fill(true));
            // The literal rule that is one spelling of the values meets the other.
            if let Ok(literal) = RoutePattern::parse(&a) {
                prop_assert!(
                    literal.matches(&Method::GET, &b, Some(template)),
                    "{:?} under {:?}: {:?}", a, template, b
                );
                prop_assert!(literal.matches(&Method::GET, &b, None), "{:?}: {:?}", a, b);
            }
            prop_assert_eq!(
                parsed.matches(&Method::GET, &a, Some(template)),
                parsed.matches(&Method::GET, &b, Some(template)),
                "{:?} under {:?}: {:?} {:?}", pattern, template, a, b
            );
            // Without the template the layer may limit more, never a spelling of a matched
            // path's values less.
            if parsed.matches(&Method::GET, &a, Some(template)) {
                prop_assert!(parsed.matches(&Method::GET, &b, None), "{:?} {:?}", pattern, b);
            }
        }
    }
}
