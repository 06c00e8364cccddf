//! GCRA's cell: one atomic word per key, the lock-free protocols on it, and GCRA's contract
//! ([`Rules`] for [`Gcra`]) that runs the pure rule (`crate::algorithm::gcra::rule`) there.
//!
//! **The word.** Bits 0..62 are the TAT (at most [`MAX_NANOS`]); bit 63 is the parity of the
//! quota generation the TAT was written under; bit 62 says the key has *spilled*: bits 0..62
//! are then the address of a [`Spill`] shifted right by 3 (it is 8-aligned, so every address
//! bit is kept, a pointer tag in the top byte included: see [`spill_word`]), which holds the
//! TAT (same layout) and the key's holes (stretches freed by cancelled reservations, see
//! `algorithm::gcra::holes`). A key spills only when a
//! reservation that is not the latest is cancelled, so almost every key stays one word.
//!
//! **Decisions are lock-free.** Each is a CAS loop on the TAT word (the cell's own, or the
//! spill's). On a spilled key whose holes are non-empty (bit 62 of the spill's word), a
//! decision uses the holes if it can take their lock without waiting (`try_lock`); if not, it
//! decides on the TAT alone, which can only refuse what a hole would have allowed, never
//! admit more. Only cancelling waits for the lock (it must record its hole).
//!
//! **Quota changes re-scale debt lazily.** A word whose generation parity differs from the
//! parameters' is one generation behind (never more: `set_quota` migrates every tracked cell
//! before it returns, and the next change waits for it), and its TAT is re-scaled on the way
//! in (`algorithm::gcra::rule::rescale`). Parameters are loaded after every load of the word,
//! so they are never older than the word. A decision that stores nothing stores no migration
//! either: re-scaling is a pure function of the word and the parameters, so it is simply
//! repeated.
//!
//! **Memory.** A spill is freed only when its cell is dropped, which needs exclusive access
//! (the keyed store removes cells under the shard's write lock), so no reader can hold it.

use super::params::Live;
use super::rules::Rules;
use crate::algorithm::gcra::holes::Holes;
use crate::algorithm::gcra::rule::{
    self as gcra, adjust_holey, check_holey, looks_holey, refund, reserve_holey, GcraParams,
    Refund, Ticket, Verdict,
};
use crate::algorithm::{Adjust, Booking, Gcra, ParamSource};
use crate::decision::AcquireError;
use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering, TryLockError};
use crate::Nanos;
use crate::MAX_NANOS;

/// Bit 62: in a cell's word, "spilled" (the rest is a `*const Spill`); in a spill's word,
/// "has holes".
const FLAG: u64 = 1 << 62;
/// Bit 63: the parity of the quota generation the TAT was written under. The top bit, so that
/// the parity bit of a generation is one shift ([`parity`]), and a word with neither bit set
/// after an xor with it (current generation, not spilled, no holes) is the TAT itself, at
/// most [`MAX_NANOS`]: one compare decides the fast path ([`tail_loop`]).
const GEN: u64 = 1 << 63;

#[inline]
fn tat_of(w: u64) -> Nanos {
    w & MAX_NANOS
}

/// Bit 63 of a word written under `p`'s generation.
#[inline(always)]
fn parity(p: &GcraParams) -> u64 {
    p.generation << 63
}

#[inline(always)]
fn pack(tat: Nanos, p: &GcraParams, flag: u64) -> u64 {
    debug_assert!(tat <= MAX_NANOS);
    tat | parity(p) | flag
}

/// Whether a word was written under the other generation parity than `p`'s: one generation
/// behind (never more, see the module docs).
#[inline(always)]
fn behind(w: u64, p: &GcraParams) -> bool {
    (w ^ parity(p)) & GEN != 0
}

/// The TAT a word holds, in the generation of `p`, which is a full load if the word is behind
/// (a re-scale needs the previous interval).
#[inline(always)]
fn current_in(w: u64, p: &GcraParams) -> Nanos {
    match p.change {
        Some(change) if behind(w, p) => gcra::rescale(tat_of(w), p.t, &change),
        _ => {
            debug_assert!(!behind(w, p), "a word behind needs the parameters in full");
            tat_of(w)
        }
    }
}

