//! [`Ring`]: a sliding log's entries, oldest first: up to [`INLINE`] in place, in a ring on the
//! heap beyond.
//!
//! Why in place: at many keys a decision's cost was the cache miss on the heap ring's newest
//! entry after the table's own miss (benches/BENCHMARKS.md, "Sliding windows, third pass").
//! Keys that hold a few live entries (most, at rates well below the limit) now read them in
//! the table's entry.
//! Four, not two: at 10k keys the bench's keys hold 2-4.
//!
//! **8 bytes an entry in place.** An entry in place is its stamp's offset from the ring's base
//! stamp (42 bits: 73 minutes of nanoseconds) and its count (22 bits), so the four entries, the
//! base, their total and the fields below take 48 bytes, the heap form being boxed: with the
//! key's lock 56, and with a `u64` key one cache line per table entry, against 88 and 96 bytes
//! with 16-byte entries (at 10k keys the table's working set is what a decision pays for).
//! Each form keeps its entries' total, so the log is the ring alone. An empty ring takes its
//! first entry's stamp as its base; an entry stamped before the base or too far after it
//! rebuilds the ring from its oldest stamp, and entries that do not fit even so (stamps 73
//! minutes apart, counts of 2^22 or more) go to the heap form, 16 bytes an entry, and come
//! back once they fit. Decisions never see the encoding: every step reads and writes
//! `(stamp, count)` pairs.
//!
//! The log's quota generation parity rides in the ring's spare bytes, and so does the count of
//! *block entries* at its end (below).
//!
//! **Block entries.** A block stamps its entry at its end less `W`, which can be after `now`;
//! a grant is still stamped `now` (its sub-window's start) and so goes before such an entry.
//! The ring counts how many of its newest entries are blocks' entries stamped after every
//! grant (`blocks`): a grant is recorded at the back when there is none (the hot path, as
//! before), else in stamp order among them ([`Ring::insert_grant`]). Departures from the front leave
//! the count as it was (the hot path pays nothing for it), so it is read as at most the
//! number of entries; it is 0 only when there is no block entry. Entries stay in stamp order
//! either way, which pruning from the front, a reward from the back and the cold time (the
//! newest stamp) rely on.

use std::collections::VecDeque;

use crate::Nanos;

/// `(stamp, permits)`.
pub(crate) type Entry = (Nanos, u64);

/// How many entries are held in place.
pub(crate) const INLINE: usize = 4;

/// An entry in place is one `u64`: its stamp's offset from the ring's base stamp in the high
/// [`OFFSET_BITS`], its count in the low `COUNT_BITS`. 42 bits of nanoseconds are 73 minutes,
/// so the live entries of windows up to an hour fit; 22 bits count 4,194,303 permits. Entries
/// that do not fit (stamps further apart, larger counts) go to the heap form, exactly.
const COUNT_BITS: u32 = 22;
const OFFSET_BITS: u32 = 64 - COUNT_BITS;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const OFFSET_MAX: u64 = (1 << OFFSET_BITS) - 1;

/// A heap ring gives its memory back for the in-place one once this few entries are left
/// (not at `INLINE`: a key hovering at the boundary would allocate at every other grant).
const BACK_IN_PLACE: usize = INLINE / 2;

/// A heap ring grows no further than needed, and gives memory back once the live entries need
/// a quarter of it (not at every departure: a steady flow would re-allocate all the time).
pub(crate) const SHRINK_FROM: usize = 16;

/// The entries, oldest first, and the generation parity (module docs).
#[derive(Clone, Debug)]
pub(crate) enum Ring {
    /// At most [`INLINE`] entries.
    InPlace(InPlace),
    /// More than [`INLINE`] entries (or, on the way back, more than [`BACK_IN_PLACE`]), or
    /// entries that do not fit in place. Boxed: the in-place form is the one a key's state
    /// is sized for.
    Heap(Box<Heap>),
}

/// `len` entries from `buf[head]`, wrapping, each stamped `base` plus its offset (packed as
/// [`COUNT_BITS`] says); the newest `min(blocks, len)` of them are block entries (module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct InPlace {
    /// At most every entry's stamp (the oldest's once rebuilt; any value when empty).
    base: Nanos,
    buf: [u64; INLINE],
    /// The entries' counts' sum: below `INLINE * 2^22`.
    total: u32,
    head: u8,
    len: u8,
    generation: bool,
    blocks: u8,
}

