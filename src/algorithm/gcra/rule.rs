//! GCRA's decision rule: pure functions on `(tat, now, n, params)`.
//!
//! No atomics here: the cell (`crate::cell::gcra`) feeds these functions the values it loaded
//! and stores what they return, so every rule is tested with plain numbers. Arithmetic is on
//! `u64` nanoseconds, checked against [`MAX_NANOS`]; nothing here can panic or wrap. The
//! contract that ties them to the cell (`Rules`) is in `crate::cell::gcra`, next to the cell.

use std::time::Duration;

use super::holes::Holes;
use crate::algorithm::adjust::Adjust;
use crate::algorithm::{Booking, Kind, Words, PARAM_WORDS};
use crate::decision::{AcquireError, Decision};
use crate::quota::Quota;
use crate::Nanos;
use crate::MAX_NANOS;

/// GCRA's parameters: the quota in force, what a decision derives from it (precomputed here:
/// `tau` and the reciprocal that replaces a division for `remaining`), and what a quota change
/// needs to re-scale a key's debt lazily. A per-call quota (`check_with`) derives them on each
/// load.
///
/// In the limiter's sequence lock they are seven words, of which a decision loads the first
/// five ([`Words::HOT`]): a cell in the current quota generation needs nothing else. `change`
/// is read only for a cell a generation behind, which loads the parameters in full
/// ([`ParamSource::load_full`](crate::algorithm::ParamSource::load_full)): every decision
/// loads two words fewer. A decision that reads only whether it was allowed (`try_acquire`,
/// [`grant_one`]) loads the first three ([`GcraParams::ALLOW_WORDS`]: `t`, `tau`,
/// `generation`), so they come first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcraParams {
    /// Emission interval `T`, `>= 1`.
    pub(crate) t: Nanos,
    /// Burst `b`, `>= 1`.
    pub(crate) burst: u64,
    /// Tolerance `tau = T * b` (validated at construction: `<= MAX_NANOS`).
    pub(crate) tau: Nanos,
    /// Quota generation: how many times `set_quota` ran. Each key's state carries its parity.
    pub(crate) generation: u64,
    /// `floor((2^64 - 1) / T)`: divides by `T` with a multiply ([`div_t`]), for `remaining`.
    pub(crate) recip: u64,
    /// The previous generation's interval and when it was replaced; `None` in a decision's
    /// load (the hot words only).
    pub(crate) change: Option<Change>,
}

/// What a key still in the previous quota generation needs: its debt is re-scaled from
/// `prev_t` to `t` (see [`rescale`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// The previous generation's interval, `>= 1` (so a word holding 0 means "not loaded").
    pub(crate) prev_t: Nanos,
    /// When it was replaced.
    pub(crate) at: Nanos,
}

impl GcraParams {
    /// Full parameters for interval `t` and burst `burst` (`t >= 1`, `t * burst <= MAX_NANOS`,
    /// as every [`Quota`] guarantees), in generation `generation`, replacing interval `prev_t` at
    /// `changed_at`.
    pub(crate) fn new(
        t: Nanos,
        burst: u64,
        generation: u64,
        prev_t: Nanos,
        changed_at: Nanos,
    ) -> Self {
        debug_assert!(t >= 1 && prev_t >= 1 && t.checked_mul(burst).is_some());
        GcraParams {
            t,
            burst,
            tau: t.saturating_mul(burst),
            generation,
            recip: u64::MAX / t.max(1),
            change: Some(Change {
                prev_t: prev_t.max(1),
                at: changed_at,
            }),
        }
    }

    pub(crate) fn of(q: &Quota, generation: u64, prev_t: Nanos, changed_at: Nanos) -> GcraParams {
        GcraParams::new(q.t(), q.burst(), generation, prev_t, changed_at)
    }
}

impl GcraParams {
    /// How many leading words [`grant_one`] reads (`t`, `tau`, `generation`); in such a load
    /// `burst` and `recip` read as 0.
    pub(crate) const ALLOW_WORDS: usize = 3;
}

impl Words for GcraParams {
    const HOT: usize = 5;

    fn to_words(&self) -> [u64; PARAM_WORDS] {
        let change = self.change.unwrap_or(Change {
            prev_t: self.t,
            at: 0,
        });
        [
            self.t,
            self.tau,
            self.generation,
            self.burst,
            self.recip,
            change.prev_t,
            change.at,
        ]
    }