/// The TAT a word holds, in the generation of the parameters `p` loaded after it (a
/// decision's load: the hot words). A word a generation behind needs the parameters in full:
/// `p` is reloaded so first, which is still a load after the word's.
#[inline(always)]
fn current(w: u64, p: &mut GcraParams, src: &impl ParamSource<GcraParams>) -> Nanos {
    // The common case first: current generation and no flag, where the xor is the TAT.
    let x = w ^ parity(p);
    if x <= MAX_NANOS {
        return x;
    }
    if behind(w, p) {
        // Out of line: a word is behind only between a quota change and its migration, and
        // the full load and the re-scale inline would crowd every decision's registers.
        let (tat, full) = catch_up(w, *p, src);
        *p = full;
        return tat;
    }
    tat_of(w)
}

/// [`current`] for a word a generation behind `p`: the TAT re-scaled, and the parameters in
/// full (loaded again unless `p` already is).
#[cold]
#[inline(never)]
fn catch_up(w: u64, p: GcraParams, src: &impl ParamSource<GcraParams>) -> (Nanos, GcraParams) {
    let p = if p.change.is_none() {
        src.load_full()
    } else {
        p
    };
    (current_in(w, &p), p)
}

/// What a CAS loop on a cell's own word ended with.
enum Flow<R> {
    Done(R),
    /// The cell has spilled: redo the operation on the spill.
    Spilled(u64),
}

/// The CAS loop every decision runs: `step` sees the TAT (in the generation of the parameters
/// loaded with it) and says what to return and which TAT to store (`None`: nothing). On a lost
/// race it runs again against the value that won, with parameters loaded again.
///
/// On a cell's own word (`spill = false`) a set bit 62 means the cell spilled: the loop stops.
/// On a spill's word it means "has holes" and is kept in whatever is stored.
#[inline(always)]
fn tail_loop<R>(
    atom: &AtomicU64,
    src: &impl ParamSource<GcraParams>,
    spill: bool,
    mut step: impl FnMut(Nanos, &GcraParams) -> (R, Option<Nanos>),
) -> Flow<R> {
    let mut w = atom.load(Ordering::Acquire);
    loop {
        let mut p = src.load();
        // One compare for the fast path: current generation and bit 62 clear (not spilled;
        // on a spill's word, no holes), where the word xor the parity bit is the TAT. The
        // parameters are loaded first for it, even for a cell that turns out spilled.
        // `high`: the bits above the TAT to store, parity and flag (`pack`'s, computed with
        // the test on the fast path, where they are the word's own).
        let x = w ^ parity(&p);
        let (tat, high) = if x <= MAX_NANOS {
            (x, w ^ x)
        } else {
            if !spill && w & FLAG != 0 {
                return Flow::Spilled(w);
            }
            let tat = current(w, &mut p, src);
            (tat, pack(0, &p, w & FLAG))
        };
        let (result, store) = step(tat, &p);
        let Some(new_tat) = store else {
            return Flow::Done(result);
        };
        debug_assert!(new_tat <= MAX_NANOS);
        let new = new_tat | high;
        match atom.compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Flow::Done(result),
            Err(seen) => w = seen,
        }
    }
}

/// Which TAT a booking stores: the ticket's end if it extends the schedule, nothing if it was
/// placed in a hole (or books nothing).
#[inline]
fn booked_tail(tat: Nanos, r: &Result<Booking<Ticket>, AcquireError>) -> Option<Nanos> {
    match r {
        Ok(Booking::Booked { ticket, .. }) if ticket.end > tat => Some(ticket.end),
        _ => None,
    }
}

/// The CAS step of a check against the TAT alone.
#[inline(always)]
fn check_step(now: Nanos, n: u64) -> impl Fn(Nanos, &GcraParams) -> (Verdict, Option<Nanos>) {
    move |tat, p| {
        let v = gcra::check(tat, now, n, p);
        (v, v.store)
    }
}

