//! `set_quota` on a keyed limiter racing a decision that inserts a new key.
//!
//! A quota change publishes the next generation of parameters, then walks every shard under its
//! read lock and migrates each cell (`KeyedStore::for_each_cell`); a new key is inserted under
//! the shard's write lock, deciding there with parameters read afresh. The GCRA cell relies on
//! every tracked word being in the current generation once `set_quota` returns (its word keeps
//! only the generation's parity, so a word two generations behind would be misread).
//!
//! The shard is a loom `RwLock<BTreeMap>` (ordered, so every execution replays alike) and both
//! sides are transcribed around the library's own steps (`tollgate::__loom`): the decision is
//! `decide_on_shard` and, on a miss that stores, the insert (write lock, `or_default`, check
//! again); the walk is the read lock and `migrate` on each cell.
//!
//! Property, in every interleaving: after the change and the decision, every tracked cell is in
//! the generation in force; the inserted key's debt is what a check under that generation
//! stores; a second change (two generations on, same parity) then reads every cell right.

use std::collections::BTreeMap;

use loom::sync::{Arc, RwLock};
use tollgate::__loom::{check_on_shard_live, Looked, Params, TatCell};
use tollgate::{Clock, ManualClock, Quota};
use tollgate_loom_tests::{lookup, model, quota};

const NOW: u64 = 1_000;

struct Shard {
    map: RwLock<BTreeMap<u64, TatCell>>,
    params: Params,
    clock: ManualClock,
}

/// The keyed store's `decide` for a check of one permit on `key`; with `stale_insert`, the
/// insert decides with the parameters in force before it took the write lock (the bug this
/// model exists to catch).
fn acquire(shard: &Shard, key: u64, stale_insert: bool) {
    let before = shard.params.generation();
    let lookup = || lookup(&shard.map, key);
    if let Looked::MustInsert(_) =
        check_on_shard_live(lookup, || shard.clock.now(), 1, &shard.params)
    {
        let mut map = shard.map.write().unwrap();
        let cell = map.entry(key).or_default();
        if stale_insert && before == 0 {
            cell.check(shard.clock.now(), 1, old());
        } else {
            cell.check_live(shard.clock.now(), 1, &shard.params);
        }
    }
}

/// `Engine::set_quota` with `KeyedStore::for_each_cell` as the walk.
fn set_quota(shard: &Shard, q: Quota) {
    shard.params.publish(q, shard.clock.now());
    let map = shard.map.read().unwrap();
    for cell in map.values() {
        cell.migrate(&shard.params);
    }
}

fn old() -> Quota {
    quota(100, 2)
}

fn new() -> Quota {
    quota(300, 2)
}

#[test]
fn set_quota_vs_inserting_a_new_key() {
    race(false);
}

/// The model catches an insert that decides with parameters read before its write lock.
#[test]
#[should_panic(expected = "survived the walk")]
fn an_insert_with_stale_parameters_is_caught() {
    race(true);
}

fn race(stale_insert: bool) {
    model(move || {
        let clock = ManualClock::new();
        clock.set(NOW);
        let shard = Arc::new(Shard {
            map: RwLock::new(BTreeMap::new()),
            params: Params::new(old()),
            clock,
        });
        let a = {
            let shard = shard.clone();
            loom::thread::spawn(move || set_quota(&shard, new()))
        };
        let b = {
            let shard = shard.clone();
            loom::thread::spawn(move || acquire(&shard, 1, stale_insert))
        };
        a.join().unwrap();
        b.join().unwrap();

        let map = shard.map.read().unwrap();
        let cell = &map[&1];
        assert!(
            cell.in_generation_of(&shard.params),
            "a cell survived the walk in the old generation"
        );
        // One permit of debt, in the new scale: 300 ns whichever quota it was taken under.
        let peek = cell.check_live(NOW, 0, &shard.params);
        assert_eq!(peek.decision.reset_after.as_nanos(), 300, "{peek:?}");
        drop(map);
        // The next change reads every cell right (a word left two generations behind would
        // have the same parity and keep the old scale).
        set_quota(&shard, old());
        let map = shard.map.read().unwrap();
        let peek = map[&1].check_live(NOW, 0, &shard.params);
        assert_eq!(peek.decision.reset_after.as_nanos(), 100, "{peek:?}");
    });
}
