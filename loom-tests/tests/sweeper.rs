//! The sweeper racing decisions on the same key (`Engine::decide` on a key's slot vs
//! `KeyedStore::sweep_locked`).
//!
//! The shard is a loom `RwLock<BTreeMap<u64, TatCell>>` (see its comment below), and
//! the two sides run the library's own code on it (`tollgate::__loom`):
//! - an acquire is `engine::decide_on_shard`, the function `Engine::decide` itself
//!   calls: the shard's read guard on the key, `now` read after it, the CAS under it; on a miss
//!   a scratch fresh cell, and only if that stores, the key slot's insert step
//!   (transcribed here: write lock, `entry().or_default()`, check again with a fresh `now`);
//! - a sweep is the rule `store::evict::verdict` over `evict_by`, run as
//!   `KeyedStore::sweep_locked` runs it for rate cells (transcribed here: the shard's write
//!   lock, then `now` read under it, then the rule with the clock's `max_skew`).
//!
//! The key starts with TAT 1000 on a clock at 900 that a thread advances to 1000, where the key
//! turns cold (`tat <= now`) and may be evicted; a neighbour key with TAT 1001 stays hot by 1 ns.
//!
//! The skewed cases model the default clock on x86_64 (the TSC), whose readings can be up to
//! `max_skew` earlier than a reading that happened-before them on another core: every reading
//! the acquiring thread takes is `SKEW` behind the sweeper's clock, the worst the bound allows.
//! The clock then advances to 1000 + `SKEW`, where the key is cold by the skew (`tat + SKEW <=
//! now`) and may be evicted; the neighbour stays hot by 1 ns again.
//!
//! Property, in every interleaving:
//! - a key is evicted only when cold by the skew at the sweeper's `now` (checked on each
//!   removal, under the write lock);
//! - no update is lost: each decision equals the one a never-swept cell gives at the same `now`
//!   (the reference replays the decisions in order on a cell no one evicts), and the final state
//!   of every key (absent = a fresh cell) answers a `peek` at the final time exactly as the
//!   reference does, so every later decision is the same too.

use std::collections::BTreeMap;

use loom::sync::{Arc, RwLock};
use tollgate::__loom::{check_on_shard, evict_cold, Checked, Looked, TatCell};
use tollgate::{Clock, ManualClock, Quota};
use tollgate_loom_tests::{lookup, model, quota};

const T: u64 = 100;
/// The clock's start.
const START: u64 = 900;
/// How far a thread advances it: to 1000 (plus the skew the sweep allows for).
const ADVANCE: u64 = 100;
/// How far the acquiring thread's readings lag the sweeper's in the skewed cases: less than `T`,
/// as the TSC's skew (microseconds) is less than any useful interval.
const SKEW: u64 = 50;
/// The contended key, TAT 1000 when present at the start: cold once the clock is advanced.
const KEY: u64 = 1;
/// A key no one acquires on, TAT 1001: hot by 1 ns at the advanced time, so never evicted.
const HOT: u64 = 2;

fn q() -> Quota {
    quota(T, 1)
}

/// One shard of the keyed store, and the limiter's clock. An ordered map, so the sweep walks
/// keys in the same order in every execution (loom replays executions deterministically).
struct Shard {
    map: RwLock<BTreeMap<u64, TatCell>>,
    clock: ManualClock,
    /// How far behind the sweeper's readings the acquiring thread's are.
    skew: u64,
    /// The `max_skew` the sweep allows for (`skew`, unless a case shows what a narrower rule
    /// does).
    rule_skew: u64,
}

impl Shard {
    /// A reading on the acquiring thread's core.
    fn acquirer_now(&self) -> u64 {
        self.clock.now().saturating_sub(self.skew)
    }
}

/// A cell with the TAT a check of one permit at `at` leaves (`at + T`).
fn cell_taken_at(at: u64) -> TatCell {
    let cell = TatCell::new();
    let _ = cell.check(at, 1, q());
    cell
}

