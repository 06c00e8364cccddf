//! A real 3-primary Redis Cluster started by the test: every algorithm, decisions spread over
//! hundreds of keys and all three nodes, hash tags deciding the slot, and scripts reloaded
//! per node after `SCRIPT FLUSH`.
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis_support::{RedisCluster, RedisServer};
use tollgate::redis::{FailurePolicy, RedisAlgorithm, RedisRateLimiter};
use tollgate::{
    FixedWindow, Gcra, KeyedRateLimiter, Quota, SlidingLog, SlidingWindow, WeightedWindow,
};

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
    every_key_decides(limiter, &[true, true, true, false]).await;
}

/// Concurrent tasks over all keys, each checking its key once per element of `expected`:
/// every key decides as `expected` says.
async fn every_key_decides<A: RedisAlgorithm>(limiter: &RedisRateLimiter<A>, expected: &[bool]) {
    let mut tasks = Vec::new();
    for i in 0..KEYS {
        let l = limiter.clone();
        let checks = expected.len();
        tasks.push(tokio::spawn(async move {
            let mut allowed = Vec::new();
            for _ in 0..checks {
                allowed.push(l.check(&key(i)).await.unwrap().allowed);
            }
            allowed
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), expected, "{}", A::NAME);
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

/// A limiter running `alg` under `quota` with the state name "login".
async fn connect_named<A: RedisAlgorithm>(
    cluster: &RedisCluster,
    alg: A,
    quota: Quota,
) -> RedisRateLimiter<A> {
    RedisRateLimiter::builder(quota)
        .algorithm(alg)
        .unwrap()
        .state_name("login")
        .deadline(Duration::from_secs(2))
        .connect_cluster(cluster.urls())
        .await
        .unwrap()
}

/// Named states on a cluster (GCRA and the sliding window): keys over every primary, hash
/// tags still deciding the slot, and a limiter under another quota converting each key's
/// state: the three permits taken under 3 per hour still counted under 5 per 2 hours, which
/// admits only the 2 more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_states_convert_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    async fn deploy<A: RedisAlgorithm>(cluster: &RedisCluster, alg: A) {
        let old = connect_named(cluster, alg, Quota::per_hour(3).unwrap()).await;
        exercise(&old).await;
        let longer = Quota::new(5, Duration::from_secs(7200)).unwrap();
        let new = connect_named(cluster, alg, longer).await;
        every_key_decides(&new, &[true, true, false]).await;
        // The old quota, still live in the deploy, admits nothing either.
        assert!(!old.check(&key(0)).await.unwrap().allowed, "{}", A::NAME);
        assert_eq!(
            new.state_key("{user42}:login"),
            format!("tollgate:{}:login:{{user42}}:login", A::NAME)
        );
    }
    deploy(&cluster, Gcra).await;
    deploy(&cluster, SlidingWindow::new(6)).await;
    let sizes = dbsizes(&cluster);
    assert_eq!(sizes.iter().sum::<u64>(), 2 * KEYS as u64, "{sizes:?}");
    assert!(sizes.iter().all(|&s| s > 0), "{sizes:?}");
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

/// `CLUSTER MYID` of a node.
fn node_id(n: &RedisServer) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut n.conn())
        .unwrap()
}

/// The index of the node serving `slot`, from the cluster's own view.
fn owner(cluster: &RedisCluster, slot: u16) -> usize {
    // Each range: [first, last, [host, port, id, ...], replicas...].
    let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut cluster.nodes[0].conn())
        .unwrap();
    let port = ranges
        .into_iter()
        .find_map(|mut r| {
            let node: Vec<redis::Value> = redis::from_redis_value(r.remove(2)).unwrap();
            let lo: u16 = redis::from_redis_value(r.remove(0)).unwrap();
            let hi: u16 = redis::from_redis_value(r.remove(0)).unwrap();
            let port: u16 = redis::from_redis_value(node[1].clone()).unwrap();
            (lo..=hi).contains(&slot).then_some(port)
        })
        .unwrap();
    cluster.nodes.iter().position(|n| n.port() == port).unwrap()
}

fn cluster_cmd(n: &RedisServer, args: &[&str]) {
    let mut cmd = redis::cmd("CLUSTER");
    for a in args {
        cmd.arg(*a);
    }
    let _: () = cmd.query(&mut n.conn()).unwrap();
}

