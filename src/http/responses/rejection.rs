//! The responses the layer makes itself: `429 Too Many Requests`, `503 Service Unavailable`
//! for a new client a full key table refused (gRPC `UNAVAILABLE`), and the answers to key and
//! backend failures, as plain HTTP or as a gRPC status.
//!
//! Every one carries `Cache-Control: no-store`: a cached 429 would keep limiting a client after
//! its limit has come back. gRPC calls (request `content-type: application/grpc...`) get a
//! gRPC "trailers-only" response instead: HTTP 200 with `grpc-status` (8,
//! `RESOURCE_EXHAUSTED`, for a limited call) and `grpc-message`, which gRPC clients read as
//! the call's status, while HTTP 429 would reach them as `UNAVAILABLE`.

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use super::headers::RateHeaders;

/// What a response made by the layer is about: `status`, a short `title` and a `detail`
/// sentence (RFC 9457 problem details members).
///
/// ```
/// use tollgate::http::StatusCode;
/// use tollgate::http::Problem;
/// let p = Problem::new(StatusCode::TOO_MANY_REQUESTS, "retry after 2 s");
/// assert_eq!(p.title(), "Too Many Requests");
/// assert_eq!(p.detail(), "retry after 2 s");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    status: StatusCode,
    detail: String,
}

