//! The fixed window counter: windows `[kW, (k+1)W)`, admit `n` iff `count_k + n <= L`.
//!
//! **The word.** One `u64` per key: bit 63 is the parity of the quota generation the word was
//! written under (as GCRA's), the window index `k` sits above the count, and the count takes
//! every bit the index does not need. Since `k <= (MAX_NANOS + offset) / W` and `L <= W` (a
//! quota is at most one permit per ns), the count gets at least `log2(W)` bits: index and count
//! fit together for every quota below one permit per ns. Only at exactly one permit per ns can
//! an epoch-aligned window need one bit too many; that quota is refused with a typed error. A
//! decision is a CAS loop on the word, run by `crate::cell::word`.
//!
//! **Quota changes** (`set_quota`) keep the permits counted in the window current at the
//! change: they count against the new limit in the new grid's window holding the change, and
//! are forgotten when it ends. A carried count is never lowered: one the new layout cannot hold
//! is carried as *full* (the all-ones count, which refuses until its window ends), and a full
//! count stays full when carried again. A word written under the previous quota is read that
//! way (by its generation parity) until `set_quota` has rewritten every tracked key.

use std::time::SystemTime;

use super::gcra::rule::div_t;
use super::rules::Terms;
use super::window::{early, limit_and_window, shared_window_terms, Align, Verdict};
use super::{Adjust, Kind, Words, PARAM_WORDS};
use crate::decision::{AcquireError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::Nanos;
use crate::MAX_NANOS;

/// The fixed window counter: at most `L` permits in each window `[kW, (k+1)W)`, where a quota
/// of `count` per `period` gives `L = count`, `W = period` exactly.
///
/// Admits `n` iff `count_k + n <= L` (then `count_k += n`); `remaining = L - count_k`,
/// `reset_after = (k+1)W - now` (the end of the window, even when nothing was counted in it:
/// the `X-RateLimit-Reset` of public APIs), and a denial's `retry_after` is the same instant:
/// the next window starts empty. `n > L` is [`AcquireError::ExceedsBurst`]. One `u64` per key,
/// updated by a compare-and-swap loop.
///
/// The known cost of its simplicity: up to `2L` permits pass in a span shorter than `W` that
/// straddles a boundary (`L` at the end of one window, `L` at the start of the next).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{FixedWindow, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::builder(Quota::per_minute(100)?)
///     .clock(clock.clone())
///     .algorithm(FixedWindow::new())?
///     .build();
/// clock.advance(Duration::from_secs(59));
/// assert!(limiter.try_acquire_n(100).is_ok()); // the end of minute 0
/// let d = limiter.check();
/// assert!(!d.allowed);
/// assert_eq!(d.retry_after, Some(Duration::from_secs(1))); // minute 1 starts empty
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.try_acquire_n(100).is_ok()); // 200 within one second: the boundary effect
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// **Long windows and wall-clock alignment.** Windows may be days or months long (up to
/// [`MAX_NANOS`], about 146 years) without overflow. [`FixedWindow::epoch_aligned`] lines them
/// up with the Unix epoch, so a daily cap resets at midnight UTC and a per-minute limit on
/// wall-clock minutes, as public APIs advertise. A "month" is a fixed length you choose (say 30
/// days from the epoch), not a calendar month.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use tollgate::{FixedWindow, KeyedRateLimiter, ManualClock, Quota};
///
/// // At most 10,000 calls per user per UTC day. (`epoch_aligned()` reads the system time at
/// // build; here the manual clock's origin is pinned to 2024-01-01T18:00Z instead.)
/// let origin = UNIX_EPOCH + Duration::from_secs(1_704_132_000);
/// let clock = ManualClock::new();
/// let daily = KeyedRateLimiter::<u64>::builder(Quota::per_day(10_000)?)
///     .clock(clock.clone())
///     .algorithm(FixedWindow::epoch_aligned_from(origin))?
///     .build();
/// assert!(daily.try_acquire_n(&7, 10_000).is_ok());
/// let d = daily.check(&7);
/// assert!(!d.allowed);
/// assert_eq!(d.retry_after, Some(Duration::from_secs(6 * 3600))); // until midnight UTC
///
/// // A 30-day "month" of 1,000,000 calls works the same way.
/// let monthly = Quota::new(1_000_000, Duration::from_secs(30 * 86_400))?;
/// let l = KeyedRateLimiter::<u64>::builder(monthly).algorithm(FixedWindow::epoch_aligned())?.build();
/// assert!(l.try_acquire(&7));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Waiting (`acquire`, `try_acquire_for`, async) sleeps until the next window and decides
/// again; waiters are not served in arrival order (see the guide's [Choosing an
/// algorithm](crate::guide::algorithms)). `check_with` takes the call's count as the limit, on the limiter's windows, and
/// refuses a count above what the key's word holds beside the limiter's window index (at least
/// `2^floor(log2 W) - 1` for a window of `W` ns) with [`QuotaError::Unsupported`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FixedWindow {
    align: Align,
}

