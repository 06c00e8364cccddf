//! The lock-free state of a smooth limiter: Guava's `(storedPermits, nextFreeTicketMicros)` in
//! one 128-bit word updated by CAS, the rate parameters in a sequence lock, and a writer mutex
//! for the rare operations (`set_rate`, refunds).
//!
//! # The word
//! Low 64 bits: `storedPermits` (`f64` bits, NaN canonical). High 64 bits: `nextFree` (always in
//! `0..=i64::MAX`, so it needs 63 bits) and one `LOCKED` bit. Guava's state needs the full 127
//! bits to stay exact (`nextFree` can legitimately be `Long.MAX_VALUE`), so there is no room for
//! a generation counter; the protocol below needs only the one bit.
//!
//! # The problem
//! Stored permits are in units of the rate: `set_rate` resyncs at the old rate and rescales them
//! to the new `maxPermits`. A decision must therefore never combine a word written for one rate
//! with the parameters of another. Two hazards:
//! 1. a decision reads the old parameters, then loads a word already rescaled for the new ones;
//! 2. a decision loads a word and its (matching) parameters, stalls, and its CAS lands after a
//!    `set_rate` that left the word bitwise equal (ABA: e.g. `0` stored permits rescale to `0`
//!    while the limiter is in debt, so the word does not change).
//!
//! # The protocol
//! - Decisions (lock-free path) load the word and read the parameters inside one sequence-lock
//!   read section (`seq` even and unchanged around both), so the pair is consistent (hazard 1).
//!   If the word is unlocked they decide and CAS; if it is `LOCKED` they take the writer mutex.
//!   A refusal (`tryAcquire`'s `nextFree - timeout > now`) needs only the word's `nextFree`: it
//!   stores nothing and returns before reading the parameters.
//! - `set_rate`, under the mutex: makes `seq` odd, CASes the resynced and rescaled word, stores
//!   the new parameters, makes `seq` even. Its word is unlocked only if the resync moved
//!   `nextFree` forward; otherwise it is `LOCKED`, and the mutex records `hwm`, the largest
//!   `nextFree` any unlocked word has had.
//! - Under the mutex (locked path), a decision writes an unlocked word only if its `nextFree`
//!   exceeds `hwm`; otherwise the word stays `LOCKED`.
//! - A refund (a dropped async waiter) also writes a `LOCKED` word (it moves `nextFree` back).
//!
//! # Why a decision's CAS cannot succeed across a `set_rate` (hazard 2)
//! Invariant: every *unlocked* word has a `nextFree` at least that of every earlier unlocked
//! word, and strictly greater than every unlocked word written before a `set_rate` or a refund
//! that precedes it. (Lock-free decisions never decrease `nextFree`; every other unlocked write
//! is a `set_rate` whose resync moved `nextFree` past the current word, the largest so far, or
//! a locked-path write past `hwm`.) A lock-free decision only CASes from an unlocked word `v`.
//! If a `set_rate` wrote the word after `v` was loaded, every later unlocked word has a larger
//! `nextFree` than `v` and every locked word differs from `v` in the `LOCKED` bit, so the CAS
//! fails and the decision starts over with fresh parameters. Locked-path decisions hold the
//! mutex across load and CAS, so no `set_rate` can intervene at all. Hence each successful
//! decision used the parameters of the word it replaced: linearizable at its CAS. The cost:
//! after a `set_rate` that cannot move `nextFree` (the limiter is in debt) or a refund,
//! decisions that take permits go through the mutex (what Guava always does) until one moves
//! `nextFree` past `hwm`, usually the next one.
//!
//! # Refunds (cancel safety)
//! A reservation is refunded only if no `set_rate` happened since it (same `seq`: the state
//! before it was computed at the current rate) and it is still the latest change (the word's
//! content equals what it wrote); the refund restores exactly the state before it. Within one
//! rate, every change either moves `nextFree` forward or lowers the stored permits, so the word
//! cannot come back to a reservation's result except by refunding the reservations made after
//! it: refunding latest-first unwinds several, and a refund never erases anyone else's grant.
//! Anything else keeps the permits spent (the next caller pays for them, as Guava's would).

use crossbeam_utils::CachePadded;

use super::rules::{self, Micros, Params, Shape, State};
use crate::sync::{spin_hint, AtomicU128, AtomicU64, Mutex, MutexGuard, Ordering};

const LOCKED: u128 = 1 << 127;

/// One value of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Word(u128);

impl Word {
    fn pack(s: State, locked: bool) -> Word {
        // One NaN: every NaN behaves the same, and an unchanged state must compare equal.
        let stored = if s.stored.is_nan() {
            f64::NAN
        } else {
            s.stored
        };
        let next_free = s.next_free.max(0) as u128;
        let lock = if locked { LOCKED } else { 0 };
        Word(lock | next_free << 64 | u128::from(stored.to_bits()))
    }

