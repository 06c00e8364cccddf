//! Local batches (the builder's `local_batches`, `rate/builder/batches.rs`): a hot key's
//! permits booked in the shared state by one `take` script call and granted here with no
//! round trip, refilled in the background before they run out, given back when they end, when
//! the key goes idle, or when the limiter is dropped. The rule and its bound: the guide's Redis
//! page, "A global limit at in-process speed". The per-key bookkeeping is `batch/entry.rs`.
//! The close (`Batches::drop` against `Table::finish_take`) is modelled step for step in
//! `loom-tests/tests/batch_close.rs`: change both.

mod entry;
mod heat;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use hashbrown::hash_table::Entry as Slot;
use hashbrown::HashTable;

use super::connection::client::ScriptClient;
use super::connection::error::RedisLimitError;
use super::connection::meter::Meter;
use super::hot::sharded_map::ShardedMap;
use super::hot::DenialCache;
use super::scripts::{clamp_i64, Params, Spec};
use entry::{Batch, Entry, Sizing};
use heat::Heat;

pub(crate) use entry::Granted;

/// The builder's choice: the refresh interval and the most one process holds for a key, in
/// percent of the burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchOptions {
    pub(crate) refresh: Duration,
    pub(crate) max_share_percent: u8,
}

/// The shortest and longest refresh intervals: below 1 ms a batch would hardly outlive its own
/// round trip; above an hour the bound's `R` stops meaning anything.
const MIN_REFRESH: Duration = Duration::from_millis(1);
const MAX_REFRESH: Duration = Duration::from_secs(3600);

/// How each algorithm that can batch takes and gives back (the others cannot: the guide says
/// why).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A stretch of the schedule, given back by the reservations' `cancel`.
    Gcra,
    /// A count in one window, given back in that window only (`give`).
    FixedWindow,
}

impl Kind {
    /// The kind for the algorithm tagged `name` (`RedisAlgorithm::NAME`), if it can batch.
    pub(crate) fn of(name: &str) -> Option<Kind> {
        match name {
            "gcra" => Some(Kind::Gcra),
            "fixed" => Some(Kind::FixedWindow),
            _ => None,
        }
    }
}

impl BatchOptions {
    /// The settings as integers for an algorithm tagged `name` under `p`, or why they cannot
    /// work.
    pub(crate) fn check(&self, name: &str, p: Params) -> Result<(Kind, Sizing), RedisLimitError> {
        let kind = Kind::of(name).ok_or(RedisLimitError::Unsupported(
            "local_batches() runs on Gcra and FixedWindow only (the sliding and weighted \
             windows stamp or weigh each permit by when it was taken)",
        ))?;
        if !(MIN_REFRESH..=MAX_REFRESH).contains(&self.refresh) {
            return Err(RedisLimitError::InvalidBatches(
                "the refresh interval must be between 1 ms and 1 hour",
            ));
        }
        if !(1..=100).contains(&self.max_share_percent) {
            return Err(RedisLimitError::InvalidBatches(
                "max_share_percent must be between 1 and 100",
            ));
        }
        // limit <= 2^51: the product fits.
        let cap = p.limit * u64::from(self.max_share_percent) / 100;
        if cap < 2 {
            return Err(RedisLimitError::InvalidBatches(
                "max_share_percent of the burst is below 2 permits: no batch could be taken",
            ));
        }
        let refresh_ns = u64::try_from(self.refresh.as_nanos()).unwrap_or(u64::MAX);
        Ok((kind, Sizing { refresh_ns, cap }))
    }
}

/// What the batches did (`RedisStats` and the metrics; the local grants are counted in the
/// shards, [`Batches::local_grants`]).
#[derive(Default)]
pub(crate) struct BatchCounts {
    pub(crate) taken: AtomicU64,
    pub(crate) returned: AtomicU64,
    pub(crate) size: AtomicU64,
}

/// The limiter's batches: dropping it (with the last handle on the limiter) gives back what
/// is held, from a task on the current Tokio runtime.
pub(crate) struct Batches {
    table: Arc<Table>,
}

/// One shard of the table: the tracked keys' state keys and entries, and the local grants
/// made under the shard's lock, counted here rather than in an atomic every grant would write.
#[derive(Default)]
struct Keys {
    entries: HashTable<(String, Entry)>,
    local_grants: u64,
}