/// Moves `slot` from node `from` to node `to` step by step, as `redis-cli --cluster reshard`
/// does, pausing in each state so that the callers meet it: IMPORTING/MIGRATING (keys still at
/// the source, or gone from it: `ASK`), MIGRATE, then SETSLOT NODE everywhere (`MOVED`).
fn migrate(cluster: &RedisCluster, slot: u16, from: usize, to: usize, pause: Duration) {
    let (src, dst) = (&cluster.nodes[from], &cluster.nodes[to]);
    let slot_s = slot.to_string();
    cluster_cmd(dst, &["SETSLOT", &slot_s, "IMPORTING", &node_id(src)]);
    cluster_cmd(src, &["SETSLOT", &slot_s, "MIGRATING", &node_id(dst)]);
    std::thread::sleep(pause);
    // Keys come and go (GCRA deletes a full bucket's key): move what is there, a few times.
    for _ in 0..3 {
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut src.conn())
            .unwrap();
        if !keys.is_empty() {
            let mut m = redis::cmd("MIGRATE");
            m.arg("127.0.0.1")
                .arg(dst.port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS");
            for k in &keys {
                m.arg(k);
            }
            let _: redis::Value = m.query(&mut src.conn()).unwrap();
        }
        std::thread::sleep(pause);
    }
    let dst_id = node_id(dst);
    cluster_cmd(dst, &["SETSLOT", &slot_s, "NODE", &dst_id]);
    cluster_cmd(src, &["SETSLOT", &slot_s, "NODE", &dst_id]);
    for n in &cluster.nodes {
        cluster_cmd(n, &["SETSLOT", &slot_s, "NODE", &dst_id]);
    }
    std::thread::sleep(pause);
}

fn asking_calls(n: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut n.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_asking:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |c| c.parse().unwrap())
}

/// A hot key's slot migrated to another primary and back, step by step, while 8 tasks decide
/// on it: no error reaches a caller, the failure policy never decides (so no policy can
/// over-admit), and the grants stay within GCRA's bound over the servers' times. Before the
/// fix (redis-rs sending ASKING apart from the script), `ASK` errors reached the callers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_migrated_under_load_sees_no_error_under_any_policy() {
    let cluster = RedisCluster::start(3);
    let q = Quota::from_interval(Duration::from_millis(2))
        .unwrap()
        .with_burst(5)
        .unwrap();
    let local = Arc::new(KeyedRateLimiter::<String>::new(q));
    let policies: [FailurePolicy; 4] = [
        FailurePolicy::Error,
        FailurePolicy::Open,
        FailurePolicy::Closed {
            retry_after: Duration::from_secs(1),
        },
        FailurePolicy::Fallback(local),
    ];
    for policy in policies {
        let name = format!("{policy:?}");
        let limiter = RedisRateLimiter::builder(q)
            .prefix(format!("reshard-{}", name.len()))
            // No stall of a loaded machine reaches it: a call past it would be the policy's.
            .deadline(Duration::from_secs(2))
            .on_failure(policy)
            .connect_cluster(cluster.urls())
            .await
            .unwrap();
        let key = "{hot}";
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(limiter.state_key(key))
            .query(&mut cluster.nodes[0].conn())
            .unwrap();
        let home = owner(&cluster, slot);
        let away = (home + 1) % 3;
        let asking_before = asking_calls(&cluster.nodes[away]);

        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (l, stop) = (limiter.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let (mut allowed, mut errors, mut first, mut last) = (0u64, 0u64, u64::MAX, 0);
                for _ in 0..1_000_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    match l.decide(key).await {
                        Ok(d) => {
                            let t = d.server_time.map_or(0, |t| t.as_micros() as u64);
                            (first, last) = (first.min(t), last.max(t));
                            allowed += u64::from(d.decision.allowed);
                        }
                        Err(_) => errors += 1,
                    }
                }
                (allowed, errors, first, last)
            }));
        }
        let mover = {
            let stop = stop.clone();
            let cluster = &cluster;
            std::thread::scope(|s| {
                s.spawn(move || {
                    migrate(cluster, slot, home, away, Duration::from_millis(150));
                    migrate(cluster, slot, away, home, Duration::from_millis(150));
                    stop.store(true, Ordering::Relaxed);
                })
                .join()
            })
        };
        mover.unwrap();
        let (mut allowed, mut errors, mut first, mut last) = (0, 0, u64::MAX, 0);
        for t in tasks {
            let (a, e, f, l) = t.await.unwrap();
            (allowed, errors) = (allowed + a, errors + e);
            (first, last) = (first.min(f), last.max(l));
        }
        let s = limiter.stats();
        assert_eq!(errors, 0, "{name}: {s:?}");
        assert_eq!(s.policy_decisions, 0, "{name}: {s:?}");
        assert!(first > 0, "{name}: every decision is Redis's");
        let bound = 5 + (last - first) / 2_000;
        assert!(allowed <= bound, "{name}: {allowed} > {bound}");
        // The ASK state was met, and followed with ASKING on the importing node.
        assert!(
            asking_calls(&cluster.nodes[away]) > asking_before,
            "{name}: no ASKING reached the importing node"
        );
        eprintln!("{name}: {allowed} granted (bound {bound}), {s:?}");
    }
}