#[derive(Clone, Debug)]
pub(crate) struct Heap {
    entries: VecDeque<Entry>,
    /// The entries' counts' sum.
    total: u64,
    generation: bool,
    blocks: usize,
}

impl Default for Ring {
    fn default() -> Ring {
        Ring::InPlace(InPlace::default())
    }
}

/// The steps the sliding rule takes on a log's entries, for each form, so that a decision
/// picks the form once (`Ring` dispatches at every step: the cold paths).
pub(crate) trait Entries {
    fn generation(&self) -> bool;
    fn set_gen(&mut self, generation: bool);
    fn len(&self) -> usize;
    /// The entries' counts' sum (kept by every step that changes them).
    fn total(&self) -> u64;
    /// How many of the newest entries are block entries stamped after every grant.
    fn blocks(&self) -> usize;
    /// Whether there is no block entry: one load, for the hot path (`false` may be stale once
    /// block entries left from the front; [`blocks`](Self::blocks) is exact).
    fn no_blocks(&self) -> bool;
    /// The `i`-th entry from the oldest (`i < len`).
    fn get(&self, i: usize) -> Entry;
    fn front(&self) -> Option<Entry>;
    fn back(&self) -> Option<Entry>;
    /// Drops the oldest entry, if any.
    fn pop_front(&mut self);
    /// Adds `n` permits stamped `stamp` (not before the newest; only when
    /// [`no_blocks`](Self::no_blocks)): to the newest entry if it has that stamp, else as a
    /// new one. False, changing nothing, if that needs room the form does not have.
    fn push(&mut self, stamp: Nanos, n: u64) -> bool;

    /// The newest stamp but the block entries' among the newest (the newest grant's, a
    /// penalty's, or a block entry's with a grant stamped after it); the newest entry's when
    /// there is no block entry.
    #[inline]
    fn newest_grant(&self) -> Option<Nanos> {
        if self.no_blocks() {
            return self.back().map(|(s, _)| s);
        }
        let (len, blocks) = (self.len(), self.blocks());
        (len > blocks).then(|| self.get(len - blocks - 1).0)
    }
}

impl InPlace {
    /// The index in `buf` of the `i`-th entry from `head`.
    #[inline]
    fn slot(&self, i: usize) -> usize {
        (usize::from(self.head) + i) % INLINE
    }

    /// The entry in `buf[at]`.
    #[inline]
    fn at(&self, at: usize) -> Entry {
        let e = self.buf[at];
        // `base + offset` is an entry's stamp, so it does not overflow.
        (self.base + (e >> COUNT_BITS), e & COUNT_MAX)
    }

    /// `entries`, oldest first, in place from a base of their least stamp; `None` if there are
    /// more than [`INLINE`] or a stamp's offset or a count does not fit.
    fn from_entries(
        entries: impl Iterator<Item = Entry> + Clone,
        generation: bool,
        blocks: usize,
    ) -> Option<InPlace> {
        let base = entries.clone().map(|(s, _)| s).min().unwrap_or(0);
        let mut r = InPlace {
            base,
            generation,
            ..InPlace::default()
        };
        for (i, (stamp, count)) in entries.enumerate() {
            let offset = stamp - base;
            if i == INLINE || offset > OFFSET_MAX || count > COUNT_MAX {
                return None;
            }
            r.buf[i] = offset << COUNT_BITS | count;
            // At most `INLINE` counts below 2^22 each.
            r.total += count as u32;
            r.len += 1;
        }
        // At most `INLINE`: bounded by the entries' count.
        r.blocks = blocks.min(r.len()) as u8;
        Some(r)
    }

    /// [`push`](Entries::push) of a stamp before the base or too far after it: the entries
    /// rebuilt from a new base, if they and it fit.
    #[cold]
    #[inline(never)]
    fn push_rebased(&mut self, stamp: Nanos, n: u64) -> bool {
        let all = (0..self.len()).map(|i| self.get(i)).chain([(stamp, n)]);
        match InPlace::from_entries(all, self.generation, 0) {
            Some(r) => {
                *self = r;
                true
            }
            None => false,
        }
    }
}