/// The CAS step of a reservation at the tail.
#[inline(always)]
fn reserve_step(
    now: Nanos,
    n: u64,
    max_wait: Option<Nanos>,
) -> impl Fn(Nanos, &GcraParams) -> (Result<Booking<Ticket>, AcquireError>, Option<Nanos>) {
    move |tat, p| {
        let r = gcra::reserve(tat, now, n, p, max_wait);
        let store = booked_tail(tat, &r);
        (r, store)
    }
}

/// One key's GCRA state: a single atomic word (see the module docs).
#[derive(Debug, Default)]
pub struct GcraCell {
    word: AtomicU64,
}

/// How far a spill's address is shifted right in a spilled cell's word: the spill is aligned to
/// `1 << SPILL_SHIFT` bytes (a compile-time check below), so those low bits are zero and the
/// shift loses nothing, and a 64-bit address (tag byte and all) fits below bit 61.
const SPILL_SHIFT: u32 = 3;

/// The cell word pointing at a spill at `addr` (bit 62 set, `addr >> SPILL_SHIFT` below it),
/// if `addr` can be encoded exactly: `None` if it has a low bit set or more bits than the word
/// holds below bit 62. Every address bit is kept, so a tagged pointer (Android's top byte,
/// MTE, HWASan) decodes to itself.
#[inline]
fn spill_word(addr: usize) -> Option<u64> {
    if addr & ((1 << SPILL_SHIFT) - 1) != 0 {
        return None;
    }
    let shifted = u64::try_from(addr >> SPILL_SHIFT).ok()?;
    (shifted <= MAX_NANOS).then_some(shifted | FLAG)
}

/// The address a spilled cell's word points at: the inverse of [`spill_word`] on its words.
#[inline]
fn spill_addr(w: u64) -> usize {
    // Truncates only values `spill_word` never produces (they came from a `usize`).
    ((w & !FLAG) << SPILL_SHIFT) as usize
}

/// A spilled key: its TAT word (bit 62: has holes) and its holes. Aligned so that its
/// address's low [`SPILL_SHIFT`] bits are zero on every target (see [`spill_word`]).
#[repr(align(8))]
struct Spill {
    tail: AtomicU64,
    holes: Mutex<Holes>,
}

const _: () = assert!(std::mem::align_of::<Spill>() >= 1 << SPILL_SHIFT);

impl GcraCell {
    #[inline]
    fn spill(&self, w: u64) -> &Spill {
        debug_assert!(w & FLAG != 0);
        // SAFETY: a cell's word with bit 62 set was stored only by `cancel`, as `spill_word` of
        // a `Box::into_raw` pointer whose provenance the `as` cast there exposed, with release
        // ordering (loaded here with acquire, so the spill's initialisation is visible).
        // `spill_addr` is `spill_word`'s exact inverse on every address it encodes (all bits,
        // tags included; `tagged_spill_addresses_round_trip_exactly`), so this is that pointer.
        // After that store the word never changes again, and the box is freed only by `drop`,
        // which has `&mut self`: it outlives every `&self` borrow, including this one.
        unsafe { &*(spill_addr(w) as *const Spill) }
    }

    /// Check `n` permits at `now`; stores only when allowed.
    #[inline(always)]
    pub(crate) fn check(&self, now: Nanos, n: u64, src: &impl ParamSource<GcraParams>) -> Verdict {
        match tail_loop(&self.word, src, false, check_step(now, n)) {
            Flow::Done(v) => v,
            Flow::Spilled(w) => self.spill(w).check(now, n, src),
        }
    }