struct Table {
    /// Which keys asked for enough lately to be tracked in `map`.
    heat: Heat,
    /// Found by the user's key (hashed once per call, for the heat sketch and the shard too)
    /// rather than the state key, which a local grant then never makes: every state key held
    /// here is under the limiter's own quota, `own_prefix` followed by the user's key.
    map: ShardedMap<Keys>,
    /// The state key of the empty key under the limiter's own quota (the user's key comes
    /// last in a state key), set by the first grant.
    own_prefix: OnceLock<String>,
    /// The zero of the entries' nanosecond clock.
    epoch: Instant,
    sizing: Sizing,
    kind: Kind,
    spec: &'static Spec,
    params: Params,
    client: Arc<ScriptClient>,
    /// The limiter's denial cache, if on: a batch given back forgets the key's cached denial.
    denials: Option<Arc<DenialCache>>,
    counts: BatchCounts,
    sweeping: AtomicBool,
    /// Set when the limiter is dropped: a take answered later gives its batch straight back.
    closed: AtomicBool,
}

/// A batch to give back, and whose.
struct Return {
    state: String,
    batch: Batch,
}

impl Batches {
    pub(crate) fn new(
        client: Arc<ScriptClient>,
        spec: &'static Spec,
        params: Params,
        kind: Kind,
        sizing: Sizing,
        denials: Option<Arc<DenialCache>>,
    ) -> Batches {
        Batches {
            table: Arc::new(Table {
                heat: Heat::new(),
                map: ShardedMap::new(16, |_| Keys::default()),
                own_prefix: OnceLock::new(),
                epoch: Instant::now(),
                sizing,
                kind,
                spec,
                params,
                client,
                denials,
                counts: BatchCounts::default(),
                sweeping: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn counts(&self) -> &BatchCounts {
        &self.table.counts
    }

    /// Calls granted from the batches so far.
    pub(crate) fn local_grants(&self) -> u64 {
        let t = &self.table;
        (0..t.map.shards())
            .map(|i| t.map.lock_index(i).local_grants)
            .sum()
    }

    /// A call for `n` permits on `key` under the limiter's own quota, whose state key is
    /// `prefix()` (the state key of the empty key: called once per limiter) followed by `key`:
    /// granted from this process's batches if they hold `n`, else `None` (ask Redis). Either
    /// way, a take is started in the background if one is due, and ended batches are given
    /// back. The state key is made only for a key's new entry and for those calls.
    pub(crate) fn grant(
        &self,
        key: &str,
        n: u64,
        prefix: impl FnOnce() -> String,
    ) -> Option<Granted> {
        let t = &self.table;
        let prefix = t.own_prefix.get_or_init(prefix);
        let now = t.now();
        let h = t.map.hash(key);
        // A key that asked for too little lately has no entry and gets none: one atomic
        // update, the whole cost of batches for a key seen once.
        t.heat.touch(h, n, now / t.sizing.refresh_ns)?;
        let mut ended = Vec::new();
        let (granted, want, state) = {
            let mut shard = t.map.lock_hashed(h);
            let keys = &mut *shard;
            let ((state, e), new) = match t.slot(keys, h, key) {
                Slot::Occupied(o) => (o.into_mut(), false),
                Slot::Vacant(v) => {
                    // The entry counts the key's own demand from here: the sketch's is an upper
                    // bound, inflated by the keys sharing its counters, and taken as the key's it
                    // gave keys seen once a batch (a take and a give-back) under high rates of
                    // distinct keys.
                    let e = Entry::new(now);
                    (v.insert((format!("{prefix}{key}"), e)).into_mut(), true)
                }
            };
            let granted = e.grant(n, now, t.sizing, &mut ended);
            let want = e.want(now, t.sizing);
            // The state key for the calls below only.
            let state = (new || !ended.is_empty() || want.is_some()).then(|| state.clone());
            keys.local_grants += u64::from(granted.is_some());
            (granted, want, state)
        };
        if granted.is_some() {
            t.client.meter.local_grant();
        }
        if let Some(state) = state {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                // From the first warm key on: entries are forgotten only by the sweep.
                self.start_sweeper(&rt);
                t.give_back(&rt, &state, ended);
                if let Some(k) = want {
                    let table = t.clone();
                    rt.spawn(async move { table.take(state, k).await });
                }
            } else if want.is_some() {
                // No runtime to take in: the take is not in flight after all.
                let _ = t.finish_take(&state, None);
            }
        }
        granted
    }

    /// Forgets this process's batches for `state` (its state was reset: their booking went
    /// with it).
    pub(crate) fn forget(&self, state: &str) {
        let t = &self.table;
        // A state key not under the limiter's own quota has no batches.
        let Some(key) = t.user_key(state) else { return };
        let h = t.map.hash(key);
        if let Slot::Occupied(o) = t.slot(&mut t.map.lock_hashed(h), h, key) {
            o.into_mut().1.drain(&mut Vec::new());
        }
    }

    /// Starts the sweep (once, on the first runtime a call brings): every refresh interval,
    /// ended batches are given back and idle keys forgotten, until the limiter is dropped.
    fn start_sweeper(&self, rt: &tokio::runtime::Handle) {
        let t = &self.table;
        if t.sweeping.load(Ordering::Relaxed) || t.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let weak: Weak<Table> = Arc::downgrade(t);
        let every = Duration::from_nanos(t.sizing.refresh_ns);
        rt.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(t) = weak.upgrade() else { return };
                if t.closed.load(Ordering::Relaxed) {
                    return;
                }
                t.sweep();
            }
        });
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        let t = &self.table;
        // Before the shards are drained: a take answered later sees it under its shard's
        // lock and gives its batch straight back (`finish_take`).
        t.closed.swap(true, Ordering::SeqCst);
        let mut returns = Vec::new();
        for i in 0..t.map.shards() {
            let mut shard = t.map.lock_index(i);
            for (state, e) in shard.entries.iter_mut() {
                let mut ended = Vec::new();
                e.drain(&mut ended);
                returns.extend(ended.into_iter().map(|batch| Return {
                    state: state.clone(),
                    batch,
                }));
            }
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            t.spawn_returns(&rt, returns);
        }
    }
}

