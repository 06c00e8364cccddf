//! Holes: stretches of the GCRA schedule given back by cancelled reservations that were not
//! the latest.
//!
//! GCRA lays every grant out on one axis of positions (the TAT axis): a grant of `n` permits
//! takes the stretch `(s, s + n*T]`, and it is admitted at `g` only if the stretch ends by
//! `g + tau` and starts at or after `g` (for `n <= burst`). The window bound follows from the
//! stretches being disjoint. The tail (the TAT) is the end of the last stretch. A reservation
//! cancelled while later ones are still booked behind it leaves a gap below the tail: a hole.
//! Lowering the tail instead would hand a later reservation's stretch out twice; forgetting the
//! gap loses its capacity. Holes keep it: later arrivals are placed into a hole (lowest
//! position first) before the tail, under the same conformance rule, so stretches stay
//! disjoint and the bound holds. Positions below `now` can never be used again, so a hole is
//! pruned once it ends by `now`.
//!
//! Pure data and arithmetic; the cell (`crate::cell::gcra`) keeps a cell's holes under a lock.

use crate::Nanos;

/// Free stretches `(start, end]` below the tail: sorted, disjoint, never touching (touching
/// stretches are merged), each ending below the tail it was recorded under.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Holes {
    spans: Vec<(Nanos, Nanos)>,
    /// The quota generation the positions were recorded under.
    pub(crate) generation: u64,
}