    /// [`check`](GcraCell::check) of one permit reduced to whether it was granted: the same
    /// CAS loop, for the common word only (current generation, not spilled), with the
    /// parameters' first `GcraParams::ALLOW_WORDS` words (all [`gcra::grant_one`] reads).
    /// Any other word is decided by `check` from a fresh load (nothing was stored yet, so the
    /// decision simply starts later), out of line: `src` is passed by value, so the fast path
    /// keeps no copy of it in memory for that call.
    #[inline(always)]
    pub(crate) fn allows(&self, now: Nanos, src: Live<'_, GcraParams>) -> bool {
        let narrow = src.first::<{ GcraParams::ALLOW_WORDS }>();
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            let p = narrow.load();
            // As in `tail_loop`: at most `MAX_NANOS` iff in `p`'s generation and not spilled,
            // and then it is the TAT, and the word is the TAT with `p`'s parity bit.
            let x = w ^ parity(&p);
            if x > MAX_NANOS {
                return self.allows_cold(now, src);
            }
            let Some(new_tat) = gcra::grant_one(x, now, &p) else {
                return false;
            };
            match self.word.compare_exchange_weak(
                w,
                new_tat | parity(&p),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(seen) => w = seen,
            }
        }
    }

    /// [`allows`](GcraCell::allows) on a spilled cell or a word a generation behind.
    #[cold]
    #[inline(never)]
    fn allows_cold(&self, now: Nanos, src: Live<'_, GcraParams>) -> bool {
        self.check(now, 1, &src).allowed()
    }

    /// Reserve `n` permits at `now`, unless the wait would exceed `max_wait`.
    #[inline]
    pub(crate) fn reserve(
        &self,
        now: Nanos,
        n: u64,
        src: &impl ParamSource<GcraParams>,
        max_wait: Option<Nanos>,
    ) -> Result<Booking<Ticket>, AcquireError> {
        match tail_loop(&self.word, src, false, reserve_step(now, n, max_wait)) {
            Flow::Done(r) => r,
            Flow::Spilled(w) => self.spill(w).reserve(now, n, src, max_wait),
        }
    }

    /// Gives a reservation's unused stretch back (rule in `algorithm::gcra::rule::refund`). The
    /// only operation that may spill the cell, and the only one that waits for a lock.
    pub(crate) fn cancel(&self, ticket: &Ticket, now: Nanos, src: &impl ParamSource<GcraParams>) {
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            if w & FLAG != 0 {
                return self.spill(w).cancel(ticket, now, src);
            }
            let mut p = src.load();
            let tat = current(w, &mut p, src);
            let new = match refund(tat, ticket, now, &p) {
                Refund::Nothing => return,
                Refund::Tail(start) => pack(start, &p, 0),
                Refund::Hole(start, end) => {
                    // Spill: move the TAT into a spill that also holds the hole.
                    let mut holes = Holes::new(p.generation);
                    holes.give(start, end);
                    let spill = Box::into_raw(Box::new(Spill {
                        tail: AtomicU64::new(pack(tat, &p, FLAG)),
                        holes: Mutex::new(holes),
                    }));
                    // An `as` cast exposes the pointer's provenance, which the casts back in
                    // `spill` and `drop` pick up (`expose_provenance` and its inverse are
                    // Rust 1.84, past the MSRV; these casts are their stable spelling).
                    let Some(tagged) = spill_word(spill as usize) else {
                        // Cannot happen (8-aligned, at most 64 address bits), but if it did:
                        // the hole is not recorded, so the cancel gives nothing back, which
                        // can only refuse what the hole would have allowed, as a decision that
                        // finds the holes locked does.
                        // SAFETY: `spill` is from `Box::into_raw` just above and was never
                        // published; this is the only pointer to it.
                        drop(unsafe { Box::from_raw(spill) });
                        return;
                    };
                    match self
                        .word
                        .compare_exchange(w, tagged, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => return,
                        Err(seen) => {
                            // SAFETY: `spill` is from `Box::into_raw` just above and the CAS
                            // that would have published it failed; this is the only pointer.
                            drop(unsafe { Box::from_raw(spill) });
                            w = seen;
                            continue;
                        }
                    }
                }
            };
            match self
                .word
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(seen) => w = seen,
            }
        }
    }

    /// Applies `op` at `now` (rule in `algorithm::gcra::rule::adjust`) and reports `[look,
    /// one]` on the TAT it left. A CAS step on the TAT like a decision; on a key with holes it
    /// waits for their lock, as a cancel does (it may clear or cut them).
    pub(crate) fn adjust(
        &self,
        now: Nanos,
        op: Adjust,
        src: &impl ParamSource<GcraParams>,
    ) -> [Verdict; 2] {
        let step = |tat, p: &GcraParams| {
            let new = gcra::adjust(tat, now, op, p);
            (gcra::looks(new, now, p), (new != tat).then_some(new))
        };
        match tail_loop(&self.word, src, false, step) {
            Flow::Done(r) => r,
            Flow::Spilled(w) => self.spill(w).adjust(now, op, src),
        }
    }

    /// Brings the word up to the generation of `src` (run by `set_quota` on every cell).
    pub(crate) fn migrate(&self, src: &impl ParamSource<GcraParams>) {
        // Stores the (re-scaled) TAT with the current parity; a no-op rewrite if current.
        let step = |tat, _: &GcraParams| ((), Some(tat));
        if let Flow::Spilled(w) = tail_loop(&self.word, src, false, step) {
            let _ = tail_loop(&self.spill(w).tail, src, true, step);
        }
    }

    /// The stored TAT as written (no re-scale).
    #[cfg(any(test, loom))]
    pub(crate) fn tat(&self) -> Nanos {
        tat_of(self.tail_word())
    }

    fn tail_word(&self) -> u64 {
        let w = self.word.load(Ordering::Acquire);
        if w & FLAG != 0 {
            self.spill(w).tail.load(Ordering::Acquire)
        } else {
            w
        }
    }

    /// Whether the cell holds what a fresh one does (TAT 0, not spilled).
    pub(crate) fn is_fresh(&self) -> bool {
        self.word.load(Ordering::Acquire) & !GEN == 0
    }

    /// The generation parity of the TAT word (the loom models).
    #[cfg(loom)]
    pub(crate) fn parity(&self) -> u64 {
        (self.tail_word() >> 63) & 1
    }

    /// The TAT and, for a spilled cell, its holes (tests and the loom models).
    #[cfg(any(test, loom))]
    pub(crate) fn snapshot(&self) -> (Nanos, Option<Vec<(Nanos, Nanos)>>) {
        let w = self.word.load(Ordering::Acquire);
        if w & FLAG == 0 {
            return (tat_of(w), None);
        }
        let spill = self.spill(w);
        let holes = lock(&spill.holes).spans().to_vec();
        (tat_of(spill.tail.load(Ordering::Acquire)), Some(holes))
    }
}

