//! `ConcurrencyLimiter` and `KeyedConcurrencyLimiter`: permits taken, held, dropped and
//! forgotten in random order, limits changed live, key caps. No clock: a blocking acquire is
//! called only where it is granted (or refused) at once, and timed ones with a timeout of at
//! most 1 ns, so nothing waits on real time for a decision.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tollgate::{ConcurrencyLimiter, KeyedConcurrencyLimiter, OwnedPermit, Permit, WhenFull};

use crate::harness::{call, seed_of, FixedHasher, Key, Rng, Show, Trace};

const MAX_LIMIT: u64 = ConcurrencyLimiter::MAX_LIMIT;

/// A permit held by the driver: borrowed or owned.
enum Held<'a> {
    Borrowed(Permit<'a>),
    Owned(OwnedPermit),
}

impl Held<'_> {
    fn n(&self) -> u64 {
        match self {
            Held::Borrowed(p) => p.n(),
            Held::Owned(p) => p.n(),
        }
    }

    fn forget(self) {
        match self {
            Held::Borrowed(p) => p.forget(),
            Held::Owned(p) => p.forget(),
        }
    }
}

/// Permits held, with the numbers their lines gave them and their keys.
struct Pocket<'a> {
    held: Vec<(u64, u32, Held<'a>)>,
    next: u64,
}

impl<'a> Pocket<'a> {
    fn new() -> Self {
        Pocket {
            held: Vec::new(),
            next: 0,
        }
    }

    /// Keeps a granted permit; the result as its line shows it.
    fn keep(&mut self, key: u32, r: Result<Held<'a>, tollgate::AcquireError>) -> String {
        match r {
            Ok(p) => {
                let id = self.next;
                self.next += 1;
                let s = format!("Ok(n={}) #{id}", p.n());
                self.held.push((id, key, p));
                s
            }
            Err(e) => format!("Err({e:?})"),
        }
    }

    fn take(&mut self, rng: &mut Rng) -> Option<(u64, u32, Held<'a>)> {
        if self.held.is_empty() {
            None
        } else {
            Some(self.held.remove(rng.index(self.held.len())))
        }
    }
}

/// The counts are drawn in `u32`, as when they were recorded (`3 * MAX_LIMIT` saturates at
/// `u32::MAX`), then passed as the public `u64`.
fn count(rng: &mut Rng, limit: u64) -> u64 {
    let l = u32::try_from(limit).expect("a limit fits the cell").max(1);
    let max = u32::try_from(MAX_LIMIT).expect("MAX_LIMIT fits u32");
    u64::from(match rng.below(100) {
        0..=7 => 0,
        8..=49 => 1,
        50..=79 => rng.range(2, u64::from(l.max(2))) as u32,
        80..=87 => l,
        88..=94 => l.saturating_add(1),
        _ => rng.pick(&[u32::MAX, max, max + 1, l.saturating_mul(3)]),
    })
}

fn new_limit(rng: &mut Rng) -> u64 {
    match rng.below(100) {
        0..=4 => 0,
        5..=89 => rng.range(1, 8),
        90..=94 => rng.range(9, 1000),
        _ => rng.pick(&[MAX_LIMIT, MAX_LIMIT + 1, u64::from(u32::MAX)]),
    }
}

/// A timed acquire's timeout: none, or 1 ns (either way, no wait worth the name).
fn tiny(rng: &mut Rng) -> Duration {
    Duration::from_nanos(rng.below(2))
}

fn direct_state(l: &ConcurrencyLimiter) -> String {
    format!(
        "[in={} lim={} av={}]",
        l.in_flight(),
        l.limit(),
        l.available()
    )
}

