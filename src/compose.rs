//! Taking permits from several limits together, or from none.

use std::time::Duration;

use crate::outcome::AcquireError;
use crate::wait::Reservation;

/// Passes a request only if *every* limit admits it now, and charges none of them otherwise:
/// "one from this user's limit and one from the global limit, or neither".
///
/// Give it one reservation per limit, made with `try_reserve_for(Duration::ZERO)` or
/// `try_reserve_n_for(n, Duration::ZERO)` (only what is available now) or plain `reserve` /
/// `reserve_n` (then any that is not ready at once counts as a refusal). If all are ready now, they are kept and `Ok(())` is returned; otherwise every
/// reservation taken is cancelled (any cancel order gives everything back) and the error says
/// how long until the most constrained limit could admit it.
///
/// # Errors
/// [`AcquireError::RateLimited`] with the longest wait among the limits that refused;
/// [`AcquireError::ExceedsBurst`] or [`AcquireError::Unrepresentable`] if a limit can never
/// admit the request (those take precedence: waiting would not help).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{all_or_none, KeyedRateLimiter, ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let global = RateLimiter::builder(Quota::per_second(100).unwrap()).clock(clock.clone()).build();
/// let per_user = KeyedRateLimiter::<u64>::builder(Quota::per_second(1).unwrap())
///     .clock(clock.clone())
///     .build();
/// let take = |user| all_or_none([
///     per_user.try_reserve_for(&user, Duration::ZERO),
///     global.try_reserve_for(Duration::ZERO),
/// ]);
/// assert!(take(7).is_ok());
/// assert!(take(7).is_err());            // user 7 is limited...
/// assert_eq!(global.peek().remaining, 99); // ...and the global limit was not charged for it
/// assert!(take(8).is_ok());
/// ```
pub fn all_or_none<'a, I>(reservations: I) -> Result<(), AcquireError>
where
    I: IntoIterator<Item = Result<Reservation<'a>, AcquireError>>,
{
    let mut kept = Vec::new();
    let mut refusal: Option<AcquireError> = None;
    for r in reservations {
        let e = match r {
            Ok(r) if r.delay().is_zero() => {
                kept.push(r);
                continue;
            }
            Ok(r) => {
                let retry_after = r.delay();
                r.cancel();
                AcquireError::RateLimited { retry_after }
            }
            Err(e) => e,
        };
        refusal = Some(match refusal {
            None => e,
            Some(prev) => worse(prev, e),
        });
    }
    match refusal {
        None => Ok(()),
        Some(e) => {
            for r in kept.into_iter().rev() {
                r.cancel();
            }
            Err(e)
        }
    }
}

/// Of two refusals, the one that says more: a permanent one, else the longer wait.
fn worse(a: AcquireError, b: AcquireError) -> AcquireError {
    let wait = |e: &AcquireError| e.retry_after().unwrap_or(Duration::MAX);
    if wait(&b) > wait(&a) {
        b
    } else {
        a
    }
}