impl FixedWindow {
    /// Windows starting at the limiter clock's origin (for the default clock: when the limiter
    /// was built).
    ///
    /// ```
    /// use tollgate::{FixedWindow, Quota, RateLimiter};
    /// let l = RateLimiter::builder(Quota::per_second(2)?).algorithm(FixedWindow::new())?.build();
    /// assert!(l.try_acquire() && l.try_acquire());
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub const fn new() -> FixedWindow {
        FixedWindow {
            align: Align::Origin,
        }
    }

    /// Windows aligned to the Unix epoch (wall-clock minutes, hours, UTC days), from
    /// `SystemTime::now()` read once when the limiter is built and once more at each
    /// `set_quota` (for the new window length), never per decision. The limiter's own clock
    /// measures time after that, so a later jump of the system clock does not move windows.
    ///
    /// ```
    /// use tollgate::{FixedWindow, Quota, RateLimiter};
    /// let per_minute = RateLimiter::builder(Quota::per_minute(60)?)
    ///     .algorithm(FixedWindow::epoch_aligned())?
    ///     .build();
    /// // The window ends at the next wall-clock minute.
    /// assert!(per_minute.peek().reset_after.as_secs() < 60);
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub const fn epoch_aligned() -> FixedWindow {
        FixedWindow {
            align: Align::Epoch,
        }
    }

    /// Windows aligned to the Unix epoch for a limiter whose clock read 0 at `clock_origin`
    /// (deterministic tests with a [`ManualClock`](crate::ManualClock); a clock of your own
    /// whose origin you know).
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use tollgate::{FixedWindow, ManualClock, Quota, RateLimiter};
    /// let origin = UNIX_EPOCH + Duration::from_secs(90); // 00:01:30 UTC, 1970-01-01
    /// let l = RateLimiter::builder(Quota::per_minute(1)?)
    ///     .clock(ManualClock::new())
    ///     .algorithm(FixedWindow::epoch_aligned_from(origin))?
    ///     .build();
    /// assert_eq!(l.peek().reset_after, Duration::from_secs(30)); // until 00:02:00
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn epoch_aligned_from(clock_origin: SystemTime) -> FixedWindow {
        FixedWindow {
            align: Align::epoch_from(clock_origin),
        }
    }
}

/// Bit 63 of a word: the parity of the quota generation it was written under.
const GEN: u64 = 1 << 63;

/// The fixed window's parameters: the quota, the window grid, the word's layout, and what a
/// word from the previous quota generation needs to be read in this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedParams {
    pub(crate) limit: u64,
    pub(crate) window: Nanos,
    /// Windows are `(now + offset) / window`; `offset < window`.
    pub(crate) offset: Nanos,
    /// Bits of the count in the word; the index takes bits `count_bits..63`.
    pub(crate) count_bits: u32,
    /// Quota generation parity.
    pub(crate) generation: bool,
    /// The previous generation's layout, its window index at the change, and this
    /// generation's window index at the change.
    pub(crate) prev_count_bits: u32,
    pub(crate) prev_index: u64,
    pub(crate) next_index: u64,
    /// `floor((2^64 - 1) / window)`: `x / window` by a multiply (`div_t`), so a key whose
    /// window has ended finds `now`'s without a 64-bit `div`.
    pub(crate) recip: u64,
}

