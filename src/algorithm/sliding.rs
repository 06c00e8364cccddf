//! The two exact sliding windows, one rule: a key's state is a short log of `(stamp, count)`
//! entries, oldest first, and the permits counted at `now` are those of entries with
//! `stamp > now - W`. Admit `n` iff they plus `n` are at most `L`.
//!
//! - [`SlidingLog`](super::SlidingLog) stamps each grant with its exact `now`: the sliding
//!   log, exact for every window `(now - W, now]`. At most `L` live entries (each holds at
//!   least one permit), fewer when grants share a stamp.
//! - [`SlidingWindow`](super::SlidingWindow) stamps each grant with the start of its
//!   sub-window (`W / k` long), so grants in one sub-window share an entry: at most `k` live
//!   entries. Since a sub-window starting at `s` is counted iff `s > now - W`, the count is
//!   exactly that of the current sub-window and the `k - 1` before it.
//!
//! The log is a ring (`sliding::ring`) of up to four entries in place (8 bytes each: an offset
//! from a base stamp and a count, while they fit) and on the heap beyond,
//! growing to the live entries and shrinking back when they leave; a key with nothing counted,
//! or with at most four entries, holds no allocation. It sits behind a per-key mutex held
//! for one decision (`crate::cell::locked`; the contract running this rule there is
//! `crate::cell::sliding`).
//!
//! **Block entries.** A block's entry is stamped at the block's end less `W`, after `now` when
//! the block is longer than the window. A grant is still stamped `now` (a penalty too): it
//! goes before such an entry, in stamp order, and counts until its own stamp `+ W`, not the
//! block's end. The ring knows how many of its newest entries are such block entries, so the
//! rule below that reads "the newest stamp" for the decision's instant and a grant's stamp
//! reads the newest grant's instead; with no block entry that is the newest entry, and a grant
//! is pushed at the back as ever.
//!
//! **Quota changes** (`set_quota` at `t`): the entries that had left the window in force at
//! `t` (`stamp + W_old <= t`) are gone for good; the others keep their stamps and count under
//! the new limit and window. Without that, a wider window would bring back grants that had
//! left, and only in logs that no decision, peek or sweep had pruned before the change. A log
//! carries the parity of the quota generation it was last brought into; the parameters carry
//! the first stamp the change keeps. Every path that reads a log under the lock (a decision, a
//! look, a per-call quota, a wait's attempt) first brings it into the generation in force, and
//! `set_quota` does so for every tracked key; `cold_at` judges a log one generation behind as
//! it will be once brought in. A log is never more than one generation behind (`Engine`
//! migrates every tracked key before the next change).

use super::rules::Terms;
use super::window::{early, limit_and_window, shared_window_terms, Verdict};
use super::{Adjust, Kind, Words, PARAM_WORDS};
use crate::decision::{AcquireError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::Nanos;

mod ring;
use ring::{Entries, Ring};

/// How a sliding algorithm stamps its grants (sealed through `rules`; every `Stamping` is an
/// algorithm: `Terms` here, `Rules` in `crate::cell::sliding`).
pub trait Stamping: Clone + Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The stamp granularity for windows of length `window`: grants are stamped with the
    /// start of their `granularity`-long slot.
    fn granularity(&self, window: Nanos) -> Result<Nanos, QuotaError>;
}

/// Parameters of a sliding window or log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingParams {
    pub(crate) limit: u64,
    pub(crate) window: Nanos,
    /// Stamps are multiples of this (1 for the exact log).
    pub(crate) granularity: Nanos,
    /// Quota generation parity.
    pub(crate) generation: bool,
    /// A log of the previous generation keeps the entries stamped at or after this: those
    /// still inside the previous window at the change (module docs).
    pub(crate) kept_from: Nanos,
}

impl Words for SlidingParams {
    const HOT: usize = 5;

    fn to_words(&self) -> [u64; PARAM_WORDS] {
        [
            self.limit,
            self.window,
            self.granularity,
            u64::from(self.generation),
            self.kept_from,
            0,
            0,
        ]
    }

