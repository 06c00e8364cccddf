//! A plain check's allocations on the client, counted by this binary's allocator on the
//! calling thread (a current-thread runtime: the connection's I/O task runs there too): the
//! state key made without `format!` (its quota part made once per limiter), the command
//! built in buffers of its final size, no boxed future around the request, the full check
//! reply in the reply's own buffer. Deterministic (a count, not a time); a real Redis on
//! loopback, every loop bounded.
#![cfg(feature = "redis")]

mod redis_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Write as _;
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

const CALLS: u64 = 2_000;
/// Allocations per check, tollgate's and the `redis` crate's (the state key, the command's two
/// buffers, the packed request, its channel, the reply and its integers): 7 measured; a
/// `format!`ed state key, buffers grown one argument at a time, the boxed future of
/// `query_async` and a new vector for the full check reply made 14.
const PER_CHECK: u64 = 7;

#[tokio::test]
async fn a_plain_check_allocates_no_more_than_it_must() {
    let server = RedisServer::start();
    let l = RedisRateLimiter::builder(Quota::per_second(100).unwrap())
        .prefix("allocs")
        .deadline(Duration::from_secs(10))
        .connect(&server.url())
        .await
        .unwrap();
    let mut key = String::with_capacity(16);
    let mut run = async |from: u64| {
        for i in from..from + CALLS {
            key.clear();
            write!(key, "{{u{i}}}").unwrap();
            assert!(l.check(&key).await.unwrap().allowed);
        }
    };
    // Warm-up: the script loaded, the connection's buffers grown.
    run(0).await;
    let a = allocs();
    run(CALLS).await;
    let per_check = (allocs() - a) as f64 / CALLS as f64;
    assert!(
        per_check <= PER_CHECK as f64 + 0.5,
        "{per_check:.2} allocations per check (at most {PER_CHECK})"
    );
}