/// GCRA's contract: every step is the cell's own protocol, called once.
impl Rules for Gcra {
    type Cell = GcraCell;

    #[inline(always)]
    fn check(
        &self,
        cell: &GcraCell,
        now: Nanos,
        n: u64,
        _keyed: bool,
        p: &impl ParamSource<GcraParams>,
    ) -> Verdict {
        cell.check(now, n, p)
    }

    fn book(
        &self,
        cell: &GcraCell,
        now: Nanos,
        n: u64,
        p: &impl ParamSource<GcraParams>,
        max_wait: Option<Nanos>,
    ) -> Result<Booking<Ticket>, AcquireError> {
        cell.reserve(now, n, p, max_wait)
    }

    fn cancel(
        &self,
        cell: &GcraCell,
        ticket: &Ticket,
        now: Nanos,
        p: &impl ParamSource<GcraParams>,
    ) {
        cell.cancel(ticket, now, p);
    }

    fn adjust(
        &self,
        cell: &GcraCell,
        now: Nanos,
        op: Adjust,
        p: &impl ParamSource<GcraParams>,
    ) -> [Verdict; 2] {
        cell.adjust(now, op, p)
    }

    fn migrate(&self, cell: &GcraCell, p: &impl ParamSource<GcraParams>) {
        cell.migrate(p);
    }

    /// The TAT in the generation of `p`, a full load (a cell with `tat <= now` is cold: a full
    /// bucket, lossless to evict; its holes are all below its TAT, so they go with it).
    fn cold_at(&self, cell: &GcraCell, p: &GcraParams) -> Nanos {
        // In the current generation: a tightened quota stretches a key's debt.
        current_in(cell.tail_word(), p)
    }

    fn is_fresh(&self, cell: &GcraCell) -> bool {
        cell.is_fresh()
    }

    #[inline(always)]
    fn allows(&self, cell: &GcraCell, now: Nanos, _keyed: bool, p: &Live<'_, GcraParams>) -> bool {
        cell.allows(now, *p)
    }
}

