//! A real 3-primary Redis Cluster started by the test: every algorithm, decisions spread over
//! hundreds of keys and all three nodes, hash tags deciding the slot, and scripts reloaded
//! per node after `SCRIPT FLUSH`.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::Duration;

use redis_support::RedisCluster;
use tollgate::redis::{RedisAlgorithm, RedisRateLimiter};
use tollgate::{FixedWindow, Gcra, Quota, SlidingLog, SlidingWindow, WeightedWindow};

const KEYS: usize = 150;

fn key(i: usize) -> String {
    if i % 2 == 0 {
        format!("{{user{i}}}:login")
    } else {
        format!("plain-{i}")
    }
}

async fn connect<A: RedisAlgorithm>(cluster: &RedisCluster, alg: A) -> RedisRateLimiter<A> {
    // Per hour: the fixed window (aligned to the epoch) must not roll over mid-test.
    RedisRateLimiter::builder(Quota::per_hour(3).unwrap())
        .algorithm(alg)
        .unwrap()
        .deadline(Duration::from_secs(2))
        .connect_cluster(cluster.urls())
        .await
        .unwrap()
}

/// Every key admits exactly its limit of 3, then refuses, with concurrent tasks over all keys.
async fn exercise<A: RedisAlgorithm>(limiter: &RedisRateLimiter<A>) {
    let mut tasks = Vec::new();
    for i in 0..KEYS {
        let l = limiter.clone();
        tasks.push(tokio::spawn(async move {
            let mut allowed = Vec::new();
            for _ in 0..4 {
                allowed.push(l.check(&key(i)).await.unwrap().allowed);
            }
            allowed
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), [true, true, true, false], "{}", A::NAME);
    }
}

fn dbsizes(cluster: &RedisCluster) -> Vec<u64> {
    cluster
        .nodes
        .iter()
        .map(|n| redis::cmd("DBSIZE").query(&mut n.conn()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_decides_on_a_three_primary_cluster() {
    let cluster = RedisCluster::start(3);
    exercise(&connect(&cluster, Gcra).await).await;
    exercise(&connect(&cluster, FixedWindow::epoch_aligned()).await).await;
    exercise(&connect(&cluster, WeightedWindow).await).await;
    exercise(&connect(&cluster, SlidingWindow::new(6)).await).await;
    let log = connect(&cluster, SlidingLog).await;
    exercise(&log).await;

    // One key per decision and per algorithm, spread over every primary.
    let sizes = dbsizes(&cluster);
    assert_eq!(sizes.iter().sum::<u64>(), 5 * KEYS as u64, "{sizes:?}");
    assert!(sizes.iter().all(|&s| s > 0), "{sizes:?}");

    // The hash tag decides the slot: one user's keys live together, whatever the algorithm.
    let slot = |k: String| -> u64 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(k)
            .query(&mut cluster.nodes[0].conn())
            .unwrap()
    };
    let a = slot(log.state_key("{user42}:login"));
    assert_eq!(a, slot(log.state_key("{user42}:upload")));
    assert_eq!(a, slot("user42".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_reload_per_node_and_reservations_work_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    let gcra = connect(&cluster, Gcra).await;
    for i in 0..30 {
        gcra.check(&key(i)).await.unwrap();
    }
    let loads = gcra.stats().script_loads;
    assert_eq!(loads, 3, "one load per primary");
    for n in &cluster.nodes {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut n.conn())
            .unwrap();
    }
    for i in 0..30 {
        gcra.check(&key(i)).await.unwrap();
    }
    assert_eq!(gcra.stats().script_loads, loads + 3);
    assert_eq!(gcra.stats().errors, 0);

    // Reservations and throttle route by their one key like every other call.
    let r = gcra.reserve_n("{batch}:export", 5).await.unwrap();
    assert_eq!(r.delay(), Duration::from_secs(2400)); // 2 beyond the burst of 3, 20 min apart
    assert!(r.cancel().await.unwrap());
    let reply = gcra.throttle("{user7}:api", 15, 30, 60, 1).await.unwrap();
    assert_eq!(reply.to_array(), [0, 16, 15, -1, 2]);
}
