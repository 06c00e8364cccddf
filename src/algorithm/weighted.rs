//! The sliding window counter, weighted: two fixed windows, the previous one weighted by how
//! much of it the sliding window still covers. With `e = now - kW` (time into the current
//! window `k`), admit `n` iff `prev*(W - e) + (cur + n)*W <= L*W`, exactly, in `u128`.
//!
//! **The word.** One `u128` per key: the window index (bits 64..127), the generation parity
//! (bit 127, as GCRA's and the fixed window's), and the two counts as `u32`s, so a decision is
//! one CAS loop on one word (`cmpxchg16b` on x86-64), run by `crate::cell::word`. The counts
//! being 32 bits limits `L` to `u32::MAX` per window; a larger count is refused with a typed
//! error.
//!
//! **Quota changes** keep both counts as they stood at the change: in the new grid, the
//! window holding the change counts them as its own (`cur`) and its predecessor's (`prev`).

use super::gcra::rule::div_t;
use super::rules::Terms;
use super::window::{early, limit_and_window, shared_window_terms, Verdict};
use super::{Adjust, Kind, Words, PARAM_WORDS};
use crate::decision::{AcquireError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::Nanos;
use crate::MAX_NANOS;

/// The sliding window counter ("weighted"): two fixed windows, the previous one's count
/// weighted by the share of it the sliding window `(now - W, now]` still covers, as used at
/// very large scale (Cloudflare) because it needs two counters per key and no log.
///
/// With `e = now - kW` the time into window `k`, `prev` and `cur` the counts of windows `k - 1`
/// and `k`: admit `n` iff `prev*(W - e) + (cur + n)*W <= L*W`, computed exactly in integers.
/// `remaining = floor((L*W - prev*(W - e) - cur*W) / W)`; `retry_after` is the exact instant the
/// same inequality first holds (later in this window as `prev`'s weight shrinks, or in the
/// next, where `cur` becomes the weighted one); `reset_after` is when both counts weigh
/// nothing (the end of window `k + 1` if `cur > 0`).
///
/// It assumes the previous window's permits were spread evenly. Every fixed window still gets
/// at most `L`, but a sliding window of length `W` can get more than `L` (up to `2L` with all of
/// the previous window's permits at its very end) or fewer. Bursty traffic is where it errs:
/// on random bursty workloads (`tests/windows_weighted_error.rs`) a noticeable share of its
/// decisions differ from those of an exact [`SlidingLog`](crate::SlidingLog) seeing the same
/// stream, and it admits well above `L` in some seconds (figures in `benches/BENCHMARKS.md`,
/// "The weighted counter's error"). Smooth traffic below the limit is where it shines.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, Quota, RateLimiter, WeightedWindow};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder(Quota::per_second(10)?)
///     .clock(clock.clone())
///     .algorithm(WeightedWindow)?
///     .build();
/// assert!(limiter.try_acquire_n(10).is_ok()); // window 0 is full
/// clock.advance(Duration::from_millis(1300)); // 30% into window 1: prev weighs 70%
/// let d = limiter.check_n(3);
/// assert!(d.allowed); // 10 * 0.7 + 3 <= 10
/// assert!(!limiter.try_acquire()); // 7 + 3 + 1 > 10
/// assert_eq!(limiter.check().retry_after, Some(Duration::from_millis(100))); // prev at 60%
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Windows start at the limiter clock's origin. Waiting sleeps until the permits would fit and
/// decides again; waiters are not served in arrival order. `check_with` takes the call's
/// count as the limit, on the limiter's windows (refused above `u32::MAX`, like the limiter's
/// own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WeightedWindow;

/// Bit 127: the quota generation parity.
const GEN: u128 = 1 << 127;

/// The weighted counter's parameters, and how to read a word of the previous generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightedParams {
    pub(crate) limit: u64,
    pub(crate) window: Nanos,
    pub(crate) generation: bool,
    /// The previous generation's window index at the change, and this one's.
    pub(crate) prev_index: u64,
    pub(crate) next_index: u64,
    /// `floor((2^64 - 1) / window)`: `x / window` by a multiply (`div_t`), so a key idle a
    /// window or more finds `now`'s without a 64-bit `div`.
    pub(crate) recip: u64,
}

impl Words for WeightedParams {
    const HOT: usize = 6;

    fn to_words(&self) -> [u64; PARAM_WORDS] {
        [
            self.limit,
            self.window,
            u64::from(self.generation),
            self.prev_index,
            self.next_index,
            self.recip,
            0,
        ]
    }

    fn from_words(w: [u64; PARAM_WORDS]) -> Self {
        WeightedParams {
            limit: w[0],
            window: w[1],
            generation: w[2] == 1,
            prev_index: w[3],
            next_index: w[4],
            recip: w[5],
        }
    }
}