    fn from_words(w: [u64; PARAM_WORDS]) -> Self {
        SlidingParams {
            limit: w[0],
            window: w[1],
            granularity: w[2],
            generation: w[3] & 1 == 1,
            kept_from: w[4],
        }
    }
}

/// One key's log: `(stamp, permits)` entries with non-decreasing stamps (their total kept by
/// the ring).
/// The parity of the quota generation the log was last brought into rides in `entries`.
#[derive(Clone, Debug, Default)]
pub struct Log {
    entries: Ring,
}

impl Log {
    fn newest(&self) -> Option<Nanos> {
        self.entries.back().map(|(s, _)| s)
    }

    /// Drops the entries no longer counted at `now`.
    fn prune(&mut self, now: Nanos, window: Nanos) {
        self.on(|mut e| e.prune(now, window));
    }

    /// Brings the log into `p`'s quota generation (module docs).
    pub(crate) fn enter(&mut self, p: &SlidingParams) {
        self.on(|mut e| e.enter(p));
    }

    /// Drops the oldest entries while `gone` holds for their stamp.
    fn drop_front(&mut self, gone: impl Fn(Nanos) -> bool) {
        self.on(|mut e| e.drop_front(gone));
    }

    /// Records `n` permits of a grant or a penalty stamped `stamp` (not before the newest
    /// grant's): at the back, or in stamp order before the block entries stamped later.
    fn record(&mut self, stamp: Nanos, n: u64) {
        if self.entries.no_blocks() {
            self.on(|mut e| {
                e.push(stamp, n);
            });
        } else {
            self.entries.insert_grant(stamp, n);
        }
    }

    /// Runs `f` on the log seen through its ring's own dispatch (the cold paths; a decision
    /// dispatches once, in [`decide`]), then settles the ring.
    fn on<R>(&mut self, f: impl FnOnce(Tally<'_, Ring>) -> R) -> R {
        let r = f(Tally {
            entries: &mut self.entries,
        });
        self.entries.settle();
        r
    }

    /// [`Tally::empty_at`] under `p`, for a log in `p`'s generation or one behind, as
    /// [`enter`](Self::enter) would leave it (without changing it): entries are in stamp
    /// order, so the newest is kept iff any is.
    pub(crate) fn cold_at(&self, p: &SlidingParams) -> Nanos {
        match self.newest() {
            Some(s) if self.entries.generation() == p.generation || s >= p.kept_from => {
                s.saturating_add(p.window)
            }
            _ => 0,
        }
    }

    /// Whether it holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries (tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(Nanos, u64)> {
        (0..self.entries.len())
            .map(|i| self.entries.get(i))
            .collect()
    }
}

/// A log's entries, in whichever form (`E`): the rule's steps, written once for both forms so
/// that a decision picks the form once, not at every step.
struct Tally<'a, E: Entries> {
    entries: &'a mut E,
}

impl<E: Entries> Tally<'_, E> {
    #[inline]
    fn newest(&self) -> Option<Nanos> {
        self.entries.back().map(|(s, _)| s)
    }

    /// The permits the entries hold.
    #[inline]
    fn total(&self) -> u64 {
        self.entries.total()
    }

    #[inline]
    fn prune(&mut self, now: Nanos, window: Nanos) {
        self.drop_front(|stamp| stamp.saturating_add(window) <= now);
    }

    /// Brings the log into `p`'s quota generation: a log one generation behind loses the
    /// entries that had left the window before the change (module docs).
    #[inline]
    pub(crate) fn enter(&mut self, p: &SlidingParams) {
        if self.entries.generation() != p.generation {
            self.drop_front(|stamp| stamp < p.kept_from);
            self.entries.set_gen(p.generation);
        }
    }

    #[inline]
    fn drop_front(&mut self, gone: impl Fn(Nanos) -> bool) {
        while let Some((stamp, _)) = self.entries.front() {
            if !gone(stamp) {
                break;
            }
            self.entries.pop_front();
        }
    }

    /// Adds `n` permits stamped `stamp` (not before the newest); false, changing nothing, if
    /// they need a new entry and the form has no room (the caller moves the log to the heap).
    #[inline]
    fn push(&mut self, stamp: Nanos, n: u64) -> bool {
        self.entries.push(stamp, n)
    }

    /// The instant from which the log counts nothing.
    #[inline]
    fn empty_at(&self, window: Nanos) -> Nanos {
        self.newest().map_or(0, |s| s.saturating_add(window))
    }
}