    fn from_words(w: [u64; PARAM_WORDS]) -> Self {
        GcraParams {
            t: w[0],
            tau: w[1],
            generation: w[2],
            burst: w[3],
            recip: w[4],
            // A hot-only load leaves the cold words 0; a stored `prev_t` never is.
            change: (w[5] != 0).then_some(Change {
                prev_t: w[5],
                at: w[6],
            }),
        }
    }
}

/// `x / t`, given `recip = floor((2^64 - 1) / t)`, with a multiply instead of a division (a
/// 64-bit division costs tens of cycles, and `check()` reports `remaining` on every call).
/// `recip >= 2^64 / t - 1`, so `x * recip / 2^64 > x / t - x / 2^64 > x / t - 1`, and it is
/// never above `x / t`: its floor is the quotient or one less, and one compare of the
/// remainder corrects it. Exact for every `x`.
#[inline(always)]
pub(crate) fn div_t(x: u64, t: Nanos, recip: u64) -> u64 {
    let q = ((u128::from(x) * u128::from(recip)) >> 64) as u64;
    // q <= x / t, so q * t <= x: no overflow, no underflow.
    q + u64::from(x - q * t >= t)
}

/// A TAT written under the previous quota generation, expressed in the current one (interval
/// `t`): the debt at the change, `tat - changed_at`, is kept *in permits* (`debt / prev_t`
/// permits cost `debt * t / prev_t` now), rounded up so a change never forgives a fraction of
/// a permit. Taking 10 at 10/s and then tightening to 10/min leaves 10 permits of debt: a
/// minute, not a second. A TAT at or before the change was a full bucket and stays one.
#[inline]
pub(crate) fn rescale(tat: Nanos, t: Nanos, change: &Change) -> Nanos {
    if tat <= change.at || change.prev_t == t {
        return tat;
    }
    let debt = u128::from(tat - change.at) * u128::from(t);
    let scaled = debt.div_ceil(u128::from(change.prev_t));
    u64::try_from(scaled)
        .ok()
        .and_then(|d| change.at.checked_add(d))
        .map_or(MAX_NANOS, |t| t.min(MAX_NANOS))
}

/// What a GCRA decision found: the outcome, plus what the full [`Decision`] reports, worked
/// out in the branch that decided (where the compiler knows which fields it needs and what
/// bounds they have) rather than after the branches meet. A caller that only wants the
/// outcome (`try_acquire`) never computes the rest: it is dead code once inlined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub(crate) kind: Kind,
    /// The schedule's end after the decision (`reset_after = tail - now`).
    pub(crate) tail: Nanos,
    /// Permits that could still be taken at `now` after the decision, holes included.
    pub(crate) remaining: u64,
    /// The tail to store, if the decision moves it.
    pub(crate) store: Option<Nanos>,
    /// The burst it was decided under (the decision's `limit`).
    pub(crate) burst: u64,
}

/// Whole intervals free in `[now, now + tau]` behind a tail `debt` ns after `now`: at most
/// the burst, since `tau = burst * T` (holes, added by `check_holey`, are capped there).
#[inline(always)]
fn free_slots(debt: Nanos, p: &GcraParams) -> u64 {
    div_t(p.tau.saturating_sub(debt), p.t, p.recip)
}

impl Verdict {
    /// A verdict whose schedule ends at `tail` (`>= now`, as every verdict's does: it is
    /// `max(tat, now)` or more).
    #[inline(always)]
    fn new(kind: Kind, tail: Nanos, now: Nanos, p: &GcraParams) -> Verdict {
        let remaining = match kind {
            // Nothing can ever be granted: say so consistently.
            Kind::Never => 0,
            _ => free_slots(tail.saturating_sub(now), p),
        };
        Verdict {
            kind,
            tail,
            remaining,
            store: None,
            burst: p.burst,
        }
    }

    #[inline]
    pub(crate) fn allowed(&self) -> bool {
        self.kind.allowed()
    }

    /// The verdict as the result of a non-waiting acquire.
    pub(crate) fn into_result(self, n: u64) -> Result<(), AcquireError> {
        self.kind.result(n, self.burst)
    }

    /// The full result fields (`docs/design.md`, "2. Quota and GCRA"), for a verdict decided
    /// at `now`.
    #[inline(always)]
    pub(crate) fn decision(&self, now: Nanos) -> Decision {
        // Every verdict's tail is max(tat, now) or later.
        debug_assert!(self.tail >= now);
        let reset_after = Duration::from_nanos(self.tail - now);
        // One constructor per kind, so that a grant builds no `retry_after` at all (one match
        // setting each field separately left a select of the two on the grant's path).
        match self.kind {
            Kind::Allow | Kind::Peek => Decision::allowed(self.burst, self.remaining, reset_after),
            Kind::Deny { retry_after } => Decision::denied(
                self.burst,
                self.remaining,
                Duration::from_nanos(retry_after),
                reset_after,
            ),
            Kind::ExceedsBurst | Kind::Never => {
                Decision::never(self.burst, self.remaining, reset_after)
            }
        }
    }
}