/// One key's state: window `index`, and the counts of windows `index - 1` and `index`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) index: u64,
    pub(crate) prev: u64,
    pub(crate) cur: u64,
}

impl State {
    fn is_empty(&self) -> bool {
        self.prev == 0 && self.cur == 0
    }
}

#[inline(always)]
fn unpack(w: u128) -> State {
    State {
        index: (w >> 64) as u64 & !(1 << 63),
        prev: (w >> 32) as u32 as u64,
        cur: w as u32 as u64,
    }
}

/// The word for `s`; counts are at most `u32::MAX` (validated limits). An empty state is the
/// canonical empty word.
#[inline(always)]
pub(crate) fn pack(s: State, p: &WeightedParams) -> u128 {
    let generation = if p.generation { GEN } else { 0 };
    if s.is_empty() {
        generation
    } else {
        generation | u128::from(s.index) << 64 | u128::from(s.prev) << 32 | u128::from(s.cur)
    }
}

/// The state a word holds, in `p`'s generation (a word one generation behind is moved to the
/// window at the change, as it stood then).
#[inline(always)]
pub(crate) fn current(w: u128, p: &WeightedParams) -> State {
    let s = unpack(w);
    if (w & GEN != 0) == p.generation {
        return s;
    }
    let at = |prev, cur| State {
        index: p.next_index,
        prev,
        cur,
    };
    if s.is_empty() {
        State::default()
    } else if s.index >= p.prev_index {
        at(s.prev, s.cur)
    } else if s.index + 1 == p.prev_index {
        at(s.cur, 0)
    } else {
        State::default()
    }
}

/// The state seen from window `now_index`: rolled forward if that is later (a window later
/// than `now`'s, written by a decision that read the clock later, is decided in).
#[inline(always)]
fn rolled(s: State, now_index: u64) -> State {
    if s.index >= now_index {
        s
    } else if s.index + 1 == now_index {
        State {
            index: now_index,
            prev: s.cur,
            cur: 0,
        }
    } else {
        State {
            index: now_index,
            ..State::default()
        }
    }
}

/// [`rolled`] to `now`'s window, `now / w`, dividing only when `now` is neither in the stored
/// window nor in the next (once per key that sat idle for a window or more, not per decision),
/// and then by the window's reciprocal `recip` (`div_t`: a multiply, exact for every `now`).
/// Exact: `now < (index + 1) * w` iff `index >= now / w`, and past that `now < (index + 2) * w`
/// iff `now / w == index + 1`; an end that saturates is above every `now` but `u64::MAX`,
/// which divides.
#[inline(always)]
fn rolled_to(s: State, now: Nanos, w: Nanos, recip: u64) -> State {
    let end = s.index.saturating_add(1).saturating_mul(w);
    if now < end {
        s
    } else if now < end.saturating_add(w) {
        rolled(s, s.index + 1)
    } else {
        rolled(s, div_t(now, w, recip))
    }
}

/// Decides `n` permits at `now`: the verdict, and the state to store if granted.
#[inline(always)]
pub(crate) fn decide(s: State, now: Nanos, n: u64, p: &WeightedParams) -> (Verdict, Option<State>) {
    let w = p.window;
    let s = rolled_to(s, now, w, p.recip);
    // index <= (MAX_NANOS + w) / w, so these stay below 2^64.
    let start = s.index.saturating_mul(w);
    let end = start.saturating_add(w);
    let elapsed = now.saturating_sub(start).min(w);
    let (l, w128) = (u128::from(p.limit), u128::from(w));
    let budget = l * w128;
    let prev_weight = u128::from(s.prev) * u128::from(w - elapsed);
    let used = prev_weight + u128::from(s.cur) * w128;
    let remaining = |used: u128| (budget.saturating_sub(used) / w128) as u64;
    let reset_at = |cur: u64| match (s.prev, cur) {
        (_, 1..) => end.saturating_add(w),
        (1.., 0) => end,
        (0, 0) => now,
    };
    let mut v = Verdict {
        kind: Kind::Allow,
        limit: p.limit,
        remaining: remaining(used),
        reset_after: reset_at(s.cur).saturating_sub(now),
    };
    if let Some(kind) = early(now, n, p.limit) {
        v.kind = kind;
        return (v, None);
    }
    let want = u128::from(n) * w128;
    if used + want <= budget {
        let next = State {
            cur: s.cur + n,
            ..s
        };
        v.remaining = remaining(used + want);
        v.reset_after = reset_at(next.cur).saturating_sub(now);
        return (v, Some(next));
    }
    // Denied (n <= L): the first instant the inequality holds with nothing else admitted.
    let at = if s.cur + n <= p.limit {
        // In this window, once prev*(end - t) <= (L - cur - n)*W; prev > 0 since denied.
        let room = u128::from(p.limit - s.cur - n) * w128 / u128::from(s.prev);
        end - room as u64 // room < end - now <= w: denied now
    } else {
        // In the next window, once cur*(W - e') <= (L - n)*W; cur > L - n >= 0.
        let room = u128::from(p.limit - n) * w128 / u128::from(s.cur);
        end + (w - room as u64) // room < w since cur > L - n
    };
    v.kind = Kind::Deny {
        retry_after: at - now,
    };
    (v, None)
}