/// Decides `n` permits at `now`, recording them in `log` if granted.
///
/// A log whose newest grant is stamped later than `now` (a decision that read the clock later
/// got the lock first) is decided at that stamp: time never runs backwards within a key, and
/// deciding later can only count fewer of the older permits, which the later decision already
/// saw. A block's entry stamped later is no such reading: it counts, and the decision is made
/// at `now` (module docs).
///
/// A log one quota generation behind is first brought into `p`'s.
#[inline(always)]
pub(crate) fn decide(log: &mut Log, now: Nanos, n: u64, p: &SlidingParams) -> Verdict {
    let (v, full) = match &mut log.entries {
        Ring::InPlace(entries) => decide_on(Tally { entries }, now, n, p),
        Ring::Heap(entries) => decide_on(
            Tally {
                entries: &mut **entries,
            },
            now,
            n,
            p,
        ),
    };
    if let Some((stamp, n)) = full {
        log.record(stamp, n);
    }
    log.entries.settle();
    v
}

/// [`decide`] on one form; a grant that needs a new entry where the form has none left, or
/// that goes before a block's entry, is returned (`v` already counts it) for the caller to
/// record.
#[inline(always)]
fn decide_on<E: Entries>(
    mut log: Tally<'_, E>,
    now: Nanos,
    n: u64,
    p: &SlidingParams,
) -> (Verdict, Option<(Nanos, u64)>) {
    log.enter(p);
    let newest = log.entries.newest_grant();
    let at = newest.map_or(now, |s| now.max(s));
    log.prune(at, p.window);
    let mut v = Verdict {
        kind: Kind::Allow,
        limit: p.limit,
        remaining: p.limit.saturating_sub(log.total()),
        reset_after: log.empty_at(p.window).saturating_sub(now),
    };
    if let Some(kind) = early(now, n, p.limit) {
        v.kind = kind;
        return (v, None);
    }
    // total <= max(limit) < 2^62 and n <= limit: no overflow.
    let total = log.total();
    if total + n <= p.limit {
        // The slot's start; never before the newest stamp (after a quota change the old
        // stamps may sit on another grid), so stamps stay in order.
        // (The log's granularity is 1: no division on its path.)
        let slot = if p.granularity > 1 {
            at - at % p.granularity
        } else {
            at
        };
        let stamp = newest.map_or(slot, |s| slot.max(s));
        v.remaining = p.limit - (total + n);
        if log.entries.no_blocks() {
            // The stamp is the newest: the log is empty from `stamp + W`.
            v.reset_after = stamp.saturating_add(p.window).saturating_sub(now);
            let full = (!log.push(stamp, n)).then_some((stamp, n));
            return (v, full);
        }
        // A block's entry stamped later stays the newest; the caller records the grant before
        // it, in stamp order (out of line: the form may have to change).
        let last = log.newest().map_or(stamp, |s| s.max(stamp));
        v.reset_after = last.saturating_add(p.window).saturating_sub(now);
        return (v, Some((stamp, n)));
    }
    // Denied: until enough of the oldest entries have left for n to fit.
    let mut left = total;
    let mut retry_at = at;
    for i in 0..log.entries.len() {
        let (stamp, count) = log.entries.get(i);
        left -= count;
        retry_at = stamp + p.window;
        if left + n <= p.limit {
            break;
        }
    }
    v.kind = Kind::Deny {
        retry_after: retry_at - now,
    };
    (v, None)
}

/// The most a log counts: an adjustment saturates there, so a decision's `total + n` (`n` at
/// most a quota's count, itself at most [`MAX_NANOS`](crate::MAX_NANOS)) cannot overflow.
const MOST: u64 = crate::MAX_NANOS;

