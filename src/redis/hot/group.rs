//! Grouping: checks on different keys from this process, queued while a few calls are in
//! flight, go to Redis as one script call (GCRA's `group` op) that decides each key by the
//! check's own rule; the cost Redis pays per script call (the `EVALSHA` lookup, the Lua set-up,
//! the reply) is then paid once per group instead of once per check.
//!
//! At most [`IN_FLIGHT`] calls go through the grouper at once. A check that finds fewer in
//! flight goes alone at once, as without grouping: no lock, no wait, a compare-and-swap and
//! a subtraction on one counter and a load of another (an idle or lightly loaded limiter pays
//! nothing else). A check that finds them all in flight
//! queues; when a call ends (or a check queues and finds a call ended meanwhile), up to
//! `max_keys` queued checks go as one group from a spawned task. No timer: a check waits only
//! for a call in flight to end.
//! This protocol is modelled step for step in `loom-tests/tests/group_places.rs`: change both.
//!
//! Exact: the script decides each check as a check of its own on the key would be decided
//! (a key met twice in a group, in order). A check the fast path cannot decide (a key with
//! holes, a named state under another quota, a TAT near the end of time, a value tollgate did
//! not write) is written nothing and comes back "alone": its caller sends it as a check of its
//! own, which decides it the general way (or refuses the value with its typed error) as
//! always; the others in the group are unaffected. A group call that fails gives each of its
//! checks the failure, for each caller's failure policy.
//!
//! Cancel safety: a check whose future is dropped while queued is still sent with its group
//! (its permit is taken, and the reply ignored), as a lone call already sent would be; one
//! dropped after its group replied "alone" is not sent.

// std's atomics, as everywhere in the Redis backend (see coalesce.rs).
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::oneshot;

use super::super::connection::client::ScriptClient;
use super::super::connection::failure::Failure;
use super::super::connection::meter::Meter;
use super::super::scripts::{clamp_i64, Params, Spec};

/// A check's reply, in the shape of the script's `check` reply.
type Reply = Result<Vec<i64>, Failure>;

/// The calls in flight through the grouper before checks queue: two, so that the server has
/// the next call while one reply travels back, and groups form from 16 concurrent checks on.
/// Measured on the uniform workload (benches/BENCHMARKS.md): with 4, at 16 tasks a quarter of
/// the checks still went alone (mean group 8.5); with 8, half; 1 and 2 grouped 97% and 90%
/// there, and 2 keeps a call queued at the server.
pub(crate) const IN_FLIGHT: usize = 2;

/// The most checks one group decides (a bound on the script's run time).
pub(crate) const MAX_GROUP: usize = 256;

/// The script's reply element for a check the group did not decide (`gcra.lua`'s `ALONE`).
const ALONE: i64 = -(1 << 52);

/// What a queued check hears back.
enum Answer {
    /// Decided in its group: the check reply.
    Done(Reply),
    /// Not decided (the general way, or a foreign value): to be sent as a check of its own.
    Alone,
}

struct Queued {
    state: String,
    n: u64,
    p: Params,
    spec: &'static Spec,
    tx: oneshot::Sender<Answer>,
}

pub(crate) struct Grouper {
    client: Arc<ScriptClient>,
    max_keys: usize,
    /// Calls in flight through the grouper (lone checks and groups), at most [`IN_FLIGHT`].
    in_flight: AtomicUsize,
    /// The queue's length, read without the lock by a call that ends.
    queued: AtomicUsize,
    /// Oldest first (a group takes from the front: a short queue, at most what arrived
    /// during one call).
    queue: Mutex<Vec<Queued>>,
    /// Group calls sent, and the checks they carried.
    pub(crate) calls: AtomicU64,
    pub(crate) grouped: AtomicU64,
}

/// A single check of `n` permits on `state`: through `grouper` if grouping is on, else a call of
/// its own on `client`.
pub(crate) async fn check_one(
    grouper: Option<&Arc<Grouper>>,
    client: &ScriptClient,
    spec: &'static Spec,
    state: &str,
    n: u64,
    p: Params,
) -> Reply {
    match grouper {
        Some(g) => g.check(spec, state, n, p).await,
        None => spec.check(client, state, n, p).await,
    }
}

