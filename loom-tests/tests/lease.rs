//! One shard of a `LeasedRateLimiter` (`cell::lease`): threads taking permits from its lease
//! counter, and the take-when-empty protocol that refills it from a shared pool.
//!
//! Properties, in every interleaving: permits are conserved (the permits admitted plus those
//! still held equal what the pool gave out: none made up, none lost), and the shard never holds
//! more than `L - 1` (the bound on over-admission). Fails if two threads can take a lease for
//! the same empty shard (e.g. a refill that adds to the count instead of moving it from 0 to
//! `TAKING` first): both leases' rests are stored, `2 (L - 1)`.

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use tollgate::__loom::Lease;
use tollgate_loom_tests::model;

/// The shared limiter as a pool of permits: a lease takes `l` if there are, else 1, else 0.
fn take(pool: &AtomicU64, l: u64) -> u64 {
    let mut p = pool.load(Ordering::Acquire);
    loop {
        let got = if p >= l { l } else { p.min(1) };
        if got == 0 {
            return 0;
        }
        match pool.compare_exchange(p, p - got, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return got,
            Err(seen) => p = seen,
        }
    }
}

fn shard(threads: usize, calls: usize, pool_size: u64, l: u64) {
    model(move || {
        let pool = Arc::new(AtomicU64::new(pool_size));
        let lease = Arc::new(Lease::new());
        let admitted = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (pool, lease, admitted) = (pool.clone(), lease.clone(), admitted.clone());
                thread::spawn(move || {
                    for _ in 0..calls {
                        let ok = lease.acquire(|| take(&pool, l), || take(&pool, 1) == 1);
                        if ok {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                        assert!(lease.held() < l, "a shard held {} >= L", lease.held());
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let given = pool_size - pool.load(Ordering::Acquire);
        let (admitted, held) = (admitted.load(Ordering::Relaxed), lease.held());
        assert_eq!(
            admitted + held,
            given,
            "admitted {admitted} + held {held} != given"
        );
        assert!(held < l);
    });
}

#[test]
fn two_threads_one_call_each() {
    shard(2, 1, 10, 3);
}

#[test]
fn two_threads_two_calls_each() {
    shard(2, 2, 10, 2);
}

#[test]
fn two_threads_at_the_pool_edge() {
    // 4 permits, leases of 3: the second lease finds 1 and takes it alone.
    shard(2, 2, 4, 3);
}
