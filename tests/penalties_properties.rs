//! Property tests of block, penalize, reward and reset: random schedules of
//! checks, advances, sweeps and the four operations on a `ManualClock`, every `Decision`
//! compared with a plain reference model written from the rules in
//! `docs/guide/penalties.md`, on a direct limiter and on a key of a keyed one. The models are
//! those of `tests/buckets_are_gcra.rs` (GCRA as a leaky bucket's water level) and
//! `tests/windows_properties.rs` (windows as counts per window, or as a list of grants),
//! extended with the four operations, and answer `retry_after` and `reset_after` by brute
//! force where the limiter computes them.
//!
//! Beside the models, what the issue asks to hold is asserted directly: a block refuses every
//! request until its end (unless a reward or a reset came since), `remaining` is never above
//! the limit (a reward never fills past a full bucket), and the permits granted, with the
//! penalties counted as grants, never pass the algorithm's own bound.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, Clock, Decision, FixedWindow, Gcra, KeyedRateLimiter, ManualClock, Quota,
    RateLimiter, RefusedBy, SlidingLog, SlidingWindow, WeightedWindow, MAX_NANOS,
};

#[derive(Clone, Copy, Debug)]
enum Op {
    Check(u64),
    Advance(u64),
    Penalize(u64),
    Reward(u64),
    Block(u64),
    Reset,
    Sweep,
}

fn ops(l: u64, w: u64) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (0..=l + 1).prop_map(Op::Check),
        4 => (0..2 * w).prop_map(Op::Advance),
        2 => (0..=l + 2).prop_map(Op::Penalize),
        2 => (0..=l + 2).prop_map(Op::Reward),
        1 => (0..3 * w).prop_map(Op::Block),
        1 => Just(Op::Reset),
        1 => Just(Op::Sweep),
    ];
    prop::collection::vec(op, 1..60)
}

/// Schedules that reach what the mixed ones rarely do: a block longer than the window (its
/// entry stamped after `now`), rewards taken from it, then grants, penalties and looks while it
/// still counts, with short advances.
fn block_reward_grant_ops(l: u64, w: u64) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (1..=l).prop_map(Op::Check),
        3 => (0..w).prop_map(Op::Advance),
        2 => (1..=l).prop_map(Op::Reward),
        1 => (w..3 * w).prop_map(Op::Block),
        1 => (1..=l).prop_map(Op::Penalize),
        1 => Just(Op::Sweep),
    ];
    prop::collection::vec(op, 1..40)
}

/// What a model says, as the limiter's `Decision` (durations in ns).
fn decision(allowed: bool, limit: u64, remaining: u64, retry: Option<u64>, reset: u64) -> Decision {
    let mut d = if allowed {
        Decision::allowed(limit, remaining, Duration::from_nanos(reset))
    } else {
        Decision::denied(
            limit,
            remaining,
            Duration::ZERO,
            Duration::from_nanos(reset),
        )
    };
    d.retry_after = retry.map(Duration::from_nanos);
    d
}

/// The reference models' common face.
trait Model {
    fn limit(&self) -> u64;
    /// A check of `n` at `now`, recording it if granted (`n = 0`: a look).
    fn check(&mut self, now: u64, n: u64) -> Decision;
    /// Whether `n` permits fit at `now`, and when they would with nothing else admitted.
    fn one(&self, now: u64) -> (bool, Option<u64>);
    fn penalize(&mut self, now: u64, n: u64);
    fn reward(&mut self, now: u64, n: u64);
    fn block(&mut self, now: u64, until: u64);
    fn reset(&mut self);
    /// What an operation reports: the look's fields, a one-permit check's verdict.
    fn after(&mut self, now: u64) -> Decision {
        let look = self.check(now, 0);
        let (allowed, retry) = self.one(now);
        let mut d = look;
        d.allowed = allowed;
        d.retry_after = retry.map(Duration::from_nanos);
        // Refused after the adjustment: by the quota (a key cap never refuses a tracked key).
        d.refused_by = (!allowed).then_some(RefusedBy::Quota);
        d
    }
}

/// GCRA as a leaky bucket: `water` ns of leak in a funnel of `tau`, one permit being `T`.
struct Funnel {
    t: u64,
    b: u64,
    water: u64,
    last: u64,
}

impl Funnel {
    fn tau(&self) -> u64 {
        self.t * self.b
    }

    fn leak(&mut self, now: u64) {
        self.water = self.water.saturating_sub(now - self.last);
        self.last = now;
    }

    fn room(&self) -> u64 {
        self.tau().saturating_sub(self.water) / self.t
    }
}

impl Model for Funnel {
    fn limit(&self) -> u64 {
        self.b
    }