/// The start: `HOT` present (TAT 1001), `KEY` present with TAT 1000 unless `key_absent`.
fn initial(key_absent: bool) -> BTreeMap<u64, TatCell> {
    let mut map = BTreeMap::new();
    if !key_absent {
        map.insert(KEY, cell_taken_at(START));
    }
    map.insert(HOT, cell_taken_at(START + 1));
    map
}

/// `Engine::decide` on a key's slot for a check of `n` permits on `key`.
fn acquire(shard: &Shard, key: u64, n: u64) -> Checked {
    let lookup = || lookup(&shard.map, key);
    match check_on_shard(lookup, || shard.acquirer_now(), n, q()) {
        Looked::Decided(c) => c,
        Looked::MustInsert(_) => {
            let mut map = shard.map.write().unwrap();
            map.entry(key)
                .or_default()
                .check(shard.acquirer_now(), n, q())
        }
    }
}

/// An eviction: which key, its TAT when removed, the sweeper's `now`.
type Removal = (u64, u64, u64);

/// One shard's step of `KeyedStore::sweep_locked`.
fn sweep(shard: &Shard) -> Vec<Removal> {
    let mut map = shard.map.write().unwrap();
    let now = shard.clock.now();
    let mut removed = Vec::new();
    evict_cold(now, shard.rule_skew, |keep| {
        map.retain(|&key, cell| {
            let kept = keep(cell);
            if !kept {
                removed.push((key, cell.tat(), now));
            }
            kept
        })
    });
    removed
}

/// What the sweeping thread does, in order.
#[derive(Clone, Copy, Debug)]
enum Step {
    Advance,
    Sweep,
}

/// Thread A checks `acquires` (permit counts) on `KEY` in order; thread B runs `sweeper`; if
/// `clock_thread`, thread C advances the clock. Exact clock.
fn race(key_absent: bool, acquires: &'static [u64], sweeper: &'static [Step], clock_thread: bool) {
    race_skewed(key_absent, acquires, sweeper, clock_thread, 0, 0);
}

/// [`race`] with thread A's readings `skew` behind the others', and a sweep that allows for
/// `rule_skew`. Advances move the clock by `ADVANCE + rule_skew`: to where the rule first
/// evicts the key.
fn race_skewed(
    key_absent: bool,
    acquires: &'static [u64],
    sweeper: &'static [Step],
    clock_thread: bool,
    skew: u64,
    rule_skew: u64,
) {
    model(move || {
        let clock = ManualClock::new();
        clock.set(START);
        let shard = Arc::new(Shard {
            map: RwLock::new(initial(key_absent)),
            clock,
            skew,
            rule_skew,
        });
        let a = {
            let shard = shard.clone();
            loom::thread::spawn(move || {
                acquires
                    .iter()
                    .map(|&n| acquire(&shard, KEY, n))
                    .collect::<Vec<_>>()
            })
        };
        let b = {
            let shard = shard.clone();
            loom::thread::spawn(move || {
                let mut removed = Vec::new();
                for step in sweeper {
                    match step {
                        Step::Advance => shard.clock.advance_nanos(ADVANCE + rule_skew),
                        Step::Sweep => removed.extend(sweep(&shard)),
                    }
                }
                removed
            })
        };
        let c = clock_thread.then(|| {
            let shard = shard.clone();
            loom::thread::spawn(move || shard.clock.advance_nanos(ADVANCE + rule_skew))
        });
        let decisions = a.join().unwrap();
        let removed = b.join().unwrap();
        if let Some(c) = c {
            c.join().unwrap();
        }

        for &(key, tat, now) in &removed {
            assert!(
                tat + rule_skew <= now,
                "key {key} evicted while hot: tat {tat} + skew {rule_skew} > sweeper's now {now}"
            );
        }

        // The never-swept reference: the same decisions, at the same times, on cells no one
        // evicts.
        let reference = initial(key_absent);
        let key_ref = TatCell::new();
        let key_ref = reference.get(&KEY).unwrap_or(&key_ref);
        for (i, got) in decisions.iter().enumerate() {
            let want = key_ref.check(got.now, acquires[i], q());
            assert_eq!(
                *got, want,
                "decision {i} differs from the never-swept one (removed: {removed:?})"
            );
        }
        let end = shard.clock.now();
        let map = shard.map.read().unwrap();
        let fresh = TatCell::new();
        for (key, want) in [(KEY, key_ref), (HOT, &reference[&HOT])] {
            let got = map.get(&key).unwrap_or(&fresh);
            assert_eq!(
                got.check(end, 0, q()),
                want.check(end, 0, q()),
                "key {key}: final state (tat {}) is not the never-swept one (tat {}) at {end}; \
                 decisions {decisions:?}, removed {removed:?}",
                got.tat(),
                want.tat()
            );
        }
    });
}

