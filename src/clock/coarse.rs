//! [`CoarseClock`]: a cached reading of [`DefaultClock`], refreshed by an upkeep thread, so a
//! decision's clock read is one load.

use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{duration_to_nanos, Clock, DefaultClock};
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::Nanos;

/// A clock that reads a cached time, refreshed every `resolution` by a background thread: the
/// cheapest clock read there is (one load of a word that changes once per tick), for limiters
/// where a decision's time may be a tick old. Like governor's `QuantaUpkeepClock`.
///
/// **What it trades.** Every decision within one tick sees the same time. A limiter refills
/// in steps of one tick instead of continuously: at a rate of `r` per second and a 1 ms
/// resolution, the permits of a whole millisecond (`r / 1000`) become available at once, at
/// the tick, so traffic is admitted in bursts at tick scale. No decision admits more than the
/// quota allows over any interval measured on this clock; the clock itself lags real time by
/// up to one tick (more while the upkeep thread waits for a core), so a wait it suggests can
/// be up to a tick longer than on [`DefaultClock`]. Choose a resolution well below the
/// limit's interval (`1 / rate`) if smoothness matters, and keep [`DefaultClock`] if it does.
///
/// **Exact rules.** Readings come from one writer that never stores a smaller value, so a
/// reading is never earlier than one that happened-before it. A reading that raced a tick is
/// one tick older than a concurrent one, and the rules that must be exact (eviction of a cold
/// key, the key cap's reclaim, the give-back of a cancel) allow for that:
/// [`max_skew`](Clock::max_skew) is the resolution.
///
/// **The upkeep thread** (named `tollgate-clock`) is started by [`new`](CoarseClock::new) /
/// [`with_resolution`](CoarseClock::with_resolution) and shared by the clock's clones (and the
/// limiters they are given to); it stops when the last of them is dropped. It wakes once per
/// tick, reads [`DefaultClock`] and stores the reading.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, CoarseClock, Quota, RateLimiter};
///
/// let clock = CoarseClock::with_resolution(Duration::from_millis(1)).unwrap();
/// assert_eq!(clock.max_skew(), 1_000_000);
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// let limiter = RateLimiter::builder(Quota::per_second(100).unwrap())
///     .clock(clock)
///     .build();
/// assert!(limiter.try_acquire());
/// ```
#[derive(Clone)]
pub struct CoarseClock {
    /// What decisions read: first, so a read is one load through one pointer.
    reading: Arc<Reading>,
    /// Dropped with the last handle: stops and joins the thread.
    _upkeep: Arc<Upkeep>,
}

struct Reading {
    now: AtomicU64,
    resolution: Nanos,
    stop: AtomicBool,
}

struct Upkeep {
    reading: Arc<Reading>,
    thread: Option<JoinHandle<()>>,
}

/// Why a [`CoarseClock`] could not be made.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{CoarseClock, CoarseClockError};
/// assert!(matches!(
///     CoarseClock::with_resolution(Duration::ZERO),
///     Err(CoarseClockError::ZeroResolution)
/// ));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CoarseClockError {
    /// The resolution was zero (a tick of no time would spin a core).
    ZeroResolution,
    /// The OS refused the upkeep thread.
    Spawn(std::io::Error),
}

impl fmt::Display for CoarseClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoarseClockError::ZeroResolution => f.write_str("coarse clock resolution is zero"),
            CoarseClockError::Spawn(e) => write!(f, "cannot start the coarse clock's thread: {e}"),
        }
    }
}

impl std::error::Error for CoarseClockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CoarseClockError::ZeroResolution => None,
            CoarseClockError::Spawn(e) => Some(e),
        }
    }
}

/// The upkeep thread's name (visible in debuggers and `/proc`).
pub(crate) const THREAD_NAME: &str = "tollgate-clock";

impl CoarseClock {
    /// The default resolution of [`new`](CoarseClock::new): 1 ms, as governor's
    /// `QuantaUpkeepClock` is commonly set up.
    pub const DEFAULT_RESOLUTION: Duration = Duration::from_millis(1);

