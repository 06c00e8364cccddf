//! What both limiters' waiting acquires share: the retry loop (what a try is and how long to
//! sleep after a refusal are each limiter's own), and the script call that outlives its waiter
//! (what makes a dropped wait give back what the call took).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::task::{JoinError, JoinHandle};

use crate::AcquireError;

use super::connection::error::RedisLimitError;
use super::connection::failure::Failure;

/// Tries until `attempt` ends the wait (`Ok(Ok(done))` or an error). After a refusal,
/// `Ok(Err(hint))`, `pause(hint)` is the sleep before the next try, or `None` to give up:
/// [`AcquireError::RateLimited`] with that hint. Nothing is held between tries, so the loop
/// is as cancel-safe as `attempt`.
pub(super) async fn retry<T, F>(
    mut attempt: impl FnMut() -> F,
    mut pause: impl FnMut(Duration) -> Option<Duration>,
) -> Result<T, RedisLimitError>
where
    F: Future<Output = Result<Result<T, Duration>, RedisLimitError>>,
{
    loop {
        let hint = match attempt().await? {
            Ok(done) => return Ok(done),
            Err(hint) => hint,
        };
        let Some(sleep) = pause(hint) else {
            return Err(AcquireError::RateLimited { retry_after: hint }.into());
        };
        tokio::time::sleep(sleep).await;
    }
}

type Reply = Result<Vec<i64>, Failure>;

/// Gives back what a call took, from its reply.
pub(super) type Undo = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A script call that takes something (a reservation, a lease), running in its own task.
/// Dropped before its reply was taken (the waiter went away), it leaves a task that waits for
/// the reply and runs `undo` on it; with no runtime left for that task, what was taken ends at
/// its expiry.
pub(super) struct Detached<U: FnOnce(Vec<i64>) -> Undo + Send + 'static> {
    task: Option<JoinHandle<Reply>>,
    undo: Option<U>,
}

impl<U: FnOnce(Vec<i64>) -> Undo + Send + 'static> Detached<U> {
    pub(super) fn spawn(call: impl Future<Output = Reply> + Send + 'static, undo: U) -> Self {
        Detached {
            task: Some(tokio::spawn(call)),
            undo: Some(undo),
        }
    }

    /// The reply, or how the task ended without one (a panic, the runtime shutting down).
    pub(super) async fn reply(mut self) -> Result<Reply, JoinError> {
        let Some(task) = self.task.as_mut() else {
            return Ok(Err(Failure::Timeout));
        };
        let joined = task.await;
        self.task = None;
        joined
    }
}

impl<U: FnOnce(Vec<i64>) -> Undo + Send + 'static> Drop for Detached<U> {
    fn drop(&mut self) {
        let (Some(task), Some(undo)) = (self.task.take(), self.undo.take()) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            if let Ok(Ok(reply)) = task.await {
                undo(reply).await;
            }
        });
    }
}
