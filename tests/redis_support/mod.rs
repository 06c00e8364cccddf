//! Throwaway Redis servers and clusters for the `redis_*` tests: real `redis-server`
//! processes on free loopback ports, nothing persisted, killed when dropped.
//!
//! The binaries come from `TOLLGATE_REDIS_SERVER` / `TOLLGATE_REDIS_CLI`, or the `PATH`.
//! Every wait here is bounded.
#![allow(dead_code)] // each test file uses its own part

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const INSTALL_HINT: &str =
    "the Redis tests need a real redis-server (7.0 or later) and redis-cli: \
     install them with `apt-get install -y redis-server` (Debian/Ubuntu), or point \
     TOLLGATE_REDIS_SERVER and TOLLGATE_REDIS_CLI at the binaries";

fn binary(env: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found: {INSTALL_HINT}"))
}

pub fn server_binary() -> PathBuf {
    binary("TOLLGATE_REDIS_SERVER", "redis-server")
}

pub fn cli_binary() -> PathBuf {
    binary("TOLLGATE_REDIS_CLI", "redis-cli")
}

/// A free loopback port whose cluster bus port (+10000) is free too.
fn free_port() -> u16 {
    for _ in 0..100 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = l.local_addr().unwrap().port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port pair found in 100 tries");
}

fn scratch_dir(port: u16) -> PathBuf {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tollgate-redis-{}-{}-{port}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// One `redis-server` on 127.0.0.1, stopped on drop.
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
    dir: PathBuf,
    extra: Vec<String>,
}

impl RedisServer {
    /// A fresh server on a free port.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A fresh server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        for _ in 0..5 {
            let port = free_port();
            let mut s = RedisServer {
                port,
                child: None,
                dir: scratch_dir(port),
                extra: extra.iter().map(|s| s.to_string()).collect(),
            };
            if s.spawn() {
                return s;
            }
        }
        panic!("redis-server did not start in 5 tries");
    }

    /// Starts the process on `self.port`; false if it exited (port taken) or never answered.
    fn spawn(&mut self) -> bool {
        let mut cmd = Command::new(server_binary());
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--enable-debug-command", "local", "--logfile", ""])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot run redis-server: {e}; {INSTALL_HINT}"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return false;
            }
            if self.ping() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    /// Whether our own process answers on the port (not another test's server that won a
    /// race for the same port).
    fn ping(&self) -> bool {
        let Some(pid) = self.child.as_ref().map(Child::id) else {
            return false;
        };
        TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            && self.client().get_connection().is_ok_and(|mut c| {
                redis::cmd("INFO")
                    .arg("server")
                    .query::<String>(&mut c)
                    .is_ok_and(|info| info.contains(&format!("process_id:{pid}\r\n")))
            })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid url")
    }

    /// A plain blocking connection, for inspecting and poking the server.
    pub fn conn(&self) -> redis::Connection {
        self.client()
            .get_connection()
            .expect("connect to the test server")
    }

    /// Holds every script call (every write) for `ms` milliseconds, as a stalled server
    /// would: `CLIENT PAUSE ms WRITE`, in force once this returns (no race with the calls
    /// that follow). `WRITE`, not `ALL`, so that [`unpause`](Self::unpause) is still answered.
    pub fn pause_writes(&self, ms: u64) {
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(ms)
            .arg("WRITE")
            .query(&mut self.conn())
            .expect("CLIENT PAUSE");
    }

    /// Ends a [`pause_writes`](Self::pause_writes) early.
    pub fn unpause(&self) {
        let _: () = redis::cmd("CLIENT")
            .arg("UNPAUSE")
            .query(&mut self.conn())
            .expect("CLIENT UNPAUSE");
    }

    /// One field of `INFO <section>` (`total_connections_received` of `stats`, ...).
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let info: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut self.conn())
            .ok()?;
        let prefix = format!("{field}:");
        info.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|v| v.trim().to_owned())
    }

    /// Kills the server (SIGKILL: no goodbye to clients) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port (empty: nothing was saved).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not restart on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A local Redis Cluster of `n` primaries (no replicas), each its own `redis-server`.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(primaries: usize) -> RedisCluster {
        RedisCluster::start_with_node_timeout(primaries, Duration::from_secs(5))
    }

    /// A cluster whose nodes mark a silent node as failing (and, with no replica for its
    /// slots, the whole cluster as down) after `node_timeout`.
    pub fn start_with_node_timeout(primaries: usize, node_timeout: Duration) -> RedisCluster {
        let timeout_ms = node_timeout.as_millis().to_string();
        let nodes: Vec<RedisServer> = (0..primaries)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    &timeout_ms,
                ])
            })
            .collect();
        let mut create = Command::new(cli_binary());
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port()));
        }
        let out = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run redis-cli: {e}; {INSTALL_HINT}"));
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_ok();
        cluster
    }

    /// Waits (bounded) until every node reports `cluster_state:ok`.
    fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let ok = self.nodes.iter().all(|n| {
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut n.conn())
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            });
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the test cluster did not reach cluster_state:ok within 30 s");
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

