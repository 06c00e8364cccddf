//! The local bookkeeping of one key's batches, on a plain nanosecond clock (the table's
//! `Instant` epoch in use, a manual one in tests): what is held, what has ended, how much
//! the key asked for, and the size of the next batch. No I/O and no locks: the table
//! (`batch.rs`) holds each entry under its shard's lock and makes the calls.

/// A batch of permits this process holds for one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    /// Permits not granted yet.
    pub(crate) left: u64,
    /// When it ends (ns): `refresh` after its take was sent, and for a fixed window no later
    /// than its window's end.
    pub(crate) ends: u64,
    /// What giving it back names: GCRA's batch end on the schedule (µs), a fixed window's
    /// window index.
    pub(crate) mark: u64,
    /// The server's clock when the take ran (µs), and when its reply arrived here (ns): a
    /// local grant reports the server time advanced by the time since.
    pub(crate) server_us: u64,
    pub(crate) received: u64,
    /// The take's `reset_after` (µs): the key's debt after it (GCRA), the time to the window's
    /// end (fixed window).
    pub(crate) reset_us: u64,
}

/// The batch settings as integers: the refresh interval, and the most one process holds for
/// a key (`max_share_percent` of the burst, at least 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sizing {
    pub(crate) refresh_ns: u64,
    pub(crate) cap: u64,
}

/// A permit grant from the batches, with what its reply reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Granted {
    /// Permits this process still holds for the key after the grant.
    pub(crate) held: u64,
    /// The server time to report (µs): the take's, advanced by the time since its reply.
    pub(crate) server_us: u64,
    /// `reset_after` to report (µs): the take's, less the time since its reply.
    pub(crate) reset_us: u64,
}

/// The size of the batch to take: half the permits the key asked for in the last refresh
/// interval (`demand`), capped at `cap` less what is held already; none for a batch below 2
/// (a key seen once gets one round trip, as without batches), nor while at least half a batch
/// is still held (the low-water mark: the next batch is fetched before this one runs out, not
/// earlier). Half: a batch is used only once the one before it runs out (a quarter of the
/// interval later, at steady demand) and must be used up within the interval, so a whole
/// interval's demand would end half unused and go back, one more call per batch.
pub(crate) fn batch_size(demand: u64, held: u64, cap: u64) -> u64 {
    let size = (demand / 2).min(cap);
    if size < 2 || held >= size.div_ceil(2) {
        return 0;
    }
    size.min(cap.saturating_sub(held))
}

/// One key's batches (oldest first, granted in that order) and demand.
#[derive(Debug)]
pub(crate) struct Entry {
    batches: Vec<Batch>,
    /// A take is in flight (at most one per key).
    taking: bool,
    /// Demand: permits asked for in the current period (from `period_start`, `refresh` long)
    /// and in the previous one (0 if it saw none or is over a period ago).
    period_start: u64,
    cur: u64,
    prev: u64,
    /// No take before this (after one that got nothing).
    no_take_until: u64,
}

impl Entry {
    /// An entry that counts its key's demand from `now` on.
    pub(crate) fn new(now: u64) -> Entry {
        Entry {
            batches: Vec::new(),
            taking: false,
            period_start: now,
            cur: 0,
            prev: 0,
            no_take_until: 0,
        }
    }

    /// Moves the demand periods on to the one holding `now`.
    fn roll(&mut self, now: u64, refresh: u64) {
        let since = now.saturating_sub(self.period_start);
        if since < refresh {
            return;
        }
        // The period just ended is the previous one only if `now` is in the next.
        self.prev = if since < refresh.saturating_mul(2) {
            self.cur
        } else {
            0
        };
        self.cur = 0;
        self.period_start = now - since % refresh;
    }

    /// Permits held in batches not yet ended at `now`.
    pub(crate) fn held(&self) -> u64 {
        self.batches.iter().map(|b| b.left).sum()
    }

    /// Moves every batch ended by `now` (and every empty one) out to `ended` (those with
    /// permits left are to be given back).
    pub(crate) fn expire(&mut self, now: u64, ended: &mut Vec<Batch>) {
        self.batches.retain(|b| {
            let live = b.ends > now && b.left > 0;
            if !live && b.left > 0 {
                ended.push(*b);
            }
            live
        });
    }

