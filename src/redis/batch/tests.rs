//! The batches' bound, property-tested: several processes, each with its own [`Entry`] (the
//! real bookkeeping), share a reference GCRA with holes (what `scripts/gcra.lua` does for
//! `check`, `take` and `cancel`, in integer microseconds); takes answer after a random
//! latency, ended batches go back at once. Every interval between two grants must keep the
//! guide's two bounds.

use proptest::prelude::*;

use super::entry::{Batch, Entry, Sizing};

/// The shared GCRA: the TAT and the holes `(start, end]`, lowest first, in µs.
struct Model {
    b: u64,
    t: u64,
    tat: u64,
    holes: Vec<(u64, u64)>,
}

impl Model {
    fn tau(&self) -> u64 {
        self.b * self.t
    }

    fn prune(&mut self, now: u64) {
        self.holes.retain(|h| h.1 > now);
    }

    /// A check of `n` at `now` (the lowest hole that holds it within the burst, else the
    /// tail): whether it was admitted.
    fn check(&mut self, n: u64, now: u64) -> bool {
        self.prune(now);
        if n == 0 || n > self.b {
            return false;
        }
        let len = n * self.t;
        let horizon = now + self.tau();
        for i in 0..self.holes.len() {
            let (hs, he) = self.holes[i];
            let s = hs.max(now);
            if he >= s + len && s + len <= horizon {
                let mut parts = Vec::new();
                if s > hs {
                    parts.push((hs, s));
                }
                if he > s + len {
                    parts.push((s + len, he));
                }
                self.holes.splice(i..=i, parts);
                return true;
            }
        }
        let new = self.tat.max(now) + len;
        if new <= horizon {
            self.tat = new;
            return true;
        }
        false
    }

    /// The script's `take`: up to `k` at the tail; the granted count and the batch's end.
    fn take(&mut self, k: u64, now: u64) -> (u64, u64) {
        self.prune(now);
        let base = self.tat.max(now);
        let room = now + self.tau();
        let g = if room > base {
            k.min((room - base) / self.t)
        } else {
            0
        };
        if g == 0 {
            return (0, 0);
        }
        self.tat = base + g * self.t;
        (g, self.tat)
    }

    /// The script's `cancel` of `cost` µs ending at `stop`.
    fn cancel(&mut self, stop: u64, cost: u64, now: u64) {
        self.prune(now);
        let start = stop - cost;
        if cost == 0 || stop <= now {
            return;
        }
        if self.tat == stop {
            self.tat = start;
            self.holes.retain(|h| h.0 < start);
            if let Some(last) = self.holes.last_mut() {
                last.1 = last.1.min(start);
            }
            while let Some(&(hs, he)) = self.holes.last() {
                if he != self.tat {
                    break;
                }
                self.tat = hs;
                self.holes.pop();
            }
        } else {
            let (lo, hi) = (start.max(now), stop.min(self.tat));
            if hi > lo {
                self.holes.push((lo, hi));
                self.holes.sort_unstable();
                let mut merged: Vec<(u64, u64)> = Vec::new();
                for h in self.holes.drain(..) {
                    match merged.last_mut() {
                        Some(m) if h.0 <= m.1 => m.1 = m.1.max(h.1),
                        _ => merged.push(h),
                    }
                }
                self.holes = merged;
            }
        }
    }
}

/// One call: the process, the time since the previous call (µs), the permits, and the latency
/// of a take it starts (µs).
type Call = (usize, u64, u64, u64);

/// A count at an instant (µs).
type Stamped = (u64, u64);

/// Runs the calls; returns the grants `(time, n)` and the permits held at each call's instant
/// before anything booked at it (`(time, held)`).
fn run(
    b: u64,
    t: u64,
    procs: usize,
    sizing: Sizing,
    calls: &[Call],
) -> (Vec<Stamped>, Vec<Stamped>) {
    let mut model = Model {
        b,
        t,
        tat: 0,
        holes: Vec::new(),
    };
    let mut entries: Vec<Entry> = (0..procs).map(|_| Entry::new(0)).collect();
    // Takes in flight: (answered at, sent at, process, size).
    let mut pending: Vec<(u64, u64, usize, u64)> = Vec::new();
    let (mut grants, mut held) = (Vec::new(), Vec::new());
    let mut now = 1_000_000u64;
    let ns = |us: u64| us * 1000;
    let give_back = |model: &mut Model, ended: Vec<Batch>, now: u64| {
        for e in ended {
            model.cancel(e.mark, e.left * t, now);
        }
    };
    let answer = |model: &mut Model,
                  entries: &mut Vec<Entry>,
                  pending: &mut Vec<(u64, u64, usize, u64)>,
                  due: &dyn Fn(u64) -> bool| {
        pending.sort_unstable();
        while let Some(&(at, sent, p, k)) = pending.first() {
            if !due(at) {
                break;
            }
            pending.remove(0);
            let (g, stop) = model.take(k, at);
            let batch = Batch {
                left: g,
                ends: ns(sent) + sizing.refresh_ns,
                mark: stop,
                server_us: at,
                received: ns(at),
                reset_us: stop.saturating_sub(at),
            };
            entries[p].taken(Some(batch), ns(at), sizing);
        }
    };
    for &(p, dt, n, latency) in calls {
        now += dt;
        answer(&mut model, &mut entries, &mut pending, &|at| at < now);
        held.push((now, entries.iter().map(Entry::held).sum()));
        answer(&mut model, &mut entries, &mut pending, &|at| at == now);
        let mut ended = Vec::new();
        let granted = entries[p].grant(n, ns(now), sizing, &mut ended).is_some();
        give_back(&mut model, ended, now);
        if granted || model.check(n, now) {
            grants.push((now, n));
        }
        if let Some(k) = entries[p].want(ns(now), sizing) {
            pending.push((now + latency, now, p, k));
        }
        // Another process's ended batches go back too (its sweep).
        for e in &mut entries {
            let mut ended = Vec::new();
            e.expire(ns(now), &mut ended);
            give_back(&mut model, ended, now);
        }
    }
    (grants, held)
}

