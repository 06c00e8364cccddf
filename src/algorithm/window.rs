//! What the window algorithms share: their verdict (one type for all of them), how a verdict
//! answers a waiting call (they cannot book ahead: the caller sleeps until the permits would
//! fit and decides again), the quotas they accept, and where windows start (the epoch
//! alignment of [`FixedWindow`](super::FixedWindow)).
//!
//! The window algorithms use a quota's `count` as the limit `L` and its `period` as the window
//! `W`, exactly (no rounding to an interval). A burst other than the count has no meaning for
//! them, so such a quota is refused ([`QuotaError::Unsupported`]) rather than silently read
//! another way. Per-call quotas (`check_with`) take the call's count as the limit, on the
//! limiter's windows: the key's state is laid out on the limiter's window grid. A per-call
//! quota the state cannot count to (or with a burst other than its count) is refused with
//! [`QuotaError::Unsupported`], never decided under another limit.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Booking, Kind};
use crate::decision::{AcquireError, Decision, RefusedBy};
use crate::quota::{Quota, QuotaError};
use crate::Nanos;
use crate::MAX_NANOS;

/// What one decision of a window algorithm found. Durations are relative to the decision's
/// `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub(crate) kind: Kind,
    pub(crate) limit: u64,
    /// Permits that could still be taken now, after the decision.
    pub(crate) remaining: u64,
    /// Until the counted permits no longer count (the fixed window: until the window ends).
    pub(crate) reset_after: Nanos,
}

impl Verdict {
    #[inline(always)]
    pub(crate) fn allowed(&self) -> bool {
        self.kind.allowed()
    }

    #[inline]
    pub(crate) fn result(&self, n: u64) -> Result<(), AcquireError> {
        self.kind.result(n, self.limit)
    }

    pub(crate) fn decision(&self) -> Decision {
        Decision {
            allowed: self.allowed(),
            limit: self.limit,
            remaining: if self.kind == Kind::Never {
                0
            } else {
                self.remaining
            },
            retry_after: match self.kind {
                Kind::Deny { retry_after } => Some(Duration::from_nanos(retry_after)),
                _ => None,
            },
            reset_after: Duration::from_nanos(self.reset_after),
            refused_by: (!self.allowed()).then_some(RefusedBy::Quota),
        }
    }

    /// The verdict as one attempt of a waiting call: granted now, or sleep until the permits
    /// would fit and decide again (unless that is past `max_wait`). Nothing was stored by a
    /// verdict that did not grant, so failing here takes nothing.
    pub(crate) fn booking(
        &self,
        n: u64,
        max_wait: Option<Nanos>,
    ) -> Result<Booking<()>, AcquireError> {
        match self.kind {
            Kind::Deny { retry_after } if max_wait.is_none_or(|max| retry_after <= max) => {
                Ok(Booking::Retry(retry_after))
            }
            _ => self.result(n).map(|()| Booking::Now),
        }
    }
}

/// The `Terms` methods every window algorithm shares, inside its `impl Terms`: the verdict's
/// readings and the limit. (Waiting by deciding again is the cell layer's
/// `window_booking`.)
macro_rules! shared_window_terms {
    ($params:ty) => {
        #[inline(always)]
        fn allowed(v: &Verdict) -> bool {
            v.allowed()
        }

        #[inline]
        fn result(v: &Verdict, n: u64) -> Result<(), AcquireError> {
            v.result(n)
        }

        fn decision(v: &Verdict, _now: Nanos) -> Decision {
            v.decision()
        }

        fn limit(p: &$params) -> u64 {
            p.limit
        }
    };
}

pub(crate) use shared_window_terms;

/// The common start of every window decision: `n = 0` looks, `n > limit` never fits, and a
/// clock past [`MAX_NANOS`] can count nothing. `None`: decide on the state.
#[inline(always)]
pub(crate) fn early(now: Nanos, n: u64, limit: u64) -> Option<Kind> {
    if now > MAX_NANOS {
        Some(Kind::Never)
    } else if n == 0 {
        Some(Kind::Peek)
    } else if n > limit {
        Some(Kind::ExceedsBurst)
    } else {
        None
    }
}

/// The limit and window of `quota` for a window algorithm: `(count, period)`, refusing a burst
/// other than the count (module docs).
pub(crate) fn limit_and_window(quota: &Quota) -> Result<(u64, Nanos), QuotaError> {
    Ok((quota.window_limit()?, quota.period_nanos()))
}

/// Where windows of length `w` start, as an offset `o < w` such that the window holding clock
/// time `now` is `(now + o) / w`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum Align {
    /// At the limiter clock's origin: windows `[k*w, (k+1)*w)` of clock time.
    #[default]
    Origin,
    /// At the Unix epoch, from `SystemTime::now()` read when the limiter is built (and again at
    /// each `set_quota`, for the new window length).
    Epoch,
    /// At the Unix epoch, for a clock that read 0 at this many ns after (`Ok`) or before
    /// (`Err`) it.
    EpochFrom(Result<u128, u128>),
}