fn run_direct(t: &mut Trace, rng: &mut Rng, l: &Arc<ConcurrencyLimiter>, steps: usize) {
    let mut pocket = Pocket::new();
    for _ in 0..steps {
        let limit = l.limit();
        let (op, r) = match rng.below(100) {
            0..=14 => (
                "try_acquire()".to_owned(),
                match l.try_acquire() {
                    Some(p) => pocket.keep(0, Ok(Held::Borrowed(p))),
                    None => "None".to_owned(),
                },
            ),
            15..=29 => {
                let n = count(rng, limit);
                (
                    call("try_acquire_n", &[&n]),
                    pocket.keep(0, l.try_acquire_n(n).map(Held::Borrowed)),
                )
            }
            30..=37 => {
                let n = count(rng, limit);
                // Only where it decides at once: more than the limit, or free now.
                if n > limit || n <= l.available() {
                    (
                        call("acquire_n", &[&n]),
                        pocket.keep(0, l.acquire_n(n).map(Held::Borrowed)),
                    )
                } else {
                    (call("available", &[]), l.available().show())
                }
            }
            38..=41 => {
                if l.available() >= 1 {
                    (
                        "acquire()".to_owned(),
                        pocket.keep(0, l.acquire().map(Held::Borrowed)),
                    )
                } else {
                    (call("in_flight", &[]), l.in_flight().show())
                }
            }
            42..=49 => {
                let n = count(rng, limit);
                let d = tiny(rng);
                (
                    call("try_acquire_n_for", &[&n, &d]),
                    pocket.keep(0, l.try_acquire_n_for(n, d).map(Held::Borrowed)),
                )
            }
            50..=52 => {
                let d = tiny(rng);
                (
                    call("try_acquire_for", &[&d]),
                    pocket.keep(0, l.try_acquire_for(d).map(Held::Borrowed)),
                )
            }
            53..=57 => {
                let n = count(rng, limit);
                (
                    call("try_acquire_n_owned", &[&n]),
                    pocket.keep(0, l.try_acquire_n_owned(n).map(Held::Owned)),
                )
            }
            58..=59 => (
                "try_acquire_owned()".to_owned(),
                match l.try_acquire_owned() {
                    Some(p) => pocket.keep(0, Ok(Held::Owned(p))),
                    None => "None".to_owned(),
                },
            ),
            60..=84 => match pocket.take(rng) {
                Some((id, _, p)) => {
                    drop(p);
                    (format!("drop(#{id})"), "()".to_owned())
                }
                None => ("limit()".to_owned(), l.limit().show()),
            },
            85..=86 => match pocket.take(rng) {
                Some((id, _, p)) => {
                    p.forget();
                    (format!("forget(#{id})"), "()".to_owned())
                }
                None => ("available()".to_owned(), l.available().show()),
            },
            87..=94 => {
                let new = new_limit(rng);
                (call("set_limit", &[&new]), l.set_limit(new).show())
            }
            _ => {
                let all = pocket.held.len();
                pocket.held.clear();
                (format!("drop_all({all})"), "()".to_owned())
            }
        };
        t.rec(op, format!("{r} {}", direct_state(l)));
    }
}

