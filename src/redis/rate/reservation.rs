//! GCRA reservations on Redis: reserve in one script call, sleep on the local timer until the
//! reservation is ready, and cancel if the waiter goes away first. A cancel is decided inside
//! the script by the in-process rule: the latest reservation on its key is undone exactly; an
//! earlier one's future part becomes a hole that later arrivals fill, lowest first, kept in
//! the key's one value (`scripts/gcra.lua`).
//!
//! Cancel safety: the reserve call runs in its own task, so a waiter dropped while the call is
//! in flight still learns what was reserved and cancels it; a waiter dropped while sleeping
//! cancels too. Cancels are sent from a spawned task (best effort: if Redis is unreachable the
//! permits stay taken, which can only under-admit).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::{AcquireError, Decision};

use super::super::connection::error::RedisLimitError;
use super::super::connection::failure::Failure;
use super::super::scripts::{clamp_i64, Params};
use super::super::waiting::{Detached, Undo};
use super::algorithm::RedisAlgorithm;
use super::shared::SharedLimiter;
use crate::Gcra;

/// A reservation as Redis stored it.
#[derive(Clone, Debug)]
pub(crate) struct Ticket {
    state_key: String,
    params: Params,
    /// The end of this reservation's stretch on the schedule (µs): the TAT it stored, or a
    /// position below it if it was placed in a hole.
    end: u64,
    /// The schedule's end (the key's TAT) once it was booked (µs).
    tail: u64,
    /// `n * T` (µs).
    cost: u64,
    /// The wait Redis computed, from `server_time`.
    wait: Duration,
    server_time: Duration,
    /// When the reply arrived (local timer).
    received: Instant,
}

impl Ticket {
    /// The decision as the key stands when this reservation is ready, counting it and every
    /// reservation made before it (later ones are not in the reply): the fields the script's
    /// `check` reports for a grant, `remaining = min((tau - debt) / T, b)` and
    /// `reset_after = debt`, with the debt `tail - ready` in whole microseconds (for a
    /// reservation placed in a hole, the whole schedule's: conservative).
    pub(crate) fn granted(&self) -> Decision {
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let debt = self
            .tail
            .saturating_sub(us(self.server_time).saturating_add(us(self.wait)));
        let (b, t) = (self.params.limit, self.params.span_us.max(1));
        let tau = b.saturating_mul(t);
        Decision::allowed(
            b,
            (tau.saturating_sub(debt) / t).min(b),
            Duration::from_micros(debt),
        )
    }
}

/// Runs a cancel if dropped before [`disarm`](CancelOnDrop::disarm): what makes a dropped
/// wait give its reservation back. (The in-process limiters have their own in `crate::wait`;
/// this backend uses only the core's public API.)
struct CancelOnDrop<F: FnMut()> {
    cancel: Option<F>,
}

impl<F: FnMut()> CancelOnDrop<F> {
    fn new(cancel: F) -> Self {
        CancelOnDrop {
            cancel: Some(cancel),
        }
    }

    fn disarm(mut self) {
        self.cancel = None;
    }
}

impl<F: FnMut()> Drop for CancelOnDrop<F> {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.as_mut() {
            cancel();
        }
    }
}