impl Entries for InPlace {
    #[inline]
    fn generation(&self) -> bool {
        self.generation
    }

    #[inline]
    fn set_gen(&mut self, generation: bool) {
        self.generation = generation;
    }

    #[inline]
    fn len(&self) -> usize {
        usize::from(self.len)
    }

    #[inline]
    fn total(&self) -> u64 {
        u64::from(self.total)
    }

    #[inline]
    fn blocks(&self) -> usize {
        usize::from(self.blocks.min(self.len))
    }

    #[inline]
    fn no_blocks(&self) -> bool {
        self.blocks == 0
    }

    #[inline]
    fn get(&self, i: usize) -> Entry {
        self.at(self.slot(i))
    }

    #[inline]
    fn front(&self) -> Option<Entry> {
        (self.len > 0).then(|| self.at(usize::from(self.head)))
    }

    #[inline]
    fn back(&self) -> Option<Entry> {
        (self.len > 0).then(|| self.get(self.len() - 1))
    }

    #[inline]
    fn pop_front(&mut self) {
        if self.len > 0 {
            self.total -= (self.buf[usize::from(self.head)] & COUNT_MAX) as u32;
            self.head = self.slot(1) as u8;
            self.len -= 1;
        }
    }

    #[inline]
    fn push(&mut self, stamp: Nanos, n: u64) -> bool {
        debug_assert!(self.no_blocks());
        if self.len == 0 {
            if n > COUNT_MAX {
                return false;
            }
            // An empty ring takes its base from its first entry.
            self.base = stamp;
            self.buf[usize::from(self.head)] = n;
            self.total = n as u32;
            self.len = 1;
            return true;
        }
        let last = self.slot(self.len() - 1);
        let (newest, count) = self.at(last);
        if newest == stamp {
            if n > COUNT_MAX - count {
                return false;
            }
            self.buf[last] += n;
            self.total += n as u32;
            return true;
        }
        if self.len() == INLINE {
            return false;
        }
        let offset = stamp.wrapping_sub(self.base);
        if stamp < self.base || offset > OFFSET_MAX || n > COUNT_MAX {
            return self.push_rebased(stamp, n);
        }
        let at = self.slot(self.len());
        self.buf[at] = offset << COUNT_BITS | n;
        self.total += n as u32;
        self.len += 1;
        true
    }
}

impl Entries for Heap {
    #[inline]
    fn generation(&self) -> bool {
        self.generation
    }

    #[inline]
    fn set_gen(&mut self, generation: bool) {
        self.generation = generation;
    }

    #[inline]
    fn len(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    fn total(&self) -> u64 {
        self.total
    }

    #[inline]
    fn blocks(&self) -> usize {
        self.blocks.min(self.entries.len())
    }

    #[inline]
    fn no_blocks(&self) -> bool {
        self.blocks == 0
    }

    #[inline]
    fn get(&self, i: usize) -> Entry {
        self.entries[i]
    }

    #[inline]
    fn front(&self) -> Option<Entry> {
        self.entries.front().copied()
    }

    #[inline]
    fn back(&self) -> Option<Entry> {
        self.entries.back().copied()
    }

    #[inline]
    fn pop_front(&mut self) {
        if let Some((_, count)) = self.entries.pop_front() {
            self.total -= count;
        }
    }

    #[inline]
    fn push(&mut self, stamp: Nanos, n: u64) -> bool {
        debug_assert!(self.no_blocks());
        match self.entries.back_mut() {
            Some((s, c)) if *s == stamp => *c += n,
            _ => self.entries.push_back((stamp, n)),
        }
        self.total += n;
        true
    }
}

/// `$call` on the ring's form, bound to `$r`.
macro_rules! on_form {
    ($ring:expr_2021, $r:ident => $call:expr_2021) => {
        match $ring {
            Ring::InPlace($r) => $call,
            Ring::Heap($r) => $call,
        }
    };
}

/// Dispatches at every step; never out of room (moves to the heap).
impl Entries for Ring {
    fn generation(&self) -> bool {
        on_form!(self, r => r.generation())
    }

    fn set_gen(&mut self, generation: bool) {
        on_form!(self, r => r.set_gen(generation))
    }

