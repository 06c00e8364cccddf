//! Rate-limit response headers: the IETF draft's `RateLimit-Policy` / `RateLimit`, the older
//! `RateLimit-Limit` / `-Remaining` / `-Reset` trio, `X-RateLimit-*`, and `Retry-After`.
//!
//! Every wait is whole seconds rounded **up**: a client that waits what a header says is never
//! early. `Retry-After` is at least 1. The policy's `q` per `w` is the configured rate, exact
//! where whole seconds allow it and otherwise rounded **down** ([`RatePolicy::advertised`]).

use std::time::Duration;

use bytes::Bytes;
use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::{Decision, Quota};

/// Which rate-limit headers the layer adds to allowed and limited responses.
///
/// `Retry-After` is sent on every `429` that can succeed later, whatever the style (it is
/// HTTP's own header, not a rate-limit one).
///
/// | style | headers (policy `default`, 100 per minute, 50 left, full again in 30 s) |
/// |---|---|
/// | `Ietf` (default) | `RateLimit-Policy: "default";q=100;w=60` and `RateLimit: "default";r=50;t=30` |
/// | `Legacy` | `RateLimit-Limit: 100`, `RateLimit-Remaining: 50`, `RateLimit-Reset: 30` |
/// | `XRateLimit` | `X-RateLimit-Limit: 100`, `X-RateLimit-Remaining: 50`, `X-RateLimit-Reset: 30` |
/// | `None` | none |
///
/// `RateLimit-Policy` states the quota's configured rate as `q` permits per `w` seconds (the
/// draft's `w` is whole seconds, "sub-second precision is not supported"):
/// - if the limit (GCRA's burst, a window algorithm's `L`) comes back in whole seconds, `q` is
///   the limit and `w` that time: `per_minute(100)` is `q=100;w=60`, 10 a minute in bursts of
///   3 is `q=3;w=18`, a window of `L` per `W` is `q=L;w=W`;
/// - otherwise `q / w` is the rate in lowest terms: 50/s in bursts of 1 is `q=50;w=1`, 1 per
///   1.5 s is `q=2;w=3`, a window of 2 per 100 ms is `q=20;w=1`;
/// - if that needs a `w` longer than an hour (or than the limit takes to come back, if that
///   is longer), `w` is that bound and `q` is rounded down: never a faster rate than
///   configured, and slower by less than one permit per `w`.
///
/// So a client pacing at `q` per `w` is never refused for going too fast; `r` says how many
/// it may take at once. (GCRA rounds its interval up to whole nanoseconds, so it can be slower
/// than the configured rate by under 1 ns per permit, which no client timer resolves.)
/// `Limit` in the older styles is the limit. `r` / `Remaining` is what could be taken right
/// now (on a `429` it can be above 0 when the request costs more than is left). `t` / `Reset`
/// is, on an allowed response, the seconds until the full limit is available again (the
/// decision's `reset_after`); on a `429` it is the
/// seconds until this request could pass, equal to `Retry-After`, so `Retry-After` is never
/// earlier than `t`. Resets are delta seconds, never timestamps.
///
/// Stacked layers: `Ietf` fields are lists, so each layer appends its own policy item (give
/// policies distinct names). The single-valued styles keep whichever layer reports the fewest
/// remaining, as earlier drafts of the same document advise when several limits apply.
///
/// ```
/// use tollgate::http::HeaderStyle;
/// assert_eq!(HeaderStyle::default(), HeaderStyle::Ietf);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// draft-ietf-httpapi-ratelimit-headers (from draft 08 on): `RateLimit-Policy` and
    /// `RateLimit`, Structured Fields lists keyed by policy name.
    #[default]
    Ietf,
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (the draft's earlier
    /// versions, still common).
    Legacy,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    XRateLimit,
    /// No rate-limit headers (`Retry-After` is still sent on `429`).
    None,
}

