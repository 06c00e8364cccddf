//! [`Ring`]: a sliding log's entries, oldest first: up to [`INLINE`] in place, in a ring on the
//! heap beyond.
//!
//! Why in place: at many keys a decision's cost was the cache miss on the heap ring's newest
//! entry after the table's own miss (benches/BENCHMARKS.md, issue 23.3). Keys that hold a few
//! live entries (most, at rates well below the limit) now read them in the table's entry.
//! Four, not two: at 10k keys the bench's keys hold 2-4.
//!
//! The log's quota generation parity rides in the ring's spare bytes, so the log (ring and
//! total) stays at 80 bytes and the table's entry at most what it was with the heap ring.

use std::collections::VecDeque;

use crate::Nanos;

/// `(stamp, permits)`.
pub(crate) type Entry = (Nanos, u64);

/// How many entries are held in place.
pub(crate) const INLINE: usize = 4;

/// A heap ring gives its memory back for the in-place one once this few entries are left
/// (not at `INLINE`: a key hovering at the boundary would allocate at every other grant).
const BACK_IN_PLACE: usize = INLINE / 2;

/// A heap ring grows no further than needed, and gives memory back once the live entries need
/// a quarter of it (not at every departure: a steady flow would re-allocate all the time).
pub(crate) const SHRINK_FROM: usize = 16;

/// The entries, oldest first, and the generation parity (module docs).
#[derive(Clone, Debug)]
pub(crate) enum Ring {
    /// `len` entries from `buf[head]`, wrapping.
    InPlace {
        buf: [Entry; INLINE],
        head: u8,
        len: u8,
        gen: bool,
    },
    /// More than [`INLINE`] entries (or, on the way back, at least [`BACK_IN_PLACE`] + 1).
    Heap { entries: VecDeque<Entry>, gen: bool },
}

impl Default for Ring {
    fn default() -> Ring {
        Ring::InPlace {
            buf: [(0, 0); INLINE],
            head: 0,
            len: 0,
            gen: false,
        }
    }
}

/// The index in `buf` of the `i`-th entry from `head`.
#[inline]
fn slot(head: u8, i: usize) -> usize {
    (usize::from(head) + i) % INLINE
}

impl Ring {
    #[inline]
    pub(crate) fn gen(&self) -> bool {
        match self {
            Ring::InPlace { gen, .. } | Ring::Heap { gen, .. } => *gen,
        }
    }

    pub(crate) fn set_gen(&mut self, to: bool) {
        match self {
            Ring::InPlace { gen, .. } | Ring::Heap { gen, .. } => *gen = to,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Ring::InPlace { len, .. } => usize::from(*len),
            Ring::Heap { entries, .. } => entries.len(),
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th entry from the oldest (`i < len`).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Entry {
        match self {
            Ring::InPlace { buf, head, .. } => buf[slot(*head, i)],
            Ring::Heap { entries, .. } => entries[i],
        }
    }

    #[inline]
    pub(crate) fn front(&self) -> Option<Entry> {
        (!self.is_empty()).then(|| self.get(0))
    }

    #[inline]
    pub(crate) fn back(&self) -> Option<Entry> {
        match self {
            Ring::InPlace { buf, head, len, .. } => {
                (*len > 0).then(|| buf[slot(*head, usize::from(*len) - 1)])
            }
            Ring::Heap { entries, .. } => entries.back().copied(),
        }
    }

    #[inline]
    pub(crate) fn back_mut(&mut self) -> Option<&mut Entry> {
        match self {
            Ring::InPlace { buf, head, len, .. } => {
                if *len == 0 {
                    None
                } else {
                    Some(&mut buf[slot(*head, usize::from(*len) - 1)])
                }
            }
            Ring::Heap { entries, .. } => entries.back_mut(),
        }
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<Entry> {
        match self {
            Ring::InPlace { buf, head, len, .. } => {
                if *len == 0 {
                    return None;
                }
                let e = buf[usize::from(*head)];
                *head = slot(*head, 1) as u8;
                *len -= 1;
                Some(e)
            }
            Ring::Heap { entries, .. } => entries.pop_front(),
        }
    }

    pub(crate) fn pop_back(&mut self) -> Option<Entry> {
        match self {
            Ring::InPlace { buf, head, len, .. } => {
                if *len == 0 {
                    return None;
                }
                *len -= 1;
                Some(buf[slot(*head, usize::from(*len))])
            }
            Ring::Heap { entries, .. } => entries.pop_back(),
        }
    }

    #[inline]
    pub(crate) fn push_back(&mut self, e: Entry) {
        match self {
            Ring::InPlace { buf, head, len, .. } if usize::from(*len) < INLINE => {
                buf[slot(*head, usize::from(*len))] = e;
                *len += 1;
            }
            _ => self.heap().push_back(e),
        }
    }

    pub(crate) fn push_front(&mut self, e: Entry) {
        match self {
            Ring::InPlace { buf, head, len, .. } if usize::from(*len) < INLINE => {
                *head = slot(*head, INLINE - 1) as u8;
                buf[usize::from(*head)] = e;
                *len += 1;
            }
            _ => self.heap().push_front(e),
        }
    }

    /// The heap ring, the in-place entries moved onto it first (with room for as many again).
    #[cold]
    fn heap(&mut self) -> &mut VecDeque<Entry> {
        if let Ring::InPlace { gen, .. } = *self {
            let mut entries = VecDeque::with_capacity(2 * INLINE);
            entries.extend((0..self.len()).map(|i| self.get(i)));
            *self = Ring::Heap { entries, gen };
        }
        match self {
            Ring::Heap { entries, .. } => entries,
            Ring::InPlace { .. } => unreachable!("moved to the heap above"),
        }
    }

    /// After departures: a heap ring with few entries left goes back in place; a larger one
    /// gives back what its entries no longer need.
    pub(crate) fn settle(&mut self) {
        let Ring::Heap { entries, gen } = self else {
            return;
        };
        if entries.len() <= BACK_IN_PLACE {
            let mut buf = [(0, 0); INLINE];
            for (to, e) in buf.iter_mut().zip(entries.iter()) {
                *to = *e;
            }
            let (len, gen) = (entries.len() as u8, *gen);
            *self = Ring::InPlace {
                buf,
                head: 0,
                len,
                gen,
            };
            return;
        }
        let cap = entries.capacity();
        if cap >= SHRINK_FROM && entries.len() * 4 <= cap {
            entries.shrink_to(entries.len() * 2);
        }
    }

    /// Room for entries without allocating (tests).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Ring::InPlace { .. } => INLINE,
            Ring::Heap { entries, .. } => entries.capacity(),
        }
    }

    /// Whether the entries are on the heap (tests).
    #[cfg(test)]
    pub(crate) fn on_heap(&self) -> bool {
        matches!(self, Ring::Heap { .. })
    }
}

// The log (this ring and its total) stays at 80 bytes: the table entry is no larger than it
// was with an empty heap ring plus the ring's 64-byte allocation (bytes per key do not grow).
const _: () = assert!(std::mem::size_of::<Ring>() <= 72);