/// A two-worker tokio runtime, the tests' usual one (as on a small machine).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A current-thread tokio runtime with I/O and time, for the tests that drive one future at a
/// time from a plain `#[test]` (a property test's cases, each its own runtime).
pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Polls `f` (bounded: `tries` times, `every` apart) until it returns true.
pub async fn eventually(tries: u32, every: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..tries {
        if f().await {
            return true;
        }
        tokio::time::sleep(every).await;
    }
    false
}

/// Whether Redis itself decides `n` of `key` for `l` within `tries` polls 10 ms apart (a call
/// past its deadline, or with Redis away, is its failure policy's: `server_time` is `None`).
/// For a limiter's first calls, which load its script and may outlast a short deadline on a
/// busy machine.
pub async fn redis_decides<A: tollgate::redis::RedisAlgorithm>(
    l: &tollgate::redis::RedisRateLimiter<A>,
    key: &str,
    n: u64,
    tries: u32,
) -> bool {
    eventually(
        tries,
        Duration::from_millis(10),
        async || matches!(l.decide_n(key, n).await, Ok(d) if d.server_time.is_some()),
    )
    .await
}

/// A `redis-server --sentinel` on 127.0.0.1 monitoring one primary (quorum 1, down after
/// 300 ms), stopped on drop. Its configuration file is in its scratch directory (a sentinel
/// rewrites it).
pub struct RedisSentinel {
    port: u16,
    child: Option<Child>,
    dir: PathBuf,
}

impl RedisSentinel {
    pub fn start(primary_name: &str, primary_port: u16) -> RedisSentinel {
        for _ in 0..5 {
            let port = free_port();
            let dir = scratch_dir(port);
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndaemonize no\nlogfile \"\"\ndir {}\n\
                     sentinel monitor {primary_name} 127.0.0.1 {primary_port} 1\n\
                     sentinel down-after-milliseconds {primary_name} 300\n\
                     sentinel failover-timeout {primary_name} 2000\n",
                    dir.display()
                ),
            )
            .expect("write the sentinel's configuration");
            let child = Command::new(server_binary())
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot run redis-server --sentinel: {e}; {INSTALL_HINT}")
                });
            let mut s = RedisSentinel {
                port,
                child: Some(child),
                dir,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Some(Ok(Some(_))) = s.child.as_mut().map(|c| c.try_wait()) {
                    break;
                }
                let pid = s.child.as_ref().map(Child::id).unwrap_or(0);
                let ours = redis::Client::open(s.url())
                    .and_then(|c| c.get_connection())
                    .is_ok_and(|mut c| {
                        redis::cmd("INFO")
                            .arg("server")
                            .query::<String>(&mut c)
                            .is_ok_and(|info| info.contains(&format!("process_id:{pid}\r\n")))
                    });
                if ours {
                    return s;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("redis-server --sentinel did not start in 5 tries");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to the test sentinel")
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `INFO section` of `conn` (empty if it does not answer).
pub fn info(conn: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(conn)
        .unwrap_or_default()
}

/// A primary, its synced replica, and a sentinel naming the primary `primary_name` that knows
/// the replica: ready for a failover.
pub async fn sentinel_pair(primary_name: &str) -> (RedisServer, RedisServer, RedisSentinel) {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let synced = eventually(500, Duration::from_millis(20), async || {
        info(&mut replica.conn(), "replication").contains("master_link_status:up")
    })
    .await;
    assert!(synced, "the replica never synced");
    let sentinel = RedisSentinel::start(primary_name, primary.port());
    let knows_replica = eventually(500, Duration::from_millis(20), async || {
        redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(primary_name)
            .query::<Vec<redis::Value>>(&mut sentinel.conn())
            .is_ok_and(|r| !r.is_empty())
    })
    .await;
    assert!(knows_replica, "the sentinel never saw the replica");
    (primary, replica, sentinel)
}