    pub(crate) fn state(self) -> State {
        State {
            stored: f64::from_bits(self.0 as u64),
            next_free: ((self.0 & !LOCKED) >> 64) as Micros,
        }
    }

    pub(crate) fn locked(self) -> bool {
        self.0 & LOCKED != 0
    }

    // Refunds exist for dropped async waiters (and the loom models).
    #[cfg_attr(not(any(feature = "tokio", loom)), allow(dead_code))]
    fn content(self) -> u128 {
        self.0 & !LOCKED
    }
}

/// A granted reservation: when its holder may proceed, and what a refund would need.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(any(feature = "tokio", loom)), allow(dead_code))]
pub(crate) struct Ticket {
    /// Guava's `momentAvailable`: the holder waits until then.
    pub(crate) moment: Micros,
    before: Word,
    after: Word,
    /// The parameters' sequence number the reservation was decided under.
    seq: u64,
}

/// The rate parameters behind a sequence lock, with the extra that a reader can load the state
/// word inside the same read section. Writers hold the cell's mutex. Not the GCRA limiters'
/// `crate::cell::params::ParamsCell`: here a read section spans the state word's load and a
/// write section has the word's CAS in its middle, which that cell's plain load and store
/// cannot express.
#[derive(Debug)]
struct RateCell {
    seq: AtomicU64,
    fields: [AtomicU64; 5],
    warming: bool,
}

impl RateCell {
    fn new(p: Params) -> RateCell {
        RateCell {
            seq: AtomicU64::new(0),
            fields: to_bits(&p).map(AtomicU64::new),
            warming: p.warming,
        }
    }

    fn load_fields(&self) -> Params {
        let f = self
            .fields
            .each_ref()
            .map(|a| f64::from_bits(a.load(Ordering::Acquire)));
        Params {
            stable: f[0],
            max: f[1],
            threshold: f[2],
            slope: f[3],
            cool_down: f[4],
            warming: self.warming,
        }
    }