/// The state after `op` at `now` (the guide's Penalties page). Counts are per window, the
/// previous one weighted, so:
///
/// - block until `u` (`u > now`): the window holding `u - 1` is counted full (`cur` at least
///   `L`): refused until that window ends, then as after a full window, whose weight lets one
///   permit in `W - floor((L - 1) * W / L)` (about `W / L`) into the next window and the whole
///   limit back as it slides out.
/// - penalize `n`: `cur += n` in the window in force, saturating at `u32::MAX`.
/// - reward `n`: `cur -= n`, the rest from `prev`, floored at 0.
/// - reset: the empty word.
///
/// An adjustment that changes nothing returns `s` as it was (a fresh cell stays fresh).
pub(crate) fn adjust(s: State, now: Nanos, op: Adjust, p: &WeightedParams) -> State {
    let w = p.window;
    let now = now.min(MAX_NANOS);
    match op {
        Adjust::Block { until } if until > now => {
            let last = until.min(MAX_NANOS) - 1;
            let mut b = rolled(s, (last / w).max(now / w));
            b.cur = b.cur.max(p.limit);
            b
        }
        Adjust::Penalize(n) if n > 0 => {
            let mut t = rolled(s, now / w);
            t.cur = t.cur.saturating_add(n).min(u64::from(u32::MAX));
            t
        }
        Adjust::Reward(n) if n > 0 && !s.is_empty() => {
            let mut t = rolled(s, now / w);
            let from_cur = n.min(t.cur);
            t.cur -= from_cur;
            t.prev = t.prev.saturating_sub(n - from_cur);
            t
        }
        Adjust::Reset => State::default(),
        _ => s,
    }
}

/// Whether the word holds nothing a fresh cell's (all-zero) word does not: the empty word of
/// either generation parity.
#[inline(always)]
pub(crate) fn is_empty_word(w: u128) -> bool {
    w & !GEN == 0
}

/// From this instant the state decides like a fresh key: neither count weighs anything.
pub(crate) fn cold_at(s: State, p: &WeightedParams) -> Nanos {
    let w = p.window;
    match (s.prev, s.cur) {
        (_, 1..) => s.index.saturating_add(2).saturating_mul(w),
        (1.., 0) => s.index.saturating_add(1).saturating_mul(w),
        (0, 0) => 0,
    }
}

fn params_of(quota: &Quota) -> Result<WeightedParams, QuotaError> {
    let (limit, window) = limit_and_window(quota)?;
    if limit > u64::from(u32::MAX) {
        return Err(QuotaError::Unsupported(
            "weighted window counter: counts are 32-bit, at most 4,294,967,295 per window",
        ));
    }
    Ok(WeightedParams {
        limit,
        window,
        generation: false,
        prev_index: 0,
        next_index: 0,
        recip: u64::MAX / window,
    })
}

impl Terms for WeightedWindow {
    type Params = WeightedParams;
    type Verdict = Verdict;
    type Ticket = ();

    fn params(&self, quota: &Quota, _now: Nanos) -> Result<WeightedParams, QuotaError> {
        params_of(quota)
    }

    fn next_params(
        &self,
        old: &WeightedParams,
        quota: &Quota,
        now: Nanos,
    ) -> Result<WeightedParams, QuotaError> {
        let new = params_of(quota)?;
        let now = now.min(MAX_NANOS);
        Ok(WeightedParams {
            generation: !old.generation,
            prev_index: now / old.window,
            next_index: now / new.window,
            ..new
        })
    }

    /// The call's count as the limit, on the limiter's windows; refused above `u32::MAX`, as
    /// the limiter's own quota is (the counts are 32-bit).
    fn call_params(
        &self,
        base: &WeightedParams,
        quota: &Quota,
    ) -> Result<WeightedParams, QuotaError> {
        let limit = params_of(quota)?.limit;
        Ok(WeightedParams { limit, ..*base })
    }

    fn inert(base: &WeightedParams) -> WeightedParams {
        WeightedParams { limit: 0, ..*base }
    }

    shared_window_terms!(WeightedParams);
}

#[cfg(test)]
mod tests;