impl Words for FixedParams {
    const HOT: usize = 7;

    fn to_words(&self) -> [u64; PARAM_WORDS] {
        let layout = u64::from(self.count_bits)
            | u64::from(self.prev_count_bits) << 8
            | u64::from(self.generation) << 16;
        [
            self.limit,
            self.window,
            self.offset,
            layout,
            self.prev_index,
            self.next_index,
            self.recip,
        ]
    }

    fn from_words(w: [u64; PARAM_WORDS]) -> Self {
        FixedParams {
            limit: w[0],
            window: w[1],
            offset: w[2],
            count_bits: (w[3] & 0xff) as u32,
            prev_count_bits: (w[3] >> 8 & 0xff) as u32,
            generation: w[3] >> 16 & 1 == 1,
            prev_index: w[4],
            next_index: w[5],
            recip: w[6],
        }
    }
}

/// How many bits the count gets next to the largest window index a clock reading up to
/// [`MAX_NANOS`] can have (and bit 63).
fn count_bits(window: Nanos, offset: Nanos) -> u32 {
    let max_index = (MAX_NANOS + offset) / window;
    let index_bits = u64::BITS - max_index.leading_zeros();
    63 - index_bits
}

/// The largest count `bits` bits hold.
#[inline(always)]
fn capacity(bits: u32) -> u64 {
    (1 << bits) - 1
}

#[inline(always)]
fn unpack(w: u64, bits: u32) -> (u64, u64) {
    let body = w & !GEN;
    (body >> bits, body & capacity(bits))
}

/// The word for `count` permits in window `index` (an empty count is the canonical empty word:
/// no index, so a fresh cell and an emptied one look alike).
#[inline(always)]
pub(crate) fn pack((index, count): (u64, u64), p: &FixedParams) -> u64 {
    let generation = if p.generation { GEN } else { 0 };
    if count == 0 {
        generation
    } else {
        generation | index << p.count_bits | count
    }
}

/// The `(window index, count)` a word holds, in `p`'s generation. A word one generation behind
/// keeps its count only if it was counted in the window current at the change (or later, by a
/// decision racing the change): it moves to this generation's window at the change.
///
/// A carried count is never lowered. The all-ones count is *full*: at least what the word
/// holds, so it refuses every `n >= 1` and reports `remaining` 0 (`limit <= capacity`, checked
/// at build). A count that reaches the new word's capacity, or that was full in the old word,
/// is carried as full: clamping it to the narrower word instead would forget permits, and a
/// later change to a wider word would admit them again.
#[inline(always)]
pub(crate) fn current(w: u64, p: &FixedParams) -> (u64, u64) {
    if (w & GEN != 0) == p.generation {
        return unpack(w, p.count_bits);
    }
    let (index, count) = unpack(w, p.prev_count_bits);
    if count > 0 && index >= p.prev_index {
        let full = capacity(p.count_bits);
        let was_full = count == capacity(p.prev_count_bits);
        (p.next_index, if was_full { full } else { count.min(full) })
    } else {
        (0, 0)
    }
}

/// Decides `n` permits at `now` on the state `(index, count)`: the verdict and the state to
/// store, if any. A stored window later than `now`'s (written by a decision that read the
/// clock later) is decided in: time never runs backwards within a key.
#[inline(always)]
pub(crate) fn decide(
    (index, count): (u64, u64),
    now: Nanos,
    n: u64,
    p: &FixedParams,
) -> (Verdict, Option<(u64, u64)>) {
    // `index >= (now + offset) / W` exactly when `now < (index + 1) * W - offset`: the stored
    // window is still current (or later) with a multiply, no division. A decision that opens
    // a new window finds it by the window's reciprocal, a multiply too (`div_t`, exact for
    // every `now`). (No saturation differs: a stored index is at most `(MAX_NANOS + offset) /
    // W`, so `(index + 1) * W` fits and exceeds `offset`.)
    let stored_end = window_end(index, p);
    let (k, c, end) = if count > 0 && now < stored_end {
        (index, count, stored_end)
    } else {
        let now_index = div_t(now.saturating_add(p.offset), p.window, p.recip);
        (now_index, 0, window_end(now_index, p))
    };
    decide_in(k, c, end, now, n, p)
}