/// Reserves `n` permits on `state_key`. With `max_wait`, reserves only if the wait is at most
/// that. The call runs in a spawned task: if this future is dropped before the reply, the task
/// cancels whatever was reserved.
pub(crate) async fn reserve(
    shared: &Arc<SharedLimiter>,
    state_key: String,
    params: Params,
    n: u64,
    max_wait: Option<Duration>,
) -> Result<Result<Ticket, RedisLimitError>, Failure> {
    let cost = params
        .span_us
        .checked_mul(n)
        .filter(|c| *c <= super::super::scripts::MAX_SPAN_US * 2)
        .ok_or(RedisLimitError::Limited(AcquireError::Unrepresentable {
            requested: n,
        }));
    let cost = match cost {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let max_wait_us = max_wait.map_or(-1, |w| clamp_i64(w.as_micros().min(1 << 53) as u64));
    let call = {
        let (shared, key) = (shared.clone(), state_key.clone());
        async move {
            let args = [
                params.limit_arg(),
                clamp_i64(params.span_us),
                clamp_i64(n),
                max_wait_us,
            ];
            shared
                .client
                .eval(&Gcra::spec().script, &key, "reserve", &args)
                .await
        }
    };
    // Dropped before the reply: cancel whatever was reserved.
    let undo = {
        let (shared, key) = (shared.clone(), state_key.clone());
        move |reply: Vec<i64>| -> Undo {
            Box::pin(async move {
                if let Ok(ticket) = parse(&reply, key, params, n, cost) {
                    let _ = cancel(&shared, &ticket).await;
                }
            })
        }
    };
    // A task that died (runtime shutting down) is a call without a reply.
    let reply = Detached::spawn(call, undo).reply().await;
    let reply = reply.unwrap_or(Err(Failure::Timeout))?;
    Ok(parse(&reply, state_key, params, n, cost))
}

fn parse(
    reply: &[i64],
    state_key: String,
    params: Params,
    n: u64,
    cost: u64,
) -> Result<Ticket, RedisLimitError> {
    let bad = || RedisLimitError::UnexpectedReply(format!("{reply:?}"));
    // `{now, status, wait, end}`, and the TAT after it when the reservation went into a hole.
    let (now, status, wait, end, tail) = match *reply {
        [now, status, wait, end] => (now, status, wait, end, end),
        [now, status, wait, end, tail] => (now, status, wait, end, tail),
        _ => return Err(bad()),
    };
    let us = |v: i64| u64::try_from(v).map_err(|_| bad());
    let wait = Duration::from_micros(us(wait)?);
    match status {
        1 => Ok(Ticket {
            state_key,
            params,
            end: us(end)?,
            tail: us(tail)?,
            // n = 0 reserves nothing and has nothing to give back (its cost is 0).
            cost,
            wait,
            server_time: Duration::from_micros(us(now)?),
            received: Instant::now(),
        }),
        0 => Err(RedisLimitError::Limited(AcquireError::RateLimited {
            retry_after: wait,
        })),
        3 => Err(RedisLimitError::Limited(AcquireError::Unrepresentable {
            requested: n,
        })),
        _ => Err(bad()),
    }
}

/// Gives the reservation's future back (decided by the script on the server's clock, by the
/// in-process rule): the latest is undone, an earlier one becomes a hole. Returns whether
/// anything was given back.
pub(crate) async fn cancel(shared: &SharedLimiter, t: &Ticket) -> Result<bool, Failure> {
    let args = [
        t.params.limit_arg(),
        clamp_i64(t.params.span_us),
        0,
        clamp_i64(t.end),
        clamp_i64(t.cost),
    ];
    let reply = shared
        .client
        .eval(&Gcra::spec().script, &t.state_key, "cancel", &args)
        .await?;
    let refunded = reply.get(1) == Some(&1);
    if refunded {
        // A denial cached before the refund, here or in another process, may no longer hold.
        shared.hot.forget(&t.state_key);
        shared.publish_loosened(&t.state_key).await;
    }
    Ok(refunded)
}

/// Sleeps until the reservation is ready, cancelling it if dropped first. Returns the wait.
pub(crate) async fn sleep_until_ready(shared: &Arc<SharedLimiter>, ticket: Ticket) -> Duration {
    let ready = ticket.received + ticket.wait;
    if ticket.wait.is_zero() || ticket.cost == 0 {
        return ticket.wait;
    }
    let wait = ticket.wait;
    let shared = shared.clone();
    let guard = CancelOnDrop::new(move || spawn_cancel(&shared, &ticket));
    tokio::time::sleep_until(ready).await;
    guard.disarm();
    wait
}

fn spawn_cancel(shared: &Arc<SharedLimiter>, ticket: &Ticket) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let (shared, ticket) = (shared.clone(), ticket.clone());
        rt.spawn(async move {
            let _ = cancel(&shared, &ticket).await;
        });
    }
}

/// Permits reserved on Redis ahead of time: wait for them with [`wait`](Self::wait), or give
/// them back with [`cancel`](Self::cancel). Dropping it keeps the permits taken (as
/// [`Reservation`](crate::Reservation) does).
///
/// ```
/// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
/// let r = limiter.reserve_n("export:{user42}", 5).await?;
/// if r.delay() > std::time::Duration::from_secs(2) {
///     r.cancel().await?; // too long: give the slot back
/// } else {
///     r.wait().await;
/// }
/// # Ok(()) }
/// ```
#[must_use = "a reservation holds permits: wait for it, or cancel it to give them back"]
pub struct RedisReservation {
    shared: Arc<SharedLimiter>,
    ticket: Ticket,
}

impl RedisReservation {
    pub(crate) fn new(shared: Arc<SharedLimiter>, ticket: Ticket) -> Self {
        RedisReservation { shared, ticket }
    }