    /// A call for `n` permits at `now`: counted as demand, then granted from the batches if
    /// they hold `n` (oldest first); ended batches go to `ended`. `None`: ask Redis.
    pub(crate) fn grant(
        &mut self,
        n: u64,
        now: u64,
        s: Sizing,
        ended: &mut Vec<Batch>,
    ) -> Option<Granted> {
        self.roll(now, s.refresh_ns);
        self.cur = self.cur.saturating_add(n);
        // The list changes only when a batch has ended or run out, not on the usual call.
        if self.batches.iter().any(|b| b.ends <= now || b.left == 0) {
            self.expire(now, ended);
        }
        let held = self.held();
        if n == 0 || held < n {
            return None;
        }
        // Oldest first: every batch before the `i`th is spent whole (none is empty here).
        let mut need = n;
        let mut i = 0;
        loop {
            let b = &mut self.batches[i];
            let part = need.min(b.left);
            b.left -= part;
            need -= part;
            if need == 0 {
                break;
            }
            i += 1;
        }
        let last = self.batches[i];
        self.batches.drain(..i + usize::from(last.left == 0));
        let since_us = now.saturating_sub(last.received) / 1000;
        Some(Granted {
            held: held - n,
            server_us: last.server_us.saturating_add(since_us),
            reset_us: last.reset_us.saturating_sub(since_us),
        })
    }

    /// The size of a take to start now (marking it in flight), if one is due.
    pub(crate) fn want(&mut self, now: u64, s: Sizing) -> Option<u64> {
        if self.taking || now < self.no_take_until {
            return None;
        }
        self.roll(now, s.refresh_ns);
        let size = batch_size(self.prev.max(self.cur), self.held(), s.cap);
        (size > 0).then(|| {
            self.taking = true;
            size
        })
    }

    /// A take's reply: the batch it got (`None`: it failed); one that got nothing holds off
    /// the next take for a quarter of the refresh interval.
    pub(crate) fn taken(&mut self, batch: Option<Batch>, now: u64, s: Sizing) {
        self.taking = false;
        match batch {
            Some(b) if b.left > 0 => self.batches.push(b),
            _ => self.no_take_until = now.saturating_add(s.refresh_ns / 4),
        }
    }

    /// Whether the entry can be forgotten: nothing held or in flight, no demand for a whole
    /// period.
    pub(crate) fn idle(&mut self, now: u64, s: Sizing) -> bool {
        self.roll(now, s.refresh_ns);
        self.batches.is_empty() && !self.taking && self.cur == 0 && self.prev == 0
    }

