//! The internals the loom model of the sweeper (`loom-tests/tests/sweeper.rs`) drives, built
//! only under `--cfg loom` and hidden from the docs. Not an API: thin wrappers around the very
//! functions the keyed limiter runs, so the model checks the library's code, not a copy.
//!
//! dashmap cannot run under loom, so the model keeps its own lock-guarded map and calls these
//! for the steps that decide: [`check_on_shard`] is the read side of `Store::decide`, and
//! [`evict_cold`] is the rule `Store::sweep_locked` runs under a shard's write lock.

use std::ops::Deref;

use crate::cell;
use crate::keyed::{self, Found};
use crate::outcome::Decision;
use crate::quota::Quota;
use crate::sweeper;
use crate::Nanos;

/// The keyed limiter's per-key cell (one atomic TAT).
#[derive(Debug, Default)]
pub struct TatCell(cell::TatCell);

impl TatCell {
    /// A fresh cell: TAT 0, a full bucket.
    pub fn new() -> TatCell {
        TatCell::default()
    }

    /// `TatCell::check` of `n` permits at `now` under `q` (the CAS loop).
    pub fn check(&self, now: Nanos, n: u64, q: Quota) -> Checked {
        checked(&self.0, now, n, q)
    }

    /// The stored TAT.
    pub fn tat(&self) -> Nanos {
        self.0.tat()
    }
}

/// One check's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The `now` the check was made at.
    pub now: Nanos,
    /// The decision as the limiter reports it.
    pub decision: Decision,
    /// The TAT it stored, if any.
    pub stored: Option<Nanos>,
}

fn checked(cell: &cell::TatCell, now: Nanos, n: u64, q: Quota) -> Checked {
    let v = cell.check(now, n, q);
    Checked {
        now,
        decision: v.decision(now, q),
        stored: v.store(),
    }
}

/// What [`check_on_shard`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Looked {
    /// Decided on the stored cell, or as a fresh key storing nothing.
    Decided(Checked),
    /// The key was absent and this (scratch) decision stores: insert under the write lock and
    /// check again there with a fresh `now`.
    MustInsert(Checked),
}

/// Gives the library's protocol a guard on the library's cell.
struct Inner<G>(G);

impl<G: Deref<Target = TatCell>> Deref for Inner<G> {
    type Target = cell::TatCell;
    fn deref(&self) -> &cell::TatCell {
        &self.0.deref().0
    }
}

/// The read side of `Store::decide` (`keyed::decide_on_shard`) with a check of `n` permits:
/// `lookup` takes the shard's read guard on the key's cell, `now` reads the clock.
pub fn check_on_shard<G>(
    lookup: impl FnOnce() -> Option<G>,
    now: impl Fn() -> Nanos,
    n: u64,
    q: Quota,
) -> Looked
where
    G: Deref<Target = TatCell>,
{
    let op = |cell: &cell::TatCell, now| checked(cell, now, n, q);
    match keyed::decide_on_shard(|| lookup().map(Inner), now, &op) {
        Found::Decided(c) => Looked::Decided(c),
        Found::MustInsert(c) => Looked::MustInsert(c),
    }
}

/// The eviction rule (`sweeper::evict_cold`) over the model's table; returns how many cells
/// it evicted and the smallest TAT left.
pub fn evict_cold(
    now: Nanos,
    retain: impl FnOnce(&mut dyn FnMut(&TatCell) -> bool),
) -> (usize, Nanos) {
    let swept = sweeper::evict_cold(now, |keep| retain(&mut |cell: &TatCell| keep(&cell.0)));
    (swept.evicted, swept.min_tat)
}