    fn len(&self) -> usize {
        on_form!(self, r => r.len())
    }

    fn total(&self) -> u64 {
        on_form!(self, r => r.total())
    }

    fn blocks(&self) -> usize {
        on_form!(self, r => r.blocks())
    }

    fn no_blocks(&self) -> bool {
        on_form!(self, r => r.no_blocks())
    }

    fn get(&self, i: usize) -> Entry {
        on_form!(self, r => r.get(i))
    }

    fn front(&self) -> Option<Entry> {
        on_form!(self, r => r.front())
    }

    fn back(&self) -> Option<Entry> {
        on_form!(self, r => r.back())
    }

    fn pop_front(&mut self) {
        on_form!(self, r => r.pop_front())
    }

    fn push(&mut self, stamp: Nanos, n: u64) -> bool {
        on_form!(self, r => r.push(stamp, n)) || self.heap().push(stamp, n)
    }
}

impl Ring {
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes up to `n` permits from the newest entries, dropping each it empties (and one
    /// holding none), and says how many it took.
    pub(crate) fn take_back(&mut self, mut n: u64) -> u64 {
        let mut took = 0;
        while let Some((_, count)) = self.back() {
            let take = n.min(count);
            n -= take;
            took += take;
            if count > take {
                // A smaller count fits wherever the entry is.
                match self {
                    Ring::InPlace(r) => {
                        let last = r.slot(r.len() - 1);
                        r.buf[last] -= take;
                        // Less than the entry's count, itself below 2^22.
                        r.total -= take as u32;
                    }
                    Ring::Heap(r) => {
                        if let Some(e) = r.entries.back_mut() {
                            e.1 -= take;
                            r.total -= take;
                        }
                    }
                }
                break;
            }
            self.pop_back();
        }
        took
    }

    /// Drops the newest entry (a block entry if any is newest: one fewer).
    pub(crate) fn pop_back(&mut self) -> Option<Entry> {
        self.set_blocks(self.blocks().saturating_sub(1));
        let e = match self {
            Ring::InPlace(r) if r.len > 0 => {
                r.len -= 1;
                Some(r.get(r.len()))
            }
            Ring::InPlace(_) => None,
            Ring::Heap(r) => r.entries.pop_back(),
        };
        if let Some((_, count)) = e {
            match self {
                // An entry's count, below 2^22 in place.
                Ring::InPlace(r) => r.total -= count as u32,
                Ring::Heap(r) => r.total -= count,
            }
        }
        e
    }

    /// Adds `e` as the oldest entry (not counted as a block entry).
    pub(crate) fn push_front(&mut self, e: Entry) {
        // Exact first: a count left high by departures would take `e` in.
        self.set_blocks(self.blocks());
        self.on_deque(|r| {
            r.entries.push_front(e);
            r.total += e.1;
        });
    }

    /// Adds a block's entry `e` as the oldest: a block entry among the newest ones iff every
    /// entry is one (no grant is stamped after it).
    pub(crate) fn push_block_front(&mut self, e: Entry) {
        let all = self.blocks() == self.len();
        self.push_front(e);
        if all {
            self.set_blocks(self.blocks() + 1);
        }
    }

    /// Adds `n` permits stamped `stamp`, a grant's or a penalty's (not before
    /// [`newest_grant`](Entries::newest_grant)), in stamp order among the block entries: onto
    /// an entry of that stamp if there is one, else as a new entry; the block entries stamped
    /// after it stay the newest ones. With no block entry it is [`push`](Entries::push).
    #[cold]
    #[inline(never)]
    pub(crate) fn insert_grant(&mut self, stamp: Nanos, n: u64) {
        let (len, blocks) = (self.len(), self.blocks());
        let mut i = len - blocks;
        while i < len && self.get(i).0 < stamp {
            i += 1;
        }
        if i < len && self.get(i).0 == stamp {
            self.on_deque(|r| {
                r.entries[i].1 += n;
                r.total += n;
            });
            self.set_blocks(len - i - 1);
        } else if i > 0 && self.get(i - 1).0 == stamp {
            self.on_deque(|r| {
                r.entries[i - 1].1 += n;
                r.total += n;
            });
            self.set_blocks(len - i);
        } else {
            self.insert_at(i, (stamp, n));
            self.set_blocks(len - i);
        }
    }

    fn set_blocks(&mut self, blocks: usize) {
        match self {
            // At most `INLINE` in place.
            Ring::InPlace(r) => r.blocks = blocks as u8,
            Ring::Heap(r) => r.blocks = blocks,
        }
    }

    /// Puts `e` at index `i` (`i <= len`), the entries from `i` on moving one place newer.
    fn insert_at(&mut self, i: usize, e: Entry) {
        self.on_deque(|r| {
            r.entries.insert(i, e);
            r.total += e.1;
        });
    }

    /// A change the in-place form has no step for (the cold paths: block entries, grants
    /// beside them), made on the heap form; a ring that was in place goes back if its entries
    /// still fit there.
    #[cold]
    #[inline(never)]
    fn on_deque<R>(&mut self, f: impl FnOnce(&mut Heap) -> R) -> R {
        let in_place = matches!(self, Ring::InPlace(_));
        let out = f(self.heap());
        if let (true, Ring::Heap(r)) = (in_place, &*self) {
            if let Some(back) = r.in_place() {
                *self = Ring::InPlace(back);
            }
        }
        out
    }

    /// The heap form, the in-place entries moved onto it first (with room for as many again).
    #[cold]
    #[inline(never)]
    fn heap(&mut self) -> &mut Heap {
        if let Ring::InPlace(r) = self {
            let mut entries = VecDeque::with_capacity(2 * INLINE);
            entries.extend((0..r.len()).map(|i| r.get(i)));
            let (generation, blocks) = (r.generation, r.blocks);
            *self = Ring::Heap(Box::new(Heap {
                entries,
                total: r.total(),
                generation,
                blocks: usize::from(blocks.min(r.len)),
            }));
        }
        match self {
            Ring::Heap(r) => r,
            Ring::InPlace(_) => unreachable!("moved to the heap above"),
        }
    }

    /// After departures: a heap ring with few entries left goes back in place; a larger one
    /// gives back what its entries no longer need.
    #[inline]
    pub(crate) fn settle(&mut self) {
        if let Ring::Heap(r) = self {
            let (len, cap) = (r.entries.len(), r.entries.capacity());
            if len <= BACK_IN_PLACE || (cap >= SHRINK_FROM && len * 4 <= cap) {
                self.settle_heap();
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn settle_heap(&mut self) {
        let Ring::Heap(r) = self else {
            return;
        };
        // Entries whose stamps or counts do not fit in place stay on the heap.
        if r.entries.len() <= BACK_IN_PLACE {
            if let Some(back) = r.in_place() {
                *self = Ring::InPlace(back);
                return;
            }
        }
        let len = r.entries.len();
        r.entries.shrink_to(len * 2);
    }

    /// Room for entries without allocating (tests).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Ring::InPlace(_) => INLINE,
            Ring::Heap(r) => r.entries.capacity(),
        }
    }

    /// Whether the entries are on the heap (tests).
    #[cfg(test)]
    pub(crate) fn on_heap(&self) -> bool {
        matches!(self, Ring::Heap(_))
    }

    /// Appends a new newest entry, not a block entry (tests: the ring against a plain deque).
    #[cfg(test)]
    pub(crate) fn push_back(&mut self, e: Entry) {
        self.set_blocks(0);
        self.on_deque(|r| {
            r.entries.push_back(e);
            r.total += e.1;
        });
    }

    /// Adds `n` to the newest entry's count, if any (tests).
    #[cfg(test)]
    pub(crate) fn add_back(&mut self, n: u64) {
        self.on_deque(|r| {
            if let Some(e) = r.entries.back_mut() {
                e.1 += n;
                r.total += n;
            }
        });
    }
}

impl Heap {
    /// These entries in place, if they fit there.
    fn in_place(&self) -> Option<InPlace> {
        InPlace::from_entries(self.entries.iter().copied(), self.generation, self.blocks())
    }
}

// Four 8-byte entries, their base stamp, the heap form's fields beside them: with the total and
// the key's lock, one key's state is a cache line (`sliding::tests::a_log_in_place_is_small`).
const _: () = assert!(std::mem::size_of::<Ring>() <= 48);