/// Applies `op` at `now` to `log` (the guide's Penalties page). Entries count while
/// `stamp > now - W`, so:
///
/// - block until `u` (`u > now`): the entries that leave by `u` are dropped and one entry of
///   `L` permits stamped `u - W` takes their place: refused until `u` exactly (a later
///   entry, kept, still counts after it), then as the kept entries say, fresh if none. A
///   stamp cannot be before the clock's origin (a block ending within the first `W` of the
///   clock lasts until `W`), nor `W` or more before the newest stamp (a block shorter than an
///   earlier one that a reward lowered lasts as long as that one's entry). The entry is a
///   block entry (module docs) when no grant is stamped after it.
/// - penalize `n`: `n` permits stamped as a grant now would be (one entry, before a block's
///   entry stamped later), the total saturating at [`MAX_NANOS`](crate::MAX_NANOS).
/// - reward `n`: the newest `n` permits are taken out (the ones that would count longest),
///   floored at an empty log.
/// - reset: the empty log.
pub(crate) fn adjust(log: &mut Log, now: Nanos, op: Adjust, p: &SlidingParams) {
    log.enter(p);
    let at = log.entries.newest_grant().map_or(now, |s| now.max(s));
    log.prune(at, p.window);
    match op {
        Adjust::Block { until } if until > now => {
            // Within `W` of the newest stamp (a decision is made at `max(now, newest)` and
            // prunes what left by then): after a partly rewarded longer block, a shorter one
            // lasts as long as that block's entry would (never shorter than asked).
            let floor = log.newest().map_or(0, |s| (s + 1).saturating_sub(p.window));
            let stamp = until.saturating_sub(p.window).max(floor);
            log.drop_front(|s| s <= stamp);
            let add = p.limit.min(MOST - log.entries.total());
            if add > 0 {
                log.entries.push_block_front((stamp, add));
            }
        }
        Adjust::Penalize(n) if n > 0 => {
            let add = n.min(MOST - log.entries.total());
            if add > 0 {
                let slot = at - at % p.granularity;
                let newest = log.entries.newest_grant();
                log.record(newest.map_or(slot, |s| slot.max(s)), add);
            }
        }
        Adjust::Reward(n) => {
            log.entries.take_back(n);
        }
        Adjust::Reset => log.drop_front(|_| true),
        _ => {}
    }
}

fn params_of(s: &impl Stamping, quota: &Quota) -> Result<SlidingParams, QuotaError> {
    let (limit, window) = limit_and_window(quota)?;
    Ok(SlidingParams {
        limit,
        window,
        granularity: s.granularity(window)?,
        generation: false,
        kept_from: 0,
    })
}

impl<S: Stamping> Terms for S {
    type Params = SlidingParams;
    type Verdict = Verdict;
    type Ticket = ();

    fn params(&self, quota: &Quota, _now: Nanos) -> Result<SlidingParams, QuotaError> {
        params_of(self, quota)
    }

    /// Stamps are clock times, meaningful under any quota: the new limit and window apply to
    /// the permits still inside the old window at `now`; the others are gone (module docs).
    fn next_params(
        &self,
        old: &SlidingParams,
        quota: &Quota,
        now: Nanos,
    ) -> Result<SlidingParams, QuotaError> {
        Ok(SlidingParams {
            generation: !old.generation,
            // Kept iff `stamp + W_old > now`; everything when `now < W_old`.
            kept_from: now.saturating_add(1).saturating_sub(old.window),
            ..params_of(self, quota)?
        })
    }

    /// The call's count as the limit, on the limiter's window (any count: totals stay below
    /// `2 * MAX_NANOS`); a burst other than the count is refused, as for the limiter's own.
    fn call_params(
        &self,
        base: &SlidingParams,
        quota: &Quota,
    ) -> Result<SlidingParams, QuotaError> {
        let (limit, _) = limit_and_window(quota)?;
        Ok(SlidingParams { limit, ..*base })
    }

    fn inert(base: &SlidingParams) -> SlidingParams {
        SlidingParams { limit: 0, ..*base }
    }

    shared_window_terms!(SlidingParams);
}

#[cfg(test)]
mod tests;

// Four entries in place and their total: with the key's lock and a `u64` key, one table entry
// is a cache line.
const _: () = assert!(std::mem::size_of::<Log>() <= 48);