/// Whole seconds, rounded up (saturating).
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

/// `Retry-After` for a wait: rounded up, and at least 1 (a 0 invites an immediate retry that
/// fails again).
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    ceil_secs(wait).max(1)
}

/// The headers for one decision, made in `call` and written into the response.
#[derive(Clone, Debug)]
pub(crate) struct RateHeaders {
    fields: Fields,
    retry_after: Option<u64>,
}

#[derive(Clone, Debug)]
enum Fields {
    None,
    /// `RateLimit-Policy` and `RateLimit` values, formatted with the policy name.
    Ietf(HeaderValue, HeaderValue),
    /// Limit, remaining, reset under these names.
    Trio(&'static [HeaderName; 3], [u64; 3]),
}

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static LEGACY: [HeaderName; 3] = [
    HeaderName::from_static("ratelimit-limit"),
    HeaderName::from_static("ratelimit-remaining"),
    HeaderName::from_static("ratelimit-reset"),
];
static X_RATELIMIT: [HeaderName; 3] = [
    HeaderName::from_static("x-ratelimit-limit"),
    HeaderName::from_static("x-ratelimit-remaining"),
    HeaderName::from_static("x-ratelimit-reset"),
];

/// What a `RateLimit-Policy` item describes: a quota's limit and its configured rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RatePolicy {
    /// What can be taken at once: GCRA's burst, a window algorithm's `L`.
    limit: u64,
    /// The configured rate, `count` permits per `period` ns.
    count: u64,
    period: u64,
}

const NANOS_PER_SEC: u128 = 1_000_000_000;
/// The longest `w` chosen for exactness alone, unless the limit takes longer to come back.
const LONGEST_EXACT_W: u128 = 3600;