impl Table {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The user's key in `state`, if it is a state key under the limiter's own quota.
    fn user_key<'a>(&self, state: &'a str) -> Option<&'a str> {
        state.strip_prefix(self.own_prefix.get()?.as_str())
    }

    /// The slot in `keys` (its shard) of the user's key `key`, hashed `h`.
    fn slot<'a>(&self, keys: &'a mut Keys, h: u64, key: &str) -> Slot<'a, (String, Entry)> {
        // Every state key held starts with the own prefix: the rest is the user's key.
        let skip = self.own_prefix.get().map_or(0, String::len);
        keys.entries.entry(
            h,
            |(s, _)| s.get(skip..) == Some(key),
            |(s, _)| self.map.hash(s.get(skip..).unwrap_or_default()),
        )
    }

    /// Takes a batch of up to `k` permits for `state` and adds it to the key's entry (or gives
    /// it straight back if the limiter was dropped meanwhile).
    async fn take(self: Arc<Self>, state: String, k: u64) {
        let p = self.params;
        let sent = self.now();
        let (args, len) = p.check_args(k.min(p.limit));
        let reply = self
            .client
            .eval(&self.spec.script, &state, "take", &args[..len])
            .await;
        let received = self.now();
        let batch = reply
            .ok()
            .and_then(|r| self.batch_of(&r, k, sent, received));
        if let Some(b) = batch.filter(|b| b.left > 0) {
            Meter::bump(&self.counts.taken);
            self.counts.size.swap(b.left, Ordering::Relaxed);
            self.client.meter.batch_taken(b.left);
        }
        if let Some(b) = self.finish_take(&state, batch) {
            let _ = self.give(&state, b).await;
        }
    }

    /// Hands a take's reply to the key's entry; returns the batch instead if the limiter was
    /// dropped meanwhile (to be given back: nothing would grant from it).
    fn finish_take(&self, state: &str, batch: Option<Batch>) -> Option<Batch> {
        let now = self.now();
        // A take's state key is an entry's, under the own quota: were it not, nothing here
        // would grant from its batch, which goes back.
        let Some(key) = self.user_key(state) else {
            return batch.filter(|b| b.left > 0);
        };
        let h = self.map.hash(key);
        let mut shard = self.map.lock_hashed(h);
        if self.closed.load(Ordering::SeqCst) {
            return batch.filter(|b| b.left > 0);
        }
        match self.slot(&mut shard, h, key) {
            Slot::Occupied(o) => o.into_mut().1.taken(batch, now, self.sizing),
            // Not swept while a take is in flight (it is not idle), but reset (`forget`) or
            // re-created: keep the batch in a fresh entry rather than lose it.
            Slot::Vacant(v) => {
                let mut e = Entry::new(now);
                e.taken(batch, now, self.sizing);
                v.insert((state.to_owned(), e));
            }
        }
        None
    }

    /// The batch a `take` reply `{now, granted, mark}` describes, or `None` for a reply no
    /// tollgate script gives (treated as a failed take: nothing is held).
    fn batch_of(&self, r: &[i64], k: u64, sent: u64, received: u64) -> Option<Batch> {
        let &[now, g, mark] = r else { return None };
        let (now, g, mark) = (
            u64::try_from(now).ok()?,
            u64::try_from(g).ok()?,
            u64::try_from(mark).ok()?,
        );
        if g > k {
            return None;
        }
        let refresh_end = sent.saturating_add(self.sizing.refresh_ns);
        let (ends, mark, reset_us) = match self.kind {
            // mark: the batch's end on the schedule, the key's TAT after it.
            Kind::Gcra => (refresh_end, mark, mark.saturating_sub(now)),
            // mark: the window's end (µs); the batch ends with it, counted from the send (the
            // server's `now` is no earlier than that).
            Kind::FixedWindow => {
                let left_us = mark.checked_sub(now)?;
                let ends = sent.saturating_add(left_us.saturating_mul(1000));
                let w = self.params.span_us.max(1);
                (ends.min(refresh_end), (mark / w).saturating_sub(1), left_us)
            }
        };
        Some(Batch {
            left: g,
            ends,
            mark,
            server_us: now,
            received,
            reset_us,
        })
    }

    /// Gives back the unused part of `b` on `state`: whether Redis took any of it back.
    async fn give(&self, state: &str, b: Batch) -> bool {
        let p = self.params;
        let reply = match self.kind {
            // The reservations' cancel of the batch's last `left` intervals, ending at its
            // mark: exact while it is the key's latest booking, a hole otherwise.
            Kind::Gcra => {
                let args = [
                    p.limit_arg(),
                    clamp_i64(p.span_us),
                    0,
                    clamp_i64(b.mark),
                    clamp_i64(b.left.saturating_mul(p.span_us)),
                ];
                self.client
                    .eval(&self.spec.script, state, "cancel", &args)
                    .await
            }
            Kind::FixedWindow => {
                let args = [
                    p.limit_arg(),
                    clamp_i64(p.span_us),
                    clamp_i64(b.left),
                    0,
                    0,
                    clamp_i64(b.mark),
                ];
                self.client
                    .eval(&self.spec.script, state, "give", &args)
                    .await
            }
        };
        let given = matches!(reply.as_deref(), Ok([_, 1]));
        if given {
            // Permits are free again on the key: a denial cached meanwhile may be wrong now.
            if let Some(d) = &self.denials {
                d.forget(state);
            }
            self.counts.returned.fetch_add(b.left, Ordering::Relaxed);
            self.client.meter.permits_returned(b.left);
        }
        given
    }

    fn give_back(self: &Arc<Self>, rt: &tokio::runtime::Handle, state: &str, ended: Vec<Batch>) {
        let returns = ended
            .into_iter()
            .map(|batch| Return {
                state: state.to_owned(),
                batch,
            })
            .collect();
        self.spawn_returns(rt, returns);
    }

    fn spawn_returns(self: &Arc<Self>, rt: &tokio::runtime::Handle, returns: Vec<Return>) {
        if returns.is_empty() {
            return;
        }
        let t = self.clone();
        rt.spawn(async move {
            for r in returns {
                let _ = t.give(&r.state, r.batch).await;
            }
        });
    }

    /// Gives back every ended batch and forgets idle keys.
    fn sweep(self: &Arc<Self>) {
        let now = self.now();
        let mut returns = Vec::new();
        for i in 0..self.map.shards() {
            let mut shard = self.map.lock_index(i);
            shard.entries.retain(|(state, e)| {
                let mut ended = Vec::new();
                e.expire(now, &mut ended);
                returns.extend(ended.into_iter().map(|batch| Return {
                    state: state.clone(),
                    batch,
                }));
                !e.idle(now, self.sizing)
            });
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            self.spawn_returns(&rt, returns);
        }
    }
}
