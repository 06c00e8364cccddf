//! The GCRA decision rules as pure functions of `(tat, now, n, quota)`.
//!
//! No atomics and no clocks here: the cell feeds these functions the value it loaded and stores
//! what they return, so every rule can be tested exhaustively with plain numbers. All arithmetic
//! is on `u64` nanoseconds and saturating or checked; nothing here can panic or wrap.

use crate::outcome::{AcquireError, Decision};
use crate::quota::Quota;
use crate::Nanos;
use std::time::Duration;

/// The outcome of the check rule, before it is dressed up as a [`Decision`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Conforms: store `new_tat`.
    Allow { new_tat: Nanos },
    /// `n = 0`: allowed, nothing stored. `base = max(tat, now)`.
    Peek { base: Nanos },
    /// Does not conform yet; nothing stored.
    Deny { base: Nanos, retry_after: Nanos },
    /// `n > burst`: can never conform as one request; nothing stored.
    ExceedsBurst { base: Nanos },
}

impl Verdict {
    /// The value the cell must store, if any. Denials store nothing.
    #[inline]
    pub(crate) fn store(&self) -> Option<Nanos> {
        match *self {
            Verdict::Allow { new_tat } => Some(new_tat),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn allowed(&self) -> bool {
        matches!(self, Verdict::Allow { .. } | Verdict::Peek { .. })
    }

    /// The verdict as the result of a non-waiting acquire.
    #[inline]
    pub(crate) fn into_result(self, n: u64, q: Quota) -> Result<(), AcquireError> {
        match self {
            Verdict::Allow { .. } | Verdict::Peek { .. } => Ok(()),
            Verdict::Deny { retry_after, .. } => Err(AcquireError::RateLimited {
                retry_after: Duration::from_nanos(retry_after),
            }),
            Verdict::ExceedsBurst { .. } => Err(AcquireError::ExceedsBurst {
                requested: n,
                burst: q.burst(),
            }),
        }
    }

    /// The full result fields (DESIGN.md 2): `t` is `new_tat` when allowed, else `max(tat, now)`.
    pub(crate) fn decision(&self, now: Nanos, q: Quota) -> Decision {
        let (allowed, t, retry_after) = match *self {
            Verdict::Allow { new_tat } => (true, new_tat, None),
            Verdict::Peek { base } => (true, base, None),
            Verdict::Deny { base, retry_after } => {
                (false, base, Some(Duration::from_nanos(retry_after)))
            }
            Verdict::ExceedsBurst { base } => (false, base, None),
        };
        let debt = t.saturating_sub(now);
        Decision {
            allowed,
            limit: q.burst(),
            remaining: (q.tau().saturating_sub(debt) / q.t()).min(q.burst()),
            retry_after,
            reset_after: Duration::from_nanos(debt),
        }
    }
}

/// Check (cost `n`, at `now`): `new_tat = max(tat, now) + n*T`, allowed iff
/// `new_tat - tau <= now`.
#[inline]
pub(crate) fn check(tat: Nanos, now: Nanos, n: u64, q: Quota) -> Verdict {
    let base = tat.max(now);
    if n == 0 {
        return Verdict::Peek { base };
    }
    if n > q.burst() {
        return Verdict::ExceedsBurst { base };
    }
    // n <= burst, so n * T <= tau, which fits by construction.
    match base.checked_add(n * q.t()) {
        Some(new_tat) => {
            let allow_at = new_tat.saturating_sub(q.tau());
            if allow_at <= now {
                Verdict::Allow { new_tat }
            } else {
                Verdict::Deny {
                    base,
                    retry_after: allow_at - now,
                }
            }
        }
        // The new TAT is past the end of u64 time: refuse rather than saturate, since a
        // saturated TAT would stop counting and admit without bound.
        None => Verdict::Deny {
            base,
            retry_after: u64::MAX - now,
        },
    }
}

/// A reservation as stored: enough to compute the wait and the refund on cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// The TAT this reservation stored.
    pub(crate) new_tat: Nanos,
    /// `n * T` with the `T` in force when it was made.
    pub(crate) cost: Nanos,
    /// When the caller may proceed: `new_tat - tau`.
    pub(crate) ready_at: Nanos,
}

impl Ticket {
    /// How long from `now` until the reservation is ready.
    #[inline]
    pub(crate) fn wait_from(&self, now: Nanos) -> Nanos {
        self.ready_at.saturating_sub(now)
    }
}

/// Reserve (cost `n`): `new_tat = max(tat, now) + n*T`, stored unconditionally unless the wait
/// `new_tat - tau - now` exceeds `max_wait`. `n > burst` is allowed: it just waits longer.
/// `n = 0` reserves nothing and is ready now (the returned ticket's `new_tat` is `tat`, so the
/// cell stores nothing).
#[inline]
pub(crate) fn reserve(
    tat: Nanos,
    now: Nanos,
    n: u64,
    q: Quota,
    max_wait: Option<Nanos>,
) -> Result<Ticket, AcquireError> {
    if n == 0 {
        return Ok(Ticket {
            new_tat: tat,
            cost: 0,
            ready_at: now,
        });
    }
    let unrepresentable = AcquireError::Unrepresentable { requested: n };
    let cost = n.checked_mul(q.t()).ok_or(unrepresentable)?;
    let new_tat = tat.max(now).checked_add(cost).ok_or(unrepresentable)?;
    let ready_at = new_tat.saturating_sub(q.tau());
    let wait = ready_at.saturating_sub(now);
    if max_wait.is_some_and(|max| wait > max) {
        return Err(AcquireError::RateLimited {
            retry_after: Duration::from_nanos(wait),
        });
    }
    Ok(Ticket {
        new_tat,
        cost,
        ready_at,
    })
}

/// Cancel: give the reservation back if it is still the latest (`tat_now == new_tat`), only
/// before `ready_at`. Returns the TAT to store, or `None` when nothing may be given back.
///
/// This is stricter than DESIGN.md 3's `refund = cost - (tat_now - new_tat)` (the rule of
/// golang.org/x/time/rate) on purpose: that rule lowers the TAT below a later reservation that is
/// still pending, and successive cancels compound it. The property test found a sequence
/// (burst 5, T = 31 ns: reserve 7, 8, 2; cancel the 8, then the 7; reserve 8) after which 10
/// permits are granted within 31 ns. A later reservation is always pending while an earlier one
/// can still be cancelled (its ready time is later), so the only refund that never returns
/// capacity a later reservation was scheduled against is the whole reservation when it is the
/// latest, and nothing otherwise. Cancelling in reverse order (latest first) refunds everything.
#[inline]
pub(crate) fn refund(tat_now: Nanos, ticket: &Ticket, now: Nanos) -> Option<Nanos> {
    let refundable = now < ticket.ready_at && ticket.cost > 0 && tat_now == ticket.new_tat;
    refundable.then(|| tat_now.saturating_sub(ticket.cost))
}

#[cfg(test)]
mod tests;