    fn check(&mut self, now: u64, n: u64) -> Decision {
        self.leak(now);
        let pour = n * self.t;
        let allowed = n == 0 || (n <= self.b && self.water + pour <= self.tau());
        let retry = if allowed || n > self.b {
            None
        } else {
            Some(self.water + pour - self.tau())
        };
        if allowed {
            self.water += pour;
        }
        // The limiter reports no room on a refused single permit without dividing.
        let remaining = if n == 1 && !allowed { 0 } else { self.room() };
        decision(allowed, self.b, remaining, retry, self.water)
    }

    fn one(&self, now: u64) -> (bool, Option<u64>) {
        let water = self.water.saturating_sub(now - self.last);
        let over = (water + self.t).saturating_sub(self.tau());
        (over == 0, (over > 0).then_some(over))
    }

    fn penalize(&mut self, now: u64, n: u64) {
        self.leak(now);
        self.water += n * self.t;
    }

    fn reward(&mut self, now: u64, n: u64) {
        self.leak(now);
        self.water = self.water.saturating_sub(n * self.t);
    }

    fn block(&mut self, now: u64, until: u64) {
        self.leak(now);
        // Empty until `until`: one permit then.
        self.water = self.water.max(until - now + self.tau() - self.t);
    }

    fn reset(&mut self) {
        self.water = 0;
    }
}

#[derive(Clone, Copy, Debug)]
enum Win {
    Fixed,
    Weighted,
    Sub { k: u64 },
    Log,
}

/// The windows: counts per window (fixed, weighted: the window in force is the latest with a
/// count, or now's), or the list of entries `(stamp, n)` in stamp order (sliding window and
/// log: grants, penalties and blocks' entries alike).
struct Windows {
    alg: Win,
    l: u64,
    w: u64,
    /// The window last written (fixed, weighted), until the counts are all 0 again: the one
    /// the counts are in force in while the clock has not reached it.
    index: Option<u64>,
    counts: BTreeMap<u64, u64>,
    grants: Vec<(u64, u64)>,
}

impl Windows {
    fn new(alg: Win, l: u64, w: u64) -> Windows {
        Windows {
            alg,
            l,
            w,
            index: None,
            counts: BTreeMap::new(),
            grants: Vec::new(),
        }
    }

    /// Window `k` counts `c` now; the state is forgotten once nothing counts in it.
    fn set(&mut self, k: u64, c: u64) {
        self.counts.insert(k, c);
        self.index = Some(k);
        let prev = match self.alg {
            Win::Weighted if k > 0 => self.count(k - 1),
            _ => 0,
        };
        if c == 0 && prev == 0 {
            self.counts.clear();
            self.index = None;
        }
    }
}

/// The largest count the fixed window's word holds beside its window index (origin-aligned).
fn fixed_capacity(w: u64) -> u64 {
    let max_index = MAX_NANOS / w;
    let bits = 63 - (u64::BITS - max_index.leading_zeros());
    (1 << bits) - 1
}

impl Windows {
    fn k(&self, now: u64) -> u64 {
        (now / self.w).max(self.index.unwrap_or(0))
    }

    fn count(&self, k: u64) -> u64 {
        self.counts.get(&k).copied().unwrap_or(0)
    }

    /// What counts at `now`, in units of `W` for the weighted window, else in permits.
    fn used(&self, now: u64) -> u128 {
        let w = self.w;
        match self.alg {
            Win::Fixed => self.count(self.k(now)).into(),
            Win::Weighted => {
                let k = self.k(now);
                let e = now.saturating_sub(k * w).min(w);
                let prev = if k == 0 { 0 } else { self.count(k - 1) };
                u128::from(prev) * u128::from(w - e) + u128::from(self.count(k)) * u128::from(w)
            }
            Win::Sub { .. } | Win::Log => self
                .grants
                .iter()
                .filter(|g| g.0 + w > now)
                .map(|g| u128::from(g.1))
                .sum(),
        }
    }

    fn scale(&self) -> u128 {
        match self.alg {
            Win::Weighted => self.w.into(),
            _ => 1,
        }
    }

    fn fits(&self, now: u64, n: u64) -> bool {
        self.used(now) + u128::from(n) * self.scale() <= u128::from(self.l) * self.scale()
    }

    fn retry(&self, now: u64, n: u64) -> u64 {
        (1..=12 * self.w).find(|&t| self.fits(now + t, n)).unwrap()
    }

    fn reset_after(&self, now: u64) -> u64 {
        match self.alg {
            Win::Fixed => (self.k(now) + 1) * self.w - now,
            _ => (0..=12 * self.w)
                .find(|&t| self.used(now + t) == 0)
                .unwrap(),
        }
    }