/// Check (cost `n`, at `now`) against the tail alone: `new_tat = max(tat, now) + n*T`,
/// allowed iff `new_tat - tau <= now`.
#[inline(always)]
pub(crate) fn check(tat: Nanos, now: Nanos, n: u64, p: &GcraParams) -> Verdict {
    let base = tat.max(now);
    if n == 0 {
        return Verdict::new(Kind::Peek, base, now, p);
    }
    // `n > burst` is tested only once a grant is ruled out: a grant needs `base + n*T - tau
    // <= now` with `base >= now`, so `n*T <= tau = burst*T`, `n <= burst` (`T >= 1`; inert
    // parameters, burst and tau 0, grant nothing). Every grant passes the test, so testing it
    // after the grant's is the same rule with one branch less on the grant's path. Past the
    // end of representable time (no `new_tat`), refuse rather than saturate, since a
    // saturated TAT would stop counting and admit without bound.
    let new_tat = schedule_end(base, n, p);
    if let Some(new_tat) = new_tat {
        if within_tolerance(new_tat, now, p) {
            // new_tat >= base >= now, and new_tat - now <= tau: neither subtraction can wrap;
            // n <= burst (above).
            let debt = new_tat - now;
            return Verdict {
                kind: Kind::Allow,
                tail: new_tat,
                remaining: if tat <= now {
                    // From a full bucket: tau - n*T = (burst - n) * T free.
                    p.burst - n
                } else {
                    div_t(p.tau - debt, p.t, p.recip)
                },
                store: Some(new_tat),
                burst: p.burst,
            };
        }
    }
    if n > p.burst {
        return Verdict::new(Kind::ExceedsBurst, base, now, p);
    }
    let Some(new_tat) = new_tat else {
        return Verdict::new(Kind::Never, base, now, p);
    };
    let retry_after = new_tat.saturating_sub(p.tau) - now;
    let kind = Kind::Deny { retry_after };
    if n == 1 {
        // Fewer than n whole intervals are free (had n been, base + n*T - tau <= now): for
        // one permit, none. `check()` asks for one, so this is its denial, with no division.
        Verdict {
            kind,
            tail: base,
            remaining: 0,
            store: None,
            burst: p.burst,
        }
    } else {
        Verdict::new(kind, base, now, p)
    }
}

/// The TAT after `n` more permits on a schedule ending at `base`: `base + n*T`, or `None` past
/// the end of representable time ([`MAX_NANOS`]).
#[inline(always)]
fn schedule_end(base: Nanos, n: u64, p: &GcraParams) -> Option<Nanos> {
    // Saturating rather than checked: a saturated sum is past `MAX_NANOS` and fails the same
    // test, with one branch instead of two on the grant's path.
    n.checked_mul(p.t)
        .map(|len| base.saturating_add(len))
        .filter(|&t| t <= MAX_NANOS)
}

/// The grant test, `new_tat - tau <= now`, for a `new_tat` from [`schedule_end`] on a base at or
/// after `now`: written `new_tat <= now + tau`, since `now <= new_tat <= MAX_NANOS` and
/// `tau <= MAX_NANOS`, so the sum cannot wrap (and needs no saturation, as the difference does).
#[inline(always)]
fn within_tolerance(new_tat: Nanos, now: Nanos, p: &GcraParams) -> bool {
    new_tat <= now + p.tau
}

/// [`check`] of one permit reduced to its outcome: the TAT to store if granted (`check(tat,
/// now, 1, p).store`). Reads only `t` and `tau` of `p`, so it runs on a load of the first
/// [`GcraParams::ALLOW_WORDS`] words, and computes nothing a `try_acquire` drops.
#[inline(always)]
pub(crate) fn grant_one(tat: Nanos, now: Nanos, p: &GcraParams) -> Option<Nanos> {
    schedule_end(tat.max(now), 1, p).filter(|&e| within_tolerance(e, now, p))
}

