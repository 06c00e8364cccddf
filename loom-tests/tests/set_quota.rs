//! `set_quota` racing with decisions (the `QuotaCell` seqlock).
//!
//! Property: no decision uses a torn `(T, burst)` pair. The two quotas are chosen so that a mix
//! is visible in the decision itself: `OLD = (T 100, burst 1)` and `NEW = (T 30, burst 5)`; a
//! torn `(100, 5)` or `(30, 1)` produces a `limit`/`reset_after`/`remaining` combination neither
//! quota can produce. Each model checks every decision against both quotas directly, and the
//! whole history (decisions, final TAT, final quota) against sequential executions in which each
//! decision uses a whole quota that was in force at or before it ([`Spec::StaleQuota`]: the
//! quota and the TAT are separate words, so a decision that loaded the quota just before a
//! `set_quota` may store after it; that is allowed, a mix is not).

use std::time::Duration;

use tollgate::{Decision, Quota};
use tollgate_loom_tests::{quota, run_model, History, Op, Out, Setup};

const NOW: u64 = 1_000;

fn old() -> Quota {
    quota(100, 1)
}

fn new() -> Quota {
    quota(30, 5)
}

/// A check of one permit made entirely under `q`, from a bucket whose debt before the call was
/// a whole number of some interval: `limit` is `q`'s burst, and an allowed decision adds exactly
/// one `T` of `q` to a debt that fits `q`'s tolerance.
fn consistent_with(d: &Decision, q: Quota) -> bool {
    let t = q.interval();
    let tau = q.tolerance();
    if d.limit != q.burst() || d.remaining >= q.burst() && d.allowed {
        return false;
    }
    if d.allowed {
        // After an allowed check the debt is at least one T and at most tau.
        d.reset_after >= t && d.reset_after <= tau && d.retry_after.is_none() && {
            let left = tau - d.reset_after;
            d.remaining == (left.as_nanos() / t.as_nanos()) as u64
        }
    } else {
        // Denied: nothing stored, retry_after = debt + T - tau.
        let left = tau.saturating_sub(d.reset_after);
        d.remaining == ((left.as_nanos() / t.as_nanos()) as u64).min(q.burst())
            && d.retry_after
                == Some(d.reset_after + t)
                    .and_then(|x| x.checked_sub(tau))
                    .filter(|r| *r > Duration::ZERO)
    }
}

/// A third quota for the second writer: its limit (3) differs from both others, so a final
/// quota torn between two writers is visible too.
fn third() -> Quota {
    quota(50, 3)
}

fn check_decisions(observed: &History) {
    let all = [old(), new(), third()];
    for d in observed.outs.iter().flatten() {
        if let Out::Decision(d) = d {
            let matching = all.iter().filter(|q| consistent_with(d, **q)).count();
            assert_eq!(
                matching, 1,
                "decision from a torn quota: {d:?} in {observed:?}"
            );
        }
    }
    let q = observed.fin.quota;
    assert!(all.contains(&q), "torn final quota {q:?}");
}

fn setup() -> Setup {
    Setup {
        quota: old(),
        now: NOW,
        preload: 0,
    }
}

fn linearizable(threads: Vec<Vec<Op>>) {
    run_model(setup(), threads, |_, _, observed, _| {
        check_decisions(observed)
    });
}

// Each model has at most one thread that can spin at a time (a reader waits only for a writer,
// a writer only for the other writer): two spinners that both `yield_now` can hand the CPU to
// each other forever without using up loom's preemption bound, so the search would not end.
// Readers never write, so a second concurrent reader would add no interaction to check.

/// One writer, one reader.
#[test]
fn set_quota_vs_check() {
    linearizable(vec![vec![Op::SetQuota(new())], vec![Op::Check(1)]]);
}

/// One writer, a reader that decides twice (the second decision sees a debt made under either
/// quota) and then acquires.
#[test]
fn set_quota_vs_checks_and_acquire() {
    linearizable(vec![
        vec![Op::SetQuota(new())],
        vec![Op::Check(1), Op::Check(1), Op::TryAcquire(1)],
    ]);
}

/// One writer, a reader on `try_acquire()`'s path (the first three parameter words, the
/// common word inline, a word a generation behind out of line) that acquires twice (the
/// second against a debt made under either quota) and then decides in full.
#[test]
fn set_quota_vs_one_permit_path() {
    linearizable(vec![
        vec![Op::SetQuota(new())],
        vec![Op::TryAcquireOne, Op::TryAcquireOne, Op::Check(1)],
    ]);
}

/// Two writers take turns on the sequence: the quota left in force is one of theirs, whole.
#[test]
fn two_writers() {
    linearizable(vec![vec![Op::SetQuota(new())], vec![Op::SetQuota(third())]]);
}
