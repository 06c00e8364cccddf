//! The background sweeper: a thread, or a tokio task, that sweeps a store every interval.
//!
//! It knows stores only through [`Sweep`] and holds a `Weak` to one, so it never keeps a
//! limiter alive; dropping the limiter drops the [`Sweeper`], which stops it.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sync::{AtomicBool, Ordering};

/// Something that can sweep itself; `stop` is polled between chunks of its walk.
pub(crate) trait Sweep: Send + Sync + 'static {
    fn sweep(&self, stop: &dyn Fn() -> bool) -> usize;
}

/// A running background sweeper; dropping it stops it (and, for a thread, joins it: that
/// takes at most the chunk being swept, since the stop flag is polled between chunks).
pub(crate) struct Sweeper {
    stop: Arc<AtomicBool>,
    runner: Runner,
}

enum Runner {
    Thread(Option<JoinHandle<()>>),
    #[cfg(feature = "tokio")]
    Task(tokio::task::JoinHandle<()>),
}

/// The background thread's name (visible in debuggers and `/proc`).
pub(crate) const THREAD_NAME: &str = "tollgate-sweep";

/// The shortest pause between background sweeps. Back-to-back sweeps would re-take the sweep
/// lock the instant they release it (std's mutex is not fair), starving `sweep_now` callers,
/// and burn a core for nothing: a key cannot turn cold faster than the clock moves.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(1);

impl Sweeper {
    /// Starts sweeping `store` every `interval`, holding only a weak reference to it.
    /// `None` if the OS refused a thread.
    pub(crate) fn start(
        store: Weak<dyn Sweep>,
        interval: Duration,
        on_tokio: bool,
    ) -> Option<Sweeper> {
        let interval = interval.max(MIN_INTERVAL);
        let stop = Arc::new(AtomicBool::new(false));
        #[cfg(feature = "tokio")]
        if on_tokio {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let task = rt.spawn(run_task(store, stop.clone(), interval));
                return Some(Sweeper {
                    stop,
                    runner: Runner::Task(task),
                });
            }
        }
        let _ = on_tokio;
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || run_thread(&store, &flag, interval))
            .ok()?;
        Some(Sweeper {
            stop,
            runner: Runner::Thread(Some(thread)),
        })
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        match &mut self.runner {
            Runner::Thread(thread) => {
                if let Some(thread) = thread.take() {
                    // Wake it from its interval sleep so it sees the flag now, not a whole
                    // interval later.
                    thread.thread().unpark();
                    let _ = thread.join();
                }
            }
            #[cfg(feature = "tokio")]
            Runner::Task(task) => task.abort(),
        }
    }
}

fn run_thread(store: &Weak<dyn Sweep>, stop: &AtomicBool, interval: Duration) {
    loop {
        // Sleep until the deadline; park can wake early (unpark, or spuriously).
        let deadline = Instant::now().checked_add(interval);
        loop {
            if stop.load(Ordering::Acquire) {
                return;
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                break;
            }
            std::thread::park_timeout(left);
        }
        // Upgrade only for the sweep: between sweeps the limiter may go away.
        let Some(store) = store.upgrade() else { return };
        store.sweep(&|| stop.load(Ordering::Acquire));
    }
}

#[cfg(feature = "tokio")]
async fn run_task(store: Weak<dyn Sweep>, stop: Arc<AtomicBool>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let (store, stop) = (store.clone(), stop.clone());
        // A sweep is CPU work holding shard locks: run it on the blocking pool.
        let swept = tokio::task::spawn_blocking(move || {
            if stop.load(Ordering::Acquire) {
                return false;
            }
            match store.upgrade() {
                Some(store) => {
                    store.sweep(&|| stop.load(Ordering::Acquire));
                    true
                }
                None => false,
            }
        })
        .await;
        if !matches!(swept, Ok(true)) {
            return;
        }
    }
}