/// Two acquires while the clock moves to where the key is cold and the shard is swept: the
/// sweep must not drop the TAT an acquire at the new time stores (the lock, and coldness judged
/// under it), and the second acquire sees the first's debt whether or not the key was evicted.
#[test]
fn two_acquires_vs_advance_then_sweep() {
    race(false, &[1, 1], &[Step::Advance, Step::Sweep], false);
}

/// A peek (a check of 0 permits, which stores nothing) then an acquire: a decision that read
/// `now` before its guard could find the key evicted and report a fresh bucket at a time when
/// the key still owed 100 ns.
#[test]
fn peek_and_acquire_vs_advance_then_sweep() {
    race(false, &[0, 1], &[Step::Advance, Step::Sweep], false);
}

/// The clock advanced by a third thread, at any point relative to the acquire and the sweep.
#[test]
fn acquire_vs_sweep_vs_clock() {
    race(false, &[1], &[Step::Sweep], true);
}

/// A new key: the acquire's insert (scratch decision, then write lock and a fresh `now`) races
/// the sweep that may evict what it inserted once the clock makes it cold.
#[test]
fn new_key_vs_advance_then_sweep() {
    race(true, &[1, 1], &[Step::Advance, Step::Sweep], false);
}

/// The default clock's case: the acquirer's readings lag the sweeper's by `SKEW`, and the sweep
/// allows for it (`tat + SKEW <= now`). Without that (`sweep_ignoring_the_skew_loses_updates`),
/// the sweeper evicts the key at 1000 and the acquirer, reading 950 after the lock, decides
/// on a fresh key at 950 what the real state (TAT 1000) refuses until 1000.
#[test]
fn skewed_acquires_vs_advance_then_sweep() {
    race_skewed(
        false,
        &[1, 1],
        &[Step::Advance, Step::Sweep],
        false,
        SKEW,
        SKEW,
    );
}

/// A peek and an acquire on the skewed clock, the clock advanced by a third thread.
#[test]
fn skewed_peek_and_acquire_vs_sweep_vs_clock() {
    race_skewed(false, &[0, 1], &[Step::Sweep], true, SKEW, SKEW);
}

/// A new key on the skewed clock: the insert races the sweep that may evict it.
#[test]
fn skewed_new_key_vs_advance_then_sweep() {
    race_skewed(
        true,
        &[1, 1],
        &[Step::Advance, Step::Sweep],
        false,
        SKEW,
        SKEW,
    );
}

/// The same race with the sweep judging coldness as if the clock were exact (`tat <= now`,
/// the rule before the TSC became the default): some interleaving loses an update. Kept as a
/// test so the skewed cases above are known to reach the interleaving that matters.
#[test]
#[should_panic(expected = "differs from the never-swept one")]
fn sweep_ignoring_the_skew_loses_updates() {
    race_skewed(
        false,
        &[1, 1],
        &[Step::Advance, Step::Sweep],
        false,
        SKEW,
        0,
    );
}