/// One primary killed (no replicas) and restarted under a running limiter: keys on the other
/// primaries keep getting Redis's decisions throughout; the restarted node's keys get them
/// again once it serves. What bounds that: the restarted primary answers `CLUSTERDOWN` for
/// its first 2 s (Redis's `CLUSTER_WRITABLE_DELAY`, a constant of the server), then the
/// client's reconnect to it (redis-rs retries 50 ms, doubling to 1 s) and slot refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_primary_leaves_the_others_alone_and_its_keys_come_back() {
    // The killed primary's calls take the whole deadline (the client waits for a reconnect
    // that never comes), so the outage below lasts about 4 deadlines: the other nodes must
    // not declare the cluster down meanwhile (with the usual 5 s node timeout, they did).
    let mut cluster = RedisCluster::start_with_node_timeout(3, Duration::from_secs(30));
    let limiter = RedisRateLimiter::builder(Quota::per_second(1_000_000).unwrap())
        // No stall of a loaded machine reaches it: the calls on the other primaries must be
        // Redis's decisions throughout.
        .deadline(Duration::from_secs(2))
        .connect_cluster(cluster.urls())
        .await
        .unwrap();
    let mut by_node: Vec<Vec<String>> = vec![Vec::new(); 3];
    for i in 0..60 {
        let key = format!("{{u{i}}}");
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(limiter.state_key(&key))
            .query(&mut cluster.nodes[0].conn())
            .unwrap();
        by_node[owner(&cluster, slot)].push(key);
    }
    assert!(by_node.iter().all(|keys| keys.len() >= 3), "{by_node:?}");
    let victim = 1;
    let others: Vec<&String> = [0, 2].iter().flat_map(|&n| &by_node[n]).collect();
    for k in by_node.iter().flatten() {
        assert!(limiter.decide(k).await.unwrap().server_time.is_some());
    }

    cluster.nodes[victim].kill();
    for _ in 0..5 {
        for k in &others {
            let d = limiter.decide(k).await.unwrap();
            assert!(d.server_time.is_some(), "{k} during the outage");
        }
        let e = limiter.decide(&by_node[victim][0]).await.unwrap_err();
        assert!(e.is_unavailable(), "{e}");
    }

    cluster.nodes[victim].restart();
    let restarted = std::time::Instant::now();
    let (mut server_ok, mut back) = (None, None);
    for _ in 0..400 {
        for k in &others {
            let d = limiter.decide(k).await.unwrap();
            assert!(d.server_time.is_some(), "{k} while the primary restarts");
        }
        if server_ok.is_none() {
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut cluster.nodes[victim].conn())
                .unwrap();
            if info.contains("cluster_state:ok") {
                server_ok = Some(restarted.elapsed());
            }
        }
        if matches!(limiter.decide(&by_node[victim][0]).await, Ok(d) if d.server_time.is_some()) {
            back = Some(restarted.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let back = back.expect("the restarted primary's keys never came back");
    for k in &by_node[victim] {
        assert!(limiter.decide(k).await.unwrap().server_time.is_some());
    }
    eprintln!("restarted primary: serving after {server_ok:?}, its keys back after {back:?}");
}