    /// Live grants only (a sliding reward takes the newest live permits; a block stamps
    /// within `W` of the newest live one).
    fn prune(&mut self, now: u64) {
        let w = self.w;
        self.grants.retain(|g| g.0 + w > now);
    }

    /// The stamp a grant at `now` gets: `now`, or its sub-window's start. A block's entry may
    /// be stamped later (it counts until the block's end): the grant still gets `now`'s stamp
    /// and goes before that entry, in stamp order.
    fn stamp(&self, now: u64) -> u64 {
        match self.alg {
            Win::Sub { k } => now - now % (self.w / k),
            _ => now,
        }
    }

    fn add(&mut self, now: u64, n: u64) {
        match self.alg {
            Win::Fixed | Win::Weighted => {
                let k = self.k(now);
                let cap = match self.alg {
                    Win::Fixed => fixed_capacity(self.w),
                    _ => u64::from(u32::MAX),
                };
                let c = self.count(k);
                self.set(k, (c + n).min(cap));
            }
            _ => {
                let s = self.stamp(now);
                let at = self.grants.partition_point(|g| g.0 <= s);
                self.grants.insert(at, (s, n));
            }
        }
    }
}

impl Model for Windows {
    fn limit(&self) -> u64 {
        self.l
    }

    fn check(&mut self, now: u64, n: u64) -> Decision {
        let (allowed, retry) = if n == 0 {
            (true, None)
        } else if n > self.l {
            (false, None)
        } else if self.fits(now, n) {
            self.add(now, n);
            (true, None)
        } else {
            (false, Some(self.retry(now, n)))
        };
        let remaining =
            (u128::from(self.l) * self.scale()).saturating_sub(self.used(now)) / self.scale();
        decision(
            allowed,
            self.l,
            remaining as u64,
            retry,
            self.reset_after(now),
        )
    }

    fn one(&self, now: u64) -> (bool, Option<u64>) {
        if self.fits(now, 1) {
            (true, None)
        } else {
            (false, Some(self.retry(now, 1)))
        }
    }

    fn penalize(&mut self, now: u64, n: u64) {
        if n > 0 {
            self.prune(now);
            self.add(now, n);
        }
    }

    fn reward(&mut self, now: u64, mut n: u64) {
        match self.alg {
            Win::Fixed | Win::Weighted => {
                let k = self.k(now);
                let cur = self.count(k);
                let from_cur = n.min(cur);
                let mut prev = 0;
                if let Win::Weighted = self.alg {
                    if k > 0 {
                        prev = self.count(k - 1);
                        self.counts.insert(k - 1, prev.saturating_sub(n - from_cur));
                    }
                }
                // Through `set`, so that a reward that leaves nothing counted (here or, for
                // the weighted window, in the previous window) forgets the state: a fresh key.
                if n > 0 && (cur > 0 || prev > 0 || self.used(now) > 0) {
                    self.set(k, cur - from_cur);
                }
            }
            _ => {
                self.prune(now);
                while let Some(g) = self.grants.last_mut() {
                    let take = n.min(g.1);
                    g.1 -= take;
                    n -= take;
                    if g.1 > 0 {
                        break;
                    }
                    self.grants.pop();
                }
            }
        }
    }

    fn block(&mut self, now: u64, until: u64) {
        let w = self.w;
        match self.alg {
            Win::Fixed => {
                let kb = self.k(now).max((until - 1) / w);
                self.set(kb, fixed_capacity(w));
            }
            Win::Weighted => {
                let kb = self.k(now).max((until - 1) / w);
                let c = self.count(kb);
                self.set(kb, c.max(self.l));
            }
            _ => {
                self.prune(now);
                let floor = self
                    .grants
                    .last()
                    .map_or(0, |g| (g.0 + 1).saturating_sub(w));
                let stamp = until.saturating_sub(w).max(floor);
                self.grants.retain(|g| g.0 > stamp);
                self.grants.insert(0, (stamp, self.l));
            }
        }
    }

    fn reset(&mut self) {
        self.index = None;
        self.counts.clear();
        self.grants.clear();
    }
}