fn run_keyed(
    t: &mut Trace,
    rng: &mut Rng,
    l: &Arc<KeyedConcurrencyLimiter<u32, FixedHasher>>,
    keys: u32,
    steps: usize,
) {
    let cap = l.max_keys().map_or(usize::MAX, NonZeroUsize::get);
    let mut pocket = Pocket::new();
    for _ in 0..steps {
        let limit = l.limit();
        let k = if rng.chance(50) {
            rng.below(2) as u32
        } else {
            rng.below(u64::from(keys)) as u32
        };
        let (op, r) = match rng.below(100) {
            0..=14 => (
                call("try_acquire", &[&Key(k)]),
                match l.try_acquire(&k) {
                    Some(p) => pocket.keep(k, Ok(Held::Borrowed(p))),
                    None => "None".to_owned(),
                },
            ),
            15..=31 => {
                let n = count(rng, limit);
                (
                    call("try_acquire_n", &[&Key(k), &n]),
                    pocket.keep(k, l.try_acquire_n(&k, n).map(Held::Borrowed)),
                )
            }
            32..=39 => {
                let n = count(rng, limit);
                let in_flight = l.in_flight(&k);
                // Only where it decides at once: the key is tracked (it holds permits) or a
                // slot is free, and the permits are free now or more than the limit.
                let slot = in_flight > 0 || l.len() < cap;
                let free = n > limit || (in_flight <= limit && n <= limit - in_flight);
                if slot && free {
                    (
                        call("acquire_n", &[&Key(k), &n]),
                        pocket.keep(k, l.acquire_n(&k, n).map(Held::Borrowed)),
                    )
                } else {
                    (call("in_flight", &[&Key(k)]), in_flight.show())
                }
            }
            40..=47 => {
                let n = count(rng, limit);
                let d = tiny(rng);
                (
                    call("try_acquire_n_for", &[&Key(k), &n, &d]),
                    pocket.keep(k, l.try_acquire_n_for(&k, n, d).map(Held::Borrowed)),
                )
            }
            48..=49 => {
                let d = tiny(rng);
                (
                    call("try_acquire_for", &[&Key(k), &d]),
                    pocket.keep(k, l.try_acquire_for(&k, d).map(Held::Borrowed)),
                )
            }
            50..=54 => {
                let n = count(rng, limit);
                (
                    call("try_acquire_n_owned", &[&Key(k), &n]),
                    pocket.keep(k, l.try_acquire_n_owned(&k, n).map(Held::Owned)),
                )
            }
            55..=56 => (
                call("try_acquire_owned", &[&Key(k)]),
                match l.try_acquire_owned(&k) {
                    Some(p) => pocket.keep(k, Ok(Held::Owned(p))),
                    None => "None".to_owned(),
                },
            ),
            57..=79 => match pocket.take(rng) {
                Some((id, key, p)) => {
                    drop(p);
                    (
                        format!("drop(#{id})"),
                        format!("() in_flight(k{key})={}", l.in_flight(&key)),
                    )
                }
                None => (call("in_flight", &[&Key(k)]), l.in_flight(&k).show()),
            },
            80 => match pocket.take(rng) {
                Some((id, key, p)) => {
                    p.forget();
                    (
                        format!("forget(#{id})"),
                        format!("() in_flight(k{key})={}", l.in_flight(&key)),
                    )
                }
                None => (call("in_flight", &[&Key(k)]), l.in_flight(&k).show()),
            },
            81..=85 => {
                let new = new_limit(rng);
                (
                    call("set_limit", &[&new]),
                    format!("{} limit={}", l.set_limit(new).show(), l.limit()),
                )
            }
            86..=90 => ("sweep_now()".to_owned(), l.sweep_now().show()),
            91..=92 => ("stats()".to_owned(), l.stats().show()),
            93..=94 => (call("in_flight", &[&Key(k)]), l.in_flight(&k).show()),
            _ => {
                let all = pocket.held.len();
                pocket.held.clear();
                (format!("drop_all({all})"), "()".to_owned())
            }
        };
        t.rec(op, format!("{r} len={}", l.len()));
    }
}

/// The `concurrency` family.
pub fn concurrency(t: &mut Trace) {
    t.scenario("concurrency/new", 0, "limits 0, 1, MAX_LIMIT and above");
    for limit in [0, 1, 7, MAX_LIMIT, MAX_LIMIT + 1, u64::from(u32::MAX)] {
        t.rec(
            call("ConcurrencyLimiter::new", &[&limit]),
            ConcurrencyLimiter::new(limit).map(|l| l.limit()).show(),
        );
        t.rec(
            call("KeyedConcurrencyLimiter::new", &[&limit]),
            KeyedConcurrencyLimiter::<u32>::new(limit)
                .map(|l| l.limit())
                .show(),
        );
    }
    for (name, limit, steps) in [
        ("direct_1", 1, 300),
        ("direct_4", 4, 1000),
        ("direct_9", 9, 500),
    ] {
        let name = format!("concurrency/{name}");
        let seed = seed_of(&name);
        let mut rng = Rng::new(seed);
        let l = Arc::new(ConcurrencyLimiter::new(limit).expect("a valid limit"));
        t.scenario(&name, seed, format!("limit={limit}"));
        run_direct(t, &mut rng, &l, steps);
    }
    for (name, limit, cap, steps) in [
        ("keyed_3", 3, None, 1000),
        ("keyed_2_cap3_deny", 2, Some((3, WhenFull::Deny)), 800),
        (
            "keyed_4_cap2_allow",
            4,
            Some((2, WhenFull::AllowUntracked)),
            600,
        ),
    ] {
        let name = format!("concurrency/{name}");
        let seed = seed_of(&name);
        let mut rng = Rng::new(seed);
        let mut b = KeyedConcurrencyLimiter::<u32>::builder(limit)
            .expect("a valid limit")
            .hasher(FixedHasher::default())
            .shards(4);
        if let Some((cap, when)) = cap {
            b = b
                .max_keys(NonZeroUsize::new(cap).expect("a cap above 0"))
                .when_full(when);
        }
        let l = Arc::new(b.build());
        t.scenario(&name, seed, format!("limit={limit} keys=6 cap={cap:?}"));
        run_keyed(t, &mut rng, &l, 6, steps);
    }
}