/// Check with holes: a hole that can hold `(s, s + n*T]` inside `[now, now + tau]` is used
/// before the tail (lowest position first). `holes` is changed only when the permits are
/// placed in it; a verdict that stores a new tail leaves `holes` alone.
pub(crate) fn check_holey(
    tat: Nanos,
    holes: &mut Holes,
    now: Nanos,
    n: u64,
    p: &GcraParams,
) -> Verdict {
    holes.prune(now);
    let mut v = check(tat, now, n, p);
    if n > 0 && n <= p.burst {
        let len = n * p.t;
        let horizon = now.saturating_add(p.tau);
        if let Some((i, s)) = holes.place(now, len).filter(|&(_, s)| s + len <= horizon) {
            holes.take(i, s, len);
            v = Verdict::new(Kind::Allow, tat.max(now), now, p);
        } else if let Kind::Deny { retry_after } = v.kind {
            if let Some(at) = holes.earliest_fit(now, len, p.tau) {
                v.kind = Kind::Deny {
                    retry_after: retry_after.min(at - now),
                };
            }
        }
    }
    if v.kind != Kind::Never {
        v.remaining = v
            .remaining
            .saturating_add(holes.slots(now, p.tau, p.t))
            .min(p.burst);
    }
    v
}

/// A booked reservation: its stretch `(start, end]` on the schedule, when it may proceed, and
/// the quota generation it was booked under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub(crate) start: Nanos,
    pub(crate) end: Nanos,
    pub(crate) ready_at: Nanos,
    pub(crate) generation: u64,
}

impl Ticket {
    /// A receipt for nothing (a reservation of zero permits): ready now, gives back nothing.
    pub(crate) fn nothing(now: Nanos) -> Ticket {
        Ticket {
            start: now,
            end: now,
            ready_at: now,
            generation: 0,
        }
    }

    /// How long from `now` until the reservation is ready.
    #[inline]
    pub(crate) fn wait_from(&self, now: Nanos) -> Nanos {
        self.ready_at.saturating_sub(now)
    }
}

/// Where a reservation goes: `(s, s + n*T]` ready at `max(now, s + n*T - tau)`. `n > burst`
/// is allowed: it waits `(n - burst) * T` beyond a full bucket (bandwidth shaping).
fn ticket_at(s: Nanos, now: Nanos, n: u64, p: &GcraParams) -> Result<Ticket, AcquireError> {
    let unrepresentable = AcquireError::Unrepresentable { requested: n };
    let end = n
        .checked_mul(p.t)
        .and_then(|len| s.checked_add(len))
        .filter(|&e| e <= MAX_NANOS)
        .ok_or(unrepresentable)?;
    Ok(Ticket {
        start: s,
        end,
        ready_at: end.saturating_sub(p.tau).max(now),
        generation: p.generation,
    })
}

/// Reserve at the tail: `new_tat = max(tat, now) + n*T`, unless the wait exceeds `max_wait`.
/// `n = 0` books nothing and is ready now.
pub(crate) fn reserve(
    tat: Nanos,
    now: Nanos,
    n: u64,
    p: &GcraParams,
    max_wait: Option<Nanos>,
) -> Result<Booking<Ticket>, AcquireError> {
    if n == 0 {
        return Ok(Booking::Now);
    }
    let ticket = ticket_at(tat.max(now), now, n, p)?;
    within(ticket, now, max_wait)
}

/// Reserve with holes: the lowest hole that holds the whole stretch, else the tail (a hole
/// below the tail is always ready no later than the tail).
pub(crate) fn reserve_holey(
    tat: Nanos,
    holes: &mut Holes,
    now: Nanos,
    n: u64,
    p: &GcraParams,
    max_wait: Option<Nanos>,
) -> Result<Booking<Ticket>, AcquireError> {
    holes.prune(now);
    if n == 0 {
        return Ok(Booking::Now);
    }
    let Some(len) = n.checked_mul(p.t) else {
        return Err(AcquireError::Unrepresentable { requested: n });
    };
    match holes.place(now, len) {
        Some((i, s)) => {
            let booking = within(ticket_at(s, now, n, p)?, now, max_wait)?;
            holes.take(i, s, len);
            Ok(booking)
        }
        None => reserve(tat, now, n, p, max_wait),
    }
}

fn within(
    ticket: Ticket,
    now: Nanos,
    max_wait: Option<Nanos>,
) -> Result<Booking<Ticket>, AcquireError> {
    let wait = ticket.wait_from(now);
    if max_wait.is_some_and(|max| wait > max) {
        return Err(AcquireError::RateLimited {
            retry_after: Duration::from_nanos(wait),
        });
    }
    Ok(Booking::Booked {
        ready_at: ticket.ready_at,
        ticket,
    })
}