/// Runs `ops` on a direct limiter, on key 0 of a keyed one, and on the model.
fn run<A: Algorithm + Copy>(
    alg: A,
    q: Quota,
    w: u64,
    mut model: impl Model,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let direct = RateLimiter::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build();
    let keyed = KeyedRateLimiter::<u8>::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build();
    let l = model.limit();
    // Until when a block must refuse everything (reset by a reward or a reset).
    let mut blocked_until = 0u64;
    for (i, &op) in ops.iter().enumerate() {
        let now = clock.now();
        // Durations in the schedule's units, scaled to the window.
        let op = match op {
            Op::Advance(d) => Op::Advance(d % (2 * w)),
            Op::Block(d) => Op::Block(d % (3 * w)),
            op => op,
        };
        let ctx = || format!("op {i} {op:?} at {now}");
        let got = match op {
            Op::Check(n) => {
                let want = model.check(now, n);
                if n > 0 && now < blocked_until {
                    prop_assert!(!want.allowed, "the model grants in a block: {}", ctx());
                }
                Some((want, direct.check_n(n), keyed.check_n(&0, n)))
            }
            Op::Advance(d) => {
                clock.advance_nanos(d);
                None
            }
            Op::Penalize(n) => {
                model.penalize(now, n);
                let want = model.after(now);
                Some((want, direct.penalize(n), keyed.penalize(&0, n).unwrap()))
            }
            Op::Reward(n) => {
                model.reward(now, n);
                if n > 0 {
                    blocked_until = 0;
                }
                let want = model.after(now);
                Some((want, direct.reward(n), keyed.reward(&0, n)))
            }
            Op::Block(d) => {
                if d > 0 {
                    model.block(now, now + d);
                    blocked_until = blocked_until.max(now + d);
                }
                let want = model.after(now);
                let d = Duration::from_nanos(d);
                Some((want, direct.block(d), keyed.block(&0, d).unwrap()))
            }
            Op::Reset => {
                model.reset();
                blocked_until = 0;
                direct.reset();
                keyed.reset(&0);
                prop_assert!(!keyed.contains_key(&0));
                None
            }
            Op::Sweep => {
                keyed.sweep_now();
                None
            }
        };
        if let Some((want, d, k)) = got {
            prop_assert_eq!(d, want, "direct, {}", ctx());
            prop_assert_eq!(k, want, "keyed, {}", ctx());
            prop_assert!(want.remaining <= l);
        }
        // Nothing a look sees differs either.
        let look = model.check(clock.now(), 0);
        prop_assert_eq!(direct.peek(), look, "direct look after {}", ctx());
        prop_assert_eq!(keyed.peek(&0), look, "keyed look after {}", ctx());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn gcra_matches_the_funnel(t in 1u64..6, b in 1u64..6, ops in ops(5, 20)) {
        let q = Quota::new(b, Duration::from_nanos(t * b)).unwrap();
        run(Gcra, q, t * b, Funnel { t, b, water: 0, last: 0 }, &ops)?;
    }

    #[test]
    fn fixed_window_matches_its_model(l in 1u64..6, w in 6u64..20, ops in ops(5, 20)) {
        let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
        let m = Windows::new(Win::Fixed, l, w);
        run(FixedWindow::new(), q, w, m, &ops)?;
    }

    #[test]
    fn weighted_window_matches_its_model(l in 1u64..6, w in 6u64..20, ops in ops(5, 20)) {
        let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
        let m = Windows::new(Win::Weighted, l, w);
        run(WeightedWindow, q, w, m, &ops)?;
    }

    #[test]
    fn sliding_window_matches_its_model(l in 1u64..6, sub in 2u64..5, k in 2u64..5, ops in ops(5, 20)) {
        let w = sub * k;
        prop_assume!(l <= w);
        let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
        let m = Windows::new(Win::Sub { k }, l, w);
        run(SlidingWindow::new(k as u32), q, w, m, &ops)?;
    }

    #[test]
    fn sliding_log_matches_its_model(l in 1u64..6, w in 6u64..20, ops in ops(5, 20)) {
        let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
        let m = Windows::new(Win::Log, l, w);
        run(SlidingLog, q, w, m, &ops)?;
    }

    #[test]
    fn sliding_window_stamps_grants_now_beside_a_later_block_entry(
        (l, sub, k, ops) in (1u64..6, 2u64..5, 2u64..5).prop_flat_map(|(l, sub, k)| {
            (Just(l), Just(sub), Just(k), block_reward_grant_ops(l, sub * k))
        })
    ) {
        let w = sub * k;
        prop_assume!(l <= w);
        let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
        let m = Windows::new(Win::Sub { k }, l, w);
        run(SlidingWindow::new(k as u32), q, w, m, &ops)?;
    }

    #[test]
    fn sliding_log_stamps_grants_now_beside_a_later_block_entry(
        (l, w, ops) in (1u64..6, 6u64..20).prop_flat_map(|(l, w)| {
            (Just(l), Just(w), block_reward_grant_ops(l, w))
        })
    ) {
        let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
        let m = Windows::new(Win::Log, l, w);
        run(SlidingLog, q, w, m, &ops)?;
    }
}