/// Gaps between calls: mostly none (bursts at one instant, where the bounds are reached),
/// sometimes a pause long enough for the bucket to refill or a batch to end.
fn gaps() -> impl Strategy<Value = u64> {
    prop_oneof![3 => Just(0u64), 2 => 0u64..3_000, 1 => 0u64..80_000]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_interval_keeps_both_bounds(
        b in 2u64..40,
        t in 1u64..2_000,
        procs in 1usize..5,
        share in 1u64..=100,
        // The refresh interval as a share of the tolerance b * T: the bounds bite below 1.
        refresh_pct in 1u64..150,
        calls in proptest::collection::vec((0usize..5, gaps(), 1u64..4, 0u64..3_000), 1..200),
    ) {
        let cap = b * share / 100;
        prop_assume!(cap >= 2);
        let refresh_us = (b * t * refresh_pct / 100).max(1);
        let sizing = Sizing { refresh_ns: refresh_us * 1000, cap };
        let calls: Vec<Call> = calls.into_iter().map(|(p, dt, n, l)| (p % procs, dt, n, l)).collect();
        let (grants, held) = run(b, t, procs, sizing, &calls);
        for (i, &(s, _)) in grants.iter().enumerate() {
            // What was held at s before anything booked at s.
            let h = held.iter().find(|x| x.0 == s).map_or(0, |x| x.1);
            prop_assert!(h <= procs as u64 * cap);
            let mut sum = 0;
            for &(e, n) in &grants[i..] {
                sum += n;
                let len = e - s;
                let first = b + len / t + h;
                let second = b + (len + refresh_us) / t;
                prop_assert!(sum <= first, "{sum} granted in [{s}, {e}] > {first} (held {h})");
                prop_assert!(sum <= second, "{sum} granted in [{s}, {e}] > {second}");
            }
        }
    }
}

#[test]
fn the_model_gives_back_exactly_when_latest_and_as_a_hole_otherwise() {
    let mut m = Model {
        b: 10,
        t: 10,
        tat: 0,
        holes: Vec::new(),
    };
    assert_eq!(m.take(4, 100), (4, 140));
    assert_eq!(m.take(3, 100), (3, 170));
    // The first batch's last 2 intervals become a hole (120, 140]; the second goes back
    // exactly, and the TAT falls through the hole to 120.
    m.cancel(140, 20, 100);
    assert_eq!(m.holes, vec![(120, 140)]);
    m.cancel(170, 30, 100);
    assert_eq!((m.tat, m.holes.len()), (120, 0));
    // 10 fit under the burst at 100 with the TAT at 120: 8 more.
    assert_eq!(m.take(20, 100), (8, 200));
    assert!(!m.check(1, 100));
}

proptest! {
    /// The batch table finds a state key by the user's key after the state key of the empty
    /// key (`Batches::grant`): the same state key as the whole one, for any prefix, quota,
    /// name and key.
    #[test]
    fn a_state_key_is_the_empty_key_s_followed_by_the_key(
        prefix in "[a-z:]{0,8}",
        limit in any::<u64>(),
        span_us in any::<u64>(),
        sub_windows in proptest::option::of(any::<u32>()),
        keeps_quota in any::<bool>(),
        name in proptest::option::of("[a-z][a-z0-9]{0,6}"),
        key in any::<String>(),
    ) {
        use super::super::rate::algorithm::state_key;
        use super::super::scripts::Params;
        let p = Params { limit, span_us, sub_windows, keeps_quota };
        for algorithm in ["gcra", "fixed"] {
            let own = state_key(&prefix, algorithm, p, name.as_deref(), "");
            prop_assert_eq!(
                format!("{own}{key}"),
                state_key(&prefix, algorithm, p, name.as_deref(), &key)
            );
        }
    }
}