impl Problem {
    /// A problem with `status` and `detail`; the title is the status's reason phrase.
    ///
    /// ```
    /// let p = tollgate::http::Problem::new(tollgate::http::StatusCode::BAD_REQUEST, "no key");
    /// assert_eq!(p.status(), 400);
    /// ```
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            detail: detail.into(),
        }
    }

    /// The HTTP status.
    ///
    /// ```
    /// let p = tollgate::http::Problem::new(tollgate::http::StatusCode::TOO_MANY_REQUESTS, "");
    /// assert_eq!(p.status().as_u16(), 429);
    /// ```
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The status's reason phrase (`"Too Many Requests"`).
    ///
    /// ```
    /// let p = tollgate::http::Problem::new(tollgate::http::StatusCode::SERVICE_UNAVAILABLE, "");
    /// assert_eq!(p.title(), "Service Unavailable");
    /// ```
    pub fn title(&self) -> &'static str {
        self.status.canonical_reason().unwrap_or("Error")
    }

    /// One sentence on what happened.
    ///
    /// ```
    /// let p = tollgate::http::Problem::new(tollgate::http::StatusCode::TOO_MANY_REQUESTS, "slow down");
    /// assert_eq!(p.detail(), "slow down");
    /// ```
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The problem as `application/problem+json` (RFC 9457).
    ///
    /// ```
    /// let p = tollgate::http::Problem::new(tollgate::http::StatusCode::TOO_MANY_REQUESTS, "say \"when\"");
    /// assert_eq!(
    ///     p.to_json(),
    ///     r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"say \"when\""}"#
    /// );
    /// ```
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(96 + self.detail.len());
        out.push_str(r#"{"type":"about:blank","title":"#);
        json_string(&mut out, self.title());
        out.push_str(r#","status":"#);
        out.push_str(&self.status.as_u16().to_string());
        out.push_str(r#","detail":"#);
        json_string(&mut out, &self.detail);
        out.push('}');
        out
    }
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// How the layer makes the body of its own responses, for a response body type `B`.
///
/// The layer keeps the inner service's response type, so it can only build bodies that type
/// can hold: [`NoBody`] needs `B: Default` (every common body type), [`ProblemJson`] needs
/// `B: From<Bytes>` (axum's `Body`, `http_body_util::Full<Bytes>`). Implement it for a body
/// format of your own.
///
/// ```
/// use bytes::Bytes;
/// use tollgate::http::HeaderValue;
/// use tollgate::http::{Problem, RejectBody};
///
/// /// Plain-text bodies.
/// struct Text;
/// impl RejectBody<String> for Text {
///     fn body(&self, p: &Problem) -> (String, Option<HeaderValue>) {
///         (p.detail().to_owned(), Some(HeaderValue::from_static("text/plain")))
///     }
///     fn empty(&self) -> String { String::new() }
/// }
/// ```
pub trait RejectBody<B>: Send + Sync + 'static {
    /// The body for `problem`, and its content type (`None`: no `Content-Type`).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use tollgate::http::{Problem, ProblemJson, RejectBody, StatusCode};
    ///
    /// let problem = Problem::new(StatusCode::TOO_MANY_REQUESTS, "slow down");
    /// let (body, content_type): (Bytes, _) = ProblemJson.body(&problem);
    /// assert_eq!(body, problem.to_json());
    /// assert_eq!(content_type.unwrap(), "application/problem+json");
    /// ```
    fn body(&self, problem: &Problem) -> (B, Option<HeaderValue>);
    /// An empty body (gRPC responses carry everything in headers).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use tollgate::http::{NoBody, ProblemJson, RejectBody};
    ///
    /// let body: Bytes = ProblemJson.empty();
    /// assert!(body.is_empty());
    /// let body: String = NoBody.empty();
    /// assert!(body.is_empty());
    /// ```
    fn empty(&self) -> B;
}

/// Empty bodies (the default): status and headers say everything.
///
/// ```
/// use tollgate::http::{NoBody, Problem, RejectBody};
/// let (body, ctype): (String, _) = NoBody.body(&Problem::new(tollgate::http::StatusCode::TOO_MANY_REQUESTS, "x"));
/// assert!(body.is_empty() && ctype.is_none());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBody;

impl<B: Default> RejectBody<B> for NoBody {
    fn body(&self, _: &Problem) -> (B, Option<HeaderValue>) {
        (B::default(), None)
    }
    fn empty(&self) -> B {
        B::default()
    }
}

/// `application/problem+json` bodies (RFC 9457): `type`, `title`, `status`, `detail`.
///
/// ```
/// use tollgate::http::{Problem, ProblemJson, RejectBody};
/// let (body, ctype): (axum::body::Body, _) =
///     ProblemJson.body(&Problem::new(tollgate::http::StatusCode::TOO_MANY_REQUESTS, "x"));
/// assert_eq!(ctype.unwrap(), "application/problem+json");
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ProblemJson;

impl<B: From<Bytes>> RejectBody<B> for ProblemJson {
    fn body(&self, problem: &Problem) -> (B, Option<HeaderValue>) {
        (
            B::from(Bytes::from(problem.to_json())),
            Some(HeaderValue::from_static("application/problem+json")),
        )
    }
    fn empty(&self) -> B {
        B::from(Bytes::new())
    }
}

/// Whether a request with these headers is a gRPC call.
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The gRPC status for the HTTP status the layer would have answered with.
pub(crate) fn grpc_code(status: StatusCode) -> u8 {
    match status.as_u16() {
        429 | 413 => 8,  // RESOURCE_EXHAUSTED
        400 => 3,        // INVALID_ARGUMENT
        401 => 16,       // UNAUTHENTICATED
        403 => 7,        // PERMISSION_DENIED
        503 => 14,       // UNAVAILABLE
        500..=599 => 13, // INTERNAL
        _ => 2,          // UNKNOWN
    }
}

/// gRPC's `grpc-message` encoding: percent-encode everything outside printable ASCII, and `%`.
fn grpc_message(detail: &str) -> HeaderValue {
    let mut out = String::with_capacity(detail.len());
    for b in detail.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::try_from(out).unwrap_or(HeaderValue::from_static("rate limited"))
}

/// The header that names a key error's reason on the layer's plain-HTTP answers, whatever the
/// body type (the default empty bodies cannot hold it). No standard header fits, and RFC 6648
/// retired the `X-` prefix.
pub(crate) const TOLLGATE_ERROR: &str = "tollgate-error";

/// Adds a key error's `reason` to a response the layer made: as `Tollgate-Error`, encoded as
/// `grpc-message` is (printable ASCII as is, other bytes and `%` percent-encoded), so that no
/// reason can make an invalid header. gRPC answers already carry it in `grpc-message`.
pub(crate) fn name_reason<B>(res: &mut Response<B>, reason: &str, grpc: bool) {
    if !grpc {
        res.headers_mut()
            .insert(TOLLGATE_ERROR, grpc_message(reason));
    }
}

/// A response the layer answers with instead of calling the inner service.
pub(crate) fn reject<B, R: RejectBody<B>>(
    body: &R,
    problem: &Problem,
    grpc: bool,
    headers: Option<RateHeaders>,
) -> Response<B> {
    let mut res = if grpc {
        let mut res = Response::new(body.empty());
        let h = res.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert(
            "grpc-status",
            HeaderValue::from(u16::from(grpc_code(problem.status()))),
        );
        h.insert("grpc-message", grpc_message(problem.detail()));
        res
    } else {
        let (b, content_type) = body.body(problem);
        let mut res = Response::new(b);
        *res.status_mut() = problem.status();
        if let Some(ct) = content_type {
            res.headers_mut().insert(CONTENT_TYPE, ct);
        }
        res
    };
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(h) = headers {
        h.write(res.headers_mut());
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_quotes_backslashes_and_controls() {
        let p = Problem::new(StatusCode::BAD_REQUEST, "a\"b\\c\nd\u{1}é");
        assert_eq!(
            p.to_json(),
            r#"{"type":"about:blank","title":"Bad Request","status":400,"detail":"a\"b\\c\u000ad\u0001é"}"#
        );
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(grpc_message("100% é"), "100%25 %C3%A9");
        assert_eq!(grpc_code(StatusCode::TOO_MANY_REQUESTS), 8);
        assert_eq!(grpc_code(StatusCode::SERVICE_UNAVAILABLE), 14);
        assert_eq!(grpc_code(StatusCode::INTERNAL_SERVER_ERROR), 13);
        assert_eq!(grpc_code(StatusCode::IM_A_TEAPOT), 2);
    }

    #[test]
    fn rejections_are_not_cacheable_and_grpc_is_trailers_only() {
        let p = Problem::new(StatusCode::TOO_MANY_REQUESTS, "slow down");
        let res: Response<Vec<u8>> = reject(&ProblemJson, &p, false, None);
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers()[CACHE_CONTROL], "no-store");
        assert_eq!(res.headers()[CONTENT_TYPE], "application/problem+json");
        assert_eq!(res.body(), p.to_json().as_bytes());
        let res: Response<Vec<u8>> = reject(&ProblemJson, &p, true, None);
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["grpc-status"], "8");
        assert_eq!(res.headers()["grpc-message"], "slow down");
        assert_eq!(res.headers()[CONTENT_TYPE], "application/grpc");
        assert!(res.body().is_empty());
        let res: Response<Vec<u8>> = reject(&NoBody, &p, false, None);
        assert!(res.body().is_empty() && res.headers().get(CONTENT_TYPE).is_none());
    }

    #[test]
    fn a_reason_header_is_valid_whatever_the_reason() {
        let mut res = Response::new(());
        name_reason(&mut res, "bad\r\nheader: é 100%", false);
        assert_eq!(
            res.headers()[TOLLGATE_ERROR],
            "bad%0D%0Aheader: %C3%A9 100%25"
        );
        let mut res = Response::new(());
        name_reason(&mut res, "in grpc-message instead", true);
        assert!(res.headers().get(TOLLGATE_ERROR).is_none());
    }
}
