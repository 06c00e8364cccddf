//! A local grant's allocations, counted by this binary's allocator on the calling thread:
//! none (not even the key's state key), so that a grant from a batch costs about what an
//! in-process check does, not a formatting of the key. Deterministic (a count, not a
//! time); a real Redis on loopback gives the batches, every loop is bounded.
#![cfg(feature = "redis")]

mod redis_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use redis_support::RedisServer;
use tollgate::redis::RedisRateLimiter;
use tollgate::Quota;

/// The system allocator, counting this thread's allocations and reallocations.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // Not during the thread's teardown (the slot may be gone): nothing measured then.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call goes to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Calls measured once the batches grant.
const CALLS: u64 = 5_000;
/// What a call that goes to Redis may allocate (the request, the reply, a spawned take; about
/// 12 measured): it only keeps the few such calls among `CALLS` from counting as grants.
const PER_REPLY: u64 = 50;

// Current-thread: the calls, and the takes they start, run on this thread, whose
// allocations are the ones counted.
#[tokio::test]
async fn a_local_grant_allocates_nothing() {
    let server = RedisServer::start();
    // Far above the load, so every call is allowed; an hour's refresh, so that no batch ends
    // and the few takes (each about twice the last) depend on the call count only.
    let quota = Quota::per_second(1_000_000)
        .unwrap()
        .with_burst(10_000_000)
        .unwrap();
    let l = RedisRateLimiter::builder(quota)
        .prefix("allocs")
        .deadline(Duration::from_secs(10))
        .local_batches(Duration::from_secs(3600), 5)
        .connect(&server.url())
        .await
        .unwrap();
    for _ in 0..CALLS {
        assert!(l.check("{hot}").await.unwrap().allowed);
        if l.stats().local_grants >= 100 {
            break;
        }
    }
    let before = l.stats();
    assert!(before.local_grants >= 100, "no batch taken: {before:?}");
    let a = allocs();
    for _ in 0..CALLS {
        assert!(l.check("{hot}").await.unwrap().allowed);
    }
    let allocated = allocs() - a;
    let after = l.stats();
    let grants = after.local_grants - before.local_grants;
    let replies = after.replies - before.replies;
    assert!(grants >= CALLS * 9 / 10, "{grants} local grants of {CALLS}");
    assert!(
        allocated <= PER_REPLY * replies,
        "{allocated} allocations for {grants} local grants and {replies} replies"
    );
}
