//! Shared pieces of the benches: the hardware floors and the key sequences.
//!
//! A floor is the least work any GCRA limiter must do per call: one clock read, one load of the
//! state word, the arithmetic, and (when allowed) one CAS. Nothing else: no quota lookup, no
//! result type. Every ratio in benches/BENCHMARKS.md is against a floor or governor measured in the same
//! run.

#![allow(dead_code)] // each bench uses a different subset

pub mod rounds;

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use tollgate::{Clock, Nanos};

/// quanta read the way governor and tollgate's `QuantaClock` do (a call to
/// `quanta::Clock::raw`), for the same-clock comparisons with governor.
pub struct RawQuanta {
    clock: quanta::Clock,
    origin: u64,
}

impl RawQuanta {
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        RawQuanta { clock, origin }
    }
}

impl Clock for RawQuanta {
    #[inline(always)]
    fn now(&self) -> Nanos {
        self.clock
            .delta_as_nanos(self.origin, self.clock.raw().max(self.origin))
    }
}

/// The GCRA step with nothing around it: `new = max(tat, now) + t`, allowed iff
/// `new - tau <= now`, one CAS attempt when allowed, nothing stored when denied.
#[inline(always)]
pub fn floor_step(cell: &AtomicU64, now: u64, t: u64, tau: u64) -> bool {
    let cur = cell.load(Ordering::Acquire);
    let new = cur.max(now).saturating_add(t);
    if new.saturating_sub(tau) <= now {
        cell.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    } else {
        false
    }
}

/// The direct floor: one clock read + [`floor_step`] on one padded word.
pub struct DirectFloor<C> {
    pub clock: C,
    pub cell: CachePadded<AtomicU64>,
    pub t: u64,
    pub tau: u64,
}

impl<C: Clock> DirectFloor<C> {
    pub fn new(clock: C, t: u64, burst: u64) -> Self {
        DirectFloor {
            clock,
            cell: CachePadded::new(AtomicU64::new(0)),
            t,
            tau: t * burst,
        }
    }

    #[inline(always)]
    pub fn try_acquire(&self) -> bool {
        floor_step(&self.cell, self.clock.now(), self.t, self.tau)
    }
}

/// The keyed floor: a `DashMap<K, AtomicU64, S>` (`get`, else `entry().or_insert`), one clock
/// read, [`floor_step`] under the shard read guard. [`KeyedFloor::new`] uses tollgate's shard
/// count ([`tollgate::DEFAULT_SHARDS`]); [`KeyedFloor::with_shards`] any other.
pub struct KeyedFloor<K, S, C> {
    pub map: dashmap::DashMap<K, AtomicU64, S>,
    pub clock: C,
    pub t: u64,
    pub tau: u64,
}

impl<K: Hash + Eq, S: BuildHasher + Clone + Default, C: Clock> KeyedFloor<K, S, C> {
    pub fn new(clock: C, t: u64, burst: u64) -> Self {
        Self::with_shards(clock, t, burst, tollgate::DEFAULT_SHARDS)
    }

    pub fn with_shards(clock: C, t: u64, burst: u64, shards: usize) -> Self {
        KeyedFloor {
            map: dashmap::DashMap::with_hasher_and_shard_amount(S::default(), shards),
            clock,
            t,
            tau: t * burst,
        }
    }

    #[inline(always)]
    pub fn try_acquire<Q>(&self, key: &Q) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let now = self.clock.now();
        if let Some(cell) = self.map.get(key) {
            return floor_step(&cell, now, self.t, self.tau);
        }
        let cell = self.map.entry(key.to_owned()).or_insert(AtomicU64::new(0));
        floor_step(&cell, now, self.t, self.tau)
    }
}

/// A lower bound for any keyed design, not a usable limiter: one clock read, one hash, and
/// [`floor_step`] on a slot of a flat pre-sized array (no map, no lock, no key comparison;
/// colliding keys share a slot). What a lock-free table could approach.
pub struct ArrayBound<C> {
    cells: Vec<AtomicU64>,
    mask: usize,
    hasher: foldhash::fast::FixedState,
    clock: C,
    t: u64,
    tau: u64,
}

impl<C: Clock> ArrayBound<C> {
    pub fn new(clock: C, slots: usize, t: u64, burst: u64) -> Self {
        let n = slots.next_power_of_two();
        ArrayBound {
            cells: (0..n).map(|_| AtomicU64::new(0)).collect(),
            mask: n - 1,
            hasher: foldhash::fast::FixedState::default(),
            clock,
            t,
            tau: t * burst,
        }
    }

    #[inline(always)]
    pub fn try_acquire<Q: Hash + ?Sized>(&self, key: &Q) -> bool {
        let now = self.clock.now();
        let slot = self.hasher.hash_one(key) as usize & self.mask;
        floor_step(&self.cells[slot], now, self.t, self.tau)
    }
}

/// SplitMix64: a fixed, seedable sequence so every contender sees the same keys.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `len` keys drawn uniformly from `0..universe` (seeded, so the same for every contender).
pub fn random_u64_keys(universe: u64, len: usize, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix(seed);
    (0..len).map(|_| rng.next_u64() % universe).collect()
}

/// A short string key for an id, like a client id or an IP ("k" + up to 7 digits, <= 8 bytes).
pub fn string_key(id: u64) -> String {
    format!("k{id}")
}

/// The process's resident set size in bytes, from `/proc/self/statm` (Linux).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm resident field");
    // Page size: 4 KiB on every Linux this runs on (x86-64, aarch64 default).
    pages * 4096
}

/// Parses `--quick` (or `TOLLGATE_BENCH_QUICK=1`) for the plain (non-criterion) bench binaries.
pub fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
        || std::env::var("TOLLGATE_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// The median of `xs` (sorts in place).
pub fn median(xs: &mut [f64]) -> f64 {
    quantile(xs, 0.5)
}

/// The `q` quantile of `xs` (`0.0..=1.0`, linear interpolation between order statistics;
/// sorts in place). `NaN` for an empty slice.
pub fn quantile(xs: &mut [f64], q: f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    if xs.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (xs.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    xs[lo] + (xs[hi] - xs[lo]) * (pos - lo as f64)
}

/// The CPU's model name (`/proc/cpuinfo`, what `lscpu` prints as "Model name"), for the stamp
/// every table carries.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string())
}

/// The 1-minute load average now (`/proc/loadavg`), for the stamp every table carries.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}