/// [`decide`] with the window in force chosen by selects, not a branch: `now`'s window found
/// on every call (`div_t`), and the stored one kept iff it is that window or a later one. The
/// keyed tables' form (`Rules::check` with `keyed`, in `crate::cell::word`): there a key's
/// word is often not in cache, and a key comes back about as often in a later window as in
/// its stored one, so a branch on "is the stored window still in force" is mispredicted half
/// the time and waits for the word's cache miss before starting over. Not the direct
/// limiter's form: its word is in cache, and with selects the word to store waits on the
/// clock through the window arithmetic (benches/BENCHMARKS.md, "Windows, third pass"). The
/// same decisions as [`decide`] on every state [`current`] returns (`tests`).
///
/// It does not test `count > 0` (one select less between the clock and the word to store):
/// an empty count comes with index 0 in every such state (`pack` writes an empty count as the
/// empty word, and `current` reads a dropped one as `(0, 0)`), and `(0, 0)` kept as "live"
/// (at `now`'s window 0) is window 0 with nothing counted, as the fresh state is.
#[inline(always)]
pub(crate) fn decide_by_selects(
    (index, count): (u64, u64),
    now: Nanos,
    n: u64,
    p: &FixedParams,
) -> (Verdict, Option<(u64, u64)>) {
    let now_index = div_t(now.saturating_add(p.offset), p.window, p.recip);
    let live = index >= now_index;
    let k = if live { index } else { now_index };
    let c = if live { count } else { 0 };
    decide_in(k, c, window_end(k, p), now, n, p)
}

/// The decision of `n` permits at `now` in window `k` (ending at `end`) holding `c`.
#[inline(always)]
fn decide_in(
    k: u64,
    c: u64,
    end: Nanos,
    now: Nanos,
    n: u64,
    p: &FixedParams,
) -> (Verdict, Option<(u64, u64)>) {
    let mut v = Verdict {
        kind: Kind::Allow,
        limit: p.limit,
        remaining: p.limit.saturating_sub(c),
        reset_after: end.saturating_sub(now),
    };
    if let Some(kind) = early(now, n, p.limit) {
        v.kind = kind;
        return (v, None);
    }
    // c <= capacity < 2^62 and n <= limit <= capacity: no overflow.
    if c + n <= p.limit {
        v.remaining = p.limit - c - n;
        (v, Some((k, c + n)))
    } else {
        v.kind = Kind::Deny {
            retry_after: v.reset_after,
        };
        (v, None)
    }
}

/// The state `(index, count)` after `op` at `now` (the guide's Penalties page). A count lives
/// in one window, so:
///
/// - block until `u` (`u > now`): the window holding `u - 1` (or the stored one, if later) is
///   counted *full* (the all-ones count, which refuses every request and survives a quota
///   change as full): refused until that window ends, the first boundary at or after `u`, and
///   fresh from there.
/// - penalize `n`: `count += n` in the window in force, saturating at full; it is forgotten
///   when that window ends.
/// - reward `n`: `count -= n`, floored at 0 (a full count stays over any limit: a reward does
///   not lift a block, a reset does).
/// - reset: the empty word.
///
/// An adjustment that changes nothing returns `state` as it was (a fresh cell stays fresh).
pub(crate) fn adjust(state: (u64, u64), now: Nanos, op: Adjust, p: &FixedParams) -> (u64, u64) {
    let full = capacity(p.count_bits);
    let now = now.min(MAX_NANOS);
    let now_index = (now + p.offset) / p.window;
    // The window in force and its count, as `decide` reads them.
    let (k, c) = match state {
        (index, count) if count > 0 && index >= now_index => (index, count),
        _ => (now_index, 0),
    };
    match op {
        Adjust::Block { until } if until > now => {
            let last = until.min(MAX_NANOS) - 1;
            (k.max((last + p.offset) / p.window), full)
        }
        Adjust::Penalize(n) if n > 0 => (k, c.saturating_add(n).min(full)),
        Adjust::Reward(n) if c > 0 => (k, c.saturating_sub(n)),
        Adjust::Reset => (0, 0),
        _ => state,
    }
}

