//! The semaphore cell's word: what its bits mean and the pure rules that change it. The cell
//! (`cell::semaphore`) only loads, calls these, and CASes.
//!
//! Layout of the `u64`: bits 0..31 the permits in flight, bits 31..62 the limit (both at most
//! [`MAX_LIMIT`]), bit 62 `QUEUED` (the waiter queue is not empty), bit 63 `CLOSED` (evicted
//! from a keyed store: no permit may be granted on it again).
//!
//! In flight can exceed the limit after the limit was lowered (held permits are never
//! revoked); it never exceeds the largest limit ever set, so it always fits its 31 bits.

/// The largest limit (and the most permits in flight): `2^31 - 1`.
pub(crate) const MAX_LIMIT: u32 = (1 << 31) - 1;

const FIELD: u64 = (1 << 31) - 1;
const LIMIT_SHIFT: u32 = 31;
const QUEUED: u64 = 1 << 62;
const CLOSED: u64 = 1 << 63;

/// The word, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) in_flight: u32,
    pub(crate) limit: u32,
    pub(crate) queued: bool,
    pub(crate) closed: bool,
}

impl State {
    /// A fresh cell: nothing in flight, nobody waiting.
    pub(crate) const fn fresh(limit: u32) -> State {
        State {
            in_flight: 0,
            limit,
            queued: false,
            closed: false,
        }
    }

    #[inline(always)]
    pub(crate) const fn unpack(w: u64) -> State {
        State {
            in_flight: (w & FIELD) as u32,
            limit: ((w >> LIMIT_SHIFT) & FIELD) as u32,
            queued: w & QUEUED != 0,
            closed: w & CLOSED != 0,
        }
    }

    #[inline(always)]
    pub(crate) const fn pack(self) -> u64 {
        (self.in_flight as u64 & FIELD)
            | ((self.limit as u64 & FIELD) << LIMIT_SHIFT)
            | if self.queued { QUEUED } else { 0 }
            | if self.closed { CLOSED } else { 0 }
    }

    /// Permits a new request could take now: the limit less what is in flight (zero while
    /// over a lowered limit).
    #[inline(always)]
    pub(crate) const fn available(self) -> u32 {
        self.limit.saturating_sub(self.in_flight)
    }

    /// Whether `n` more permits fit under the limit (ignoring waiters).
    #[inline(always)]
    pub(crate) const fn fits(self, n: u32) -> bool {
        self.in_flight as u64 + n as u64 <= self.limit as u64
    }

    /// Nothing in flight, nobody waiting, not evicted: the cell decides like a fresh one, so a
    /// keyed store may evict it.
    #[inline(always)]
    pub(crate) const fn is_idle(self) -> bool {
        self.in_flight == 0 && !self.queued && !self.closed
    }
}

/// What a non-waiting take of `n` permits finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Granted: store this word.
    Granted(u64),
    /// More than the limit: never grantable at once.
    TooMany {
        /// The limit in force.
        limit: u32,
    },
    /// Not now: the permits are in flight, or waiters are queued ahead (FIFO: nobody passes
    /// a waiter, so a large request at the head is not starved by small ones behind it).
    Busy {
        /// Permits in flight.
        in_flight: u32,
        /// The limit in force.
        limit: u32,
    },
    /// The cell was evicted: look the key up again.
    Closed,
}

/// The fast path's rule: take `n >= 1` permits from word `w`, or say why not.
#[inline(always)]
pub(crate) fn take(w: u64, n: u32) -> Take {
    let s = State::unpack(w);
    if s.closed {
        Take::Closed
    } else if n > s.limit {
        Take::TooMany { limit: s.limit }
    } else if s.queued || !s.fits(n) {
        Take::Busy {
            in_flight: s.in_flight,
            limit: s.limit,
        }
    } else {
        Take::Granted(
            State {
                in_flight: s.in_flight + n,
                ..s
            }
            .pack(),
        )
    }
}

/// Word `w` less `n` released permits. `n` is at most what is in flight (a permit gives back
/// what it holds); saturating, so a bug cannot wrap into the limit's bits.
#[inline(always)]
pub(crate) fn give_back(w: u64, n: u32) -> u64 {
    let s = State::unpack(w);
    debug_assert!(n <= s.in_flight, "releasing {n} of {}", s.in_flight);
    State {
        in_flight: s.in_flight.saturating_sub(n),
        ..s
    }
    .pack()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn st(in_flight: u32, limit: u32, queued: bool) -> u64 {
        State {
            in_flight,
            limit,
            queued,
            closed: false,
        }
        .pack()
    }

    #[test]
    fn packs_and_unpacks_every_field_at_its_extremes() {
        for s in [
            State::fresh(1),
            State::fresh(MAX_LIMIT),
            State {
                in_flight: MAX_LIMIT,
                limit: 1,
                queued: true,
                closed: false,
            },
            State {
                in_flight: 0,
                limit: MAX_LIMIT,
                queued: false,
                closed: true,
            },
        ] {
            assert_eq!(State::unpack(s.pack()), s);
        }
    }

    #[test]
    fn take_grants_up_to_the_limit_and_not_past_it() {
        assert_eq!(take(st(0, 3, false), 3), Take::Granted(st(3, 3, false)));
        assert_eq!(take(st(2, 3, false), 1), Take::Granted(st(3, 3, false)));
        assert_eq!(
            take(st(3, 3, false), 1),
            Take::Busy {
                in_flight: 3,
                limit: 3
            }
        );
        assert_eq!(take(st(0, 3, false), 4), Take::TooMany { limit: 3 });
    }

    #[test]
    fn take_never_passes_a_queued_waiter() {
        // Room for one, but someone waits (for more): FIFO says wait behind them.
        assert_eq!(
            take(st(0, 3, true), 1),
            Take::Busy {
                in_flight: 0,
                limit: 3
            }
        );
    }

    #[test]
    fn a_closed_cell_grants_nothing() {
        let w = State {
            closed: true,
            ..State::fresh(3)
        }
        .pack();
        assert_eq!(take(w, 1), Take::Closed);
        assert!(!State::unpack(w).is_idle());
    }

    #[test]
    fn over_a_lowered_limit_nothing_is_available() {
        let s = State::unpack(st(5, 2, false));
        assert_eq!(s.available(), 0);
        assert!(!s.fits(0) && !s.fits(1));
        assert_eq!(State::unpack(give_back(st(5, 2, false), 4)).available(), 1);
    }

    #[test]
    fn idle_means_nothing_in_flight_and_nobody_waiting() {
        assert!(State::unpack(st(0, 3, false)).is_idle());
        assert!(!State::unpack(st(1, 3, false)).is_idle());
        assert!(!State::unpack(st(0, 3, true)).is_idle());
    }
}