impl Holes {
    /// No holes, recorded under quota generation `generation`.
    pub(crate) fn new(generation: u64) -> Holes {
        Holes {
            spans: Vec::new(),
            generation,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    #[cfg(any(test, loom))]
    pub(crate) fn spans(&self) -> &[(Nanos, Nanos)] {
        &self.spans
    }

    /// Forgets every hole (a quota change re-scales the tail; holes recorded in the old
    /// scale are dropped rather than guessed at, which can only refuse, never over-admit).
    pub(crate) fn clear(&mut self, generation: u64) {
        self.spans.clear();
        self.generation = generation;
    }

    /// Drops holes that end by `now`: nothing can be placed below `now`.
    pub(crate) fn prune(&mut self, now: Nanos) {
        self.spans.retain(|&(_, end)| end > now);
    }

    /// Whole stretches of `t` free within `[now, now + tau]` (what `remaining` adds for holes).
    pub(crate) fn slots(&self, now: Nanos, tau: Nanos, t: Nanos) -> u64 {
        let horizon = now.saturating_add(tau);
        self.spans
            .iter()
            .map(|&(start, end)| end.min(horizon).saturating_sub(start.max(now)) / t)
            .sum()
    }

    /// The lowest position `s >= now` with `(s, s + len]` inside a hole, and that hole's
    /// index. The lowest position also gives the earliest ready time.
    pub(crate) fn place(&self, now: Nanos, len: Nanos) -> Option<(usize, Nanos)> {
        self.spans
            .iter()
            .enumerate()
            .find_map(|(i, &(start, end))| {
                let s = start.max(now);
                (end.saturating_sub(s) >= len).then_some((i, s))
            })
    }

    /// The earliest instant `>= now` at which `(s, s + len]` fits in a hole within the
    /// conformance window `[at, at + tau]`.
    pub(crate) fn earliest_fit(&self, now: Nanos, len: Nanos, tau: Nanos) -> Option<Nanos> {
        self.spans.iter().find_map(|&(start, end)| {
            // Placed at max(start, at): needs at + tau >= start + len (when at < start) and
            // end - max(start, at) >= len.
            let at = now.max(start.saturating_add(len).saturating_sub(tau));
            (end.saturating_sub(start.max(at)) >= len).then_some(at)
        })
    }

    /// Takes `(s, s + len]` out of hole `i` (found by [`place`](Holes::place)).
    pub(crate) fn take(&mut self, i: usize, s: Nanos, len: Nanos) {
        let (start, end) = self.spans[i];
        let taken_end = s + len;
        // What lies below `s` is either below `now` (never usable) or free: keep it if free.
        let mut parts = [(start, s), (taken_end, end)]
            .into_iter()
            .filter(|&(a, b)| b > a);
        match (parts.next(), parts.next()) {
            (Some(a), Some(b)) => {
                self.spans[i] = a;
                self.spans.insert(i + 1, b);
            }
            (Some(a), None) => self.spans[i] = a,
            _ => {
                self.spans.remove(i);
            }
        }
    }

    /// Adds the free stretch `(start, end]`, merging it with holes it touches.
    pub(crate) fn give(&mut self, start: Nanos, end: Nanos) {
        if end <= start {
            return;
        }
        let at = self.spans.partition_point(|&(_, e)| e < start);
        let (mut lo, mut hi) = (start, end);
        let mut last = at;
        while last < self.spans.len() && self.spans[last].0 <= hi {
            lo = lo.min(self.spans[last].0);
            hi = hi.max(self.spans[last].1);
            last += 1;
        }
        self.spans.splice(at..last, [(lo, hi)]);
    }

    /// Drops every position at or past `tail` (a reward moved the tail down: holes stay
    /// below it), cutting a hole that straddles it.
    pub(crate) fn cut(&mut self, tail: Nanos) {
        self.spans.retain(|&(start, _)| start < tail);
        if let Some(last) = self.spans.last_mut() {
            last.1 = last.1.min(tail);
        }
    }

    /// The tail after it moved down to `tail` (the latest reservation cancelled): positions at
    /// or past it are free already, so the holes there go ([`cut`](Holes::cut): a hole given
    /// by an earlier cancel can reach above a tail that a reward lowered, and kept there it
    /// would be handed out a second time from the tail); then every hole that ends exactly at
    /// the tail is given back (repeatedly): the schedule's end moves down over freed stretches.
    pub(crate) fn coalesce(&mut self, mut tail: Nanos) -> Nanos {
        self.cut(tail);
        while let Some(&(start, end)) = self.spans.last() {
            if end != tail {
                break;
            }
            tail = start;
            self.spans.pop();
        }
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holes(spans: &[(Nanos, Nanos)]) -> Holes {
        let mut h = Holes::default();
        for &(a, b) in spans {
            h.give(a, b);
        }
        h
    }

    #[test]
    fn give_merges_touching_and_keeps_order() {
        let h = holes(&[(50, 60), (10, 20), (20, 30), (40, 45)]);
        assert_eq!(h.spans, vec![(10, 30), (40, 45), (50, 60)]);
        let h = holes(&[(10, 20), (30, 40), (20, 30)]);
        assert_eq!(h.spans, vec![(10, 40)]);
        let h = holes(&[(10, 10)]);
        assert!(h.is_empty());
    }

    #[test]
    fn place_finds_the_lowest_fit_at_or_after_now() {
        let h = holes(&[(10, 20), (30, 60)]);
        assert_eq!(h.place(0, 10), Some((0, 10)));
        assert_eq!(h.place(15, 10), Some((1, 30))); // (15, 20] is too short now
        assert_eq!(h.place(0, 31), None);
        assert_eq!(h.place(45, 15), Some((1, 45)));
        assert_eq!(h.place(46, 15), None);
    }

    #[test]
    fn take_splits_and_removes() {
        let mut h = holes(&[(10, 40)]);
        h.take(0, 20, 10);
        assert_eq!(h.spans, vec![(10, 20), (30, 40)]);
        h.take(1, 30, 10);
        assert_eq!(h.spans, vec![(10, 20)]);
        h.take(0, 10, 10);
        assert!(h.is_empty());
    }

    #[test]
    fn slots_count_whole_intervals_inside_the_window() {
        let h = holes(&[(10, 35), (100, 200)]);
        // window [12, 112]: (12, 35] has 2 whole 10s; (100, 112] has 1.
        assert_eq!(h.slots(12, 100, 10), 3);
        assert_eq!(h.slots(0, 5, 10), 0);
    }

    #[test]
    fn earliest_fit_waits_for_the_window_to_reach_the_hole() {
        let h = holes(&[(100, 130)]);
        // len 20, tau 30: at 90 the window [90, 120] holds (100, 120].
        assert_eq!(h.earliest_fit(0, 20, 30), Some(90));
        assert_eq!(h.earliest_fit(95, 20, 30), Some(95));
        // At 111 only (111, 130] is left: 19 < 20.
        assert_eq!(h.earliest_fit(111, 20, 30), None);
        assert_eq!(h.earliest_fit(0, 40, 60), None);
    }

    #[test]
    fn coalesce_lowers_the_tail_over_holes_ending_at_it() {
        let mut h = holes(&[(10, 20), (30, 50)]);
        assert_eq!(h.coalesce(60), 60);
        assert_eq!(h.coalesce(50), 30);
        assert_eq!(h.spans, vec![(10, 20)]);
    }

    #[test]
    fn prune_drops_what_ends_by_now() {
        let mut h = holes(&[(10, 20), (30, 50)]);
        h.prune(20);
        assert_eq!(h.spans, vec![(30, 50)]);
    }
}