    /// A coarse clock with a 1 ms resolution ([`DEFAULT_RESOLUTION`](Self::DEFAULT_RESOLUTION)).
    ///
    /// # Errors
    /// [`CoarseClockError::Spawn`] if the OS refuses the upkeep thread.
    ///
    /// ```
    /// let clock = tollgate::CoarseClock::new().unwrap();
    /// assert_eq!(tollgate::Clock::max_skew(&clock), 1_000_000);
    /// ```
    pub fn new() -> Result<CoarseClock, CoarseClockError> {
        CoarseClock::with_resolution(Self::DEFAULT_RESOLUTION)
    }

    /// A coarse clock refreshed every `resolution` (whole nanoseconds, saturating), reading
    /// [`DefaultClock`]; its origin is now.
    ///
    /// # Errors
    /// [`CoarseClockError::ZeroResolution`] for a zero `resolution`;
    /// [`CoarseClockError::Spawn`] if the OS refuses the upkeep thread.
    ///
    /// ```
    /// use std::time::Duration;
    /// let clock = tollgate::CoarseClock::with_resolution(Duration::from_micros(100)).unwrap();
    /// assert_eq!(clock.resolution(), Duration::from_micros(100));
    /// ```
    pub fn with_resolution(resolution: Duration) -> Result<CoarseClock, CoarseClockError> {
        CoarseClock::start(DefaultClock::new(), resolution).map(|(clock, _)| clock)
    }

    /// The time between two refreshes.
    ///
    /// ```
    /// let clock = tollgate::CoarseClock::new().unwrap();
    /// assert_eq!(clock.resolution(), tollgate::CoarseClock::DEFAULT_RESOLUTION);
    /// ```
    pub fn resolution(&self) -> Duration {
        Duration::from_nanos(self.reading.resolution)
    }

    /// A clock upkept from `source`; also the thread's handle, for tests.
    pub(crate) fn start<C: Clock>(
        source: C,
        resolution: Duration,
    ) -> Result<(CoarseClock, std::thread::Thread), CoarseClockError> {
        let resolution_ns = duration_to_nanos(resolution);
        if resolution_ns == 0 {
            return Err(CoarseClockError::ZeroResolution);
        }
        let reading = Arc::new(Reading {
            now: AtomicU64::new(source.now()),
            resolution: resolution_ns,
            stop: AtomicBool::new(false),
        });
        let shared = reading.clone();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || upkeep(&source, &shared, resolution))
            .map_err(CoarseClockError::Spawn)?;
        let handle = thread.thread().clone();
        let upkeep = Upkeep {
            reading: reading.clone(),
            thread: Some(thread),
        };
        Ok((
            CoarseClock {
                reading,
                _upkeep: Arc::new(upkeep),
            },
            handle,
        ))
    }
}

/// The upkeep thread: one store per tick until told to stop.
fn upkeep<C: Clock>(source: &C, reading: &Reading, resolution: Duration) {
    // The only writer: it never stores less than it stored before, even if the source steps
    // back (a TSC read on another core after a migration, up to its own `max_skew`).
    let mut last = reading.now.load(Ordering::Relaxed);
    while !reading.stop.load(Ordering::Acquire) {
        // Early wake-ups (an unpark, or spurious) only refresh early.
        std::thread::park_timeout(resolution);
        last = last.max(source.now());
        reading.now.store(last, Ordering::Release);
    }
}