impl Grouper {
    pub(crate) fn new(client: Arc<ScriptClient>, max_keys: NonZeroUsize) -> Grouper {
        Grouper {
            client,
            max_keys: max_keys.get().min(MAX_GROUP),
            in_flight: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            queue: Mutex::new(Vec::new()),
            calls: AtomicU64::new(0),
            grouped: AtomicU64::new(0),
        }
    }

    /// Takes a place among the calls in flight, if one is free.
    fn claim(&self) -> bool {
        let mut c = self.in_flight.load(Ordering::SeqCst);
        while c < IN_FLIGHT {
            match self
                .in_flight
                .compare_exchange_weak(c, c + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
        false
    }

    /// Gives a place back, and sends what queued meanwhile.
    ///
    /// No check is stranded: a check queues (the length raised) and then tries to claim a
    /// place; a call ends (the count lowered) and then reads the length. Both `SeqCst`, so at
    /// least one of them sees the other's write and sends the queue.
    fn release(self: &Arc<Self>) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.pump();
    }

    /// While checks are queued and a place is free: groups out, each from a spawned task.
    fn pump(self: &Arc<Self>) {
        while self.queued.load(Ordering::SeqCst) > 0 && self.claim() {
            let group = self.take();
            if group.is_empty() {
                // Another pump took them: the place back, and look again.
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(self.clone().send(group));
                }
                Err(_) => {
                    // No runtime to send from: the checks fail as a timeout would.
                    for q in group {
                        let _ = q.tx.send(Answer::Done(Err(Failure::Timeout)));
                    }
                    self.in_flight.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }

    /// Up to `max_keys` queued checks, oldest first.
    fn take(&self) -> Vec<Queued> {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let k = q.len().min(self.max_keys);
        let group: Vec<Queued> = q.drain(..k).collect();
        self.queued.store(q.len(), Ordering::SeqCst);
        group
    }

    /// Sends `group` as one call (one check alone as a plain check), answers each check, and
    /// gives the place back.
    async fn send(self: Arc<Self>, group: Vec<Queued>) {
        if let [one] = &group[..] {
            let reply = one.spec.check(&self.client, &one.state, one.n, one.p).await;
            for q in group {
                let _ = q.tx.send(Answer::Done(reply.clone()));
            }
        } else {
            Meter::bump(&self.calls);
            Meter::add(&self.grouped, group.len() as u64);
            let keys: Vec<&str> = group.iter().map(|q| q.state.as_str()).collect();
            let mut args = Vec::with_capacity(3 * group.len());
            for q in &group {
                args.extend([q.p.limit_arg(), clamp_i64(q.p.span_us), q.p.clamp(q.n)]);
            }
            let spec = group[0].spec;
            let reply = self
                .client
                .eval_keys(&spec.script, &keys, "group", &args)
                .await;
            drop(keys);
            answer(group, reply);
        }
        self.release();
    }

    /// Checks `n` permits on `state` under `p` with `spec`'s script (which has the `group`
    /// op): alone at once if a place is free, else in the next group.
    pub(crate) async fn check(
        self: &Arc<Self>,
        spec: &'static Spec,
        state: &str,
        n: u64,
        p: Params,
    ) -> Reply {
        if self.claim() {
            // Gives the place back (and sends what queued) when the call ends or is dropped.
            let _place = Place(self);
            return spec.check(&self.client, state, n, p).await;
        }
        let start = Instant::now();
        let (tx, rx) = oneshot::channel();
        {
            let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            q.push(Queued {
                state: state.to_owned(),
                n,
                p,
                spec,
                tx,
            });
            self.queued.store(q.len(), Ordering::SeqCst);
        }
        self.pump();
        // The deadline bounds the check from its start: the queue, the group, and a check
        // of its own if the group sends it back.
        let deadline = tokio::time::Instant::from_std(start + self.client.deadline());
        let decided = tokio::time::timeout_at(deadline, async {
            match rx.await {
                Ok(Answer::Done(reply)) => reply,
                Ok(Answer::Alone) => spec.check(&self.client, state, n, p).await,
                // The sender went without a reply (the runtime is shutting down).
                Err(_) => {
                    let failure = self.client.deadline_passed();
                    self.client.meter.failed(&failure);
                    Err(failure)
                }
            }
        })
        .await;
        decided.unwrap_or_else(|_| {
            let failure = self.client.deadline_passed();
            self.client.meter.failed(&failure);
            Err(failure)
        })
    }
}

/// A lone check's place among the calls in flight, given back when it ends or is dropped.
struct Place<'a>(&'a Arc<Grouper>);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Gives each check its own reply out of a group reply `{now, e_1 .. e_k}` (each expanded as
/// a check's reply is), "alone" for [`ALONE`]. A reply of another shape goes whole to every
/// check, whose parse rejects it as unexpected.
fn answer(group: Vec<Queued>, reply: Reply) {
    match reply {
        Ok(r) if r.len() == 1 + group.len() => {
            for (q, &e) in group.into_iter().zip(&r[1..]) {
                let a = if e == ALONE {
                    Answer::Alone
                } else {
                    Answer::Done(Ok((q.spec.expand)(vec![r[0], e], q.p.clamp(q.n), q.p)))
                };
                let _ = q.tx.send(a);
            }
        }
        Ok(r) => {
            for q in group {
                let _ = q.tx.send(Answer::Done(Ok(r.clone())));
            }
        }
        Err(f) => {
            for q in group {
                let _ = q.tx.send(Answer::Done(Err(Clone::clone(&f))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::RedisAlgorithm;
    use crate::{Gcra, Quota, SlidingLog};

    fn queued(state: &str, n: u64) -> (Queued, oneshot::Receiver<Answer>) {
        let (tx, rx) = oneshot::channel();
        let q = Queued {
            state: state.to_owned(),
            n,
            p: Params::interval(Quota::per_second(10).unwrap()).unwrap(),
            spec: Gcra::spec(),
            tx,
        };
        (q, rx)
    }

    fn got(mut rx: oneshot::Receiver<Answer>) -> Option<Reply> {
        match rx.try_recv().unwrap() {
            Answer::Done(r) => Some(r),
            Answer::Alone => None,
        }
    }

    /// The reply a check got: `None` for "alone"; a failure panics.
    fn ok(rx: oneshot::Receiver<Answer>) -> Option<Vec<i64>> {
        got(rx).map(|r| r.unwrap())
    }

    #[test]
    fn only_gcras_script_groups() {
        assert!(Gcra::spec().groups());
        assert!(!SlidingLog::spec().groups());
    }

    /// Each check its own element, expanded as a check's reply; "alone" for ALONE only.
    #[test]
    fn a_group_reply_is_split_per_check() {
        let (a, ra) = queued("a", 1);
        let (b, rb) = queued("b", 1);
        let (c, rc) = queued("c", 2);
        let p = a.p;
        answer(vec![a, b, c], Ok(vec![7, 100_000, ALONE, -1]));
        let expand = Gcra::spec().expand;
        assert_eq!(ok(ra), Some(expand(vec![7, 100_000], 1, p)));
        assert_eq!(ok(rb), None);
        assert_eq!(ok(rc), Some(expand(vec![7, -1], 2, p)));
    }

    /// A failure goes to every check; a reply of another shape goes whole to each (whose
    /// parse refuses it).
    #[test]
    fn a_failure_or_a_strange_reply_goes_to_every_check() {
        let (a, ra) = queued("a", 1);
        let (b, rb) = queued("b", 1);
        answer(vec![a, b], Err(Failure::Timeout));
        assert!(matches!(got(ra), Some(Err(Failure::Timeout))));
        assert!(matches!(got(rb), Some(Err(Failure::Timeout))));
        let (a, ra) = queued("a", 1);
        let (b, rb) = queued("b", 1);
        answer(vec![a, b], Ok(vec![1]));
        assert_eq!(ok(ra), Some(vec![1]));
        assert_eq!(ok(rb), Some(vec![1]));
    }
}