impl Drop for GcraCell {
    fn drop(&mut self) {
        let w = self.word.load(Ordering::Acquire);
        if w & FLAG != 0 {
            // SAFETY: `&mut self`: no other reference to the cell, hence to its spill, exists.
            // As in `spill`, the word decodes to exactly the pointer `cancel` got from
            // `Box::into_raw` (with its exposed provenance), which is freed only here.
            drop(unsafe { Box::from_raw(spill_addr(w) as *mut Spill) });
        }
    }
}

fn lock(m: &Mutex<Holes>) -> MutexGuard<'_, Holes> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Spill {
    /// The holes' lock if it is free right now: decisions never wait for it.
    fn try_holes(&self) -> Option<MutexGuard<'_, Holes>> {
        if self.tail.load(Ordering::Acquire) & FLAG == 0 {
            return None;
        }
        match self.holes.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    #[cold]
    #[inline(never)]
    fn check(&self, now: Nanos, n: u64, src: &impl ParamSource<GcraParams>) -> Verdict {
        if let Some(mut holes) = self.try_holes() {
            return self.with_holes(&mut holes, src, |tat, holes, p| {
                let v = check_holey(tat, holes, now, n, p);
                (v, v.store)
            });
        }
        self.tail_only(src, check_step(now, n))
    }

    #[cold]
    #[inline(never)]
    fn reserve(
        &self,
        now: Nanos,
        n: u64,
        src: &impl ParamSource<GcraParams>,
        max_wait: Option<Nanos>,
    ) -> Result<Booking<Ticket>, AcquireError> {
        if let Some(mut holes) = self.try_holes() {
            return self.with_holes(&mut holes, src, |tat, holes, p| {
                let r = reserve_holey(tat, holes, now, n, p, max_wait);
                let store = booked_tail(tat, &r);
                (r, store)
            });
        }
        self.tail_only(src, reserve_step(now, n, max_wait))
    }

    fn cancel(&self, ticket: &Ticket, now: Nanos, src: &impl ParamSource<GcraParams>) {
        let mut holes = lock(&self.holes);
        self.with_holes(&mut holes, src, |tat, holes, p| {
            holes.prune(now);
            match refund(tat, ticket, now, p) {
                Refund::Nothing => ((), None),
                Refund::Tail(start) => ((), Some(holes.coalesce(start))),
                Refund::Hole(start, end) => {
                    holes.give(start, end);
                    ((), None)
                }
            }
        });
    }

    fn adjust(&self, now: Nanos, op: Adjust, src: &impl ParamSource<GcraParams>) -> [Verdict; 2] {
        let mut holes = lock(&self.holes);
        self.with_holes(&mut holes, src, |tat, holes, p| {
            let new = adjust_holey(tat, holes, now, op, p);
            (looks_holey(new, holes, now, p), Some(new))
        })
    }

    fn tail_only<R>(
        &self,
        src: &impl ParamSource<GcraParams>,
        step: impl FnMut(Nanos, &GcraParams) -> (R, Option<Nanos>),
    ) -> R {
        match tail_loop(&self.tail, src, true, step) {
            Flow::Done(r) => r,
            Flow::Spilled(_) => unreachable!("a spill's word never reports a spill"),
        }
    }

    /// The CAS loop with the holes locked: `step` may change a copy of the holes; the copy
    /// replaces them only once the TAT word (with its has-holes bit kept in step with them)
    /// is stored, or found unchanged.
    fn with_holes<R>(
        &self,
        holes: &mut Holes,
        src: &impl ParamSource<GcraParams>,
        mut step: impl FnMut(Nanos, &mut Holes, &GcraParams) -> (R, Option<Nanos>),
    ) -> R {
        let mut w = self.tail.load(Ordering::Acquire);
        loop {
            let mut p = src.load();
            let tat = current(w, &mut p, src);
            if holes.generation != p.generation {
                // Recorded under another quota: dropped (see `Holes::clear`).
                holes.clear(p.generation);
            }
            let mut next = holes.clone();
            let (result, store) = step(tat, &mut next, &p);
            let new_tat = store.unwrap_or(tat);
            let new = pack(new_tat, &p, if next.is_empty() { 0 } else { FLAG });
            if new == w {
                *holes = next;
                return result;
            }
            match self
                .tail
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    *holes = next;
                    return result;
                }
                Err(seen) => w = seen,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
