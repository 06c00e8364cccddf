//! The reloadable HTTP layer's generation (`src/http/config/reload.rs`): `Current::replace`
//! writes the new layer under the write lock and bumps the generation before releasing it;
//! `Reloading::poll_ready` loads the generation and, when it differs from the one its service
//! was made from, takes the layer and the generation together under the read lock
//! (`Current::get`) and remakes its service from them.
//!
//! The HTTP layer cannot be built under loom (it needs tokio), so this is a model of the
//! protocol, step for step as `Current::{get, replace}` and `Reloading::poll_ready` write it,
//! with the same orderings. A layer is the number of the reload that built it (0 the first),
//! so the layer of generation `g` is `g`. Two reloads in a row on one thread (the `Reloader`'s
//! config mutex keeps reloads from interleaving), a service polled twice on another, and once
//! more on the model's thread after the reloads.
//!
//! Properties, in every interleaving:
//! - a service's generation and layer always match (it never keeps an old layer under a new
//!   generation, which would stop it from ever picking up that reload);
//! - a poll that starts after a reload has returned serves that reload's layer or a later one.
//!
//! Fails with the generation bumped before the new layer is written
//! (`a_generation_published_before_its_layer_is_caught`).

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Arc, RwLock};
use loom::thread;
use tollgate_loom_tests::model;

/// `Current`: the generation and the layer in force.
struct Current {
    generation: AtomicU64,
    layer: RwLock<u64>,
    /// Break the protocol: bump the generation before taking the write lock.
    early_bump: bool,
}

impl Current {
    fn get(&self) -> (u64, u64) {
        let layer = self.layer.read().unwrap();
        (self.generation.load(Ordering::Acquire), *layer)
    }

    fn replace(&self, new: u64) {
        if self.early_bump {
            self.generation.fetch_add(1, Ordering::Release);
        }
        let mut layer = self.layer.write().unwrap();
        *layer = new;
        if !self.early_bump {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

/// `Reloading`: the generation its service was made from, and the service's layer.
struct Service {
    seen: u64,
    layer: u64,
}

impl Service {
    fn poll_ready(&mut self, current: &Current) {
        if current.generation.load(Ordering::Acquire) != self.seen {
            let (seen, layer) = current.get();
            self.layer = layer;
            self.seen = seen;
        }
    }
}

/// Polls `s`, checking it against the reloads completed before the poll started.
fn poll_checked(s: &mut Service, current: &Current, reloaded: &AtomicU64) {
    let floor = reloaded.load(Ordering::SeqCst);
    s.poll_ready(current);
    assert_eq!(
        s.layer, s.seen,
        "a service kept an old layer under a new generation"
    );
    assert!(
        s.layer >= floor,
        "a poll after reload {floor} served layer {}",
        s.layer
    );
}

fn race(early_bump: bool) {
    model(move || {
        let current = Arc::new(Current {
            generation: AtomicU64::new(0),
            layer: RwLock::new(0),
            early_bump,
        });
        // The reloads returned so far.
        let reloaded = Arc::new(AtomicU64::new(0));
        let reloader = {
            let (current, reloaded) = (current.clone(), reloaded.clone());
            thread::spawn(move || {
                for n in 1..=2 {
                    current.replace(n);
                    reloaded.store(n, Ordering::SeqCst);
                }
            })
        };
        let polled = {
            let (current, reloaded) = (current.clone(), reloaded.clone());
            thread::spawn(move || {
                let mut s = Service { seen: 0, layer: 0 };
                for _ in 0..2 {
                    poll_checked(&mut s, &current, &reloaded);
                }
                s
            })
        };
        reloader.join().unwrap();
        let mut s = polled.join().unwrap();
        poll_checked(&mut s, &current, &reloaded);
        assert_eq!(s.layer, 2);
    });
}

#[test]
fn reloads_race_a_polled_service() {
    race(false);
}

#[test]
#[should_panic(expected = "kept an old layer")]
fn a_generation_published_before_its_layer_is_caught() {
    race(true);
}