    /// Starts a read section: the sequence number once it is even (no writer active).
    #[inline]
    fn begin_read(&self) -> u64 {
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq & 1 == 0 {
                return seq;
            }
            spin_hint();
        }
    }

    /// Ends a read section begun at `seq`: the parameters, if no writer ran meanwhile, so that
    /// they and everything loaded since `begin_read` (the state word) are of one instant. A
    /// writer's stores are Release, so a reader that sees any of them (or the word a writer
    /// CASed while `seq` was odd) also sees the odd `seq` here, and retries.
    #[inline]
    fn end_read(&self, seq: u64) -> Option<Params> {
        let p = self.load_fields();
        (self.seq.load(Ordering::Acquire) == seq).then_some(p)
    }

    /// Under the mutex: no writer can be active.
    fn read_exclusive(&self, _: &MutexGuard<'_, Writer>) -> (Params, u64) {
        (self.load_fields(), self.seq.load(Ordering::Acquire))
    }

    fn begin_write(&self, seq: u64, _: &MutexGuard<'_, Writer>) {
        self.seq.store(seq.wrapping_add(1), Ordering::Release);
    }

    fn end_write(&self, seq: u64, p: &Params, _: &MutexGuard<'_, Writer>) {
        for (a, bits) in self.fields.iter().zip(to_bits(p)) {
            a.store(bits, Ordering::Release);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

fn to_bits(p: &Params) -> [u64; 5] {
    [p.stable, p.max, p.threshold, p.slope, p.cool_down].map(f64::to_bits)
}

/// What the mutex protects besides exclusion: `hwm`, at least the largest `nextFree` of any
/// unlocked word so far (meaningful while the word is locked).
#[derive(Debug, Default)]
struct Writer {
    hwm: Micros,
}

/// One smooth limiter's state and parameters.
#[derive(Debug)]
pub(crate) struct SmoothCell {
    // The contended word on its own cache line, away from the read-mostly parameters.
    word: CachePadded<AtomicU128>,
    params: RateCell,
    writer: Mutex<Writer>,
    shape: Shape,
}

impl SmoothCell {
    /// A limiter created at time 0 (bursty: empty; warming up: cold).
    pub(crate) fn new(shape: Shape, permits_per_second: f64) -> SmoothCell {
        let (state, params) = rules::start(&shape, permits_per_second);
        SmoothCell {
            word: CachePadded::new(AtomicU128::new(Word::pack(state, false).0)),
            params: RateCell::new(params),
            writer: Mutex::new(Writer::default()),
            shape,
        }
    }

    fn load(&self) -> Word {
        Word(self.word.load(Ordering::Acquire))
    }

    fn cas(&self, current: Word, new: Word) -> bool {
        current == new
            || self
                .word
                .compare_exchange(current.0, new.0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// A reservation's CAS of the word from `current` to `next`: its ticket, or `None` if the
    /// word changed meanwhile (decide again).
    #[inline(always)]
    fn swap(&self, current: Word, next: Word, moment: Micros, seq: u64) -> Option<Ticket> {
        self.cas(current, next).then_some(Ticket {
            moment,
            before: current,
            after: next,
            seq,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `getRate()`.
    pub(crate) fn rate(&self) -> f64 {
        loop {
            if let Some(p) = self.params.end_read(self.params.begin_read()) {
                return p.rate();
            }
        }
    }

    /// The state word (for the loom models' final-state comparisons).
    #[cfg(loom)]
    pub(crate) fn word(&self) -> Word {
        self.load()
    }

    /// Reserves `permits` at `now` if `admit(nextFree)` agrees (`tryAcquire`'s `canAcquire`;
    /// `acquire` admits everything). A refusal stores nothing.
    #[inline]
    pub(crate) fn reserve<E>(
        &self,
        now: Micros,
        permits: u64,
        admit: impl Fn(Micros) -> Result<(), E>,
    ) -> Result<Ticket, E> {
        loop {
            let seq = self.params.begin_read();
            let current = self.load();
            // A refusal depends on `nextFree` alone: no parameters needed, nothing stored.
            admit(current.state().next_free)?;
            if current.locked() {
                return self.reserve_locked(now, permits, admit);
            }
            let Some(p) = self.params.end_read(seq) else {
                continue;
            };
            let (state, moment) = rules::reserve(current.state(), &p, now, permits);
            if let Some(t) = self.swap(current, Word::pack(state, false), moment, seq) {
                return Ok(t);
            }
        }
    }

    /// The locked path: decide under the mutex (no `set_rate` or refund can run), staying
    /// locked until `nextFree` passes `hwm`.
    #[cold]
    fn reserve_locked<E>(
        &self,
        now: Micros,
        permits: u64,
        admit: impl Fn(Micros) -> Result<(), E>,
    ) -> Result<Ticket, E> {
        let writer = self.lock();
        let (p, seq) = self.params.read_exclusive(&writer);
        loop {
            let current = self.load();
            admit(current.state().next_free)?;
            let (state, moment) = rules::reserve(current.state(), &p, now, permits);
            let locked = current.locked() && state.next_free <= writer.hwm;
            // Lock-free decisions may still CAS an unlocked word meanwhile: retry on failure.
            if let Some(t) = self.swap(current, Word::pack(state, locked), moment, seq) {
                return Ok(t);
            }
        }
    }

    /// `setRate(permitsPerSecond)`: `now` is read under the mutex, as Guava reads it inside
    /// `synchronized`.
    pub(crate) fn set_rate(&self, now: impl FnOnce() -> Micros, permits_per_second: f64) {
        let mut writer = self.lock();
        let now = now();
        let (old, seq) = self.params.read_exclusive(&writer);
        let new = self.shape.params(permits_per_second);
        self.params.begin_write(seq, &writer);
        loop {
            let current = self.load();
            let state = rules::set_rate(&self.shape, current.state(), &old, &new, now);
            let bound = self.bound(current, &writer);
            // Unlocked only if no decision that read `old` can find this word again.
            let locked = state.next_free <= bound;
            if self.cas(current, Word::pack(state, locked)) {
                if locked {
                    writer.hwm = writer.hwm.max(bound);
                }
                break;
            }
        }
        self.params.end_write(seq, &new, &writer);
    }

    /// Gives a reservation back if no `set_rate` happened since and it is still the latest
    /// change, restoring exactly the state before it (see the module docs).
    #[cfg_attr(not(any(feature = "tokio", loom)), allow(dead_code))]
    pub(crate) fn cancel(&self, t: &Ticket) {
        if t.before == t.after {
            return;
        }
        let mut writer = self.lock();
        if self.params.read_exclusive(&writer).1 != t.seq {
            return;
        }
        loop {
            let current = self.load();
            if current.content() != t.after.content() {
                return;
            }
            let bound = self.bound(current, &writer);
            if self.cas(current, Word::pack(t.before.state(), true)) {
                writer.hwm = writer.hwm.max(bound);
                return;
            }
        }
    }

    /// The largest `nextFree` any unlocked word has had, given the current word.
    fn bound(&self, current: Word, writer: &MutexGuard<'_, Writer>) -> Micros {
        if current.locked() {
            writer.hwm
        } else {
            current.state().next_free
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