    /// The wait Redis gave this reservation when it was made (zero if ready at once).
    ///
    /// ```no_run
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let r = limiter.reserve_n("export:{user42}", 5).await?;
    /// let promised = r.delay();
    /// assert_eq!(r.wait().await, promised); // `wait` sleeps exactly that long
    /// # Ok(()) }
    /// ```
    pub fn delay(&self) -> Duration {
        self.ticket.wait
    }

    /// The server's clock when the reservation was made (since the Unix epoch, whole µs).
    ///
    /// Decisions are made on the server's clock; this one's distance from the local clock
    /// says how far the two disagree:
    ///
    /// ```no_run
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// use std::time::{Duration, SystemTime, UNIX_EPOCH};
    ///
    /// let r = limiter.reserve("user:42").await?;
    /// let local = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    /// if local.abs_diff(r.server_time()) > Duration::from_secs(1) {
    ///     eprintln!("the Redis server's clock is off from this machine's by over a second");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn server_time(&self) -> Duration {
        self.ticket.server_time
    }

    /// The decision as the key stands when this reservation is ready, counting it and every
    /// reservation made on the key before it (later ones are not in Redis's reply): what the
    /// script's `check` would report for this grant at its ready time, without a second round
    /// trip (the HTTP layer's headers for a refundable request). `remaining` and
    /// `reset_after` are in whole microseconds, like the scripts' state.
    ///
    /// ```no_run
    /// # async fn f(limiter: tollgate::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let r = limiter.reserve("user:42").await?;
    /// let d = r.granted();
    /// assert!(d.allowed && d.remaining < d.limit);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn granted(&self) -> Decision {
        self.ticket.granted()
    }

    /// Sleeps on tokio's timer until the reservation is ready; returns the wait it was given.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes cancels the reservation (as
    /// [`cancel`](Self::cancel)).
    ///
    /// ```no_run
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// use std::time::Duration;
    ///
    /// let r = limiter.reserve("crawler:{example.com}").await?;
    /// match tokio::time::timeout(Duration::from_secs(1), r.wait()).await {
    ///     Ok(waited) => assert!(waited <= Duration::from_secs(1)), // the permit is ours: fetch
    ///     Err(_) => {} // gave up: the dropped wait cancelled the reservation
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait(self) -> Duration {
        sleep_until_ready(&self.shared, self.ticket).await
    }

    /// Gives the permits back (call it only if you did not and will not use them), by the
    /// in-process rule (the guide's Semantics page): if this is still the latest reservation
    /// on its key, it is undone exactly, even if it was ready at once; an earlier one's part
    /// not yet in the past becomes a *hole* that later checks and reservations on the key, in
    /// every process, fill lowest first. One whose stretch is all in the past (judged on the
    /// server's clock) gives nothing back, nor does one that would make a key's 65th hole
    /// (Redis keeps at most 64 per key). Returns whether anything was given back; if so, the
    /// key's cached denials here and in other processes are forgotten (published as
    /// [`reward`](crate::redis::RedisRateLimiter::reward)'s are).
    ///
    /// # Errors
    /// [`RedisLimitError::Timeout`] or [`RedisLimitError::Unavailable`] if Redis did not answer (the
    /// permits then stay taken).
    ///
    /// ```no_run
    /// # async fn demo(limiter: tollgate::redis::RedisRateLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let r = limiter.reserve_n("report:{user42}", 10).await?;
    /// // The report is not built after all. Still the latest reservation on its key (no
    /// // other process reserved on it since), it is undone exactly: all 10 permits come back.
    /// assert!(r.cancel().await?);
    /// # Ok(()) }
    /// ```
    pub async fn cancel(self) -> Result<bool, RedisLimitError> {
        cancel(&self.shared, &self.ticket)
            .await
            .map_err(|f| self.shared.client.error(f))
    }
}

/// Composes with in-process limits in [`all_or_none_async`](crate::all_or_none_async): the
/// cancel is one script call, awaited; if Redis does not answer, the permits stay taken
/// (which can only under-admit).
impl crate::Hold for RedisReservation {
    fn delay(&self) -> Duration {
        self.ticket.wait
    }

    fn cancel(self: Box<Self>) -> crate::CancelFuture {
        Box::pin(async move {
            let _ = cancel(&self.shared, &self.ticket).await;
        })
    }
}

impl fmt::Debug for RedisReservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisReservation")
            .field("key", &self.ticket.state_key)
            .field("delay", &self.ticket.wait)
            .finish()
    }
}