/// Clock time at which window `k` ends.
#[inline(always)]
fn window_end(k: u64, p: &FixedParams) -> Nanos {
    k.saturating_add(1)
        .saturating_mul(p.window)
        .saturating_sub(p.offset)
}

/// Whether the word holds nothing a fresh cell's (all-zero) word does not: the empty word of
/// either generation parity.
#[inline(always)]
pub(crate) fn is_empty_word(w: u64) -> bool {
    w & !GEN == 0
}

/// From this instant the state decides like a fresh key: its window has ended.
pub(crate) fn cold_at((index, count): (u64, u64), p: &FixedParams) -> Nanos {
    if count == 0 {
        0
    } else {
        window_end(index, p)
    }
}

impl FixedWindow {
    /// Whether windows line up with the Unix epoch ([`epoch_aligned`](Self::epoch_aligned),
    /// [`epoch_aligned_from`](Self::epoch_aligned_from)) rather than with the clock's origin:
    /// the only windows a limiter shared between processes can have (a clock's origin is
    /// per process).
    ///
    /// ```
    /// use tollgate::FixedWindow;
    /// assert!(FixedWindow::epoch_aligned().is_epoch_aligned());
    /// assert!(!FixedWindow::new().is_epoch_aligned());
    /// ```
    #[must_use]
    pub fn is_epoch_aligned(&self) -> bool {
        self.align != Align::Origin
    }

    fn build(&self, quota: &Quota, now: Nanos) -> Result<FixedParams, QuotaError> {
        let (limit, window) = limit_and_window(quota)?;
        let offset = self.align.offset(window, now);
        let bits = count_bits(window, offset);
        if limit > capacity(bits) {
            return Err(QuotaError::Unsupported(
                "fixed window: this window's index and a count of one permit per ns do not fit \
                 one word together",
            ));
        }
        Ok(FixedParams {
            limit,
            window,
            offset,
            count_bits: bits,
            generation: false,
            prev_count_bits: bits,
            prev_index: 0,
            next_index: 0,
            recip: u64::MAX / window,
        })
    }
}

impl Terms for FixedWindow {
    type Params = FixedParams;
    type Verdict = Verdict;
    type Ticket = ();

    fn params(&self, quota: &Quota, now: Nanos) -> Result<FixedParams, QuotaError> {
        self.build(quota, now)
    }

    fn next_params(
        &self,
        old: &FixedParams,
        quota: &Quota,
        now: Nanos,
    ) -> Result<FixedParams, QuotaError> {
        let new = self.build(quota, now)?;
        let now = now.min(MAX_NANOS);
        Ok(FixedParams {
            generation: !old.generation,
            prev_count_bits: old.count_bits,
            prev_index: (now + old.offset) / old.window,
            next_index: (now + new.offset) / new.window,
            ..new
        })
    }

    /// The call's count as the limit, on the limiter's windows; refused if it is above what
    /// the key's word holds beside the limiter's window index (the word cannot count to it).
    fn call_params(&self, base: &FixedParams, quota: &Quota) -> Result<FixedParams, QuotaError> {
        let (limit, _) = limit_and_window(quota)?;
        if limit > capacity(base.count_bits) {
            return Err(QuotaError::Unsupported(
                "fixed window: a per-call count above what the key's word holds beside the \
                 limiter's window index (at least 2^floor(log2 W) - 1, W the limiter's window \
                 in ns)",
            ));
        }
        Ok(FixedParams { limit, ..*base })
    }

    fn inert(base: &FixedParams) -> FixedParams {
        FixedParams { limit: 0, ..*base }
    }

    shared_window_terms!(FixedParams);
}

#[cfg(test)]
mod tests;