impl Drop for Upkeep {
    fn drop(&mut self) {
        self.reading.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // Wake it from its tick's sleep so it sees the flag now.
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Clock for CoarseClock {
    /// The last reading the upkeep thread stored.
    #[inline]
    fn now(&self) -> Nanos {
        // Relaxed is enough for "never earlier than a reading that happened-before it": loads
        // of one atomic are coherent.
        self.reading.now.load(Ordering::Relaxed)
    }

    /// The resolution, in ns.
    #[inline]
    fn max_skew(&self) -> Nanos {
        self.reading.resolution
    }
}

impl fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoarseClock")
            .field("resolution", &self.resolution())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ManualClock;

    /// Waits (without a time bound: a broken clock hangs the test, which fails it) until the
    /// upkeep thread has published `want`.
    fn wait_for(clock: &CoarseClock, want: Nanos) {
        while clock.now() < want {
            std::thread::yield_now();
        }
    }

    #[test]
    fn reads_what_the_upkeep_thread_stored_and_never_goes_back() {
        let source = ManualClock::new();
        source.advance_nanos(5);
        let (clock, _) = CoarseClock::start(source.clone(), Duration::from_micros(50)).unwrap();
        // The first reading is taken at creation.
        assert_eq!(clock.now(), 5);
        source.advance_nanos(1_000);
        wait_for(&clock, 1_005);
        assert_eq!(
            clock.now(),
            1_005,
            "the source stands still: so does the clock"
        );
        // A clone reads the same cache.
        assert_eq!(clock.clone().now(), 1_005);
        assert_eq!(clock.max_skew(), 50_000);
    }

    #[test]
    fn a_source_that_steps_back_is_not_followed() {
        // A source whose readings go down (as a TSC read on another core may, by its skew).
        #[derive(Clone)]
        struct Down(Arc<AtomicU64>);
        impl Clock for Down {
            fn now(&self) -> Nanos {
                // 100, then 99, 98, ... (saturating)
                let v = self.0.load(Ordering::Relaxed);
                self.0.store(v.saturating_sub(1), Ordering::Relaxed);
                v
            }
        }
        let source = Down(Arc::new(AtomicU64::new(100)));
        let (clock, thread) =
            CoarseClock::start(source.clone(), Duration::from_micros(10)).unwrap();
        assert_eq!(clock.now(), 100);
        // Wait (unbounded, see `wait_for`) until the thread has read the source ten more
        // times, each reading smaller than the last: the clock must still say 100.
        while source.0.load(Ordering::Relaxed) > 89 {
            thread.unpark();
            std::thread::yield_now();
        }
        assert_eq!(clock.now(), 100);
    }

    #[test]
    fn the_thread_stops_with_the_last_handle() {
        let (clock, thread) =
            CoarseClock::start(ManualClock::new(), Duration::from_secs(3600)).unwrap();
        let limiter = crate::RateLimiter::builder(crate::Quota::per_second(1).unwrap())
            .clock(clock.clone())
            .build();
        let reading = Arc::downgrade(&clock.reading);
        drop(clock);
        // The limiter still holds the clock: the thread is still running and storing.
        assert!(reading.upgrade().is_some());
        assert!(limiter.try_acquire());
        // Dropping the last handle joins the thread (it is woken from its hour-long tick, so
        // this returns at once; were it not stopped, the drop would hang and fail the test)
        // and frees the reading, which the thread held too.
        drop(limiter);
        assert!(reading.upgrade().is_none());
        let _ = thread;
    }

    #[test]
    fn zero_resolution_is_refused() {
        assert!(matches!(
            CoarseClock::with_resolution(Duration::ZERO),
            Err(CoarseClockError::ZeroResolution)
        ));
        // One nanosecond is a valid (if costly) resolution.
        let c = CoarseClock::with_resolution(Duration::from_nanos(1)).unwrap();
        assert_eq!(c.max_skew(), 1);
    }

    #[test]
    fn keeps_the_default_clocks_time() {
        let source = DefaultClock::new();
        let clock = CoarseClock::new().unwrap();
        let a = clock.now();
        // Wait until it has ticked at least twice past `a` (no bound: a clock that never
        // ticks hangs, which fails the test).
        wait_for(&clock, a + 1);
        let b = clock.now();
        wait_for(&clock, b + 1);
        // It lags its source, whose origin is its creation: it cannot be ahead of a default
        // clock created before it (beyond the TSC's own skew).
        assert!(clock.now() <= source.now() + crate::TSC_MAX_SKEW);
        assert!(format!("{clock:?}").starts_with("CoarseClock"));
    }
}
