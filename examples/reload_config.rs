//! Limits kept in a TOML file and reloaded while the server runs: the file is polled once a
//! second (its modification time; no file-watcher dependency), and each new version is applied
//! to the running layer, or refused with the reason (the layer then keeps the old one).
//!
//! `cargo run --example reload_config --features tower,serde -- limits.toml` watches
//! `limits.toml` until interrupted. Without an argument (or with `--demo`) it writes a
//! temporary file, changes it five times (a typo, a quota, a new route, a route's algorithm, a
//! key cap), shows what each reload did, and exits: a few seconds.

use std::error::Error;
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, SystemTime};

use tollgate::http::{ConfigKey, LayerConfig, RateLimitLayer, ReloadableLayer, Reloader};

const POLL: Duration = Duration::from_secs(1);

const V1: &str = r#"
key = { source = "peer_ip" }
default = { count = 5, per = "minute" }
"#;

/// A misspelt field: refused, so the burst is not silently left at its default.
const TYPO: &str = r#"
key = { source = "peer_ip" }
default = { count = 10, per = "minute", brust = 5 }
"#;

const FASTER: &str = r#"
key = { source = "peer_ip" }
default = { count = 10, per = "minute", burst = 5 }
"#;

/// A new route changes the layer's shape: a new layer, whose default keeps its limiter and keys.
const NEW_ROUTE: &str = r#"
key = { source = "peer_ip" }
default = { count = 10, per = "minute", burst = 5 }
routes = [{ name = "login", pattern = "POST /login", quota = { count = 3, per = "minute" } }]
"#;

/// Another algorithm for a route: a new limiter for it (its keys start afresh), reported.
const SLIDING_LOG: &str = r#"
key = { source = "peer_ip" }
default = { count = 10, per = "minute", burst = 5 }
[[routes]]
name = "login"
pattern = "POST /login"
quota = { count = 3, per = "minute", algorithm = "sliding_log" }
"#;

/// The limiters' own settings belong to the limiters that are kept: refused at run time.
const KEY_CAP: &str = r#"
key = { source = "peer_ip" }
default = { count = 10, per = "minute", burst = 5 }
routes = [{ name = "login", pattern = "POST /login", quota = { count = 3, per = "minute", algorithm = "sliding_log" } }]
limiters = { max_keys = 1000 }
"#;

/// The file's modification time when last read.
struct Watch {
    path: PathBuf,
    seen: Option<SystemTime>,
}

impl Watch {
    fn new(path: &Path) -> Watch {
        Watch {
            path: path.to_owned(),
            seen: None,
        }
    }

    /// The file's text if it changed since the last call.
    fn changed(&mut self) -> Result<Option<String>, Box<dyn Error>> {
        let modified = fs::metadata(&self.path)?.modified()?;
        if self.seen == Some(modified) {
            return Ok(None);
        }
        self.seen = Some(modified);
        Ok(Some(fs::read_to_string(&self.path)?))
    }
}

/// Applies `text` to the layer, printing what changed or why it was refused.
fn apply(reloader: &Reloader, text: &str) {
    let config: LayerConfig = match toml::from_str(text) {
        Ok(c) => c,
        Err(e) => {
            println!("refused (the file does not parse): {}", e.message());
            return;
        }
    };
    match reloader.reload(&config) {
        Ok(changes) if changes.is_empty() => println!("reloaded: nothing changed"),
        Ok(changes) => {
            for c in changes {
                println!("reloaded: {c}");
            }
        }
        Err(e) => println!("refused: {e}"),
    }
}

/// The layer from the file as it is now, and the watch that has read it.
fn start(path: &Path) -> Result<(ReloadableLayer, Reloader, Watch), Box<dyn Error>> {
    let mut watch = Watch::new(path);
    let text = watch.changed()?.unwrap_or_default();
    let (layer, reloader) = RateLimitLayer::reloadable(&toml::from_str(&text)?)?;
    Ok((layer, reloader, watch))
}

fn main() -> Result<(), Box<dyn Error>> {
    match std::env::args().nth(1).as_deref() {
        None | Some("--demo") => demo(),
        Some(path) => {
            let (_layer, reloader, mut watch) = start(Path::new(path))?;
            println!("watching {path} (Ctrl-C to stop)");
            loop {
                sleep(POLL);
                match watch.changed() {
                    Ok(Some(text)) => apply(&reloader, &text),
                    Ok(None) => {}
                    Err(e) => println!("cannot read {path}: {e}"),
                }
            }
        }
    }
}

fn demo() -> Result<(), Box<dyn Error>> {
    let path = std::env::temp_dir().join(format!("tollgate-limits-{}.toml", std::process::id()));
    fs::write(&path, V1)?;
    let result = run_demo(&path);
    let _ = fs::remove_file(&path);
    result
}

fn run_demo(path: &Path) -> Result<(), Box<dyn Error>> {
    let (layer, reloader, mut watch) = start(path)?;
    let limiter = layer
        .current()
        .limiter("default")
        .ok_or("no default policy")?
        .clone();
    let client = ConfigKey::Ip(IpAddr::from([192, 0, 2, 7]));
    let passed = |n| (0..n).filter(|_| limiter.try_acquire(&client)).count();
    println!(
        "{}: 5/minute; a client sends 7: {} pass",
        path.display(),
        passed(7)
    );
    for (what, text) in [
        ("a typo", TYPO),
        ("10/minute in bursts of 5", FASTER),
        ("a new route", NEW_ROUTE),
        ("login's algorithm: a sliding log", SLIDING_LOG),
        ("a key cap", KEY_CAP),
    ] {
        // A later second than the last write, for file systems that keep whole seconds.
        sleep(POLL + Duration::from_millis(100));
        fs::write(path, text)?;
        println!("file changed: {what}");
        // Bounded: the change is seen at the first poll, or the demo fails.
        let text = (0..5)
            .find_map(|_| match watch.changed() {
                Ok(Some(text)) => Some(Ok(text)),
                Ok(None) => {
                    sleep(POLL);
                    None
                }
                Err(e) => Some(Err(e)),
            })
            .ok_or("the change was not seen")??;
        apply(&reloader, &text);
    }
    // The quota changed in place and the new layer kept the default's limiter: the client's
    // debt carried over, so no fresh burst.
    println!(
        "the client that used its burst sends 3 more: {} pass (quota now {}/minute)",
        passed(3),
        limiter.quota().count()
    );
    let now = layer.current();
    let names: Vec<&str> = now.policies().map(|(name, _)| name).collect();
    let kept = now
        .limiter("default")
        .is_some_and(|l| std::sync::Arc::ptr_eq(l, &limiter));
    println!("policies now: {names:?}; the default's limiter kept: {kept}");
    Ok(())
}