impl RatePolicy {
    /// The policy of `quota`: its burst (which window algorithms require to equal their `L`)
    /// at its configured rate.
    pub(crate) fn of(quota: &Quota) -> RatePolicy {
        RatePolicy {
            limit: quota.burst(),
            count: quota.count(),
            // At most `MAX_NANOS` (a quota's period is validated), so it fits.
            period: u64::try_from(quota.period().as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// `(q, w)`: `q` permits per `w` whole seconds (both at least 1), the configured rate
    /// `count / period` exactly if whole seconds allow it within the bound below, else rounded
    /// down by less than one permit per `w`:
    /// 1. `(limit, w)` if the limit comes back in `w` whole seconds (`limit * period / count`);
    /// 2. else the rate in lowest terms, if its `w` is at most `max(1 hour, the time the limit
    ///    takes to come back, rounded up)`;
    /// 3. else that bound as `w`, and `q = floor(w * rate)`.
    ///
    /// `q` never states a faster rate than configured. Integer arithmetic in `u128`, where a
    /// valid [`Quota`] comes nowhere near saturating (`count <= period <= 2^62`, and the limit
    /// comes back within `MAX_NANOS`, so `w` stays below `2^33`).
    pub(crate) fn advertised(&self) -> (u64, u64) {
        let (limit, period) = (u128::from(self.limit), u128::from(self.period));
        // q / w = count * 10^9 / period per second.
        let per_sec = u128::from(self.count).saturating_mul(NANOS_PER_SEC);
        let comes_back = limit.saturating_mul(period);
        if comes_back % per_sec == 0 {
            return (self.limit, saturate(comes_back / per_sec));
        }
        let bound = LONGEST_EXACT_W.max(comes_back.div_ceil(per_sec));
        let g = gcd(per_sec, period).max(1);
        let (q, w) = (per_sec / g, period / g);
        if w <= bound {
            return (saturate(q), saturate(w));
        }
        // bound >= limit * period / per_sec, so q >= limit >= 1.
        let q = bound.saturating_mul(per_sec) / period.max(1);
        (saturate(q), saturate(bound))
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn saturate(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// A policy's name as the IETF fields carry it (a Structured Fields string, quotes included),
/// with its `RateLimit-Policy` value made once for the policy it had when the layer was built;
/// a response made under another one (after `set_quota`) gets a freshly made one.
#[derive(Debug)]
pub(crate) struct PolicyLabel {
    sf_name: Box<str>,
    policy: RatePolicy,
    field: Option<HeaderValue>,
}

impl PolicyLabel {
    pub(crate) fn new(sf_name: Box<str>, policy: RatePolicy) -> PolicyLabel {
        let field = policy_field(&sf_name, policy);
        PolicyLabel {
            sf_name,
            policy,
            field,
        }
    }

    pub(crate) fn sf_name(&self) -> &str {
        &self.sf_name
    }

    /// The policy's name as given to the builder (the sf-string without its quotes).
    pub(crate) fn name(&self) -> &str {
        &self.sf_name[1..self.sf_name.len() - 1]
    }

    fn field(&self, policy: RatePolicy) -> Option<HeaderValue> {
        if policy == self.policy {
            self.field.clone()
        } else {
            policy_field(&self.sf_name, policy)
        }
    }
}

/// `"name";q=<q>;w=<w>` ([`RatePolicy::advertised`]). `None` only for a name that is not a
/// valid header value, which policy names are validated never to be.
fn policy_field(sf_name: &str, p: RatePolicy) -> Option<HeaderValue> {
    let (q, w) = p.advertised();
    HeaderValue::try_from(item(sf_name, b'q', q, b'w', w)).ok()
}

/// The longest `;a=x;b=y` tail of an [`item`]: two one-byte keys and two 20-digit numbers
/// (`u64::MAX` has 20).
const TAIL_MAX: usize = 2 * (3 + 20);

/// `name;a=1;b=2` in one allocation of exactly its size, without `core::fmt`: `format!` was
/// most of the headers' cost per request (it grows its string several times, and formats
/// integers through dynamic dispatch), and a `Vec` with room to spare becomes a `Bytes` (and
/// so a `HeaderValue`) only through a second allocation, where an exact one is taken over.
/// The tail is written backwards on the stack first, so its length is known without counting
/// digits beforehand.
fn item(sf_name: &str, a: u8, x: u64, b: u8, y: u64) -> Vec<u8> {
    let mut tail = [0u8; TAIL_MAX];
    let mut start = TAIL_MAX;
    for (key, value) in [(b, y), (a, x)] {
        start = put_decimal(&mut tail[..start], value);
        start -= 3;
        tail[start..start + 3].copy_from_slice(&[b';', key, b'=']);
    }
    let tail = &tail[start..];
    let mut out = Vec::with_capacity(sf_name.len() + tail.len());
    out.extend_from_slice(sf_name.as_bytes());
    out.extend_from_slice(tail);
    out
}

/// Writes `v` in decimal at the end of `buf` (which has room for its digits, at most 20),
/// three digits at a time from [`SMALL`]; returns where the number starts.
fn put_decimal(buf: &mut [u8], mut v: u64) -> usize {
    let mut end = buf.len();
    while v >= SMALL_BELOW {
        // Below 1000: fits.
        let i = (v % SMALL_BELOW) as usize;
        v /= SMALL_BELOW;
        buf[end - 3..end].copy_from_slice(&SMALL[3 * i..3 * i + 3]);
        end -= 3;
    }
    // Below 1000 here, with no leading zeros: the entry's last one, two or three digits.
    let i = v as usize;
    let n = 1 + usize::from(v >= 10) + usize::from(v >= 100);
    buf[end - n..end].copy_from_slice(&SMALL[3 * i + 3 - n..3 * i + 3]);
    end - n
}

/// The numbers below this have their header values in [`SMALL`], so sending one allocates
/// nothing: the single-valued styles' limits, remainders and resets, and `Retry-After`, are
/// mostly small.
const SMALL_BELOW: u64 = 1000;

/// `000` to `999`, three digits each; a number below [`SMALL_BELOW`] is the tail of its entry.
static SMALL: [u8; 3 * SMALL_BELOW as usize] = {
    let mut table = [0u8; 3 * SMALL_BELOW as usize];
    let mut v = 0;
    while v < SMALL_BELOW as usize {
        table[3 * v] = b'0' + (v / 100) as u8;
        table[3 * v + 1] = b'0' + (v / 10 % 10) as u8;
        table[3 * v + 2] = b'0' + (v % 10) as u8;
        v += 1;
    }
    table
};

/// `v` as a header value (what `HeaderValue::from(v)` makes), allocating nothing below
/// [`SMALL_BELOW`] and once otherwise (`HeaderValue::from(u64)` allocates twice).
fn decimal_value(v: u64) -> HeaderValue {
    let small = usize::try_from(v)
        .ok()
        .filter(|_| v < SMALL_BELOW)
        .map(|i| {
            let skip = usize::from(v < 100) + usize::from(v < 10);
            Bytes::from_static(&SMALL[3 * i + skip..3 * i + 3])
        });
    let bytes = small.unwrap_or_else(|| {
        let mut buf = [0u8; 20]; // u64::MAX has 20 digits
        let start = put_decimal(&mut buf, v);
        Bytes::copy_from_slice(&buf[start..])
    });
    // Digits are always a valid value.
    HeaderValue::from_maybe_shared(bytes).unwrap_or_else(|_| HeaderValue::from(v))
}

impl RateHeaders {
    /// The headers for decision `d` of the policy `label`, which is `policy` now.
    pub(crate) fn new(
        style: HeaderStyle,
        label: &PolicyLabel,
        policy: RatePolicy,
        d: &Decision,
    ) -> Self {
        let retry_after = d.retry_after.map(retry_after_secs);
        let (limit, remaining) = (d.limit, d.remaining);
        let reset = retry_after.unwrap_or_else(|| ceil_secs(d.reset_after));
        let fields = match style {
            HeaderStyle::Ietf => {
                // Checked as any header value (about a ninth of these headers' cost per
                // request; the bytes are the policy's validated name, ASCII letters, digits,
                // `;` and `=`, but skipping the check would take an `unsafe` whose argument
                // rests on every caller).
                let s = item(label.sf_name(), b'r', remaining, b't', reset);
                let value = HeaderValue::from_maybe_shared(Bytes::from(s)).ok();
                match label.field(policy).zip(value) {
                    Some((p, v)) => Fields::Ietf(p, v),
                    None => Fields::None, // names are validated printable ASCII: unreachable
                }
            }
            HeaderStyle::Legacy => Fields::Trio(&LEGACY, [limit, remaining, reset]),
            HeaderStyle::XRateLimit => Fields::Trio(&X_RATELIMIT, [limit, remaining, reset]),
            HeaderStyle::None => Fields::None,
        };
        RateHeaders {
            fields,
            retry_after,
        }
    }

    /// Writes the headers (and `Retry-After` if the decision has one) into `headers`. By
    /// value: the values move into the map (a clone of a value made for one response would
    /// allocate).
    pub(crate) fn write(self, headers: &mut HeaderMap) {
        match self.fields {
            // Lists: a layer further out appends its own item.
            Fields::Ietf(p, s) => {
                headers.append(RATELIMIT_POLICY, p);
                headers.append(RATELIMIT, s);
            }
            // Single values: keep the tighter of ours and any already there.
            Fields::Trio(names, values) => {
                let theirs = headers
                    .get(&names[1])
                    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
                if theirs.is_none_or(|r| r > values[1]) {
                    for (name, value) in names.iter().zip(values) {
                        headers.insert(name.clone(), decimal_value(value));
                    }
                }
            }
            Fields::None => {}
        }
        if let Some(secs) = self.retry_after {
            headers.insert(RETRY_AFTER, decimal_value(secs));
        }
    }

    /// The same headers without `Retry-After` (a shadow policy's: the response is no
    /// refusal).
    pub(crate) fn without_retry_after(mut self) -> Self {
        self.retry_after = None;
        self
    }

    /// The `Retry-After` value, if any.
    pub(crate) fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, remaining: u64, retry: Option<u64>, reset_ms: u64) -> Decision {
        let reset = Duration::from_millis(reset_ms);
        match (allowed, retry) {
            (true, _) => Decision::allowed(100, remaining, reset),
            (false, Some(r)) => Decision::denied(100, remaining, Duration::from_millis(r), reset),
            (false, None) => Decision::never(100, remaining, reset),
        }
    }

    fn rp(limit: u64, secs: u64) -> RatePolicy {
        RatePolicy::of(&Quota::new(limit, Duration::from_secs(secs)).unwrap())
    }

    fn label(name: &str, q: RatePolicy) -> PolicyLabel {
        PolicyLabel::new(format!("\"{name}\"").into(), q)
    }

    fn written(style: HeaderStyle, d: Decision) -> HeaderMap {
        let mut h = HeaderMap::new();
        let q = rp(100, 60);
        RateHeaders::new(style, &label("default", q), q, &d).write(&mut h);
        h
    }

    #[test]
    fn items_format_every_integer() {
        for v in [0, 7, 10, 99, 100, 1234567890, u64::MAX] {
            let got = item("\"n\"", b'a', v, b'b', v / 3);
            assert_eq!(
                String::from_utf8(got).unwrap(),
                format!("\"n\";a={v};b={}", v / 3)
            );
        }
    }

    #[test]
    fn decimal_values_are_what_http_makes() {
        let around = |v: u64| v.saturating_sub(2)..=v.saturating_add(2);
        let values = [0, 10, 100, SMALL_BELOW, 1_000_000, u64::MAX];
        for v in values.into_iter().flat_map(around).chain(0..SMALL_BELOW) {
            assert_eq!(decimal_value(v), HeaderValue::from(v), "{v}");
        }
    }

    #[test]
    fn items_take_exactly_their_size() {
        for v in [0, 9, 10, 12345, u64::MAX] {
            let mut got = item("\"policy\"", b'r', v, b't', v / 7);
            assert!(got.spare_capacity_mut().is_empty(), "{v}");
        }
    }

    #[test]
    fn rounding_is_up_and_retry_after_never_zero() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1000)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::MAX), u64::MAX);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(10)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(2500)), 3);
    }

    #[test]
    fn ietf_fields_on_allowed_and_limited() {
        let h = written(HeaderStyle::Ietf, decision(true, 50, None, 29_400));
        assert_eq!(h["ratelimit-policy"], "\"default\";q=100;w=60");
        assert_eq!(h["ratelimit"], "\"default\";r=50;t=30");
        assert!(h.get("retry-after").is_none());
        let h = written(HeaderStyle::Ietf, decision(false, 0, Some(600), 59_000));
        assert_eq!(h["ratelimit"], "\"default\";r=0;t=1");
        assert_eq!(h["retry-after"], "1");
    }

    #[test]
    fn never_passing_requests_get_no_retry_after() {
        // 7 left, but the request costs more than the burst: r tells the truth.
        let h = written(HeaderStyle::Ietf, decision(false, 7, None, 5_500));
        assert_eq!(h["ratelimit"], "\"default\";r=7;t=6");
        assert!(h.get("retry-after").is_none());
    }

    #[test]
    fn legacy_and_x_styles_keep_the_tighter_layer() {
        for (style, prefix) in [(HeaderStyle::Legacy, ""), (HeaderStyle::XRateLimit, "x-")] {
            let mut h = written(style, decision(true, 50, None, 30_000));
            assert_eq!(h[format!("{prefix}ratelimit-limit")], "100");
            assert_eq!(h[format!("{prefix}ratelimit-remaining")], "50");
            assert_eq!(h[format!("{prefix}ratelimit-reset")], "30");
            let q = rp(100, 60);
            RateHeaders::new(style, &label("o", q), q, &decision(true, 80, None, 1_000))
                .write(&mut h);
            assert_eq!(h[format!("{prefix}ratelimit-remaining")], "50");
            RateHeaders::new(style, &label("o", q), q, &decision(true, 10, None, 1_000))
                .write(&mut h);
            assert_eq!(h[format!("{prefix}ratelimit-remaining")], "10");
            assert_eq!(h[format!("{prefix}ratelimit-reset")], "1");
            assert!(h.get("ratelimit").is_none());
        }
    }

    #[test]
    fn none_style_still_sends_retry_after() {
        let h = written(HeaderStyle::None, decision(false, 0, Some(1500), 1500));
        assert_eq!(h.len(), 1);
        assert_eq!(h["retry-after"], "2");
    }

    #[test]
    fn ietf_items_from_stacked_layers_append() {
        let mut h = written(HeaderStyle::Ietf, decision(true, 50, None, 30_000));
        let q = rp(5, 1);
        RateHeaders::new(
            HeaderStyle::Ietf,
            &label("per-key", q),
            q,
            &decision(true, 4, None, 200),
        )
        .write(&mut h);
        let all: Vec<_> = h.get_all("ratelimit").iter().collect();
        assert_eq!(all, ["\"default\";r=50;t=30", "\"per-key\";r=4;t=1"]);
        let all: Vec<_> = h.get_all("ratelimit-policy").iter().collect();
        assert_eq!(all, ["\"default\";q=100;w=60", "\"per-key\";q=5;w=1"]);
    }

    #[test]
    fn the_policy_field_follows_a_quota_change() {
        let built = rp(100, 60);
        let now = rp(10, 3600);
        let mut h = HeaderMap::new();
        RateHeaders::new(
            HeaderStyle::Ietf,
            &label("p", built),
            now,
            &decision(true, 9, None, 1),
        )
        .write(&mut h);
        assert_eq!(h["ratelimit-policy"], "\"p\";q=10;w=3600");
    }

    fn advertised(count: u64, period: Duration, burst: u64) -> (u64, u64) {
        let q = Quota::new(count, period)
            .unwrap()
            .with_burst(burst)
            .unwrap();
        RatePolicy::of(&q).advertised()
    }

    /// 50/s in bursts of 1 was advertised as `q=1;w=1` (its 20 ms tolerance
    /// rounded up to a second), and so was 10/s: a client pacing by it ran up to 50 times
    /// slower than allowed.
    #[test]
    fn fifty_per_second_in_bursts_of_one_is_fifty_per_second() {
        let q = Quota::per_second(50).unwrap().with_burst(1).unwrap();
        let mut h = HeaderMap::new();
        let p = RatePolicy::of(&q);
        RateHeaders::new(
            HeaderStyle::Ietf,
            &label("p", p),
            p,
            &decision(true, 1, None, 20),
        )
        .write(&mut h);
        assert_eq!(h["ratelimit-policy"], "\"p\";q=50;w=1");
    }

    #[test]
    fn the_policy_states_the_configured_rate() {
        let (s, ms, ns) = (
            Duration::from_secs,
            Duration::from_millis,
            Duration::from_nanos,
        );
        for (count, period, burst, want) in [
            (50, s(1), 1, (50, 1)),
            (10, s(1), 1, (10, 1)),
            (1, ms(1500), 1, (2, 3)),
            (100, s(60), 100, (100, 60)),
            (100, s(60), 5, (5, 3)),
            (10, s(60), 3, (3, 18)),
            (3, s(1), 3, (3, 1)), // GCRA's interval is 333,333,334 ns: not what is stated
            (3, s(1), 2, (3, 1)),
            (2, ms(100), 2, (20, 1)),
            (7, ms(1501), 7, (7000, 1501)),
            (10_000, s(86_400), 10_000, (10_000, 86_400)),
            (1, ns(1), 1, (1_000_000_000, 1)),
            // Exact only with w = 333,333,333 s: an hour, rounded down (3.000000003/s).
            (1, ns(333_333_333), 1, (10_800, 3600)),
            (1, ns(333_333_333), 20_000, (20_001, 6667)), // the limit comes back in 6,666.7 s
            // Exact only with w = 200,001 s: the time the limit comes back in, rounded up.
            (1, ms(100_000_500), 1, (1, 100_001)),
            (1, ns(crate::MAX_NANOS), 1, (1, 4_611_686_019)),
        ] {
            assert_eq!(
                advertised(count, period, burst),
                want,
                "{count} per {period:?} burst {burst}"
            );
        }
    }

    use proptest::prelude::*;

    /// Periods people write (whole seconds, whole milliseconds) and any nanosecond count.
    fn period() -> impl Strategy<Value = u64> {
        prop_oneof![
            (1u64..=100_000).prop_map(|s| s * 1_000_000_000),
            (1u64..=10_000_000).prop_map(|ms| ms * 1_000_000),
            1u64..=crate::MAX_NANOS,
            1u64..=10_000,
        ]
    }

    proptest! {
        /// Any numbers, formatted without `core::fmt`, read as `format!` writes them.
        #[test]
        fn items_and_values_are_what_format_writes(x: u64, y: u64, name in "[a-z0-9-]{0,40}") {
            let sf_name = format!("\"{name}\"");
            let got = item(&sf_name, b'r', x, b't', y);
            prop_assert_eq!(String::from_utf8(got).unwrap(), format!("{sf_name};r={x};t={y}"));
            prop_assert_eq!(decimal_value(x), HeaderValue::from(x));
        }

        /// Against the rule's plain reading: `q` per `w` is never faster than `count` per
        /// `period`, slower by less than one permit per `w`; exact whenever a whole `w` up to
        /// the bound makes it so (found by trying every such `w`), with the limit as `q` when
        /// the limit comes back in whole seconds.
        #[test]
        fn the_advertised_rate_is_the_configured_one_rounded_down_only_as_the_draft_forces(
            period in period(),
            count_pick: u64,
            burst_pick: u64,
        ) {
            let count = 1 + count_pick % period.min(1_000_000);
            let Ok(quota) = Quota::new(count, Duration::from_nanos(period)) else {
                return Err(TestCaseError::reject("invalid quota"));
            };
            let burst_max = (crate::MAX_NANOS / quota.t()).min(100_000);
            let burst = 1 + burst_pick % burst_max;
            let quota = quota.with_burst(burst).unwrap();
            let (q, w) = RatePolicy::of(&quota).advertised();
            let (q, w, n, p, b) = (q as u128, w as u128, count as u128, period as u128, burst as u128);
            let per_sec = n * 1_000_000_000;
            prop_assert!(q >= 1 && w >= 1);
            prop_assert!(q * p <= w * per_sec, "faster than configured: {q}/{w}");
            prop_assert!((q + 1) * p > w * per_sec, "slower by a permit or more: {q}/{w}");
            let bound = 3600u128.max((b * p).div_ceil(per_sec));
            prop_assert!(w <= bound);
            if (b * p) % per_sec == 0 {
                prop_assert_eq!((q, w), (b, b * p / per_sec));
            } else if bound <= 100_000 {
                let exact = (1..=bound).find(|w| (w * per_sec) % p == 0);
                match exact {
                    Some(smallest) => {
                        prop_assert_eq!(w, smallest);
                        prop_assert_eq!(q * p, w * per_sec);
                    }
                    None => prop_assert_eq!(w, bound),
                }
            }
        }
    }
}