    /// Every batch, ended or not (the limiter is going away), moved out to `ended`.
    pub(crate) fn drain(&mut self, ended: &mut Vec<Batch>) {
        ended.extend(self.batches.drain(..).filter(|b| b.left > 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;
    const S: Sizing = Sizing {
        refresh_ns: 100 * MS,
        cap: 50,
    };

    fn batch(left: u64, sent: u64) -> Batch {
        Batch {
            left,
            ends: sent + S.refresh_ns,
            mark: 7,
            server_us: 1_000,
            received: sent,
            reset_us: 500,
        }
    }

    #[test]
    fn sizes_follow_demand_under_the_cap_and_the_low_water_mark() {
        assert_eq!(batch_size(1, 0, 50), 0, "a key seen once gets no batch");
        assert_eq!(batch_size(3, 0, 50), 0);
        assert_eq!(batch_size(4, 0, 50), 2);
        assert_eq!(batch_size(60, 0, 50), 30);
        assert_eq!(batch_size(1_000, 0, 50), 50, "capped");
        // At least half a batch held: not yet.
        assert_eq!(batch_size(60, 15, 50), 0);
        // Below half: the rest of the cap at most.
        assert_eq!(batch_size(60, 14, 50), 30);
        assert_eq!(batch_size(1_000, 24, 50), 26);
    }

    #[test]
    fn a_key_seen_once_takes_no_batch_and_a_hot_one_does() {
        let mut e = Entry::new(0);
        let mut ended = Vec::new();
        assert_eq!(e.grant(1, 0, S, &mut ended), None);
        assert_eq!(e.want(0, S), None, "seen once");
        for _ in 0..3 {
            assert_eq!(e.grant(1, MS, S, &mut ended), None);
        }
        assert_eq!(e.want(MS, S), Some(2));
        assert_eq!(e.want(MS, S), None, "one take in flight");
        e.taken(Some(batch(2, MS)), 2 * MS, S);
        let g = e.grant(1, 3 * MS, S, &mut ended).unwrap();
        assert_eq!(g.held, 1);
        // 2 ms after the reply: the server time 2000 µs on, reset_after down to 0.
        assert_eq!((g.server_us, g.reset_us), (3_000, 0));
        assert!(ended.is_empty());
    }

    #[test]
    fn batches_end_after_the_refresh_interval_and_go_back() {
        let mut e = Entry::new(0);
        let mut ended = Vec::new();
        e.taken(Some(batch(10, 0)), 0, S);
        assert!(e.grant(3, 99 * MS, S, &mut ended).is_some());
        // At the end instant the batch is over: its 7 go back, the call asks Redis.
        assert_eq!(e.grant(1, 100 * MS, S, &mut ended), None);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].left, 7);
        assert_eq!(e.held(), 0);
    }

    #[test]
    fn grants_span_batches_oldest_first_and_never_exceed_what_is_held() {
        let mut e = Entry::new(0);
        let mut ended = Vec::new();
        e.taken(Some(batch(2, 0)), 0, S);
        e.taken(Some(batch(3, 10 * MS)), 10 * MS, S);
        assert_eq!(e.grant(6, 20 * MS, S, &mut ended), None);
        assert_eq!(e.held(), 5, "a refused grant takes nothing");
        assert_eq!(e.grant(4, 20 * MS, S, &mut ended).unwrap().held, 1);
        // The older batch is spent; the younger one lives until 110 ms.
        assert_eq!(e.grant(1, 105 * MS, S, &mut ended).unwrap().held, 0);
        assert!(ended.is_empty());
    }

    #[test]
    fn an_empty_take_holds_off_the_next_and_idle_keys_are_forgotten() {
        let mut e = Entry::new(0);
        let mut ended = Vec::new();
        for t in 0..10 {
            let _ = e.grant(1, t * MS, S, &mut ended);
        }
        assert_eq!(e.want(10 * MS, S), Some(5));
        e.taken(Some(batch(0, 10 * MS)), 11 * MS, S);
        assert_eq!(e.want(12 * MS, S), None);
        assert_eq!(e.want(36 * MS, S), Some(5), "a quarter refresh later");
        e.taken(None, 37 * MS, S);
        assert!(!e.idle(150 * MS, S), "demand in the previous period");
        assert!(e.idle(250 * MS, S));
        let mut e = Entry::new(0);
        e.taken(Some(batch(5, 0)), 0, S);
        e.drain(&mut ended);
        assert_eq!((ended.len(), e.held()), (1, 0));
    }

    #[test]
    fn demand_is_the_last_period_s_or_the_current_one_s() {
        let mut e = Entry::new(0);
        let mut ended = Vec::new();
        for _ in 0..40 {
            let _ = e.grant(1, 50 * MS, S, &mut ended);
        }
        // In the next period the previous one's 40 still count.
        let _ = e.grant(1, 150 * MS, S, &mut ended);
        assert_eq!(e.want(150 * MS, S), Some(20));
        e.taken(None, 150 * MS, S);
        // Two periods on with no demand in between: it starts again from the current one.
        let _ = e.grant(1, 400 * MS, S, &mut ended);
        assert_eq!(e.want(400 * MS, S), None);
    }

    /// The grant as a plain model: expire, then take from the oldest batches on, then drop
    /// the spent ones.
    fn model_grant(
        batches: &mut Vec<Batch>,
        n: u64,
        now: u64,
        ended: &mut Vec<Batch>,
    ) -> Option<(u64, Batch)> {
        batches.retain(|b| {
            let live = b.ends > now && b.left > 0;
            if !live && b.left > 0 {
                ended.push(*b);
            }
            live
        });
        let held: u64 = batches.iter().map(|b| b.left).sum();
        if n == 0 || held < n {
            return None;
        }
        let (mut need, mut last) = (n, batches[0]);
        for b in batches.iter_mut() {
            let part = need.min(b.left);
            b.left -= part;
            need -= part;
            last = *b;
            if need == 0 {
                break;
            }
        }
        batches.retain(|b| b.left > 0);
        Some((batches.iter().map(|b| b.left).sum(), last))
    }

    proptest! {
        /// Any sequence of takes (some empty) and grants of any size, at any times: the grant
        /// decides, reports and leaves the batches as the model does.
        #[test]
        fn grants_match_the_model(
            ops in proptest::collection::vec((0u64..4, 0u64..12, 0u64..40), 1..60),
        ) {
            let mut e = Entry::new(0);
            let (mut model, mut now) = (Vec::new(), 0);
            for (op, n, dt) in ops {
                now += dt * MS;
                if op == 0 {
                    let b = Batch { server_us: now / 1000, ..batch(n, now) };
                    e.taken(Some(b), now, S);
                    if n > 0 {
                        model.push(b);
                    }
                    continue;
                }
                let (mut got_ended, mut want_ended) = (Vec::new(), Vec::new());
                let got = e.grant(n, now, S, &mut got_ended);
                let want = model_grant(&mut model, n, now, &mut want_ended);
                prop_assert_eq!(got_ended, want_ended);
                prop_assert_eq!(got.map(|g| g.held), want.map(|w| w.0));
                if let (Some(g), Some((_, last))) = (got, want) {
                    let since_us = (now - last.received) / 1000;
                    prop_assert_eq!(g.server_us, last.server_us + since_us);
                    prop_assert_eq!(g.reset_us, last.reset_us.saturating_sub(since_us));
                }
                prop_assert_eq!(&e.batches, &model);
            }
        }
    }
}