impl Align {
    /// The offset for windows of length `w` (`>= 1`) on a clock reading `now` at this moment.
    pub(crate) fn offset(&self, w: Nanos, now: Nanos) -> Nanos {
        let origin_unix: i128 = match *self {
            Align::Origin => return 0,
            Align::Epoch => signed(SystemTime::now()) - i128::from(now),
            Align::EpochFrom(Ok(after)) => i128::try_from(after).unwrap_or(i128::MAX),
            Align::EpochFrom(Err(before)) => -i128::try_from(before).unwrap_or(i128::MAX),
        };
        // Unix time `origin_unix + now` is in window floor((origin_unix + now) / w); so is
        // clock time `now` once shifted by origin_unix mod w.
        let o = origin_unix.rem_euclid(i128::from(w));
        u64::try_from(o).expect("a remainder of a u64 divisor fits in u64")
    }

    /// The origin of a clock that reads 0 at `at`, relative to the epoch.
    pub(crate) fn epoch_from(at: SystemTime) -> Align {
        Align::EpochFrom(match at.duration_since(UNIX_EPOCH) {
            Ok(d) => Ok(d.as_nanos()),
            Err(e) => Err(e.duration().as_nanos()),
        })
    }
}

/// A wall-clock reading in ns since the epoch (negative before it).
fn signed(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
        Err(e) => -i128::try_from(e.duration().as_nanos()).unwrap_or(i128::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_line_windows_up_with_unix_time() {
        let w = 60_000_000_000; // a minute
                                // A clock whose origin is 90 s after the epoch: its time 30 s is a minute boundary.
        let a = Align::epoch_from(UNIX_EPOCH + Duration::from_secs(90));
        let o = a.offset(w, 0);
        assert_eq!(o, 30_000_000_000);
        assert_eq!((30_000_000_000 + o) % w, 0);
        // Before the epoch: 10 s before it, clock time 10 s is the epoch, a boundary.
        let b = Align::epoch_from(UNIX_EPOCH - Duration::from_secs(10));
        assert_eq!((10_000_000_000 + b.offset(w, 0)) % w, 0);
        assert_eq!(Align::Origin.offset(w, 12345), 0);
        // The offset is always below the window, whatever the origin.
        let far = Align::EpochFrom(Ok(u128::MAX));
        assert!(far.offset(7, 0) < 7);
        let far = Align::EpochFrom(Err(u128::MAX));
        assert!(far.offset(7, 0) < 7);
    }

    #[test]
    fn epoch_alignment_reads_the_wall_clock() {
        let w = 1_000_000_000;
        let now = 123_456_789;
        let before = signed(SystemTime::now());
        let o = Align::Epoch.offset(w, now);
        let after = signed(SystemTime::now());
        // Unix time of clock time t is (wall - now) + t; boundaries where (t + o) % w == 0.
        let expect = |wall: i128| (wall - i128::from(now)).rem_euclid(i128::from(w)) as u64;
        // The wall clock moved between the readings by less than the window, in practice by
        // microseconds: the offset is one of the two ends' or between them.
        let (lo, hi) = (expect(before), expect(after));
        assert!(
            (lo <= hi && (lo..=hi).contains(&o)) || (lo > hi && (o >= lo || o <= hi)),
            "offset {o} not between {lo} and {hi}"
        );
    }

    #[test]
    fn verdict_bookings() {
        let v = |kind| Verdict {
            kind,
            limit: 5,
            remaining: 0,
            reset_after: 9,
        };
        assert_eq!(v(Kind::Allow).booking(1, Some(0)), Ok(Booking::Now));
        assert_eq!(v(Kind::Peek).booking(0, None), Ok(Booking::Now));
        let deny = v(Kind::Deny { retry_after: 7 });
        assert_eq!(deny.booking(1, None), Ok(Booking::Retry(7)));
        assert_eq!(deny.booking(1, Some(7)), Ok(Booking::Retry(7)));
        assert_eq!(
            deny.booking(1, Some(6)),
            Err(AcquireError::RateLimited {
                retry_after: Duration::from_nanos(7)
            })
        );
        assert_eq!(
            v(Kind::ExceedsBurst).booking(6, None),
            Err(AcquireError::ExceedsBurst {
                requested: 6,
                burst: 5
            })
        );
        assert_eq!(
            v(Kind::Never).booking(1, None),
            Err(AcquireError::Unrepresentable { requested: 1 })
        );
        assert_eq!(v(Kind::Never).decision().remaining, 0);
    }

    #[test]
    fn bursts_other_than_the_count_are_refused() {
        let q = Quota::per_second(10).unwrap();
        assert_eq!(limit_and_window(&q), Ok((10, 1_000_000_000)));
        assert!(matches!(
            limit_and_window(&q.with_burst(3).unwrap()),
            Err(QuotaError::Unsupported(_))
        ));
    }
}
