//! A recorder of the public API's decisions, compared with golden files.
//!
//! **What it records.** Seeded random sequences of operations, single-threaded on a
//! [`ManualClock`](tollgate::ManualClock), one line per operation:
//! `<scenario> <step> <op> -> <result>`. The scenarios cover `RateLimiter` and
//! `KeyedRateLimiter` with every algorithm (GCRA with several bursts and an empty start, the
//! fixed window on the clock's origin and on the epoch, the sliding log, the sliding window,
//! the weighted window) through the whole method family: `try_acquire(_n)`, `check(_n)`,
//! `peek`, `check(_n)_with`, the blocking `acquire(_n)` and `try_acquire(_n)_for` (the manual
//! clock's sleep moves it), `block`, `penalize`, `reward`, `reset`, `set_quota`, and for GCRA
//! `throttle` and reservations (made, cancelled, dropped, waited for); keyed tables of a few
//! keys with `sweep_now`, `len`, `contains_key` and the sweep counts, at a key cap in both
//! `WhenFull` modes; `ConcurrencyLimiter` and `KeyedConcurrencyLimiter` (permits held and
//! dropped in random order, `set_limit`, key caps); `SmoothRateLimiter`, bursty and warming
//! up; `LeasedRateLimiter`; `all_or_none`; and the `Quota` constructors. Inputs include the
//! edges: `n = 0`, the burst and one more, huge counts and durations, the clock at the end of
//! time. The clock moves by 0, a few ns, about one interval or one period (either side of the
//! boundary), and by hours to years.
//!
//! Nothing nondeterministic is recorded: no real clock, threads, tokio or Redis; keyed
//! scenarios use a fixed hasher (FNV) except one per algorithm that checks the default hasher
//! changes no decision; sweep statistics are printed without their wall-clock durations. The
//! generator is a hand-written splitmix64, so runs are bit-identical across machines and crate
//! versions, and the golden files are the same with and without the `tokio` feature.
//!
//! **Why.** A restructuring (files moved, modules split, internal types merged) must not
//! change any decision. Each family's lines are compared with `tests/trace/golden/<family>.txt`;
//! the first differing line is printed with its context. During a restructuring a difference
//! is a behaviour change to find and undo, not a trace to re-record.
//!
//! **Re-recording.** When a behaviour change is intended (a bug fix), re-record from the
//! fixed code and commit the golden files with the fix; the commit message must say which
//! decisions changed and why:
//!
//! ```text
//! TOLLGATE_TRACE_RECORD=1 cargo test --test trace
//! git diff --stat tests/trace/golden/   # review the changed lines before committing
//! ```

#[path = "trace/concurrency.rs"]
mod concurrency;
#[path = "trace/harness.rs"]
mod harness;
#[path = "trace/misc.rs"]
mod misc;
#[path = "trace/rate.rs"]
mod rate;
#[path = "trace/smooth.rs"]
mod smooth;

use harness::run_family as family;

#[test]
fn direct() {
    family("direct", rate::direct);
}

#[test]
fn keyed() {
    family("keyed", rate::keyed);
}

#[test]
fn concurrency() {
    family("concurrency", concurrency::concurrency);
}

#[test]
fn smooth() {
    family("smooth", smooth::smooth);
}

#[test]
fn misc() {
    family("misc", misc::misc);
}