/// What cancelling `ticket` at `now` gives back, given the tail `tat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refund {
    /// Nothing: the stretch is in the past, or from another quota generation.
    Nothing,
    /// The ticket is the latest: the tail goes back to where it started.
    Tail(Nanos),
    /// Not the latest: its future part becomes a hole.
    Hole(Nanos, Nanos),
}

/// Cancel: the unused permits' stretch is freed. If it is the latest, the tail moves back
/// over it (exactly undoing the reservation, even if it was ready at once); otherwise its part
/// at or after `now` becomes a hole that later arrivals fill. Positions below `now` are gone
/// either way, so a cancelled reservation never gives back more than the future it held, and
/// nobody's booked stretch is handed out twice.
#[inline]
pub(crate) fn refund(tat: Nanos, ticket: &Ticket, now: Nanos, p: &GcraParams) -> Refund {
    if ticket.generation != p.generation || ticket.end <= now {
        Refund::Nothing
    } else if tat == ticket.end {
        Refund::Tail(ticket.start)
    } else if ticket.end > tat {
        // Only after a reward or a reset moved the tail below the stretch: what lies at or
        // above the tail is free already, and a hole there would be given out twice.
        let (start, end) = (ticket.start.max(now), ticket.end.min(tat));
        if end > start {
            Refund::Hole(start, end)
        } else {
            Refund::Nothing
        }
    } else {
        Refund::Hole(ticket.start.max(now), ticket.end)
    }
}

/// The TAT after `op` at `now` (the guide's Penalties page), in the generation of `p`:
///
/// - block until `u` (`u > now`): `tat = max(tat, u + tau - T)`, the least TAT that refuses
///   one permit before `u` and grants it at `u`: the bucket is empty until `u`, then refills
///   at the quota's rate (one permit at `u`, the whole burst `tau - T` later). A TAT past
///   [`MAX_NANOS`] is held there: refused for good.
/// - penalize `n`: `max(tat, now) + n*T`, saturating at [`MAX_NANOS`] (debt, drained at the
///   quota's rate; a saturated TAT refuses everything, which is what so much debt means).
/// - reward `n`: `max(tat - n*T, now)` if the key is in debt (`tat > now`), else unchanged:
///   never above a full bucket.
/// - reset: 0, a fresh key.
#[inline]
pub(crate) fn adjust(tat: Nanos, now: Nanos, op: Adjust, p: &GcraParams) -> Nanos {
    match op {
        Adjust::Block { until } if until > now => {
            // tau >= T for every burst >= 1; saturating for inert parameters (burst 0).
            let last = until.saturating_add(p.tau.saturating_sub(p.t));
            tat.max(last.min(MAX_NANOS))
        }
        Adjust::Block { .. } | Adjust::Penalize(0) => tat,
        Adjust::Penalize(n) => tat
            .max(now)
            .saturating_add(n.saturating_mul(p.t))
            .min(MAX_NANOS),
        Adjust::Reward(n) if tat > now => tat.saturating_sub(n.saturating_mul(p.t)).max(now),
        Adjust::Reward(_) => tat,
        Adjust::Reset => 0,
    }
}

/// [`adjust`] on a key with holes: a block or a reset clears them (a hole could grant during
/// the block); a reward drops what the lowered tail passed (holes lie below the tail); a
/// penalty leaves them (it is charged at the tail, so the stretches free below it stay free).
pub(crate) fn adjust_holey(
    tat: Nanos,
    holes: &mut Holes,
    now: Nanos,
    op: Adjust,
    p: &GcraParams,
) -> Nanos {
    holes.prune(now);
    let new = adjust(tat, now, op, p);
    match op {
        Adjust::Block { until } if until > now => holes.clear(p.generation),
        Adjust::Reset => holes.clear(p.generation),
        Adjust::Reward(_) => holes.cut(new),
        _ => {}
    }
    new
}

/// What an adjustment reports: `[look, one]`, a look and a one-permit check on `tat`, taking
/// nothing (the verdicts' `store` is not applied).
#[inline]
pub(crate) fn looks(tat: Nanos, now: Nanos, p: &GcraParams) -> [Verdict; 2] {
    [check(tat, now, 0, p), check(tat, now, 1, p)]
}

/// [`looks`] with holes (on copies: a look never takes from them).
pub(crate) fn looks_holey(tat: Nanos, holes: &Holes, now: Nanos, p: &GcraParams) -> [Verdict; 2] {
    [
        check_holey(tat, &mut holes.clone(), now, 0, p),
        check_holey(tat, &mut holes.clone(), now, 1, p),
    ]
}

#[cfg(test)]
mod tests;
